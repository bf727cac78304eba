import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option } from "effect"
import { Topics } from "../domain/Events.js"
import type {
  CreationRating,
  DeclaredRating,
  ImageStatus,
  Rating,
  RatingSource,
  ReviewStatus
} from "../domain/Image.js"
import { newId } from "./Ids.js"
import { Outbox } from "./Outbox.js"

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

export interface ImageRow {
  readonly seq: bigint
  readonly id: string
  readonly accountId: string
  readonly status: ImageStatus
  readonly unmetered: boolean
  readonly requestedRating: CreationRating
  /** The effective rating; the API shows null while processing. */
  readonly rating: Rating
  readonly ratingSource: RatingSource | null
  readonly sourceFormat: string
  readonly sourceBytes: number
  readonly sourceUrl: string | null
  /** The private source in the blob store, while it is kept. */
  readonly sourceKey: string | null
  readonly reservedBytes: number
  readonly mimeType: string | null
  readonly ext: string | null
  readonly blobKey: string | null
  readonly width: number | null
  readonly height: number | null
  readonly frames: number | null
  readonly animated: boolean | null
  readonly bytes: number | null
  readonly failure: string | null
  readonly createdAt: Date
  readonly updatedAt: Date
  readonly deletedAt: Date | null
  /** The latest rating review, if any. */
  readonly review: { readonly requested: DeclaredRating; readonly status: ReviewStatus } | null
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

/** The image's state as every images.v1 event carries it. */
export const imageEventData = (row: ImageRow) => ({
  id: row.id,
  status: row.status,
  content_rating: row.status === "processing" ? null : row.rating,
  rating_source: row.ratingSource,
  mime_type: row.mimeType,
  ext: row.ext,
  width: row.width,
  height: row.height,
  bytes: row.bytes,
  animated: row.animated,
  unmetered: row.unmetered,
  failure: row.failure,
  deleted: row.deletedAt !== null,
  created_at: row.createdAt.toISOString(),
  updated_at: row.updatedAt.toISOString()
})

export interface NewImage {
  readonly id: string
  readonly accountId: string
  readonly unmetered: boolean
  readonly requestedRating: CreationRating
  readonly sourceFormat: string
  readonly sourceBytes: number
  readonly sourceUrl: string | null
  /** Where the caller put the private source in the blob store (none: no conversion job). */
  readonly sourceKey?: string | null
  /**
   * What the conversion will publish, known from the probe (domain/ImageFormat
   * publishedFormat): so `url` and `mime_type` are final from the 202 on.
   */
  readonly mimeType: string
  readonly ext: string
}

export interface Published {
  readonly mimeType: string
  readonly ext: string
  readonly blobKey: string
  readonly width: number
  readonly height: number
  readonly frames: number
  readonly animated: boolean
  readonly bytes: number
}

export interface Job {
  readonly imageId: string
  /** The private source in the blob store; null once purged. */
  readonly sourceKey: string | null
  readonly attempts: number
  readonly tier: "normal" | "fast"
  readonly createdAt: Date
}

export interface Review {
  readonly id: string
  readonly imageId: string
  readonly accountId: string
  readonly requested: DeclaredRating
  readonly currentRating: string
  readonly status: ReviewStatus
  readonly createdAt: Date
  readonly decidedAt: Date | null
}

/** NOTIFY channel of new conversion jobs; the payload is the image id. */
export const IMAGE_JOBS_CHANNEL = "image_jobs"

const SELECT = `
  SELECT i.*, r.requested AS review_requested, r.status AS review_status
  FROM images i
  LEFT JOIN LATERAL (
    SELECT requested, status FROM rating_reviews WHERE image_id = i.id ORDER BY created_at DESC, id DESC LIMIT 1
  ) r ON true`

/**
 * Hosted images in PostgreSQL. Every write runs in the caller's transaction; the ones that
 * change what a client can see append their images.v1 event to the outbox in it.
 */
const make = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient
  const outbox = yield* Outbox

  const one = (rows: ReadonlyArray<DbImage>) => Option.map(Option.fromNullable(rows[0]), toRow)
  const select = sql.unsafe(SELECT)

  /** Inserts unless the id is taken (None: retry with a new id). */
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

