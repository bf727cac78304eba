import { SqlError } from "@effect/sql/SqlError"
import { PgClient } from "@effect/sql-pg"
import { Data, Effect, Either, Layer, Option } from "effect"
import type { UsageMetric } from "../../domain/Plan.js"
import { UsageRepo } from "../../domain/ports/UsageRepo.js"

/** The quota refused the use: internal to `counted`, which answers Left(used) instead. */
class Refused extends Data.TaggedError("UsageRefused") {}

const isSqlError = (u: unknown): u is SqlError => u instanceof SqlError
const isRefused = (u: unknown): u is Refused => u instanceof Refused

const make = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient

  /**
   * One conditional upsert: the row lock it takes serializes concurrent uses of the same
   * counter until the transaction ends, and the WHERE is re-checked against the latest
   * committed value, so concurrent requests can never go past the limit. A limit of 0
   * inserts nothing (the SELECT yields no row).
   */
  const reserve = (accountId: string, period: string, metric: UsageMetric, limit: number | null) =>
    sql<{ value: string }>`
      INSERT INTO usage_counters (account_id, period, metric, value)
      SELECT ${accountId}, ${period}, ${metric}, 1
      WHERE ${limit}::bigint IS NULL OR ${limit}::bigint >= 1
      ON CONFLICT (account_id, period, metric) DO UPDATE SET value = usage_counters.value + 1
      WHERE ${limit}::bigint IS NULL OR usage_counters.value < ${limit}::bigint
      RETURNING value`.pipe(
      Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (r) => Number(r.value))),
      Effect.orDie
    )

  const current = (accountId: string, period: string, metric: UsageMetric) =>
    sql<{ value: string }>`
      SELECT value FROM usage_counters
      WHERE account_id = ${accountId} AND period = ${period} AND metric = ${metric}`.pipe(
      Effect.map((rows) => (rows[0] === undefined ? 0 : Number(rows[0].value))),
      Effect.orDie
    )

  /**
   * The savepoint is rolled back when the quota is used up (so `use` changed nothing).
   * Counting last keeps the counter's row lock, which serializes the account's uses of that
   * counter until commit, for the shortest time.
   */
  const counted = <A, E, R>(
    accountId: string,
    period: string,
    metric: UsageMetric,
    limit: number | null,
    use: Effect.Effect<A, E, R>
  ): Effect.Effect<Either.Either<A, number>, E, R> =>
    sql
      .withTransaction(
        Effect.flatMap(use, (a) =>
          Effect.flatMap(reserve(accountId, period, metric, limit), (value) =>
            Option.isSome(value) ? Effect.succeed(a) : Effect.fail(new Refused())
          )
        )
      )
      .pipe(
        Effect.map(Either.right),
        Effect.catchIf(isRefused, () => Effect.map(current(accountId, period, metric), Either.left)),
        Effect.catchIf(isSqlError, Effect.die)
      )

  return UsageRepo.of({ reserve, current, counted })
})

export const UsageRepoLive: Layer.Layer<UsageRepo, never, PgClient.PgClient> = Layer.effect(UsageRepo, make)
