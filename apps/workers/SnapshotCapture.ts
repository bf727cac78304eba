import { randomBytes } from "node:crypto"
import os from "node:os"
import { Cause, Config, Data, Effect, Either, Layer, Metric, Option, Queue, Runtime, Schedule, Schema } from "effect"
import { EventLog } from "../../domain/EventLog.js"
import { Topics } from "../../domain/Events.js"
import { Transactions } from "../../domain/ports/Database.js"
import { Notifications } from "../../domain/ports/Notifications.js"
import { SNAPSHOT_JOBS_CHANNEL, type SnapshotJob, SnapshotJobRepo } from "../../domain/ports/SnapshotRepo.js"
import { SNAPSHOT_BUDGET } from "../../domain/Snapshot.js"
import { snapshotCaptures, snapshotDuration, timed } from "../../infra/Metrics.js"
import { type CaptureBudget, CaptureFailed, capturePage } from "./snapshot/Capture.js"

export interface SnapshotCaptureOptions {
  /** The lease holder's name in snapshot_jobs (unique per worker). */
  readonly workerId: string
  /** A short lease, renewed every third of it while the capture runs, given back on stop. */
  readonly leaseMs: number
  /** How often due jobs (new, retried, those of stopped or crashed workers) are looked for. */
  readonly sweepMs: number
  readonly maxAttempts: number
  readonly retryBaseMs: number
  /** Captures at once. */
  readonly inFlight: number
  /** Also follow snapshots.v1 (group snapshot-capture); NOTIFY and the sweep are the other paths. */
  readonly followLog: boolean
  readonly budget: CaptureBudget
}

export const defaultSnapshotCaptureOptions = (): SnapshotCaptureOptions => ({
  workerId: `capture-${os.hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`,
  leaseMs: 15_000,
  sweepMs: 1_000,
  maxAttempts: 4,
  retryBaseMs: 2_000,
  inFlight: 2,
  followLog: true,
  budget: SNAPSHOT_BUDGET
})

class LeaseLost extends Data.TaggedError("LeaseLost")<{}> {}

const SnapshotEnvelope = Schema.Struct({ type: Schema.String, data: Schema.Struct({ id: Schema.String }) })

/**
 * The capture worker: ids come from NOTIFY on commit, from snapshot.requested on the log and
 * from a sweep of due jobs; a few runners each claim a job under a short lease (renewed
 * while working, given back when the worker stops, so another worker resumes it within a
 * sweep), capture the page (snapshot/Capture.ts) and end it: captured and published, retried
 * later (temporary failure, up to maxAttempts), or failed with a reason.
 */
