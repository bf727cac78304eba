import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option } from "effect"
import { AccountId } from "../../domain/Account.js"
import {
  type DeclaredRating,
  type Image,
  ImageId,
  type RatingReview,
  RatingReviewId,
  type ReviewStatus
} from "../../domain/Image.js"
import { ImageRepo } from "../../domain/ports/ImageRepo.js"
import { RatingReviewRepo } from "../../domain/ports/RatingReviewRepo.js"
import { newId } from "../Ids.js"

interface DbReview {
  id: string
  image_id: string
  account_id: string
  requested: DeclaredRating
  current_rating: string
  status: ReviewStatus
  created_at: Date
  decided_at: Date | null
}

const toReview = (r: DbReview): RatingReview => ({
  id: RatingReviewId.make(r.id),
  imageId: ImageId.make(r.image_id),
  accountId: AccountId.make(r.account_id),
  requested: r.requested,
  currentRating: r.current_rating,
  status: r.status,
  createdAt: r.created_at,
  decidedAt: r.decided_at
})

/** Rating reviews in PostgreSQL; every write runs in the caller's transaction. */
const make = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient
  const images = yield* ImageRepo

  const closePending = (imageId: ImageId) =>
    sql`
      UPDATE rating_reviews SET status = 'rejected', decided_at = clock_timestamp()
      WHERE image_id = ${imageId} AND status = 'pending'`.pipe(Effect.asVoid, Effect.orDie)

  const request = (image: Image, requested: DeclaredRating) =>
    Effect.gen(function* () {
      yield* closePending(image.id)
      yield* sql`
        INSERT INTO rating_reviews (id, image_id, account_id, requested, current_rating)
        VALUES (${newId("rev")}, ${image.id}, ${image.accountId}, ${requested}, ${image.rating})`.pipe(Effect.orDie)
      yield* sql`UPDATE images SET updated_at = clock_timestamp() WHERE id = ${image.id}`.pipe(Effect.orDie)
      const row = Option.getOrThrow(yield* images.byId(image.id))
      yield* images.emitReviewRequested(row, requested)
      return row
    })

  const pending = () =>
    sql<DbReview>`
      SELECT r.* FROM rating_reviews r JOIN images i ON i.id = r.image_id
      WHERE r.status = 'pending' AND i.deleted_at IS NULL ORDER BY r.created_at`.pipe(
      Effect.map((rows) => rows.map(toReview)),
      Effect.orDie
    )

  const findForUpdate = (id: RatingReviewId) =>
    sql<DbReview>`SELECT * FROM rating_reviews WHERE id = ${id} FOR UPDATE`.pipe(
      Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toReview)),
      Effect.orDie
    )

  const decide = (review: RatingReview, decision: "approved" | "rejected") =>
    Effect.gen(function* () {
      yield* sql`
        UPDATE rating_reviews SET status = ${decision}, decided_at = clock_timestamp() WHERE id = ${review.id}`.pipe(
        Effect.orDie
      )
      const locked = yield* images.lockById(review.imageId)
      if (Option.isNone(locked)) return Option.none<Image>()
      let row = locked.value
      if (decision === "approved") row = yield* images.rate(row, review.requested, "operator", "operator")
      row = Option.getOrThrow(yield* images.byId(review.imageId))
      yield* images.emitReviewDecided(row, review.requested, decision)
      return Option.some(row)
    })

  return RatingReviewRepo.of({ request, closePending, pending, findForUpdate, decide })
})

export const RatingReviewRepoLive: Layer.Layer<RatingReviewRepo, never, PgClient.PgClient | ImageRepo> = Layer.effect(
  RatingReviewRepo,
  make
)
