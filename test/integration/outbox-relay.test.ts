import type { PgClient } from "@effect/sql-pg"
import { Effect, Exit, Layer, Logger, LogLevel, ManagedRuntime, Schema, Scope } from "effect"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Batch, EventLog, EventLogError, type LogRecord } from "../../domain/EventLog.js"
import { Outbox } from "../../domain/ports/Outbox.js"
import { OutboxLive } from "../../infra/postgres/Outbox.js"
import { OutboxRelayLive } from "../../infra/postgres/OutboxRelay.js"
import { createTestDatabase, dropTestDatabase } from "../support/database.js"
import { embeddedEventLogLayer, uniqueTopic } from "../support/eventlog.js"
import { waitFor } from "../support/waitFor.js"

const Event = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("test.happened"),
  account_id: Schema.String,
  data: Schema.Struct({ key: Schema.String, n: Schema.Number })
})
type Event = typeof Event.Type

let databaseUrl: string
let db: pg.Client
/** The real embedded log plus the outbox writer, without a relay. */
let base: ManagedRuntime.ManagedRuntime<EventLog | Outbox | PgClient.PgClient, unknown>

const quiet = Logger.minimumLogLevel(LogLevel.Error)

/** Starts a relay (over its own pool) until the returned stop is called. */
const startRelay = async (eventLog?: Layer.Layer<EventLog, unknown, EventLog>) => {
  const relay = eventLog === undefined ? OutboxRelayLive : OutboxRelayLive.pipe(Layer.provide(eventLog))
  const rt = ManagedRuntime.make(relay.pipe(Layer.provide(embeddedEventLogLayer(databaseUrl)), Layer.provide(quiet)))
  await rt.runtime()
  return { stop: () => rt.dispose() }
}

const append = (topic: string, key: string, n: number) =>
  base.runPromise(Effect.flatMap(Outbox, (o) => o.append(topic, key, "test.happened", "acct_test", { key, n })))

/** A follower of `topic` from its beginning, collecting events in arrival order. */
const follow = async (topic: string) => {
  const seen: Array<{ event: Event; record: LogRecord; at: number }> = []
  const scope = await base.runPromise(Scope.make())
  await base.runPromise(
    Scope.extend(
      Effect.flatMap(EventLog, (l) =>
        l.follow({ topic, startAt: { _tag: "Beginning" } }, Event, (b: Batch<Event>) =>
          Effect.sync(() => {
            const at = performance.now()
            for (const e of b.events) seen.push({ ...e, at })
          })
        )
      ),
      scope
    )
  )
  return { seen, stop: () => base.runPromise(Scope.close(scope, Exit.void)) }
}

const unpublished = async (topic: string) =>
  Number(
    (await db.query("SELECT count(*) AS n FROM outbox WHERE topic = $1 AND published_at IS NULL", [topic])).rows[0].n
  )

beforeAll(async () => {
  databaseUrl = await createTestDatabase()
  base = ManagedRuntime.make(
    OutboxLive.pipe(Layer.provideMerge(embeddedEventLogLayer(databaseUrl)), Layer.provide(quiet))
  )
  await base.runtime()
  db = new pg.Client({ connectionString: databaseUrl })
  await db.connect()
})
afterAll(async () => {
  await db?.end()
  await base?.dispose()
  await dropTestDatabase(databaseUrl)
})

