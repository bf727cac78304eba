import type { OutgoingRecord } from "../../domain/EventLog.js"
import { MAX_CLICKS_PER_EVENT } from "../../domain/Events.js"
import { BoundedCache } from "../../infra/BoundedCache.js"
import { cachedReferrerHost, cachedUserAgentParser, countryOf, utcDay, visitorHash } from "./ClickClassify.js"
import { ClickGroup, MAX_EVENT_LIST_CHARS } from "./ClickGroup.js"
import type { RoundData } from "./ClickRound.js"

/** Entries per in-memory cache (visitor hashes, user agents, referers, country headers). */
const CACHE_ENTRIES = 10_000
/** Clicks per clicks.recorded event by default. */
export const CLICKS_PER_EVENT = 4_000
/**
 * JSON characters per publish call at most (a few events): Kafka takes at most 1 MB per
 * partition and request by default (message.max.bytes).
 */
const MAX_PUBLISH_CHARS = 400_000

/** Events of one publish call, in order, and the clicks they carry. */
export interface EventChunk {
  readonly records: Array<OutgoingRecord>
  readonly clicks: number
}

export interface ConvertOptions {
  /** Clicks of one account per clicks.recorded event at most (default 4000). */
  readonly clicksPerEvent?: number | undefined
  /** Clicks per publish call at most (several events): bounds one append after an outage. */
  readonly clicksPerPublish: number
}

/**
 * Rounds of raw clicks to clicks.recorded events (version 3): one event per account per
 * round, of at most `clicksPerEvent` clicks and MAX_EVENT_LIST_CHARS of lists, in publish
 * chunks. No Effect and no I/O: the visitor secrets come with the round. It keeps what repeats
 * from round to round (each user agent's classes, referrer hosts, countries, the day's
 * visitor hashes) in bounded caches, so it runs in one place: the conversion thread
 * (ClickConvertThread.ts).
 */
export class ClickConverter {
  private readonly clicksPerEvent: number
  private readonly clicksPerPublish: number
  private readonly classify = cachedUserAgentParser()
  private readonly hostOf = cachedReferrerHost()
  // The JSON of a click's fields, per distinct input: user agents, referers and country
  // headers repeat, so each is classified and serialized once, not per click.
  private readonly uaJson = new BoundedCache<string, string>({ maxWeight: CACHE_ENTRIES })
  private readonly refererJson = new BoundedCache<string, string>({ maxWeight: CACHE_ENTRIES })
  private readonly countryJson = new BoundedCache<string, string>({ maxWeight: CACHE_ENTRIES })
  // Visitors come back (reloads, several links, crawlers): the day's last hashes are kept
  // for them (by user agent, then address), in memory only and forgotten when the day
  // changes or the cache is full.
  private visitors = new Map<string, Map<string, string>>()
  private visitorCount = 0
  private visitorsDay = -1

  constructor(options: ConvertOptions) {
    this.clicksPerEvent = Math.max(1, Math.min(options.clicksPerEvent ?? CLICKS_PER_EVENT, MAX_CLICKS_PER_EVENT))
    this.clicksPerPublish = Math.max(options.clicksPerPublish, this.clicksPerEvent)
  }

  private readonly makeUaJson = (userAgent: string) => {
    const ua = this.classify(userAgent)
    return `"device":"${ua.device}","browser":${JSON.stringify(ua.browser)},"bot":${ua.bot}`
  }
  private readonly makeRefererJson = (referer: string) => {
    const host = this.hostOf(referer)
    return host === null ? "null" : JSON.stringify(host)
  }
  private readonly makeCountryJson = (header: string) => {
    const country = countryOf(header)
    return country === null ? "null" : `"${country}"`
  }

  private visitorOf(day: number, secret: Uint8Array, ip: string, userAgent: string) {
    if (day !== this.visitorsDay || this.visitorCount >= CACHE_ENTRIES) {
      this.visitors = new Map()
      this.visitorCount = 0
      this.visitorsDay = day
    }
    let byIp = this.visitors.get(userAgent)
    if (byIp === undefined) {
      byIp = new Map()
      this.visitors.set(userAgent, byIp)
    }
    let hash = byIp.get(ip)
    if (hash === undefined) {
      hash = visitorHash(secret, ip, userAgent)
      byIp.set(ip, hash)
      this.visitorCount++
    }
    return hash
  }

