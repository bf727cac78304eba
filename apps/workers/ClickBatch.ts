import { type ClickBatch, type ClickRow, hourOf } from "../../domain/Analytics.js"
import type { Batch, LogRecord } from "../../domain/EventLog.js"
import type {
  AccountClickColumnsData,
  BatchedClick,
  ClickColumnsData,
  ClickEvent,
  ClickRecorded
} from "../../domain/Events.js"
import { PROJECTOR_MAX_ROWS, RECENT_IDS } from "./ClickProjectorConfig.js"

/** Event ids seen lately in one partition: a bounded window, oldest forgotten first. */
export class RecentIds {
  private readonly ids = new Set<string>()
  constructor(readonly capacity: number = RECENT_IDS) {}
  has(id: string) {
    return this.ids.has(id)
  }
  add(id: string) {
    if (this.ids.has(id)) return
    this.ids.add(id)
    if (this.ids.size > this.capacity) this.ids.delete(this.ids.values().next().value!)
  }
  get size() {
    return this.ids.size
  }
}

const COUNTRY = /^[A-Z]{2}$/
const VISITOR = /^[0-9a-f]{16}$/
const HOST = /^[a-z0-9.-]{1,253}$/

/**
 * The rollup row of a click. Values are bounded on the way in (the topic is an outside
 * interface): an odd country, referrer or visitor counts as unknown; a time that does not
 * parse falls back to when the log appended the click.
 */
export const toClickRow = (event: ClickRecorded, record: LogRecord): ClickRow => {
  const d = event.data
  const at = Date.parse(event.occurred_at)
  return {
    linkId: d.link_id,
    hour: clickHour(Number.isNaN(at) ? -1 : at, record),
    bot: d.bot,
    country: storedCountry(d.country),
    referrer: storedReferrer(d.referrer_host),
    device: d.device,
    browser: storedBrowser(d.browser),
    visitor: storedVisitor(d.visitor)
  }
}

/** Times past this (2106, the end of the rollup's UInt32 seconds) are not taken. */
const MAX_AT = (2 ** 32 - 3600) * 1000

const storedCountry = (c: string | null) => {
  const country = c === null ? "" : c.toUpperCase()
  return COUNTRY.test(country) ? country : ""
}
const storedReferrer = (host: string | null) => {
  const referrer = host === null ? "" : host.toLowerCase().replace(/\.$/, "")
  return HOST.test(referrer) ? referrer : ""
}
const storedBrowser = (b: string) => {
  const browser = b.trim().slice(0, 64)
  return browser === "" ? "other" : browser
}
const storedVisitor = (v: string) => {
  const visitor = v.toLowerCase()
  return VISITOR.test(visitor) ? visitor : ""
}
/** The rollup hour of a click time; a time out of range falls back to when the log appended it. */
const clickHour = (at: number, record: LogRecord) => hourOf(at < 0 || at > MAX_AT ? record.timestamp : at)

/**
 * The rollup row of a click of a `clicks.recorded` batch, bounded like toClickRow's; a time
 * out of range falls back to when the log appended the batch.
 */
export const batchedClickRow = (linkId: string, click: BatchedClick, record: LogRecord): ClickRow => ({
  linkId,
  hour: clickHour(click.at, record),
  bot: click.bot,
  country: storedCountry(click.country),
  referrer: storedReferrer(click.referrer_host),
  device: click.device,
  browser: storedBrowser(click.browser),
  visitor: storedVisitor(click.visitor)
})

type MutableRow = { -readonly [K in keyof ClickRow]: ClickRow[K] }

/**
 * The rollup rows of a `clicks.recorded` event of version 2 (one link) or 3 (the links of an
 * account, `link` the index of each click's), appended to `rows`: each distinct value is
 * bounded once (as batchedClickRow does), then each click is a few index lookups, and clicks
 * alike in everything the rollup keeps (link, hour, country, referrer, visitor) become one
 * row that counts them all.
 */
