import { Deferred, Effect, Exit, Layer, Logger, LogLevel, ManagedRuntime, Metric, Schema, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  type Batch,
  deadLetterTopic,
  EventLog,
  type LogRecord,
  type OutgoingRecord,
  type PartitionOffset
} from "../../domain/EventLog.js"
import { consumerLag } from "../../infra/eventlog/Shared.js"
import { createTestDatabase, dropTestDatabase } from "../support/database.js"
import { embeddedEventLogLayer, kafkaEventLogLayer, testKafkaBrokers, uniqueTopic } from "../support/eventlog.js"
import { waitFor } from "../support/waitFor.js"

const Msg = Schema.Struct({ id: Schema.String, n: Schema.Number })
type Msg = typeof Msg.Type

const msg = (key: string, id: string, n = 0): OutgoingRecord => ({ key, value: JSON.stringify({ id, n }) })

/** `count` messages spread over `keys` keys, ids `${prefix}-${i}`, key of message i = `k${i % keys}`. */
const messages = (prefix: string, count: number, keys = 16): Array<OutgoingRecord> =>
  Array.from({ length: count }, (_, i) => msg(`${prefix}-k${i % keys}`, `${prefix}-${i}`, i))

const total = (offsets: ReadonlyArray<PartitionOffset>) => offsets.reduce((s, o) => s + o.offset, 0)

type Runtime = ManagedRuntime.ManagedRuntime<EventLog, unknown>

interface Setup {
  readonly layer: Layer.Layer<EventLog, unknown>
  readonly teardown: () => Promise<void>
}

