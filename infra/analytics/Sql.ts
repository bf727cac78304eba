import type { AnalyticsQuery, ClickBatch, Dimension } from "../../domain/Analytics.js"
import { isLinkId } from "../../domain/Link.js"

/*
 * The analytics SQL: one dialect for chDB (ClickHouse 26) and the CI server (ClickHouse
 * 18.16). 18.16 has no query parameters, DateTime64, toStartOfInterval, TTL,
 * SimpleAggregateFunction or input(), so values are inlined as escaped literals (ids are
 * checked first, numbers must be safe integers) and times are UInt32 epoch seconds.
 *
 * Clicks reach the store as rollup rows the writer has already summed per batch (see
 * inputRows): per link, UTC hour AND UTC day, one row per visitor for the totals (dimension
 * '') and one per value of each dimension, each with its click count. They are inserted
 * into a Null table; a materialized view turns each insert into ONE part of an
 * AggregatingMergeTree rollup (no PARTITION BY, one block per insert), so an insert lands
 * whole or not at all. Every rollup row also carries maxState(source_offset) of its source
 * partition: the watermark the projector skips below, written atomically with the clicks it
 * accounts for.
 *
 * The rollup keeps marginals, never the cross product of the four dimensions (which grows
 * with their combinations instead of their values). A query reads the day rows for the
 * whole days of its range and the hour rows only for the partial days at its ends (and for
 * an hourly series), so a year reads ~366 rows per value, not 8784.
 *
 * Summing in the writer instead of fanning every click out in the view (as the first
 * version of these tables did, with count states) makes the engine's work grow with the
 * distinct values of a batch, not with its clicks. The first version's tables are migrated
 * once (migrateLegacy).
 *
 * The visitor hash rotates with the UTC day, so a visitor is never the same across days:
 * the unique visitors of a range are the sum of those of its days, and a query finalizes
 * one state per day instead of merging them all.
 */

/**
 * Unique visitors: exact for small sets (a few hundred a day, hash collisions aside), then a
 * HyperLogLog of 2^14 registers (about 0.8% error) in at most ~12 KB per state. Plain `uniq`
 * is exact up to 65536 but its states grow to 256 KB and cost ~2 ms each to read back: a
 * year of a busy link would take seconds.
 */
const UNIQ = "uniqCombined(14)"
const UNIQ_STATE_IF = "uniqCombinedStateIf(14)"
const UNIQ_MERGE = "uniqCombinedMerge(14)"
const UNIQ_MERGE_STATE = "uniqCombinedMergeState(14)"

const HOUR = 3600
const DAY = 86_400

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/

export const checkDatabase = (database: string) => {
  if (!IDENTIFIER.test(database)) throw new Error(`not a valid ClickHouse database name: ${JSON.stringify(database)}`)
  return database
}

/** A ClickHouse string literal. */
export const quote = (s: string) => `'${s.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`

const int = (n: number) => {
  if (!Number.isSafeInteger(n)) throw new Error(`not a safe integer: ${n}`)
  return String(n)
}

/** One set of tables: the live one (no suffix) or one being rebuilt beside it. */
export const tables = (database: string, suffix = "") => {
  const db = checkDatabase(database)
  return {
    database: db,
    input: `${db}.clicks_input_v2${suffix}`,
    rollup: `${db}.clicks_rollup_v2${suffix}`,
    view: `${db}.clicks_rollup_v2_mv${suffix}`
  }
}

/** The first version's tables (count states, one input row per click): migrated, then dropped. */
export const legacyTables = (database: string, suffix = ""): Tables => {
  const db = checkDatabase(database)
  return {
    database: db,
    input: `${db}.clicks_input${suffix}`,
    rollup: `${db}.clicks_rollup${suffix}`,
    view: `${db}.clicks_rollup_mv${suffix}`
  }
}

export type Tables = ReturnType<typeof tables>

export const REBUILD = "_rebuild"
export const OLD = "_old"

export const createDatabase = (database: string) => `CREATE DATABASE IF NOT EXISTS ${checkDatabase(database)}`

const rollupTable = (name: string) => `CREATE TABLE IF NOT EXISTS ${name} (
    link_id String, dimension String, period UInt32, start UInt32, value String, bot UInt8, source_partition UInt32,
    clicks AggregateFunction(sum, UInt64), visitors AggregateFunction(${UNIQ}, String),
    max_offset AggregateFunction(max, UInt64)
  ) ENGINE = AggregatingMergeTree() ORDER BY (link_id, dimension, period, start, value, bot, source_partition)`

const KEY = "link_id, dimension, period, start, value, bot, source_partition"

export const createTables = (t: Tables): ReadonlyArray<string> => [
  `CREATE TABLE IF NOT EXISTS ${t.input} (
    link_id String, dimension String, period UInt32, start UInt32, value String, bot UInt8, visitor String,
    clicks UInt64, source_partition UInt32, source_offset UInt64
  ) ENGINE = Null`,
  rollupTable(t.rollup),
  // Visitors are counted on the totals rows only: there the writer gives one row per visitor.
  `CREATE MATERIALIZED VIEW IF NOT EXISTS ${t.view} TO ${t.rollup} AS
  SELECT ${KEY},
    sumState(clicks) AS clicks, ${UNIQ_STATE_IF}(visitor, dimension = '') AS visitors, maxState(source_offset) AS max_offset
  FROM ${t.input}
  GROUP BY ${KEY}`
]

