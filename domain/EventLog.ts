import { Context, Data, type Effect, type Schema, type Scope } from "effect"

/** A message as the log stores it. Offsets grow by one per message within a partition. */
export interface LogRecord {
  readonly topic: string
  readonly partition: number
  readonly offset: number
  /** The entity id: every message of one entity lands in one partition, in order. */
  readonly key: string
  /** The JSON text of the event. */
  readonly value: string
  /** When the log appended it (ms since the epoch). */
  readonly timestamp: number
}

export interface OutgoingRecord {
  readonly key: string
  readonly value: string
}

/** One partition's messages in offset order, decoded; `records` keeps the raw form beside them. */
export interface Batch<A> {
  readonly topic: string
  readonly partition: number
  readonly events: ReadonlyArray<{ readonly event: A; readonly record: LogRecord }>
  /** The last offset of the batch, poison messages included (what the commit moves to). */
  readonly lastOffset: number
}

/** Where reading starts: applied to every partition. */
export type StartAt =
  | { readonly _tag: "Beginning" }
  | { readonly _tag: "End" }
  | { readonly _tag: "Offset"; readonly offset: number }
  | { readonly _tag: "Time"; readonly time: Date }
  /** Per partition: the next offset to read (as from `endOffsets`). */
  | { readonly _tag: "Offsets"; readonly offsets: ReadonlyArray<PartitionOffset> }

export interface PartitionOffset {
  readonly partition: number
  /** The next offset to be written (= the count of messages ever written to the partition). */
  readonly offset: number
}

export class EventLogError extends Data.TaggedError("EventLogError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

export interface SubscribeOptions {
  /** Consumer group: the members of a group share the partitions; each has its own offsets. */
  readonly group: string
  readonly topic: string
  /** Where a group without committed offsets starts (default Beginning). */
  readonly startAt?: StartAt
  /** Upper bound of messages handed to the handler at once (default 5000). */
  readonly maxBatch?: number
}

export interface FollowOptions {
  readonly topic: string
  readonly startAt: StartAt
}

/**
 * The event log port: Kafka (kafkajs) when `KAFKA_BROKERS` is set, otherwise the embedded
 * log in PostgreSQL. Both give the same guarantees: a publish that succeeds is durable
 * (acks from all in-sync replicas, or a committed transaction) and keeps order per key;
 * a consumer's offsets move only after its handler has succeeded, so delivery is
 * at-least-once and handlers are idempotent by event id.
 *
 * Messages that the schema does not decode are poison: they go to the dead-letter topic
 * (`<topic>.dlq`, same key and value) and the consumer goes on. A handler failure is taken
 * as transient: the same batch is delivered again after a back-off.
 */
export interface EventLogShape {
  readonly publish: (topic: string, records: ReadonlyArray<OutgoingRecord>) => Effect.Effect<void, EventLogError>
  /** A group member, running until its scope closes. */
  readonly subscribe: <A, I, E, R>(
    options: SubscribeOptions,
    schema: Schema.Schema<A, I, never>,
    handler: (batch: Batch<A>) => Effect.Effect<void, E, R>
  ) => Effect.Effect<void, EventLogError, Scope.Scope | R>
  /** Every partition, without a group and without committing: for in-memory projections. */
  readonly follow: <A, I, E, R>(
    options: FollowOptions,
    schema: Schema.Schema<A, I, never>,
    handler: (batch: Batch<A>) => Effect.Effect<void, E, R>
  ) => Effect.Effect<void, EventLogError, Scope.Scope | R>
  /**
   * Reads from `startAt` up to the end offsets taken when the call starts, then returns
   * those end offsets: the basis of `cli replay`.
   */
  readonly read: <A, I, E, R>(
    options: FollowOptions,
    schema: Schema.Schema<A, I, never>,
    handler: (batch: Batch<A>) => Effect.Effect<void, E, R>
  ) => Effect.Effect<ReadonlyArray<PartitionOffset>, EventLogError | E, R>
  /** The next offset to be written, per partition. */
  readonly endOffsets: (topic: string) => Effect.Effect<ReadonlyArray<PartitionOffset>, EventLogError>
  /** Which adapter runs, for the start-up log: "kafka" or "embedded". */
  readonly kind: "kafka" | "embedded"
}

export class EventLog extends Context.Tag("EventLog")<EventLog, EventLogShape>() {}

/** The dead-letter topic of a topic. */
export const deadLetterTopic = (topic: string) => `${topic}.dlq`
