import { Effect, Either, Fiber } from "effect"
import { EventLog, type OutgoingRecord } from "../../domain/EventLog.js"
import { Topics } from "../../domain/Events.js"
import { daysOf } from "./ClickConvert.js"
import { startConversionThread } from "./ClickConvertThread.js"
import { ClickBuffer } from "./ClickRound.js"
import type { ClickSpool } from "./ClickSpool.js"
import type { VisitorSecrets } from "./VisitorSecrets.js"

export interface ClickCaptureOptions {
  /** Clicks held in memory at most (raw and waiting to be published); beyond, they are dropped. */
  readonly maxBuffered?: number
  /** Buffered clicks that trigger a flush before the interval (default 10000). */
  readonly batchSize?: number
  /** Clicks of one account per clicks.recorded event at most (default 4000). */
  readonly clicksPerEvent?: number
  readonly intervalMs?: number
  /** How long closing keeps retrying to publish what is left (default 10 s). */
  readonly drainMs?: number
  /**
   * The crash spool: every click is written to it within a few milliseconds, and what an
   * earlier process left in it is published first. Without it a crash loses the buffer.
   */
  readonly spool?: ClickSpool | undefined
}

/**
 * Click capture: the buffer for the request path and a flusher that publishes to clicks.v1
 * every `intervalMs` or `batchSize` clicks, one clicks.recorded event per account per round
 * (of at most `clicksPerEvent` clicks), each round converted in the conversion thread
 * (ClickConvertThread.ts). A failed conversion or publish keeps its round or events and
 * retries them with a back-off. Closing the scope stops the flusher and publishes what is left.
 */
export const makeClickCapture = (secrets: VisitorSecrets, options: ClickCaptureOptions = {}) =>
  Effect.gen(function* () {
    const log = yield* EventLog
    const batchSize = options.batchSize ?? 10_000
    // A publish call carries at most a round's clicks (several events): bounds one append after an outage.
    const thread = yield* startConversionThread({ clicksPerEvent: options.clicksPerEvent, clicksPerPublish: batchSize })
    const intervalMs = options.intervalMs ?? 100
    const buffer = new ClickBuffer(options.maxBuffered ?? 1_000_000, batchSize)
    const spool = options.spool
    if (spool !== undefined) {
      // What a crashed (or cut short) process left: converted and published before anything
      // new, with the event ids it had, so what it had already published is not counted twice.
      for (const round of spool.recovered) {
        buffer.retry.push(round)
        buffer.waiting += round.count
      }
      if (spool.recovered.length > 0) {
        yield* Effect.logInfo(
          `click spool: publishing ${buffer.waiting} clicks of ${spool.recovered.length} rounds left by an earlier process`
        )
      }
      spool.attach(buffer)
    }
    /** Records ready to publish, in order, each chunk one publish call. */
    const waiting: Array<{
      readonly records: Array<OutgoingRecord>
      readonly clicks: number
      /** The spool segment of the round whose last events these are: deleted once they are published. */
      readonly segment?: unknown
    }> = []
    let reportedDrops = 0
    let failures = 0

    /**
     * The first round in line to its events, in the conversion thread. Needs each click day's
     * secret: if that fails, or the conversion does (or the flusher is stopped meanwhile), the
     * round stays first in line and nothing of it is published.
     */
    const convertFirstRound = Effect.uninterruptibleMask((restore) =>
      Effect.gen(function* () {
        const round = buffer.retry[0]!
        const days = new Map<number, Uint8Array>()
        for (const day of daysOf(round.times, round.count)) days.set(day, yield* restore(secrets.get(day)))
        const chunks = yield* restore(thread.convert(round.data(), days, new Date().toISOString()))
        waiting.push(...chunks)
        const segment = spool?.detach(round)
        // After the round's own chunks: deleted once they are all acknowledged.
        if (segment !== undefined) waiting.push({ records: [], clicks: 0, segment })
        buffer.retry.shift()
        buffer.release(round)
      })
    )

    /** Takes the current round and converts, in order, every round not converted yet. */
    const convert = Effect.gen(function* () {
      if (buffer.count > 0) buffer.retry.push(buffer.take())
      while (buffer.retry.length > 0) yield* convertFirstRound
    })

    const publish = Effect.gen(function* () {
      while (waiting.length > 0) {
        const chunk = waiting[0]!
        if (chunk.records.length > 0) yield* log.publish(Topics.clicks, chunk.records)
        if (chunk.segment !== undefined) spool?.remove(chunk.segment)
        waiting.shift()
        buffer.waiting -= chunk.clicks
        buffer.published += chunk.clicks
      }
    })

    const reportDrops = Effect.gen(function* () {
      const dropped = buffer.dropped - reportedDrops
      if (dropped === 0) return
      reportedDrops = buffer.dropped
      yield* Effect.logWarning(`click buffer full: ${dropped} clicks dropped (${buffer.dropped} in all)`)
    })

    /** One round; says whether everything went out. */
    const flush = Effect.gen(function* () {
      yield* reportDrops
      const result = yield* Effect.either(Effect.zipRight(convert, publish))
      if (Either.isLeft(result)) {
        failures++
        // One line per failure streak, then one every ~10 attempts: an outage must not flood the log.
        if (failures === 1 || failures % 10 === 0) {
          yield* Effect.logWarning(
            `click publish failed (attempt ${failures}), ${buffer.count + buffer.waiting} clicks kept for retry`,
            result.left
          )
        }
        return false
      }
      if (failures > 0) yield* Effect.logInfo(`click publish recovered after ${failures} failed attempts`)
      failures = 0
      return true
    })

    /** Sleeps for the interval (or the back-off), or until the request path fills a batch. */
    const pause = Effect.async<void>((resume) => {
      const ms = failures === 0 ? intervalMs : Math.min(intervalMs * 2 ** Math.min(failures, 6), 5_000)
      const done = () => {
        clearTimeout(timer)
        buffer.wake = undefined
        resume(Effect.void)
      }
      const timer = setTimeout(done, ms)
      if (failures === 0) buffer.wake = done
      if (failures === 0 && buffer.count >= batchSize) done()
      return Effect.sync(() => {
        clearTimeout(timer)
        buffer.wake = undefined
      })
    })

    const loop = Effect.forever(Effect.zipRight(pause, flush))

    /** At shutdown: stop the loop, then publish everything, retrying for up to `drainMs`. */
    const drain = Effect.gen(function* () {
      const deadline = Date.now() + (options.drainMs ?? 10_000)
      while (buffer.count + buffer.waiting > 0) {
        if (yield* flush) continue
        if (Date.now() >= deadline) break
        yield* Effect.sleep(Math.min(500, Math.max(0, deadline - Date.now())))
      }
      if (buffer.count + buffer.waiting > 0) {
        yield* Effect.logError(`shutting down with ${buffer.count + buffer.waiting} clicks not published`)
      }
    })

    // Forked inside the (uninterruptible) acquire, so it must be made interruptible itself.
    yield* Effect.acquireRelease(Effect.forkDaemon(Effect.interruptible(loop)), (fiber) =>
      Effect.zipRight(Fiber.interrupt(fiber), drain)
    )
    return buffer
  })
