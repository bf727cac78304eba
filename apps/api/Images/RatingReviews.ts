import { Data, Effect, Option } from "effect"
import { type Image, isRatingReviewId, type RatingReview } from "../../../domain/Image.js"
import { AbuseReportRepo } from "../../../domain/ports/AbuseReportRepo.js"
import { Transactions } from "../../../domain/ports/Database.js"
import { RatingReviewRepo } from "../../../domain/ports/RatingReviewRepo.js"

/** No rating review has this id (operators only: the CLI prints it as `review_not_found`). */
export class ReviewNotFound extends Data.TaggedError("ReviewNotFound")<{
  readonly id: string
  readonly message: string
}> {}
/** The review was approved or rejected before (`review_already_decided`). */
export class ReviewAlreadyDecided extends Data.TaggedError("ReviewAlreadyDecided")<{
  readonly id: string
  readonly message: string
}> {}

/** An operator's decision and the image after it (None when the image is gone). */
export interface ReviewDecided {
  readonly review: RatingReview
  readonly decision: "approved" | "rejected"
  readonly image: Option.Option<Image>
}

/**
 * Operator work on hosted images: owners' requests for a less strict rating and abuse
 * reports from share pages. Called by the CLI, which has no transaction of its own: `decide`
 * opens one.
 */
export class RatingReviews extends Effect.Service<RatingReviews>()("RatingReviews", {
  effect: Effect.gen(function* () {
    const reviews = yield* RatingReviewRepo
    const reports = yield* AbuseReportRepo
    const transactions = yield* Transactions

    /** Pending rating reductions of images not deleted, oldest first. */
    const pending = Effect.fn("RatingReviews.pending")(function* () {
      return yield* reviews.pending()
    })

    /**
     * Decides a pending review in one transaction: approval applies the requested rating
     * (rating_source `operator`, audited, image.rated), rejection keeps the effective rating;
     * both emit image.rating_review_decided. A review is decided once.
     */
    const decide = Effect.fn("RatingReviews.decide")(function* (id: string, decision: "approved" | "rejected") {
      return yield* transactions.withTransaction(
        Effect.gen(function* () {
          // An id of another shape names no review and must not reach SQL.
          const review = isRatingReviewId(id) ? yield* reviews.findForUpdate(id) : Option.none()
          if (Option.isNone(review)) {
            return yield* new ReviewNotFound({ id, message: `no rating review ${id}` })
          }
          if (review.value.status !== "pending") {
            return yield* new ReviewAlreadyDecided({ id, message: `review ${id} is already ${review.value.status}` })
          }
          const image = yield* reviews.decide(review.value, decision)
          return { review: review.value, decision, image } satisfies ReviewDecided
        })
      )
    })

    /** Open abuse reports from share pages, oldest first. */
    const openReports = Effect.fn("RatingReviews.openReports")(function* () {
      return yield* reports.open()
    })

    return { pending, decide, openReports } as const
  })
}) {}
