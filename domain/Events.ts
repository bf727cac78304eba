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

export const ClickEventData = Schema.Struct({
  link_id: Schema.String.annotations({ description: "The link followed; also the message key." }),
  country: Schema.NullOr(Schema.String).annotations({
    description: "ISO 3166-1 alpha-2 code from the trusted proxy header, or null when unknown."
  }),
  referrer_host: Schema.NullOr(Schema.String).annotations({
    description: "Host name of the Referer (no path, no query), or null for a direct visit."
  }),
  device: Schema.Literal("desktop", "mobile", "tablet", "other"),
  browser: Schema.String.annotations({ description: "Browser family (Chrome, Safari, Firefox, …) or `other`." }),
  bot: Schema.Boolean.annotations({
    description: "A crawler or link-preview fetcher: counted apart, never in the totals."
  }),
  visitor: Schema.String.annotations({
    description:
      "16 hex digits: a keyed hash of the visitor under a secret that rotates daily and is never stored with the data; it counts unique visitors within a day and cannot be linked across days or back to a person."
  })
}).annotations({
  identifier: "Click",
  description: "One redirect of a GET request. No IP address and no user agent are recorded."
})

export const ClickRecorded = envelope("click.recorded", ClickEventData).annotations({
  description:
    "A browser followed a short link (GET; HEAD is not a click). `occurred_at` is the time of the click; `account_id` the link's owner."
})
export type ClickRecorded = typeof ClickRecorded.Type

/** Every topic with its events, in the order the catalogue lists them. */
export const Catalogue = [
  {
    topic: "links.v1",
    key: "link id",
    description:
      "Every change of a Short Link, in order per link. The redirector's slug table and any link read model are projections of it.",
    events: [LinkCreated, LinkUpdated, LinkDisabled]
  },
  {
    topic: "clicks.v1",
    key: "link id",
    description:
      "Every redirect of a GET request on the short host, batched by the redirector. The analytics tables are a projection of it (`cli replay` rebuilds them).",
    events: [ClickRecorded]
  }
] as const

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
