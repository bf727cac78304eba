import { Schema } from "effect"
import { envelope } from "./EventEnvelope.js"

/** Made from the model (domain/Link.ts) by LinkEventPayload (domain/LinkEventPayload.ts). */
export const LinkEventData = Schema.Struct({
  id: Schema.String.annotations({ description: "Link id (link_…); also the message key." }),
  slug: Schema.String,
  destination_url: Schema.String,
  publication_status: Schema.Literal("active", "disabled"),
  utm: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.String })).annotations({
    description: "UTM parameters the redirect adds (utm_source, utm_medium, …), or null."
  }),
  expires_at: Schema.NullOr(Schema.String).annotations({
    description: "ISO instant after which the link answers 404."
  }),
  created_at: Schema.String,
  updated_at: Schema.String
}).annotations({ identifier: "LinkState", description: "The link's whole state after the change." })

export const LinkCreated = envelope("link.created", LinkEventData).annotations({
  description: "A link was created (POST /links)."
})
export const LinkUpdated = envelope("link.updated", LinkEventData).annotations({
  description: "A link's destination or options changed (PATCH /links/{id}, PATCH /links/{id}/options)."
})
export const LinkDisabled = envelope("link.disabled", LinkEventData).annotations({
  description: "A link was disabled (DELETE /links/{id}); it answers 404 on the short host from then on."
})

export const LinkEvent = Schema.Union(LinkCreated, LinkUpdated, LinkDisabled).annotations({
  identifier: "LinkEvent",
  description: "Topic links.v1, keyed by link id."
})
export type LinkEvent = typeof LinkEvent.Type
