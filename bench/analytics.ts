/**
 * Analytics query cost at scale (run by bench/analytics.sh): fills chDB with synthetic
 * clicks through the same input table the projector writes (Null table -> materialized
 * view -> hourly and daily rollup), then times the per-link API query against the rollup
 * next to a plain count() of the same link's raw rows, in one run on this machine.
 *
 * The projector sums a batch's clicks into rollup rows before inserting them; the fill
 * instead fans every click out in SQL into the ten rows the writer would give a batch of one
 * click (one click each), which the view and the merges then sum. The rollup ends up the same.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect, Exit, Scope } from "effect"
import { type AnalyticsQuery, Dimensions } from "../domain/Analytics.js"
import { acquireChdbEngine } from "../infra/analytics/Chdb.js"
import { makeStore } from "../infra/analytics/Store.js"

const CLICKS = Number(process.env.BENCH_CLICKS ?? 100_000_000)
const OTHER_CLICKS = Number(process.env.BENCH_OTHER_CLICKS ?? 5_000_000)
const CHUNK = 10_000_000
const RUNS = 5
const DB = "bench"
const LINK = "link_bench"
const YEAR_START = Date.parse("2024-01-01T00:00:00Z") / 1000
const YEAR = 366 * 86_400

const log = (line: string) => process.stderr.write(`${line}\n`)

/**
 * Synthetic clicks `start .. start+count` of one link (or of 1000 others), evenly over the
 * year: 52 countries, 200 referrers (a third direct), 4 devices, 10 browsers, 1 M
 * visitors, 2% bots. One row per click; the same rows every time for the same arguments.
 */
const clicks = (start: number, count: number, total: number, link: string | undefined) => `
  SELECT
    ${link === undefined ? "concat('link_o', toString(number % 1000))" : `'${link}'`} AS link_id,
    toUInt32(intDiv(${YEAR_START} + intDiv(number * ${YEAR}, ${total}), 3600) * 3600) AS hour,
    toUInt8(h % 50 = 0) AS bot,
    concat(char(65 + intDiv(h, 64) % 26), char(65 + intDiv(h, 4096) % 2)) AS country,
    if(intDiv(h, 8192) % 3 = 0, '', concat('r', toString(intDiv(h, 65536) % 200), '.example')) AS referrer,
    ['desktop', 'mobile', 'tablet', 'other'][intDiv(h, 16777216) % 4 + 1] AS device,
    concat('Browser', toString(intDiv(h, 67108864) % 10)) AS browser,
    lower(hex(cityHash64(number % 1000000))) AS visitor,
    toUInt32(0) AS source_partition,
    number AS source_offset
  FROM (SELECT number, cityHash64(number) AS h FROM numbers(${start}, ${count}))`

/**
 * The clicks as input rows of the rollup: k = 0-4 by hour, 5-9 by day; the totals (k % 5 =
 * 0, carrying the visitor), then country, referrer, device, browser (visitor '').
 */
const fill = (start: number, count: number, total: number, link: string | undefined) => `
  INSERT INTO ${DB}.clicks_input_v2
    (link_id, dimension, period, start, value, bot, visitor, clicks, source_partition, source_offset)
  SELECT link_id,
    multiIf(k % 5 = 0, '', k % 5 = 1, 'country', k % 5 = 2, 'referrer', k % 5 = 3, 'device', 'browser') AS dimension_,
    toUInt32(if(k < 5, 3600, 86400)) AS period_,
    toUInt32(if(k < 5, hour, intDiv(hour, 86400) * 86400)) AS start_,
    multiIf(k % 5 = 0, '', k % 5 = 1, country, k % 5 = 2, referrer, k % 5 = 3, device, browser) AS value_,
    bot,
    if(k % 5 = 0, visitor, '') AS visitor_,
    toUInt64(1) AS clicks_,
    source_partition, source_offset
  FROM (${clicks(start, count, total, link)}) ARRAY JOIN [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] AS k`

/** The same clicks as raw rows of the baseline. */
const fillRaw = (start: number, count: number, total: number, link: string | undefined) => `
  INSERT INTO ${DB}.raw (link_id, hour, bot)
  SELECT link_id, hour, bot FROM (${clicks(start, count, total, link)})`

