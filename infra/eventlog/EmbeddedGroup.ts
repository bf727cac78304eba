import { Cause, Data, Effect, Exit, Metric, Option, type Schema, type Scope } from "effect"
import { type Batch, deadLetterTopic, type EventLogError, type SubscribeOptions } from "../../domain/EventLog.js"
import { type BackoffStep, nextBackoff, retryWithBackoff } from "./Backoff.js"
import { type EmbeddedStore, logError, toRecord } from "./EmbeddedStore.js"
import {
  consumerLag,
  DEFAULT_MAX_BATCH,
  decoder,
  HandlerFailed,
  PARTITIONS,
  POLL_INTERVAL_MS,
  runHandler
} from "./Shared.js"

type Restore = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>

class Locked extends Data.TaggedClass("Locked")<{}> {}

/**
 * A member of a consumer group of the embedded event log. It holds the row lock of the
 * group's offset for a partition while its handler runs (other members skip that
 * partition), and moves the offset in the same transaction after the handler succeeded.
 * Handler queries on the same PgClient join that transaction.
 */
export const subscribeGroup = <A, I, E, R>(
  store: EmbeddedStore,
  options: SubscribeOptions,
  schema: Schema.Schema<A, I, never>,
  handler: (batch: Batch<A>) => Effect.Effect<void, E, R>
): Effect.Effect<void, EventLogError, Scope.Scope | R> =>
  Effect.gen(function* () {
    const { sql } = store
    const { group, topic } = options
    const maxBatch = options.maxBatch ?? DEFAULT_MAX_BATCH
    const decode = decoder(schema)
    const dlq = deadLetterTopic(topic)
    yield* store.ensureTopic(topic)
    yield* store.ensureTopic(dlq)
    const starts = yield* store.resolveStart(topic, options.startAt ?? { _tag: "Beginning" })
    yield* sql
      .unsafe(
        `INSERT INTO event_log_offsets (group_id, topic, partition, next_offset)
         SELECT $1, $2, s.p, s.o FROM unnest($3::int[], $4::bigint[]) AS s(p, o) ON CONFLICT DO NOTHING`,
        [group, topic, starts.map((s) => s.partition), starts.map((s) => s.offset)]
      )
      .pipe(Effect.mapError(logError(`cannot join group ${group}`)))
    const wait = yield* store.wakeups(topic)
    const lag = consumerLag(group, topic)

    /**
     * Number of records consumed, or Locked when another member holds the partition. Runs
     * inside the member's uninterruptible sweep: stopping the member interrupts the reads and
     * the handler (the transaction rolls back), but not the commit after a handler succeeded.
     */
    const consume = (restore: Restore, partition: number) =>
      Effect.gen(function* () {
        const rows = yield* restore(sql<{ next_offset: string }>`
          SELECT next_offset FROM event_log_offsets
          WHERE group_id = ${group} AND topic = ${topic} AND partition = ${partition}
          FOR UPDATE SKIP LOCKED`)
        if (rows.length === 0) return yield* Effect.fail(new Locked())
        const from = Number(rows[0]!.next_offset)
        const records = (yield* restore(store.readPartition(topic, partition, from, maxBatch))).map(toRecord(topic))
        if (records.length === 0) return 0
        const { batch, poison } = decode(topic, partition, records)
        if (poison.length > 0) {
          yield* Effect.logWarning(
            `event log: ${poison.length} message(s) of ${topic}/${partition} do not decode; moved to ${dlq}`
          )
          // Same transaction: the dead letters are written exactly when the offset moves.
          yield* restore(
            store.publish(
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

    const pending = sql<{ partition: number; lag: number }>`
      SELECT o.partition, (h.next_offset - o.next_offset)::float8 AS lag FROM event_log_offsets o
      JOIN event_log_heads h ON h.topic = o.topic AND h.partition = o.partition
      WHERE o.group_id = ${group} AND o.topic = ${topic} AND h.next_offset > o.next_offset`

    // Per partition, the run of failures it is in: a failed partition waits out its back-off
    // while the sweep goes on with the others.
    const failures = new Map<number, BackoffStep>()
    // Members start their sweep at different partitions so that they spread out.
    let rotation = Math.floor(Math.random() * PARTITIONS)

    /** One pass over the partitions with records to consume; true when some were consumed. */
    const sweep = (restore: Restore) =>
      Effect.gen(function* () {
        const rows = yield* restore(pending)
        // The group's lag as this sweep finds it (every partition, whoever holds it): for /metrics.
        yield* Metric.set(
          lag,
          rows.reduce((sum, r) => sum + Number(r.lag), 0)
        )
        const ready = rows.map((r) => r.partition)
        const now = Date.now()
        let progressed = false
        rotation = (rotation + 1) % PARTITIONS
        const order = ready.sort(
          (a, b) => ((a - rotation + PARTITIONS) % PARTITIONS) - ((b - rotation + PARTITIONS) % PARTITIONS)
        )
        for (const partition of order) {
          if ((failures.get(partition)?.retryAt ?? 0) > now) continue
          const exit = yield* Effect.exit(consume(restore, partition))
          if (Exit.isSuccess(exit)) {
            failures.delete(partition)
            if (exit.value > 0) progressed = true
            continue
          }
          if (Exit.isInterrupted(exit)) return yield* exit
          const error = Cause.failureOption(exit.cause)
          if (Option.isSome(error) && error.value instanceof Locked) continue
          const step = yield* nextBackoff(failures.get(partition))
          failures.set(partition, step)
          const why = Option.isSome(error) && error.value instanceof HandlerFailed ? error.value.cause : exit.cause
          yield* Effect.logWarning(
            `event log: group ${group} failed on ${topic}/${partition} (attempt ${step.attempt}); redelivering after back-off`,
            why
          )
        }
        return progressed
      })

    const nextRetryIn = () => {
      let min = POLL_INTERVAL_MS
      for (const { retryAt } of failures.values()) min = Math.min(min, retryAt - Date.now())
      return min
    }

    const step = Effect.uninterruptibleMask((restore) => sweep(restore)).pipe(
      Effect.flatMap((progressed) => (progressed ? Effect.void : wait(nextRetryIn())))
    )
    yield* Effect.forkScoped(
      Effect.forever(
        retryWithBackoff(step, (cause) =>
          Effect.logWarning(`event log: group ${group} on ${topic} cannot read; retrying`, cause)
        )
      )
    )
  })