export const columnRows = (d: ClickColumnsData | AccountClickColumnsData, record: LogRecord, rows: Array<ClickRow>) => {
  const linkIds = "links" in d ? d.links : [d.link_id]
  const link = "links" in d ? d.link : undefined
  const countries = d.countries.map(storedCountry)
  const referrers = d.referrer_hosts.map(storedReferrer)
  const visitors = d.visitors.map((v) => ({
    bot: v.bot,
    device: v.device,
    browser: storedBrowser(v.browser),
    visitor: storedVisitor(v.visitor)
  }))
  const { at: times, country, referrer, visitor } = d
  const nc = countries.length
  const nr = referrers.length
  // Per link (by its index), the rows of the current hour by their values.
  const alike: Array<Map<number, MutableRow> | undefined> = []
  let at = 0
  let hourAt = Number.NaN
  let hour = Number.NaN
  for (let i = 0; i < times.length; i++) {
    at += times[i]!
    if (at !== hourAt) {
      hourAt = at
      const h = clickHour(at, record)
      if (h !== hour) {
        hour = h
        alike.length = 0
      }
    }
    const l = link === undefined ? 0 : link[i]!
    let rowsOfLink = alike[l]
    if (rowsOfLink === undefined) {
      rowsOfLink = new Map()
      alike[l] = rowsOfLink
    }
    // Below 10001^3: a safe integer.
    const key = (visitor[i]! * nc + country[i]!) * nr + referrer[i]!
    const row = rowsOfLink.get(key)
    if (row !== undefined) {
      row.clicks!++
      continue
    }
    const v = visitors[visitor[i]!]!
    const fresh = {
      linkId: linkIds[l]!,
      hour,
      bot: v.bot,
      country: countries[country[i]!]!,
      referrer: referrers[referrer[i]!]!,
      device: v.device,
      browser: v.browser,
      visitor: v.visitor,
      clicks: 1
    }
    rowsOfLink.set(key, fresh)
    rows.push(fresh)
  }
}

/** How many clicks an event carries. */
export const clickCount = (event: ClickEvent): number =>
  event.type === "click.recorded" ? 1 : "clicks" in event.data ? event.data.clicks.length : event.data.at.length

/**
 * Splits a partition batch into runs of whole events with at most `maxRows` clicks each (an
 * event larger than that alone). Each run but the last ends at its last event's offset; the
 * last keeps the batch's, poison included. Inserted in order, each run moves the watermark.
 */
export const splitBatch = <A extends ClickEvent>(batch: Batch<A>, maxRows: number = PROJECTOR_MAX_ROWS) => {
  const runs: Array<Batch<A>> = []
  let start = 0
  let rows = 0
  const events = batch.events
  for (let i = 0; i < events.length; i++) {
    const n = clickCount(events[i]!.event)
    if (rows > 0 && rows + n > maxRows) {
      runs.push({ ...batch, events: events.slice(start, i), lastOffset: events[i - 1]!.record.offset })
      start = i
      rows = 0
    }
    rows += n
  }
  runs.push(start === 0 ? batch : { ...batch, events: events.slice(start) })
  return runs
}

export interface Projection {
  /** What to insert; undefined when the rollup already accounts for the whole batch. */
  readonly insert: ClickBatch | undefined
  /** Event ids to remember once the insert has succeeded. */
  readonly ids: ReadonlyArray<string>
  readonly duplicates: number
  /** Clicks in the insert (for /metrics). */
  readonly clicks: number
}

/**
 * One partition batch -> at most one insert. Records at or below the watermark (the last
 * offset the rollup accounts for) are already counted: a redelivery after a crash between
 * the insert and the offset commit adds nothing. An event id seen in the recent window (or
 * earlier in the batch) is a producer's retry and is dropped. The insert carries the batch's
 * last offset, so the dropped records are accounted for too.
 */
export const projectBatch = (batch: Batch<ClickEvent>, watermark: number, recent: RecentIds): Projection => {
  const ids: Array<string> = []
  if (batch.lastOffset <= watermark) {
    return { insert: undefined, ids: batch.events.map((e) => e.event.id), duplicates: 0, clicks: 0 }
  }
  const inBatch = new Set<string>()
  const rows: Array<ClickRow> = []
  let duplicates = 0
  let clicks = 0
  for (const { event, record } of batch.events) {
    ids.push(event.id)
    if (record.offset <= watermark) continue
    if (recent.has(event.id) || inBatch.has(event.id)) {
      duplicates++
      continue
    }
    inBatch.add(event.id)
    clicks += clickCount(event)
    if (event.type === "clicks.recorded") {
      const data = event.data
      if ("clicks" in data) for (const click of data.clicks) rows.push(batchedClickRow(data.link_id, click, record))
      else columnRows(data, record, rows)
    } else {
      rows.push(toClickRow(event, record))
    }
  }
  return { insert: { partition: batch.partition, upTo: batch.lastOffset, rows }, ids, duplicates, clicks }
}
