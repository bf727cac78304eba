import { randomBytes } from "node:crypto"
import os from "node:os"
import { Cause, Config, Data, Effect, Either, Layer, Option, Queue, Runtime, Schedule, Schema } from "effect"
import { EventLog } from "../../domain/EventLog.js"
import { Topics } from "../../domain/Events.js"
import { extensionOf, type ImageJob, SOURCE_RETENTION_MS } from "../../domain/Image.js"
import { BlobStore, type BlobStoreError } from "../../domain/ports/BlobStore.js"
import { Codec, type ConvertError, isTransient } from "../../domain/ports/Codec.js"
import { type DatabaseError, Transactions } from "../../domain/ports/Database.js"
import { IMAGE_JOBS_CHANNEL, ImageJobRepo } from "../../domain/ports/ImageJobRepo.js"
import { ImageRepo } from "../../domain/ports/ImageRepo.js"
import { Notifications } from "../../domain/ports/Notifications.js"
import { defaultCodecOptions } from "../../infra/codec/ImageCodec.js"

export const CONVERTER_GROUP = "image-converter"

export interface ImageConverterOptions {
  /** The lease holder's name in image_jobs (unique per worker). */
  readonly workerId: string
  /** How long a claim holds a job; renewed every third of it while the conversion runs. */
  readonly leaseMs: number
  /** How often retries, jobs of crashed workers, expired sources and deleted blobs are looked for. */
  readonly sweepMs: number
  /** Attempts before a temporary failure becomes permanent. */
  readonly maxAttempts: number
  /** Back-off after the n-th failed attempt: base × 4^(n-1), at most `retryMaxMs`. */
  readonly retryBaseMs: number
  readonly retryMaxMs: number
  /** Private sources are kept this long, then purged and the image fails. */
  readonly retentionMs: number
  /** Jobs worked on at once (each holds its source in memory). */
  readonly inFlight: number
  readonly topic: string
  readonly group: string
}

export const defaultImageConverterOptions = (): ImageConverterOptions => ({
  workerId: `converter-${os.hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`,
  // Above the codec's longest guard (fast tier: 2 × 60 s, plus 5 s to kill), should renewals stall.
  leaseMs: 180_000,
  sweepMs: 2_000,
  maxAttempts: 6,
  retryBaseMs: 1_000,
  retryMaxMs: 300_000,
  retentionMs: SOURCE_RETENTION_MS,
  inFlight: defaultCodecOptions().concurrency + 1,
  topic: Topics.images,
  group: CONVERTER_GROUP
})

/** Decodes any images.v1 envelope: only `image.uploaded` matters, the others are skipped (not dead-lettered). */
const ImageEnvelope = Schema.Struct({
  id: Schema.String,
  type: Schema.String,
  data: Schema.Struct({ id: Schema.String })
})

/** Another worker took the job over (our lease had expired), or the job is gone (deleted, purged). */
class LeaseLost extends Data.TaggedError("LeaseLost")<{}> {}
class SourceMissing extends Data.TaggedError("SourceMissing")<{}> {}

export const EXPIRED_REASON =
  "The conversion did not succeed within 24 hours; the private source was kept 24 h and has been purged."

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

export const retryDelay = (options: ImageConverterOptions, failedAttempt: number) =>
  Math.min(options.retryMaxMs, options.retryBaseMs * 4 ** Math.max(0, failedAttempt - 1))

/**
 * The conversion worker. `image.uploaded` events (group `image-converter`) and a sweep feed
 * image ids to a few runners; each claims the job under a durable lease (renewed while it
 * works), converts the private source, stores the bytes at `images/<id>.<ext>`, then
 * publishes in one transaction (`image.converted` goes to the outbox with it). A temporary
 * failure is retried later at the fast tier with exponential back-off, a permanent one ends
 * the image `failed` with a reason. The job row is the durable truth: the event only makes
 * the start prompt, the sweep finds everything else (retries, jobs of crashed workers,
 * events lost between commit and conversion), fails sources older than 24 hours and removes
 * blobs of deleted images. One bad image never stops the worker.
 */
