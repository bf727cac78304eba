import { ClickRecorded, ClicksRecorded, ClicksRecordedV2, ClicksRecordedV3 } from "./ClickEvents.js"
import {
  DomainDisabled,
  DomainRegistered,
  DomainUnverified,
  DomainVerificationFailed,
  DomainVerified
} from "./DomainEvents.js"
import { envelope } from "./EventEnvelope.js"
import {
  ImageConversionRetry,
  ImageConverted,
  ImageDeleted,
  ImageFailed,
  ImageRated,
  ImageRatingReviewDecided,
  ImageRatingReviewRequested,
  ImageUploaded
} from "./ImageEvents.js"
import { LinkCreated, LinkDisabled, LinkUpdated } from "./LinkEvents.js"
import { SnapshotEvent } from "./SnapshotEvents.js"

export * from "./ClickEvents.js"
export * from "./ImageEvents.js"
export * from "./LinkEvents.js"
export * from "./SnapshotEvents.js"
/**
 * The catalogue of topics and their events. Each topic's schemas live in their own module
 * (LinkEvents, ImageEvents, SnapshotEvents, DomainEvents, ClickEvents); this module re-exports
 * them for importers that want one place.
 */
export { envelope }

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
    key: "account id (events written before version 3 of `clicks.recorded`: link id)",
    description:
      "Every redirect of a GET request on the short host, batched per account by the redirector. The analytics tables are a projection of it (`cli replay` rebuilds them).",
    events: [ClicksRecordedV3, ClicksRecordedV2, ClicksRecorded, ClickRecorded]
  }
] as const

export const Topics = {
  links: "links.v1",
  images: "images.v1",
  snapshots: "snapshots.v1",
  domains: "domains.v1",
  clicks: "clicks.v1"
} as const
