import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option } from "effect"
import { StorageRepo } from "../../domain/ports/StorageRepo.js"

const make = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient

  /** The row lock serializes concurrent reservations of the account until commit. */
  const reserve = (accountId: string, unmetered: boolean, bytes: number, limit: number | null) =>
    sql<{ bytes: string }>`
      INSERT INTO storage_usage (account_id, unmetered, bytes)
      SELECT ${accountId}, ${unmetered}, ${bytes}
      WHERE ${limit}::bigint IS NULL OR ${bytes}::bigint <= ${limit}::bigint
      ON CONFLICT (account_id, unmetered) DO UPDATE SET bytes = storage_usage.bytes + ${bytes}
      WHERE ${limit}::bigint IS NULL OR storage_usage.bytes + ${bytes}::bigint <= ${limit}::bigint
      RETURNING bytes`.pipe(
      Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (r) => Number(r.bytes))),
      Effect.orDie
    )

  const adjust = (accountId: string, unmetered: boolean, delta: number) =>
    delta === 0
      ? Effect.void
      : sql`
          INSERT INTO storage_usage (account_id, unmetered, bytes) VALUES (${accountId}, ${unmetered}, greatest(${delta}::bigint, 0))
          ON CONFLICT (account_id, unmetered) DO UPDATE SET bytes = greatest(storage_usage.bytes + ${delta}::bigint, 0)`.pipe(
          Effect.asVoid,
          Effect.orDie
        )

  const current = (accountId: string) =>
    sql<{ unmetered: boolean; bytes: string }>`
      SELECT unmetered, bytes FROM storage_usage WHERE account_id = ${accountId}`.pipe(
      Effect.map((rows) => ({
        ordinary: Number(rows.find((r) => !r.unmetered)?.bytes ?? 0),
        unmetered: Number(rows.find((r) => r.unmetered)?.bytes ?? 0)
      })),
      Effect.orDie
    )

  return StorageRepo.of({ reserve, adjust, current })
})

export const StorageRepoLive: Layer.Layer<StorageRepo, never, PgClient.PgClient> = Layer.effect(StorageRepo, make)
