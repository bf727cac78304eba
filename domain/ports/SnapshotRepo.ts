import { Context, type Effect, type Option } from "effect"
import type { AccountId } from "../Account.js"
import type { Manifest, Snapshot, SnapshotId, SnapshotRecord } from "../Snapshot.js"

/** Notification channel of new capture jobs; the payload is the snapshot id. */
export const SNAPSHOT_JOBS_CHANNEL = "snapshot_jobs"

export interface NewSnapshot {
  readonly id: SnapshotId
  readonly accountId: AccountId
  readonly url: string
  readonly host: string
  readonly unmetered: boolean
}

/** What a finished capture tells about the page. */
export interface CaptureResult {
  readonly finalUrl: string
  readonly httpStatus: number
  readonly title: string | null
  readonly contentType: string
  readonly bytes: number
  readonly sha256: string
  readonly resourceCount: number
  readonly resourceBytes: number
  readonly manifest: Manifest
}

export interface SnapshotRepoShape {
  /** A queued snapshot, its capture job (announced on SNAPSHOT_JOBS_CHANNEL at commit) and snapshot.requested. */
  readonly insert: (snapshot: NewSnapshot) => Effect.Effect<Snapshot>
  readonly find: (accountId: AccountId, id: SnapshotId) => Effect.Effect<Option.Option<Snapshot>>
  readonly byId: (id: SnapshotId) => Effect.Effect<Option.Option<Snapshot>>
  /** The account's snapshots, newest first, keyset-paged on seq. */
  readonly search: (
    accountId: AccountId,
    search: { readonly afterSeq?: bigint | undefined; readonly limit: number }
  ) => Effect.Effect<ReadonlyArray<SnapshotRecord>>
  /** The account's snapshots of this host still queued or capturing; holds the account+host lock until the transaction ends. */
  readonly inProgressForHost: (accountId: AccountId, host: string) => Effect.Effect<number>
  /** The stored manifest of a captured snapshot. */
  readonly manifest: (id: SnapshotId) => Effect.Effect<Option.Option<Manifest>>
  /** Withdraws it (snapshot.withdrawn); None when there is no such snapshot. Twice changes nothing. */
  readonly withdraw: (id: SnapshotId) => Effect.Effect<Option.Option<Snapshot>>
}

/** Snapshots, as the model (domain/Snapshot.ts). Every call runs in the caller's transaction. */
export class SnapshotRepo extends Context.Tag("SnapshotRepo")<SnapshotRepo, SnapshotRepoShape>() {}

/** A capture job as a worker claims it. */
export interface SnapshotJob {
  readonly snapshotId: SnapshotId
  readonly url: string
  readonly attempts: number
}

export interface SnapshotJobRepoShape {
  /**
   * Takes the job under a lease of `leaseMs` unless another worker holds an unexpired one or
   * it is not due: the snapshot becomes `capturing` (snapshot.capture_started). None: nothing to do.
   */
  readonly claim: (id: string, owner: string, leaseMs: number) => Effect.Effect<Option.Option<SnapshotJob>>
  /** Ids of jobs that are due and not leased: new ones, retries, and those of stopped workers. */
  readonly due: (limit: number) => Effect.Effect<ReadonlyArray<string>>
  /** Extends a lease the worker still holds; false when it lost it. */
  readonly renewLease: (id: string, owner: string, leaseMs: number) => Effect.Effect<boolean>
  /** Gives a lease back at once (worker stopping): the job is due again now. */
  readonly release: (id: string, owner: string) => Effect.Effect<void>
  /** A temporary failure: back to queued, due again after `delayMs`. */
  readonly retryLater: (id: string, owner: string, error: string, delayMs: number) => Effect.Effect<void>
  /**
   * Stores the capture (the manifest is final), ends the job, and publishes it
   * (snapshot.captured, snapshot.published). None when the lease was lost.
   */
  readonly markCaptured: (id: string, owner: string, result: CaptureResult) => Effect.Effect<Option.Option<Snapshot>>
  /** Ends the capture for good with the reason (snapshot.failed). None when the lease was lost. */
  readonly markFailed: (id: string, owner: string, reason: string) => Effect.Effect<Option.Option<Snapshot>>
  /** Whether these bytes are already in the blob store (stored once across snapshots). */
  readonly blobKnown: (sha256: string) => Effect.Effect<boolean>
  /** Records that the bytes are now stored. */
  readonly blobStored: (sha256: string, bytes: number) => Effect.Effect<void>
}

/** The capture jobs of queued snapshots: a queue of short durable leases. */
export class SnapshotJobRepo extends Context.Tag("SnapshotJobRepo")<SnapshotJobRepo, SnapshotJobRepoShape>() {}
