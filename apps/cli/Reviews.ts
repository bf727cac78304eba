import { Data, Effect, Option } from "effect"
import { AbuseReportRepo } from "../../domain/ports/AbuseReportRepo.js"
import { Transactions } from "../../domain/ports/Database.js"
import { RatingReviewRepo } from "../../domain/ports/RatingReviewRepo.js"

export class ReviewNotFound extends Data.TaggedError("ReviewNotFound")<{
  readonly id: string
  readonly message: string
}> {}
export class ReviewAlreadyDecided extends Data.TaggedError("ReviewAlreadyDecided")<{
  readonly id: string
  readonly message: string
}> {}

/** Pending rating reductions, oldest first: what `reviews list` prints. */
export const listReviews = Effect.gen(function* () {
  const reviews = yield* RatingReviewRepo
  const pending = yield* reviews.pending()
  return {
    reviews: pending.map((r) => ({
      id: r.id,
      image_id: r.imageId,
      account_id: r.accountId,
      current_rating: r.currentRating,
      requested: r.requested,
      created_at: r.createdAt.toISOString()
    }))
  }
})

/**
 * Decides a pending review in one transaction: approval applies the requested rating
 * (rating_source `operator`, audited, image.rated), rejection keeps the effective rating;
 * both emit image.rating_review_decided.
 */
export const decideReview = (id: string, decision: "approved" | "rejected") =>
  Effect.gen(function* () {
    const reviews = yield* RatingReviewRepo
    const transactions = yield* Transactions
    return yield* transactions.withTransaction(
      Effect.gen(function* () {
        const review = yield* reviews.findForUpdate(id)
        if (Option.isNone(review)) {
          return yield* new ReviewNotFound({ id, message: `no rating review ${id}` })
        }
        if (review.value.status !== "pending") {
          return yield* new ReviewAlreadyDecided({ id, message: `review ${id} is already ${review.value.status}` })
        }
        const image = yield* reviews.decide(review.value, decision)
        return {
          id,
          decision,
          image_id: review.value.imageId,
          content_rating: Option.match(image, { onNone: () => null, onSome: (row) => row.rating })
        }
      })
    )
  })

/** Open abuse reports from share pages, oldest first. */
export const listReports = Effect.gen(function* () {
  const reports = yield* (yield* AbuseReportRepo).open()
  return {
    reports: reports.map((r) => ({
      id: r.id,
      image_id: r.image_id,
      reason: r.reason,
      created_at: r.created_at.toISOString()
    }))
  }
})
