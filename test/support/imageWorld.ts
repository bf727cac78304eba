import { Effect, Either } from "effect"
import { AccountId, ApiKeyId, type Principal } from "../../domain/Account.js"
import type { AbuseReport, Image, RatingReview, StorageUsage } from "../../domain/Image.js"
import type { ImageInfo } from "../../domain/ports/Codec.js"
import type { FetchError, FetchedResponse } from "../../domain/ports/SafeFetcher.js"

/**
 * The state behind small in-memory stand-ins for the ports of hosted images (imagePorts.ts
 * builds their layer), for unit tests of the feature services. The "database" (rows, counters, events) rolls back like a savepoint when a
 * counted use is refused or fails, and when a transaction fails; the blob store does not,
 * like the real one.
 */

export interface Tables {
  images: Map<string, Image>
  /** Each image's keyset position (insertion order). */
  seqs: Map<string, bigint>
  jobs: Set<string>
  storage: Map<string, StorageUsage>
  usage: Map<string, number>
  reviews: Map<string, RatingReview>
  events: Array<{ readonly type: string; readonly id: string }>
  audit: Array<{ readonly imageId: string; readonly to: string; readonly source: string; readonly actor: string }>
  seq: bigint
}

export interface World {
  db: Tables
  readonly blobs: Map<string, Uint8Array>
  readonly reports: Array<AbuseReport>
  /** What the next fetch answers. */
  fetch: Either.Either<FetchedResponse, FetchError>
  /** Transactions the services opened (committed or not). */
  transactions: number
}

export const emptyWorld = (): World => ({
  db: {
    images: new Map(),
    seqs: new Map(),
    jobs: new Set(),
    storage: new Map(),
    usage: new Map(),
    reviews: new Map(),
    events: [],
    audit: [],
    seq: 0n
  },
  blobs: new Map(),
  reports: [],
  fetch: Either.right({ finalUrl: "", status: 200, headers: {}, body: new Uint8Array() }),
  transactions: 0
})

/** A PNG signature and a few bytes: what the stub codec takes for an image. */
export const PNG = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 1, 2, 3, 4])
/** PNG-signed bytes the stub codec finds damaged. */
export const CORRUPT_PNG = new Uint8Array([...PNG.subarray(0, 8), 0xde, 0xad])

export const INFO: ImageInfo = {
  format: "png",
  width: 40,
  height: 30,
  frames: 1,
  animated: false,
  published: "webp",
  mime_type: "image/webp"
}

export const principal = (overrides: Partial<Principal> = {}): Principal => ({
  keyId: ApiKeyId.make("key_1"),
  accountId: AccountId.make("acct_1"),
  plan: "free",
  scopes: new Set(["images:read", "images:write"]),
  unmetered: false,
  ...overrides
})

/** Runs `use` like a savepoint: the tables are restored when it fails or `keep` says no. */
export const savepoint = <A, E, R>(world: World, use: Effect.Effect<A, E, R>, keep: (a: A) => boolean = () => true) =>
  Effect.suspend(() => {
    const before = structuredClone(world.db)
    const restore = Effect.sync(() => {
      world.db = before
    })
    return use.pipe(
      Effect.tap((a) => (keep(a) ? Effect.void : restore)),
      Effect.tapErrorCause(() => restore)
    )
  })

export const storageOf = (world: World, accountId: string) =>
  world.db.storage.get(accountId) ?? { ordinary: 0, unmetered: 0 }
