import { Context, Data, type Effect, Either } from "effect"

/** The dimensions a breakdown can be asked for, in the order the payload lists them. */
export const Dimensions = ["country", "referrer", "device", "browser"] as const
export type Dimension = (typeof Dimensions)[number]

export const Granularities = ["hour", "day"] as const
export type Granularity = (typeof Granularities)[number]

/** k-anonymity: a breakdown value with fewer clicks than this is folded into `other`. */
export const K_ANONYMITY = 5
/** The bucket small values fold into. */
export const OTHER = "other"
export const MAX_RANGE_DAYS = 366
export const DEFAULT_RANGE_DAYS = 30

const HOUR = 3600
const DAY = 86_400

/** Seconds of one bucket of the series. */
export const bucketSeconds = (granularity: Granularity) => (granularity === "hour" ? HOUR : DAY)

/**
 * One click as the rollup stores it. Dimension values are the stored form: "" means unknown
 * (no country, no referrer); `hour` is the UTC hour the click fell in, in seconds since the epoch.
 */
export interface ClickRow {
  readonly linkId: string
  readonly hour: number
  readonly bot: boolean
  readonly country: string
  readonly referrer: string
  readonly device: string
  readonly browser: string
  readonly visitor: string
  /** How many identical clicks the row stands for (1 when absent). */
  readonly clicks?: number
}

/**
 * What one insert carries: the clicks of one source partition after the watermark, and the
 * last offset they account for (poison and duplicates included). The insert is atomic, so
 * the offset lands in the store if and only if the clicks do.
 */
export interface ClickBatch {
  readonly partition: number
  readonly upTo: number
  readonly rows: ReadonlyArray<ClickRow>
}

/** A query against the rollup: `from`/`to` are whole hours in epoch seconds, `to` exclusive. */
export interface AnalyticsQuery {
  readonly linkId: string
  readonly from: number
  readonly to: number
  readonly granularity: Granularity
  readonly dimensions: ReadonlyArray<Dimension>
}

export interface BucketCount {
  readonly start: number
  readonly clicks: number
  readonly uniqueVisitors: number
}

export interface ValueCount {
  readonly value: string
  readonly clicks: number
}

/** What the store answers: human clicks only in the series and breakdowns, values as stored, empty buckets left out. */
export interface AnalyticsAggregates {
  readonly clicks: number
  readonly uniqueVisitors: number
  readonly botClicks: number
  readonly series: ReadonlyArray<BucketCount>
  readonly breakdowns: Partial<Record<Dimension, ReadonlyArray<ValueCount>>>
}

