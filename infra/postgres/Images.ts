import { PgClient } from "@effect/sql-pg"
import { type Context, Effect, Layer, Option, Schema } from "effect"
import { Topics } from "../../domain/Events.js"
import {
  CreationRating,
  DeclaredRating,
  Image,
  type ImageDelivery,
  ImageRecord,
  ImageReview,
  ImageStatus,
  type NewImage,
  Rating,
  RatingSource,
  ReviewStatus
} from "../../domain/Image.js"
import {
  ImageEventPayload,
  ImageRatedPayload,
  ImageReviewDecidedPayload,
  ImageReviewRequestedPayload
} from "../../domain/ImageEventPayload.js"
import { ImageRepo, type ImageStateEventType } from "../../domain/ports/ImageRepo.js"
import { Outbox } from "../../domain/ports/Outbox.js"
import { StorageRepo } from "../../domain/ports/StorageRepo.js"
import { currentTraceparent } from "../Tracing.js"

/** The columns SELECT returns as the driver gives them (timestamptz as Date, int8 as a string). */
const columns = {
  id: Schema.String,
  account_id: Schema.String,
  status: ImageStatus,
  unmetered: Schema.Boolean,
  requested_rating: CreationRating,
  rating: Rating,
  rating_source: Schema.NullOr(RatingSource),
  source_format: Schema.String,
  source_bytes: Schema.NumberFromString,
  source_url: Schema.NullOr(Schema.String),
  source_key: Schema.NullOr(Schema.String),
  reserved_bytes: Schema.NumberFromString,
  mime_type: Schema.NullOr(Schema.String),
  ext: Schema.NullOr(Schema.String),
  blob_key: Schema.NullOr(Schema.String),
  width: Schema.NullOr(Schema.Number),
  height: Schema.NullOr(Schema.Number),
  frames: Schema.NullOr(Schema.Number),
  animated: Schema.NullOr(Schema.Boolean),
  bytes: Schema.NullOr(Schema.NumberFromString),
  failure: Schema.NullOr(Schema.String),
  created_at: Schema.DateFromSelf,
  updated_at: Schema.DateFromSelf,
  deleted_at: Schema.NullOr(Schema.DateFromSelf),
  review_requested: Schema.NullOr(DeclaredRating),
  review_status: Schema.NullOr(ReviewStatus)
}

interface ReviewColumns {
  readonly review_requested: DeclaredRating | null
  readonly review_status: ReviewStatus | null
}

/** The latest review's two columns as the model's `review` (both or nothing). */
const nestReview = <R extends ReviewColumns>({ review_requested, review_status, ...rest }: R) => ({
  ...rest,
  review:
    review_requested === null || review_status === null ? null : { requested: review_requested, status: review_status }
})

const flattenReview = <R extends { readonly review: Image["review"] }>({ review, ...rest }: R) => ({
  ...rest,
  review_requested: review?.requested ?? null,
  review_status: review?.status ?? null
})

const { review_requested: _r, review_status: _s, ...imageColumns } = columns
const reviewField = { review: Schema.NullOr(ImageReview) }

/** Column names to the model's field names. */
const fieldOfColumn = {
  account_id: "accountId",
  requested_rating: "requestedRating",
  rating_source: "ratingSource",
  source_format: "sourceFormat",
  source_bytes: "sourceBytes",
  source_url: "sourceUrl",
  source_key: "sourceKey",
  reserved_bytes: "reservedBytes",
  mime_type: "mimeType",
  blob_key: "blobKey",
  created_at: "createdAt",
  updated_at: "updatedAt",
  deleted_at: "deletedAt"
} as const

/** A row decodes into the model: its review nested, renamed to its fields, then checked and built by Image. */
export const ImageFromRow = Schema.transform(
  Schema.Struct(columns),
  Schema.typeSchema(Schema.Struct({ ...imageColumns, ...reviewField })),
  { strict: true, decode: nestReview, encode: flattenReview }
).pipe(Schema.rename(fieldOfColumn), Schema.compose(Image))

/** The same with the row's keyset position (int8 arrives as a string). */
export const ImageRecordFromRow = Schema.transform(
  Schema.Struct({ seq: Schema.BigInt, ...columns }),
  Schema.typeSchema(Schema.Struct({ seq: Schema.BigIntFromSelf, ...imageColumns, ...reviewField })),
  { strict: true, decode: nestReview, encode: flattenReview }
).pipe(Schema.rename(fieldOfColumn), Schema.compose(ImageRecord))