  /** Any image by id, deleted ones included (workers, delivery, operators). */
  const byId = (id: string) => sql<DbImage>`${select} WHERE i.id = ${id}`.pipe(Effect.map(one), Effect.orDie)

  const lockById = (id: string) =>
    sql<DbImage>`${select} WHERE i.id = ${id} FOR UPDATE OF i`.pipe(Effect.map(one), Effect.orDie)

  /** The account's image, not deleted. */
  const find = (accountId: string, id: string) =>
    sql<DbImage>`${select} WHERE i.id = ${id} AND i.account_id = ${accountId} AND i.deleted_at IS NULL`.pipe(
      Effect.map(one),
      Effect.orDie
    )

  /** The same, locked for the rest of the transaction. */
  const findForUpdate = (accountId: string, id: string) =>
    sql<DbImage>`
      ${select} WHERE i.id = ${id} AND i.account_id = ${accountId} AND i.deleted_at IS NULL FOR UPDATE OF i`.pipe(
      Effect.map(one),
      Effect.orDie
    )

  /** Newest first, keyset-paged on seq. */
  const search = (accountId: string, s: { readonly afterSeq?: bigint | undefined; readonly limit: number }) =>
    sql<DbImage>`
      ${select} WHERE i.account_id = ${accountId} AND i.deleted_at IS NULL
      ${s.afterSeq === undefined ? sql`` : sql`AND i.seq < ${s.afterSeq.toString()}`}
      ORDER BY i.seq DESC LIMIT ${s.limit}`.pipe(
      Effect.map((rows) => rows.map(toRow)),
      Effect.orDie
    )

  // --- storage ---------------------------------------------------------------------------

