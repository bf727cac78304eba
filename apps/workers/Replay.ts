import { Data, Effect } from "effect"
import { Analytics } from "../../domain/Analytics.js"
import { EventLog, type PartitionOffset, type StartAt } from "../../domain/EventLog.js"
import { Topics } from "../../domain/Events.js"
import { projectBatch, RecentIds, splitBatch } from "./ClickBatch.js"
import { ClickEventWire } from "./ClickWire.js"

import { type Projection, Projections } from "./Projections.js"

export { type Projection, Projections } from "./Projections.js"

export class ReplayRefused extends Data.TaggedError("ReplayRefused")<{ readonly message: string }> {}

export interface ReplayResult {
  readonly topic: string
  readonly into: Projection
  /** Events read (duplicates dropped by the projection included). */
  readonly events: number
  /** Where the replay stopped: per partition, the offset after the last message read. */
  readonly end_offsets: ReadonlyArray<PartitionOffset>
}

/**
 * Rebuilds the click analytics from clicks.v1: reads from `startAt` up to the end offsets of
 * the moment it starts, with the projector's own batch -> rows function, into fresh tables
 * that replace the live ones at the end (the live ones stay readable meanwhile and stay as
 * they were if the replay fails). Run it with the projector stopped: clicks it projects
 * during the replay would be in the replaced tables only.
 */
export const replayAnalytics = (startAt: StartAt, topic: string = Topics.clicks) =>
  Effect.gen(function* () {
    const log = yield* EventLog
    const analytics = yield* Analytics
    return yield* analytics.rebuild((writer) =>
      Effect.gen(function* () {
        const partitions = new Map<number, { watermark: number; recent: RecentIds }>()
        let events = 0
        const ends = yield* log.read({ topic, startAt }, ClickEventWire, (batch) =>
          Effect.gen(function* () {
            let state = partitions.get(batch.partition)
            if (state === undefined) {
              state = { watermark: -1, recent: new RecentIds() }
              partitions.set(batch.partition, state)
            }
            const st = state
            for (const run of splitBatch(batch)) {
              const projection = projectBatch(run, st.watermark, st.recent)
              if (projection.insert !== undefined) {
                yield* writer.insertBatch(projection.insert)
                st.watermark = projection.insert.upTo
              }
              for (const id of projection.ids) st.recent.add(id)
            }
            events += batch.events.length
          })
        )
        return { events, ends }
      })
    )
  }).pipe(Effect.withSpan("Replay.analytics"))

/** `cli replay`: checks the topic and the projection, then replays. */
export const replay = (options: { readonly topic: string; readonly into: string; readonly startAt: StartAt }) =>
  Effect.gen(function* () {
    const into = options.into as Projection
    if (!(options.into in Projections)) {
      return yield* new ReplayRefused({
        message: `unknown projection ${JSON.stringify(options.into)}; known: ${Object.keys(Projections).join(", ")}`
      })
    }
    if (Projections[into] !== options.topic) {
      return yield* new ReplayRefused({
        message: `projection ${into} is built from ${Projections[into]}, not ${options.topic}`
      })
    }
    const { events, ends } = yield* replayAnalytics(options.startAt)
    return { topic: options.topic, into, events, end_offsets: ends } satisfies ReplayResult
  })
