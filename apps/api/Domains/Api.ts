import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { type Domain as DomainModel, recordName } from "../../../domain/Domain.js"
import * as E from "../Errors.js"
import { Authentication } from "../middleware/Authentication.js"
import { IdempotencyKey, OutboundFetch } from "../middleware/Idempotency.js"
import { JsonBody } from "../middleware/JsonBody.js"
import { RequiredScope } from "../middleware/Scopes.js"
import { Cursor, Envelope, IdPath, Limit, optional, Page } from "../Shared.js"

const DateTime = Schema.String.annotations({ jsonSchema: { type: "string", format: "date-time" } })
const NullableDateTime = Schema.NullOr(Schema.String).annotations({
  jsonSchema: { type: ["string", "null"], format: "date-time" }
})

export const DomainVerification = Schema.Struct({
  method: Schema.Literal("dns_txt"),
  record_name: Schema.String.annotations({
    description: "The DNS name to publish a TXT record at: `_shortlinks-challenge.<hostname>`."
  }),
  record_value: Schema.String.annotations({
    description:
      "The TXT record's value: a random token bound to this registration (a new registration of the same hostname gets a new one)."
  })
}).annotations({ identifier: "DomainVerification" })

/** The API record of a custom domain. */
export const Domain = Schema.Struct({
  id: Schema.String.annotations({ description: "Domain identifier; begins with dom_." }),
  hostname: Schema.String.annotations({
    description: "Lower case; an international name in its xn-- (punycode) form."
  }),
  state: Schema.Literal("pending", "verified", "disabled").annotations({
    description:
      "`pending`: registered, the proof not (or no longer) found; `verified`: the host serves the account's active links; `disabled`: given up for good (register the hostname again to use it)."
  }),
  verification: DomainVerification,
  last_error: Schema.NullOr(Schema.String).annotations({
    description:
      'What the last failed check found: "no TXT record", "TXT present but value differs", "timeout" (or "DNS lookup failed: <code>"); null after a successful check.'
  }),
  last_checked_at: NullableDateTime,
  verified_at: NullableDateTime,
  created_at: DateTime,
  updated_at: DateTime
}).annotations({ identifier: "Domain" })
export type Domain = typeof Domain.Type

export const toApiDomain = (d: DomainModel): Domain => ({
  id: d.id,
  hostname: d.hostname,
  state: d.state,
  verification: { method: "dns_txt", record_name: recordName(d.hostname), record_value: d.token },
  last_error: d.lastError,
  last_checked_at: d.lastCheckedAt?.toISOString() ?? null,
  verified_at: d.verifiedAt?.toISOString() ?? null,
  created_at: d.createdAt.toISOString(),
  updated_at: d.updatedAt.toISOString()
})

export const CreateDomain = Schema.Struct({
  hostname: Schema.String.pipe(
    Schema.maxLength(1024, { message: () => "must be at most 1024 characters" })
  ).annotations({
    description:
      "The host to serve the account's links on, e.g. go.example.org. International names are converted to punycode and the name to lower case; refused (400, `detail` naming the rule): an IP address, a port, a wildcard, a trailing dot, fewer than two labels, labels over 63 or names over 253 characters (RFC 1035), other characters, and this service's own hosts or their subdomains.",
    jsonSchema: { type: "string", maxLength: 1024 }
  })
}).annotations({ identifier: "CreateDomain", parseOptions: { onExcessProperty: "error", errors: "all" } })

export const ListDomainsParams = Schema.Struct({
  cursor: optional(Cursor),
  limit: optional(Limit)
})

const scope = RequiredScope

export class DomainsApi extends HttpApiGroup.make("domains")
  .add(
    HttpApiEndpoint.post("register", "/domains")
      .setPayload(CreateDomain)
      .addSuccess(Envelope(Domain), { status: 201 })
      .addError(E.DomainTaken)
      .addError(E.QuotaExceeded)
      .annotate(scope, "domains:write")
      .annotate(
        OpenApi.Summary,
        "Register a custom domain: pending until the TXT record of `verification` is published and verified"
      )
      .middleware(JsonBody)
      .middleware(IdempotencyKey)
  )
  .add(
    HttpApiEndpoint.get("list", "/domains")
      .setUrlParams(ListDomainsParams)
      .addSuccess(Page(Domain))
      .addError(E.InvalidRequest)
      .annotate(scope, "domains:read")
      .annotate(OpenApi.Summary, "List custom domains, newest first (disabled ones too)")
  )
  .add(
    HttpApiEndpoint.get("get", "/domains/:id")
      .setPath(IdPath)
      .addSuccess(Envelope(Domain))
      .addError(E.NotFound)
      .annotate(scope, "domains:read")
      .annotate(OpenApi.Summary, "Read a custom domain and its verification state")
  )
  .add(
    HttpApiEndpoint.post("verify", "/domains/:id/verify")
      .setPath(IdPath)
      .addSuccess(Envelope(Domain))
      .addError(E.NotFound)
      .addError(E.DomainDisabled)
      .annotate(scope, "domains:write")
      // A DNS lookup (up to DNS_TIMEOUT_MS) inside the transaction: bounded per process like URL imports.
      .annotate(OutboundFetch, true)
      .annotate(
        OpenApi.Summary,
        "Look the TXT proof up in DNS now: 200 with state `verified`, or still `pending` with `last_error`"
      )
      .middleware(IdempotencyKey)
  )
  .add(
    HttpApiEndpoint.post("disable", "/domains/:id/disable")
      .setPath(IdPath)
      .addSuccess(Envelope(Domain))
      .addError(E.NotFound)
      .annotate(scope, "domains:write")
      .annotate(OpenApi.Summary, "Disable a custom domain: its host stops serving within a second, for good")
      .middleware(IdempotencyKey)
  )
  .middlewareEndpoints(Authentication) {}
