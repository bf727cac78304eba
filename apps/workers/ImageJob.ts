import { Cause, type Context, Data, Effect, Either, Option } from "effect"
import { extensionOf, type ImageId, type ImageJob } from "../../domain/Image.js"
import { BlobStore, type BlobStoreError } from "../../domain/ports/BlobStore.js"
import { Codec, type ConvertError, isTransient } from "../../domain/ports/Codec.js"
import { type DatabaseError, Transactions } from "../../domain/ports/Database.js"
import { ImageJobRepo } from "../../domain/ports/ImageJobRepo.js"
import { ImageRepo } from "../../domain/ports/ImageRepo.js"
import { conversionDuration, timed } from "../../infra/Metrics.js"
import { ImageTraces } from "../../infra/postgres/ImageTraces.js"
import { withJobSpan } from "../../infra/Tracing.js"
import { type ImageConverterOptions, retryDelay } from "./ImageConverterConfig.js"

/** Another worker took the job over (our lease had expired), or the job is gone (deleted, purged). */
class LeaseLost extends Data.TaggedError("LeaseLost")<{}> {}
class SourceMissing extends Data.TaggedError("SourceMissing")<{}> {}

/** What the client reads in `failure` for a permanent conversion error. */
export const permanentReason = (error: ConvertError): string => {
  switch (error._tag) {
    case "NotAnImage":
      return `Not a supported image (JPEG, PNG, GIF or WebP): ${error.message}`
    case "CorruptImage":
      return `The image data is damaged or truncated: ${error.message}`
    case "TooManyPixels":
      return `The image is too large to convert: ${error.message}`
    case "TooManyFrames":
      return `The animation has too many frames to convert: ${error.message}`
    case "ConversionMemoryExceeded":
      return `The conversion needed more memory than allowed: ${error.message}`
    default:
      return `The conversion failed: ${error.message}`
  }
}

type AttemptError = ConvertError | BlobStoreError | LeaseLost | SourceMissing

/** A temporary failure: what is logged and stored as last_error, and what a client may read. */
const temporary = (
  error: Exclude<AttemptError, LeaseLost | SourceMissing> | DatabaseError | { readonly _tag: "Unexpected" }
) => {
  switch (error._tag) {
    case "BlobStoreError":
      return { log: error.message, client: "the image store was unavailable" }
    case "SqlError":
      return { log: `SqlError: ${error.message}`, client: "the database was unavailable" }
    case "Unexpected":
      return { log: "unexpected error", client: "an internal error occurred" }
    default:
      return { log: `${error._tag}: ${error.message}`, client: error.message }
  }
}

/** The services one job's conversion uses. */
interface JobDeps {
  readonly transactions: Context.Tag.Service<typeof Transactions>
  readonly codec: Context.Tag.Service<typeof Codec>
  readonly blobs: Context.Tag.Service<typeof BlobStore>
  readonly images: Context.Tag.Service<typeof ImageRepo>
  readonly jobs: Context.Tag.Service<typeof ImageJobRepo>
}

/** One attempt at a claimed job: convert under the lease, then store and publish. */
const makeAttempt = (options: ImageConverterOptions, { transactions, codec, blobs, images, jobs }: JobDeps) => {
  const renewEvery = Math.max(10, Math.floor(options.leaseMs / 3))

  /** Renews the lease until interrupted; fails with LeaseLost once it is no longer ours. */
  const keepLease = (imageId: ImageId) =>
    Effect.gen(function* () {
      while (true) {
        yield* Effect.sleep(renewEvery)
        const held = yield* jobs.renewLease(imageId, options.workerId, options.leaseMs).pipe(
          // The database is briefly away: keep working, the lease may still hold.
          Effect.catchAllDefect((defect) =>
            Effect.as(Effect.logWarning("image converter: lease renewal failed", Cause.die(defect)), true)
          )
        )
        if (!held) return yield* new LeaseLost()
      }
    })

  const stillHeld = (imageId: ImageId) =>
    jobs
      .renewLease(imageId, options.workerId, options.leaseMs)
      .pipe(Effect.flatMap((held) => (held ? Effect.void : Effect.fail(new LeaseLost()))))

  /**
   * Convert while the lease is kept (losing it stops the converter), then store and publish:
   * that part is not raced, so a put or a commit is never cut off halfway.
   */
  const attempt = (job: ImageJob) =>
    Effect.gen(function* () {
      if (job.sourceKey === null) return yield* new SourceMissing()
      const stored = yield* blobs.get(job.sourceKey)
      if (Option.isNone(stored)) return yield* new SourceMissing()
      const source = stored.value
      const converted = yield* Effect.raceFirst(
        codec.convert(source, { tier: job.tier }).pipe(timed(conversionDuration, "converted", "failed")),
        keepLease(job.imageId)
      )
      const key = `images/${job.imageId}.${extensionOf(converted.mime_type)}`
      // Do not write over a blob that a worker which took over may already have published.
      yield* stillHeld(job.imageId)
      yield* blobs.put(key, converted.bytes, converted.mime_type)
      const published = yield* transactions.withTransaction(
        jobs.markReady(job.imageId, {
          mimeType: converted.mime_type,
          ext: extensionOf(converted.mime_type),
          blobKey: key,
          width: converted.width,
          height: converted.height,
          frames: converted.frames,
          animated: converted.animated,
          bytes: converted.bytes.length
        })
      )
      if (Option.isNone(published)) {
        // Deleted (or failed by the 24-hour purge) meanwhile: nothing may stay behind, unless
        // another worker published these very bytes under this key.
        const now = yield* images.byId(job.imageId)
        const ownedByOther = Option.exists(now, (i) => i.status === "ready" && i.blobKey === key && !i.deletedAt)
        if (!ownedByOther) {
          yield* blobs
            .remove(key)
            .pipe(Effect.catchAll((e) => Effect.logWarning(`image converter: could not remove ${key}: ${e.message}`)))
        }
        yield* Effect.logInfo("image converter: image gone before publication; its bytes were removed")
        return
      }
      yield* Effect.logDebug(
        `image converter: published ${key} (${converted.width} × ${converted.height}, ${converted.bytes.length} bytes)`
      )
    })
  return attempt
}

