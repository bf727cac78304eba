import { Cause, Data, Effect, Either, Metric, Schema } from "effect"
import type { Batch, LogRecord, PartitionOffset, StartAt } from "../../domain/EventLog.js"
import { eventLogConsumerLag } from "../Metrics.js"

/** Partitions per topic, in both adapters. */
export const PARTITIONS = 8

/** Default upper bound of a batch handed to a handler. */
export const DEFAULT_MAX_BATCH = 5000

/** The fallback poll when no notification arrives (lost LISTEN connection, other process). */
export const POLL_INTERVAL_MS = 500

/** The same key goes to the same partition, in every process and release (FNV-1a over UTF-8). */
export const partitionOf = (key: string, partitions = PARTITIONS): number => {
  let h = 0x811c9dc5
  for (const byte of Buffer.from(key, "utf8")) {
    h ^= byte
    h = Math.imul(h, 0x01000193)
  }
  return (h >>> 0) % partitions
}

/** The lag gauge of a consumer group on a topic (records not consumed yet), in both adapters. */
export const consumerLag = (group: string, topic: string) =>
  eventLogConsumerLag.pipe(Metric.tagged("group", group), Metric.tagged("topic", topic))

/** A handler failed (or died): the batch is delivered again. */
export class HandlerFailed extends Data.TaggedError("HandlerFailed")<{ readonly cause: Cause.Cause<unknown> }> {}

/** Runs a handler; its failures and defects become `HandlerFailed`, interruption stays interruption. */
export const runHandler = <A, E, R>(
  handler: (batch: Batch<A>) => Effect.Effect<void, E, R>,
  batch: Batch<A>
): Effect.Effect<void, HandlerFailed, R> =>
  Effect.catchAllCause(
    Effect.suspend(() => handler(batch)),
    (cause) =>
      Cause.isInterruptedOnly(cause)
        ? Effect.failCause(cause as Cause.Cause<never>)
        : Effect.fail(new HandlerFailed({ cause }))
  )

export interface Decoded<A> {
  readonly batch: Batch<A>
  /** Records the schema does not decode (or that are not JSON). */
  readonly poison: ReadonlyArray<LogRecord>
}

/** Decodes one partition's records (offset order) into a batch and its poison messages. */
export const decoder = <A, I>(schema: Schema.Schema<A, I, never>) => {
  const decode = Schema.decodeUnknownEither(Schema.parseJson(schema))
  return (topic: string, partition: number, records: ReadonlyArray<LogRecord>): Decoded<A> => {
    const events: Array<{ event: A; record: LogRecord }> = []
    const poison: Array<LogRecord> = []
    for (const record of records) {
      const result = decode(record.value)
      if (Either.isRight(result)) events.push({ event: result.right, record })
      else poison.push(record)
    }
    return {
      batch: { topic, partition, events, lastOffset: records[records.length - 1]!.offset },
      poison
    }
  }
}

/**
 * Decodes for a reader without a group (follow, read): poison messages are skipped with a
 * warning, not dead-lettered, because a reader owns nothing and every reader would copy them.
 */
export const decodeSkippingPoison = <A>(
  decode: (topic: string, partition: number, records: ReadonlyArray<LogRecord>) => Decoded<A>,
  topic: string,
  partition: number,
  records: ReadonlyArray<LogRecord>
): Effect.Effect<Batch<A>> => {
  const { batch, poison } = decode(topic, partition, records)
  return poison.length === 0
    ? Effect.succeed(batch)
    : Effect.as(
        Effect.logWarning(`event log: skipped ${poison.length} undecodable message(s) of ${topic}/${partition}`),
        batch
      )
}

/** Per partition, the offset to start at, from the end offsets and the lookups an adapter provides. */
export const startOffsets = <E, R>(
  startAt: StartAt,
  ends: ReadonlyArray<PartitionOffset>,
  beginning: Effect.Effect<ReadonlyArray<PartitionOffset>, E, R>,
  atTime: (time: Date) => Effect.Effect<ReadonlyArray<PartitionOffset>, E, R>
): Effect.Effect<ReadonlyArray<PartitionOffset>, E, R> => {
  switch (startAt._tag) {
    case "Beginning":
      return beginning
    case "End":
      return Effect.succeed(ends)
    case "Offset":
      return Effect.map(beginning, (starts) =>
        ends.map((end, i) => ({
          partition: end.partition,
          offset: Math.min(end.offset, Math.max(startAt.offset, starts[i]?.offset ?? 0))
        }))
      )
    case "Time":
      return atTime(startAt.time)
    case "Offsets":
      return Effect.map(beginning, (starts) =>
        ends.map((end, i) => {
          const given = startAt.offsets.find((o) => o.partition === end.partition)
          const first = starts[i]?.offset ?? 0
          return { partition: end.partition, offset: given === undefined ? first : Math.max(first, given.offset) }
        })
      )
  }
}
