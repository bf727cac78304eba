import { Effect, Runtime, Schedule } from "effect"
import { type Admin, Kafka, type KafkaMessage, type logCreator, logLevel, Partitioners, type Producer } from "kafkajs"
import {
  EventLogError,
  type LogRecord,
  type OutgoingRecord,
  type PartitionOffset,
  type StartAt
} from "../../domain/EventLog.js"
import { PARTITIONS, startOffsets } from "./Shared.js"

export const kafkaError = (message: string) => (cause: unknown) => new EventLogError({ message, cause })

// Normal events of group membership that kafkajs reports as warnings or errors.
const ROUTINE =
  /rebalancing|re-joining|not aware of this member|consumer not running|not the leader|does not host this topic|already exists|topic creation errors|leader not available/i

/** Leadership moves for a moment after a topic is created: retry what Kafka calls retriable. */
export const retriable = <A>(effect: Effect.Effect<A, EventLogError>) =>
  Effect.retry(effect, {
    schedule: Schedule.exponential("50 millis").pipe(Schedule.intersect(Schedule.recurs(8))),
    while: (e) => (e.cause as { retriable?: boolean } | undefined)?.retriable === true
  })

export const toRecord =
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

/** Runs an Effect from kafkajs' callbacks (its logger, its events) on the layer's runtime. */
export type RunSync = <A>(effect: Effect.Effect<A>) => A

/** The kafkajs client, its admin and its idempotent producer, disconnected when the scope closes. */
const connect = (brokers: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const runtime = yield* Effect.runtime<never>()
    const log: RunSync = Runtime.runSync(runtime)
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
    return { kafka, admin, producer, log } as const
  })

/**
 * The Kafka side of the event log that is not a consumer: topics (created with 8 partitions
 * on first use), publishing (acks from all in-sync replicas, partitioned by key with murmur2
 * as Kafka's own clients), and offsets.
 */
export const makeKafkaClient = (brokers: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const { kafka, admin, producer, log } = yield* connect(brokers)
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

    return { kafka, admin, log, ensureTopic, publish, endOffsets, resolveStart } as const
  })

export type KafkaClient = Effect.Effect.Success<ReturnType<typeof makeKafkaClient>>
