import { randomBytes } from "node:crypto"
import { Deferred, Effect, Exit, Schedule, type Schema, type Scope } from "effect"
import type { EachBatchPayload } from "kafkajs"
import type { Batch, EventLogError, FollowOptions, LogRecord, PartitionOffset } from "../../domain/EventLog.js"
import { type KafkaClient, kafkaError } from "./KafkaClient.js"
import { acquireConsumer, runConsumer } from "./KafkaConsumer.js"
import {
  DEFAULT_MAX_BATCH,
  type Decoded,
  decoder,
  decodeSkippingPoison,
  type HandlerFailed,
  runHandler
} from "./Shared.js"

const followProcess =
  <A, E, R>(
    topic: string,
    decode: (topic: string, partition: number, records: ReadonlyArray<LogRecord>) => Decoded<A>,
    handler: (batch: Batch<A>) => Effect.Effect<void, E, R>
  ) =>
  (records: ReadonlyArray<LogRecord>, partition: number) =>
    Effect.gen(function* () {
      const batch = yield* decodeSkippingPoison(decode, topic, partition, records)
      if (batch.events.length > 0) yield* runHandler(handler, batch)
    })

/** A consumer of its own throw-away group, positioned on `starts` by seeks. */
const startFollower = <R>(
  client: KafkaClient,
  topic: string,
  starts: ReadonlyArray<PartitionOffset>,
  process: (records: ReadonlyArray<LogRecord>, partition: number) => Effect.Effect<void, HandlerFailed, R>,
  onDone: (payload: EachBatchPayload, lastOffset: number) => Promise<void>
) =>
  Effect.gen(function* () {
    const consumer = yield* acquireConsumer(client, `follow.${topic}.${randomBytes(8).toString("hex")}`)
    // The next offset per partition. The throw-away group commits nothing, so a consumer
    // that crashed and restarted (a broker still loading its coordinator, say) would start
    // at the end: every (re)join seeks it back to where it was.
    const positions = new Map(starts.map((s) => [s.partition, s.offset]))
    const seekAll = () => {
      for (const [partition, offset] of positions) consumer.seek({ topic, partition, offset: String(offset) })
    }
    consumer.on(consumer.events.GROUP_JOIN, () => {
      try {
        seekAll()
      } catch {}
    })
    yield* runConsumer(consumer, topic, false, DEFAULT_MAX_BATCH, process, async (payload, lastOffset) => {
      await onDone(payload, lastOffset)
      positions.set(payload.batch.partition, lastOffset + 1)
    })
    // Before the group is joined (or while a crashed consumer restarts) a seek is refused: retry.
    yield* Effect.try({ try: seekAll, catch: kafkaError(`cannot position the follower of ${topic}`) }).pipe(
      Effect.retry(Schedule.spaced("200 millis").pipe(Schedule.upTo("30 seconds")))
    )
  })

/** Followers and reads use a throw-away group, explicit seeks, and never commit. */
export const follow = <A, I, E, R>(
  client: KafkaClient,
  options: FollowOptions,
  schema: Schema.Schema<A, I, never>,
  handler: (batch: Batch<A>) => Effect.Effect<void, E, R>
): Effect.Effect<void, EventLogError, Scope.Scope | R> =>
  Effect.gen(function* () {
    const { topic } = options
    const starts = yield* client.resolveStart(topic, options.startAt)
    yield* startFollower(
      client,
      topic,
      starts,
      followProcess(topic, decoder(schema), handler),
      async ({ resolveOffset }, lastOffset) => resolveOffset(String(lastOffset))
    )
  })

export const read = <A, I, E, R>(
  client: KafkaClient,
  options: FollowOptions,
  schema: Schema.Schema<A, I, never>,
  handler: (batch: Batch<A>) => Effect.Effect<void, E, R>
): Effect.Effect<ReadonlyArray<PartitionOffset>, EventLogError | E, R> =>
  Effect.gen(function* () {
    const { topic } = options
    const decode = decoder(schema)
    const ends = yield* client.endOffsets(topic)
    const starts = yield* client.resolveStart(topic, options.startAt)
    const endOf = new Map(ends.map((e) => [e.partition, e.offset]))
    const remaining = new Set(starts.filter((s) => s.offset < endOf.get(s.partition)!).map((s) => s.partition))
    if (remaining.size === 0) return ends
    const done = yield* Deferred.make<void, E>()
    const process = (records: ReadonlyArray<LogRecord>, partition: number) =>
      Effect.gen(function* () {
        const end = endOf.get(partition) ?? 0
        const within = records.filter((r) => r.offset < end)
        if (within.length === 0) return
        const batch = yield* decodeSkippingPoison(decode, topic, partition, within)
        if (batch.events.length > 0) {
          const exit = yield* Effect.exit(handler(batch))
          if (Exit.isFailure(exit)) {
            yield* Deferred.failCause(done, exit.cause)
            // The read ends with that failure; this consumer is closed with it.
            return yield* Effect.never
          }
        }
        if (batch.lastOffset + 1 >= end) {
          remaining.delete(partition)
          if (remaining.size === 0) yield* Deferred.succeed(done, undefined)
        }
      })
    yield* startFollower(client, topic, starts, process, async ({ resolveOffset }, lastOffset) =>
      resolveOffset(String(lastOffset))
    )
    yield* Deferred.await(done)
    return ends
  }).pipe(Effect.scoped)