/** How a job ends: failed for good, retried later, its private source dropped. */
const makeOutcomes = (options: ImageConverterOptions, { transactions, blobs, images, jobs }: JobDeps) => {
  const fail = (imageId: ImageId, reason: string) =>
    transactions
      .withTransaction(jobs.markFailed(imageId, reason))
      .pipe(
        Effect.tap((row) =>
          Option.isSome(row) ? Effect.logInfo(`image converter: failed for good: ${reason}`) : Effect.void
        )
      )

  const retryOrFail = (job: ImageJob, problem: { readonly log: string; readonly client: string }) => {
    const failed = job.attempts + 1
    if (failed >= options.maxAttempts) {
      return fail(job.imageId, `The conversion failed temporarily ${failed} times; last error: ${problem.client}`)
    }
    const delay = retryDelay(options, failed)
    return transactions
      .withTransaction(jobs.retryLater(job.imageId, problem.log.slice(0, 1000), delay))
      .pipe(
        Effect.zipRight(
          Effect.logWarning(`image converter: attempt ${failed} failed (${problem.log}); retry in ${delay} ms`)
        )
      )
  }

  /** A private source is deleted once its conversion has ended (or the image is gone). */
  const dropSource = (imageId: ImageId, key: string) => Effect.zipRight(blobs.remove(key), jobs.sourceRemoved(imageId))

  /** Right after a job ends, so that the source is kept no longer than needed; the sweep retries. */
  const dropSourceIfDone = (job: ImageJob) =>
    job.sourceKey === null
      ? Effect.void
      : images.byId(job.imageId).pipe(
          Effect.flatMap((row) =>
            Option.isSome(row) && (row.value.status !== "processing" || row.value.deletedAt !== null)
              ? dropSource(job.imageId, job.sourceKey!)
              : Effect.void
          ),
          Effect.catchAllCause((cause) =>
            Cause.isInterruptedOnly(cause)
              ? Effect.void
              : Effect.logWarning("image converter: source left for the sweep", cause)
          )
        )
  return { fail, retryOrFail, dropSource, dropSourceIfDone }
}

/**
 * Converting one job: claim it under a durable lease, attempt it, and end it (published,
 * retried later or failed for good). Also hands out `fail` and `dropSource` for the sweep.
 */
export const makeJobProcessor = (options: ImageConverterOptions) =>
  Effect.gen(function* () {
    const deps: JobDeps = {
      transactions: yield* Transactions,
      codec: yield* Codec,
      blobs: yield* BlobStore,
      images: yield* ImageRepo,
      jobs: yield* ImageJobRepo
    }
    const jobs = deps.jobs
    const attempt = makeAttempt(options, deps)
    const { fail, retryOrFail, dropSource, dropSourceIfDone } = makeOutcomes(options, deps)

    const runJob = (job: ImageJob) =>
      Effect.gen(function* () {
        const imageId = job.imageId
        const outcome = yield* attempt(job).pipe(
          Effect.catchAllDefect((defect) => Effect.fail({ _tag: "Unexpected" as const, defect })),
          Effect.either
        )
        if (Either.isRight(outcome)) return
        const error = outcome.left
        switch (error._tag) {
          case "LeaseLost":
            return yield* Effect.logWarning(
              "image converter: the job was taken over or ended elsewhere (deleted, purged); stopped"
            )
          case "SourceMissing":
            return yield* fail(imageId, "The source of the image is no longer available.")
          case "Unexpected":
            yield* Effect.logError("image converter: unexpected error", Cause.die(error.defect))
            return yield* retryOrFail(job, temporary(error))
          case "BlobStoreError":
          case "SqlError":
            return yield* retryOrFail(job, temporary(error))
          default:
            return yield* isTransient(error)
              ? retryOrFail(job, temporary(error))
              : fail(imageId, permanentReason(error))
        }
      })

    const traces = yield* ImageTraces
    const processJob = (imageId: ImageId) =>
      Effect.gen(function* () {
        const claimed = yield* jobs.claim(imageId, options.workerId, options.leaseMs)
        if (Option.isNone(claimed)) return
        // A claimed job continues the upload's trace (a trace of its own when it has none).
        const traceparent = yield* traces.of(imageId)
        yield* runJob(claimed.value).pipe(
          Effect.ensuring(dropSourceIfDone(claimed.value)),
          withJobSpan("ImageConverter.convert", traceparent, {
            "image.id": imageId,
            "image.attempt": claimed.value.attempts + 1,
            "image.tier": claimed.value.tier
          })
        )
      }).pipe(
        // Whatever happens (database away while finishing), the worker goes on: the job stays
        // and is taken again once its lease expires.
        Effect.catchAllCause((cause) =>
          Cause.isInterruptedOnly(cause)
            ? Effect.failCause(cause)
            : Effect.logError("image converter: job left for a later attempt", cause)
        ),
        Effect.annotateLogs({ imageId })
      )

    return { processJob, fail, dropSource }
  })
