import type { PgClient } from "@effect/sql-pg"
import { Effect, Layer, type Schema, type Scope } from "effect"
import {
  type Batch,
  EventLog,
  type EventLogError,
  type FollowOptions,
  type PartitionOffset
} from "../../domain/EventLog.js"
import { retryWithBackoff } from "./Backoff.js"
import { subscribeGroup } from "./EmbeddedGroup.js"
import { makeEmbeddedStore } from "./EmbeddedStore.js"
import { DEFAULT_MAX_BATCH, decoder, decodeSkippingPoison, POLL_INTERVAL_MS, runHandler } from "./Shared.js"

/**
 * The event log in PostgreSQL, for a single machine or a small deployment: the storage is
 * `EmbeddedStore.ts`, group members are `EmbeddedGroup.ts`; followers and reads, which own
 * nothing, keep their positions in memory.
 */
export const make = Effect.gen(function* () {
  const store = yield* makeEmbeddedStore
  const { ensureTopic, endOffsets, fetchAll, resolveStart } = store

  const follow = <A, I, E, R>(
    options: FollowOptions,
    schema: Schema.Schema<A, I, never>,
    handler: (batch: Batch<A>) => Effect.Effect<void, E, R>
  ): Effect.Effect<void, EventLogError, Scope.Scope | R> =>
    Effect.gen(function* () {
      const { topic } = options
      const decode = decoder(schema)
      yield* ensureTopic(topic)
      const positions = new Map((yield* resolveStart(topic, options.startAt)).map((s) => [s.partition, s.offset]))
      const wait = yield* store.wakeups(topic)

      const pass = Effect.gen(function* () {
        const fetched = yield* fetchAll(topic, positions, DEFAULT_MAX_BATCH)
        for (const [partition, records] of fetched) {
          const batch = yield* decodeSkippingPoison(decode, topic, partition, records)
          if (batch.events.length > 0) yield* runHandler(handler, batch)
          positions.set(partition, batch.lastOffset + 1)
        }
        return fetched.size > 0
      })

      const step = Effect.flatMap(pass, (progressed) => (progressed ? Effect.void : wait(POLL_INTERVAL_MS)))
      yield* Effect.forkScoped(
        Effect.forever(
          retryWithBackoff(step, (cause) =>
            Effect.logWarning(`event log: follower of ${topic} failed; retrying after back-off`, cause)
          )
        )
      )
    })

  const read = <A, I, E, R>(
    options: FollowOptions,
    schema: Schema.Schema<A, I, never>,
    handler: (batch: Batch<A>) => Effect.Effect<void, E, R>
  ): Effect.Effect<ReadonlyArray<PartitionOffset>, EventLogError | E, R> =>
    Effect.gen(function* () {
      const { topic } = options
      const decode = decoder(schema)
      const ends = yield* endOffsets(topic)
      const endMap = new Map(ends.map((e) => [e.partition, e.offset]))
      const positions = new Map((yield* resolveStart(topic, options.startAt)).map((s) => [s.partition, s.offset]))
      while (true) {
        const fetched = yield* fetchAll(topic, positions, DEFAULT_MAX_BATCH, endMap)
        if (fetched.size === 0) return ends
        for (const [partition, records] of fetched) {
          const batch = yield* decodeSkippingPoison(decode, topic, partition, records)
          if (batch.events.length > 0) yield* handler(batch)
          positions.set(partition, batch.lastOffset + 1)
        }
      }
    })

  return EventLog.of({
    publish: store.publish,
    subscribe: (options, schema, handler) => subscribeGroup(store, options, schema, handler),
    follow,
    read,
    endOffsets,
    kind: "embedded"
  })
})

export const EmbeddedEventLogLive: Layer.Layer<EventLog, never, PgClient.PgClient> = Layer.scoped(EventLog, make)
