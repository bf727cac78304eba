import { Effect, Layer } from "effect"
import { Analytics, type ClickBatch, type ClickRow, hourOf } from "../../domain/Analytics.js"
import { type Batch, EventLog, type LogRecord } from "../../domain/EventLog.js"
import { ClickRecorded, Topics } from "../../domain/Events.js"

export const PROJECTOR_GROUP = "analytics-projector"
/** Large batches keep parts few; far below the store's per-insert ceiling. */
export const PROJECTOR_MAX_BATCH = 10_000
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
  const country = d.country?.toUpperCase() ?? ""
  const referrer = d.referrer_host?.toLowerCase().replace(/\.$/, "") ?? ""
  const browser = d.browser.trim().slice(0, 64)
  const visitor = d.visitor.toLowerCase()
  return {
    linkId: d.link_id,
    hour: hourOf(Number.isNaN(at) || at < 0 ? record.timestamp : at),
    bot: d.bot,
    country: COUNTRY.test(country) ? country : "",
    referrer: HOST.test(referrer) ? referrer : "",
    device: d.device,
    browser: browser === "" ? "other" : browser,
    visitor: VISITOR.test(visitor) ? visitor : ""
  }
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
export const projectBatch = (batch: Batch<ClickRecorded>, watermark: number, recent: RecentIds): Projection => {
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
    rows.push(toClickRow(event, record))
  }
  return { insert: { partition: batch.partition, upTo: batch.lastOffset, rows }, ids, duplicates }
}

interface PartitionState {
  /** undefined: read it from the store before the next insert. */
  watermark: number | undefined
  /** The offset after the last batch handled; a batch starting elsewhere means the partition moved. */
  next: number | undefined
  readonly recent: RecentIds
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

  return (batch: Batch<ClickRecorded>) =>
    Effect.gen(function* () {
      let state = partitions.get(batch.partition)
      if (state === undefined) {
        state = { watermark: undefined, next: undefined, recent: new RecentIds() }
        partitions.set(batch.partition, state)
      }
      const st = state
      const first = batch.events[0]?.record.offset ?? batch.lastOffset
      if (st.watermark === undefined || st.next !== first) {
        const marks = yield* analytics.watermarks()
        st.watermark = marks.get(batch.partition) ?? -1
      }
      const projection = projectBatch(batch, st.watermark, st.recent)
      if (projection.insert !== undefined) {
        const insert = projection.insert
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
      st.next = batch.lastOffset + 1
      if (projection.duplicates > 0) {
        yield* Effect.logInfo(`click projector: dropped ${projection.duplicates} duplicate click event(s)`).pipe(
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
    yield* log.subscribe({ group, topic, maxBatch: PROJECTOR_MAX_BATCH }, ClickRecorded, handler)
    yield* Effect.logInfo(`click projector: following ${topic} as group ${group}`)
  })

/** Projects clicks.v1 into the analytics rollup as group `analytics-projector`, until its scope closes. */
export const ClickProjectorLive = Layer.scopedDiscard(runClickProjector())
