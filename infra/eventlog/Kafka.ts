import { randomBytes } from "node:crypto"
import { Cause, Deferred, Effect, Exit, FiberSet, Layer, Runtime, Schedule, type Schema, type Scope } from "effect"
import {
  type Admin,
  type Consumer,
  type EachBatchPayload,
  Kafka,
  type KafkaMessage,
  type logCreator,
  logLevel,
  Partitioners,
  type Producer
} from "kafkajs"
import {
  type Batch,
  deadLetterTopic,
  EventLog,
  EventLogError,
  type FollowOptions,
  type LogRecord,
  type OutgoingRecord,
  type PartitionOffset,
  type StartAt,
  type SubscribeOptions
} from "../../domain/EventLog.js"
import {
  backoff,
  DEFAULT_MAX_BATCH,
  type Decoded,
  decoder,
  decodeSkippingPoison,
  HandlerFailed,
  PARTITIONS,
  runHandler,
  startOffsets
} from "./Shared.js"

const kafkaError = (message: string) => (cause: unknown) => new EventLogError({ message, cause })

// Normal events of group membership that kafkajs reports as warnings or errors.
const ROUTINE =
  /rebalancing|re-joining|not aware of this member|consumer not running|not the leader|does not host this topic|already exists|topic creation errors|leader not available/i

/** Leadership moves for a moment after a topic is created: retry what Kafka calls retriable. */
const retriable = <A>(effect: Effect.Effect<A, EventLogError>) =>
  Effect.retry(effect, {
    schedule: Schedule.exponential("50 millis").pipe(Schedule.intersect(Schedule.recurs(8))),
    while: (e) => (e.cause as { retriable?: boolean } | undefined)?.retriable === true
  })

const toRecord =
  (topic: string, partition: number) =>
  (m: KafkaMessage): LogRecord => ({
    topic,
    partition,
    offset: Number(m.offset),
    key: m.key?.toString("utf8") ?? "",
    value: m.value?.toString("utf8") ?? "",
    timestamp: Number(m.timestamp)
  })

const sortByPartition = (offsets: ReadonlyArray<{ partition: number; offset: string }>): Array<PartitionOffset> =>
  offsets.map((o) => ({ partition: o.partition, offset: Number(o.offset) })).sort((a, b) => a.partition - b.partition)

const chunks = <T>(items: ReadonlyArray<T>, size: number): Array<ReadonlyArray<T>> => {
  const out: Array<ReadonlyArray<T>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}

/**
 * The event log on Apache Kafka through kafkajs. Topics are created with 8 partitions on
 * first use; the idempotent producer writes with acks from all in-sync replicas and
 * partitions by key (murmur2, as Kafka's own clients). Group members commit an offset only
 * after their handler succeeded; a failed batch is fetched again after a back-off.
 * Followers and reads use a throw-away group, explicit seeks, and never commit.
 */
