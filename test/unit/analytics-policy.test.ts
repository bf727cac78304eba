import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { projectBatch, RecentIds, toClickRow } from "../../apps/workers/ClickBatch.js"
import {
  type AnalyticsQuery,
  type ClickRow,
  Dimensions,
  displayValue,
  foldSmallValues,
  parseDimensions,
  resolveRange,
  toReport
} from "../../domain/Analytics.js"
import type { Batch, LogRecord } from "../../domain/EventLog.js"
import type { ClickRecorded } from "../../domain/Events.js"
import { coveringRows, type InputRow, inputRows, quote } from "../../infra/analytics/Sql.js"

const H = 3600
const iso = (s: string) => Date.parse(s) / 1000

describe("k-anonymity folding", () => {
  it("folds values with fewer than 5 clicks into other; 5 clicks is shown", () => {
    expect(
      foldSmallValues([
        { value: "DE", clicks: 12 },
        { value: "FR", clicks: 5 },
        { value: "IT", clicks: 4 },
        { value: "ES", clicks: 1 }
      ])
    ).toEqual([
      { value: "DE", clicks: 12 },
      { value: "FR", clicks: 5 },
      { value: "other", clicks: 5 }
    ])
  })

  it("merges a value literally named other into the other bucket, and puts other last", () => {
    expect(
      foldSmallValues([
        { value: "other", clicks: 30 },
        { value: "Chrome", clicks: 7 },
        { value: "Lynx", clicks: 2 }
      ])
    ).toEqual([
      { value: "Chrome", clicks: 7 },
      { value: "other", clicks: 32 }
    ])
  })

  it("has no other bucket when nothing is folded, and leaves out values without clicks", () => {
    expect(
      foldSmallValues([
        { value: "b", clicks: 9 },
        { value: "a", clicks: 9 },
        { value: "z", clicks: 0 }
      ])
    ).toEqual([
      { value: "a", clicks: 9 },
      { value: "b", clicks: 9 }
    ])
  })

  it("never shows a single value under k, even when everything folds", () => {
    const folded = foldSmallValues(
      Array.from({ length: 10 }, (_, i) => ({ value: `v${i}`, clicks: 4 })),
      5
    )
    expect(folded).toEqual([{ value: "other", clicks: 40 }])
    for (const k of [1, 2, 10]) {
      for (const row of foldSmallValues([{ value: "x", clicks: 3 }], k)) {
        expect(row.value === "other" || row.clicks >= k).toBe(true)
      }
    }
  })

  it("names unknown countries unknown and missing referrers direct", () => {
    expect(displayValue("country", "")).toBe("unknown")
    expect(displayValue("referrer", "")).toBe("direct")
    expect(displayValue("country", "DE")).toBe("DE")
  })
})

describe("report", () => {
  const query: AnalyticsQuery = {
    linkId: "link_a",
    from: iso("2024-05-01T00:00:00Z"),
    to: iso("2024-05-04T00:00:00Z"),
    granularity: "day",
    dimensions: ["country", "referrer"]
  }

  it("has every bucket of the range, empty ones as zeros, and folded breakdowns with readable values", () => {
    const report = toReport(query, {
      clicks: 14,
      uniqueVisitors: 9,
      botClicks: 3,
      series: [{ start: iso("2024-05-02T00:00:00Z"), clicks: 14, uniqueVisitors: 9 }],
      breakdowns: {
        country: [
          { value: "", clicks: 6 },
          { value: "DE", clicks: 8 }
        ],
        referrer: [
          { value: "", clicks: 10 },
          { value: "news.example", clicks: 4 }
        ]
      }
    })
    expect(report).toEqual({
      link_id: "link_a",
      from: "2024-05-01T00:00:00Z",
      to: "2024-05-04T00:00:00Z",
      granularity: "day",
      totals: { clicks: 14, unique_visitors: 9, bot_clicks: 3 },
      series: [
        { start: "2024-05-01T00:00:00Z", clicks: 0, unique_visitors: 0 },
        { start: "2024-05-02T00:00:00Z", clicks: 14, unique_visitors: 9 },
        { start: "2024-05-03T00:00:00Z", clicks: 0, unique_visitors: 0 }
      ],
      breakdowns: {
        country: [
          { value: "DE", clicks: 8 },
          { value: "unknown", clicks: 6 }
        ],
        referrer: [
          { value: "direct", clicks: 10 },
          { value: "other", clicks: 4 }
        ]
      }
    })
  })

  it("lists only the dimensions asked for, empty ones as empty lists", () => {
    const report = toReport(
      { ...query, dimensions: ["device"] },
      { clicks: 0, uniqueVisitors: 0, botClicks: 0, series: [], breakdowns: {} }
    )
    expect(report.breakdowns).toEqual({ device: [] })
  })

  it("has one bucket per hour with hour granularity", () => {
    const report = toReport(
      { ...query, granularity: "hour", to: query.from + 5 * H },
      { clicks: 0, uniqueVisitors: 0, botClicks: 0, series: [], breakdowns: {} }
    )
    expect(report.series.map((b) => b.start)).toEqual([
      "2024-05-01T00:00:00Z",
      "2024-05-01T01:00:00Z",
      "2024-05-01T02:00:00Z",
      "2024-05-01T03:00:00Z",
      "2024-05-01T04:00:00Z"
    ])
  })
})

