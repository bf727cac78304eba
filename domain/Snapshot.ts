import { Schema } from "effect"
import { AccountId } from "./Account.js"

/**
 * Snapshots: immutable captures of public web pages (DESIGN.md "Snapshots"). Pure: ids,
 * states and their transitions, the manifest of a capture and its budget.
 */

export const SNAPSHOT_ID_PATTERN = /^snap_[0-9A-Za-z]{1,64}$/
/** `snap_` and 22 base62 characters when new; anything else names no snapshot and never reaches SQL. */
export const SnapshotId = Schema.String.pipe(Schema.pattern(SNAPSHOT_ID_PATTERN), Schema.brand("SnapshotId"))
export type SnapshotId = typeof SnapshotId.Type
export const isSnapshotId = (s: string): s is SnapshotId => SNAPSHOT_ID_PATTERN.test(s)

export const CaptureStatus = Schema.Literal("queued", "capturing", "captured", "failed").annotations({
  description:
    "`queued` on creation, `capturing` while a worker fetches the page and its resources, then `captured`, or `failed` for good (`failure` says why)."
})
export type CaptureStatus = typeof CaptureStatus.Type

export const PublicationStatus = Schema.Literal("unpublished", "published", "withdrawn").annotations({
  description:
    "`unpublished` until the capture succeeds, then `published` (readable by anyone at snapshot_url); `withdrawn` by an operator (no longer served)."
})
export type PublicationStatus = typeof PublicationStatus.Type

/**
 * The capture state machine: queued -> capturing -> captured | failed; a temporary failure
 * or a lost lease puts a capturing snapshot back to queued. captured and failed are final.
 */
const CAPTURE_NEXT: Readonly<Record<CaptureStatus, ReadonlyArray<CaptureStatus>>> = {
  queued: ["capturing", "failed"],
  capturing: ["queued", "captured", "failed"],
  captured: [],
  failed: []
}
export const canCapture = (from: CaptureStatus, to: CaptureStatus): boolean => CAPTURE_NEXT[from].includes(to)

/**
 * The publication state machine: unpublished -> published once captured; published or
 * unpublished -> withdrawn by an operator; withdrawn is final.
 */
const PUBLICATION_NEXT: Readonly<Record<PublicationStatus, ReadonlyArray<PublicationStatus>>> = {
  unpublished: ["published", "withdrawn"],
  published: ["withdrawn"],
  withdrawn: []
}
export const canPublish = (from: PublicationStatus, to: PublicationStatus): boolean =>
  PUBLICATION_NEXT[from].includes(to)

/** Whether the snapshot host may serve it. */
export const isServed = (s: { readonly captureStatus: CaptureStatus; readonly publicationStatus: PublicationStatus }) =>
  s.captureStatus === "captured" && s.publicationStatus === "published"

/** One stored response of a capture: the page or a sub-resource. */
export const ManifestEntry = Schema.Struct({
  /** The URL as referenced (the page: as requested). */
  url: Schema.String,
  /** After redirects. */
  finalUrl: Schema.String,
  status: Schema.Number,
  contentType: Schema.String,
  /** The bytes as fetched, content-addressed in the blob store (snapshotBlobKey). */
  sha256: Schema.String,
  bytes: Schema.Number,
  /** What the snapshot host serves: the rewritten HTML or CSS, or the same bytes. */
  servedSha256: Schema.String,
  /** A few response headers worth keeping for the WARC (lower-case names). */
  headers: Schema.Record({ key: Schema.String, value: Schema.String })
})
export type ManifestEntry = typeof ManifestEntry.Type

/** What a capture stored: immutable once the snapshot is captured. */
export const Manifest = Schema.Struct({
  page: ManifestEntry,
  resources: Schema.Array(ManifestEntry),
  /** References not stored (budget, fetch failure, refused address), with the reason. */
  skipped: Schema.Array(Schema.Struct({ url: Schema.String, reason: Schema.String })),
  capturedAt: Schema.String
})
export type Manifest = typeof Manifest.Type

/** A snapshot: the one model; the API record, the rows and the event payload derive from it. */
export class Snapshot extends Schema.Class<Snapshot>("Snapshot")({
  id: SnapshotId,
  accountId: AccountId,
  url: Schema.String,
  /** The lower-case host of `url`: the key of the per-host concurrency limit. */
  host: Schema.String,
  captureStatus: CaptureStatus,
  publicationStatus: PublicationStatus,
  finalUrl: Schema.NullOr(Schema.String),
  httpStatus: Schema.NullOr(Schema.Number),
  title: Schema.NullOr(Schema.String),
  contentType: Schema.NullOr(Schema.String),
  bytes: Schema.NullOr(Schema.Number),
  sha256: Schema.NullOr(Schema.String),
  resourceCount: Schema.Number,
  resourceBytes: Schema.Number,
  failure: Schema.NullOr(Schema.String),
  unmetered: Schema.Boolean,
  createdAt: Schema.DateFromSelf,
  capturedAt: Schema.NullOr(Schema.DateFromSelf)
}) {}

/** A snapshot with its keyset position (`seq`), where paging needs it. */
export class SnapshotRecord extends Snapshot.extend<SnapshotRecord>("SnapshotRecord")({
  seq: Schema.BigIntFromSelf
}) {}

export interface SnapshotBudget {
  readonly maxPageBytes: number
  readonly maxResources: number
  readonly maxResourceBytes: number
  readonly pageTimeoutMs: number
  readonly resourceTimeoutMs: number
  readonly maxRedirects: number
  readonly maxCssDepth: number
  readonly concurrency: number
}

/** The capture budget (documented in README): what one snapshot may fetch and store. */
export const SNAPSHOT_BUDGET: SnapshotBudget = {
  /** The page itself. */
  maxPageBytes: 10 * 1024 * 1024,
  /** Sub-resources stored, at most. */
  maxResources: 100,
  /** Their bytes together. */
  maxResourceBytes: 25 * 1024 * 1024,
  /** Bound on each fetch (every hop and retry included). */
  pageTimeoutMs: 30_000,
  resourceTimeoutMs: 10_000,
  /** Redirects followed per fetch. */
  maxRedirects: 5,
  /** Nesting of stylesheets (@import) followed. */
  maxCssDepth: 4,
  /** Fetches of one capture at once. */
  concurrency: 6
}

/** Where a stored response lives in the blob store: by its SHA-256, so identical bytes are stored once. */
export const snapshotBlobKey = (sha256: string): string => `snapshots/sha256/${sha256.slice(0, 2)}/${sha256}`

/** The lower-case host of a URL (no trailing dot): the per-host limit's key. */
export const snapshotHostOf = (url: string): string => new URL(url).hostname.toLowerCase().replace(/\.+$/, "")

/** The path under the snapshot host of a snapshot's page, and of its resources (relative to it). */
export const snapshotPagePath = (id: string): string => `/${id}/`
export const snapshotResourceName = (sha256: string): string => `r/${sha256}`
