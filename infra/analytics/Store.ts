import { Effect } from "effect"
import {
  type AnalyticsAggregates,
  AnalyticsError,
  type AnalyticsQuery,
  type AnalyticsShape,
  type AnalyticsWriter,
  type ClickBatch,
  type Dimension,
  Dimensions,
  type ValueCount
} from "../../domain/Analytics.js"
import * as Sql from "./Sql.js"

/** What the store needs from an engine: statements, JSONEachRow reads and JSONEachRow inserts. */
export interface Engine {
  readonly kind: "chdb" | "clickhouse"
  readonly exec: (sql: string) => Effect.Effect<void, AnalyticsError>
  readonly rows: <T>(sql: string) => Effect.Effect<ReadonlyArray<T>, AnalyticsError>
  /** One INSERT statement: one block, hence one part of the rollup. */
  readonly insert: (table: string, rows: ReadonlyArray<Sql.InputRow>) => Effect.Effect<void, AnalyticsError>
}

/**
 * Far below the engines' max_insert_block_size (1048576 rows), above which one insert would
 * become several parts and stop being atomic.
 */
export const MAX_INSERT_ROWS = 100_000

/** SQL text refused for bad input (a malformed id, a fractional offset) is a bug of the caller: a defect. */
const statement = <A>(build: () => A) => Effect.sync(build)

const num = (v: number | string) => Number(v)

type Counts = { clicks: number | string; visitors: number | string }
export type DayRow = Counts & { bot: number | string; day: number | string }
export type HourRow = Counts & { hour: number | string }
export type ValueRow = { dimension: string; value: string; clicks: number | string }

/**
 * The payload of a query from its rows (numbers may come back as strings): totals and the
 * day series from the per-day rows, the hour series from the hour rows, human clicks only.
 */
export const aggregatesOf = (
  granularity: AnalyticsQuery["granularity"],
  dimensions: ReadonlyArray<Dimension>,
  days: ReadonlyArray<DayRow>,
  hours: ReadonlyArray<HourRow>,
  values: ReadonlyArray<ValueRow>
): AnalyticsAggregates => {
  const human = days.filter((r) => num(r.bot) === 0)
  const sum = (rows: ReadonlyArray<Counts>, field: keyof Counts) => rows.reduce((s, r) => s + num(r[field]), 0)
  const breakdowns: Partial<Record<Dimension, Array<ValueCount>>> = {}
  for (const d of dimensions) breakdowns[d] = []
  for (const r of values) breakdowns[r.dimension as Dimension]?.push({ value: r.value, clicks: num(r.clicks) })
  const series =
    granularity === "hour"
      ? hours.map((r) => ({ start: num(r.hour), clicks: num(r.clicks), uniqueVisitors: num(r.visitors) }))
      : human.map((r) => ({ start: num(r.day), clicks: num(r.clicks), uniqueVisitors: num(r.visitors) }))
  return {
    clicks: sum(human, "clicks"),
    uniqueVisitors: sum(human, "visitors"),
    botClicks: sum(
      days.filter((r) => num(r.bot) === 1),
      "clicks"
    ),
    series,
    breakdowns
  }
}

/**
 * The first version's tables (one input row per click, count states), if still there, are
 * copied into the current rollup, then dropped. The copy is filled under another name and
 * renamed in one step, so a migration cut short starts over and never counts twice; with
 * the current rollup in place only the drop is left. Run before the projector starts (and,
 * against a ClickHouse server, with the previous version stopped).
 */