// A row the model refuses is a defect (every write goes through the model): callers orDie.
const decodeImage = Schema.decodeUnknown(ImageFromRow)
const decodeRecords = Schema.decodeUnknown(Schema.Array(ImageRecordFromRow))
/** The first row as the model, if there is one. */
const firstImage = (rows: ReadonlyArray<unknown>) =>
  rows.length === 0 ? Effect.succeedNone : Effect.asSome(decodeImage(rows[0]))

const SELECT = `
  SELECT i.*, r.requested AS review_requested, r.status AS review_status
  FROM images i
  LEFT JOIN LATERAL (
    SELECT requested, status FROM rating_reviews WHERE image_id = i.id ORDER BY created_at DESC, id DESC LIMIT 1
  ) r ON true`

type OutboxShape = Context.Tag.Service<typeof Outbox>

/** The image events, appended through their schemas (domain/ImageEventPayload.ts). */
const makeEvents = (outbox: OutboxShape) => {
  const emit = (type: ImageStateEventType, image: Image) =>
    outbox.appendEvent(ImageEventPayload, Topics.images, image.id, type, image.accountId, image)

  const emitReviewRequested = (image: Image, requested: DeclaredRating) =>
    outbox.appendEvent(
      ImageReviewRequestedPayload,
      Topics.images,
      image.id,
      "image.rating_review_requested",
      image.accountId,
      { image, requested }
    )

  const emitReviewDecided = (image: Image, requested: DeclaredRating, decision: "approved" | "rejected") =>
    outbox.appendEvent(
      ImageReviewDecidedPayload,
      Topics.images,
      image.id,
      "image.rating_review_decided",
      image.accountId,
      { image, requested, decision }
    )
  return { emit, emitReviewRequested, emitReviewDecided } as const
}

/** Rating changes: the new rating, its audit row (rating_changes) and image.rated. */
const makeRatings = (
  sql: PgClient.PgClient,
  outbox: OutboxShape,
  byId: (id: string) => Effect.Effect<Option.Option<Image>>
) => {
  const rate = (image: Image, to: DeclaredRating, source: RatingSource, actor: string) =>
    Effect.gen(function* () {
      if (image.rating === to && image.ratingSource === source) return image
      yield* sql`
        UPDATE images SET rating = ${to}, rating_source = ${source}, updated_at = clock_timestamp()
        WHERE id = ${image.id}`.pipe(Effect.orDie)
      yield* sql`
        INSERT INTO rating_changes (image_id, account_id, from_rating, to_rating, source, actor)
        VALUES (${image.id}, ${image.accountId}, ${image.rating}, ${to}, ${source}, ${actor})`.pipe(Effect.orDie)
      const row = Option.getOrThrow(yield* byId(image.id))
      yield* outbox.appendEvent(ImageRatedPayload, Topics.images, row.id, "image.rated", row.accountId, {
        image: row,
        change: { from: image.status === "processing" ? null : image.rating, to, source, actor }
      })
      return row
    })

  /** A rating_changes row and image.rated, like every later change. */
  const auditDeclaration = (image: Image, actor: string) =>
    image.ratingSource !== "owner"
      ? Effect.void
      : Effect.gen(function* () {
          yield* sql`
            INSERT INTO rating_changes (image_id, account_id, from_rating, to_rating, source, actor)
            VALUES (${image.id}, ${image.accountId}, NULL, ${image.rating}, 'owner', ${actor})`.pipe(Effect.orDie)
          yield* outbox.appendEvent(ImageRatedPayload, Topics.images, image.id, "image.rated", image.accountId, {
            image,
            change: { from: null, to: image.rating, source: "owner", actor }
          })
        })
  return { rate, auditDeclaration } as const
}

