import * as net from "node:net"
import { Context, Deferred, Effect, Exit, Layer, Logger, LogLevel, ManagedRuntime, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeClickHandler } from "../../apps/workers/ClickProjector.js"
import { ClickEventWire } from "../../apps/workers/ClickWire.js"
import {
  Analytics,
  type AnalyticsQuery,
  type AnalyticsShape,
  type ClickRow,
  type Dimension,
  Dimensions,
  toReport
} from "../../domain/Analytics.js"
import { type Batch, EventLog, type OutgoingRecord } from "../../domain/EventLog.js"
import type { ClickEvent, ClickRecorded } from "../../domain/Events.js"
import { ChdbAnalyticsLive } from "../../infra/analytics/Chdb.js"
import { ClickHouseServerAnalyticsLive } from "../../infra/analytics/ClickHouseServer.js"
import { removeTestChdbDir, testChdbDir, testClickHouseUrl, uniqueDatabase } from "../support/api.js"
import { toBatchRecords } from "../support/clicks.js"
import { createTestDatabase, dropTestDatabase } from "../support/database.js"
import { embeddedEventLogLayer, uniqueTopic } from "../support/eventlog.js"
import { waitFor } from "../support/waitFor.js"

const iso = (s: string) => Date.parse(s) / 1000
const H0 = iso("2024-05-01T10:00:00Z")
const H1 = iso("2024-05-01T11:00:00Z")
const H2 = iso("2024-05-02T09:00:00Z")

const quiet = Logger.minimumLogLevel(LogLevel.Error)

/** A TCP proxy in front of the ClickHouse server: stopping it makes the server unreachable. */
const tcpProxy = async (target: URL) => {
  const sockets = new Set<net.Socket>()
  let server: net.Server | undefined
  let port = 0
  const start = () =>
    new Promise<void>((resolve) => {
      server = net.createServer((client) => {
        const upstream = net.connect(Number(target.port), target.hostname)
        const end = () => {
          client.destroy()
          upstream.destroy()
          sockets.delete(client)
          sockets.delete(upstream)
        }
        sockets.add(client)
        sockets.add(upstream)
        for (const s of [client, upstream]) {
          s.on("error", end)
          s.on("close", end)
        }
        client.pipe(upstream)
        upstream.pipe(client)
      })
      server.listen(port, "127.0.0.1", () => {
        port = (server!.address() as net.AddressInfo).port
        resolve()
      })
    })
  const stop = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy()
      sockets.clear()
      server!.close(() => resolve())
    })
  await start()
  return { url: `http://127.0.0.1:${port}`, start, stop }
}

/** An analytics store whose engine can be stopped and started again under a running consumer. */
interface Disruptible {
  readonly layer: Layer.Layer<Analytics>
  readonly stop: () => Promise<void>
  readonly start: () => Promise<void>
  readonly close: () => Promise<void>
}

/** Delegates to the store of the moment: the chDB session is closed on stop and opened anew on start. */
const restartable = async (make: () => Layer.Layer<Analytics, unknown>): Promise<Disruptible> => {
  let scope: Scope.CloseableScope | undefined
  let current: AnalyticsShape | undefined
  const start = async () => {
    const s = await Effect.runPromise(Scope.make())
    const context = await Effect.runPromise(Layer.buildWithScope(make().pipe(Layer.provide(quiet)), s))
    scope = s
    current = Context.get(context, Analytics)
  }
  const stop = async () => {
    if (scope !== undefined) await Effect.runPromise(Scope.close(scope, Exit.void))
    scope = undefined
  }
  await start()
  const store = () => current!
  const proxy: AnalyticsShape = {
    insertBatch: (b) => Effect.suspend(() => store().insertBatch(b)),
    watermarks: () => Effect.suspend(() => store().watermarks()),
    query: (q) => Effect.suspend(() => store().query(q)),
    reset: () => Effect.suspend(() => store().reset()),
    rebuild: (fill) => Effect.suspend(() => store().rebuild(fill)),
    kind: current!.kind
  }
  return { layer: Layer.succeed(Analytics, proxy), stop, start, close: stop }
}

interface Engine {
  readonly name: string
  readonly available: boolean
  readonly layer: (database: string) => Layer.Layer<Analytics, unknown>
  readonly disruptible: (database: string) => Promise<Disruptible>
  readonly dropDatabase: (database: string) => Promise<void>
}

