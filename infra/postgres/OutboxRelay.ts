import { PgClient } from "@effect/sql-pg"
import { Duration, Effect, Layer, Metric, Queue, Schedule } from "effect"
import { EventLog } from "../../domain/EventLog.js"
import { retryWithBackoff } from "../eventlog/Backoff.js"
import { POLL_INTERVAL_MS } from "../eventlog/Shared.js"
import { outboxDepth, outboxRelayed } from "../Metrics.js"
import { listenInBackground } from "./Listen.js"

/** The advisory lock that makes one relay at a time publish (so the log gets the outbox order). */
export const RELAY_LOCK_ID = 7_301_004_001n

const BATCH = 500
export const RETENTION_DAYS = 7

/**
 * Publishes outbox rows to the event log in `seq` order and marks them published, in one
 * transaction per batch under a transaction-scoped advisory lock. With the embedded log the
 * publish joins that transaction (exactly once); with Kafka a crash between publish and
 * commit publishes the batch again (consumers deduplicate by event id).
 */
const make = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient
  const log = yield* EventLog

  /** A batch of outbox rows to the log, then marked published (a trace of its own when traced). */
  const publish = (rows: ReadonlyArray<{ seq: string; topic: string; key: string; event: unknown }>) =>
    Effect.gen(function* () {
      const byTopic = new Map<string, Array<{ key: string; value: string }>>()
      for (const row of rows) {
        const list = byTopic.get(row.topic) ?? []
        list.push({ key: row.key, value: JSON.stringify(row.event) })
        byTopic.set(row.topic, list)
      }
      for (const [topic, records] of byTopic) yield* log.publish(topic, records)
      yield* sql.unsafe(`UPDATE outbox SET published_at = now() WHERE seq = ANY($1::bigint[])`, [
        rows.map((r) => r.seq)
      ])
      return byTopic
    }).pipe(
      Effect.withSpan("OutboxRelay.batch", {
        kind: "producer",
        root: true,
        attributes: { "messaging.batch.message_count": rows.length }
      })
    )

  /** Rows published by topic, or undefined when another relay holds the lock. */
  const relayLocked = Effect.gen(function* () {
    const [lock] = yield* sql<{ locked: boolean }>`
      SELECT pg_try_advisory_xact_lock(${RELAY_LOCK_ID.toString()}::bigint) AS locked`
    if (!lock?.locked) return undefined
    const rows = yield* sql<{ seq: string; topic: string; key: string; event: unknown }>`
      SELECT seq, topic, key, event FROM outbox WHERE published_at IS NULL ORDER BY seq LIMIT ${BATCH}`
    // The depth as this round sees it: a full batch may have more behind it (counted on the partial index).
    const depth =
      rows.length < BATCH
        ? rows.length
        : ((yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM outbox WHERE published_at IS NULL`)[0]?.n ?? 0)
    yield* Metric.set(outboxDepth, depth)
    if (rows.length === 0) return new Map<string, ReadonlyArray<unknown>>()
    return yield* publish(rows)
  }).pipe(sql.withTransaction)

  /** Rows published (counted once committed), or undefined when another relay holds the lock. */
  const relayBatch = Effect.flatMap(relayLocked, (byTopic) =>
    Effect.gen(function* () {
      if (byTopic === undefined) return undefined
      let relayed = 0
      for (const [topic, records] of byTopic) {
        relayed += records.length
        yield* Metric.incrementBy(Metric.tagged(outboxRelayed, "topic", topic), records.length)
      }
      return relayed
    })
  )

  const wake = yield* Queue.sliding<void>(1)
  yield* listenInBackground(sql, "outbox", yield* Effect.scope, () => wake.unsafeOffer(undefined))
  const waitForWork = Queue.take(wake).pipe(
    Effect.timeoutOption(POLL_INTERVAL_MS),
    Effect.zipRight(Queue.takeAll(wake)),
    Effect.asVoid
  )

  // A full batch: there may be more at once.
  const step = Effect.flatMap(relayBatch, (relayed) => (relayed === BATCH ? Effect.void : waitForWork))
  const loop = Effect.forever(
    retryWithBackoff(step, (cause, attempt) =>
      Effect.logWarning(`outbox relay: publish failed (attempt ${attempt}); rows stay unpublished`, cause)
    )
  )
  yield* Effect.forkScoped(loop)

  yield* sql`DELETE FROM outbox WHERE published_at < now() - make_interval(days => ${RETENTION_DAYS})`.pipe(
    Effect.catchAllCause((cause) => Effect.logWarning("outbox purge failed", cause)),
    Effect.repeat(Schedule.spaced(Duration.hours(1))),
    Effect.forkScoped
  )
})

export const OutboxRelayLive: Layer.Layer<never, never, PgClient.PgClient | EventLog> = Layer.scopedDiscard(make)
