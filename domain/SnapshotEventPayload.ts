import type { SnapshotEventData } from "./Events.js"
import type { Snapshot } from "./Snapshot.js"

/** A snapshot event's data: a view of the model (no account, host or manifest), appended through SnapshotEventData. */
export const snapshotEventData = (s: Snapshot): typeof SnapshotEventData.Type => ({
  id: s.id,
  url: s.url,
  capture_status: s.captureStatus,
  publication_status: s.publicationStatus,
  final_url: s.finalUrl,
  http_status: s.httpStatus,
  sha256: s.sha256,
  resources: { count: s.resourceCount, bytes: s.resourceBytes },
  failure: s.failure,
  created_at: s.createdAt.toISOString(),
  captured_at: s.capturedAt?.toISOString() ?? null
})
