import { Schema } from "effect"

/**
 * Every event on every topic has this envelope. `data` is the entity's state after the
 * change, so a consumer can build its projection from any single event.
 */
export const envelope = <const T extends string, D extends Schema.Schema.Any>(type: T, data: D) =>
  Schema.Struct({
    id: Schema.String.annotations({ description: "Event id, unique; consumers deduplicate on it." }),
    type: Schema.Literal(type),
    version: Schema.Literal(1),
    occurred_at: Schema.String.annotations({ description: "ISO 8601 instant of the change." }),
    account_id: Schema.String,
    data
  })

export const LinkEventData = Schema.Struct({
  id: Schema.String,
  slug: Schema.String,
  destination_url: Schema.String,
  publication_status: Schema.Literal("active", "disabled"),
  utm: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.String })),
  expires_at: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  updated_at: Schema.String
})

export const LinkCreated = envelope("link.created", LinkEventData)
export const LinkUpdated = envelope("link.updated", LinkEventData)
export const LinkDisabled = envelope("link.disabled", LinkEventData)

export const LinkEvent = Schema.Union(LinkCreated, LinkUpdated, LinkDisabled).annotations({
  identifier: "LinkEvent",
  description: "Topic links.v1, keyed by link id."
})
export type LinkEvent = typeof LinkEvent.Type

export const Topics = {
  links: "links.v1",
  images: "images.v1",
  snapshots: "snapshots.v1",
  domains: "domains.v1",
  clicks: "clicks.v1"
} as const