export const runImageConverter = (options: ImageConverterOptions) =>
  Effect.gen(function* () {
    const transactions = yield* Transactions
    const notifications = yield* Notifications
    const log = yield* EventLog
    const codec = yield* Codec
    const blobs = yield* BlobStore
    const images = yield* ImageRepo
    const jobs = yield* ImageJobRepo

    const renewEvery = Math.max(10, Math.floor(options.leaseMs / 3))

    /** Renews the lease until interrupted; fails with LeaseLost once it is no longer ours. */
    const keepLease = (imageId: string) =>
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

    const stillHeld = (imageId: string) =>
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
        const converted = yield* Effect.raceFirst(codec.convert(source, { tier: job.tier }), keepLease(job.imageId))
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

    const fail = (imageId: string, reason: string) =>
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
    const dropSource = (imageId: string, key: string) => Effect.zipRight(blobs.remove(key), jobs.sourceRemoved(imageId))

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

    const processJob = (imageId: string) =>
      Effect.gen(function* () {
        const claimed = yield* jobs.claim(imageId, options.workerId, options.leaseMs)
        if (Option.isNone(claimed)) return
        yield* runJob(claimed.value).pipe(Effect.ensuring(dropSourceIfDone(claimed.value)))
      }).pipe(
        // Whatever happens (database away while finishing), the worker goes on: the job stays
        // and is taken again once its lease expires.
        Effect.catchAllCause((cause) =>
          Cause.isInterruptedOnly(cause)
            ? Effect.failCause(cause)
            : Effect.logError("image converter: job left for a later attempt", cause)
        ),
        Effect.annotateLogs({ imageId }),
        Effect.withSpan("ImageConverter.process", { attributes: { imageId } })
      )

    // Ids waiting or being worked on: each is queued once. A full queue drops the id, and the
    // sweep finds its job again.
    const queued = new Set<string>()
    const queue = yield* Effect.acquireRelease(Queue.dropping<string>(1024), Queue.shutdown)
    const enqueue = (imageId: string) =>
      Effect.suspend(() => {
        if (queued.has(imageId)) return Effect.void
        return Queue.offer(queue, imageId).pipe(
          Effect.tap((accepted) =>
            Effect.sync(() => {
              if (accepted) queued.add(imageId)
            })
          ),
          Effect.asVoid
        )
      })

    const runner = Queue.take(queue).pipe(
      Effect.flatMap((imageId) =>
        processJob(imageId).pipe(
          Effect.ensuring(
            Effect.sync(() => {
              queued.delete(imageId)
            })
          )
        )
      ),
      Effect.forever
    )
    for (let i = 0; i < Math.max(1, options.inFlight); i++) yield* Effect.forkScoped(runner)

    const step = <A, E, R>(what: string, effect: Effect.Effect<A, E, R>) =>
      effect.pipe(
        Effect.catchAllCause((cause) =>
          Cause.isInterruptedOnly(cause)
            ? Effect.failCause(cause)
            : Effect.logWarning(`image converter: ${what} failed`, cause)
        )
      )

    const sweep = Effect.gen(function* () {
      for (const id of yield* step("expiry scan", jobs.expired(options.retentionMs)).pipe(
        Effect.map((ids) => ids ?? [])
      )) {
        yield* step("purging an expired source", fail(id, EXPIRED_REASON)).pipe(Effect.annotateLogs({ imageId: id }))
      }
      const due = yield* step("due-job scan", jobs.due(200))
      for (const id of due ?? []) yield* enqueue(id)
      for (const { id, source_key } of (yield* step("source scan", jobs.staleSources(200))) ?? []) {
        yield* step("removing a private source", dropSource(id, source_key)).pipe(Effect.annotateLogs({ imageId: id }))
      }
      const gone = yield* step("deleted-blob scan", images.deletedBlobs(200))
      for (const { blob_key, id } of gone ?? []) {
        yield* step(
          "removing a deleted image's blob",
          Effect.zipRight(blobs.remove(blob_key), images.blobRemoved(id))
        ).pipe(Effect.annotateLogs({ imageId: id }))
      }
    })
    yield* Effect.forkScoped(Effect.repeat(sweep, Schedule.spaced(options.sweepMs)))

    // The handler runs inside the log's offset transaction: it only queues ids, the runners
    // work outside it.
    // The fast path: a new job is announced on commit. The event below and the sweep stay the
    // durable paths (a missed notification only costs latency).
    const runtime = yield* Effect.runtime<never>()
    yield* notifications.listen(IMAGE_JOBS_CHANNEL, (imageId) => {
      Runtime.runFork(runtime)(enqueue(imageId))
    })
    yield* log.subscribe({ group: options.group, topic: options.topic }, ImageEnvelope, (batch) =>
      Effect.forEach(
        batch.events.filter((e) => e.event.type === "image.uploaded"),
        (e) => enqueue(e.event.data.id),
        { discard: true }
      )
    )
    yield* Effect.logInfo(
      `image converter: ${options.inFlight} job(s) at once, following ${options.topic} as group ${options.group}, ` +
        `sweep every ${options.sweepMs} ms, lease ${options.leaseMs} ms, ${options.maxAttempts} attempts`
    )
  })

const positive = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.validate({ message: "must be a positive integer", validation: (n) => n > 0 }),
    Config.withDefault(fallback)
  )

const converterConfig = Effect.gen(function* () {
  const defaults = defaultImageConverterOptions()
  const values = yield* Config.all({
    sweepMs: positive("IMAGE_JOB_SWEEP_MS", defaults.sweepMs),
    leaseMs: Config.integer("IMAGE_JOB_LEASE_MS").pipe(
      Config.validate({ message: "must be an integer of at least 1000 (ms)", validation: (n) => n >= 1000 }),
      Config.withDefault(defaults.leaseMs)
    ),
    maxAttempts: positive("IMAGE_CONVERT_MAX_ATTEMPTS", defaults.maxAttempts),
    // The codec's own setting: one job per conversion slot, plus one whose source is ready.
    concurrency: positive("IMAGE_CONVERT_CONCURRENCY", defaultCodecOptions().concurrency)
  })
  return {
    ...defaults,
    sweepMs: values.sweepMs,
    leaseMs: values.leaseMs,
    maxAttempts: values.maxAttempts,
    inFlight: values.concurrency + 1
  } satisfies ImageConverterOptions
})

/** A converter with explicit options (tests, benchmarks). */
export const imageConverterLayer = (options: Partial<ImageConverterOptions> = {}) =>
  Layer.scopedDiscard(runImageConverter({ ...defaultImageConverterOptions(), ...options }))

/**
 * The conversion worker, configured by IMAGE_JOB_SWEEP_MS (2000), IMAGE_JOB_LEASE_MS (180000),
 * IMAGE_CONVERT_MAX_ATTEMPTS (6) and IMAGE_CONVERT_CONCURRENCY (the codec's). Needs the event
 * log, the image repositories, transactions, notifications, the codec and the blob store.
 */
export const ImageConverterLive = Layer.scopedDiscard(Effect.flatMap(converterConfig, runImageConverter))