export const make = (brokers: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const runtime = yield* Effect.runtime<never>()
    const log = Runtime.runSync(runtime)
    const toEffectLogger: logCreator =
      () =>
      ({ namespace, level, log: { message, timestamp: _, logger: __, ...extra } }) => {
        const text = `kafkajs ${namespace}: ${message}`
        if (ROUTINE.test(message) || ROUTINE.test(String(extra.error ?? ""))) log(Effect.logDebug(text, extra))
        else if (level === logLevel.ERROR) log(Effect.logError(text, extra))
        else log(Effect.logWarning(text, extra))
      }
    const kafka = new Kafka({
      clientId: "shortlinks",
      brokers: [...brokers],
      logLevel: logLevel.WARN,
      logCreator: toEffectLogger
    })

    const admin: Admin = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: async () => {
          const a = kafka.admin()
          await a.connect()
          return a
        },
        catch: kafkaError(`cannot connect to Kafka at ${brokers.join(",")}`)
      }),
      (a) => Effect.promise(() => a.disconnect())
    )
    const producer: Producer = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: async () => {
          const p = kafka.producer({
            idempotent: true,
            // One request in flight per broker keeps the idempotent producer's sequences in order.
            maxInFlightRequests: 1,
            allowAutoTopicCreation: false,
            createPartitioner: Partitioners.DefaultPartitioner
          })
          await p.connect()
          return p
        },
        catch: kafkaError(`cannot connect to Kafka at ${brokers.join(",")}`)
      }),
      (p) => Effect.promise(() => p.disconnect())
    )

    const knownTopics = new Set<string>()
    const ensureTopic = (topic: string) =>
      knownTopics.has(topic)
        ? Effect.void
        : retriable(
            Effect.tryPromise({
              try: () => admin.createTopics({ topics: [{ topic, numPartitions: PARTITIONS }], waitForLeaders: true }),
              catch: kafkaError(`cannot create topic ${topic}`)
            })
          ).pipe(Effect.tap(() => Effect.sync(() => knownTopics.add(topic))))

    const publish = (topic: string, records: ReadonlyArray<OutgoingRecord>) =>
      records.length === 0
        ? Effect.void
        : ensureTopic(topic).pipe(
            Effect.zipRight(
              Effect.tryPromise({
                try: () =>
                  producer.send({ topic, acks: -1, messages: records.map((r) => ({ key: r.key, value: r.value })) }),
                catch: kafkaError(`publish to ${topic} failed`)
              })
            ),
            Effect.timeoutFail({
              duration: "30 seconds",
              onTimeout: () => new EventLogError({ message: `publish to ${topic} timed out` })
            }),
            Effect.asVoid
          )

    const endOffsets = (topic: string) =>
      ensureTopic(topic).pipe(
        Effect.zipRight(
          retriable(
            Effect.tryPromise({
              try: () => admin.fetchTopicOffsets(topic),
              catch: kafkaError(`cannot read the end offsets of ${topic}`)
            })
          )
        ),
        Effect.map(sortByPartition)
      )

    const resolveStart = (topic: string, startAt: StartAt) =>
      Effect.flatMap(endOffsets(topic), (ends) =>
        startOffsets(
          startAt,
          ends,
          retriable(
            Effect.tryPromise({
              try: () => admin.fetchTopicOffsets(topic),
              catch: kafkaError(`cannot read the offsets of ${topic}`)
            })
          ).pipe(Effect.map((o) => sortByPartition(o.map((p) => ({ partition: p.partition, offset: p.low }))))),
          (time) =>
            retriable(
              Effect.tryPromise({
                try: () => admin.fetchTopicOffsetsByTimestamp(topic, time.getTime()),
                catch: kafkaError(`cannot find offsets by time in ${topic}`)
              })
            ).pipe(Effect.map(sortByPartition))
        )
      )

    /** A connected consumer, stopped when the scope closes (after its handlers were interrupted). */
    const acquireConsumer = (groupId: string) =>
      Effect.acquireRelease(
        Effect.tryPromise({
          try: async () => {
            const c = kafka.consumer({
              groupId,
              maxWaitTimeInMs: 100,
              heartbeatInterval: 1000,
              sessionTimeout: 10_000,
              allowAutoTopicCreation: false
            })
            c.on(c.events.CRASH, ({ payload }) =>
              log(
                Effect.logError(
                  `event log: consumer of group ${groupId} crashed${payload.restart ? "; restarting" : ""}`,
                  payload.error
                )
              )
            )
            await c.connect()
            return c
          },
          catch: kafkaError(`cannot connect a consumer of group ${groupId}`)
        }),
        (c) => Effect.promise(() => c.disconnect())
      )

    /**
     * Runs the batches a consumer fetches through `process`, chunk by chunk. A chunk that
     * fails is left unresolved and fetched again after the back-off; `onDone` resolves it.
     */
    const runConsumer = <R>(
      consumer: Consumer,
      topic: string,
      fromBeginning: boolean,
      maxBatch: number,
      process: (
        records: ReadonlyArray<LogRecord>,
        partition: number
      ) => Effect.Effect<void, HandlerFailed | EventLogError, R>,
      onDone: (payload: EachBatchPayload, lastOffset: number) => Promise<void>
    ) =>
      Effect.gen(function* () {
        const run = yield* FiberSet.makeRuntimePromise<R>()
        let closing = false
        yield* Effect.addFinalizer(() => Effect.sync(() => (closing = true)))
        let failures = 0
        const eachBatch = async (payload: EachBatchPayload) => {
          const { batch, isRunning, isStale, heartbeat } = payload
          const records = batch.messages.map(toRecord(topic, batch.partition))
          for (const chunk of chunks(records, maxBatch)) {
            if (closing || !isRunning() || isStale()) return
            const exit = await run(Effect.exit(process(chunk, batch.partition))).catch(() => undefined)
            // Interrupted by the scope closing: nothing is resolved, the batch comes again.
            if (exit === undefined) return
            if (Exit.isFailure(exit)) {
              if (closing) return
              failures++
              const why = Cause.failureOption(exit.cause)
              await run(
                Effect.logWarning(
                  `event log: ${topic}/${batch.partition} failed (attempt ${failures}); redelivering after back-off`,
                  why._tag === "Some" && why.value instanceof HandlerFailed ? why.value.cause : exit.cause
                ).pipe(Effect.zipRight(Effect.sleep(backoff(failures))))
              ).catch(() => undefined)
              return
            }
            failures = 0
            // Also while closing: disconnect waits for this batch, so its commit is not lost.
            await onDone(payload, chunk[chunk.length - 1]!.offset)
            await heartbeat()
          }
        }
        yield* Effect.tryPromise({
          try: async () => {
            await consumer.subscribe({ topics: [topic], fromBeginning })
            await consumer.run({ autoCommit: false, eachBatchAutoResolve: false, eachBatch })
          },
          catch: kafkaError(`cannot start consuming ${topic}`)
        })
      })

    const subscribe = <A, I, E, R>(
      options: SubscribeOptions,
      schema: Schema.Schema<A, I, never>,
      handler: (batch: Batch<A>) => Effect.Effect<void, E, R>
    ): Effect.Effect<void, EventLogError, Scope.Scope | R> =>
      Effect.gen(function* () {
        const { group, topic } = options
        const startAt = options.startAt ?? { _tag: "Beginning" }
        const decode = decoder(schema)
        const dlq = deadLetterTopic(topic)
        yield* ensureTopic(topic)
        yield* ensureTopic(dlq)
        // A group without committed offsets starts where asked: set them while it has no members.
        const committed = yield* retriable(
          Effect.tryPromise({
            try: () => admin.fetchOffsets({ groupId: group, topics: [topic] }),
            catch: kafkaError(`cannot read the offsets of group ${group}`)
          })
        )
        const missing = new Set(
          (committed[0]?.partitions ?? []).filter((p) => Number(p.offset) < 0).map((p) => p.partition)
        )
        if (missing.size > 0 && startAt._tag !== "Beginning") {
          const starts = yield* resolveStart(topic, startAt)
          yield* Effect.tryPromise(() =>
            admin.setOffsets({
              groupId: group,
              topic,
              partitions: starts
                .filter((s) => missing.has(s.partition))
                .map((s) => ({ partition: s.partition, offset: String(s.offset) }))
            })
          ).pipe(
            // Another member is running: the group's positions are already being set.
            Effect.catchAll((e) => Effect.logDebug(`event log: group ${group} kept its positions`, e))
          )
        }
        const consumer = yield* acquireConsumer(group)
        const process = (records: ReadonlyArray<LogRecord>, partition: number) =>
          Effect.gen(function* () {
            const { batch, poison } = decode(topic, partition, records)
            if (poison.length > 0) {
              yield* Effect.logWarning(
                `event log: ${poison.length} message(s) of ${topic}/${partition} do not decode; moved to ${dlq}`
              )
              yield* publish(
                dlq,
                poison.map((r) => ({ key: r.key, value: r.value }))
              )
            }
            if (batch.events.length > 0) yield* runHandler(handler, batch)
          })
        yield* runConsumer(
          consumer,
          topic,
          startAt._tag === "Beginning",
          options.maxBatch ?? DEFAULT_MAX_BATCH,
          process,
          async ({ resolveOffset, commitOffsetsIfNecessary, uncommittedOffsets }, lastOffset) => {
            resolveOffset(String(lastOffset))
            await commitOffsetsIfNecessary(uncommittedOffsets())
          }
        )
      })

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
      topic: string,
      starts: ReadonlyArray<PartitionOffset>,
      process: (records: ReadonlyArray<LogRecord>, partition: number) => Effect.Effect<void, HandlerFailed, R>,
      onDone: (payload: EachBatchPayload, lastOffset: number) => Promise<void>
    ) =>
      Effect.gen(function* () {
        const consumer = yield* acquireConsumer(`follow.${topic}.${randomBytes(8).toString("hex")}`)
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

    const follow = <A, I, E, R>(
      options: FollowOptions,
      schema: Schema.Schema<A, I, never>,
      handler: (batch: Batch<A>) => Effect.Effect<void, E, R>
    ): Effect.Effect<void, EventLogError, Scope.Scope | R> =>
      Effect.gen(function* () {
        const { topic } = options
        const starts = yield* resolveStart(topic, options.startAt)
        yield* startFollower(
          topic,
          starts,
          followProcess(topic, decoder(schema), handler),
          async ({ resolveOffset }, lastOffset) => resolveOffset(String(lastOffset))
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
        const starts = yield* resolveStart(topic, options.startAt)
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
        yield* startFollower(topic, starts, process, async ({ resolveOffset }, lastOffset) =>
          resolveOffset(String(lastOffset))
        )
        yield* Deferred.await(done)
        return ends
      }).pipe(Effect.scoped)

    return EventLog.of({ publish, subscribe, follow, read, endOffsets, kind: "kafka" })
  })

/** The Kafka event log on these brokers (host:port). */
export const KafkaEventLogLive = (brokers: ReadonlyArray<string>): Layer.Layer<EventLog, EventLogError> =>
  Layer.scoped(EventLog, make(brokers))