const migrateLegacy = (engine: Engine, database: string, live: Sql.Tables) =>
  Effect.gen(function* () {
    const legacy = Sql.legacyTables(database)
    const present = new Set(
      (yield* engine.rows<{ name: string }>(
        Sql.existingTables(database, [Sql.bare(legacy.rollup), Sql.bare(live.rollup)])
      )).map((r) => r.name)
    )
    if (!present.has(Sql.bare(legacy.rollup))) return
    if (!present.has(Sql.bare(live.rollup))) {
      const into = `${live.rollup}_migrating`
      for (const statement of Sql.migrateLegacyRollup(legacy, into)) yield* engine.exec(statement)
      yield* engine.exec(`RENAME TABLE ${into} TO ${live.rollup}`)
      yield* Effect.logInfo(`analytics: migrated ${legacy.rollup} to ${live.rollup}`)
    }
    // With what an interrupted rebuild of that version may have left.
    for (const t of [legacy, Sql.legacyTables(database, Sql.REBUILD), Sql.legacyTables(database, Sql.OLD)]) {
      for (const statement of Sql.dropTables(t)) yield* engine.exec(statement)
    }
  })

/** The analytics port over an engine, in `database` (created with its tables if missing). */
export const makeStore = (engine: Engine, database: string) =>
  Effect.gen(function* () {
    const live = Sql.tables(database)
    const rebuilt = Sql.tables(database, Sql.REBUILD)
    const old = Sql.tables(database, Sql.OLD)

    const run = (statements: ReadonlyArray<string>) => Effect.forEach(statements, engine.exec, { discard: true })

    yield* engine.exec(Sql.createDatabase(database))
    yield* migrateLegacy(engine, database, live)
    yield* run(Sql.createTables(live))

    const writer = (t: Sql.Tables): AnalyticsWriter => ({
      insertBatch: (batch: ClickBatch) =>
        Effect.gen(function* () {
          if (batch.rows.length > MAX_INSERT_ROWS) {
            return yield* new AnalyticsError({
              message: `a batch holds at most ${MAX_INSERT_ROWS} clicks (got ${batch.rows.length})`
            })
          }
          yield* engine.insert(t.input, yield* statement(() => Sql.inputRows(batch)))
        })
    })

    const watermarks = () =>
      Effect.map(
        engine.rows<Sql.WatermarkRow>(Sql.watermarks(live)),
        (rows) => new Map(rows.map((r) => [num(r.partition), num(r.offset)] as const))
      )

    /**
     * Totals and the day series come from per-day rows: unique visitors add up across days
     * because the visitor hash rotates daily.
     */
    const query = (q: AnalyticsQuery) =>
      Effect.gen(function* () {
        const dimensions = Dimensions.filter((d) => q.dimensions.includes(d))
        const [dailySql, hourlySql, breakdownsSql] = yield* statement(() => [
          Sql.daily(live, q),
          q.granularity === "hour" ? Sql.hourly(live, q) : "",
          dimensions.length === 0 ? "" : Sql.breakdowns(live, q, dimensions)
        ])
        const [days, hours, values] = yield* Effect.all(
          [
            engine.rows<DayRow>(dailySql),
            hourlySql === "" ? Effect.succeed([]) : engine.rows<HourRow>(hourlySql),
            breakdownsSql === "" ? Effect.succeed([]) : engine.rows<ValueRow>(breakdownsSql)
          ],
          { concurrency: "unbounded" }
        )
        return aggregatesOf(q.granularity, dimensions, days, hours, values)
      })

    const rebuild = <A, E, R>(fill: (writer: AnalyticsWriter) => Effect.Effect<A, E, R>) =>
      Effect.gen(function* () {
        // Leftovers of an earlier rebuild that stopped half-way.
        yield* run([...Sql.dropTables(rebuilt), ...Sql.dropTables(old)])
        yield* run(Sql.createTables(rebuilt))
        const result = yield* fill(writer(rebuilt)).pipe(
          Effect.tapErrorCause(() => run(Sql.dropTables(rebuilt)).pipe(Effect.ignore))
        )
        yield* engine.exec(Sql.swapRollup(live, rebuilt, old))
        yield* run([...Sql.dropTables(rebuilt), ...Sql.dropTables(old)])
        return result
      })

    return {
      ...writer(live),
      watermarks,
      query,
      reset: () => rebuild(() => Effect.void),
      rebuild,
      kind: engine.kind
    } satisfies AnalyticsShape
  })
