import type { SqlError } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Cause, Data, Duration, Effect, Exit, Layer, Option, Queue, type Schema, type Scope } from "effect"
import {
  type Batch,
  deadLetterTopic,
  EventLog,
  EventLogError,
  type FollowOptions,
  type LogRecord,
  type OutgoingRecord,
  type PartitionOffset,
  type SubscribeOptions
} from "../../domain/EventLog.js"
import { listenInBackground } from "../postgres/Listen.js"
import {
  backoff,
  DEFAULT_MAX_BATCH,
  decoder,
  decodeSkippingPoison,
  HandlerFailed,
  PARTITIONS,
  POLL_INTERVAL_MS,
  partitionOf,
  runHandler,
  startOffsets
} from "./Shared.js"

/** The NOTIFY channel of appends; the payload is the topic. */
const CHANNEL = "event_log"

/** Rows per INSERT statement of a publish (4 parameters each; PostgreSQL takes at most 65535). */
const ROWS_PER_STATEMENT = 5_000

const ALL_PARTITIONS = Array.from({ length: PARTITIONS }, (_, p) => p)

type Restore = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>

class Locked extends Data.TaggedClass("Locked")<{}> {}

const logError = (message: string) => (cause: SqlError.SqlError | EventLogError) =>
  cause._tag === "EventLogError" ? cause : new EventLogError({ message, cause })

interface RecordRow {
  readonly partition: number
  readonly offset: string
  readonly key: string
  readonly value: string
  readonly ts: number
}

const toRecord =
  (topic: string) =>
  (row: RecordRow): LogRecord => ({
    topic,
    partition: row.partition,
    offset: Number(row.offset),
    key: row.key,
    value: row.value,
    timestamp: row.ts
  })

/**
 * The event log in PostgreSQL, for a single machine or a small deployment. A partition is
 * a run of rows in `event_log`; appends to a partition are serialised by the row lock of
 * its head, so offsets are gap-free and become visible in order. A group member holds the
 * row lock of the group's offset for a partition while its handler runs (other members skip
 * that partition), and moves the offset in the same transaction after the handler
 * succeeded. Handler queries on the same PgClient join that transaction.
 */
