import { type Duration, Effect, Layer, Option, Schedule } from "effect"
import { type Batch, EventLog } from "../../domain/EventLog.js"
import { ImageEvent, Topics } from "../../domain/Events.js"
import type { Image } from "../../domain/Image.js"
import { BlobStore } from "../../domain/ports/BlobStore.js"
import { Classifier, ClassifierError } from "../../domain/ports/Classifier.js"
import { Transactions } from "../../domain/ports/Database.js"
import { ImageRepo } from "../../domain/ports/ImageRepo.js"
import { classifierDuration, timed } from "../../infra/Metrics.js"
import { ImageTraces } from "../../infra/postgres/ImageTraces.js"
import { withJobSpan } from "../../infra/Tracing.js"

export const CLASSIFIER_GROUP = "image-classifier"
/**
 * Small batches: every image takes a classification (and, with the embedded log, the batch
 * runs in one transaction), so a batch should end in seconds, not minutes.
 */
export const CLASSIFIER_MAX_BATCH = 16

/**
 * The classifier rates an image only while the owner left it to the classifier: ready,
 * not deleted, `unrated` with no rating source (created with `auto`, never declared since).
 */
export const awaitsClassification = (row: Image): boolean =>
  row.status === "ready" &&
  row.deletedAt === null &&
  row.rating === "unrated" &&
  row.ratingSource === null &&
  row.blobKey !== null

export interface ImageClassifierOptions {
  readonly topic?: string
  readonly group?: string
  /** Classification attempts per image, the first included (default 4). */
  readonly attempts?: number
  /** Wait before the first retry; doubled for each further one (default 1 second). */
  readonly backoff?: Duration.DurationInput
}

export type Outcome = "rated" | "skipped" | "unrated"

/**
 * Classifies one image named by an image.converted event. The state is read fresh, so a
 * redelivered or stale event finds the image rated (or declared, or deleted) and does
 * nothing. A classifier that keeps failing leaves the image `unrated` (still published) and
 * the worker goes on; only the database failing fails the handler (and the batch is
 * delivered again).
 */
export const makeImageClassifierHandler = (options: ImageClassifierOptions = {}) =>
  Effect.gen(function* () {
    const transactions = yield* Transactions
    const images = yield* ImageRepo
    const blobs = yield* BlobStore
    const classifier = yield* Classifier
    const actor = `classifier:${classifier.name}`
    const retry = Schedule.exponential(options.backoff ?? "1 second").pipe(
      Schedule.intersect(Schedule.recurs(Math.max(0, (options.attempts ?? 4) - 1)))
    )

    const classifyBytes = (row: Image, key: string) =>
      blobs.get(key).pipe(
        Effect.mapError((e) => new ClassifierError({ message: `reading the published bytes: ${e.message}`, cause: e })),
        Effect.flatMap(
          Option.match({
            onNone: () => Effect.succeedNone,
            onSome: (bytes) =>
              Effect.asSome(classifier.classify(bytes).pipe(timed(classifierDuration, "rated", "failed")))
          })
        ),
        Effect.tapError((e) =>
          Effect.logInfo(`image classifier: attempt failed for ${row.id}: ${e.message}`).pipe(
            Effect.annotateLogs({ image: row.id })
          )
        ),
        Effect.retry(retry)
      )

    const classify = Effect.fnUntraced(function* (id: string) {
      const current = yield* images.byId(id)
      if (Option.isNone(current) || !awaitsClassification(current.value)) return "skipped" as Outcome
      const row = current.value
      const result = yield* Effect.either(classifyBytes(row, row.blobKey!))
      if (result._tag === "Left") {
        yield* Effect.logWarning(
          `image classifier: ${id} stays unrated (still published): ${result.left.message}`
        ).pipe(Effect.annotateLogs({ image: id }))
        return "unrated" as Outcome
      }
      if (Option.isNone(result.right)) {
        yield* Effect.logWarning(`image classifier: ${id} has no published bytes; left unrated`)
        return "skipped" as Outcome
      }
      const classification = result.right.value
      const rated = yield* Effect.gen(function* () {
        const locked = yield* images.lockById(id)
        if (Option.isNone(locked) || !awaitsClassification(locked.value)) return false
        yield* images.rate(locked.value, classification.rating, "classifier", actor)
        return true
      }).pipe(transactions.withTransaction, Effect.orDie)
      if (!rated) return "skipped" as Outcome
      yield* Effect.logInfo(`image classifier: ${id} rated ${classification.rating} by ${actor}`).pipe(
        Effect.annotateLogs({ image: id, scores: JSON.stringify(classification.scores) })
      )
      return "rated" as Outcome
    })
    const traces = yield* ImageTraces
    /** Rates one image, continuing its upload's trace (a trace of its own when it has none). */
    const classifyImage = (id: string) =>
      Effect.flatMap(traces.of(id), (traceparent) =>
        classify(id).pipe(
          Effect.tap((outcome) => Effect.annotateCurrentSpan("image.rating_outcome", outcome)),
          withJobSpan("ImageClassifier.rate", traceparent, { "image.id": id, "classifier.name": classifier.name })
        )
      )

    const handle = (batch: Batch<ImageEvent>) =>
      Effect.gen(function* () {
        const ids = new Set<string>()
        for (const { event } of batch.events) if (event.type === "image.converted") ids.add(event.data.id)
        for (const id of ids) yield* classifyImage(id)
      }).pipe(Effect.withSpan("ImageClassifier.batch"))

    return { handle, classifyImage }
  })

/** Subscribes the classification worker; it runs until the scope closes. */
export const runImageClassifier = (options: ImageClassifierOptions = {}) =>
  Effect.gen(function* () {
    const classifier = yield* Classifier
    const topic = options.topic ?? Topics.images
    const group = options.group ?? CLASSIFIER_GROUP
    if (!classifier.enabled) {
      // Not subscribing keeps the group's offsets where they are: a classifier configured
      // later starts from there and rates the images uploaded meanwhile.
      yield* Effect.logInfo(`image classifier: ${classifier.name}; not following ${topic}, auto images stay unrated`)
      return
    }
    const log = yield* EventLog
    const { handle } = yield* makeImageClassifierHandler(options)
    yield* log.subscribe({ group, topic, maxBatch: CLASSIFIER_MAX_BATCH }, ImageEvent, handle)
    yield* Effect.logInfo(`image classifier: ${classifier.name} following ${topic} as group ${group}`)
  })

/**
 * Rates `auto` images after publication (image.converted on images.v1, group
 * `image-classifier`) with the configured Classifier, until its scope closes.
 */
export const ImageClassifierLive = Layer.scopedDiscard(runImageClassifier())
