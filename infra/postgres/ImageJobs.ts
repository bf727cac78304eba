import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option } from "effect"
import { type Image, ImageId, type ImageJob, type Published } from "../../domain/Image.js"
import { IMAGE_JOBS_CHANNEL, ImageJobRepo } from "../../domain/ports/ImageJobRepo.js"
import { ImageRepo, type ImageRepoShape } from "../../domain/ports/ImageRepo.js"
import { StorageRepo, type StorageRepoShape } from "../../domain/ports/StorageRepo.js"

interface DbJob {
  image_id: string
  source_key: string | null
  attempts: number
  tier: "normal" | "fast"
  created_at: Date
}

const toJob = (r: DbJob): ImageJob => ({
  imageId: ImageId.make(r.image_id),
  sourceKey: r.source_key,
  attempts: r.attempts,
  tier: r.tier,
  createdAt: r.created_at
})

/**
 * The end of a conversion, in the caller's transaction: the image published or failed for
 * good, its reservation settled, its job gone and its event emitted.
 */
const makeEnding = (sql: PgClient.PgClient, images: ImageRepoShape, storage: StorageRepoShape) => {
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
      const current = yield* images.lockById(id)
      if (Option.isNone(current) || current.value.status !== "processing" || current.value.deletedAt !== null) {
        return Option.none<Image>()
      }
      const image = current.value
      yield* Effect.orDie(update)
      yield* storage.adjust(image.accountId, image.unmetered, bytes - image.reservedBytes)
      yield* sql`DELETE FROM image_jobs WHERE image_id = ${id}`.pipe(Effect.orDie)
      const row = Option.getOrThrow(yield* images.byId(id))
      yield* images.emit(type, row)
      return Option.some(row)
    })

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

  const markFailed = (id: string, reason: string) =>
    endProcessing(
      id,
      0,
      "image.failed",
      sql`
        UPDATE images SET status = 'failed', failure = ${reason}, reserved_bytes = 0, updated_at = clock_timestamp()
        WHERE id = ${id}`
    )

  return { markReady, markFailed }
}

/**
 * The conversion jobs in image_jobs, and the end of a conversion (the image published or
 * failed). Every write runs in the caller's transaction.
 */
const make = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient
  const images = yield* ImageRepo
  const { markReady, markFailed } = makeEnding(sql, images, yield* StorageRepo)

  /**
   * Converters LISTENing on IMAGE_JOBS_CHANNEL hear of the job the moment the transaction
   * commits, ahead of image.uploaded through the outbox and the log.
   */
  const insert = (imageId: string) =>
    sql`
      WITH job AS (INSERT INTO image_jobs (image_id) VALUES (${imageId}) RETURNING image_id)
      SELECT pg_notify(${IMAGE_JOBS_CHANNEL}, image_id) FROM job`.pipe(Effect.asVoid, Effect.orDie)

  const claim = (imageId: string, owner: string, leaseMs: number) =>
    sql<DbJob>`
      UPDATE image_jobs j SET lease_owner = ${owner},
        lease_until = clock_timestamp() + ${leaseMs} * interval '1 millisecond'
      FROM images i
      WHERE j.image_id = ${imageId} AND i.id = j.image_id AND j.not_before <= clock_timestamp()
        AND (j.lease_until IS NULL OR j.lease_until < clock_timestamp())
      RETURNING j.image_id, i.source_key, j.attempts, j.tier, j.created_at`.pipe(
      Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toJob)),
      Effect.orDie
    )

  const due = (limit: number) =>
    sql<{ image_id: string }>`
      SELECT image_id FROM image_jobs
      WHERE not_before <= clock_timestamp() AND (lease_until IS NULL OR lease_until < clock_timestamp())
      ORDER BY not_before LIMIT ${limit}`.pipe(
      Effect.map((rows) => rows.map((r) => ImageId.make(r.image_id))),
      Effect.orDie
    )

  const renewLease = (imageId: string, owner: string, leaseMs: number) =>
    sql<{ image_id: string }>`
      UPDATE image_jobs SET lease_until = clock_timestamp() + ${leaseMs} * interval '1 millisecond'
      WHERE image_id = ${imageId} AND lease_owner = ${owner} RETURNING image_id`.pipe(
      Effect.map((rows) => rows.length > 0),
      Effect.orDie
    )

  const releaseAll = (owner: string) =>
    sql<{ image_id: string }>`
      UPDATE image_jobs SET lease_owner = NULL, lease_until = NULL
      WHERE lease_owner = ${owner} RETURNING image_id`.pipe(
      Effect.map((rows) => rows.length),
      Effect.orDie
    )

  const retryLater = (imageId: string, error: string, delayMs: number) =>
    Effect.gen(function* () {
      const updated = yield* sql<{ image_id: string }>`
        UPDATE image_jobs SET attempts = attempts + 1, tier = 'fast', last_error = ${error},
          not_before = clock_timestamp() + ${delayMs} * interval '1 millisecond', lease_owner = NULL, lease_until = NULL
        WHERE image_id = ${imageId} RETURNING image_id`.pipe(Effect.orDie)
      // The job may be gone (published by another worker, purged, deleted): nothing to retry.
      if (updated.length === 0) return
      const row = yield* images.byId(imageId)
      if (Option.isSome(row)) yield* images.emit("image.conversion_retry", row.value)
    })

  const expired = (maxAgeMs: number) =>
    sql<{ image_id: string }>`
      SELECT image_id FROM image_jobs WHERE created_at < clock_timestamp() - ${maxAgeMs} * interval '1 millisecond'`.pipe(
      Effect.map((rows) => rows.map((r) => ImageId.make(r.image_id))),
      Effect.orDie
    )

  const staleSources = (limit: number) =>
    sql<{ id: string; source_key: string }>`
      SELECT id, source_key FROM images
      WHERE source_key IS NOT NULL AND (status <> 'processing' OR deleted_at IS NOT NULL)
      ORDER BY updated_at LIMIT ${limit}`.pipe(
      Effect.map((rows) => rows.map((r) => ({ id: ImageId.make(r.id), source_key: r.source_key }))),
      Effect.orDie
    )

  const sourceRemoved = (id: string) =>
    sql`
      UPDATE images SET source_key = NULL
      WHERE id = ${id} AND (status <> 'processing' OR deleted_at IS NOT NULL)`.pipe(Effect.asVoid, Effect.orDie)

  return ImageJobRepo.of({
    insert,
    claim,
    due,
    renewLease,
    releaseAll,
    retryLater,
    expired,
    markReady,
    markFailed,
    staleSources,
    sourceRemoved
  })
})

export const ImageJobRepoLive: Layer.Layer<ImageJobRepo, never, PgClient.PgClient | ImageRepo | StorageRepo> =
  Layer.effect(ImageJobRepo, make)
