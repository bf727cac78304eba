import { Context, type Effect, type Option } from "effect"
import type { DeclaredRating, Image, ImageDelivery, ImageRecord, NewImage, RatingSource } from "../Image.js"
import type { DatabaseError } from "./Database.js"
import type { OutboxEvent } from "./Outbox.js"

/** The images.v1 events whose data is the image's state alone. */
export type ImageStateEventType =
  | "image.uploaded"
  | "image.conversion_retry"
  | "image.converted"
  | "image.failed"
  | "image.deleted"

export interface ImageRepoShape {
  /** Inserts unless the id is taken (None: retry with a new id). */
  readonly insert: (image: NewImage) => Effect.Effect<Option.Option<Image>>
  /** Any image by id, deleted ones included (workers, delivery, operators). */
  readonly byId: (id: string) => Effect.Effect<Option.Option<Image>>
  /** The same, locked for the rest of the transaction. */
  readonly lockById: (id: string) => Effect.Effect<Option.Option<Image>>
  /** The account's image, not deleted. */
  readonly find: (accountId: string, id: string) => Effect.Effect<Option.Option<Image>>
  /** The same, locked for the rest of the transaction. */
  readonly findForUpdate: (accountId: string, id: string) => Effect.Effect<Option.Option<Image>>
  /** The account's images, newest first, keyset-paged on seq. */
  readonly search: (
    accountId: string,
    search: { readonly afterSeq?: bigint | undefined; readonly limit: number }
  ) => Effect.Effect<ReadonlyArray<ImageRecord>>
  /** What the image host needs to answer for an image (one primary-key lookup). */
  readonly delivery: (id: string) => Effect.Effect<Option.Option<ImageDelivery>, DatabaseError>
  /** Appends an images.v1 event of the image's state to the outbox (ImageEventPayload). */
  readonly emit: (type: ImageStateEventType, image: Image) => Effect.Effect<OutboxEvent>
  /** Appends image.rating_review_requested: the image's state and the rating asked for. */
  readonly emitReviewRequested: (image: Image, requested: DeclaredRating) => Effect.Effect<OutboxEvent>
  /** Appends image.rating_review_decided: the image's state, the rating asked for and the decision. */
  readonly emitReviewDecided: (
    image: Image,
    requested: DeclaredRating,
    decision: "approved" | "rejected"
  ) => Effect.Effect<OutboxEvent>
  /**
   * Deletes the account's image: it leaves lists and delivery at once, its bytes (or its
   * reservation) are freed, its job and source go, and image.deleted is emitted. The blob is
   * removed afterwards by the worker's sweep (`deletedBlobs`), so a crash cannot leave it behind.
   */
  readonly softDelete: (image: Image) => Effect.Effect<Image>
  /** Blobs of deleted images not yet removed. */
  readonly deletedBlobs: (
    limit: number
  ) => Effect.Effect<ReadonlyArray<{ readonly id: string; readonly blob_key: string }>>
  readonly blobRemoved: (id: string) => Effect.Effect<void>
  /**
   * Sets the effective rating, records it in the audit trail and emits image.rated. No
   * change (same rating and source) records nothing.
   */
  readonly rate: (image: Image, to: DeclaredRating, source: RatingSource, actor: string) => Effect.Effect<Image>
  /**
   * An owner's declaration at creation (`general` or `nsfw`, which skip the classifier) goes
   * into the audit trail like every later change.
   */
  readonly auditDeclaration: (image: Image, actor: string) => Effect.Effect<void>
}

/**
 * Hosted images. Every write runs in the caller's transaction; the ones that change what a
 * client can see append their images.v1 event to the outbox in it.
 */
export class ImageRepo extends Context.Tag("ImageRepo")<ImageRepo, ImageRepoShape>() {}
