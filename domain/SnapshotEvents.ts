import { Schema } from "effect"
import { envelope } from "./EventEnvelope.js"
import { CaptureStatus, PublicationStatus } from "./Snapshot.js"

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