/** Which of `names` (without the database) exist in `database`. */
export const existingTables = (database: string, names: ReadonlyArray<string>) =>
  `SELECT name FROM system.tables WHERE database = ${quote(checkDatabase(database))} AND name IN (${names.map(quote).join(", ")})`

/** The name of a table without its database. */
export const bare = (table: string) => table.slice(table.indexOf(".") + 1)

/**
 * Copies the first version's rollup into a new table `into` of the current shape: the same
 * rows, count states become sum states, the visitor and watermark states carry over.
 */
export const migrateLegacyRollup = (legacy: Tables, into: string): ReadonlyArray<string> => [
  `DROP TABLE IF EXISTS ${into}`,
  rollupTable(into),
  `INSERT INTO ${into}
  SELECT ${KEY}, sumState(c) AS clicks, ${UNIQ_MERGE_STATE}(v) AS visitors, maxMergeState(m) AS max_offset
  FROM (
    SELECT ${KEY}, toUInt64(countMerge(clicks)) AS c, ${UNIQ_MERGE_STATE}(visitors) AS v, maxMergeState(max_offset) AS m
    FROM ${legacy.rollup} GROUP BY ${KEY}
  )
  GROUP BY ${KEY}`
]

/** The view first: dropping its source or target under it would leave it dangling. */
export const dropTables = (t: Tables): ReadonlyArray<string> => [
  `DROP TABLE IF EXISTS ${t.view}`,
  `DROP TABLE IF EXISTS ${t.input}`,
  `DROP TABLE IF EXISTS ${t.rollup}`
]

/**
 * Swaps a rebuilt rollup in. The live view resolves its target by name on both engines, so
 * from here on it feeds the rebuilt rollup (a view cannot be renamed on 18.16).
 */
export const swapRollup = (live: Tables, rebuilt: Tables, old: Tables) =>
  `RENAME TABLE ${live.rollup} TO ${old.rollup}, ${rebuilt.rollup} TO ${live.rollup}`

export const watermarks = (t: Tables) =>
  `SELECT source_partition AS partition, maxMerge(max_offset) AS offset FROM ${t.rollup} GROUP BY source_partition`

export interface WatermarkRow {
  readonly partition: number | string
  readonly offset: number | string
}

/** One row of the input table (JSONEachRow): clicks already summed per rollup row. */
export interface InputRow {
  readonly link_id: string
  readonly dimension: string
  readonly period: number
  readonly start: number
  readonly value: string
  readonly bot: 0 | 1
  /** On totals rows (dimension ""): the visitor the clicks are of; "" elsewhere. */
  readonly visitor: string
  readonly clicks: number
  readonly source_partition: number
  readonly source_offset: number
}

/** One link's clicks in one UTC hour, human or bot: counts per visitor and per dimension value. */
interface Cell {
  readonly linkId: string
  readonly start: number
  readonly bot: 0 | 1
  readonly visitor: Map<string, number>
  readonly country: Map<string, number>
  readonly referrer: Map<string, number>
  readonly device: Map<string, number>
  readonly browser: Map<string, number>
}

const CELL_DIMENSIONS = ["country", "referrer", "device", "browser"] as const

const newCell = (linkId: string, start: number, bot: 0 | 1): Cell => ({
  linkId,
  start,
  bot,
  visitor: new Map(),
  country: new Map(),
  referrer: new Map(),
  device: new Map(),
  browser: new Map()
})

/** The cell of `pair` for `bot`, made when missing. */
const cellOf = (pair: Array<Cell | undefined>, linkId: string, start: number, bot: 0 | 1): Cell => {
  let cell = pair[bot]
  if (cell === undefined) {
    cell = newCell(linkId, start, bot)
    pair[bot] = cell
  }
  return cell
}

const add = (counts: Map<string, number>, key: string, n: number) => counts.set(key, (counts.get(key) ?? 0) + n)

/**
 * The input rows of a batch: its clicks summed into rollup rows, for the hour and for the
 * day. Every row carries the batch's last offset; a batch without clicks (only duplicates or
 * poison after the watermark) still moves the watermark with a marker row under the empty
 * link id, which no query reads.
 */
