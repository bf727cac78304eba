import { Schema } from "effect"
import {
  DomainDisabled,
  DomainRegistered,
  DomainUnverified,
  DomainVerificationFailed,
  DomainVerified
} from "./DomainEvents.js"
import { envelope } from "./EventEnvelope.js"
import { DeclaredRating, ImageStatus, Rating, RatingSource } from "./Image.js"
import { CaptureStatus, PublicationStatus } from "./Snapshot.js"

export { envelope }

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

export const ImageEventData = Schema.Struct({
  id: Schema.String.annotations({ description: "Image id; also the message key." }),
  status: ImageStatus,
  content_rating: Schema.NullOr(Rating).annotations({
    description: "The effective rating; null while processing."
  }),
  rating_source: Schema.NullOr(RatingSource),
  mime_type: Schema.NullOr(Schema.String).annotations({
    description: "Media type of the published bytes; null until ready."
  }),
  ext: Schema.NullOr(Schema.String).annotations({
    description: "File extension of the delivery URL ({image_host}/{id}.{ext}); null until ready."
  }),
  width: Schema.NullOr(Schema.Number),
  height: Schema.NullOr(Schema.Number),
  bytes: Schema.NullOr(Schema.Number).annotations({ description: "Size of the published bytes." }),
  animated: Schema.NullOr(Schema.Boolean),
  unmetered: Schema.Boolean.annotations({ description: "Uploaded with an Unmetered Partner Key." }),
  failure: Schema.NullOr(Schema.String).annotations({ description: "Why the conversion failed for good." }),
  deleted: Schema.Boolean,
  created_at: Schema.String,
  updated_at: Schema.String
}).annotations({ identifier: "ImageState", description: "The image's whole state after the change." })

export const RatingChange = Schema.Struct({
  from: Schema.NullOr(Rating),
  to: Rating,
  source: RatingSource,
  actor: Schema.String.annotations({
    description: "Who: the API key id for an owner, `classifier:<name>`, or `operator` for a review decision."
  })
}).annotations({ identifier: "RatingChange" })

export const ImageUploaded = envelope("image.uploaded", ImageEventData).annotations({
  description:
    "An image was accepted for normalization (POST /images, POST /images/url); the conversion worker consumes it."
})
export const ImageConversionRetry = envelope("image.conversion_retry", ImageEventData).annotations({
  description: "A conversion failed temporarily; it is retried under a durable lease with the fast encoding tier."
})
export const ImageConverted = envelope("image.converted", ImageEventData).annotations({
  description: "The conversion finished: the image is published (status ready); the classifier consumes it."
})
export const ImageFailed = envelope("image.failed", ImageEventData).annotations({
  description: "The conversion failed for good (status failed, `failure` says why)."
})
export const ImageRated = envelope(
  "image.rated",
  Schema.extend(ImageEventData, Schema.Struct({ change: RatingChange }))
).annotations({
  description:
    "The effective rating changed (classifier, owner declaration, operator decision): the audit trail of every rating change."
})
export const ImageRatingReviewRequested = envelope(
  "image.rating_review_requested",
  Schema.extend(ImageEventData, Schema.Struct({ requested: DeclaredRating }))
).annotations({
  description: "The owner asked for a less strict rating; it waits for operator review, the effective rating unchanged."
})
export const ImageRatingReviewDecided = envelope(
  "image.rating_review_decided",
  Schema.extend(
    ImageEventData,
    Schema.Struct({
      requested: DeclaredRating,
      decision: Schema.Literal("approved", "rejected")
    })
  )
).annotations({ description: "An operator approved or rejected a rating reduction (`cli reviews approve|reject`)." })
export const ImageDeleted = envelope("image.deleted", ImageEventData).annotations({
  description: "The image was deleted (DELETE /images/{id}): its delivery URL answers 404 from then on."
})

export const ImageEvent = Schema.Union(
  ImageUploaded,
  ImageConversionRetry,
  ImageConverted,
  ImageFailed,
  ImageRated,
  ImageRatingReviewRequested,
  ImageRatingReviewDecided,
  ImageDeleted
).annotations({ identifier: "ImageEvent", description: "Topic images.v1, keyed by image id." })
export type ImageEvent = typeof ImageEvent.Type

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

/** The most clicks one clicks.recorded event may carry (the redirector sends at most 4000). */
export const MAX_CLICKS_PER_EVENT = 10_000

/** One click inside a clicks.recorded batch: the fields of a click without the link id. */
export const BatchedClick = Schema.Struct({
  at: Schema.Number.pipe(Schema.int(), Schema.nonNegative()).annotations({
    description: "Time of the click, milliseconds since the epoch (UTC)."
  }),
  country: ClickEventData.fields.country,
  referrer_host: ClickEventData.fields.referrer_host,
  device: ClickEventData.fields.device,
  browser: ClickEventData.fields.browser,
  bot: ClickEventData.fields.bot,
  visitor: ClickEventData.fields.visitor
}).annotations({
  identifier: "BatchedClick",
  description: "One redirect of a GET request. No IP address and no user agent are recorded."
})
export type BatchedClick = typeof BatchedClick.Type

