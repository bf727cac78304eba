import { execFile, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect, Exit, Layer, Logger, LogLevel, ManagedRuntime, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { runClickProjector } from "../../apps/workers/ClickProjector.js"
import { replay, replayAnalytics } from "../../apps/workers/Replay.js"
import { Analytics, AnalyticsError, type AnalyticsQuery, Dimensions } from "../../domain/Analytics.js"
import { EventLog, type LogRecord, type OutgoingRecord } from "../../domain/EventLog.js"
import { ClickRecorded, Topics } from "../../domain/Events.js"
import { ChdbAnalyticsLive } from "../../infra/analytics/Chdb.js"
import { ClickHouseServerAnalyticsLive } from "../../infra/analytics/ClickHouseServer.js"
import { removeTestChdbDir, testChdbDir, testClickHouseUrl, uniqueDatabase } from "../support/api.js"
import { toBatchRecords } from "../support/clicks.js"
import { createTestDatabase, dropTestDatabase } from "../support/database.js"
import { embeddedEventLogLayer, uniqueTopic } from "../support/eventlog.js"
import { waitFor } from "../support/waitFor.js"

const quiet = Logger.minimumLogLevel(LogLevel.Error)
const iso = (s: string) => Date.parse(s) / 1000

const LINKS = ["link_r0", "link_r1", "link_r2", "link_r3"]
const COUNTRIES = ["DE", "FR", "US", null]
const BROWSERS = ["Chrome", "Firefox", "Safari", "Edge", "Lynx"]

const clickEvent = (i: number, prefix: string): ClickRecorded => ({
  id: `${prefix}_${i}`,
  type: "click.recorded",
  version: 1,
  occurred_at: new Date(Date.parse("2024-05-01T00:00:00Z") + i * 17 * 60_000).toISOString(),
  account_id: "acc_test",
  data: {
    link_id: LINKS[i % LINKS.length]!,
    country: COUNTRIES[i % COUNTRIES.length]!,
    referrer_host: i % 3 === 0 ? null : `ref${i % 7}.example`,
    device: (["desktop", "mobile", "tablet", "other"] as const)[i % 4]!,
    browser: BROWSERS[i % BROWSERS.length]!,
    bot: i % 13 === 0,
    visitor: (i % 29).toString(16).padStart(16, "0")
  }
})

const toRecord = (e: ClickRecorded): OutgoingRecord => ({ key: e.data.link_id, value: JSON.stringify(e) })

const queries = (linkId: string): ReadonlyArray<AnalyticsQuery> => [
  {
    linkId,
    from: iso("2024-04-30T00:00:00Z"),
    to: iso("2024-05-04T00:00:00Z"),
    granularity: "day",
    dimensions: Dimensions
  },
  { linkId, from: iso("2024-05-01T00:00:00Z"), to: iso("2024-05-02T00:00:00Z"), granularity: "hour", dimensions: [] }
]

const sortBreakdowns = <T extends { breakdowns: Record<string, ReadonlyArray<{ value: string }> | undefined> }>(
  a: T
) => ({
  ...a,
  breakdowns: Object.fromEntries(
    Object.entries(a.breakdowns).map(([d, rows]) => [
      d,
      [...(rows ?? [])].sort((x, y) => x.value.localeCompare(y.value))
    ])
  )
})

interface Engine {
  readonly name: string
  readonly available: boolean
  readonly layer: (database: string) => Layer.Layer<Analytics, unknown>
  readonly dropDatabase: (database: string) => Promise<void>
}

const serverUrl = testClickHouseUrl()
const engines: ReadonlyArray<Engine> = [
  {
    name: "chDB (embedded, in-process)",
    available: true,
    layer: (database) => ChdbAnalyticsLive(testChdbDir(), database),
    dropDatabase: async () => {}
  },
  {
    name: "ClickHouse server (needs TEST_CLICKHOUSE_URL)",
    available: serverUrl !== undefined,
    layer: (database) => ClickHouseServerAnalyticsLive(serverUrl!, database),
    dropDatabase: async (database) => {
      await fetch(`${new URL(serverUrl!).origin}/`, { method: "POST", body: `DROP DATABASE IF EXISTS ${database}` })
    }
  }
]

let databaseUrl: string
beforeAll(async () => {
  databaseUrl = await createTestDatabase()
})
afterAll(async () => {
  await dropTestDatabase(databaseUrl)
  removeTestChdbDir()
})

for (const engine of engines) {
  describe.skipIf(!engine.available)(`replay into analytics on ${engine.name}`, () => {
    const database = uniqueDatabase("r")
    let rt: ManagedRuntime.ManagedRuntime<EventLog | Analytics, unknown>
    const run = <A, E>(e: Effect.Effect<A, E, EventLog | Analytics>) => rt.runPromise(e)

    beforeAll(() => {
      rt = ManagedRuntime.make(
        Layer.merge(embeddedEventLogLayer(databaseUrl), engine.layer(database)).pipe(Layer.provide(quiet))
      )
    })
    afterAll(async () => {
      await rt.dispose()
      await engine.dropDatabase(database)
    })

    const aggregates = () =>
      run(
        Effect.flatMap(Analytics, (a) =>
          Effect.forEach(LINKS.flatMap(queries), (q) => Effect.map(a.query(q), sortBreakdowns))
        )
      )

    const project = async (topic: string) => {
      const scope = await run(Scope.make())
      await run(Scope.extend(runClickProjector({ topic, group: `g_${topic}` }), scope))
      await waitFor(
        async () => {
          const [ends, marks] = await run(
            Effect.all([
              Effect.flatMap(EventLog, (l) => l.endOffsets(topic)),
              Effect.flatMap(Analytics, (a) => a.watermarks())
            ])
          )
          return ends.every((e) => e.offset === 0 || marks.get(e.partition) === e.offset - 1)
        },
        { message: "the projector to catch up" }
      )
      await run(Scope.close(scope, Exit.void))
    }

    const readAll = (topic: string) =>
      run(
        Effect.gen(function* () {
          const records: Array<LogRecord & { readonly event: ClickRecorded }> = []
          yield* Effect.flatMap(EventLog, (l) =>
            l.read({ topic, startAt: { _tag: "Beginning" } }, ClickRecorded, (b) =>
              Effect.sync(() => {
                for (const e of b.events) records.push({ ...e.record, event: e.event })
              })
            )
          )
          return records
        })
      )

    it("rebuilds identical aggregates from the beginning after the tables are dropped", async () => {
      const topic = uniqueTopic("clicks")
      const events = Array.from({ length: 240 }, (_, i) => clickEvent(i, topic))
      // Legacy single-click events first, then batches as redirectors publish them (both versions).
      const batched = Array.from({ length: 15 }, (_, k) =>
        toBatchRecords(events.slice(120 + k * 8, 128 + k * 8), ([3, 2, 1] as const)[k % 3])
      ).flat()
      // Producer retries: ten single events and three batch events written a second time.
      const records = [
        ...events.slice(0, 120).map(toRecord),
        ...events.slice(100, 110).map(toRecord),
        ...batched,
        ...batched.slice(3, 6)
      ]
      await run(Effect.flatMap(EventLog, (l) => l.publish(topic, records)))
      await project(topic)
      const projected = await aggregates()
      expect(projected[0]!.clicks + projected[0]!.botClicks).toBe(60)

      await run(Effect.flatMap(Analytics, (a) => a.reset()))
      expect((await aggregates()).every((a) => a.clicks === 0 && a.botClicks === 0)).toBe(true)

      const result = await run(replayAnalytics({ _tag: "Beginning" }, topic))
      expect(result.events).toBe(records.length)
      expect(result.ends).toEqual(await run(Effect.flatMap(EventLog, (l) => l.endOffsets(topic))))
      expect(await aggregates()).toEqual(projected)
    })

    it("replays from a time or an offset: only the clicks from there on count", async () => {
      const topic = uniqueTopic("clicks")
      const events = Array.from({ length: 120 }, (_, i) => clickEvent(i, topic))
      await run(Effect.flatMap(EventLog, (l) => l.publish(topic, events.slice(0, 80).map(toRecord))))
      // A time after the first 80 records' own timestamps; the other 40 are published once the
      // clock has passed it.
      const firstAt = Math.max(...(await readAll(topic)).map((r) => r.timestamp))
      const between = new Date(Math.floor(firstAt) + 1)
      await waitFor(() => Date.now() > between.getTime() + 1, { message: "the clock to pass the time in between" })
      await run(Effect.flatMap(EventLog, (l) => l.publish(topic, events.slice(80).map(toRecord))))
      const total = async () => {
        const all = await aggregates()
        return all.filter((_, i) => i % 2 === 0).reduce((s, a) => s + a.clicks + a.botClicks, 0)
      }

      await run(replayAnalytics({ _tag: "Time", time: between }, topic))
      expect(await total()).toBe(40)

      const records = await readAll(topic)
      await run(replayAnalytics({ _tag: "Offset", offset: 10 }, topic))
      expect(await total()).toBe(records.filter((r) => r.offset >= 10).length)
      expect(records.filter((r) => r.offset >= 10).length).toBeLessThan(120)
    })

    it("keeps the live aggregates when a rebuild fails half-way", async () => {
      const topic = uniqueTopic("clicks")
      await run(
        Effect.flatMap(EventLog, (l) =>
          l.publish(
            topic,
            Array.from({ length: 30 }, (_, i) => toRecord(clickEvent(i, topic)))
          )
        )
      )
      await run(replayAnalytics({ _tag: "Beginning" }, topic))
      const before = await aggregates()
      const failed = await run(
        Effect.flatMap(Analytics, (a) =>
          a.rebuild((writer) =>
            writer
              .insertBatch({ partition: 0, upTo: 0, rows: [] })
              .pipe(Effect.zipRight(Effect.fail(new AnalyticsError({ message: "stop here" }))))
          )
        ).pipe(Effect.flip)
      )
      expect(failed.message).toBe("stop here")
      expect(await aggregates()).toEqual(before)
    })

    it("refuses a projection it does not know and a topic the projection is not built from", async () => {
      const unknown = await run(
        Effect.flip(replay({ topic: Topics.clicks, into: "links", startAt: { _tag: "Beginning" } }))
      )
      expect(unknown._tag).toBe("ReplayRefused")
      const wrongTopic = await run(
        Effect.flip(replay({ topic: Topics.links, into: "analytics", startAt: { _tag: "Beginning" } }))
      )
      expect(wrongTopic.message).toContain("built from clicks.v1")
    })
  })
}

describe("cli replay (embedded analytics store)", () => {
  const cli = (args: ReadonlyArray<string>, env: Record<string, string>) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        ["scripts/cli.mjs", ...args],
        { env: { ...process.env, KAFKA_BROKERS: "", CLICKHOUSE_URL: "", LOG_LEVEL: "warn", ...env }, timeout: 60_000 },
        (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr })
      )
    })

  let dataDir: string
  let cliDatabaseUrl: string
  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "shortlinks-replay-"))
    cliDatabaseUrl = await createTestDatabase()
    const rt = ManagedRuntime.make(embeddedEventLogLayer(cliDatabaseUrl).pipe(Layer.provide(quiet)))
    await rt.runPromise(
      Effect.flatMap(EventLog, (l) =>
        l.publish(
          Topics.clicks,
          Array.from({ length: 25 }, (_, i) => toRecord(clickEvent(i, "cli")))
        )
      )
    )
    await rt.dispose()
  })
  afterAll(async () => {
    await dropTestDatabase(cliDatabaseUrl)
    fs.rmSync(dataDir, { recursive: true, force: true })
  })

  it("prints { topic, into, events, end_offsets } as one JSON line", async () => {
    const out = await cli(["replay", "--topic", "clicks.v1", "--into", "analytics", "--json"], {
      DATA_DIR: dataDir,
      DATABASE_URL: cliDatabaseUrl
    })
    expect(out.stderr).toBe("")
    expect(out.code).toBe(0)
    const lines = out.stdout.trim().split("\n")
    expect(lines).toHaveLength(1)
    const result = JSON.parse(lines[0]!)
    expect(result).toMatchObject({ topic: "clicks.v1", into: "analytics", events: 25 })
    expect(result.end_offsets.reduce((s: number, o: { offset: number }) => s + o.offset, 0)).toBe(25)
  }, 60_000)

  it("fails with one clear line while another process holds the embedded analytics store", async () => {
    const dir = path.join(dataDir, "clickhouse")
    // Another process (the running service) holds the directory.
    const holder = spawn(
      process.execPath,
      [
        "-e",
        `const { Session } = require("chdb"); const s = new Session(${JSON.stringify(dir)}); s.query("SELECT 1"); console.log("held"); setInterval(() => {}, 1000)`
      ],
      { stdio: ["ignore", "pipe", "inherit"] }
    )
    try {
      await new Promise<void>((resolve, reject) => {
        holder.stdout!.on("data", () => resolve())
        holder.on("exit", () => reject(new Error("the holder process ended")))
      })
      const out = await cli(["replay", "--topic", "clicks.v1", "--into", "analytics", "--json"], {
        DATA_DIR: dataDir,
        DATABASE_URL: cliDatabaseUrl
      })
      expect(out.code).toBe(1)
      expect(out.stdout).toBe("")
      const lines = out.stderr.trim().split("\n")
      expect(lines).toHaveLength(1)
      const error = JSON.parse(lines[0]!).error
      expect(error.code).toBe("chdb_directory_in_use")
      expect(error.message).toContain(`process ${holder.pid}`)
      expect(error.message).toContain("stop it first")
    } finally {
      holder.kill()
    }
  }, 60_000)
})
