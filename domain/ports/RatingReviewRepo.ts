import { Context, type Effect, type Option } from "effect"
import type { DeclaredRating, Image, ImageId, RatingReview, RatingReviewId } from "../Image.js"

export interface RatingReviewRepoShape {
  /**
   * Records an owner's request for a less strict rating (image.rating_review_requested). A
   * pending request of the same image is replaced (one pending review per image).
   */
  readonly request: (image: Image, requested: DeclaredRating) => Effect.Effect<Image>
  /** A declaration that applies at once supersedes a pending review of the same image. */
  readonly closePending: (imageId: ImageId) => Effect.Effect<void>
  /** Pending reviews of images not deleted, oldest first. */
  readonly pending: () => Effect.Effect<ReadonlyArray<RatingReview>>
  /** The review, locked; None when there is none. */
  readonly findForUpdate: (id: RatingReviewId) => Effect.Effect<Option.Option<RatingReview>>
  /**
   * Decides a pending review: approval applies the requested rating (source operator),
   * rejection leaves the effective rating as it is. Both emit image.rating_review_decided.
   * None when the image is gone.
   */
  readonly decide: (review: RatingReview, decision: "approved" | "rejected") => Effect.Effect<Option.Option<Image>>
}

/** Operator reviews of rating reductions, in the caller's transaction. */
export class RatingReviewRepo extends Context.Tag("RatingReviewRepo")<RatingReviewRepo, RatingReviewRepoShape>() {}