export const ClicksEventData = Schema.Struct({
  link_id: Schema.String.annotations({ description: "The link followed; also the message key." }),
  clicks: Schema.Array(BatchedClick)
    .pipe(Schema.minItems(1), Schema.maxItems(MAX_CLICKS_PER_EVENT))
    .annotations({
      description: `The link's clicks of one flush of one redirector, in the order they happened; 1 to ${MAX_CLICKS_PER_EVENT}.`
    })
}).annotations({ identifier: "LinkClicks", description: "Clicks on one link." })

export const ClicksRecorded = envelope("clicks.recorded", ClicksEventData).annotations({
  description:
    "Version 1, no longer written: the clicks of one link as one object each. Consumers still read it (the topic may hold it). `occurred_at` is when the batch was made, each click has its own `at`; `account_id` is the link's owner."
})
export type ClicksRecorded = typeof ClicksRecorded.Type

/** One visitor of a clicks.recorded (version 2) event: what its clicks share. */
export const ClickVisitor = Schema.Struct({
  visitor: ClickEventData.fields.visitor,
  device: ClickEventData.fields.device,
  browser: ClickEventData.fields.browser,
  bot: ClickEventData.fields.bot
}).annotations({
  identifier: "ClickVisitor",
  description: "One user agent at one address on one UTC day, as its hash and classes: no address, no user agent."
})
export type ClickVisitor = typeof ClickVisitor.Type

const clickIndexes = (of: string) =>
  Schema.Array(Schema.Number.pipe(Schema.int(), Schema.nonNegative())).annotations({
    description: `Per click, in order: the index of its value in \`${of}\`.`
  })

/**
 * Why a clicks.recorded (version 2) payload is inconsistent, or undefined when it is not:
 * every column has one entry per click (1 to MAX_CLICKS_PER_EVENT), every index points
 * into its list, and the times stay safe integers.
 */
export const clickColumnsProblem = (d: {
  readonly at: ReadonlyArray<number>
  readonly country: ReadonlyArray<number>
  readonly referrer: ReadonlyArray<number>
  readonly visitor: ReadonlyArray<number>
  readonly countries: ReadonlyArray<unknown>
  readonly referrer_hosts: ReadonlyArray<unknown>
  readonly visitors: ReadonlyArray<unknown>
}): string | undefined => {
  const n = d.at.length
  if (n < 1 || n > MAX_CLICKS_PER_EVENT) return `at: 1 to ${MAX_CLICKS_PER_EVENT} clicks`
  if (d.country.length !== n || d.referrer.length !== n || d.visitor.length !== n) {
    return "at, country, referrer and visitor must have one entry per click"
  }
  let at = 0
  for (let i = 0; i < n; i++) {
    at += d.at[i]!
    if (!Number.isSafeInteger(at)) return "at: the times must be safe integers"
    if (d.country[i]! >= d.countries.length) return "country: an index past the end of countries"
    if (d.referrer[i]! >= d.referrer_hosts.length) return "referrer: an index past the end of referrer_hosts"
    if (d.visitor[i]! >= d.visitors.length) return "visitor: an index past the end of visitors"
  }
  return undefined
}

export const ClickColumnsData = Schema.Struct({
  link_id: Schema.String.annotations({ description: "The link followed; also the message key." }),
  countries: Schema.Array(ClickEventData.fields.country).annotations({
    description: "The distinct countries of the clicks (ISO 3166-1 alpha-2, or null when unknown)."
  }),
  referrer_hosts: Schema.Array(ClickEventData.fields.referrer_host).annotations({
    description: "The distinct referrer hosts of the clicks (null for a direct visit)."
  }),
  visitors: Schema.Array(ClickVisitor).annotations({ description: "The distinct visitors of the clicks." }),
  at: Schema.Array(Schema.Number.pipe(Schema.int())).annotations({
    description: `Per click, in the order they happened (1 to ${MAX_CLICKS_PER_EVENT} clicks): its time, the first in milliseconds since the epoch (UTC), each next one in milliseconds after the click before it (negative only if the clock went back).`
  }),
  country: clickIndexes("countries"),
  referrer: clickIndexes("referrer_hosts"),
  visitor: clickIndexes("visitors")
})
  .pipe(Schema.filter((d) => clickColumnsProblem(d) ?? true))
  .annotations({
    identifier: "LinkClickColumns",
    description:
      "Clicks on one link, column by column: one entry per click in `at`, `country`, `referrer` and `visitor`."
  })
export type ClickColumnsData = typeof ClickColumnsData.Type

export const ClicksRecordedV2 = envelope("clicks.recorded", ClickColumnsData, 2).annotations({
  description:
    "Browsers followed a short link (GET; HEAD is not a click): the redirector publishes one event per link per flush (every 100 ms, or sooner under load), its clicks column by column. Click i happened at the sum of `at[0..i]`, from `countries[country[i]]`, with referrer host `referrer_hosts[referrer[i]]`, by `visitors[visitor[i]]`. `occurred_at` is when the batch was made; `account_id` is the link's owner. What repeats is written once: an event is about a tenth of version 1's size."
})
export type ClicksRecordedV2 = typeof ClicksRecordedV2.Type