describe("range parameters", () => {
  const now = Date.parse("2024-06-15T10:20:00Z")
  const range = (from?: string, to?: string, granularity?: "hour" | "day") =>
    resolveRange({ from, to, granularity, now })

  it("defaults to the last 30 days by day, widened to whole UTC days", () => {
    expect(range()).toEqual(
      Either.right({ from: iso("2024-05-16T00:00:00Z"), to: iso("2024-06-16T00:00:00Z"), granularity: "day" })
    )
  })

  it("with hour granularity widens to whole hours only", () => {
    expect(range(undefined, undefined, "hour")).toEqual(
      Either.right({ from: iso("2024-05-16T10:00:00Z"), to: iso("2024-06-15T11:00:00Z"), granularity: "hour" })
    )
    expect(range("2024-06-01T10:30:00+02:00", "2024-06-01T12:00:01Z", "hour")).toEqual(
      Either.right({ from: iso("2024-06-01T08:00:00Z"), to: iso("2024-06-01T13:00:00Z"), granularity: "hour" })
    )
  })

  it("takes a date as to to cover that whole day", () => {
    expect(range("2024-05-01", "2024-05-01")).toEqual(
      Either.right({ from: iso("2024-05-01T00:00:00Z"), to: iso("2024-05-02T00:00:00Z"), granularity: "day" })
    )
  })

  it("allows at most 366 days between from and to", () => {
    expect(Either.isRight(range("2024-01-01", "2024-12-31"))).toBe(true) // 366 days, 2024 is a leap year
    expect(range("2024-01-01", "2025-01-01")).toEqual(Either.left("from, to: must be at most 366 days apart"))
    expect(range("2023-01-01T00:00:00Z", "2024-01-02T00:00:01Z")).toEqual(
      Either.left("from, to: must be at most 366 days apart")
    )
  })

  it("refuses to before from, an empty range, from in the future without to, and times before 1970", () => {
    expect(range("2024-05-02", "2024-05-01T00:00:00Z")).toEqual(Either.left("to: must be after from"))
    expect(range("2024-05-01T05:00:00Z", "2024-05-01T05:00:00Z")).toEqual(Either.left("to: must be after from"))
    expect(range("2024-07-01")).toEqual(Either.left("from: must be in the past"))
    expect(range("1969-12-31", "1970-01-02")).toEqual(Either.left("from: must not be before 1970-01-01"))
  })

  it("parses dimensions: absent is all, empty is none, order follows the payload, unknown is refused", () => {
    expect(parseDimensions(undefined)).toEqual(Either.right(Dimensions))
    expect(parseDimensions("")).toEqual(Either.right([]))
    expect(parseDimensions("browser, country,browser")).toEqual(Either.right(["country", "browser"]))
    expect(parseDimensions("country,city")).toEqual(
      Either.left('dimensions: unknown "city"; valid: country, referrer, device, browser')
    )
  })
})

const record = (partition: number, offset: number): LogRecord => ({
  topic: "clicks.v1",
  partition,
  offset,
  key: "link_a",
  value: "{}",
  timestamp: Date.parse("2024-05-01T10:00:00Z")
})

const click = (id: string, data: Partial<ClickRecorded["data"]> = {}, occurredAt = "2024-05-01T10:15:00Z") =>
  ({
    id,
    type: "click.recorded",
    version: 1,
    occurred_at: occurredAt,
    account_id: "acc_1",
    data: {
      link_id: "link_a",
      country: "DE",
      referrer_host: null,
      device: "mobile",
      browser: "Chrome",
      bot: false,
      visitor: "0123456789abcdef",
      ...data
    }
  }) as ClickRecorded

const batch = (
  partition: number,
  events: Array<[number, ClickRecorded]>,
  lastOffset?: number
): Batch<ClickRecorded> => ({
  topic: "clicks.v1",
  partition,
  events: events.map(([offset, event]) => ({ event, record: record(partition, offset) })),
  lastOffset: lastOffset ?? events.at(-1)![0]
})

