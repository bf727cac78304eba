import { Effect, Exit, Logger, LogLevel, Scope } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import {
  type AnalyticsAggregates,
  type AnalyticsQuery,
  type ClickRow,
  type Dimension,
  Dimensions,
  type ValueCount
} from "../../domain/Analytics.js"
import { acquireChdbEngine } from "../../infra/analytics/Chdb.js"
import { acquireServerEngine, parseServerUrl } from "../../infra/analytics/ClickHouseServer.js"
import * as Sql from "../../infra/analytics/Sql.js"
import {
  aggregatesOf,
  type DayRow,
  type Engine,
  type HourRow,
  makeStore,
  type ValueRow
} from "../../infra/analytics/Store.js"
import { removeTestChdbDir, testChdbDir, testClickHouseUrl, uniqueDatabase } from "../support/api.js"

/*
 * The first version of the analytics tables (one input row per click, fanned out by the view
 * with count states) is migrated by makeStore into the current ones. These tests build the
 * first version exactly as its code did (DDL, input rows and queries copied from it), then
 * check that the migrated store answers what the first version answered, on both engines.
 */

const iso = (s: string) => Date.parse(s) / 1000
const HOUR = 3600
const DAY = 86_400

const quiet = Logger.minimumLogLevel(LogLevel.Error)

// ---------------------------------------------------------------------------------------
// The first version, as its code had it.

const UNIQ = "uniqCombined(14)"
const UNIQ_STATE_IF = "uniqCombinedStateIf(14)"
const UNIQ_MERGE = "uniqCombinedMerge(14)"

const legacyCreateTables = (t: Sql.Tables): ReadonlyArray<string> => [
  `CREATE TABLE IF NOT EXISTS ${t.input} (
    link_id String, hour UInt32, bot UInt8, country String, referrer String, device String, browser String,
    visitor String, source_partition UInt32, source_offset UInt64
  ) ENGINE = Null`,
  `CREATE TABLE IF NOT EXISTS ${t.rollup} (
    link_id String, dimension String, period UInt32, start UInt32, value String, bot UInt8, source_partition UInt32,
    clicks AggregateFunction(count), visitors AggregateFunction(${UNIQ}, String),
    max_offset AggregateFunction(max, UInt64)
  ) ENGINE = AggregatingMergeTree() ORDER BY (link_id, dimension, period, start, value, bot, source_partition)`,
  // k = 0-4 by hour, 5-9 by day: the totals (k % 5 = 0), then country, referrer, device, browser.
  `CREATE MATERIALIZED VIEW IF NOT EXISTS ${t.view} TO ${t.rollup} AS
  SELECT link_id,
    multiIf(k % 5 = 0, '', k % 5 = 1, 'country', k % 5 = 2, 'referrer', k % 5 = 3, 'device', 'browser') AS dimension,
    toUInt32(if(k < 5, ${HOUR}, ${DAY})) AS period,
    toUInt32(if(k < 5, hour, intDiv(hour, ${DAY}) * ${DAY})) AS start,
    multiIf(k % 5 = 0, '', k % 5 = 1, country, k % 5 = 2, referrer, k % 5 = 3, device, browser) AS value,
    bot, source_partition,
    countState() AS clicks, ${UNIQ_STATE_IF}(visitor, k % 5 = 0) AS visitors, maxState(source_offset) AS max_offset
  FROM ${t.input} ARRAY JOIN [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] AS k
  GROUP BY link_id, dimension, period, start, value, bot, source_partition`
]

/** One batch as the first version's writer inserted it: one row per click, all with the batch's last offset. */
const legacyInsert = (t: Sql.Tables, partition: number, upTo: number, rows: ReadonlyArray<ClickRow>) => {
  const values =
    rows.length === 0
      ? // A batch without clicks moved the watermark with a marker row under the empty link id.
        [`('', 0, 0, '', '', '', '', '', ${partition}, ${upTo})`]
      : rows.map(
          (r) =>
            `(${Sql.quote(r.linkId)}, ${r.hour}, ${r.bot ? 1 : 0}, ${Sql.quote(r.country)}, ${Sql.quote(r.referrer)}, ` +
            `${Sql.quote(r.device)}, ${Sql.quote(r.browser)}, ${Sql.quote(r.visitor)}, ${partition}, ${upTo})`
        )
  return `INSERT INTO ${t.input} (link_id, hour, bot, country, referrer, device, browser, visitor, source_partition, source_offset)
  VALUES ${values.join(", ")}`
}