/** The contract of the EventLog port, run against each adapter. */
const eventLogSuite = (name: string, setup: () => Promise<Setup>) =>
  describe(name, () => {
    let s: Setup
    let rt: Runtime
    const runtimes: Array<Runtime> = []
    const newRuntime = () => {
      const r = ManagedRuntime.make(s.layer.pipe(Layer.provide(Logger.minimumLogLevel(LogLevel.Error))))
      runtimes.push(r)
      return r
    }
    const run = <A, E>(effect: Effect.Effect<A, E, EventLog>) => rt.runPromise(effect)
    const log = () => rt.runPromise(EventLog)

    /** Starts a scoped consumer (subscribe/follow) and hands back its scope, to stop it. */
    const start = async (r: Runtime, consumer: Effect.Effect<void, unknown, EventLog | Scope.Scope>) => {
      const scope = await r.runPromise(Scope.make())
      await r.runPromise(Scope.extend(consumer, scope))
      return { stop: () => r.runPromise(Scope.close(scope, Exit.void)) }
    }

    const readAll = async (topic: string, startAt: Parameters<EventLog["Type"]["read"]>[0]["startAt"]) => {
      const records: Array<LogRecord & { event: Msg }> = []
      const ends = await run(
        Effect.flatMap(EventLog, (l) =>
          l.read({ topic, startAt }, Msg, (batch) =>
            Effect.sync(() => {
              for (const e of batch.events) records.push({ ...e.record, event: e.event })
            })
          )
        )
      )
      return { records, ends }
    }

    beforeAll(async () => {
      s = await setup()
      rt = newRuntime()
      await rt.runPromise(EventLog)
    })
    afterAll(async () => {
      for (const r of runtimes) await r.dispose()
      await s?.teardown()
    })

    it("the adapter says which log it is", async () => {
      expect(["kafka", "embedded"]).toContain((await log()).kind)
    })

    it("endOffsets: 8 partitions at 0 for a new topic, then the count written to each", async () => {
      const topic = uniqueTopic()
      const l = await log()
      const empty = await run(l.endOffsets(topic))
      expect(empty).toEqual(Array.from({ length: 8 }, (_, partition) => ({ partition, offset: 0 })))
      await run(l.publish(topic, messages("e", 40)))
      await run(l.publish(topic, messages("f", 10)))
      const ends = await run(l.endOffsets(topic))
      const { records } = await readAll(topic, { _tag: "Beginning" })
      expect(total(ends)).toBe(50)
      for (const { partition, offset } of ends) {
        expect(offset).toBe(records.filter((r) => r.partition === partition).length)
      }
    })

    it("messages of one key keep their order and always land in the same partition", async () => {
      const topic = uniqueTopic()
      const l = await log()
      // Several publishes, keys interleaved within and across them.
      for (let round = 0; round < 4; round++) {
        await run(
          l.publish(
            topic,
            Array.from({ length: 60 }, (_, i) => msg(`key-${i % 12}`, `r${round}-${i}`, round * 60 + i))
          )
        )
      }
      const { records } = await readAll(topic, { _tag: "Beginning" })
      expect(records).toHaveLength(240)
      const partitions = new Set(records.map((r) => r.partition))
      expect(partitions.size).toBeGreaterThan(1)
      for (let k = 0; k < 12; k++) {
        const own = records.filter((r) => r.key === `key-${k}`).sort((a, b) => a.offset - b.offset)
        expect(own).toHaveLength(20)
        expect(new Set(own.map((r) => r.partition)).size).toBe(1)
        const ns = own.map((r) => r.event.n)
        expect(ns).toEqual([...ns].sort((a, b) => a - b))
      }
      // Offsets within a partition are consecutive from 0.
      for (const p of partitions) {
        const offsets = records
          .filter((r) => r.partition === p)
          .map((r) => r.offset)
          .sort((a, b) => a - b)
        expect(offsets).toEqual(offsets.map((_, i) => i))
      }
    })

    it("a publish that succeeded is durable: another client reads it back with key, value and timestamp", async () => {
      const topic = uniqueTopic()
      const before = Date.now()
      await run(Effect.flatMap(EventLog, (l) => l.publish(topic, [msg("durable-key", "d1", 7)])))
      const other = newRuntime()
      const got: Array<{ event: Msg; record: LogRecord }> = []
      await other.runPromise(
        Effect.flatMap(EventLog, (l) =>
          l.read({ topic, startAt: { _tag: "Beginning" } }, Msg, (b) => Effect.sync(() => got.push(...b.events)))
        )
      )
      await other.dispose()
      expect(got).toHaveLength(1)
      expect(got[0]!.event).toEqual({ id: "d1", n: 7 })
      expect(got[0]!.record).toMatchObject({ topic, key: "durable-key", offset: 0, value: '{"id":"d1","n":7}' })
      expect(got[0]!.record.timestamp).toBeGreaterThanOrEqual(before - 1000)
      expect(got[0]!.record.timestamp).toBeLessThanOrEqual(Date.now() + 1000)
    })

    it("a group member's handler sees every message once, and the committed offsets survive a restart", async () => {
      const topic = uniqueTopic()
      const group = uniqueTopic("group")
      const l = await log()
      const seen = new Map<string, number>()
      const handler = (batch: Batch<Msg>) =>
        Effect.sync(() => {
          for (const { event } of batch.events) seen.set(event.id, (seen.get(event.id) ?? 0) + 1)
        })
      await run(l.publish(topic, messages("a", 100)))
      const member = await start(rt, l.subscribe({ group, topic }, Msg, handler))
      await run(l.publish(topic, messages("b", 100)))
      await waitFor(() => seen.size === 200, { message: "200 messages" })
      await member.stop()
      // A restarted member of the group goes on after the committed offsets.
      const again = await start(rt, l.subscribe({ group, topic }, Msg, handler))
      await run(l.publish(topic, messages("c", 20)))
      await waitFor(() => seen.size === 220, { message: "20 more" })
      await again.stop()
      expect([...seen.values()].every((n) => n === 1)).toBe(true)
    })

    it("the consumer lag gauge counts the records the group has not consumed, and comes back to 0", async () => {
      const topic = uniqueTopic()
      const group = uniqueTopic("group")
      const l = await log()
      const lag = consumerLag(group, topic)
      await run(l.publish(topic, messages("lag", 200)))
      // What /metrics would show as each batch arrives (small batches: several per partition).
      const seenByHandler: Array<number> = []
      const consumed = new Set<string>()
      const handler = (batch: Batch<Msg>) =>
        Effect.map(Metric.value(lag), (state) => {
          seenByHandler.push(state.value)
          for (const { event } of batch.events) consumed.add(event.id)
        })
      const member = await start(rt, l.subscribe({ group, topic, maxBatch: 10 }, Msg, handler))
      await waitFor(() => consumed.size === 200, { message: "200 messages" })
      // The embedded log sweeps every 500 ms at most when idle; Kafka sets it after each commit.
      await waitFor(async () => (await run(Metric.value(lag))).value === 0, { message: "the lag gauge at 0" })
      await member.stop()
      expect(Math.max(...seenByHandler)).toBeGreaterThan(0)
      expect(Math.max(...seenByHandler)).toBeLessThanOrEqual(200)
    })

    it("a handler failure redelivers the same messages and the offset does not move until it succeeds", async () => {
      const topic = uniqueTopic()
      const group = uniqueTopic("group")
      const l = await log()
      await run(
        l.publish(
          topic,
          Array.from({ length: 10 }, (_, i) => msg("one-key", `m${i}`, i))
        )
      )
      const attempts: Array<Array<string>> = []
      const done = new Set<string>()
      const member = await start(
        rt,
        l.subscribe({ group, topic }, Msg, (batch) =>
          Effect.suspend(() => {
            attempts.push(batch.events.map((e) => e.event.id))
            if (attempts.length <= 2) return Effect.fail("transient")
            for (const e of batch.events) done.add(e.event.id)
            return Effect.void
          })
        )
      )
      await waitFor(() => done.size === 10, { message: "all 10 handled" })
      await member.stop()
      expect(attempts.length).toBeGreaterThanOrEqual(3)
      // The failed batches came again from the same first message: the offset had not moved.
      expect(attempts[0]![0]).toBe("m0")
      expect(attempts[1]![0]).toBe("m0")
      expect(attempts[2]![0]).toBe("m0")
      // After success the offset moved: a new member of the group gets nothing old.
      const later: Array<string> = []
      const next = await start(
        rt,
        l.subscribe({ group, topic }, Msg, (b) => Effect.sync(() => later.push(...b.events.map((e) => e.event.id))))
      )
      await run(l.publish(topic, [msg("one-key", "m10", 10)]))
      await waitFor(() => later.includes("m10"), { message: "the new message" })
      await next.stop()
      expect(later).toEqual(["m10"])
    })

    it("a member killed after its side effect but before its commit gets the batch again on restart", async () => {
      const topic = uniqueTopic()
      const group = uniqueTopic("group")
      const l = await log()
      await run(
        l.publish(
          topic,
          Array.from({ length: 5 }, (_, i) => msg("k", `x${i}`, i))
        )
      )
      const sideEffects: Array<string> = []
      const reached = await run(Deferred.make<void>())
      const first = await start(
        rt,
        l.subscribe({ group, topic }, Msg, (batch) =>
          Effect.sync(() => sideEffects.push(...batch.events.map((e) => e.event.id))).pipe(
            Effect.zipRight(Deferred.succeed(reached, undefined)),
            // The process dies here: the side effect is done, the commit never happens.
            Effect.zipRight(Effect.never)
          )
        )
      )
      await run(Deferred.await(reached))
      await first.stop()
      expect(sideEffects).toEqual(["x0", "x1", "x2", "x3", "x4"])
      const redelivered: Array<string> = []
      const second = await start(
        rt,
        l.subscribe({ group, topic }, Msg, (b) =>
          Effect.sync(() => redelivered.push(...b.events.map((e) => e.event.id)))
        )
      )
      await waitFor(() => redelivered.length >= 5, { message: "the batch again" })
      await second.stop()
      expect(redelivered).toEqual(["x0", "x1", "x2", "x3", "x4"])
    })

    it("two members of one group split the partitions: together they see every message exactly once", async () => {
      const topic = uniqueTopic()
      const group = uniqueTopic("group")
      const l = await log()
      await run(l.endOffsets(topic)) // creates the topic before the members join
      const seenBy = [new Map<string, number>(), new Map<string, number>()]
      // Each member's first batch waits until the other member has one too: neither can take everything.
      const entered = [await run(Deferred.make<void>()), await run(Deferred.make<void>())]
      const member = (i: 0 | 1) =>
        l.subscribe({ group, topic }, Msg, (batch) =>
          Effect.gen(function* () {
            yield* Deferred.succeed(entered[i]!, undefined)
            yield* Deferred.await(entered[1 - i]!)
            for (const { event } of batch.events) seenBy[i]!.set(event.id, (seenBy[i]!.get(event.id) ?? 0) + 1)
          })
        )
      const a = await start(rt, member(0))
      const b = await start(rt, member(1))
      await run(l.publish(topic, messages("s", 400, 64)))
      await waitFor(() => seenBy[0]!.size + seenBy[1]!.size >= 400, { message: "all 400" })
      // A last message proves both are idle, not still redelivering.
      await run(l.publish(topic, [msg("s-k0", "sentinel")]))
      await waitFor(() => seenBy[0]!.has("sentinel") || seenBy[1]!.has("sentinel"), { message: "the sentinel" })
      await a.stop()
      await b.stop()
      expect(seenBy[0]!.size).toBeGreaterThan(0)
      expect(seenBy[1]!.size).toBeGreaterThan(0)
      const all = [...seenBy[0]!.entries(), ...seenBy[1]!.entries()]
      expect(all).toHaveLength(401)
      expect(all.every(([, n]) => n === 1)).toBe(true)
    })

    it("a poison message goes to <topic>.dlq with its key and value, and the consumer goes on", async () => {
      const topic = uniqueTopic()
      const group = uniqueTopic("group")
      const l = await log()
      const wrongShape = JSON.stringify({ id: "bad", n: "not a number" })
      await run(
        l.publish(topic, [
          msg("pk", "good-1"),
          { key: "pk", value: wrongShape },
          { key: "pk", value: "not json {" },
          msg("pk", "good-2")
        ])
      )
      const seen: Array<string> = []
      const member = await start(
        rt,
        l.subscribe({ group, topic }, Msg, (b) => Effect.sync(() => seen.push(...b.events.map((e) => e.event.id))))
      )
      await waitFor(() => seen.includes("good-2"), { message: "good-2" })
      await member.stop()
      expect(seen).toEqual(["good-1", "good-2"])
      const dlq = deadLetterTopic(topic)
      expect(dlq).toBe(`${topic}.dlq`)
      await waitFor(async () => total(await run(l.endOffsets(dlq))) >= 2, { message: "2 dead letters" })
      expect(total(await run(l.endOffsets(dlq)))).toBe(2)
      const letters: Array<LogRecord> = []
      await run(
        l.read({ topic: dlq, startAt: { _tag: "Beginning" } }, Schema.Unknown, (b) =>
          Effect.sync(() => letters.push(...b.events.map((e) => e.record)))
        )
      )
      // The non-JSON letter does not decode even as Unknown; the other comes back as published.
      expect(letters.map((r) => ({ key: r.key, value: r.value }))).toEqual([{ key: "pk", value: wrongShape }])
    })

    it("follow from End sees only new messages; follow from Offsets resumes where the last one stopped", async () => {
      const topic = uniqueTopic()
      const l = await log()
      await run(l.publish(topic, messages("old", 30)))
      const seen: Array<string> = []
      const handler = (b: Batch<Msg>) => Effect.sync(() => seen.push(...b.events.map((e) => e.event.id)))
      const f1 = await start(rt, l.follow({ topic, startAt: { _tag: "End" } }, Msg, handler))
      await run(l.publish(topic, messages("new", 30)))
      await waitFor(() => seen.length >= 30, { message: "30 new" })
      await f1.stop()
      expect(seen.sort()).toEqual(
        messages("new", 30)
          .map((m) => JSON.parse(m.value).id)
          .sort()
      )
      const resumeAt = await run(l.endOffsets(topic))
      await run(l.publish(topic, messages("later", 30)))
      seen.length = 0
      const f2 = await start(rt, l.follow({ topic, startAt: { _tag: "Offsets", offsets: resumeAt } }, Msg, handler))
      await waitFor(() => seen.length >= 30, { message: "30 later" })
      await run(l.publish(topic, [msg("later-k0", "sentinel")]))
      await waitFor(() => seen.includes("sentinel"), { message: "the sentinel" })
      await f2.stop()
      expect(seen.filter((id) => !id.startsWith("later-")).sort()).toEqual(["sentinel"])
      expect(seen.filter((id) => id.startsWith("later-"))).toHaveLength(30)
    })

    it("read from Beginning, Offset and Time returns exactly the right messages and the end offsets", async () => {
      const topic = uniqueTopic()
      const l = await log()
      await run(l.publish(topic, messages("one", 50)))
      const first = await readAll(topic, { _tag: "Beginning" })
      expect(first.records).toHaveLength(50)
      const after = new Date(Math.floor(Math.max(...first.records.map((r) => r.timestamp))) + 1)
      await waitFor(() => Date.now() > after.getTime() + 1, { message: "the clock to pass the first 50's timestamps" })
      await run(l.publish(topic, messages("two", 50)))
      const ends = await run(l.endOffsets(topic))

      const all = await readAll(topic, { _tag: "Beginning" })
      expect(all.ends).toEqual(ends)
      expect(all.records.map((r) => r.event.id).sort()).toEqual(
        [...messages("one", 50), ...messages("two", 50)].map((m) => JSON.parse(m.value).id).sort()
      )

      const fromOffset = await readAll(topic, { _tag: "Offset", offset: 3 })
      expect(fromOffset.records.map((r) => `${r.partition}/${r.offset}`).sort()).toEqual(
        all.records
          .filter((r) => r.offset >= 3)
          .map((r) => `${r.partition}/${r.offset}`)
          .sort()
      )

      const fromTime = await readAll(topic, { _tag: "Time", time: after })
      expect(fromTime.records.map((r) => r.event.id).sort()).toEqual(
        messages("two", 50)
          .map((m) => JSON.parse(m.value).id)
          .sort()
      )
      expect(fromTime.ends).toEqual(ends)

      // Messages published during or after a read are not part of it.
      const during = await run(
        l.read({ topic, startAt: { _tag: "Beginning" } }, Msg, () => l.publish(topic, [msg("x", "during")]))
      )
      expect(during).toEqual(ends)
    })
  })

eventLogSuite("EventLog contract: embedded log in PostgreSQL", async () => {
  const url = await createTestDatabase()
  return { layer: embeddedEventLogLayer(url), teardown: () => dropTestDatabase(url) }
})

const kafka = testKafkaBrokers()
describe.skipIf(kafka === undefined)("EventLog contract: Kafka (needs TEST_KAFKA_BROKERS)", () => {
  eventLogSuite("kafkajs adapter", async () => ({
    layer: kafkaEventLogLayer(kafka ?? []),
    teardown: async () => {}
  }))
})
