import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option } from "effect"
import { Topics } from "../../domain/Events.js"
import {
  type CreationRating,
  type DeclaredRating,
  type ImageDelivery,
  type ImageRow,
  type ImageStatus,
  imageEventData,
  type NewImage,
  type Rating,
  type RatingSource,
  type ReviewStatus
} from "../../domain/Image.js"
import { ImageRepo } from "../../domain/ports/ImageRepo.js"
import { Outbox } from "../../domain/ports/Outbox.js"
import { StorageRepo } from "../../domain/ports/StorageRepo.js"

interface DbImage {
  seq: string
  id: string
  account_id: string
  status: ImageStatus
  unmetered: boolean
  requested_rating: CreationRating
  rating: Rating
  rating_source: RatingSource | null
  source_format: string
  source_bytes: string
  source_url: string | null
  source_key: string | null
  reserved_bytes: string
  mime_type: string | null
  ext: string | null
  blob_key: string | null
  width: number | null
  height: number | null
  frames: number | null
  animated: boolean | null
  bytes: string | null
  failure: string | null
  created_at: Date
  updated_at: Date
  deleted_at: Date | null
  review_requested: DeclaredRating | null
  review_status: ReviewStatus | null
}

const toRow = (r: DbImage): ImageRow => ({
  seq: BigInt(r.seq),
  id: r.id,
  accountId: r.account_id,
  status: r.status,
  unmetered: r.unmetered,
  requestedRating: r.requested_rating,
  rating: r.rating,
  ratingSource: r.rating_source,
  sourceFormat: r.source_format,
  sourceBytes: Number(r.source_bytes),
  sourceUrl: r.source_url,
  sourceKey: r.source_key,
  reservedBytes: Number(r.reserved_bytes),
  mimeType: r.mime_type,
  ext: r.ext,
  blobKey: r.blob_key,
  width: r.width,
  height: r.height,
  frames: r.frames,
  animated: r.animated,
  bytes: r.bytes === null ? null : Number(r.bytes),
  failure: r.failure,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  deletedAt: r.deleted_at,
  review:
    r.review_requested === null || r.review_status === null
      ? null
      : { requested: r.review_requested, status: r.review_status }
})

const SELECT = `
  SELECT i.*, r.requested AS review_requested, r.status AS review_status
  FROM images i
  LEFT JOIN LATERAL (
    SELECT requested, status FROM rating_reviews WHERE image_id = i.id ORDER BY created_at DESC, id DESC LIMIT 1
  ) r ON true`

const make = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient
  const outbox = yield* Outbox
  const storage = yield* StorageRepo

  const one = (rows: ReadonlyArray<DbImage>) => Option.map(Option.fromNullable(rows[0]), toRow)
  const select = sql.unsafe(SELECT)

  const insert = (image: NewImage) => {
    const rating: Rating = image.requestedRating === "auto" ? "unrated" : image.requestedRating
    const ratingSource: RatingSource | null = image.requestedRating === "auto" ? null : "owner"
    return sql<{ id: string }>`
      INSERT INTO images (id, account_id, unmetered, requested_rating, rating, rating_source, source_format,
                          source_bytes, source_url, source_key, reserved_bytes, mime_type, ext)
      VALUES (${image.id}, ${image.accountId}, ${image.unmetered}, ${image.requestedRating}, ${rating},
              ${ratingSource}, ${image.sourceFormat}, ${image.sourceBytes}, ${image.sourceUrl}, ${image.sourceKey ?? null},
              ${image.sourceBytes},
              ${image.mimeType}, ${image.ext})
      ON CONFLICT (id) DO NOTHING
      RETURNING id`.pipe(
      Effect.flatMap((rows) => (rows.length === 0 ? Effect.succeedNone : Effect.asSome(byId(image.id)))),
      Effect.map(Option.flatten),
      Effect.orDie
    )
  }

  const byId = (id: string) => sql<DbImage>`${select} WHERE i.id = ${id}`.pipe(Effect.map(one), Effect.orDie)

  const lockById = (id: string) =>
    sql<DbImage>`${select} WHERE i.id = ${id} FOR UPDATE OF i`.pipe(Effect.map(one), Effect.orDie)

  const find = (accountId: string, id: string) =>
    sql<DbImage>`${select} WHERE i.id = ${id} AND i.account_id = ${accountId} AND i.deleted_at IS NULL`.pipe(
      Effect.map(one),
      Effect.orDie
    )

  const findForUpdate = (accountId: string, id: string) =>
    sql<DbImage>`
      ${select} WHERE i.id = ${id} AND i.account_id = ${accountId} AND i.deleted_at IS NULL FOR UPDATE OF i`.pipe(
      Effect.map(one),
      Effect.orDie
    )

  const search = (accountId: string, s: { readonly afterSeq?: bigint | undefined; readonly limit: number }) =>
    sql<DbImage>`
      ${select} WHERE i.account_id = ${accountId} AND i.deleted_at IS NULL
      ${s.afterSeq === undefined ? sql`` : sql`AND i.seq < ${s.afterSeq.toString()}`}
      ORDER BY i.seq DESC LIMIT ${s.limit}`.pipe(
      Effect.map((rows) => rows.map(toRow)),
      Effect.orDie
    )

  const delivery = (id: string) =>
    sql<ImageDelivery>`
        SELECT status, rating, ext, mime_type, blob_key, deleted_at IS NOT NULL AS deleted
        FROM images WHERE id = ${id}`.pipe(Effect.map((rows) => Option.fromNullable(rows[0])))

  const emit = (type: string, row: ImageRow, extra: Record<string, unknown> = {}) =>
    outbox.append(Topics.images, row.id, type, row.accountId, { ...imageEventData(row), ...extra })

  const softDelete = (image: ImageRow) =>
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

  const rate = (image: ImageRow, to: DeclaredRating, source: RatingSource, actor: string) =>
    Effect.gen(function* () {
      if (image.rating === to && image.ratingSource === source) return image
      yield* sql`
        UPDATE images SET rating = ${to}, rating_source = ${source}, updated_at = clock_timestamp()
        WHERE id = ${image.id}`.pipe(Effect.orDie)
      yield* sql`
        INSERT INTO rating_changes (image_id, account_id, from_rating, to_rating, source, actor)
        VALUES (${image.id}, ${image.accountId}, ${image.rating}, ${to}, ${source}, ${actor})`.pipe(Effect.orDie)
      const row = Option.getOrThrow(yield* byId(image.id))
      yield* emit("image.rated", row, {
        change: { from: image.status === "processing" ? null : image.rating, to, source, actor }
      })
      return row
    })

  /** A rating_changes row and image.rated, like every later change. */
  const auditDeclaration = (image: ImageRow, actor: string) =>
    image.ratingSource !== "owner"
      ? Effect.void
      : Effect.gen(function* () {
          yield* sql`
            INSERT INTO rating_changes (image_id, account_id, from_rating, to_rating, source, actor)
            VALUES (${image.id}, ${image.accountId}, NULL, ${image.rating}, 'owner', ${actor})`.pipe(Effect.orDie)
          yield* emit("image.rated", image, {
            change: { from: null, to: image.rating, source: "owner", actor }
          })
        })

  return ImageRepo.of({
    insert,
    byId,
    lockById,
    find,
    findForUpdate,
    search,
    delivery,
    emit,
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