describe("outbox relay (embedded log)", () => {
  it("outbox rows reach the log in seq order per key and are marked published", async () => {
    const topic = uniqueTopic("outbox")
    const relay = await startRelay()
    const f = await follow(topic)
    for (let n = 0; n < 60; n++) await append(topic, `link_${n % 5}`, n)
    await waitFor(() => f.seen.length >= 60, { message: "60 events" })
    await waitFor(async () => (await unpublished(topic)) === 0, { message: "all marked published" })
    await f.stop()
    await relay.stop()
    expect(f.seen).toHaveLength(60)
    for (let k = 0; k < 5; k++) {
      const own = f.seen.filter((s) => s.record.key === `link_${k}`).map((s) => s.event.data.n)
      expect(own).toEqual([...own].sort((a, b) => a - b))
      expect(own).toHaveLength(12)
    }
    // The value is the event column as JSON, keyed by the key column.
    const row = (await db.query("SELECT key, event FROM outbox WHERE topic = $1 ORDER BY seq LIMIT 1", [topic])).rows[0]
    const first = f.seen.find((s) => s.event.id === row.event.id)!
    expect(first.record.key).toBe(row.key)
    expect(JSON.parse(first.record.value)).toEqual(row.event)
  })

  it("a publish failure keeps the rows unpublished, and they go out in order once publishing works again", async () => {
    const topic = uniqueTopic("outbox")
    let failing = true
    let attempts = 0
    // The real log, with publishing switched off for a while.
    const flaky = Layer.effect(
      EventLog,
      Effect.map(EventLog, (real) =>
        EventLog.of({
          ...real,
          publish: (t, records) =>
            Effect.suspend(() => {
              attempts++
              return failing
                ? Effect.fail(new EventLogError({ message: "broker down (test)" }))
                : real.publish(t, records)
            })
        })
      )
    )
    const relay = await startRelay(flaky)
    for (let n = 0; n < 10; n++) await append(topic, "link_a", n)
    await waitFor(() => attempts >= 2, { message: "a failed attempt" })
    expect(await unpublished(topic)).toBe(10)
    expect(
      (await base.runPromise(Effect.flatMap(EventLog, (l) => l.endOffsets(topic)))).every((o) => o.offset === 0)
    ).toBe(true)
    failing = false
    const f = await follow(topic)
    await waitFor(() => f.seen.length >= 10, { message: "10 events" })
    await waitFor(async () => (await unpublished(topic)) === 0, { message: "all marked published" })
    await f.stop()
    await relay.stop()
    expect(f.seen.map((s) => s.event.data.n)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
  })

  it("two relays running at once never publish out of order, nor twice", async () => {
    const topic = uniqueTopic("outbox")
    const a = await startRelay()
    const b = await startRelay()
    const f = await follow(topic)
    // Concurrent writers, each appending its own key in order.
    await Promise.all(
      Array.from({ length: 4 }, async (_, w) => {
        for (let n = 0; n < 40; n++) await append(topic, `link_w${w}`, n)
      })
    )
    await waitFor(() => f.seen.length >= 160, { message: "160 events" })
    await waitFor(async () => (await unpublished(topic)) === 0, { message: "all marked published" })
    await f.stop()
    await a.stop()
    await b.stop()
    expect(new Set(f.seen.map((s) => s.event.id)).size).toBe(160)
    expect(f.seen).toHaveLength(160)
    // Each writer's events are in the log in the order it wrote them.
    for (let w = 0; w < 4; w++) {
      const own = f.seen
        .filter((s) => s.record.key === `link_w${w}`)
        .sort((x, y) => x.record.offset - y.record.offset)
        .map((s) => s.event.data.n)
      expect(own).toEqual(Array.from({ length: 40 }, (_, n) => n))
    }
  })

  it("an outbox insert reaches a follower well under a second later", async () => {
    const topic = uniqueTopic("outbox")
    const relay = await startRelay()
    const f = await follow(topic)
    const latencies: Array<number> = []
    for (let n = 0; n < 10; n++) {
      const t0 = performance.now()
      await append(topic, "link_latency", n)
      await waitFor(() => f.seen.length > n, { message: `event ${n}` })
      latencies.push(f.seen[n]!.at - t0)
    }
    await f.stop()
    await relay.stop()
    const sorted = [...latencies].sort((x, y) => x - y)
    console.log(
      `outbox -> follower latency (embedded log, 10 inserts): min ${sorted[0]!.toFixed(1)} ms, median ${sorted[5]!.toFixed(1)} ms, max ${sorted[9]!.toFixed(1)} ms`
    )
    expect(sorted[5]!).toBeLessThan(1000)
  })

  it("the relay purges rows published more than 7 days ago and keeps the rest", async () => {
    const topic = uniqueTopic("outbox")
    await db.query(
      `INSERT INTO outbox (topic, key, event, published_at) VALUES
         ($1, 'old', '{"n": 1}', now() - interval '7 days 1 hour'),
         ($1, 'recent', '{"n": 2}', now() - interval '6 days 23 hours')`,
      [topic]
    )
    const relay = await startRelay()
    await waitFor(
      async () =>
        (await db.query("SELECT count(*) AS n FROM outbox WHERE topic = $1 AND key = 'old'", [topic])).rows[0].n ===
        "0",
      { message: "the purge" }
    )
    await relay.stop()
    const left = (await db.query("SELECT key FROM outbox WHERE topic = $1", [topic])).rows.map((r) => r.key)
    expect(left).toEqual(["recent"])
  })
})
