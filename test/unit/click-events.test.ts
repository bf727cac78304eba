import { Either, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { projectBatch, RecentIds, splitBatch } from "../../apps/workers/ClickBatch.js"
import { ClickEventWire } from "../../apps/workers/ClickWire.js"
import { hourOf } from "../../domain/Analytics.js"
import type { Batch, LogRecord } from "../../domain/EventLog.js"
import {
  type BatchedClick,
  batchedClicks,
  type ClickEvent,
  ClickEvent as ClickEventSchema,
  type ClicksRecorded,
  type LinkedClick,
  linkedClicks
} from "../../domain/Events.js"
import { type InputRow, inputRows } from "../../infra/analytics/Sql.js"
import { clicksRecorded, clicksRecordedV3 } from "../support/clicks.js"

const AT = Date.parse("2024-05-01T10:15:00Z")

const click = (over: Record<string, unknown> = {}) => ({
  at: AT,
  country: "DE",
  referrer_host: null,
  device: "mobile",
  browser: "Chrome",
  bot: false,
  visitor: "0123456789abcdef",
  ...over
})

const event = (id: string, clicks: ReadonlyArray<unknown>, linkId = "link_a") => ({
  id,
  type: "clicks.recorded",
  version: 1,
  occurred_at: "2024-05-01T10:15:01Z",
  account_id: "acc_1",
  data: { link_id: linkId, clicks }
})

/** The same clicks as a version 2 event (test/support's encoder, independent of the redirector), `over` replacing fields of its data. */
const columns = (id: string, clicks: ReadonlyArray<Record<string, unknown>>, over: Record<string, unknown> = {}) => {
  const e = clicksRecorded(2, event(id, []), "link_a", clicks as unknown as ReadonlyArray<BatchedClick>)
  return { ...e, data: { ...e.data, ...over } }
}

/** Clicks of several links as a version 3 event (test/support's encoder), `over` replacing fields of its data. */
const accountColumns = (
  id: string,
  clicks: ReadonlyArray<Record<string, unknown>>,
  over: Record<string, unknown> = {}
) => {
  const e = clicksRecordedV3(
    { id, occurred_at: "2024-05-01T10:15:01Z", account_id: "acc_1" },
    clicks as unknown as ReadonlyArray<LinkedClick>
  )
  return { ...e, data: { ...e.data, ...over } }
}

const legacy = (id: string) => ({
  id,
  type: "click.recorded",
  version: 1,
  occurred_at: "2024-05-01T11:15:00Z",
  account_id: "acc_1",
  data: {
    link_id: "link_a",
    country: "FR",
    referrer_host: null,
    device: "desktop",
    browser: "Firefox",
    bot: false,
    visitor: "0123456789abcdef"
  }
})

const full = Schema.decodeUnknownEither(Schema.parseJson(ClickEventSchema))
const wire = Schema.decodeUnknownEither(Schema.parseJson(ClickEventWire))

const record = (offset: number): LogRecord => ({
  topic: "clicks.v1",
  partition: 3,
  offset,
  key: "link_a",
  value: "{}",
  timestamp: Date.parse("2024-05-01T12:00:00Z")
})

const batch = (events: Array<[number, ClickEvent]>, lastOffset?: number): Batch<ClickEvent> => ({
  topic: "clicks.v1",
  partition: 3,
  events: events.map(([offset, e]) => ({ event: e, record: record(offset) })),
  lastOffset: lastOffset ?? events.at(-1)![0]
})

const decoded = (value: unknown) => {
  const result = wire(JSON.stringify(value))
  if (Either.isLeft(result)) throw new Error(String(result.left))
  return result.right
}

describe("clicks.v1 events", () => {
  it("the projector's lean decoding accepts and refuses exactly what the catalogue schema does", () => {
    const samples: Array<unknown> = [
      event("ok", [click(), click({ country: null, referrer_host: "news.example", bot: true, device: "other" })]),
      legacy("old"),
      event("empty", []),
      event(
        "too-many",
        Array.from({ length: 10_001 }, () => click())
      ),
      event("no-at", [click({ at: undefined })]),
      event("string-at", [click({ at: "2024-05-01T10:15:00Z" })]),
      event("fractional-at", [click({ at: 1.5 })]),
      event("negative-at", [click({ at: -1 })]),
      event("bad-device", [click({ device: "phone" })]),
      event("bot-string", [click({ bot: "false" })]),
      event("country-number", [click({ country: 49 })]),
      event("visitor-null", [click({ visitor: null })]),
      event("not-a-click", [click(), 7]),
      event("clicks-object", { 0: click() } as unknown as Array<unknown>),
      { ...event("no-link", [click()]), data: { clicks: [click()] } },
      { ...event("v2", [click()]), version: 2 },
      { ...event("other-type", [click()]), type: "click.deleted" }
    ]
    for (const sample of samples) {
      const text = JSON.stringify(sample)
      expect(Either.isRight(wire(text)), text.slice(0, 80)).toBe(Either.isRight(full(text)))
    }
    expect(Either.isRight(wire(JSON.stringify(samples[0])))).toBe(true)
    expect(Either.isRight(wire(JSON.stringify(samples[1])))).toBe(true)
  })

  it("version 2 (columns): the lean decoding accepts and refuses exactly what the catalogue schema does", () => {
    const two = [click(), click({ at: AT + 5, country: null, referrer_host: "news.example", bot: true })]
    const samples: Array<unknown> = [
      columns("ok", two),
      columns("clock-back", [click(), click({ at: AT - 1000 })]),
      columns("empty", []),
      columns(
        "too-many",
        Array.from({ length: 10_001 }, () => click())
      ),
      columns("short-column", two, { country: [0] }),
      columns("long-column", two, { visitor: [0, 0, 0] }),
      columns("index-past-end", two, { referrer: [0, 2] }),
      columns("negative-index", two, { country: [0, -1] }),
      columns("fractional-index", two, { visitor: [0, 0.5] }),
      columns("fractional-at", two, { at: [AT, 0.5] }),
      columns("string-at", two, { at: [String(AT), 5] }),
      columns("unsafe-time", two, { at: [2 ** 53, 1] }),
      columns("bad-device", [click({ device: "phone" })]),
      columns("bot-string", [click({ bot: "false" })]),
      columns("country-number", two, { countries: [49, null] }),
      columns("visitor-null", [click({ visitor: null })]),
      columns("visitors-object", two, { visitors: { 0: {} } }),
      columns("no-link", two, { link_id: undefined }),
      { ...columns("v1", two), version: 1 },
      { ...event("clicks-as-v2", [click()]), version: 2 }
    ]
    for (const sample of samples) {
      const text = JSON.stringify(sample)
      expect(Either.isRight(wire(text)), text.slice(0, 80)).toBe(Either.isRight(full(text)))
    }
    expect(Either.isRight(wire(JSON.stringify(samples[0])))).toBe(true)
    expect(Either.isRight(wire(JSON.stringify(samples[1])))).toBe(true)
    expect(Either.isRight(wire(JSON.stringify(samples[4])))).toBe(false)
  })

  it("version 2 gives the same clicks, and the same rollup rows, as version 1 of the same clicks", () => {
    const clicks = [
      click(),
      click({ at: AT + 20 }),
      click({ at: AT + 3_600_000, country: "fr", referrer_host: "News.Example.", bot: true }),
      click({ at: AT + 10, device: "desktop", browser: "  ", visitor: "0123456789ABCDEF" }),
      click({ at: AT + 10, country: "Germany", referrer_host: "bad host", visitor: "nope" }),
      click({ at: 2 ** 32 * 1000 }),
      click({ at: AT })
    ]
    const v2 = decoded(columns("e2", clicks))
    expect(v2.type === "clicks.recorded" && batchedClicks(v2.data)).toEqual(clicks)
    const v1 = decoded(event("e1", clicks))
    const insert = (e: ClickEvent) => projectBatch(batch([[0, e]]), -1, new RecentIds()).insert!
    // Alike clicks of the same hour (the first two) become one row of two.
    expect(insert(v2).rows).toHaveLength(clicks.length - 1)
    expect(insert(v2).rows.reduce((n, r) => n + (r.clicks ?? 1), 0)).toBe(clicks.length)
    const sorted = (rows: ReadonlyArray<InputRow>) => [...rows].map((r) => JSON.stringify(r)).sort()
    expect(sorted(inputRows(insert(v2)))).toEqual(sorted(inputRows(insert(v1))))
  })

  it("version 3 (an account's links): the lean decoding accepts and refuses exactly what the catalogue schema does", () => {
    const two = [
      click({ link_id: "link_a" }),
      click({ link_id: "link_b", at: AT + 5, country: null, referrer_host: "news.example", bot: true })
    ]
    const samples: Array<unknown> = [
      accountColumns("ok", two),
      accountColumns("one-link", [click({ link_id: "link_a" })]),
      accountColumns("empty", []),
      accountColumns("short-link", two, { link: [0] }),
      accountColumns("long-link", two, { link: [0, 1, 1] }),
      accountColumns("link-past-end", two, { link: [0, 2] }),
      accountColumns("negative-link", two, { link: [0, -1] }),
      accountColumns("fractional-link", two, { link: [0, 0.5] }),
      accountColumns("link-twice", two, { links: ["link_a", "link_a"] }),
      accountColumns("link-number", two, { links: ["link_a", 7] }),
      accountColumns("no-links", two, { links: undefined }),
      accountColumns("no-link", two, { link: undefined }),
      accountColumns("short-column", two, { country: [0] }),
      accountColumns("index-past-end", two, { referrer: [0, 2] }),
      accountColumns("unsafe-time", two, { at: [2 ** 53, 1] }),
      accountColumns("bad-device", [click({ link_id: "link_a", device: "phone" })]),
      { ...accountColumns("as-v2", two), version: 2 },
      { ...columns("v2-as-v3", two), version: 3 }
    ]
    for (const sample of samples) {
      const text = JSON.stringify(sample)
      expect(Either.isRight(wire(text)), text.slice(0, 80)).toBe(Either.isRight(full(text)))
    }
    expect(Either.isRight(wire(JSON.stringify(samples[0])))).toBe(true)
    expect(Either.isRight(wire(JSON.stringify(samples[1])))).toBe(true)
    expect(Either.isRight(wire(JSON.stringify(samples[8])))).toBe(false)
  })

  it("version 3: links of one account interleaved in one event decode to the exact clicks, each with its link and time", () => {
    const clicks = [
      click({ link_id: "link_a" }),
      click({ link_id: "link_b", at: AT + 3, country: "FR" }),
      click({ link_id: "link_a", at: AT + 3 }),
      click({ link_id: "link_c", at: AT + 40, referrer_host: "news.example", bot: true }),
      click({ link_id: "link_b", at: AT + 41, visitor: "fedcba9876543210" }),
      click({ link_id: "link_a", at: AT - 500 }),
      click({ link_id: "link_c", at: AT + 3_600_000 })
    ]
    const raw = accountColumns("e3", clicks)
    expect(raw.data.links).toEqual(["link_a", "link_b", "link_c"])
    expect(raw.data.link).toEqual([0, 1, 0, 2, 1, 0, 2])
    // Each time after the click before it in the event, whatever its link.
    expect(raw.data.at).toEqual([AT, 3, 0, 37, 1, -541, 3_600_500])
    const v3 = decoded(raw)
    expect(v3.type === "clicks.recorded" && v3.version).toBe(3)
    expect(v3.type === "clicks.recorded" && linkedClicks(v3.data)).toEqual(clicks)
  })

  it("version 3 gives the same rollup rows as version 2 and version 1 of the same clicks, one link at a time", () => {
    const clicks: Array<Record<string, unknown>> = [
      click({ link_id: "link_a" }),
      click({ link_id: "link_b", at: AT + 3 }),
      click({ link_id: "link_a", at: AT + 20 }),
      click({ link_id: "link_b", at: AT + 3_600_000, country: "fr", referrer_host: "News.Example.", bot: true }),
      click({ link_id: "link_a", at: AT + 10, device: "desktop", browser: "  ", visitor: "0123456789ABCDEF" }),
      click({ link_id: "link_b", at: AT + 10, country: "Germany", referrer_host: "bad host", visitor: "nope" }),
      click({ link_id: "link_a", at: 2 ** 32 * 1000 }),
      click({ link_id: "link_b", at: AT })
    ]
    // Every batch ends at offset 1, so the rows carry the same source offset.
    const insert = (events: ReadonlyArray<unknown>) =>
      projectBatch(
        batch(
          events.map((e, i) => [i, decoded(e)]),
          1
        ),
        -1,
        new RecentIds()
      ).insert!
    const sorted = (rows: ReadonlyArray<InputRow>) => [...rows].map((r) => JSON.stringify(r)).sort()
    const ofLink = (link: string) => clicks.filter((c) => c.link_id === link).map(({ link_id: _, ...c }) => c)
    const v3 = insert([accountColumns("e3", clicks)])
    // Alike clicks of one link in one hour count in one row; the same values on another link do not.
    expect(v3.rows.reduce((n, r) => n + (r.clicks ?? 1), 0)).toBe(clicks.length)
    expect(v3.rows.filter((r) => r.linkId === "link_a" && r.hour === hourOf(AT) && r.device === "mobile")).toEqual([
      expect.objectContaining({ clicks: 2, referrer: "", visitor: "0123456789abcdef" })
    ])
    const v2 = insert([columns("a2", ofLink("link_a")), columns("b2", ofLink("link_b"), { link_id: "link_b" })])
    const v1 = insert([event("a1", ofLink("link_a")), event("b1", ofLink("link_b"), "link_b")])
    expect(sorted(inputRows(v3))).toEqual(sorted(inputRows(v2)))
    expect(sorted(inputRows(v3))).toEqual(sorted(inputRows(v1)))
  })

  it("a clicks.recorded event becomes one rollup row per click, beside the legacy click.recorded", () => {
    const batched = decoded(
      event("e1", [click(), click({ at: AT + 3_600_000, country: "fr", referrer_host: "News.Example.", bot: true })])
    )
    const p = projectBatch(
      batch([
        [7, batched],
        [8, decoded(legacy("e2"))]
      ]),
      -1,
      new RecentIds()
    )
    expect(p.insert?.upTo).toBe(8)
    expect(p.ids).toEqual(["e1", "e2"])
    expect(p.insert?.rows).toEqual([
      {
        linkId: "link_a",
        hour: hourOf(AT),
        bot: false,
        country: "DE",
        referrer: "",
        device: "mobile",
        browser: "Chrome",
        visitor: "0123456789abcdef"
      },
      expect.objectContaining({ hour: hourOf(AT + 3_600_000), bot: true, country: "FR", referrer: "news.example" }),
      expect.objectContaining({ hour: hourOf(Date.parse("2024-05-01T11:15:00Z")), country: "FR", browser: "Firefox" })
    ])
  })

  it("a redelivered or repeated batch event counts nothing again, whatever its size", () => {
    const e = decoded(event("dup", [click(), click(), click()]))
    const recent = new RecentIds()
    const first = projectBatch(batch([[0, e]]), -1, recent)
    expect(first.insert?.rows).toHaveLength(3)
    for (const id of first.ids) recent.add(id)
    // The producer retried: the same event again at the next offset.
    const again = projectBatch(batch([[1, e]]), 0, recent)
    expect(again.insert).toEqual({ partition: 3, upTo: 1, rows: [] })
    expect(again.duplicates).toBe(1)
    // The log redelivered: below the watermark.
    expect(projectBatch(batch([[0, e]]), 0, new RecentIds()).insert).toBeUndefined()
  })

  it("a time past what the rollup holds falls back to when the log appended the batch", () => {
    const e = decoded(event("late", [click({ at: 2 ** 32 * 1000 })]))
    expect(projectBatch(batch([[0, e]]), -1, new RecentIds()).insert?.rows[0]?.hour).toBe(
      hourOf(Date.parse("2024-05-01T12:00:00Z"))
    )
  })

  it("splits a partition batch into inserts of whole events under the row ceiling, each with its last offset", () => {
    const sized = (id: string, n: number) =>
      decoded(
        event(
          id,
          Array.from({ length: n }, () => click())
        )
      ) as ClicksRecorded
    const b = batch(
      [
        [10, sized("a", 3)],
        [11, sized("b", 3)],
        [12, sized("c", 5)],
        [13, sized("d", 1)]
      ],
      15 // poison at 14 and 15
    )
    const runs = splitBatch(b, 6)
    expect(runs.map((r) => r.events.map((e) => e.record.offset))).toEqual([
      [10, 11],
      [12, 13]
    ])
    expect(runs.map((r) => r.lastOffset)).toEqual([11, 15])
    // An event larger than the ceiling goes alone; a batch that fits is kept as it is.
    expect(splitBatch(b, 4).map((r) => r.events.length)).toEqual([1, 1, 1, 1])
    expect(splitBatch(b, 100)).toEqual([b])
    // Inserted in order, the runs count every click once, even when redelivered from the middle.
    const recent = new RecentIds()
    let watermark = -1
    let rows = 0
    for (const run of [...runs, ...runs]) {
      const p = projectBatch(run, watermark, recent)
      if (p.insert !== undefined) {
        rows += p.insert.rows.length
        watermark = p.insert.upTo
      }
      for (const id of p.ids) recent.add(id)
    }
    expect(rows).toBe(12)
    expect(watermark).toBe(15)
  })
})
