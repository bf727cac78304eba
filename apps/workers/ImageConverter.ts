import { Cause, Effect, Layer, Metric, Queue, Runtime, Schedule, Schema } from "effect"
import { EventLog } from "../../domain/EventLog.js"
import { type ImageId, isImageId } from "../../domain/Image.js"
import { BlobStore } from "../../domain/ports/BlobStore.js"
import { IMAGE_JOBS_CHANNEL, ImageJobRepo } from "../../domain/ports/ImageJobRepo.js"
import { ImageRepo } from "../../domain/ports/ImageRepo.js"
import { Notifications } from "../../domain/ports/Notifications.js"
import { conversionJobs } from "../../infra/Metrics.js"
import { gaugeSource } from "../../infra/Prometheus.js"
import { converterConfig, defaultImageConverterOptions, type ImageConverterOptions } from "./ImageConverterConfig.js"
import { makeJobProcessor } from "./ImageJob.js"

/** Decodes any images.v1 envelope: only `image.uploaded` matters, the others are skipped (not dead-lettered). */
const ImageEnvelope = Schema.Struct({
  id: Schema.String,
  type: Schema.String,
  data: Schema.Struct({ id: Schema.String })
})

export const EXPIRED_REASON =
  "The conversion did not succeed within 24 hours; the private source was kept 24 h and has been purged."

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
    const notifications = yield* Notifications
    const log = yield* EventLog
    const blobs = yield* BlobStore
    const images = yield* ImageRepo
    const jobs = yield* ImageJobRepo
    const { processJob, fail, dropSource } = yield* makeJobProcessor(options)

    // Runs after the runners below have been interrupted (finalizers run in reverse): the
    // leases of the jobs they held are given back, so the next start or another worker
    // resumes them at once instead of waiting for the leases to expire.
    yield* Effect.addFinalizer(() =>
      jobs.releaseAll(options.workerId).pipe(
        Effect.tap((n) => (n > 0 ? Effect.logInfo(`image converter: gave back ${n} lease(s)`) : Effect.void)),
        Effect.catchAllCause((cause) => Effect.logWarning("image converter: could not give back its leases", cause))
      )
    )

    // Ids waiting or being worked on: each is queued once. A full queue drops the id, and the
    // sweep finds its job again.
    const queued = new Set<ImageId>()
    const queue = yield* Effect.acquireRelease(Queue.dropping<ImageId>(1024), Queue.shutdown)
    let processing = 0
    yield* gaugeSource(Metric.tagged(conversionJobs, "state", "waiting"), () => queued.size - processing)
    yield* gaugeSource(Metric.tagged(conversionJobs, "state", "processing"), () => processing)
    const enqueue = (imageId: string) =>
      Effect.suspend(() => {
        // Ids from a notification or an event are decoded here: another shape names no job.
        if (!isImageId(imageId) || queued.has(imageId)) return Effect.void
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
        Effect.sync(() => processing++).pipe(
          Effect.zipRight(processJob(imageId)),
          Effect.ensuring(
            Effect.sync(() => {
              processing--
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

/** A converter with explicit options (tests, benchmarks). */
export const imageConverterLayer = (options: Partial<ImageConverterOptions> = {}) =>
  Layer.scopedDiscard(runImageConverter({ ...defaultImageConverterOptions(), ...options }))

/**
 * The conversion worker, configured by IMAGE_JOB_SWEEP_MS (2000), IMAGE_JOB_LEASE_MS (10000),
 * IMAGE_CONVERT_MAX_ATTEMPTS (6) and IMAGE_CONVERT_CONCURRENCY (the codec's). Needs the event
 * log, the image repositories, transactions, notifications, the codec and the blob store.
 */
export const ImageConverterLive = Layer.scopedDiscard(Effect.flatMap(converterConfig, runImageConverter))
