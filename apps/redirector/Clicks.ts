import { randomBytes } from "node:crypto"
import { Effect, Either, Exit, Fiber, Metric } from "effect"
import { EventLog, type OutgoingRecord } from "../../domain/EventLog.js"
import { MAX_CLICKS_PER_EVENT, Topics } from "../../domain/Events.js"
import { cachedReferrerHost, cachedUserAgentParser, countryOf, utcDay, visitorHash } from "./ClickClassify.js"
import type { SlugEntry } from "./SlugTable.js"
import type { VisitorSecrets } from "./VisitorSecrets.js"

/** Values per click in the raw buffer: entry, time, ip, user agent, referer, country. */
const STRIDE = 6
/** Entries per in-memory cache (visitor hashes, user agents, referers, country headers). */
const CACHE_ENTRIES = 10_000
/** Raw clicks converted between two yields to the event loop. */
const CONVERT_SLICE = 1_000
/**
 * JSON characters per publish call at most (a few events): Kafka takes at most 1 MB per
 * partition and request by default (message.max.bytes), and a click is ~150 characters.
 */
const MAX_PUBLISH_CHARS = 400_000

export interface ClickCaptureOptions {
  /** Clicks held in memory at most (raw and waiting to be published); beyond, they are dropped. */
  readonly maxBuffered?: number
  /** Buffered clicks that trigger a flush before the interval (default 10000). */
  readonly batchSize?: number
  /** Clicks of one link per clicks.recorded event at most (default 1000, ~150 KB of JSON). */
  readonly clicksPerEvent?: number
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
 * Click capture: the buffer for the request path and a flusher that publishes to clicks.v1
 * every `intervalMs` or `batchSize` clicks, one clicks.recorded event per link per round
 * (of at most `clicksPerEvent` clicks). A failed publish keeps its events and retries them
 * with a back-off. Closing the scope stops the flusher and publishes what is left.
 */
export const makeClickCapture = (secrets: VisitorSecrets, options: ClickCaptureOptions = {}) =>
  Effect.gen(function* () {
    const log = yield* EventLog
    const batchSize = options.batchSize ?? 10_000
    const clicksPerEvent = Math.max(1, Math.min(options.clicksPerEvent ?? 1000, MAX_CLICKS_PER_EVENT))
    /** Clicks per publish call at most (several events): bounds one append after an outage. */
    const clicksPerPublish = Math.max(batchSize, clicksPerEvent)
    const intervalMs = options.intervalMs ?? 100
    const buffer = new ClickBuffer(options.maxBuffered ?? 1_000_000, batchSize)
    const classify = cachedUserAgentParser()
    const hostOf = cachedReferrerHost()

    // The JSON of a click's fields, per distinct input: user agents, referers and country
    // headers repeat, so each is classified and serialized once, not per click.
    const uaJson = new Map<string, string>()
    const refererJson = new Map<string, string>()
    const countryJson = new Map<string, string>()
    const cached = (cache: Map<string, string>, input: string, make: (input: string) => string) => {
      let hit = cache.get(input)
      if (hit === undefined) {
        hit = make(input)
        if (cache.size >= CACHE_ENTRIES) cache.delete(cache.keys().next().value!)
        cache.set(input, hit)
      }
      return hit
    }
    const makeUaJson = (userAgent: string) => {
      const ua = classify(userAgent)
      return `"device":"${ua.device}","browser":${JSON.stringify(ua.browser)},"bot":${ua.bot}`
    }
    const makeRefererJson = (referer: string) => {
      const host = hostOf(referer)
      return host === null ? "null" : JSON.stringify(host)
    }
    const makeCountryJson = (header: string) => {
      const country = countryOf(header)
      return country === null ? "null" : `"${country}"`
    }

    // Visitors come back (reloads, several links, crawlers): the day's last hashes are kept
    // for them (by user agent, then address), in memory only and forgotten when the day
    // changes or the cache is full.
    let visitors = new Map<string, Map<string, string>>()
    let visitorCount = 0
    let visitorsDay = -1
    const visitorOf = (day: number, secrets: Map<number, Uint8Array>, ip: string, userAgent: string) => {
      if (day !== visitorsDay || visitorCount >= CACHE_ENTRIES) {
        visitors = new Map()
        visitorCount = 0
        visitorsDay = day
      }
      let byIp = visitors.get(userAgent)
      if (byIp === undefined) {
        byIp = new Map()
        visitors.set(userAgent, byIp)
      }
      let hash = byIp.get(ip)
      if (hash === undefined) {
        hash = visitorHash(secrets.get(day)!, ip, userAgent)
        byIp.set(ip, hash)
        visitorCount++
      }
      return hash
    }

    /** Records ready to publish, in order, each chunk one publish call. */
    const waiting: Array<{ readonly records: Array<OutgoingRecord>; readonly clicks: number }> = []
    let reportedDrops = 0
    let failures = 0

    /** One link's clicks of a round, as JSON fragments of BatchedClick. */
    interface Group {
      readonly linkId: string
      readonly accountId: string
      clicks: Array<string>
    }

    /**
     * Raw clicks to clicks.recorded events, one per link (of at most `clicksPerEvent` clicks),
     * giving the event loop back between slices so a backlog does not stall redirects. Needs
     * each click day's secret: if that fails (or the flusher is stopped meanwhile), the clicks
     * go back to the front of the buffer.
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
        let lastDay = -1
        for (let i = 1; i < raw.length; i += STRIDE) {
          const day = utcDay(raw[i] as number)
          if (day !== lastDay) {
            lastDay = day
            days.set(day, new Uint8Array())
          }
        }
        const fetched = yield* Effect.exit(
          restore(Effect.forEach(days.keys(), (day) => Effect.map(secrets.get(day), (s) => days.set(day, s))))
        )
        if (Exit.isFailure(fetched)) {
          buffer.raw = raw.concat(buffer.raw)
          buffer.count += taken
          buffer.waiting -= taken
          return yield* fetched
        }
        // Per round a random prefix, per event a counter: unique ids without a CSPRNG call each.
        const idPrefix = `evt_${randomBytes(10).toString("hex")}`
        const occurredAt = new Date().toISOString()
        let sequence = 0
        let records: Array<OutgoingRecord> = []
        let recordClicks = 0
        const groups = new Map<string, Group>()
        let recordChars = 0
        /** The events made so far become one publish; later ones go out after it, so a link's stay in order. */
        const publishChunk = () => {
          if (records.length > 0) waiting.push({ records, clicks: recordClicks })
          records = []
          recordClicks = 0
          recordChars = 0
        }
        const emit = (group: Group) => {
          const value =
            `{"id":"${idPrefix}${(sequence++).toString(36)}","type":"clicks.recorded","version":1,` +
            `"occurred_at":"${occurredAt}","account_id":${JSON.stringify(group.accountId)},` +
            `"data":{"link_id":${JSON.stringify(group.linkId)},"clicks":[${group.clicks.join(",")}]}}`
          records.push({ key: group.linkId, value })
          recordClicks += group.clicks.length
          recordChars += value.length
          group.clicks = []
          if (recordClicks >= clicksPerPublish || recordChars >= MAX_PUBLISH_CHARS) publishChunk()
        }
        const seal = () => {
          for (const group of groups.values()) if (group.clicks.length > 0) emit(group)
          groups.clear()
          publishChunk()
        }
        let converted = 0
        for (let i = 0; i < raw.length; i += STRIDE) {
          const entry = raw[i] as SlugEntry
          const time = raw[i + 1] as number
          const ip = raw[i + 2] as string
          const userAgent = raw[i + 3] as string
          const referer = raw[i + 4] as string
          const header = raw[i + 5] as string
          let group = groups.get(entry.linkId)
          if (group === undefined) {
            group = { linkId: entry.linkId, accountId: entry.accountId, clicks: [] }
            groups.set(entry.linkId, group)
          }
          // A BatchedClick (domain/Events.ts), written out: this runs for every click.
          group.clicks.push(
            `{"at":${time},"country":${header === "" ? "null" : cached(countryJson, header, makeCountryJson)},` +
              `"referrer_host":${referer === "" ? "null" : cached(refererJson, referer, makeRefererJson)},` +
              `${cached(uaJson, userAgent, makeUaJson)},"visitor":"${visitorOf(utcDay(time), days, ip, userAgent)}"}`
          )
          if (group.clicks.length >= clicksPerEvent) emit(group)
          if (++converted % CONVERT_SLICE === 0) yield* Effect.sleep(0)
        }
        seal()
      })
    )

    const publish = Effect.gen(function* () {
      while (waiting.length > 0) {
        const chunk = waiting[0]!
        yield* log.publish(Topics.clicks, chunk.records)
        waiting.shift()
        buffer.waiting -= chunk.clicks
        yield* Metric.incrementBy(publishedClicks, chunk.clicks)
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