describe("click projection", () => {
  it("skips records at or below the watermark and carries the batch's last offset", () => {
    const p = projectBatch(
      batch(2, [
        [10, click("e10")],
        [11, click("e11")],
        [12, click("e12")]
      ]),
      11,
      new RecentIds()
    )
    expect(p.insert?.partition).toBe(2)
    expect(p.insert?.upTo).toBe(12)
    expect(p.insert?.rows).toHaveLength(1)
    expect(p.ids).toEqual(["e10", "e11", "e12"])
  })

  it("inserts nothing for a batch the watermark already covers (a redelivery)", () => {
    const p = projectBatch(batch(0, [[3, click("a")]]), 3, new RecentIds())
    expect(p.insert).toBeUndefined()
    expect(p.ids).toEqual(["a"])
  })

  it("drops an event id seen in the batch or in the recent window, and still moves the watermark", () => {
    const recent = new RecentIds()
    recent.add("seen")
    const p = projectBatch(
      batch(0, [
        [0, click("x")],
        [1, click("x")],
        [2, click("seen")]
      ]),
      -1,
      recent
    )
    expect(p.insert?.rows).toHaveLength(1)
    expect(p.insert?.upTo).toBe(2)
    expect(p.duplicates).toBe(2)
    const onlyDuplicates = projectBatch(batch(0, [[5, click("seen")]], 7), 4, recent)
    expect(onlyDuplicates.insert).toEqual({ partition: 0, upTo: 7, rows: [] })
    expect(inputRows(onlyDuplicates.insert!)).toEqual([expect.objectContaining({ link_id: "", source_offset: 7 })])
  })

  it("sums a batch's clicks into rollup rows: per link, hour and day, bot flag; totals per visitor, one row per dimension value", () => {
    const H = Date.parse("2026-03-01T23:00:00Z") / 1000
    const row = (over: Partial<ClickRow>): ClickRow => ({
      linkId: "link_a",
      hour: H,
      bot: false,
      country: "FR",
      referrer: "",
      device: "mobile",
      browser: "Safari",
      visitor: "00000000000000aa",
      ...over
    })
    const rows = inputRows({
      partition: 3,
      upTo: 41,
      rows: [
        row({}),
        row({}),
        row({ visitor: "00000000000000bb", country: "DE" }),
        row({ hour: H + 3600 }), // the next UTC day
        row({ bot: true, device: "other", browser: "other", visitor: "00000000000000cc" }),
        row({ linkId: "link_b" })
      ]
    })
    const key = (r: InputRow) =>
      `${r.link_id} ${r.period} ${r.start - H} ${r.bot} ${r.dimension}=${r.value} ${r.visitor}`
    const got = Object.fromEntries(rows.map((r) => [key(r), r.clicks]))
    const day0 = Math.floor(H / 86_400) * 86_400 - H
    expect(got).toEqual({
      // link_a, 23:00, human: two visitors, 3 clicks
      "link_a 3600 0 0 = 00000000000000aa": 2,
      "link_a 3600 0 0 = 00000000000000bb": 1,
      "link_a 3600 0 0 country=FR ": 2,
      "link_a 3600 0 0 country=DE ": 1,
      "link_a 3600 0 0 referrer= ": 3,
      "link_a 3600 0 0 device=mobile ": 3,
      "link_a 3600 0 0 browser=Safari ": 3,
      // link_a, 23:00, bot
      "link_a 3600 0 1 = 00000000000000cc": 1,
      "link_a 3600 0 1 country=FR ": 1,
      "link_a 3600 0 1 referrer= ": 1,
      "link_a 3600 0 1 device=other ": 1,
      "link_a 3600 0 1 browser=other ": 1,
      // link_a, 00:00 the next day
      "link_a 3600 3600 0 = 00000000000000aa": 1,
      "link_a 3600 3600 0 country=FR ": 1,
      "link_a 3600 3600 0 referrer= ": 1,
      "link_a 3600 3600 0 device=mobile ": 1,
      "link_a 3600 3600 0 browser=Safari ": 1,
      // day rows: the first day sums its hour rows, the second day has its own
      [`link_a 86400 ${day0} 0 = 00000000000000aa`]: 2,
      [`link_a 86400 ${day0} 0 = 00000000000000bb`]: 1,
      [`link_a 86400 ${day0} 0 country=FR `]: 2,
      [`link_a 86400 ${day0} 0 country=DE `]: 1,
      [`link_a 86400 ${day0} 0 referrer= `]: 3,
      [`link_a 86400 ${day0} 0 device=mobile `]: 3,
      [`link_a 86400 ${day0} 0 browser=Safari `]: 3,
      [`link_a 86400 ${day0} 1 = 00000000000000cc`]: 1,
      [`link_a 86400 ${day0} 1 country=FR `]: 1,
      [`link_a 86400 ${day0} 1 referrer= `]: 1,
      [`link_a 86400 ${day0} 1 device=other `]: 1,
      [`link_a 86400 ${day0} 1 browser=other `]: 1,
      "link_a 86400 3600 0 = 00000000000000aa": 1,
      "link_a 86400 3600 0 country=FR ": 1,
      "link_a 86400 3600 0 referrer= ": 1,
      "link_a 86400 3600 0 device=mobile ": 1,
      "link_a 86400 3600 0 browser=Safari ": 1,
      // link_b: one click, apart
      "link_b 3600 0 0 = 00000000000000aa": 1,
      "link_b 3600 0 0 country=FR ": 1,
      "link_b 3600 0 0 referrer= ": 1,
      "link_b 3600 0 0 device=mobile ": 1,
      "link_b 3600 0 0 browser=Safari ": 1,
      [`link_b 86400 ${day0} 0 = 00000000000000aa`]: 1,
      [`link_b 86400 ${day0} 0 country=FR `]: 1,
      [`link_b 86400 ${day0} 0 referrer= `]: 1,
      [`link_b 86400 ${day0} 0 device=mobile `]: 1,
      [`link_b 86400 ${day0} 0 browser=Safari `]: 1
    })
    expect(rows).toHaveLength(Object.keys(got).length)
    expect(rows.every((r) => r.source_partition === 3 && r.source_offset === 41)).toBe(true)
    // A row that stands for several alike clicks sums like that many rows; a bad count is refused.
    const weighted = inputRows({ partition: 3, upTo: 41, rows: [row({ clicks: 2 }), row({ clicks: 3 })] })
    const repeated = inputRows({ partition: 3, upTo: 41, rows: Array.from({ length: 5 }, () => row({})) })
    expect(weighted).toEqual(repeated)
    for (const clicks of [0, -1, 1.5, Number.NaN]) {
      expect(() => inputRows({ partition: 3, upTo: 41, rows: [row({ clicks })] })).toThrow(/not a click count/)
    }
  })

  it("remembers a bounded window of ids, forgetting the oldest", () => {
    const recent = new RecentIds(3)
    for (const id of ["a", "b", "c", "d"]) recent.add(id)
    expect(recent.has("a")).toBe(false)
    expect(recent.has("d")).toBe(true)
    expect(recent.size).toBe(3)
  })

  it("keeps the hour of the click, and counts odd values as unknown", () => {
    expect(toClickRow(click("a"), record(0, 0))).toEqual({
      linkId: "link_a",
      hour: iso("2024-05-01T10:00:00Z"),
      bot: false,
      country: "DE",
      referrer: "",
      device: "mobile",
      browser: "Chrome",
      visitor: "0123456789abcdef"
    })
    const odd = toClickRow(
      click("b", { country: "Germany", referrer_host: "News.Example.", browser: " ", visitor: "xyz" }, "not a time"),
      record(0, 0)
    )
    expect(odd).toMatchObject({
      hour: iso("2024-05-01T10:00:00Z"),
      country: "",
      referrer: "news.example",
      browser: "other",
      visitor: ""
    })
  })
})

describe("analytics SQL", () => {
  it("reads day rows for the whole days of a range and hour rows only for the partial days at its ends", () => {
    const d = iso("2024-05-01T00:00:00Z")
    expect(coveringRows(d, d + 3 * 86_400)).toBe(`period = 86400 AND start >= ${d} AND start < ${d + 3 * 86_400}`)
    expect(coveringRows(d + 10 * H, d + 20 * H)).toBe(
      `period = 3600 AND start >= ${d + 10 * H} AND start < ${d + 20 * H}`
    )
    expect(coveringRows(d - 2 * H, d + 86_400 + H)).toBe(
      `((period = 86400 AND start >= ${d} AND start < ${d + 86_400}) OR (period = 3600 AND ((start >= ${d - 2 * H} AND start < ${d}) OR (start >= ${d + 86_400} AND start < ${d + 86_400 + H}))))`
    )
  })

  it("escapes quotes and backslashes so a value cannot end its literal", () => {
    expect(quote("it's")).toBe("'it\\'s'")
    expect(quote("a\\' OR 1=1 --")).toBe("'a\\\\\\' OR 1=1 --'")
  })
})
