import { randomBytes } from "node:crypto"
import { Effect, Either, Exit, Fiber, Metric } from "effect"
import { EventLog, type OutgoingRecord } from "../../domain/EventLog.js"
import { Topics } from "../../domain/Events.js"
import { cachedReferrerHost, cachedUserAgentParser, countryOf, utcDay, visitorHash } from "./ClickClassify.js"
import type { SlugEntry } from "./SlugTable.js"
import type { VisitorSecrets } from "./VisitorSecrets.js"

/** Values per click in the raw buffer: entry, time, ip, user agent, referer, country. */
const STRIDE = 6
const VISITOR_CACHE = 10_000

export interface ClickCaptureOptions {
  /** Clicks held in memory at most (raw and waiting to be published); beyond, they are dropped. */
  readonly maxBuffered?: number
  /** Clicks per publish, and the buffer size that triggers a flush before the interval. */
  readonly batchSize?: number
  readonly intervalMs?: number
  /** How long closing keeps retrying to publish what is left (default 10 s). */
  readonly drainMs?: number
}

const droppedClicks = Metric.counter("redirector_clicks_dropped_total", {
  description: "Clicks not recorded because the click buffer was full (event log unavailable for too long)."
})
const publishedClicks = Metric.counter("redirector_clicks_published_total")

/**
 * The request path's side of click capture: a flat array the handler pushes into. Address
 * and user agent stay in this process; the flusher turns them into the event's privacy
 * fields before anything is published.
 */
export class ClickBuffer {
  raw: Array<unknown> = []
  count = 0
  /** Clicks converted to records, waiting to be published. */
  waiting = 0
  dropped = 0
  /** Set while the flusher sleeps: cuts the sleep short when a batch is full. */
  wake: (() => void) | undefined = undefined

  constructor(
    readonly maxBuffered: number,
    readonly batchSize: number
  ) {}

  record(entry: SlugEntry, time: number, ip: string, userAgent: string, referer: string, country: string): void {
    if (this.count + this.waiting >= this.maxBuffered) {
      this.dropped++
      return
    }
    this.raw.push(entry, time, ip, userAgent, referer, country)
    if (++this.count >= this.batchSize && this.wake !== undefined) this.wake()
  }
}

/**
 * Click capture: the buffer for the request path and a flusher that publishes batches to
 * clicks.v1 every `intervalMs` or `batchSize` clicks. A failed publish keeps its batch and
 * retries with a back-off. Closing the scope stops the flusher and publishes what is left.
 */
export const makeClickCapture = (secrets: VisitorSecrets, options: ClickCaptureOptions = {}) =>
  Effect.gen(function* () {
    const log = yield* EventLog
    const batchSize = options.batchSize ?? 1000
    const intervalMs = options.intervalMs ?? 100
    const buffer = new ClickBuffer(options.maxBuffered ?? 1_000_000, batchSize)
    const classify = cachedUserAgentParser()
    const hostOf = cachedReferrerHost()
    let lastTime = 0
    let lastIso = ""
    // Visitors come back (reloads, several links, crawlers): the day's last hashes are kept
    // for them, in memory only and forgotten when the day changes.
    const visitors = new Map<string, string>()
    let visitorsDay = -1
    const visitorOf = (day: number, secrets: Map<number, Uint8Array>, ip: string, userAgent: string) => {
      if (day !== visitorsDay) {
        visitors.clear()
        visitorsDay = day
      }
      const key = `${ip}\n${userAgent}`
      let hash = visitors.get(key)
      if (hash === undefined) {
        hash = visitorHash(secrets.get(day)!, ip, userAgent)
        if (visitors.size >= VISITOR_CACHE) visitors.delete(visitors.keys().next().value!)
        visitors.set(key, hash)
      }
      return hash
    }
    const waiting: Array<Array<OutgoingRecord>> = []
    let reportedDrops = 0
    let failures = 0

    /** One click of the raw buffer as a clicks.v1 record. */
    const toRecord = (
      raw: Array<unknown>,
      i: number,
      idPrefix: string,
      sequence: number,
      days: Map<number, Uint8Array>
    ) => {
      const entry = raw[i] as SlugEntry
      const time = raw[i + 1] as number
      const userAgent = raw[i + 3] as string
      const ua = classify(userAgent)
      if (time !== lastTime) {
        lastTime = time
        lastIso = new Date(time).toISOString()
      }
      const country = countryOf(raw[i + 5] as string)
      const referrer = hostOf(raw[i + 4] as string)
      const visitor = visitorOf(utcDay(time), days, raw[i + 2] as string, userAgent)
      // The ClickRecorded envelope, written out: this runs for every click.
      const value =
        `{"id":"${idPrefix}${sequence.toString(36)}","type":"click.recorded","version":1,` +
        `"occurred_at":"${lastIso}","account_id":${JSON.stringify(entry.accountId)},` +
        `"data":{"link_id":${JSON.stringify(entry.linkId)},"country":${country === null ? "null" : `"${country}"`},` +
        `"referrer_host":${referrer === null ? "null" : JSON.stringify(referrer)},"device":"${ua.device}",` +
        `"browser":${JSON.stringify(ua.browser)},"bot":${ua.bot},"visitor":"${visitor}"}}`
      return { key: entry.linkId, value }
    }

    /**
     * Raw clicks to records, a batch at a time, giving the event loop back between batches so a
     * backlog does not stall redirects. Needs each click day's secret: if that fails (or the
     * flusher is stopped meanwhile), the clicks go back to the front of the buffer.
     */
    const convert = Effect.uninterruptibleMask((restore) =>
      Effect.gen(function* () {
        if (buffer.count === 0) return
        const raw = buffer.raw
        const taken = buffer.count
        buffer.raw = []
        buffer.count = 0
        buffer.waiting += taken
        const days = new Map<number, Uint8Array>()
        for (let i = 1; i < raw.length; i += STRIDE) days.set(utcDay(raw[i] as number), new Uint8Array())
        const fetched = yield* Effect.exit(
          restore(Effect.forEach(days.keys(), (day) => Effect.map(secrets.get(day), (s) => days.set(day, s))))
        )
        if (Exit.isFailure(fetched)) {
          buffer.raw = raw.concat(buffer.raw)
          buffer.count += taken
          buffer.waiting -= taken
          return yield* fetched
        }
        // Per round a random prefix, per click a counter: unique ids without a CSPRNG call each.
        const idPrefix = `evt_${randomBytes(10).toString("hex")}`
        for (let start = 0; start < raw.length; start += batchSize * STRIDE) {
          if (start > 0) yield* Effect.sleep(0)
          const end = Math.min(raw.length, start + batchSize * STRIDE)
          const chunk: Array<OutgoingRecord> = []
          for (let i = start; i < end; i += STRIDE) chunk.push(toRecord(raw, i, idPrefix, i / STRIDE, days))
          waiting.push(chunk)
        }
      })
    )

    const publish = Effect.gen(function* () {
      while (waiting.length > 0) {
        const chunk = waiting[0]!
        yield* log.publish(Topics.clicks, chunk)
        waiting.shift()
        buffer.waiting -= chunk.length
        yield* Metric.incrementBy(publishedClicks, chunk.length)
      }
    })

    const reportDrops = Effect.gen(function* () {
      const dropped = buffer.dropped - reportedDrops
      if (dropped === 0) return
      reportedDrops = buffer.dropped
      yield* Metric.incrementBy(droppedClicks, dropped)
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