const serverUrl = testClickHouseUrl()

const engines: ReadonlyArray<Engine> = [
  {
    name: "chDB (embedded, in-process)",
    available: true,
    layer: (database) => ChdbAnalyticsLive(testChdbDir(), database),
    disruptible: (database) => restartable(() => ChdbAnalyticsLive(testChdbDir(), database)),
    dropDatabase: async () => {}
  },
  {
    name: "ClickHouse server (needs TEST_CLICKHOUSE_URL)",
    available: serverUrl !== undefined,
    layer: (database) => ClickHouseServerAnalyticsLive(serverUrl!, database),
    disruptible: async (database) => {
      const proxy = await tcpProxy(new URL(serverUrl!))
      const rt = ManagedRuntime.make(ClickHouseServerAnalyticsLive(proxy.url, database).pipe(Layer.provide(quiet)))
      const store = await rt.runPromise(Analytics)
      return {
        layer: Layer.succeed(Analytics, store),
        stop: proxy.stop,
        start: proxy.start,
        close: async () => {
          await rt.dispose()
          await proxy.stop()
        }
      }
    },
    dropDatabase: async (database) => {
      await fetch(`${new URL(serverUrl!).origin}/`, { method: "POST", body: `DROP DATABASE IF EXISTS ${database}` })
    }
  }
]

const row = (linkId: string, hour: number, visitor: number, over: Partial<ClickRow> = {}): ClickRow => ({
  linkId,
  hour,
  bot: false,
  country: "DE",
  referrer: "",
  device: "mobile",
  browser: "Chrome",
  visitor: visitor.toString(16).padStart(16, "0"),
  ...over
})

const repeat = (n: number, f: (i: number) => ClickRow) => Array.from({ length: n }, (_, i) => f(i))

/** Link A: 14 human clicks by 10 visitors over three hours of two days, 3 bot clicks. Link B: 7 clicks. */
const knownRows = {
  a0: [
    ...[1, 1, 2, 3, 3].map((v) => row("link_a", H0, v)),
    row("link_a", H0, 3, { country: "FR" }),
    row("link_a", H0, 90, { bot: true, browser: "Googlebot" }),
    row("link_a", H0, 91, { bot: true, browser: "Googlebot" })
  ],
  a1: [1, 4, 5].map((v) =>
    row("link_a", H1, v, { country: "", referrer: "news.example", device: "desktop", browser: "Firefox" })
  ),
  a2: [
    ...repeat(5, (i) =>
      row("link_a", H2, 6 + i, { country: "US", referrer: "search.example", device: "tablet", browser: "Safari" })
    ),
    row("link_a", H2, 92, { bot: true })
  ],
  b0: repeat(7, (i) => row("link_b", H0, i))
}
// Two of the first hour's clicks came from a news site.
knownRows.a0[0] = { ...knownRows.a0[0]!, referrer: "news.example" }
knownRows.a0[1] = { ...knownRows.a0[1]!, referrer: "news.example" }

const clickEvent = (
  id: string,
  linkId: string,
  visitor: number,
  at: string,
  over: Partial<ClickRecorded["data"]> = {}
) =>
  ({
    id,
    type: "click.recorded",
    version: 1,
    occurred_at: at,
    account_id: "acc_test",
    data: {
      link_id: linkId,
      country: "DE",
      referrer_host: null,
      device: "mobile",
      browser: "Chrome",
      bot: false,
      visitor: visitor.toString(16).padStart(16, "0"),
      ...over
    }
  }) satisfies ClickRecorded

const toRecord = (e: ClickRecorded): OutgoingRecord => ({ key: e.data.link_id, value: JSON.stringify(e) })

const dayQuery = (linkId: string, dimensions: ReadonlyArray<Dimension> = Dimensions): AnalyticsQuery => ({
  linkId,
  from: iso("2024-05-01T00:00:00Z"),
  to: iso("2024-05-03T00:00:00Z"),
  granularity: "day",
  dimensions
})

// After every describe's own afterAll: the stores are closed by then.
afterAll(removeTestChdbDir)