const legacyDaily = (t: Sql.Tables, q: AnalyticsQuery) =>
  `SELECT bot, intDiv(start, ${DAY}) * ${DAY} AS day, countMerge(clicks) AS clicks, ${UNIQ_MERGE}(visitors) AS visitors
  FROM ${t.rollup} WHERE link_id = ${Sql.quote(q.linkId)} AND dimension = '' AND ${Sql.coveringRows(q.from, q.to)}
  GROUP BY bot, day ORDER BY day`

const legacyHourly = (t: Sql.Tables, q: AnalyticsQuery) =>
  `SELECT start AS hour, countMerge(clicks) AS clicks, ${UNIQ_MERGE}(visitors) AS visitors FROM ${t.rollup}
  WHERE link_id = ${Sql.quote(q.linkId)} AND dimension = '' AND period = ${HOUR} AND start >= ${q.from} AND start < ${q.to} AND bot = 0
  GROUP BY hour ORDER BY hour`

const legacyBreakdowns = (t: Sql.Tables, q: AnalyticsQuery, dimensions: ReadonlyArray<Dimension>) =>
  `SELECT dimension, value, countMerge(clicks) AS clicks FROM ${t.rollup}
  WHERE link_id = ${Sql.quote(q.linkId)} AND dimension IN (${dimensions.map(Sql.quote).join(", ")}) AND bot = 0 AND ${Sql.coveringRows(q.from, q.to)}
  GROUP BY dimension, value`

const legacyWatermarks = (t: Sql.Tables) =>
  `SELECT source_partition AS partition, maxMerge(max_offset) AS offset FROM ${t.rollup} GROUP BY source_partition`

const num = (v: number | string) => Number(v)

/** The first version's store.query, over its tables. */
const legacyQuery = (engine: Engine, t: Sql.Tables, q: AnalyticsQuery) =>
  Effect.gen(function* () {
    const dimensions = Dimensions.filter((d) => q.dimensions.includes(d))
    const days = yield* engine.rows<DayRow>(legacyDaily(t, q))
    const hours = q.granularity === "hour" ? yield* engine.rows<HourRow>(legacyHourly(t, q)) : []
    const values = dimensions.length === 0 ? [] : yield* engine.rows<ValueRow>(legacyBreakdowns(t, q, dimensions))
    return aggregatesOf(q.granularity, dimensions, days, hours, values)
  })

// ---------------------------------------------------------------------------------------
// Known clicks and what any version must answer for them.

const HOURS = [
  "2024-05-01T20:00:00Z",
  "2024-05-01T22:00:00Z",
  "2024-05-01T23:00:00Z",
  "2024-05-02T00:00:00Z",
  "2024-05-02T01:00:00Z",
  "2024-05-02T05:00:00Z",
  "2024-05-03T01:00:00Z",
  "2024-05-03T12:00:00Z"
].map(iso)
const LINKS = ["link_ma", "link_mb", "link_mc"]
const COUNTRIES = ["DE", "FR", "US", ""]
const REFERRERS = ["", "news.example", "search.example", "o'reilly\\example"]
const DEVICES = ["mobile", "desktop", "tablet"]
const BROWSERS = ["Chrome", "Firefox", "Safari", "Edge", "Googlebot"]

/** 150 clicks over three links, eight hours of three days, 4 countries, 4 referrers, ~19 visitors a day, some bots. */
const CLICKS: ReadonlyArray<ClickRow> = Array.from({ length: 150 }, (_, i) => {
  const hour = HOURS[(i * 7 + (i >> 3)) % HOURS.length]!
  const bot = i % 9 === 4
  return {
    linkId: LINKS[(i + (i >> 4)) % LINKS.length]!,
    hour,
    bot,
    country: COUNTRIES[(i * 3 + (i >> 2)) % COUNTRIES.length]!,
    referrer: REFERRERS[(i >> 1) % REFERRERS.length]!,
    device: DEVICES[(i * 5 + (i >> 3)) % DEVICES.length]!,
    browser: bot ? "Googlebot" : BROWSERS[(i * 11) % 4]!,
    // The visitor hash rotates with the UTC day.
    visitor: `v${Math.floor(hour / DAY) % 7}_${(i * 13) % 19}`
  }
})