export class AnalyticsError extends Data.TaggedError("AnalyticsError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

/** Where a rebuild writes while it runs (tables beside the live ones). */
export interface AnalyticsWriter {
  readonly insertBatch: (batch: ClickBatch) => Effect.Effect<void, AnalyticsError>
}

/**
 * The click analytics store: chDB in-process by default, a ClickHouse server when
 * `CLICKHOUSE_URL` is set; one SQL dialect. Clicks land in an hourly rollup; each insert is
 * one atomic write that also records, per source partition, the last log offset it covers
 * (the watermark), so a consumer that skips offsets at or below the watermark counts every
 * click exactly once without transactions.
 */
export interface AnalyticsShape extends AnalyticsWriter {
  /** Per source partition, the last offset the rollup accounts for; absent: none yet. */
  readonly watermarks: () => Effect.Effect<ReadonlyMap<number, number>, AnalyticsError>
  readonly query: (query: AnalyticsQuery) => Effect.Effect<AnalyticsAggregates, AnalyticsError>
  /** Drops every click and watermark (the tables are created again, empty). */
  readonly reset: () => Effect.Effect<void, AnalyticsError>
  /**
   * Fills fresh tables beside the live ones, then swaps them in and drops the old ones: the
   * live aggregates stay readable meanwhile and stay as they were when `fill` fails.
   */
  readonly rebuild: <A, E, R>(
    fill: (writer: AnalyticsWriter) => Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | AnalyticsError, R>
  /** Which engine runs, for the start-up log. */
  readonly kind: "chdb" | "clickhouse"
}

export class Analytics extends Context.Tag("Analytics")<Analytics, AnalyticsShape>() {}

// ---------------------------------------------------------------------------------------
// Policies (pure)

/** The payload of GET /links/{id}/analytics (`data`). */
export interface AnalyticsReport {
  readonly link_id: string
  readonly from: string
  readonly to: string
  readonly granularity: Granularity
  readonly totals: { readonly clicks: number; readonly unique_visitors: number; readonly bot_clicks: number }
  readonly series: ReadonlyArray<{ readonly start: string; readonly clicks: number; readonly unique_visitors: number }>
  readonly breakdowns: Partial<Record<Dimension, ReadonlyArray<ValueCount>>>
}

/**
 * Folds every value with fewer than `k` clicks into `other` (together with a value that is
 * literally `other`), so no shown value stands for fewer than k clicks. Largest first, ties
 * by value; `other` last; values without clicks are left out.
 */
export const foldSmallValues = (rows: ReadonlyArray<ValueCount>, k: number = K_ANONYMITY): Array<ValueCount> => {
  const merged = new Map<string, number>()
  for (const row of rows) merged.set(row.value, (merged.get(row.value) ?? 0) + row.clicks)
  let other = 0
  const shown: Array<ValueCount> = []
  for (const [value, clicks] of merged) {
    if (clicks <= 0) continue
    if (value === OTHER || clicks < k) other += clicks
    else shown.push({ value, clicks })
  }
  shown.sort((a, b) => b.clicks - a.clicks || (a.value < b.value ? -1 : a.value > b.value ? 1 : 0))
  if (other > 0) shown.push({ value: OTHER, clicks: other })
  return shown
}

/** How a stored value reads in a breakdown: an unknown country is `unknown`, no referrer is `direct`. */
export const displayValue = (dimension: Dimension, stored: string): string => {
  if (stored !== "") return stored
  switch (dimension) {
    case "country":
      return "unknown"
    case "referrer":
      return "direct"
    default:
      return OTHER
  }
}

/** The response for a query: a dense series (empty buckets as zeros) and folded breakdowns. */
export const toReport = (
  query: AnalyticsQuery,
  aggregates: AnalyticsAggregates,
  k: number = K_ANONYMITY
): AnalyticsReport => {
  const step = bucketSeconds(query.granularity)
  const byStart = new Map(aggregates.series.map((b) => [b.start, b]))
  const series: Array<AnalyticsReport["series"][number]> = []
  for (let start = query.from; start < query.to; start += step) {
    const b = byStart.get(start)
    series.push({ start: isoSeconds(start), clicks: b?.clicks ?? 0, unique_visitors: b?.uniqueVisitors ?? 0 })
  }
  const breakdowns: Partial<Record<Dimension, ReadonlyArray<ValueCount>>> = {}
  for (const dimension of query.dimensions) {
    const rows = (aggregates.breakdowns[dimension] ?? []).map((r) => ({
      value: displayValue(dimension, r.value),
      clicks: r.clicks
    }))
    breakdowns[dimension] = foldSmallValues(rows, k)
  }
  return {
    link_id: query.linkId,
    from: isoSeconds(query.from),
    to: isoSeconds(query.to),
    granularity: query.granularity,
    totals: {
      clicks: aggregates.clicks,
      unique_visitors: aggregates.uniqueVisitors,
      bot_clicks: aggregates.botClicks
    },
    series,
    breakdowns
  }
}

export const isoSeconds = (s: number) => new Date(s * 1000).toISOString().replace(".000Z", "Z")

/** The UTC hour an instant falls in (epoch seconds). */
export const hourOf = (epochMs: number) => Math.floor(epochMs / 1000 / HOUR) * HOUR

const DATE_ONLY = /^\d{4}-\d{2}-\d{2}$/
/** The largest hour a UInt32 column holds. */
const MAX_SECONDS = 2 ** 32 - HOUR

export interface RangeInput {
  readonly from?: string | undefined
  readonly to?: string | undefined
  readonly granularity?: Granularity | undefined
  /** Milliseconds since the epoch. */
  readonly now: number
}

export interface Range {
  readonly from: number
  readonly to: number
  readonly granularity: Granularity
}

/**
 * The effective range of a request, or what is wrong with it (`field: rule`). A date `from`
 * starts at its midnight (UTC) and a date `to` covers its whole day. Clicks are kept per
 * hour, so bounds widen to whole buckets of the granularity (hours or UTC days). Defaults:
 * `to` now, `from` 30 days before `to`. At most 366 days apart (before widening).
 */
export const resolveRange = (input: RangeInput): Either.Either<Range, string> => {
  const granularity = input.granularity ?? "day"
  const parse = (s: string, end: boolean) => {
    const ms = Date.parse(DATE_ONLY.test(s) ? `${s}T00:00:00Z` : s)
    return DATE_ONLY.test(s) && end ? ms + DAY * 1000 : ms
  }
  const toMs = input.to === undefined ? input.now : parse(input.to, true)
  const fromMs = input.from === undefined ? toMs - DEFAULT_RANGE_DAYS * DAY * 1000 : parse(input.from, false)
  if (Number.isNaN(fromMs)) return Either.left("from: must be an ISO 8601 date or date-time")
  if (Number.isNaN(toMs)) return Either.left("to: must be an ISO 8601 date or date-time")
  const from = Math.floor(fromMs / 1000 / HOUR) * HOUR
  const to = Math.ceil(toMs / 1000 / HOUR) * HOUR
  if (from < 0) return Either.left("from: must not be before 1970-01-01")
  if (to > MAX_SECONDS) return Either.left("to: must be before 2106-02-07")
  if (to <= from) {
    return Either.left(input.to === undefined ? "from: must be in the past" : "to: must be after from")
  }
  if (toMs - fromMs > MAX_RANGE_DAYS * DAY * 1000) {
    return Either.left(`from, to: must be at most ${MAX_RANGE_DAYS} days apart`)
  }
  const step = bucketSeconds(granularity)
  return Either.right({
    from: Math.floor(from / step) * step,
    to: Math.ceil(to / step) * step,
    granularity
  })
}

/**
 * The `dimensions` parameter: a comma-separated subset, each at most once in the payload.
 * Absent: all four; empty: none.
 */
export const parseDimensions = (raw: string | undefined): Either.Either<ReadonlyArray<Dimension>, string> => {
  if (raw === undefined) return Either.right(Dimensions)
  const asked = raw
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "")
  const unknown = asked.filter((s) => !(Dimensions as ReadonlyArray<string>).includes(s))
  if (unknown.length > 0) {
    return Either.left(
      `dimensions: unknown ${unknown.map((u) => JSON.stringify(u)).join(", ")}; valid: ${Dimensions.join(", ")}`
    )
  }
  return Either.right(Dimensions.filter((d) => asked.includes(d)))
}