  /**
   * Adds `bytes` to the account's ordinary or Partner storage unless that goes past `limit`
   * (null: no limit). None when refused, and then nothing changed. The row lock serializes
   * concurrent reservations of the account until commit, so the limit holds exactly.
   */
  const reserveStorage = (accountId: string, unmetered: boolean, bytes: number, limit: number | null) =>
    sql<{ bytes: string }>`
      INSERT INTO storage_usage (account_id, unmetered, bytes)
      SELECT ${accountId}, ${unmetered}, ${bytes}
      WHERE ${limit}::bigint IS NULL OR ${bytes}::bigint <= ${limit}::bigint
      ON CONFLICT (account_id, unmetered) DO UPDATE SET bytes = storage_usage.bytes + ${bytes}
      WHERE ${limit}::bigint IS NULL OR storage_usage.bytes + ${bytes}::bigint <= ${limit}::bigint
      RETURNING bytes`.pipe(
      Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (r) => Number(r.bytes))),
      Effect.orDie
    )

  const adjustStorage = (accountId: string, unmetered: boolean, delta: number) =>
    delta === 0
      ? Effect.void
      : sql`
          INSERT INTO storage_usage (account_id, unmetered, bytes) VALUES (${accountId}, ${unmetered}, greatest(${delta}::bigint, 0))
          ON CONFLICT (account_id, unmetered) DO UPDATE SET bytes = greatest(storage_usage.bytes + ${delta}::bigint, 0)`.pipe(
          Effect.asVoid,
          Effect.orDie
        )

  /** Stored bytes (reservations included) of the account's ordinary and Partner images. */
  const storage = (accountId: string) =>
    sql<{ unmetered: boolean; bytes: string }>`
      SELECT unmetered, bytes FROM storage_usage WHERE account_id = ${accountId}`.pipe(
      Effect.map((rows) => ({
        ordinary: Number(rows.find((r) => !r.unmetered)?.bytes ?? 0),
        unmetered: Number(rows.find((r) => r.unmetered)?.bytes ?? 0)
      })),
      Effect.orDie
    )

  // --- lifecycle -------------------------------------------------------------------------

  const emit = (type: string, row: ImageRow, extra: Record<string, unknown> = {}) =>
    outbox.append(Topics.images, row.id, type, row.accountId, { ...imageEventData(row), ...extra })

  /**
   * The conversion job of a new image (its source is at the image's source_key). Converters
   * LISTENing on IMAGE_JOBS_CHANNEL hear of it the moment the transaction commits, ahead of
   * image.uploaded through the outbox and the log.
   */
  const insertJob = (imageId: string) =>
    sql`
      WITH job AS (INSERT INTO image_jobs (image_id) VALUES (${imageId}) RETURNING image_id)
      SELECT pg_notify(${IMAGE_JOBS_CHANNEL}, image_id) FROM job`.pipe(Effect.asVoid, Effect.orDie)

  /**
   * Ends a processing image in one of the transaction's steps: `update` sets its new state,
   * the reservation becomes `bytes` (0 for a failure), the job goes, and `type` is emitted.
   * None when the image is no longer processing (deleted, or ended by another worker), and
   * then nothing changed.
   */
  const endProcessing = (
    id: string,
    bytes: number,
    type: "image.converted" | "image.failed",
    update: Effect.Effect<unknown, unknown>
  ) =>
    Effect.gen(function* () {
      const current = yield* lockById(id)
      if (Option.isNone(current) || current.value.status !== "processing" || current.value.deletedAt !== null) {
        return Option.none<ImageRow>()
      }
      const image = current.value
      yield* Effect.orDie(update)
      yield* adjustStorage(image.accountId, image.unmetered, bytes - image.reservedBytes)
      yield* sql`DELETE FROM image_jobs WHERE image_id = ${id}`.pipe(Effect.orDie)
      const row = Option.getOrThrow(yield* byId(id))
      yield* emit(type, row)
      return Option.some(row)
    })

  /** Publishes a processing image: the reservation becomes the published size. */
  const markReady = (id: string, published: Published) =>
    endProcessing(
      id,
      published.bytes,
      "image.converted",
      sql`
        UPDATE images SET status = 'ready', mime_type = ${published.mimeType}, ext = ${published.ext},
          blob_key = ${published.blobKey}, width = ${published.width}, height = ${published.height},
          frames = ${published.frames}, animated = ${published.animated}, bytes = ${published.bytes},
          reserved_bytes = 0, updated_at = clock_timestamp()
        WHERE id = ${id}`
    )

  /** Ends a processing image for good, with the reason: the reservation is released. */
  const markFailed = (id: string, reason: string) =>
    endProcessing(
      id,
      0,
      "image.failed",
      sql`
        UPDATE images SET status = 'failed', failure = ${reason}, reserved_bytes = 0, updated_at = clock_timestamp()
        WHERE id = ${id}`
    )

  /**
   * Deletes the account's image: it leaves lists and delivery at once, its bytes (or its
   * reservation) are freed, its job and source go. The blob is removed afterwards by the
   * worker's sweep (`deletedBlobs`), so a crash cannot leave it behind.
   */
  const softDelete = (image: ImageRow) =>
    Effect.gen(function* () {
      yield* sql`UPDATE images SET deleted_at = clock_timestamp(), updated_at = clock_timestamp() WHERE id = ${image.id}`.pipe(
        Effect.orDie
      )
      yield* adjustStorage(image.accountId, image.unmetered, -((image.bytes ?? 0) + image.reservedBytes))
      yield* sql`DELETE FROM image_jobs WHERE image_id = ${image.id}`.pipe(Effect.orDie)
      const row = Option.getOrThrow(yield* byId(image.id))
      yield* emit("image.deleted", row)
      return row
    })

  /** Blobs of deleted images not yet removed. */
  const deletedBlobs = (limit: number) =>
    sql<{ id: string; blob_key: string }>`
      SELECT id, blob_key FROM images WHERE deleted_at IS NOT NULL AND blob_key IS NOT NULL
      ORDER BY deleted_at LIMIT ${limit}`.pipe(Effect.orDie)

  const blobRemoved = (id: string) =>
    sql`UPDATE images SET blob_key = NULL WHERE id = ${id} AND deleted_at IS NOT NULL`.pipe(Effect.asVoid, Effect.orDie)

  // --- ratings ---------------------------------------------------------------------------

  /**
   * Sets the effective rating, records it in the audit trail and emits image.rated. No
   * change (same rating and source) records nothing.
   */
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

  /**
   * An owner's declaration at creation (`general` or `nsfw`, which skip the classifier) goes
   * into the audit trail like every later change: a rating_changes row and image.rated.
   */
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

  /** A declaration that applies at once supersedes a pending review of the same image. */
  const closePendingReview = (imageId: string) =>
    sql`
      UPDATE rating_reviews SET status = 'rejected', decided_at = clock_timestamp()
      WHERE image_id = ${imageId} AND status = 'pending'`.pipe(Effect.asVoid, Effect.orDie)

  /**
   * Records an owner's request for a less strict rating. A pending request of the same image
   * is replaced (one pending review per image).
   */
  const requestReview = (image: ImageRow, requested: DeclaredRating) =>
    Effect.gen(function* () {
      yield* closePendingReview(image.id)
      yield* sql`
        INSERT INTO rating_reviews (id, image_id, account_id, requested, current_rating)
        VALUES (${newId("rev")}, ${image.id}, ${image.accountId}, ${requested}, ${image.rating})`.pipe(Effect.orDie)
      yield* sql`UPDATE images SET updated_at = clock_timestamp() WHERE id = ${image.id}`.pipe(Effect.orDie)
      const row = Option.getOrThrow(yield* byId(image.id))
      yield* emit("image.rating_review_requested", row, { requested })
      return row
    })

  const toReview = (r: {
    id: string
    image_id: string
    account_id: string
    requested: DeclaredRating
    current_rating: string
    status: ReviewStatus
    created_at: Date
    decided_at: Date | null
  }): Review => ({
    id: r.id,
    imageId: r.image_id,
    accountId: r.account_id,
    requested: r.requested,
    currentRating: r.current_rating,
    status: r.status,
    createdAt: r.created_at,
    decidedAt: r.decided_at
  })

  const pendingReviews = () =>
    sql<any>`
      SELECT r.* FROM rating_reviews r JOIN images i ON i.id = r.image_id
      WHERE r.status = 'pending' AND i.deleted_at IS NULL ORDER BY r.created_at`.pipe(
      Effect.map((rows) => rows.map(toReview)),
      Effect.orDie
    )

  /** The review, locked; None when there is none. */
  const reviewForUpdate = (id: string) =>
    sql<any>`SELECT * FROM rating_reviews WHERE id = ${id} FOR UPDATE`.pipe(
      Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toReview)),
      Effect.orDie
    )

  /**
   * Decides a pending review: approval applies the requested rating (source operator),
   * rejection leaves the effective rating as it is. Both emit image.rating_review_decided.
   */
  const decideReview = (review: Review, decision: "approved" | "rejected") =>
    Effect.gen(function* () {
      yield* sql`
        UPDATE rating_reviews SET status = ${decision}, decided_at = clock_timestamp() WHERE id = ${review.id}`.pipe(
        Effect.orDie
      )
      const locked = yield* lockById(review.imageId)
      if (Option.isNone(locked)) return Option.none<ImageRow>()
      let row = locked.value
      if (decision === "approved") row = yield* rate(row, review.requested, "operator", "operator")
      row = Option.getOrThrow(yield* byId(review.imageId))
      yield* emit("image.rating_review_decided", row, { requested: review.requested, decision })
      return Option.some(row)
    })

  // --- conversion jobs -------------------------------------------------------------------

  const toJob = (r: {
    image_id: string
    source_key: string | null
    attempts: number
    tier: "normal" | "fast"
    created_at: Date
  }): Job => ({
    imageId: r.image_id,
    sourceKey: r.source_key,
    attempts: r.attempts,
    tier: r.tier,
    createdAt: r.created_at
  })

  /**
   * Takes the job of this image under a lease of `leaseMs` unless another worker holds an
   * unexpired one or it is not due yet. None: nothing to do now.
   */
  const claim = (imageId: string, owner: string, leaseMs: number) =>
    sql<any>`
      UPDATE image_jobs j SET lease_owner = ${owner},
        lease_until = clock_timestamp() + ${leaseMs} * interval '1 millisecond'
      FROM images i
      WHERE j.image_id = ${imageId} AND i.id = j.image_id AND j.not_before <= clock_timestamp()
        AND (j.lease_until IS NULL OR j.lease_until < clock_timestamp())
      RETURNING j.image_id, i.source_key, j.attempts, j.tier, j.created_at`.pipe(
      Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toJob)),
      Effect.orDie
    )

  /** Ids of jobs that are due and not leased: retries, and jobs of crashed workers. */
  const dueJobs = (limit: number) =>
    sql<{ image_id: string }>`
      SELECT image_id FROM image_jobs
      WHERE not_before <= clock_timestamp() AND (lease_until IS NULL OR lease_until < clock_timestamp())
      ORDER BY not_before LIMIT ${limit}`.pipe(
      Effect.map((rows) => rows.map((r) => r.image_id)),
      Effect.orDie
    )

  /** Extends a lease the worker still holds; false when it lost it. */
  const renewLease = (imageId: string, owner: string, leaseMs: number) =>
    sql<{ image_id: string }>`
      UPDATE image_jobs SET lease_until = clock_timestamp() + ${leaseMs} * interval '1 millisecond'
      WHERE image_id = ${imageId} AND lease_owner = ${owner} RETURNING image_id`.pipe(
      Effect.map((rows) => rows.length > 0),
      Effect.orDie
    )

  /**
   * A temporary failure: the lease is released, the next attempt (fast tier) is due after
   * `delayMs`, and image.conversion_retry is emitted.
   */
  const retryLater = (imageId: string, error: string, delayMs: number) =>
    Effect.gen(function* () {
      const updated = yield* sql<{ image_id: string }>`
        UPDATE image_jobs SET attempts = attempts + 1, tier = 'fast', last_error = ${error},
          not_before = clock_timestamp() + ${delayMs} * interval '1 millisecond', lease_owner = NULL, lease_until = NULL
        WHERE image_id = ${imageId} RETURNING image_id`.pipe(Effect.orDie)
      // The job may be gone (published by another worker, purged, deleted): nothing to retry.
      if (updated.length === 0) return
      const row = yield* byId(imageId)
      if (Option.isSome(row)) yield* emit("image.conversion_retry", row.value)
    })

  /** Jobs whose private source is older than `maxAgeMs` (kept at most that long). */
  const expiredJobs = (maxAgeMs: number) =>
    sql<{ image_id: string }>`
      SELECT image_id FROM image_jobs WHERE created_at < clock_timestamp() - ${maxAgeMs} * interval '1 millisecond'`.pipe(
      Effect.map((rows) => rows.map((r) => r.image_id)),
      Effect.orDie
    )

  /**
   * Private sources no longer needed: the conversion ended (ready or failed) or the image was
   * deleted. The worker removes each blob, then `sourceRemoved`.
   */
  const staleSources = (limit: number) =>
    sql<{ id: string; source_key: string }>`
      SELECT id, source_key FROM images
      WHERE source_key IS NOT NULL AND (status <> 'processing' OR deleted_at IS NOT NULL)
      ORDER BY updated_at LIMIT ${limit}`.pipe(Effect.orDie)

  const sourceRemoved = (id: string) =>
    sql`
      UPDATE images SET source_key = NULL
      WHERE id = ${id} AND (status <> 'processing' OR deleted_at IS NOT NULL)`.pipe(Effect.asVoid, Effect.orDie)

  // --- reports ---------------------------------------------------------------------------

  const report = (imageId: string, reason: string) =>
    Effect.gen(function* () {
      const id = newId("rpt")
      yield* sql`INSERT INTO abuse_reports (id, image_id, reason) VALUES (${id}, ${imageId}, ${reason})`.pipe(
        Effect.orDie
      )
      return id
    })

  const openReports = () =>
    sql<{ id: string; image_id: string; reason: string; created_at: Date }>`
      SELECT id, image_id, reason, created_at FROM abuse_reports WHERE status = 'open' ORDER BY created_at`.pipe(
      Effect.orDie
    )

  return {
    emit,
    insert,
    byId,
    lockById,
    find,
    findForUpdate,
    search,
    reserveStorage,
    storage,
    insertJob,
    markReady,
    markFailed,
    softDelete,
    deletedBlobs,
    blobRemoved,
    rate,
    auditDeclaration,
    requestReview,
    closePendingReview,
    pendingReviews,
    reviewForUpdate,
    decideReview,
    claim,
    dueJobs,
    renewLease,
    retryLater,
    expiredJobs,
    staleSources,
    sourceRemoved,
    report,
    openReports
  } as const
})

export class Images extends Context.Tag("Images")<Images, Effect.Effect.Success<typeof make>>() {
  static readonly layer = Layer.effect(Images, make)
}