  /**
   * One round's events, in publish chunks: event ids are the round's id and a counter, so a
   * round converted again (after a crash, from its spool segment) gives the same ids.
   * `secrets` holds the secret of every UTC day of the round's clicks (`daysOf`).
   */
  convert(round: RoundData, secrets: ReadonlyMap<number, Uint8Array>, occurredAt: string): Array<EventChunk> {
    const n = round.count
    const { times, run, runLink, runAccount, runAt, peers, agents, referers, countries } = round
    const runBytes = Buffer.from(round.runBytes.buffer, round.runBytes.byteOffset, round.runBytes.byteLength)
    const peerTexts = round.peerValues
    const agentTexts = round.agentValues
    const idPrefix = round.id
    const chunks: Array<EventChunk> = []
    let sequence = 0
    let records: Array<OutgoingRecord> = []
    let recordClicks = 0
    let recordChars = 0
    /** By the account's index in the round (`RoundData.accountValues`). */
    const groups: Array<ClickGroup | undefined> = []
    /** The events made so far become one publish; later ones go out after it, so an account's stay in order. */
    const publishChunk = () => {
      if (records.length > 0) chunks.push({ records, clicks: recordClicks })
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
      if (recordClicks >= this.clicksPerPublish || recordChars >= MAX_PUBLISH_CHARS) publishChunk()
    }
    // The JSON of a click's values, each made once per round for its inputs: country,
    // referrer, and the visitor with its classes (one per user agent, address and day).
    const countryValues = round.countryValues.map((c) => this.countryJson.getOrCompute(c, this.makeCountryJson))
    const refererValues = round.refererValues.map((r) => this.refererJson.getOrCompute(r, this.makeRefererJson))
    const visitorsByDay = new Map<number, Map<number, string>>()
    let visitors = new Map<number, string>()
    let visitorsDay = -1
    let secret: Uint8Array = new Uint8Array()
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
          group = new ClickGroup(round.accountValues[account]!)
          groups[account] = group
        }
        link = group.linkIndex(runLink[clickRun]!, runBytes, runAt[clickRun]!)
      }
      const time = times[i]!
      const day = utcDay(time)
      if (day !== visitorsDay) {
        visitorsDay = day
        visitors = visitorsByDay.get(day) ?? new Map()
        visitorsByDay.set(day, visitors)
        secret = secrets.get(day)!
      }
      const visitorKey = agents[i]! * peerTexts.length + peers[i]!
      let visitor = visitors.get(visitorKey)
      if (visitor === undefined) {
        const userAgent = agentTexts[agents[i]!]!
        visitor =
          `{"visitor":"${this.visitorOf(day, secret, peerTexts[peers[i]!]!, userAgent)}",` +
          `${this.uaJson.getOrCompute(userAgent, this.makeUaJson)}}`
        visitors.set(visitorKey, visitor)
      }
      const r = referers[i]!
      const c = countries[i]!
      group!.push(link, time, c < 0 ? "null" : countryValues[c]!, r < 0 ? "null" : refererValues[r]!, visitor)
      if (group!.at.length >= this.clicksPerEvent || group!.listChars >= MAX_EVENT_LIST_CHARS) {
        emit(group!)
        // The group's links start over: the next click looks its link up again.
        lastRun = -1
      }
    }
    for (const g of groups) if (g !== undefined && g.at.length > 0) emit(g)
    publishChunk()
    return chunks
  }
}

/** The UTC days of a round's clicks (each once): the visitor secrets its conversion needs. */
export const daysOf = (times: Float64Array, count: number): Array<number> => {
  const days: Array<number> = []
  let lastDay = -1
  for (let i = 0; i < count; i++) {
    const day = utcDay(times[i]!)
    if (day !== lastDay && !days.includes(day)) days.push(day)
    lastDay = day
  }
  return days
}
