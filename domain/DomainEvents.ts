import { Schema } from "effect"
import type { Domain } from "./Domain.js"
import { envelope } from "./EventEnvelope.js"

/** A custom domain's state after a change: made from the model by `domainEventData`. */
export const DomainEventData = Schema.Struct({
  id: Schema.String.annotations({ description: "Domain id (dom_…); also the message key." }),
  hostname: Schema.String.annotations({ description: "Lower case, international names in xn-- form." }),
  state: Schema.Literal("pending", "verified", "disabled"),
  last_error: Schema.NullOr(Schema.String).annotations({
    description:
      'What the last failed check found ("no TXT record", "TXT present but value differs", "timeout"), or null.'
  }),
  last_checked_at: Schema.NullOr(Schema.String),
  verified_at: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  updated_at: Schema.String.annotations({ description: "Orders the domain's versions." })
}).annotations({
  identifier: "DomainState",
  description: "The domain's whole state after the change (the proof token is not in events)."
})
export type DomainEventData = typeof DomainEventData.Type

const iso = (d: Date | null) => d?.toISOString() ?? null

/** A domain event's data: the model without its owner (the envelope's account_id) and its token. */
export const domainEventData = (d: Domain): DomainEventData => ({
  id: d.id,
  hostname: d.hostname,
  state: d.state,
  last_error: d.lastError,
  last_checked_at: iso(d.lastCheckedAt),
  verified_at: iso(d.verifiedAt),
  created_at: d.createdAt.toISOString(),
  updated_at: d.updatedAt.toISOString()
})

export const DomainRegistered = envelope("domain.registered", DomainEventData).annotations({
  description: "A custom domain was registered (POST /domains), pending until its DNS TXT proof is found."
})
export const DomainVerified = envelope("domain.verified", DomainEventData).annotations({
  description:
    "The proof was found (POST /domains/{id}/verify): the host serves the account's active links from now on."
})
export const DomainVerificationFailed = envelope("domain.verification_failed", DomainEventData).annotations({
  description: "A verify call did not find the proof; the domain stays pending, `last_error` says what was found."
})
export const DomainUnverified = envelope("domain.unverified", DomainEventData).annotations({
  description:
    "Re-verification: the proof of a verified domain was missing longer than the grace period; it is pending again and its host stops serving."
})
export const DomainDisabled = envelope("domain.disabled", DomainEventData).annotations({
  description: "The owner disabled the domain (POST /domains/{id}/disable): its host stops serving, for good."
})

export const DomainEvent = Schema.Union(
  DomainRegistered,
  DomainVerified,
  DomainVerificationFailed,
  DomainUnverified,
  DomainDisabled
).annotations({ identifier: "DomainEvent", description: "Topic domains.v1, keyed by domain id." })
export type DomainEvent = typeof DomainEvent.Type
