import type { AnalyticsQuery, ClickBatch, Dimension } from "../../domain/Analytics.js"
import { isLinkId } from "../../domain/Link.js"

/*
 * The analytics SQL: one dialect for chDB (ClickHouse 26) and the CI server (ClickHouse
 * 18.16). 18.16 has no query parameters, DateTime64, toStartOfInterval, TTL,
 * SimpleAggregateFunction or input(), so values are inlined as escaped literals (ids are
 * checked first, numbers must be safe integers) and times are UInt32 epoch seconds.
 *
 * Clicks are inserted into a Null table; a materialized view turns each insert into ONE
 * part of an AggregatingMergeTree rollup (no PARTITION BY, one block per insert), so an
 * insert lands whole or not at all. Every rollup row also carries maxState(source_offset)
 * of its source partition: the watermark the projector skips below, written atomically
 * with the clicks it accounts for.
 *
 * The rollup keeps marginals, never the cross product of the four dimensions (which grows
 * with their combinations instead of their values): per link, per UTC hour AND per UTC day,
 * one row for the totals (dimension '') and one per value of each dimension. ARRAY JOIN fans
 * a click out into those ten rows. A query reads the day rows for the whole days of its
 * range and the hour rows only for the partial days at its ends (and for an hourly series),
 * so a year reads ~366 rows per value, not 8784.
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
    input: `${db}.clicks_input${suffix}`,
    rollup: `${db}.clicks_rollup${suffix}`,
    view: `${db}.clicks_rollup_mv${suffix}`
  }
}

export type Tables = ReturnType<typeof tables>

export const REBUILD = "_rebuild"
export const OLD = "_old"

export const createDatabase = (database: string) => `CREATE DATABASE IF NOT EXISTS ${checkDatabase(database)}`

export const createTables = (t: Tables): ReadonlyArray<string> => [
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

/** One row of the input table (JSONEachRow). */
export interface InputRow {
  readonly link_id: string
  readonly hour: number
  readonly bot: 0 | 1
  readonly country: string
  readonly referrer: string
  readonly device: string
  readonly browser: string
  readonly visitor: string
  readonly source_partition: number
  readonly source_offset: number
}

/**
 * The input rows of a batch. Every row carries the batch's last offset; a batch without
 * clicks (only duplicates or poison after the watermark) still moves the watermark with a
 * marker row under the empty link id, which no query reads.
 */
export const inputRows = (batch: ClickBatch): ReadonlyArray<InputRow> => {
  int(batch.partition)
  int(batch.upTo)
  const base = { source_partition: batch.partition, source_offset: batch.upTo }
  if (batch.rows.length === 0) {
    return [{ link_id: "", hour: 0, bot: 0, country: "", referrer: "", device: "", browser: "", visitor: "", ...base }]
  }
  return batch.rows.map((r) => ({
    link_id: r.linkId,
    hour: r.hour,
    bot: r.bot ? 1 : 0,
    country: r.country,
    referrer: r.referrer,
    device: r.device,
    browser: r.browser,
    visitor: r.visitor,
    ...base
  }))
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
  `SELECT bot, intDiv(start, ${DAY}) * ${DAY} AS day, countMerge(clicks) AS clicks, ${UNIQ_MERGE}(visitors) AS visitors
  FROM ${t.rollup} WHERE ${link(q)} AND dimension = '' AND ${coveringRows(q.from, q.to)}
  GROUP BY bot, day ORDER BY day`

/** Human clicks and unique visitors per hour of the range (hours without clicks left out). */
export const hourly = (t: Tables, q: AnalyticsQuery) =>
  `SELECT start AS hour, countMerge(clicks) AS clicks, ${UNIQ_MERGE}(visitors) AS visitors FROM ${t.rollup}
  WHERE ${link(q)} AND dimension = '' AND period = ${HOUR} AND ${within(q.from, q.to)} AND bot = 0
  GROUP BY hour ORDER BY hour`

/** Human clicks per value of each asked dimension. */
export const breakdowns = (t: Tables, q: AnalyticsQuery, dimensions: ReadonlyArray<Dimension>) =>
  `SELECT dimension, value, countMerge(clicks) AS clicks FROM ${t.rollup}
  WHERE ${link(q)} AND dimension IN (${dimensions.map(quote).join(", ")}) AND bot = 0 AND ${coveringRows(q.from, q.to)}
  GROUP BY dimension, value`
