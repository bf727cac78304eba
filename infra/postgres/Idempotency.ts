import { createHash } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import { Duration, Effect, Layer, Option, Schedule } from "effect"
import { IdempotencyStore, type StoredResponse } from "../../domain/ports/IdempotencyStore.js"

export const RETENTION_HOURS = 24

const make = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient

  const purgeExpired = sql<{ n: string }>`
    WITH gone AS (
      DELETE FROM idempotency_records WHERE created_at < now() - make_interval(hours => ${RETENTION_HOURS}) RETURNING 1
    ) SELECT count(*) AS n FROM gone`.pipe(Effect.map((rows) => Number(rows[0]!.n)))

  // Expired records are purged in the background (lookups ignore them anyway).
  yield* purgeExpired.pipe(
    Effect.catchAllCause((cause) => Effect.logWarning("idempotency purge failed", cause)),
    Effect.repeat(Schedule.spaced(Duration.minutes(10))),
    Effect.forkScoped
  )

  /** A transaction-scoped advisory lock on (account, key), released when the transaction ends. */
  const tryLock = (accountId: string, key: string) => {
    const lockId = createHash("sha256").update(`${accountId}\0${key}`).digest().readBigInt64BE(0)
    return sql<{ locked: boolean }>`SELECT pg_try_advisory_xact_lock(${lockId.toString()}::bigint) AS locked`.pipe(
      Effect.map((rows) => rows[0]!.locked)
    )
  }

  const find = (accountId: string, key: string) =>
    sql<{ fingerprint: string; status: number; content_type: string | null; body: Buffer }>`
      SELECT fingerprint, status, content_type, body FROM idempotency_records
      WHERE account_id = ${accountId} AND key = ${key}
        AND created_at > now() - make_interval(hours => ${RETENTION_HOURS})`.pipe(
      Effect.map((rows) =>
        Option.map(
          Option.fromNullable(rows[0]),
          (r): StoredResponse => ({
            fingerprint: r.fingerprint,
            status: r.status,
            contentType: r.content_type,
            body: r.body
          })
        )
      )
    )

  const save = (accountId: string, key: string, stored: StoredResponse) =>
    sql`
      INSERT INTO idempotency_records (account_id, key, fingerprint, status, content_type, body)
      VALUES (${accountId}, ${key}, ${stored.fingerprint}, ${stored.status}, ${stored.contentType}, ${stored.body})
      ON CONFLICT (account_id, key) DO UPDATE SET
        fingerprint = EXCLUDED.fingerprint, status = EXCLUDED.status, content_type = EXCLUDED.content_type,
        body = EXCLUDED.body, created_at = now()`.pipe(Effect.asVoid)

  return IdempotencyStore.of({ tryLock, find, save, purgeExpired })
})

/** Records kept RETENTION_HOURS; expired ones are purged every 10 minutes while the layer lives. */
export const IdempotencyStoreLive: Layer.Layer<IdempotencyStore, never, PgClient.PgClient> = Layer.scoped(
  IdempotencyStore,
  make
)
