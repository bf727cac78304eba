import { Effect, Layer, Schema } from "effect"
import { Analytics, type ClickBatch, type ClickRow, hourOf } from "../../domain/Analytics.js"
import { type Batch, EventLog, type LogRecord } from "../../domain/EventLog.js"
import {
  type BatchedClick,
  type ClickColumnsData,
  type ClickEvent,
  ClickRecorded,
  clickColumnsProblem,
  envelope,
  MAX_CLICKS_PER_EVENT,
  Topics
} from "../../domain/Events.js"

export const PROJECTOR_GROUP = "analytics-projector"
/** Records per partition batch handed to the projector. */
export const PROJECTOR_MAX_BATCH = 2_000
/** Clicks per insert at most: large inserts keep parts few; far below the store's per-insert ceiling. */
export const PROJECTOR_MAX_ROWS = 50_000
/**
 * While the projector keeps up, it inserts into a partition at most once per this period:
 * each insert costs the engine ~9 ms of CPU whatever its size (a part, the view, merges), so
 * under load the clicks of a period are better taken in one insert than in many small ones.
 * A batch that comes sooner than that after the partition's last insert waits out the rest
 * (the other partitions' batches taken after it hold what arrived meanwhile). A quiet
 * partition's click goes in at once; a full batch means the projector is behind, and it goes
 * on at once. Delays a click by at most about this much.
 */
export const PROJECTOR_LINGER_MS = 500

const DEVICES = new Set(["desktop", "mobile", "tablet", "other"])

const isNullOrString = (u: unknown) => u === null || typeof u === "string"

/** The shape of a BatchedClick (domain/Events.ts), checked by hand: this runs for every click. */
export const isBatchedClick = (u: unknown): u is BatchedClick => {
  if (typeof u !== "object" || u === null) return false
  const c = u as Record<string, unknown>
  return (
    typeof c.at === "number" &&
    Number.isSafeInteger(c.at) &&
    c.at >= 0 &&
    isNullOrString(c.country) &&
    isNullOrString(c.referrer_host) &&
    typeof c.device === "string" &&
    DEVICES.has(c.device) &&
    typeof c.browser === "string" &&
    typeof c.bot === "boolean" &&
    typeof c.visitor === "string"
  )
}

const isClickList = (u: unknown): u is ReadonlyArray<BatchedClick> => {
  if (!Array.isArray(u) || u.length === 0 || u.length > MAX_CLICKS_PER_EVENT) return false
  for (const c of u) if (!isBatchedClick(c)) return false
  return true
}

const isIntArray = (u: unknown, min: number): u is ReadonlyArray<number> => {
  if (!Array.isArray(u)) return false
  for (const x of u) if (typeof x !== "number" || !Number.isInteger(x) || x < min) return false
  return true
}

const isNullOrStringArray = (u: unknown): u is ReadonlyArray<string | null> => {
  if (!Array.isArray(u)) return false
  for (const x of u) if (!isNullOrString(x)) return false
  return true
}

const isClickVisitor = (u: unknown) => {
  if (typeof u !== "object" || u === null) return false
  const v = u as Record<string, unknown>
  return (
    typeof v.visitor === "string" &&
    typeof v.device === "string" &&
    DEVICES.has(v.device) &&
    typeof v.browser === "string" &&
    typeof v.bot === "boolean"
  )
}

/** The shape of ClickColumnsData (domain/Events.ts), checked by hand: one loop per column. */
export const isClickColumns = (u: unknown): u is ClickColumnsData => {
  if (typeof u !== "object" || u === null) return false
  const d = u as Record<string, unknown>
  return (
    typeof d.link_id === "string" &&
    isNullOrStringArray(d.countries) &&
    isNullOrStringArray(d.referrer_hosts) &&
    Array.isArray(d.visitors) &&
    d.visitors.every(isClickVisitor) &&
    isIntArray(d.at, Number.MIN_SAFE_INTEGER) &&
    isIntArray(d.country, 0) &&
    isIntArray(d.referrer, 0) &&
    isIntArray(d.visitor, 0) &&
    clickColumnsProblem(d as unknown as ClickColumnsData) === undefined
  )
}

/**
 * What the projector decodes clicks.v1 with: the same events as ClickEvent, but the clicks of
 * a `clicks.recorded` batch are checked by plain loops instead of a Schema decode each
 * (a test keeps the two in agreement). An event that fails is poison, as with the full schema.
 */
export const ClickEventWire = Schema.Union(
  envelope("clicks.recorded", Schema.declare(isClickColumns, { identifier: "LinkClickColumns" }), 2),
  envelope(
    "clicks.recorded",
    Schema.Struct({
      link_id: Schema.String,
      clicks: Schema.declare(isClickList, { identifier: "BatchedClicks" })
    })
  ),
  ClickRecorded
)
/** How many recent event ids per partition are remembered to drop a producer's retried duplicates. */
export const RECENT_IDS = 20_000

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

/**
 * The rollup rows of a `clicks.recorded` (version 2) event, appended to `rows`: each distinct
 * value is bounded once (as batchedClickRow does), then each click is a few index lookups,
 * and clicks alike in everything the rollup keeps (hour, country, referrer, visitor) become
 * one row that counts them all.
 */
