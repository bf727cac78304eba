import type { SqlError } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Effect, Queue, type Scope } from "effect"
import { EventLogError, type FollowOptions, type LogRecord, type OutgoingRecord } from "../../domain/EventLog.js"
import { listenInBackground } from "../postgres/Listen.js"
import { PARTITIONS, POLL_INTERVAL_MS, partitionOf, startOffsets } from "./Shared.js"

/** The NOTIFY channel of appends; the payload is the topic. */
const CHANNEL = "event_log"

/** Rows per INSERT statement of a publish (4 parameters each; PostgreSQL takes at most 65535). */
const ROWS_PER_STATEMENT = 5_000

export const ALL_PARTITIONS = Array.from({ length: PARTITIONS }, (_, p) => p)

export const logError = (message: string) => (cause: SqlError.SqlError | EventLogError) =>
  cause._tag === "EventLogError" ? cause : new EventLogError({ message, cause })

interface RecordRow {
  readonly partition: number
  readonly offset: string
  readonly key: string
  readonly value: string
  readonly ts: number
}

export const toRecord =
  (topic: string) =>
  (row: RecordRow): LogRecord => ({
    topic,
    partition: row.partition,
    offset: Number(row.offset),
    key: row.key,
    value: row.value,
    timestamp: row.ts
  })

/** A signal on every append to a topic, through one LISTEN for the whole adapter. */
const makeWakeups = (sql: PgClient.PgClient, layerScope: Scope.Scope) =>
  Effect.gen(function* () {
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
    return wakeups
  })

/**
 * Appends: a partition is a run of rows in `event_log`; appends to a partition are
 * serialised by the row lock of its head, so offsets are gap-free and become visible in order.
 */
const makeWrites = (sql: PgClient.PgClient) => {
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
  return { ensureTopic, publish } as const
}

/** Offsets and reads of records. */
const makeReads = (sql: PgClient.PgClient) => {
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
  return { endOffsets, resolveStart, readPartition, fetchAll } as const
}

/** The storage of the embedded event log: appends, offsets, reads and the wake-ups of appends. */
export const makeEmbeddedStore = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient
  const wakeups = yield* makeWakeups(sql, yield* Effect.scope)
  return { sql, wakeups, ...makeWrites(sql), ...makeReads(sql) } as const
})

export type EmbeddedStore = Effect.Effect.Success<typeof makeEmbeddedStore>
