import { Effect, Layer, Metric } from "effect"
import { Analytics } from "../../domain/Analytics.js"
import { type Batch, EventLog } from "../../domain/EventLog.js"
import { type ClickEvent, Topics } from "../../domain/Events.js"
import { clicksProjected, projectorLag } from "../../infra/Metrics.js"
import { projectBatch, RecentIds, splitBatch } from "./ClickBatch.js"
import { PROJECTOR_GROUP, PROJECTOR_LINGER_MS, PROJECTOR_MAX_BATCH } from "./ClickProjectorConfig.js"
import { ClickEventWire } from "./ClickWire.js"

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
          yield* Metric.incrementBy(clicksProjected, projection.clicks)
          const appended = run.events[0]?.record.timestamp
          if (appended !== undefined) yield* Metric.set(projectorLag, Math.max(0, Date.now() - appended) / 1000)
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