export const columnRows = (d: ClickColumnsData, record: LogRecord, rows: Array<ClickRow>) => {
  const linkId = d.link_id
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
  const alike = new Map<number, { -readonly [K in keyof ClickRow]: ClickRow[K] }>()
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
        alike.clear()
      }
    }
    // Below 10001^3: a safe integer.
    const key = (visitor[i]! * nc + country[i]!) * nr + referrer[i]!
    const row = alike.get(key)
    if (row !== undefined) {
      row.clicks!++
      continue
    }
    const v = visitors[visitor[i]!]!
    const fresh = {
      linkId,
      hour,
      bot: v.bot,
      country: countries[country[i]!]!,
      referrer: referrers[referrer[i]!]!,
      device: v.device,
      browser: v.browser,
      visitor: v.visitor,
      clicks: 1
    }
    alike.set(key, fresh)
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
    return { insert: undefined, ids: batch.events.map((e) => e.event.id), duplicates: 0 }
  }
  const inBatch = new Set<string>()
  const rows: Array<ClickRow> = []
  let duplicates = 0
  for (const { event, record } of batch.events) {
    ids.push(event.id)
    if (record.offset <= watermark) continue
    if (recent.has(event.id) || inBatch.has(event.id)) {
      duplicates++
      continue
    }
    inBatch.add(event.id)
    if (event.type === "clicks.recorded") {
      const data = event.data
      if ("clicks" in data) for (const click of data.clicks) rows.push(batchedClickRow(data.link_id, click, record))
      else columnRows(data, record, rows)
    } else {
      rows.push(toClickRow(event, record))
    }
  }
  return { insert: { partition: batch.partition, upTo: batch.lastOffset, rows }, ids, duplicates }
}

interface PartitionState {
  /** undefined: read it from the store before the next insert. */
  watermark: number | undefined
  /** The offset after the last batch handled; a batch starting elsewhere means the partition moved. */
  next: number | undefined
  readonly recent: RecentIds
  /** When the last insert into this partition started (ms since the epoch; 0: none yet). */
  lastInsert: number
}

/**
 * The projector's handler. The watermark is read from the store when a partition is first
 * seen, whenever a batch does not continue where the last one ended (the partition was
 * reassigned, or redelivered), and after any failed insert (which may have landed all the
 * same); otherwise the one cached after the last insert is used.
 */
export const makeClickHandler = Effect.gen(function* () {
  const analytics = yield* Analytics
  const partitions = new Map<number, PartitionState>()

  return (batch: Batch<ClickEvent>) =>
    Effect.gen(function* () {
      let state = partitions.get(batch.partition)
      if (state === undefined) {
        state = { watermark: undefined, next: undefined, recent: new RecentIds(), lastInsert: 0 }
        partitions.set(batch.partition, state)
      }
      const st = state
      const first = batch.events[0]?.record.offset ?? batch.lastOffset
      if (st.watermark === undefined || st.next !== first) {
        const marks = yield* analytics.watermarks()
        st.watermark = marks.get(batch.partition) ?? -1
      }
      if (batch.events.length < PROJECTOR_MAX_BATCH) {
        const wait = st.lastInsert + PROJECTOR_LINGER_MS - Date.now()
        if (wait > 0) yield* Effect.sleep(wait)
      }
      let duplicates = 0
      for (const run of splitBatch(batch)) {
        if (st.watermark === undefined) {
          const marks = yield* analytics.watermarks()
          st.watermark = marks.get(batch.partition) ?? -1
        }
        const projection = projectBatch(run, st.watermark, st.recent)
        if (projection.insert !== undefined) {
          const insert = projection.insert
          if (insert.rows.length > 0) st.lastInsert = Date.now()
          yield* analytics.insertBatch(insert).pipe(
            Effect.onError(() =>
              Effect.sync(() => {
                st.watermark = undefined
              })
            )
          )
          st.watermark = insert.upTo
        }
        for (const id of projection.ids) st.recent.add(id)
        duplicates += projection.duplicates
      }
      st.next = batch.lastOffset + 1
      if (duplicates > 0) {
        yield* Effect.logInfo(`click projector: dropped ${duplicates} duplicate click event(s)`).pipe(
          Effect.annotateLogs({ partition: batch.partition })
        )
      }
    }).pipe(Effect.withSpan("ClickProjector.batch"))
})

export interface ClickProjectorOptions {
  readonly topic?: string
  readonly group?: string
}

/** Subscribes the projector; it runs until the scope closes. */
export const runClickProjector = (options: ClickProjectorOptions = {}) =>
  Effect.gen(function* () {
    const log = yield* EventLog
    const handler = yield* makeClickHandler
    const topic = options.topic ?? Topics.clicks
    const group = options.group ?? PROJECTOR_GROUP
    yield* log.subscribe({ group, topic, maxBatch: PROJECTOR_MAX_BATCH }, ClickEventWire, handler)
    yield* Effect.logInfo(`click projector: following ${topic} as group ${group}`)
  })

/** Projects clicks.v1 into the analytics rollup as group `analytics-projector`, until its scope closes. */
export const ClickProjectorLive = Layer.scopedDiscard(runClickProjector())