/** The clicks of a clicks.recorded event of either version, one object each, in order. */
export const batchedClicks = (data: ClickColumnsData | typeof ClicksEventData.Type): ReadonlyArray<BatchedClick> => {
  if ("clicks" in data) return data.clicks
  const clicks: Array<BatchedClick> = []
  let at = 0
  for (let i = 0; i < data.at.length; i++) {
    at += data.at[i]!
    const v = data.visitors[data.visitor[i]!]!
    clicks.push({
      at,
      country: data.countries[data.country[i]!]!,
      referrer_host: data.referrer_hosts[data.referrer[i]!]!,
      device: v.device,
      browser: v.browser,
      bot: v.bot,
      visitor: v.visitor
    })
  }
  return clicks
}

export const ClickRecorded = envelope("click.recorded", ClickEventData).annotations({
  description:
    "Legacy, no longer written: one click per event, as redirectors before `clicks.recorded` published it. Consumers still read it (the topic may hold it). `occurred_at` is the time of the click; `account_id` the link's owner."
})
export type ClickRecorded = typeof ClickRecorded.Type

/** Topic clicks.v1, keyed by link id. */
export const ClickEvent = Schema.Union(ClicksRecordedV2, ClicksRecorded, ClickRecorded).annotations({
  identifier: "ClickEvent",
  description: "Topic clicks.v1, keyed by link id."
})
export type ClickEvent = typeof ClickEvent.Type

/** Made from the model (domain/Snapshot.ts) by `snapshotEventData` (domain/SnapshotEventPayload.ts). */
export const SnapshotEventData = Schema.Struct({
  id: Schema.String.annotations({ description: "Snapshot id (snap_…); also the message key." }),
  url: Schema.String,
  capture_status: CaptureStatus,
  publication_status: PublicationStatus,
  final_url: Schema.NullOr(Schema.String),
  http_status: Schema.NullOr(Schema.Number),
  sha256: Schema.NullOr(Schema.String).annotations({ description: "SHA-256 of the page as fetched." }),
  resources: Schema.Struct({ count: Schema.Number, bytes: Schema.Number }),
  failure: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  captured_at: Schema.NullOr(Schema.String)
}).annotations({ identifier: "SnapshotState", description: "The snapshot's state after the change." })

const snapshotEvent = <const T extends `snapshot.${string}`>(type: T, description: string) =>
  envelope(type, SnapshotEventData).annotations({ description })
export const SnapshotRequested = snapshotEvent("snapshot.requested", "A snapshot was requested (POST /snapshots).")
export const SnapshotCaptureStarted = snapshotEvent(
  "snapshot.capture_started",
  "A capture worker took the snapshot under a lease and started fetching (again after a retry or a restart)."
)
export const SnapshotCaptured = snapshotEvent(
  "snapshot.captured",
  "The page and its resources are stored; the manifest is immutable from now on."
)
export const SnapshotFailed = snapshotEvent("snapshot.failed", "The capture failed for good; `failure` says why.")
export const SnapshotPublished = snapshotEvent("snapshot.published", "The snapshot is served at its snapshot_url.")
export const SnapshotWithdrawn = snapshotEvent(
  "snapshot.withdrawn",
  "An operator withdrew the snapshot (`cli snapshots withdraw`): the snapshot host answers 404 from now on."
)
export const SnapshotEvent = Schema.Union(
  SnapshotRequested,
  SnapshotCaptureStarted,
  SnapshotCaptured,
  SnapshotFailed,
  SnapshotPublished,
  SnapshotWithdrawn
).annotations({ identifier: "SnapshotEvent", description: "Topic snapshots.v1, keyed by snapshot id." })
export type SnapshotEventType = (typeof SnapshotEvent.Type)["type"]

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
    topic: "images.v1",
    key: "image id",
    description:
      "Every change of a Hosted Image, in order per image: upload, conversion, rating (the audit trail), review, deletion. The conversion worker and the classifier consume it.",
    events: [
      ImageUploaded,
      ImageConversionRetry,
      ImageConverted,
      ImageFailed,
      ImageRated,
      ImageRatingReviewRequested,
      ImageRatingReviewDecided,
      ImageDeleted
    ]
  },
  {
    topic: "snapshots.v1",
    key: "snapshot id",
    description:
      "Every change of a Snapshot, in order per snapshot: request, capture (start, end or failure), publication and withdrawal.",
    events: SnapshotEvent.members
  },
  {
    topic: "domains.v1",
    key: "domain id",
    description:
      "Every change of a custom domain, in order per domain: registration, verification (and its failures), re-verification taking it back to pending, disabling. The redirector's table of verified hosts is a projection of it.",
    events: [DomainRegistered, DomainVerified, DomainVerificationFailed, DomainUnverified, DomainDisabled]
  },
  {
    topic: "clicks.v1",
    key: "link id",
    description:
      "Every redirect of a GET request on the short host, batched per link by the redirector. The analytics tables are a projection of it (`cli replay` rebuilds them).",
    events: [ClicksRecordedV2, ClicksRecorded, ClickRecorded]
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