export const make = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient
  const layerScope = yield* Effect.scope

  // One LISTEN for the whole adapter: UNLISTEN in @effect/sql-pg is per channel, not per stream.
  const waiters = new Map<string, Set<Queue.Queue<void>>>()
  const startListener = yield* Effect.cached(
    listenInBackground(sql, CHANNEL, layerScope, (topic) => {
      for (const q of waiters.get(topic) ?? []) q.unsafeOffer(undefined)
    })
  )
  /** A signal offered on every append to the topic; the waiter still polls every 500 ms. */
  const wakeups = (topic: string) =>
    Effect.gen(function* () {
      yield* startListener
      const queue = yield* Queue.sliding<void>(1)
      yield* Effect.acquireRelease(
        Effect.sync(() => {
          const set = waiters.get(topic) ?? new Set()
          set.add(queue)
          waiters.set(topic, set)
        }),
        () => Effect.sync(() => waiters.get(topic)?.delete(queue))
      )
      return (maxWaitMs: number) =>
        Queue.take(queue).pipe(
          Effect.timeoutOption(Math.max(0, Math.min(POLL_INTERVAL_MS, maxWaitMs))),
          Effect.zipRight(Queue.takeAll(queue)),
          Effect.asVoid
        )
    })

  const knownTopics = new Set<string>()
  const ensureTopic = (topic: string) =>
    knownTopics.has(topic)
      ? Effect.void
      : sql`INSERT INTO event_log_heads (topic, partition)
            SELECT ${topic}, p FROM generate_series(0, ${PARTITIONS - 1}) p ON CONFLICT DO NOTHING`.pipe(
          Effect.tap(() => Effect.sync(() => knownTopics.add(topic))),
          Effect.mapError(logError(`cannot create topic ${topic}`)),
          Effect.asVoid
        )

  const lockHeads = (topic: string, partitions: ReadonlyArray<number>) =>
    sql.unsafe<{ partition: number; next_offset: string }>(
      `SELECT partition, next_offset FROM event_log_heads
       WHERE topic = $1 AND partition = ANY($2::int[]) ORDER BY partition FOR UPDATE`,
      [topic, partitions]
    )

  const publish = (topic: string, records: ReadonlyArray<OutgoingRecord>) => {
    if (records.length === 0) return Effect.void
    const parts = records.map((r) => partitionOf(r.key))
    const touched = [...new Set(parts)].sort((a, b) => a - b)
    return Effect.gen(function* () {
      yield* ensureTopic(topic)
      let heads = yield* lockHeads(topic, touched)
      if (heads.length < touched.length) {
        // The cache said the topic exists, but its creation was rolled back with a caller's transaction.
        knownTopics.delete(topic)
        yield* sql`INSERT INTO event_log_heads (topic, partition)
                   SELECT ${topic}, p FROM generate_series(0, ${PARTITIONS - 1}) p ON CONFLICT DO NOTHING`
        heads = yield* lockHeads(topic, touched)
      }
      const next = new Map(heads.map((h) => [h.partition, Number(h.next_offset)]))
      const offsets = parts.map((p) => {
        const o = next.get(p)!
        next.set(p, o + 1)
        return o
      })
      // One statement per slice: the rows, the new heads and the wake-up (delivered at commit).
      // Values travel as plain text parameters: in an array literal every quote of the JSON
      // would be escaped (and unescaped), which costs more than the insert for large events.
      for (let start = 0; start < records.length; start += ROWS_PER_STATEMENT) {
        const end = Math.min(records.length, start + ROWS_PER_STATEMENT)
        const first = start === 0
        const params: Array<unknown> = first ? [topic, touched, touched.map((p) => next.get(p)!)] : [topic]
        const rows: Array<string> = []
        for (let i = start; i < end; i++) {
          const n = params.length
          rows.push(`($${n + 1}::int, $${n + 2}::bigint, $${n + 3}, $${n + 4})`)
          params.push(parts[i], offsets[i], records[i]!.key, records[i]!.value)
        }
        const insert = `INSERT INTO event_log (topic, partition, "offset", key, value)
          SELECT $1, r.p, r.o, r.k, r.v FROM (VALUES ${rows.join(", ")}) AS r(p, o, k, v)`
        yield* sql.unsafe(
          first
            ? `WITH ins AS (${insert}), upd AS (
                 UPDATE event_log_heads h SET next_offset = n.next
                 FROM unnest($2::int[], $3::bigint[]) AS n(p, next)
                 WHERE h.topic = $1 AND h.partition = n.p
               )
               SELECT pg_notify('${CHANNEL}', $1)`
            : insert,
          params
        )
      }
    }).pipe(sql.withTransaction, Effect.mapError(logError(`publish to ${topic} failed`)))
  }

  const endOffsets = (topic: string) =>
    sql<{ partition: number; next_offset: string }>`
      SELECT partition, next_offset FROM event_log_heads WHERE topic = ${topic}`.pipe(
      Effect.map((rows) => {
        const byPartition = new Map(rows.map((r) => [r.partition, Number(r.next_offset)]))
        return ALL_PARTITIONS.map((partition) => ({ partition, offset: byPartition.get(partition) ?? 0 }))
      }),
      Effect.mapError(logError(`cannot read the end offsets of ${topic}`))
    )

  const atTime = (topic: string, time: Date) =>
    sql<{ partition: number; offset: string }>`
      SELECT h.partition,
             coalesce((SELECT e."offset" FROM event_log e
                       WHERE e.topic = h.topic AND e.partition = h.partition AND e.appended_at >= ${time}
                       ORDER BY e.appended_at, e."offset" LIMIT 1), h.next_offset) AS "offset"
      FROM event_log_heads h WHERE h.topic = ${topic}`.pipe(
      Effect.map((rows) => {
        const byPartition = new Map(rows.map((r) => [r.partition, Number(r.offset)]))
        return ALL_PARTITIONS.map((partition) => ({ partition, offset: byPartition.get(partition) ?? 0 }))
      }),
      Effect.mapError(logError(`cannot find offsets by time in ${topic}`))
    )

  const resolveStart = (topic: string, startAt: FollowOptions["startAt"]) =>
    Effect.flatMap(endOffsets(topic), (ends) =>
      startOffsets(
        startAt,
        ends,
        Effect.succeed(ALL_PARTITIONS.map((partition) => ({ partition, offset: 0 }))),
        (time) => atTime(topic, time)
      )
    )

  const readPartition = (topic: string, partition: number, from: number, limit: number, before?: number) =>
    sql.unsafe<RecordRow>(
      `SELECT partition, "offset", key, value, (extract(epoch FROM appended_at) * 1000)::float8 AS ts
       FROM event_log WHERE topic = $1 AND partition = $2 AND "offset" >= $3 AND "offset" < $4
       ORDER BY "offset" LIMIT $5`,
      [topic, partition, from, before ?? Number.MAX_SAFE_INTEGER, limit]
    )

  const subscribe = <A, I, E, R>(
    options: SubscribeOptions,
    schema: Schema.Schema<A, I, never>,
    handler: (batch: Batch<A>) => Effect.Effect<void, E, R>
  ): Effect.Effect<void, EventLogError, Scope.Scope | R> =>
    Effect.gen(function* () {
      const { group, topic } = options
      const maxBatch = options.maxBatch ?? DEFAULT_MAX_BATCH
      const decode = decoder(schema)
      const dlq = deadLetterTopic(topic)
      yield* ensureTopic(topic)
      yield* ensureTopic(dlq)
      const starts = yield* resolveStart(topic, options.startAt ?? { _tag: "Beginning" })
      yield* sql
        .unsafe(
          `INSERT INTO event_log_offsets (group_id, topic, partition, next_offset)
         SELECT $1, $2, s.p, s.o FROM unnest($3::int[], $4::bigint[]) AS s(p, o) ON CONFLICT DO NOTHING`,
          [group, topic, starts.map((s) => s.partition), starts.map((s) => s.offset)]
        )
        .pipe(Effect.mapError(logError(`cannot join group ${group}`)))
      const wait = yield* wakeups(topic)

      /** Number of records consumed, or Locked when another member holds the partition. */
      /**
       * Runs inside the member's uninterruptible loop: stopping the member interrupts the reads
       * and the handler (the transaction rolls back), but not the commit after a handler succeeded.
       */
      const consume = (restore: Restore, partition: number) =>
        Effect.gen(function* () {
          const rows = yield* restore(sql<{ next_offset: string }>`
            SELECT next_offset FROM event_log_offsets
            WHERE group_id = ${group} AND topic = ${topic} AND partition = ${partition}
            FOR UPDATE SKIP LOCKED`)
          if (rows.length === 0) return yield* Effect.fail(new Locked())
          const from = Number(rows[0]!.next_offset)
          const records = (yield* restore(readPartition(topic, partition, from, maxBatch))).map(toRecord(topic))
          if (records.length === 0) return 0
          const { batch, poison } = decode(topic, partition, records)
          if (poison.length > 0) {
            yield* Effect.logWarning(
              `event log: ${poison.length} message(s) of ${topic}/${partition} do not decode; moved to ${dlq}`
            )
            // Same transaction: the dead letters are written exactly when the offset moves.
            yield* restore(
              publish(
                dlq,
                poison.map((r) => ({ key: r.key, value: r.value }))
              )
            )
          }
          if (batch.events.length > 0) yield* restore(runHandler(handler, batch))
          yield* sql`UPDATE event_log_offsets SET next_offset = ${batch.lastOffset + 1}, updated_at = now()
                     WHERE group_id = ${group} AND topic = ${topic} AND partition = ${partition}`
          return records.length
        }).pipe(sql.withTransaction)

      const pending = sql<{ partition: number }>`
        SELECT o.partition FROM event_log_offsets o
        JOIN event_log_heads h ON h.topic = o.topic AND h.partition = o.partition
        WHERE o.group_id = ${group} AND o.topic = ${topic} AND h.next_offset > o.next_offset`

      const failures = new Map<number, number>()
      const retryAt = new Map<number, number>()
      // Members start their sweep at different partitions so that they spread out.
      let rotation = Math.floor(Math.random() * PARTITIONS)

      const sweep = (restore: Restore) =>
        Effect.gen(function* () {
          const ready = (yield* restore(pending)).map((r) => r.partition)
          const now = Date.now()
          let progressed = false
          rotation = (rotation + 1) % PARTITIONS
          const order = ready.sort(
            (a, b) => ((a - rotation + PARTITIONS) % PARTITIONS) - ((b - rotation + PARTITIONS) % PARTITIONS)
          )
          for (const partition of order) {
            if ((retryAt.get(partition) ?? 0) > now) continue
            const exit = yield* Effect.exit(consume(restore, partition))
            if (Exit.isSuccess(exit)) {
              failures.delete(partition)
              retryAt.delete(partition)
              if (exit.value > 0) progressed = true
              continue
            }
            if (Exit.isInterrupted(exit)) return yield* exit
            const error = Cause.failureOption(exit.cause)
            if (Option.isSome(error) && error.value instanceof Locked) continue
            const n = (failures.get(partition) ?? 0) + 1
            failures.set(partition, n)
            const delay = backoff(n)
            retryAt.set(partition, Date.now() + Duration.toMillis(delay))
            const why = Option.isSome(error) && error.value instanceof HandlerFailed ? error.value.cause : exit.cause
            yield* Effect.logWarning(
              `event log: group ${group} failed on ${topic}/${partition} (attempt ${n}); redelivering after back-off`,
              why
            )
          }
          return progressed
        })

      const nextRetryIn = () => {
        let min = POLL_INTERVAL_MS
        for (const at of retryAt.values()) min = Math.min(min, at - Date.now())
        return min
      }

      const loop = Effect.uninterruptibleMask((restore) =>
        Effect.gen(function* () {
          let dbFailures = 0
          while (true) {
            const exit = yield* Effect.exit(sweep(restore))
            if (Exit.isSuccess(exit)) {
              dbFailures = 0
              if (!exit.value) yield* restore(wait(nextRetryIn()))
            } else if (Exit.isInterrupted(exit)) {
              return yield* exit
            } else {
              dbFailures++
              yield* Effect.logWarning(`event log: group ${group} on ${topic} cannot read; retrying`, exit.cause)
              yield* restore(Effect.sleep(backoff(dbFailures)))
            }
          }
        })
      )
      yield* Effect.forkScoped(loop)
    })

  /** Shared by follow and read: one pass over every partition from the positions, up to `ends`. */
  const fetchAll = (topic: string, positions: Map<number, number>, limit: number, ends?: Map<number, number>) =>
    sql
      .unsafe<RecordRow>(
        `SELECT e.partition, e."offset", e.key, e.value, (extract(epoch FROM e.appended_at) * 1000)::float8 AS ts
       FROM unnest($2::int[], $3::bigint[], $4::bigint[]) AS c(p, o, e)
       CROSS JOIN LATERAL (
         SELECT partition, "offset", key, value, appended_at FROM event_log
         WHERE topic = $1 AND partition = c.p AND "offset" >= c.o AND "offset" < c.e
         ORDER BY "offset" LIMIT $5
       ) e
       ORDER BY e.partition, e."offset"`,
        [
          topic,
          ALL_PARTITIONS,
          ALL_PARTITIONS.map((p) => positions.get(p) ?? 0),
          ALL_PARTITIONS.map((p) => ends?.get(p) ?? Number.MAX_SAFE_INTEGER),
          limit
        ]
      )
      .pipe(
        Effect.map((rows) => {
          const byPartition = new Map<number, Array<LogRecord>>()
          for (const row of rows) {
            const record = toRecord(topic)(row)
            const list = byPartition.get(record.partition) ?? []
            list.push(record)
            byPartition.set(record.partition, list)
          }
          return byPartition
        }),
        Effect.mapError(logError(`cannot read ${topic}`))
      )

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
      const wait = yield* wakeups(topic)

      const pass = Effect.gen(function* () {
        const fetched = yield* fetchAll(topic, positions, DEFAULT_MAX_BATCH)
        for (const [partition, records] of fetched) {
          const batch = yield* decodeSkippingPoison(decode, topic, partition, records)
          if (batch.events.length > 0) yield* runHandler(handler, batch)
          positions.set(partition, batch.lastOffset + 1)
        }
        return fetched.size > 0
      })

      const loop = Effect.gen(function* () {
        let failures = 0
        while (true) {
          const exit = yield* Effect.exit(pass)
          if (Exit.isSuccess(exit)) {
            failures = 0
            if (!exit.value) yield* wait(POLL_INTERVAL_MS)
          } else if (Exit.isInterrupted(exit)) {
            return yield* exit
          } else {
            failures++
            yield* Effect.logWarning(`event log: follower of ${topic} failed; retrying after back-off`, exit.cause)
            yield* Effect.sleep(backoff(failures))
          }
        }
      })
      yield* Effect.forkScoped(loop)
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

  return EventLog.of({ publish, subscribe, follow, read, endOffsets, kind: "embedded" })
})

export const EmbeddedEventLogLive: Layer.Layer<EventLog, never, PgClient.PgClient> = Layer.scoped(EventLog, make)