interface LegacyBatch {
  readonly partition: number
  readonly upTo: number
  readonly rows: ReadonlyArray<ClickRow>
}

/** The clicks in batches of up to 12 over partitions 0 and 3 (offsets skip poison), and one empty batch on partition 7. */
const BATCHES: ReadonlyArray<LegacyBatch> = (() => {
  const next = new Map<number, number>()
  const out: Array<LegacyBatch> = []
  for (let k = 0; k * 12 < CLICKS.length; k++) {
    const partition = k % 2 === 0 ? 0 : 3
    const rows = CLICKS.slice(k * 12, k * 12 + 12)
    const upTo = (next.get(partition) ?? 0) + rows.length + (k % 3) - 1
    next.set(partition, upTo + 1)
    out.push({ partition, upTo, rows })
  }
  out.push({ partition: 7, upTo: 41, rows: [] })
  return out
})()

const EXPECTED_WATERMARKS = new Map<number, number>()
for (const b of BATCHES)
  EXPECTED_WATERMARKS.set(b.partition, Math.max(EXPECTED_WATERMARKS.get(b.partition) ?? 0, b.upTo))

const QUERIES: ReadonlyArray<AnalyticsQuery> = [
  ...LINKS.flatMap(
    (linkId): Array<AnalyticsQuery> => [
      // Whole days.
      {
        linkId,
        from: iso("2024-05-01T00:00:00Z"),
        to: iso("2024-05-04T00:00:00Z"),
        granularity: "day",
        dimensions: Dimensions
      },
      // Partial days at both ends, by day and by hour.
      {
        linkId,
        from: iso("2024-05-01T22:00:00Z"),
        to: iso("2024-05-03T02:00:00Z"),
        granularity: "day",
        dimensions: Dimensions
      },
      {
        linkId,
        from: iso("2024-05-01T21:00:00Z"),
        to: iso("2024-05-02T02:00:00Z"),
        granularity: "hour",
        dimensions: Dimensions
      },
      // Across the day boundary, without breakdowns.
      {
        linkId,
        from: iso("2024-05-01T18:00:00Z"),
        to: iso("2024-05-02T08:00:00Z"),
        granularity: "hour",
        dimensions: []
      }
    ]
  ),
  {
    linkId: "link_none",
    from: iso("2024-05-01T00:00:00Z"),
    to: iso("2024-05-04T00:00:00Z"),
    granularity: "day",
    dimensions: Dimensions
  }
]

/** What a store must answer for `clicks`: per-day unique visitors summed, values as stored, empty ones left out. */
const expected = (clicks: ReadonlyArray<ClickRow>, q: AnalyticsQuery): AnalyticsAggregates => {
  const mine = clicks.filter((c) => c.linkId === q.linkId && c.hour >= q.from && c.hour < q.to)
  const human = mine.filter((c) => !c.bot)
  const buckets = (size: number) => {
    const by = new Map<number, Array<ClickRow>>()
    for (const c of human) {
      const start = Math.floor(c.hour / size) * size
      by.set(start, [...(by.get(start) ?? []), c])
    }
    return [...by.entries()]
      .sort(([a], [b]) => a - b)
      .map(([start, cs]) => ({ start, clicks: cs.length, uniqueVisitors: new Set(cs.map((c) => c.visitor)).size }))
  }
  const days = buckets(DAY)
  const breakdowns: Partial<Record<Dimension, Array<ValueCount>>> = {}
  for (const d of Dimensions.filter((d) => q.dimensions.includes(d))) {
    const counts = new Map<string, number>()
    for (const c of human) counts.set(c[d], (counts.get(c[d]) ?? 0) + 1)
    breakdowns[d] = [...counts.entries()].map(([value, n]) => ({ value, clicks: n }))
  }
  return normalize({
    clicks: human.length,
    uniqueVisitors: days.reduce((s, d) => s + d.uniqueVisitors, 0),
    botClicks: mine.length - human.length,
    series: q.granularity === "hour" ? buckets(HOUR) : days,
    breakdowns
  })
}

/** Breakdowns in value order (the engines give them in any order). */
const normalize = (a: AnalyticsAggregates): AnalyticsAggregates => ({
  ...a,
  breakdowns: Object.fromEntries(
    Object.entries(a.breakdowns).map(([d, values]) => [
      d,
      [...(values ?? [])].sort((x, y) => (x.value < y.value ? -1 : x.value > y.value ? 1 : 0))
    ])
  )
})

