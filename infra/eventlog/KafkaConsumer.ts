import { Cause, Effect, Exit, FiberSet, Metric, Runtime, type Schema, type Scope } from "effect"
import type { Consumer, EachBatchPayload } from "kafkajs"
import {
  type Batch,
  deadLetterTopic,
  type EventLogError,
  type LogRecord,
  type SubscribeOptions
} from "../../domain/EventLog.js"
import { type BackoffStep, nextBackoff } from "./Backoff.js"
import { type KafkaClient, kafkaError, retriable, toRecord } from "./KafkaClient.js"
import { consumerLag, DEFAULT_MAX_BATCH, decoder, HandlerFailed, runHandler } from "./Shared.js"

const chunks = <T>(items: ReadonlyArray<T>, size: number): Array<ReadonlyArray<T>> => {
  const out: Array<ReadonlyArray<T>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}

/** A connected consumer, stopped when the scope closes (after its handlers were interrupted). */
export const acquireConsumer = (client: KafkaClient, groupId: string) => {
  const { kafka, log } = client
  return Effect.acquireRelease(
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
}

/**
 * Runs the batches a consumer fetches through `process`, chunk by chunk. A chunk that
 * fails is left unresolved and fetched again after the back-off; `onDone` resolves it.
 */
export const runConsumer = <R>(
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
    // The run of failures the consumer is in; the next success ends it.
    let failures: BackoffStep | undefined
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
          const why = Cause.failureOption(exit.cause)
          await run(
            Effect.gen(function* () {
              failures = yield* nextBackoff(failures)
              yield* Effect.logWarning(
                `event log: ${topic}/${batch.partition} failed (attempt ${failures.attempt}); redelivering after back-off`,
                why._tag === "Some" && why.value instanceof HandlerFailed ? why.value.cause : exit.cause
              )
              yield* Effect.sleep(failures.delay)
            })
          ).catch(() => undefined)
          return
        }
        failures = undefined
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

/**
 * A member of a consumer group: it commits an offset only after its handler succeeded; a
 * failed batch is fetched again after a back-off. Undecodable records go to the topic's
 * dead letters.
 */
export const subscribeGroup = <A, I, E, R>(
  client: KafkaClient,
  options: SubscribeOptions,
  schema: Schema.Schema<A, I, never>,
  handler: (batch: Batch<A>) => Effect.Effect<void, E, R>
): Effect.Effect<void, EventLogError, Scope.Scope | R> =>
  Effect.gen(function* () {
    const { admin, ensureTopic, publish, resolveStart } = client
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
    const consumer = yield* acquireConsumer(client, group)
    // Per partition this member consumed, the records after its last commit (from the fetch's
    // high watermark): their sum is the group's lag as this process knows it, for /metrics.
    const lags = new Map<number, number>()
    const lag = consumerLag(group, topic)
    const runtime = yield* Effect.runtime<never>()
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
      async ({ batch, resolveOffset, commitOffsetsIfNecessary, uncommittedOffsets }, lastOffset) => {
        resolveOffset(String(lastOffset))
        await commitOffsetsIfNecessary(uncommittedOffsets())
        lags.set(batch.partition, Math.max(0, Number(batch.highWatermark) - lastOffset - 1))
        let sum = 0
        for (const n of lags.values()) sum += n
        Runtime.runSync(runtime)(Metric.set(lag, sum))
      }
    )
  })