export const inputRows = (batch: ClickBatch): ReadonlyArray<InputRow> => {
  int(batch.partition)
  int(batch.upTo)
  const source_partition = batch.partition
  const source_offset = batch.upTo
  if (batch.rows.length === 0) {
    return [
      {
        link_id: "",
        dimension: "",
        period: 0,
        start: 0,
        value: "",
        bot: 0,
        visitor: "",
        clicks: 0,
        source_partition,
        source_offset
      }
    ]
  }
  // Per link, then per hour and bot flag: one cell each.
  const hours = new Map<string, Map<number, Array<Cell | undefined>>>()
  for (const r of batch.rows) {
    if (!Number.isSafeInteger(r.hour)) throw new Error(`not a safe integer: ${r.hour}`)
    let byHour = hours.get(r.linkId)
    if (byHour === undefined) {
      byHour = new Map()
      hours.set(r.linkId, byHour)
    }
    let pair = byHour.get(r.hour)
    if (pair === undefined) {
      pair = [undefined, undefined]
      byHour.set(r.hour, pair)
    }
    const n = r.clicks ?? 1
    if (!Number.isSafeInteger(n) || n < 1) throw new Error(`not a click count: ${n}`)
    const bot = r.bot ? 1 : 0
    const cell = cellOf(pair, r.linkId, r.hour, bot)
    add(cell.visitor, r.visitor, n)
    add(cell.country, r.country, n)
    add(cell.referrer, r.referrer, n)
    add(cell.device, r.device, n)
    add(cell.browser, r.browser, n)
  }
  const out: Array<InputRow> = []
  const emit = (cell: Cell, period: number) => {
    const base = { link_id: cell.linkId, period, start: cell.start, bot: cell.bot, source_partition, source_offset }
    for (const [visitor, clicks] of cell.visitor) out.push({ ...base, dimension: "", value: "", visitor, clicks })
    for (const dimension of CELL_DIMENSIONS) {
      for (const [value, clicks] of cell[dimension]) out.push({ ...base, dimension, value, visitor: "", clicks })
    }
  }
  for (const byHour of hours.values()) {
    // The day cells sum the hour cells of their day.
    const days = new Map<number, Array<Cell | undefined>>()
    for (const pair of byHour.values()) {
      for (const cell of pair) {
        if (cell === undefined) continue
        emit(cell, HOUR)
        const dayStart = Math.floor(cell.start / DAY) * DAY
        let dayPair = days.get(dayStart)
        if (dayPair === undefined) {
          dayPair = [undefined, undefined]
          days.set(dayStart, dayPair)
        }
        const day = cellOf(dayPair, cell.linkId, dayStart, cell.bot)
        for (const key of ["visitor", ...CELL_DIMENSIONS] as const) {
          for (const [value, n] of cell[key]) add(day[key], value, n)
        }
      }
    }
    for (const pair of days.values()) for (const cell of pair) if (cell !== undefined) emit(cell, DAY)
  }
  return out
}

const link = (q: AnalyticsQuery) => {
  if (!isLinkId(q.linkId)) throw new Error(`not a link id: ${JSON.stringify(q.linkId)}`)
  return `link_id = ${quote(q.linkId)}`
}

const within = (from: number, to: number) => `start >= ${int(from)} AND start < ${int(to)}`

/** Which rows cover [from, to): day rows for the whole days inside, hour rows for the rest. */
export const coveringRows = (from: number, to: number) => {
  const firstDay = Math.ceil(from / DAY) * DAY
  const lastDay = Math.floor(to / DAY) * DAY
  if (firstDay >= lastDay) return `period = ${HOUR} AND ${within(from, to)}`
  const days = `period = ${DAY} AND ${within(firstDay, lastDay)}`
  const hours = [...(from < firstDay ? [within(from, firstDay)] : []), ...(lastDay < to ? [within(lastDay, to)] : [])]
  return hours.length === 0
    ? days
    : `((${days}) OR (period = ${HOUR} AND (${hours.map((h) => `(${h})`).join(" OR ")})))`
}

/** Clicks and unique visitors per UTC day of the range and bot flag (days without clicks left out). */
export const daily = (t: Tables, q: AnalyticsQuery) =>
  `SELECT bot, intDiv(start, ${DAY}) * ${DAY} AS day, sumMerge(clicks) AS clicks, ${UNIQ_MERGE}(visitors) AS visitors
  FROM ${t.rollup} WHERE ${link(q)} AND dimension = '' AND ${coveringRows(q.from, q.to)}
  GROUP BY bot, day ORDER BY day`

/** Human clicks and unique visitors per hour of the range (hours without clicks left out). */
export const hourly = (t: Tables, q: AnalyticsQuery) =>
  `SELECT start AS hour, sumMerge(clicks) AS clicks, ${UNIQ_MERGE}(visitors) AS visitors FROM ${t.rollup}
  WHERE ${link(q)} AND dimension = '' AND period = ${HOUR} AND ${within(q.from, q.to)} AND bot = 0
  GROUP BY hour ORDER BY hour`

/** Human clicks per value of each asked dimension. */
export const breakdowns = (t: Tables, q: AnalyticsQuery, dimensions: ReadonlyArray<Dimension>) =>
  `SELECT dimension, value, sumMerge(clicks) AS clicks FROM ${t.rollup}
  WHERE ${link(q)} AND dimension IN (${dimensions.map(quote).join(", ")}) AND bot = 0 AND ${coveringRows(q.from, q.to)}
  GROUP BY dimension, value`