const make = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient
  const outbox = yield* Outbox
  const storage = yield* StorageRepo

  const select = sql.unsafe(SELECT)

  const insert = (image: NewImage) => {
    const rating: Rating = image.requestedRating === "auto" ? "unrated" : image.requestedRating
    const ratingSource: RatingSource | null = image.requestedRating === "auto" ? null : "owner"
    // The request's trace, continued by the conversion and the rating (null unless traced).
    return Effect.flatMap(
      currentTraceparent,
      (traceparent) => sql<{ id: string }>`
      INSERT INTO images (id, account_id, unmetered, requested_rating, rating, rating_source, source_format,
                          source_bytes, source_url, source_key, reserved_bytes, mime_type, ext, traceparent)
      VALUES (${image.id}, ${image.accountId}, ${image.unmetered}, ${image.requestedRating}, ${rating},
              ${ratingSource}, ${image.sourceFormat}, ${image.sourceBytes}, ${image.sourceUrl}, ${image.sourceKey ?? null},
              ${image.sourceBytes},
              ${image.mimeType}, ${image.ext}, ${traceparent})
      ON CONFLICT (id) DO NOTHING
      RETURNING id`
    ).pipe(
      Effect.flatMap((rows) => (rows.length === 0 ? Effect.succeedNone : Effect.asSome(byId(image.id)))),
      Effect.map(Option.flatten),
      Effect.orDie
    )
  }

  const byId = (id: string) => sql`${select} WHERE i.id = ${id}`.pipe(Effect.flatMap(firstImage), Effect.orDie)

  const lockById = (id: string) =>
    sql`${select} WHERE i.id = ${id} FOR UPDATE OF i`.pipe(Effect.flatMap(firstImage), Effect.orDie)

  const find = (accountId: string, id: string) =>
    sql`${select} WHERE i.id = ${id} AND i.account_id = ${accountId} AND i.deleted_at IS NULL`.pipe(
      Effect.flatMap(firstImage),
      Effect.orDie
    )

  const findForUpdate = (accountId: string, id: string) =>
    sql`
      ${select} WHERE i.id = ${id} AND i.account_id = ${accountId} AND i.deleted_at IS NULL FOR UPDATE OF i`.pipe(
      Effect.flatMap(firstImage),
      Effect.orDie
    )

  const search = (accountId: string, s: { readonly afterSeq?: bigint | undefined; readonly limit: number }) =>
    sql`
      ${select} WHERE i.account_id = ${accountId} AND i.deleted_at IS NULL
      ${s.afterSeq === undefined ? sql`` : sql`AND i.seq < ${s.afterSeq.toString()}`}
      ORDER BY i.seq DESC LIMIT ${s.limit}`.pipe(Effect.flatMap(decodeRecords), Effect.orDie)

  const delivery = (id: string) =>
    sql<ImageDelivery>`
        SELECT status, rating, ext, mime_type, blob_key, deleted_at IS NOT NULL AS deleted
        FROM images WHERE id = ${id}`.pipe(Effect.map((rows) => Option.fromNullable(rows[0])))

  const { emit, emitReviewRequested, emitReviewDecided } = makeEvents(outbox)

  const softDelete = (image: Image) =>
    Effect.gen(function* () {
      yield* sql`UPDATE images SET deleted_at = clock_timestamp(), updated_at = clock_timestamp() WHERE id = ${image.id}`.pipe(
        Effect.orDie
      )
      yield* storage.adjust(image.accountId, image.unmetered, -((image.bytes ?? 0) + image.reservedBytes))
      yield* sql`DELETE FROM image_jobs WHERE image_id = ${image.id}`.pipe(Effect.orDie)
      const row = Option.getOrThrow(yield* byId(image.id))
      yield* emit("image.deleted", row)
      return row
    })

  const deletedBlobs = (limit: number) =>
    sql<{ id: string; blob_key: string }>`
      SELECT id, blob_key FROM images WHERE deleted_at IS NOT NULL AND blob_key IS NOT NULL
      ORDER BY deleted_at LIMIT ${limit}`.pipe(Effect.orDie)

  const blobRemoved = (id: string) =>
    sql`UPDATE images SET blob_key = NULL WHERE id = ${id} AND deleted_at IS NOT NULL`.pipe(Effect.asVoid, Effect.orDie)

  const { rate, auditDeclaration } = makeRatings(sql, outbox, byId)

  return ImageRepo.of({
    insert,
    byId,
    lockById,
    find,
    findForUpdate,
    search,
    delivery,
    emit,
    emitReviewRequested,
    emitReviewDecided,
    softDelete,
    deletedBlobs,
    blobRemoved,
    rate,
    auditDeclaration
  })
})

export const ImageRepoLive: Layer.Layer<ImageRepo, never, PgClient.PgClient | Outbox | StorageRepo> = Layer.effect(
  ImageRepo,
  make
)