const timed = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.gen(function* () {
    const t0 = performance.now()
    const value = yield* effect
    return { value, ms: performance.now() - t0 }
  })

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const program = (dir: string) =>
  Effect.gen(function* () {
    const engine = yield* acquireChdbEngine(dir)
    const store = yield* makeStore(engine, DB)
    // The baseline: the same clicks as raw rows, filled by inserts of their own (fillRaw).
    yield* engine.exec(
      `CREATE TABLE ${DB}.raw (link_id String, hour UInt32, bot UInt8) ENGINE = MergeTree ORDER BY (link_id, hour)`
    )
    const fillBoth = (start: number, count: number, total: number, link: string | undefined) =>
      Effect.zipRight(engine.exec(fill(start, count, total, link)), engine.exec(fillRaw(start, count, total, link)))

    const t0 = performance.now()
    const chunks = Array.from({ length: Math.ceil(CLICKS / CHUNK) }, (_, i) => i * CHUNK)
    let filled = 0
    // Two inserts at a time: one insert's view runs on one core.
    yield* Effect.forEach(
      chunks,
      (start) =>
        fillBoth(start, Math.min(CHUNK, CLICKS - start), CLICKS, LINK).pipe(
          Effect.tap(() =>
            Effect.sync(() => {
              filled += Math.min(CHUNK, CLICKS - start)
              log(
                `filled ${filled.toLocaleString("en")} clicks of ${LINK} (${((performance.now() - t0) / 1000).toFixed(0)} s)`
              )
            })
          )
        ),
      { concurrency: 2, discard: true }
    )
    if (OTHER_CLICKS > 0) yield* fillBoth(0, OTHER_CLICKS, OTHER_CLICKS, undefined)
    yield* engine.exec(`OPTIMIZE TABLE ${DB}.clicks_rollup_v2 FINAL`)
    yield* engine.exec(`OPTIMIZE TABLE ${DB}.raw FINAL`)
    const fillSeconds = (performance.now() - t0) / 1000
    log(`filled and merged in ${fillSeconds.toFixed(1)} s`)

    const counts = yield* engine.rows<{ rollup: number | string; link: number | string; raw: number | string }>(
      `SELECT (SELECT count() FROM ${DB}.clicks_rollup_v2) AS rollup,
              (SELECT count() FROM ${DB}.clicks_rollup_v2 WHERE link_id = '${LINK}') AS link,
              (SELECT count() FROM ${DB}.raw) AS raw`
    )

    const query = (days: number): AnalyticsQuery => ({
      linkId: LINK,
      from: YEAR_START + YEAR - days * 86_400,
      to: YEAR_START + YEAR,
      granularity: "day",
      dimensions: Dimensions
    })
    const measure = <A, E>(effect: Effect.Effect<A, E>) =>
      Effect.gen(function* () {
        yield* effect // warm-up
        const times: Array<number> = []
        let last: A | undefined
        for (let i = 0; i < RUNS; i++) {
          const r = yield* timed(effect)
          times.push(r.ms)
          last = r.value
        }
        return { ms: median(times), value: last! }
      })
    const q30 = yield* measure(store.query(query(30)))
    const q366 = yield* measure(store.query(query(366)))
    // The cheapest question the raw rows answer with a scan: the link's human clicks (a bare
    // count() by primary key would be answered from the index alone).
    const raw = yield* measure(
      engine.rows<{ c: number | string }>(`SELECT count() AS c FROM ${DB}.raw WHERE link_id = '${LINK}' AND bot = 0`)
    )
    if (q366.value.clicks !== Number(raw.value[0]!.c) || q366.value.clicks + q366.value.botClicks !== CLICKS) {
      throw new Error(`counts disagree: rollup ${q366.value.clicks}, raw ${raw.value[0]!.c}, filled ${CLICKS}`)
    }
    return {
      clicks: CLICKS,
      other_clicks: OTHER_CLICKS,
      fill_seconds: Math.round(fillSeconds * 10) / 10,
      rollup_rows: Number(counts[0]!.rollup),
      rollup_rows_link: Number(counts[0]!.link),
      query_30d_ms: Math.round(q30.ms * 10) / 10,
      query_366d_ms: Math.round(q366.ms * 10) / 10,
      raw_count_ms: Math.round(raw.ms * 10) / 10,
      ratio_366d_to_raw_count: Math.round((q366.ms / raw.ms) * 100) / 100
    }
  })

const dir = process.env.BENCH_DIR ?? fs.mkdtempSync(path.join(os.tmpdir(), "shortlinks-bench-chdb-"))
const main = Effect.gen(function* () {
  const scope = yield* Scope.make()
  const result = yield* program(dir).pipe(Scope.extend(scope), Effect.ensuring(Scope.close(scope, Exit.void)))
  return result
})

Effect.runPromise(main).then(
  (result) => {
    if (process.env.BENCH_KEEP !== "1") fs.rmSync(dir, { recursive: true, force: true })
    process.stdout.write(`${JSON.stringify(result)}\n`)
  },
  (error) => {
    fs.rmSync(dir, { recursive: true, force: true })
    process.stderr.write(`bench/analytics: ${String(error?.message ?? error)}\n`)
    process.exitCode = 1
  }
)
