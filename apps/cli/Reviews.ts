import { Option } from "effect"
import type { ReviewDecided } from "../../apps/api/Images/RatingReviews.js"
import type { AbuseReport, RatingReview } from "../../domain/Image.js"

/** What the operator commands print (the RatingReviews service does the work). */

/** `reviews list`. */
export const reviewsOutput = (pending: ReadonlyArray<RatingReview>) => ({
  reviews: pending.map((r) => ({
    id: r.id,
    image_id: r.imageId,
    account_id: r.accountId,
    current_rating: r.currentRating,
    requested: r.requested,
    created_at: r.createdAt.toISOString()
  }))
})

/** `reviews approve` and `reviews reject`. */
export const decisionOutput = ({ review, decision, image }: ReviewDecided) => ({
  id: review.id,
  decision,
  image_id: review.imageId,
  content_rating: Option.match(image, { onNone: () => null, onSome: (row) => row.rating })
})

/** `reports list`. */
export const reportsOutput = (reports: ReadonlyArray<AbuseReport>) => ({
  reports: reports.map((r) => ({
    id: r.id,
    image_id: r.image_id,
    reason: r.reason,
    created_at: r.created_at.toISOString()
  }))
})