// ---------------------------------------------------------------------------------------

const serverUrl = testClickHouseUrl()

interface TestEngine {
  readonly name: string
  readonly available: boolean
  readonly acquire: () => Effect.Effect<Engine, unknown, Scope.Scope>
  readonly dropDatabase: (database: string) => Promise<void>
}

const engines: ReadonlyArray<TestEngine> = [
  {
    name: "chDB (embedded, in-process)",
    available: true,
    acquire: () => acquireChdbEngine(testChdbDir()),
    dropDatabase: async () => {}
  },
  {
    name: "ClickHouse server (needs TEST_CLICKHOUSE_URL)",
    available: serverUrl !== undefined,
    acquire: () => acquireServerEngine(parseServerUrl(serverUrl!)),
    dropDatabase: async (database) => {
      await fetch(`${new URL(serverUrl!).origin}/`, { method: "POST", body: `DROP DATABASE IF EXISTS ${database}` })
    }
  }
]

// After every describe's own afterAll: the engines are closed by then.
afterAll(removeTestChdbDir)

for (const testEngine of engines) {
  describe.skipIf(!testEngine.available)(`analytics migration from the version-1 tables on ${testEngine.name}`, () => {
    const databases: Array<string> = []
    afterAll(async () => {
      for (const db of databases) await testEngine.dropDatabase(db)
    })

    /** An engine for one test, and a database of its own holding the first version's tables and clicks. */
    const legacyDatabase = async () => {
      const scope = await Effect.runPromise(Scope.make())
      const engine = await Effect.runPromise(Scope.extend(testEngine.acquire(), scope))
      const run = <A, E>(e: Effect.Effect<A, E>) => Effect.runPromise(e.pipe(Effect.provide(quiet)))
      const database = uniqueDatabase("m")
      databases.push(database)
      const legacy = Sql.legacyTables(database)
      await run(engine.exec(Sql.createDatabase(database)))
      for (const s of legacyCreateTables(legacy)) await run(engine.exec(s))
      for (const b of BATCHES) await run(engine.exec(legacyInsert(legacy, b.partition, b.upTo, b.rows)))
      const tableNames = async () =>
        (
          await run(
            engine.rows<{ name: string }>(`SELECT name FROM system.tables WHERE database = '${database}' ORDER BY name`)
          )
        ).map((r) => r.name)
      const close = () => Effect.runPromise(Scope.close(scope, Exit.void))
      return { engine, run, database, legacy, tableNames, close }
    }

    type Db = Awaited<ReturnType<typeof legacyDatabase>>

    /** What the first version answers, checked against the clicks themselves. */
    const recordLegacy = async ({ engine, run, legacy }: Db) => {
      const answers = []
      for (const q of QUERIES) {
        const answer = normalize(await run(legacyQuery(engine, legacy, q)))
        expect(answer, `${q.linkId} ${q.granularity} ${q.from}-${q.to}`).toEqual(expected(CLICKS, q))
        answers.push(answer)
      }
      const marks = new Map(
        (await run(engine.rows<Sql.WatermarkRow>(legacyWatermarks(legacy)))).map(
          (r) => [num(r.partition), num(r.offset)] as const
        )
      )
      expect(marks).toEqual(EXPECTED_WATERMARKS)
      return { answers, marks }
    }

    /** The store's answers to every query and its watermarks. */
    const answersOf = async (db: Db, store: Effect.Effect.Success<ReturnType<typeof makeStore>>) => {
      const answers = []
      for (const q of QUERIES) answers.push(normalize(await db.run(store.query(q))))
      return { answers, marks: await db.run(store.watermarks()) }
    }

    const CURRENT = ["clicks_input_v2", "clicks_rollup_v2", "clicks_rollup_v2_mv"]

    it("migrates the version-1 rollup: the same totals, visitors, series, breakdowns and watermarks; a second run changes nothing", async () => {
      const db = await legacyDatabase()
      try {
        expect(await db.tableNames()).toEqual(["clicks_input", "clicks_rollup", "clicks_rollup_mv"])
        const before = await recordLegacy(db)

        const store = await db.run(makeStore(db.engine, db.database))
        expect(await db.tableNames()).toEqual(CURRENT)
        expect(await answersOf(db, store)).toEqual(before)

        // Started again (as every start of the service does): nothing to migrate, nothing counted twice.
        const again = await db.run(makeStore(db.engine, db.database))
        expect(await db.tableNames()).toEqual(CURRENT)
        expect(await answersOf(db, again)).toEqual(before)

        // The current view feeds the migrated rollup: new clicks add to the migrated ones.
        const more: Array<ClickRow> = [
          { ...CLICKS.find((c) => c.linkId === "link_ma" && !c.bot)!, visitor: "v_new", country: "NL" },
          { ...CLICKS.find((c) => c.linkId === "link_ma" && c.bot)! }
        ]
        await db.run(again.insertBatch({ partition: 3, upTo: 1000, rows: more }))
        const all = [...CLICKS, ...more]
        for (const q of QUERIES) expect(normalize(await db.run(again.query(q)))).toEqual(expected(all, q))
        expect(await db.run(again.watermarks())).toEqual(new Map([...EXPECTED_WATERMARKS, [3, 1000]]))
      } finally {
        await db.close()
      }
    })

    it("starts over when a migration was cut short: a half-filled clicks_rollup_v2_migrating is thrown away", async () => {
      const db = await legacyDatabase()
      try {
        const before = await recordLegacy(db)
        const migrating = `${db.database}.clicks_rollup_v2_migrating`
        // The table as the migration creates it, with part of the copy and a row the copy never has.
        await db.run(
          db.engine.exec(`CREATE TABLE ${migrating} (
            link_id String, dimension String, period UInt32, start UInt32, value String, bot UInt8, source_partition UInt32,
            clicks AggregateFunction(sum, UInt64), visitors AggregateFunction(${UNIQ}, String),
            max_offset AggregateFunction(max, UInt64)
          ) ENGINE = AggregatingMergeTree() ORDER BY (link_id, dimension, period, start, value, bot, source_partition)`)
        )
        const key = "link_id, dimension, period, start, value, bot, source_partition"
        await db.run(
          db.engine.exec(`INSERT INTO ${migrating}
          SELECT ${key}, sumState(c), uniqCombinedMergeState(14)(v), maxMergeState(m) FROM (
            SELECT ${key}, toUInt64(countMerge(clicks)) AS c, uniqCombinedMergeState(14)(visitors) AS v,
              maxMergeState(max_offset) AS m
            FROM ${db.legacy.rollup} WHERE link_id = 'link_ma' GROUP BY ${key}
          ) GROUP BY ${key}`)
        )
        await db.run(
          db.engine.exec(`INSERT INTO ${migrating}
          SELECT 'link_mb', '', ${DAY}, ${iso("2024-05-02T00:00:00Z")}, '', 0, 0,
            sumState(toUInt64(500)), uniqCombinedState(14)('ghost'), maxState(toUInt64(999999))`)
        )
        expect(await db.tableNames()).toEqual([
          "clicks_input",
          "clicks_rollup",
          "clicks_rollup_mv",
          "clicks_rollup_v2_migrating"
        ])

        const store = await db.run(makeStore(db.engine, db.database))
        expect(await db.tableNames()).toEqual(CURRENT)
        expect(await answersOf(db, store)).toEqual(before)
      } finally {
        await db.close()
      }
    })

    it("only finishes the drops when a migration stopped after its rename: the copy is not made twice", async () => {
      const db = await legacyDatabase()
      try {
        const before = await recordLegacy(db)
        const live = Sql.tables(db.database)
        const into = `${live.rollup}_migrating`
        for (const s of Sql.migrateLegacyRollup(db.legacy, into)) await db.run(db.engine.exec(s))
        await db.run(db.engine.exec(`RENAME TABLE ${into} TO ${live.rollup}`))
        // Cut short after dropping the first version's view only.
        await db.run(db.engine.exec(Sql.dropTables(db.legacy)[0]!))
        expect(await db.tableNames()).toEqual(["clicks_input", "clicks_rollup", "clicks_rollup_v2"])

        const store = await db.run(makeStore(db.engine, db.database))
        expect(await db.tableNames()).toEqual(CURRENT)
        expect(await answersOf(db, store)).toEqual(before)
      } finally {
        await db.close()
      }
    })
  })
}
