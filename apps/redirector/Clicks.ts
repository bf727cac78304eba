import { Effect, Either, Fiber } from "effect"
import { EventLog, type OutgoingRecord } from "../../domain/EventLog.js"
import { MAX_CLICKS_PER_EVENT, Topics } from "../../domain/Events.js"
import { BoundedCache } from "../../infra/BoundedCache.js"
import { cachedReferrerHost, cachedUserAgentParser, countryOf, utcDay, visitorHash } from "./ClickClassify.js"
import { ClickGroup, MAX_EVENT_LIST_CHARS } from "./ClickGroup.js"
import { ClickBuffer } from "./ClickRound.js"
import type { ClickSpool } from "./ClickSpool.js"
import type { VisitorSecrets } from "./VisitorSecrets.js"

/** Entries per in-memory cache (visitor hashes, user agents, referers, country headers). */
const CACHE_ENTRIES = 10_000
/** Raw clicks converted between two yields to the event loop. */
const CONVERT_SLICE = 1_000
/**
 * Empty groups a round leaves to the next (ClickGroup.reuse), so an account's lists are not
 * grown again each round; each holds at most ~1 MB (its list of links under
 * MAX_EVENT_LIST_CHARS, and its index).
 */
const SPARE_GROUPS = 4
/** Clicks per clicks.recorded event by default. */
const CLICKS_PER_EVENT = 4_000
/**
 * JSON characters per publish call at most (a few events): Kafka takes at most 1 MB per
 * partition and request by default (message.max.bytes).
 */
const MAX_PUBLISH_CHARS = 400_000

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
 * (of at most `clicksPerEvent` clicks). A failed publish keeps its events and retries them
 * with a back-off. Closing the scope stops the flusher and publishes what is left.
 */