for (const engine of engines) {
  describe.skipIf(!engine.available)(`analytics on ${engine.name}`, () => {
    const databases: Array<string> = []
    const runtimes: Array<{ dispose: () => Promise<void> }> = []
    let databaseUrl: string

    beforeAll(async () => {
      databaseUrl = await createTestDatabase()
    })
    afterAll(async () => {
      for (const rt of runtimes.reverse()) await rt.dispose()
      for (const db of databases) await engine.dropDatabase(db)
      await dropTestDatabase(databaseUrl)
    })

    /** A store in a database of its own. */
    const store = async () => {
      const database = uniqueDatabase("a")
      databases.push(database)
      const rt = ManagedRuntime.make(engine.layer(database).pipe(Layer.provide(quiet)))
      runtimes.push(rt)
      return { rt, database, analytics: await rt.runPromise(Analytics) }
    }

    it("counts known batches exactly: totals, day and hour series, breakdowns, bots apart, other links apart", async () => {
      const { rt, analytics } = await store()
      const run = <A, E>(e: Effect.Effect<A, E>) => rt.runPromise(e)
      await run(analytics.insertBatch({ partition: 0, upTo: 7, rows: knownRows.a0 }))
      await run(analytics.insertBatch({ partition: 3, upTo: 6, rows: knownRows.b0 }))
      await run(analytics.insertBatch({ partition: 0, upTo: 10, rows: knownRows.a1 }))
      await run(analytics.insertBatch({ partition: 0, upTo: 16, rows: knownRows.a2 }))

      const day = await run(analytics.query(dayQuery("link_a")))
      expect(day.clicks).toBe(14)
      expect(day.uniqueVisitors).toBe(10)
      expect(day.botClicks).toBe(3)
      expect(day.series).toEqual([
        { start: iso("2024-05-01T00:00:00Z"), clicks: 9, uniqueVisitors: 5 },
        { start: iso("2024-05-02T00:00:00Z"), clicks: 5, uniqueVisitors: 5 }
      ])
      const sorted = (d: Dimension) =>
        [...(day.breakdowns[d] ?? [])].sort((x, y) => (x.value < y.value ? -1 : x.value > y.value ? 1 : 0))
      expect(sorted("country")).toEqual([
        { value: "", clicks: 3 },
        { value: "DE", clicks: 5 },
        { value: "FR", clicks: 1 },
        { value: "US", clicks: 5 }
      ])
      expect(sorted("referrer")).toEqual([
        { value: "", clicks: 4 },
        { value: "news.example", clicks: 5 },
        { value: "search.example", clicks: 5 }
      ])
      expect(sorted("device")).toEqual([
        { value: "desktop", clicks: 3 },
        { value: "mobile", clicks: 6 },
        { value: "tablet", clicks: 5 }
      ])
      // Googlebot's clicks are bots: no browser breakdown shows them.
      expect(sorted("browser")).toEqual([
        { value: "Chrome", clicks: 6 },
        { value: "Firefox", clicks: 3 },
        { value: "Safari", clicks: 5 }
      ])

      const report = toReport(dayQuery("link_a"), day)
      expect(report.breakdowns).toEqual({
        country: [
          { value: "DE", clicks: 5 },
          { value: "US", clicks: 5 },
          { value: "other", clicks: 4 }
        ],
        referrer: [
          { value: "news.example", clicks: 5 },
          { value: "search.example", clicks: 5 },
          { value: "other", clicks: 4 }
        ],
        device: [
          { value: "mobile", clicks: 6 },
          { value: "tablet", clicks: 5 },
          { value: "other", clicks: 3 }
        ],
        browser: [
          { value: "Chrome", clicks: 6 },
          { value: "Safari", clicks: 5 },
          { value: "other", clicks: 3 }
        ]
      })

      const hours = await run(
        analytics.query({ ...dayQuery("link_a", []), from: H0, to: H1 + 3600, granularity: "hour" })
      )
      expect(hours.series).toEqual([
        { start: H0, clicks: 6, uniqueVisitors: 3 },
        { start: H1, clicks: 3, uniqueVisitors: 3 }
      ])
      expect(hours.breakdowns).toEqual({})
      expect(await run(analytics.query(dayQuery("link_b")))).toMatchObject({
        clicks: 7,
        uniqueVisitors: 7,
        botClicks: 0
      })
      expect(await run(analytics.watermarks())).toEqual(
        new Map([
          [0, 16],
          [3, 6]
        ])
      )
    })

    it("breaks down partial days exactly: hour rows at the ends of the range, day rows between", async () => {
      const { rt, analytics } = await store()
      const at = (s: string) => iso(s)
      const rows = [
        row("link_p", at("2024-04-30T09:00:00Z"), 1, { country: "AA" }), // before the range
        row("link_p", at("2024-04-30T12:00:00Z"), 2, { country: "BB" }), // partial first day
        row("link_p", at("2024-05-01T03:00:00Z"), 3, { country: "CC" }), // whole day
        row("link_p", at("2024-05-01T23:00:00Z"), 4, { country: "CC" }), // whole day
        row("link_p", at("2024-05-02T09:00:00Z"), 5, { country: "DD" }), // partial last day
        row("link_p", at("2024-05-02T10:00:00Z"), 6, { country: "EE" }) // at `to`: out
      ]
      await rt.runPromise(analytics.insertBatch({ partition: 1, upTo: 5, rows }))
      const q = (from: string, to: string) =>
        rt.runPromise(
          analytics.query({
            linkId: "link_p",
            from: at(from),
            to: at(to),
            granularity: "hour",
            dimensions: ["country"]
          })
        )
      const countries = (r: { breakdowns: { country?: ReadonlyArray<{ value: string; clicks: number }> } }) =>
        Object.fromEntries((r.breakdowns.country ?? []).map((v) => [v.value, v.clicks]))
      const wide = await q("2024-04-30T12:00:00Z", "2024-05-02T10:00:00Z")
      expect(wide.clicks).toBe(4)
      expect(countries(wide)).toEqual({ BB: 1, CC: 2, DD: 1 })
      const inside = await q("2024-05-01T03:00:00Z", "2024-05-01T23:00:00Z")
      expect(countries(inside)).toEqual({ CC: 1 })
      const days = await q("2024-05-01T00:00:00Z", "2024-05-03T00:00:00Z")
      expect(countries(days)).toEqual({ CC: 2, DD: 1, EE: 1 })
    })

    it("counts only clicks inside [from, to): the hour before and the hour at `to` are out", async () => {
      const { rt, analytics } = await store()
      await rt.runPromise(
        analytics.insertBatch({
          partition: 1,
          upTo: 2,
          rows: [row("link_r", H0 - 3600, 1), row("link_r", H0, 2), row("link_r", H0 + 3600, 3)]
        })
      )
      const q = { ...dayQuery("link_r", []), from: H0, to: H0 + 3600, granularity: "hour" as const }
      expect(await rt.runPromise(analytics.query(q))).toMatchObject({ clicks: 1, series: [{ start: H0, clicks: 1 }] })
      expect(await rt.runPromise(analytics.query({ ...q, linkId: "link_none" }))).toMatchObject({
        clicks: 0,
        uniqueVisitors: 0,
        botClicks: 0,
        series: []
      })
    })

    it("keeps odd values as data, never as SQL: quotes, backslashes, tabs and line breaks in values round-trip", async () => {
      const { rt, analytics } = await store()
      const browser = "x'); DROP TABLE clicks_rollup; --\\\t\\t\n\r\"}"
      await rt.runPromise(
        analytics.insertBatch({ partition: 0, upTo: 4, rows: repeat(5, (i) => row("link_q", H0, i, { browser })) })
      )
      const result = await rt.runPromise(analytics.query(dayQuery("link_q", ["browser"])))
      expect(result.breakdowns.browser).toEqual([{ value: browser, clicks: 5 }])
    })

    it("counts a redelivered batch once, in the same projector and in a restarted one, and drops a producer's duplicate", async () => {
      const { rt, analytics } = await store()
      const events = Array.from({ length: 6 }, (_, i) => clickEvent(`evt_${i}`, "link_d", i, "2024-05-01T10:30:00Z"))
      const batch = (offsets: ReadonlyArray<number>, evts: ReadonlyArray<ClickRecorded>): Batch<ClickRecorded> => ({
        topic: "clicks.v1",
        partition: 5,
        events: evts.map((event, i) => ({
          event,
          record: { topic: "clicks.v1", partition: 5, offset: offsets[i]!, key: "link_d", value: "", timestamp: 0 }
        })),
        lastOffset: offsets.at(-1)!
      })
      const first = batch([0, 1, 2, 3], events.slice(0, 4))
      const handler = await rt.runPromise(makeClickHandler)
      await rt.runPromise(handler(first))
      await rt.runPromise(handler(first)) // redelivered: offsets not committed
      const restarted = await rt.runPromise(makeClickHandler)
      await rt.runPromise(restarted(first))
      // The producer retried: evt_3 is written again at offset 4, then evt_4 and evt_5 follow.
      await rt.runPromise(restarted(batch([4, 5, 6], [events[3]!, events[4]!, events[5]!])))
      const result = await rt.runPromise(analytics.query(dayQuery("link_d", [])))
      expect(result.clicks).toBe(6)
      expect(result.uniqueVisitors).toBe(6)
      expect((await rt.runPromise(analytics.watermarks())).get(5)).toBe(6)
    })

    describe("with the embedded event log", () => {
      const logRuntime = (layer: Layer.Layer<Analytics>) => {
        const rt = ManagedRuntime.make(
          Layer.merge(embeddedEventLogLayer(databaseUrl), layer).pipe(Layer.provide(quiet))
        )
        runtimes.push(rt)
        return rt
      }

      /** Whether the rollup accounts for every message of the topic. */
      const caughtUp = async (
        rt: ManagedRuntime.ManagedRuntime<EventLog | Analytics, unknown>,
        topic: string
      ): Promise<boolean> => {
        const [ends, marks] = await rt.runPromise(
          Effect.all([
            Effect.flatMap(EventLog, (l) => l.endOffsets(topic)),
            Effect.flatMap(Analytics, (a) => a.watermarks())
          ])
        )
        return ends.every((e) => e.offset === 0 || marks.get(e.partition) === e.offset - 1)
      }

      it("counts exactly after a consumer is killed between its insert and its offset commit", async () => {
        const database = uniqueDatabase("a")
        databases.push(database)
        const rt = logRuntime(engine.layer(database) as Layer.Layer<Analytics>)
        const topic = uniqueTopic("clicks")
        const group = "analytics-projector"
        const events = Array.from({ length: 40 }, (_, i) =>
          clickEvent(`k_${i}`, `link_k${i % 4}`, i, "2024-05-01T10:00:00Z", { bot: i % 10 === 0 })
        )
        // Batches of 3 clicks (of up to 3 links), as a redirector's flushes would publish them.
        const records = Array.from({ length: Math.ceil(events.length / 3) }, (_, k) =>
          toBatchRecords(events.slice(k * 3, k * 3 + 3), ([3, 2, 1] as const)[k % 3])
        ).flat()
        await rt.runPromise(Effect.flatMap(EventLog, (l) => l.publish(topic, records)))

        // First member: its first batch is inserted, then it dies before the offset moves.
        const inserted = await rt.runPromise(Deferred.make<Batch<ClickEvent>>())
        const scopeA = await rt.runPromise(Scope.make())
        const handlerA = await rt.runPromise(makeClickHandler)
        await rt.runPromise(
          Scope.extend(
            Effect.flatMap(EventLog, (l) =>
              l.subscribe({ group, topic }, ClickEventWire, (b) =>
                handlerA(b).pipe(Effect.zipRight(Deferred.succeed(inserted, b)), Effect.zipRight(Effect.never))
              )
            ),
            scopeA
          )
        )
        const killed = await rt.runPromise(Deferred.await(inserted))
        expect((await rt.runPromise(Effect.flatMap(Analytics, (a) => a.watermarks()))).get(killed.partition)).toBe(
          killed.lastOffset
        )
        await rt.runPromise(Scope.close(scopeA, Exit.void))

        // The restarted member gets the same batch again (the offset never moved) and adds nothing for it.
        const redelivered: Array<Batch<ClickEvent>> = []
        const scopeB = await rt.runPromise(Scope.make())
        const handlerB = await rt.runPromise(makeClickHandler)
        await rt.runPromise(
          Scope.extend(
            Effect.flatMap(EventLog, (l) =>
              l.subscribe({ group, topic }, ClickEventWire, (b) =>
                Effect.sync(() => redelivered.push(b)).pipe(Effect.zipRight(handlerB(b)))
              )
            ),
            scopeB
          )
        )
        // The killed batch's partition is caught up in the store already (its insert landed):
        // wait for the redelivery itself too, not only for the other partitions.
        const redeliveredKilled = () =>
          redelivered.some(
            (b) =>
              b.partition === killed.partition &&
              b.events.some((e) => e.record.offset === killed.events[0]!.record.offset)
          )
        await waitFor(redeliveredKilled, { message: "the killed batch to be delivered again" })
        await waitFor(() => caughtUp(rt, topic), { message: "the projector to catch up" })
        await rt.runPromise(Scope.close(scopeB, Exit.void))
        expect(redeliveredKilled()).toBe(true)
        for (let l = 0; l < 4; l++) {
          const mine = events.filter((e) => e.data.link_id === `link_k${l}`)
          const result = await rt.runPromise(Effect.flatMap(Analytics, (a) => a.query(dayQuery(`link_k${l}`, []))))
          expect(result.clicks).toBe(mine.filter((e) => !e.data.bot).length)
          expect(result.botClicks).toBe(mine.filter((e) => e.data.bot).length)
        }
      })

      it("counts exactly when the analytics store goes away during a stream of clicks and comes back", async () => {
        const database = uniqueDatabase("a")
        databases.push(database)
        const store = await engine.disruptible(database)
        const rt = logRuntime(store.layer)
        runtimes.push({ dispose: store.close })
        const topic = uniqueTopic("clicks")
        const scope = await rt.runPromise(Scope.make())
        const handler = await rt.runPromise(makeClickHandler)
        let failures = 0
        await rt.runPromise(
          Scope.extend(
            Effect.flatMap(EventLog, (l) =>
              l.subscribe({ group: "analytics-projector", topic }, ClickEventWire, (b) =>
                handler(b).pipe(Effect.tapError(() => Effect.sync(() => failures++)))
              )
            ),
            scope
          )
        )
        const events = Array.from({ length: 300 }, (_, i) =>
          clickEvent(`s_${i}`, `link_s${i % 5}`, i % 37, "2024-05-01T10:00:00Z", {
            bot: i % 11 === 0,
            country: i % 3 === 0 ? "FR" : "DE"
          })
        )
        // Mostly clicks.recorded batches, every third round legacy click.recorded events: a
        // topic written before and after the batched events holds both.
        const publish = (from: number, to: number) =>
          rt.runPromise(
            Effect.flatMap(EventLog, (l) =>
              l.publish(
                topic,
                (from / 10) % 3 === 0 ? events.slice(from, to).map(toRecord) : toBatchRecords(events.slice(from, to))
              )
            )
          )
        // Paced on purpose (15 ms between publishes): a stream, not one burst.
        const pace = () => new Promise((r) => setTimeout(r, 15))
        for (let i = 0; i < 100; i += 10) {
          await publish(i, i + 10)
          await pace()
        }
        await store.stop()
        for (let i = 100; i < 200; i += 10) {
          await publish(i, i + 10)
          await pace()
        }
        // The store comes back only once an insert has failed while it was away.
        await waitFor(() => failures > 0, { message: "an insert to fail while the store is away" })
        await store.start()
        for (let i = 200; i < 300; i += 10) {
          await publish(i, i + 10)
          await pace()
        }
        await waitFor(() => caughtUp(rt, topic), { message: "the projector to catch up" })
        await rt.runPromise(Scope.close(scope, Exit.void))
        expect(failures, "inserts failed while the store was away").toBeGreaterThan(0)
        for (let l = 0; l < 5; l++) {
          const mine = events.filter((e) => e.data.link_id === `link_s${l}`)
          const human = mine.filter((e) => !e.data.bot)
          const result = await rt.runPromise(Effect.flatMap(Analytics, (a) => a.query(dayQuery(`link_s${l}`))))
          expect(result.clicks, `link_s${l}`).toBe(human.length)
          expect(result.botClicks, `link_s${l}`).toBe(mine.length - human.length)
          expect(result.uniqueVisitors, `link_s${l}`).toBe(new Set(human.map((e) => e.data.visitor)).size)
          expect(
            [...(result.breakdowns.country ?? [])].sort((a, b) => a.value.localeCompare(b.value)),
            `link_s${l}`
          ).toEqual(
            ["DE", "FR"]
              .map((c) => ({ value: c, clicks: human.filter((e) => e.data.country === c).length }))
              .filter((c) => c.clicks > 0)
          )
        }
      })
    })
  })
}
