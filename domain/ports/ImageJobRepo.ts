import { Context, type Effect, type Option } from "effect"
import type { Image, ImageId, ImageJob, Published } from "../Image.js"

/** Notification channel of new conversion jobs; the payload is the image id. */
export const IMAGE_JOBS_CHANNEL = "image_jobs"

export interface ImageJobRepoShape {
  /**
   * The conversion job of a new image (its source is at the image's source key). Listeners
   * on IMAGE_JOBS_CHANNEL hear of it the moment the transaction commits.
   */
  readonly insert: (imageId: ImageId) => Effect.Effect<void>
  /**
   * Takes the job of this image under a lease of `leaseMs` unless another worker holds an
   * unexpired one or it is not due yet. None: nothing to do now.
   */
  readonly claim: (imageId: ImageId, owner: string, leaseMs: number) => Effect.Effect<Option.Option<ImageJob>>
  /** Ids of jobs that are due and not leased: retries, and jobs of crashed workers. */
  readonly due: (limit: number) => Effect.Effect<ReadonlyArray<ImageId>>
  /**
   * Gives back every lease `owner` holds (a worker that stops), so that the jobs are due at
   * once for the next worker or start; how many.
   */
  readonly releaseAll: (owner: string) => Effect.Effect<number>
  /** Extends a lease the worker still holds; false when it lost it. */
  readonly renewLease: (imageId: ImageId, owner: string, leaseMs: number) => Effect.Effect<boolean>
  /**
   * A temporary failure: the lease is released, the next attempt (fast tier) is due after
   * `delayMs`, and image.conversion_retry is emitted.
   */
  readonly retryLater: (imageId: ImageId, error: string, delayMs: number) => Effect.Effect<void>
  /** Jobs whose private source is older than `maxAgeMs` (kept at most that long). */
  readonly expired: (maxAgeMs: number) => Effect.Effect<ReadonlyArray<ImageId>>
  /**
   * Publishes a processing image: the reservation becomes the published size, the job goes
   * and image.converted is emitted. None when the image is no longer processing (deleted, or
   * ended by another worker), and then nothing changed.
   */
  readonly markReady: (imageId: ImageId, published: Published) => Effect.Effect<Option.Option<Image>>
  /** Ends a processing image for good, with the reason (image.failed): the reservation is released. */
  readonly markFailed: (imageId: ImageId, reason: string) => Effect.Effect<Option.Option<Image>>
  /**
   * Private sources no longer needed: the conversion ended (ready or failed) or the image was
   * deleted. The worker removes each blob, then `sourceRemoved`.
   */
  readonly staleSources: (
    limit: number
  ) => Effect.Effect<ReadonlyArray<{ readonly id: ImageId; readonly source_key: string }>>
  readonly sourceRemoved: (imageId: ImageId) => Effect.Effect<void>
}

/** The conversion jobs of processing images: a queue of durable leases, in the caller's transaction. */
export class ImageJobRepo extends Context.Tag("ImageJobRepo")<ImageJobRepo, ImageJobRepoShape>() {}
