import { Context, type Effect, type Either, type Option } from "effect"
import type { UsageMetric } from "../Plan.js"

export interface UsageRepoShape {
  /**
   * Counts one use unless that would go past `limit` (null: no limit, count anyway).
   * The new value, or None when the quota is used up, and then nothing changed. Concurrent
   * uses of one counter are serialized until the transaction ends, so they never go past
   * the limit.
   */
  readonly reserve: (
    accountId: string,
    period: string,
    metric: UsageMetric,
    limit: number | null
  ) => Effect.Effect<Option.Option<number>>
  /** The current value (0 when nothing was counted). */
  readonly current: (accountId: string, period: string, metric: UsageMetric) => Effect.Effect<number>
  /**
   * Runs `use` (the change being counted), then counts it, all inside a savepoint of the
   * caller's transaction. When the quota is used up, `use` is rolled back and the answer is
   * Left(current value). When `use` fails, nothing is counted.
   */
  readonly counted: <A, E, R>(
    accountId: string,
    period: string,
    metric: UsageMetric,
    limit: number | null,
    use: Effect.Effect<A, E, R>
  ) => Effect.Effect<Either.Either<A, number>, E, R>
}

/** Usage counters per account, period (`YYYY-MM`, UTC) and metric, in the caller's transaction. */
export class UsageRepo extends Context.Tag("UsageRepo")<UsageRepo, UsageRepoShape>() {}