export const makeClickCapture = (secrets: VisitorSecrets, options: ClickCaptureOptions = {}) =>
  Effect.gen(function* () {
    const log = yield* EventLog
    const batchSize = options.batchSize ?? 10_000
    const clicksPerEvent = Math.max(1, Math.min(options.clicksPerEvent ?? CLICKS_PER_EVENT, MAX_CLICKS_PER_EVENT))
    /** Clicks per publish call at most (several events): bounds one append after an outage. */
    const clicksPerPublish = Math.max(batchSize, clicksPerEvent)
    const intervalMs = options.intervalMs ?? 100
    const buffer = new ClickBuffer(options.maxBuffered ?? 1_000_000, batchSize)
    const spool = options.spool
    if (spool !== undefined) {
      // What a crashed (or cut short) process left: converted and published before anything
      // new, with the event ids it had, so what it had already published is not counted twice.
      for (const round of spool.recovered) {
        buffer.taken.push(round)
        buffer.waiting += round.count
      }
      if (spool.recovered.length > 0) {
        yield* Effect.logInfo(
          `click spool: publishing ${buffer.waiting} clicks of ${spool.recovered.length} rounds left by an earlier process`
        )
      }
      spool.attach(buffer)
    }
    const classify = cachedUserAgentParser()
    const hostOf = cachedReferrerHost()

    // The JSON of a click's fields, per distinct input: user agents, referers and country
    // headers repeat, so each is classified and serialized once, not per click.
    const uaJson = new BoundedCache<string, string>({ maxWeight: CACHE_ENTRIES })
    const refererJson = new BoundedCache<string, string>({ maxWeight: CACHE_ENTRIES })
    const countryJson = new BoundedCache<string, string>({ maxWeight: CACHE_ENTRIES })
    const cached = (cache: BoundedCache<string, string>, input: string, make: (input: string) => string) =>
      cache.getOrCompute(input, make)
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
    const waiting: Array<{
      readonly records: Array<OutgoingRecord>
      readonly clicks: number
      /** The spool segment of the round whose last events these are: deleted once they are published. */
      readonly segment?: unknown
    }> = []
    let reportedDrops = 0
    let failures = 0
    const spareGroups: Array<ClickGroup> = []

    /**
     * One round's clicks to clicks.recorded events, one per account (of at most
     * `clicksPerEvent` clicks and MAX_EVENT_LIST_CHARS of lists), giving the event loop back between slices so a backlog does not stall
     * redirects. Needs each click day's secret: if that fails (or the flusher is stopped
     * meanwhile), the round stays first in line and nothing of it is published.
     */
    const convertFirstRound = Effect.uninterruptibleMask((restore) =>
      Effect.gen(function* () {
        const round = buffer.taken[0]!
        const n = round.count
        const { times, run, runLink, runAccount, peers, agents, referers, countries } = round
        const peerTexts = round.peerValues.values
        const agentTexts = round.agentValues.values
        const refererTexts = round.refererValues.values
        const countryTexts = round.countryValues.values
        const days = new Map<number, Uint8Array>()
        let lastDay = -1
        for (let i = 0; i < n; i++) {
          const day = utcDay(times[i]!)
          if (day !== lastDay) {
            lastDay = day
            days.set(day, new Uint8Array())
          }
        }
        yield* restore(Effect.forEach(days.keys(), (day) => Effect.map(secrets.get(day), (s) => days.set(day, s))))
        // Per round a prefix (kept in its spool segment), per event a counter.
        const idPrefix = round.id
        const occurredAt = new Date().toISOString()
        let sequence = 0
        let records: Array<OutgoingRecord> = []
        let recordClicks = 0
        /** By the account's index in the round (`ClickRound.accountValues`). */
        const groups: Array<ClickGroup | undefined> = []
        let recordChars = 0
        /** The events made so far become one publish; later ones go out after it, so an account's stay in order. */
        const publishChunk = () => {
          if (records.length > 0) waiting.push({ records, clicks: recordClicks })
          records = []
          recordClicks = 0
          recordChars = 0
        }
        const emit = (group: ClickGroup) => {
          const clicks = group.at.length
          const value =
            `{"id":"${idPrefix}${(sequence++).toString(36)}","type":"clicks.recorded","version":3,` +
            `"occurred_at":"${occurredAt}","account_id":${JSON.stringify(group.accountId)},"data":${group.take()}}`
          records.push({ key: group.accountId, value })
          recordClicks += clicks
          recordChars += value.length
          if (recordClicks >= clicksPerPublish || recordChars >= MAX_PUBLISH_CHARS) publishChunk()
        }
        // The JSON of a click's values, each made once per round for its inputs: country,
        // referrer, and the visitor with its classes (one per user agent, address and day).
        const countryValues = countryTexts.map((c) => cached(countryJson, c, makeCountryJson))
        const refererValues = refererTexts.map((r) => cached(refererJson, r, makeRefererJson))
        const visitorsByDay = new Map<number, Map<number, string>>()
        let visitors = new Map<number, string>()
        let visitorsDay = -1
        // The last click's run, its account's group and its link's index in the group's links:
        // a run's clicks come in a row.
        let lastRun = -1
        let group: ClickGroup | undefined
        let link = 0
        for (let i = 0; i < n; i++) {
          const clickRun = run[i]!
          if (clickRun !== lastRun) {
            lastRun = clickRun
            const account = runAccount[clickRun]!
            group = groups[account]
            if (group === undefined) {
              const accountId = round.accountIdOf(clickRun)
              group = spareGroups.pop()?.reuse(accountId) ?? new ClickGroup(accountId)
              groups[account] = group
            }
            link = group.linkIndex(runLink[clickRun]!, round, clickRun)
          }
          const time = times[i]!
          const day = utcDay(time)
          if (day !== visitorsDay) {
            visitorsDay = day
            visitors = visitorsByDay.get(day) ?? new Map()
            visitorsByDay.set(day, visitors)
          }
          const visitorKey = agents[i]! * peerTexts.length + peers[i]!
          let visitor = visitors.get(visitorKey)
          if (visitor === undefined) {
            const userAgent = agentTexts[agents[i]!]!
            visitor =
              `{"visitor":"${visitorOf(day, days, peerTexts[peers[i]!]!, userAgent)}",` +
              `${cached(uaJson, userAgent, makeUaJson)}}`
            visitors.set(visitorKey, visitor)
          }
          const r = referers[i]!
          const c = countries[i]!
          group!.push(link, time, c < 0 ? "null" : countryValues[c]!, r < 0 ? "null" : refererValues[r]!, visitor)
          if (group!.at.length >= clicksPerEvent || group!.listChars >= MAX_EVENT_LIST_CHARS) {
            emit(group!)
            // The group's links start over: the next click looks its link up again.
            lastRun = -1
          }
          if ((i + 1) % CONVERT_SLICE === 0) yield* Effect.sleep(0)
        }
        for (const g of groups) {
          if (g === undefined) continue
          if (g.at.length > 0) emit(g)
          if (spareGroups.length < SPARE_GROUPS) spareGroups.push(g)
        }
        publishChunk()
        const segment = spool?.detach(round)
        // After the round's own chunks: deleted once they are all acknowledged.
        if (segment !== undefined) waiting.push({ records: [], clicks: 0, segment })
        buffer.taken.shift()
        buffer.release(round)
      })
    )

    /** Takes the current round and converts, in order, every round not converted yet. */
    const convert = Effect.gen(function* () {
      if (buffer.count > 0) buffer.taken.push(buffer.take())
      while (buffer.taken.length > 0) yield* convertFirstRound
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
