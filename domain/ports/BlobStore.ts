import { Context, Data, Effect, type Option } from "effect"

/** The store failed (disk, network, the S3 service): temporary from the caller's view. */
export class BlobStoreError extends Data.TaggedError("BlobStoreError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

/**
 * Immutable objects by key (published image bytes). A put is durable once it succeeds and
 * is atomic: a reader sees the whole object or none. Keys are `[A-Za-z0-9/._-]+`.
 */
export interface BlobStoreShape {
  readonly put: (key: string, bytes: Uint8Array, contentType: string) => Effect.Effect<void, BlobStoreError>
  /** None when there is no such object. */
  readonly get: (key: string) => Effect.Effect<Option.Option<Uint8Array>, BlobStoreError>
  /** Removing a missing object succeeds. */
  readonly remove: (key: string) => Effect.Effect<void, BlobStoreError>
}

export class BlobStore extends Context.Tag("BlobStore")<BlobStore, BlobStoreShape>() {}

const KEY = /^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/

/** Every adapter refuses keys outside `[A-Za-z0-9/._-]+` and `.`/`..` segments: a bug, not input. */
export const checkKey = (key: string): Effect.Effect<void> =>
  KEY.test(key) && !key.split("/").some((p) => p === "." || p === "..")
    ? Effect.void
    : Effect.die(new Error(`invalid blob key: ${key}`))