export const runSnapshotCapture = (options: SnapshotCaptureOptions) =>
  Effect.gen(function* () {
    const jobs = yield* SnapshotJobRepo
    const transactions = yield* Transactions
    const notifications = yield* Notifications
    const renewEvery = Math.max(10, Math.floor(options.leaseMs / 3))

    const keepLease = (id: string) =>
      Effect.gen(function* () {
        while (true) {
          yield* Effect.sleep(renewEvery)
          const held = yield* jobs
            .renewLease(id, options.workerId, options.leaseMs)
            .pipe(Effect.catchAllDefect(() => Effect.succeed(true)))
          if (!held) return yield* new LeaseLost()
        }
      })

    const counted = (outcome: "captured" | "retry" | "failed") =>
      Metric.increment(Metric.tagged(snapshotCaptures, "outcome", outcome))

    const end = (job: SnapshotJob, failure: CaptureFailed | LeaseLost) => {
      if (failure._tag === "LeaseLost") return Effect.logWarning("snapshot capture: lease lost; stopped")
      const attempt = job.attempts + 1
      if (failure.temporary && attempt < options.maxAttempts) {
        const delay = options.retryBaseMs * 2 ** (attempt - 1)
        return counted("retry").pipe(
          Effect.zipRight(jobs.retryLater(job.snapshotId, options.workerId, failure.reason, delay)),
          Effect.zipRight(
            Effect.logWarning(`snapshot capture: attempt ${attempt} failed (${failure.reason}); retry in ${delay} ms`)
          )
        )
      }
      const reason = failure.temporary ? `${failure.reason} (after ${attempt} attempts)` : failure.reason
      return Effect.zipRight(
        counted("failed"),
        transactions.withTransaction(jobs.markFailed(job.snapshotId, options.workerId, reason))
      )
    }

    const run = (job: SnapshotJob) =>
      Effect.gen(function* () {
        const capture = capturePage(job.url, options.budget).pipe(timed(snapshotDuration, "captured", "failed"))
        const outcome = yield* Effect.raceFirst(capture, keepLease(job.snapshotId)).pipe(
          Effect.catchTag("BlobStoreError", (e) =>
            Effect.fail(new CaptureFailed({ reason: `storage: ${e.message}`, temporary: true }))
          ),
          Effect.either
        )
        if (Either.isLeft(outcome)) return yield* end(job, outcome.left)
        const done = yield* transactions.withTransaction(
          jobs.markCaptured(job.snapshotId, options.workerId, outcome.right)
        )
        if (Option.isNone(done)) yield* Effect.logWarning("snapshot capture: lease lost before the capture was stored")
        else yield* counted("captured")
      }).pipe(
        // Stopping (SIGTERM, scope closed): the lease goes back at once, so a restarted or another worker resumes it.
        Effect.onInterrupt(() =>
          jobs.release(job.snapshotId, options.workerId).pipe(Effect.catchAllCause(() => Effect.void))
        )
      )

    const processJob = (id: string) =>
      Effect.gen(function* () {
        const claimed = yield* jobs.claim(id, options.workerId, options.leaseMs)
        if (Option.isNone(claimed)) return
        if (claimed.value.attempts >= options.maxAttempts) {
          // Each attempt left its lease to run out: the page stops its worker (a crash, a hang).
          const reason = `capture_aborted: the capture stopped its worker ${claimed.value.attempts} times`
          yield* counted("failed")
          return yield* transactions.withTransaction(jobs.markFailed(id, options.workerId, reason))
        }
        yield* run(claimed.value)
      }).pipe(
        Effect.catchAllCause((cause) =>
          Cause.isInterruptedOnly(cause)
            ? Effect.failCause(cause)
            : Effect.logError("snapshot capture: job left for a later attempt", cause)
        ),
        Effect.annotateLogs({ snapshotId: id }),
        Effect.withSpan("SnapshotCapture.process", { kind: "consumer", root: true, attributes: { "snapshot.id": id } })
      )

    const queued = new Set<string>()
    const queue = yield* Effect.acquireRelease(Queue.dropping<string>(1024), Queue.shutdown)
    const enqueue = (id: string) =>
      Effect.suspend(() =>
        queued.has(id)
          ? Effect.void
          : Queue.offer(queue, id).pipe(
              Effect.tap((ok) => Effect.sync(() => ok && queued.add(id))),
              Effect.asVoid
            )
      )
    const runner = Queue.take(queue).pipe(
      Effect.flatMap((id) => processJob(id).pipe(Effect.ensuring(Effect.sync(() => queued.delete(id))))),
      Effect.forever
    )
    for (let i = 0; i < Math.max(1, options.inFlight); i++) yield* Effect.forkScoped(runner)

    const sweep = jobs.due(100).pipe(
      Effect.flatMap((ids) => Effect.forEach(ids, enqueue, { discard: true })),
      Effect.catchAllCause((cause) =>
        Cause.isInterruptedOnly(cause)
          ? Effect.failCause(cause)
          : Effect.logWarning("snapshot capture: sweep failed", cause)
      )
    )
    yield* Effect.forkScoped(Effect.repeat(sweep, Schedule.spaced(options.sweepMs)))

    const runtime = yield* Effect.runtime<never>()
    yield* notifications.listen(SNAPSHOT_JOBS_CHANNEL, (id) => {
      Runtime.runFork(runtime)(enqueue(id))
    })
    const log = options.followLog ? yield* Effect.serviceOption(EventLog) : Option.none()
    if (Option.isSome(log)) {
      yield* log.value.subscribe({ group: "snapshot-capture", topic: Topics.snapshots }, SnapshotEnvelope, (batch) =>
        Effect.forEach(
          batch.events.filter((e) => e.event.type === "snapshot.requested"),
          (e) => enqueue(e.event.data.id),
          { discard: true }
        )
      )
    }
    yield* Effect.logInfo(
      `snapshot capture: ${options.inFlight} at once, lease ${options.leaseMs} ms, sweep every ${options.sweepMs} ms`
    )
  })

/** A capture worker with explicit options (tests, benchmarks): never follows the log. */
export const snapshotCaptureLayer = (options: Partial<SnapshotCaptureOptions> = {}) =>
  Layer.scopedDiscard(runSnapshotCapture({ ...defaultSnapshotCaptureOptions(), followLog: false, ...options }))

const positive = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.validate({ message: "must be a positive integer", validation: (n) => n > 0 }),
    Config.withDefault(fallback)
  )

/**
 * The capture worker (following snapshots.v1 when an event log is given), configured by SNAPSHOT_LEASE_MS (15000) and SNAPSHOT_CAPTURE_CONCURRENCY
 * (2). Needs the event log, the snapshot repositories, transactions, notifications, the
 * SafeFetcher and the blob store.
 */
export const SnapshotCaptureLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const defaults = defaultSnapshotCaptureOptions()
    const leaseMs = yield* positive("SNAPSHOT_LEASE_MS", defaults.leaseMs)
    const inFlight = yield* positive("SNAPSHOT_CAPTURE_CONCURRENCY", defaults.inFlight)
    yield* runSnapshotCapture({ ...defaults, leaseMs, inFlight })
  })
)
