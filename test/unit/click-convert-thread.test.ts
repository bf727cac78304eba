import { Effect, Exit, Fiber } from "effect"
import { describe, expect, it } from "vitest"
import { ClickConverter, daysOf } from "../../apps/redirector/ClickConvert.js"
import { startConversionThread } from "../../apps/redirector/ClickConvertThread.js"
import { ClickRound } from "../../apps/redirector/ClickRound.js"
import { linkedClicks } from "../../domain/Events.js"
import { clickOn } from "../support/clickLinks.js"

const CHROME = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
const SECRET = new Uint8Array(32).fill(7)
const t0 = Date.UTC(2026, 10, 27, 23, 59, 59, 990)

/** A round of `n` clicks over three links of two accounts, the last ones after midnight UTC. */
const roundOf = (n: number) => {
  const round = new ClickRound(16)
  const links = [
    { linkId: "link_a", accountId: "acc_1" },
    { linkId: "link_b", accountId: "acc_1" },
    { linkId: "link_c", accountId: "acc_2" }
  ]
  for (let i = 0; i < n; i++) {
    round.push(...clickOn(links[(i * 7) % 3]!), t0 + i, `192.0.2.${i % 5}`, CHROME, i % 2 ? "https://r.example/p" : "", "")
  }
  return round
}
const secretsOf = (round: ClickRound) => new Map(daysOf(round.times, round.count).map((d) => [d, SECRET]))
/** Each event's key, id and clicks (link and time), in publish order. */
const eventsOf = (chunks: ReadonlyArray<{ readonly records: ReadonlyArray<{ key: string; value: string }> }>) =>
  chunks.flatMap((c) =>
    c.records.map((r) => {
      const event = JSON.parse(r.value)
      return { key: r.key, id: event.id, clicks: linkedClicks(event.data).map((k) => [k.link_id, k.at, k.visitor]) }
    })
  )

describe("the click conversion thread", () => {
  it("makes the events the converter makes in this thread, the same ids for the same round, clicks in order across midnight", async () => {
    const round = roundOf(50)
    const occurredAt = new Date(t0).toISOString()
    const here = new ClickConverter({ clicksPerEvent: 7, clicksPerPublish: 20 }).convert(
      round.data(),
      secretsOf(round),
      occurredAt
    )
    const there = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const thread = yield* startConversionThread({ clicksPerEvent: 7, clicksPerPublish: 20 })
          const first = yield* thread.convert(round.data(), secretsOf(round), occurredAt)
          // Converted again (a retry after a failed publish): the same events, ids included.
          const again = yield* thread.convert(round.data(), secretsOf(round), occurredAt)
          expect(eventsOf(again)).toEqual(eventsOf(first))
          return first
        })
      )
    )
    expect(eventsOf(there)).toEqual(eventsOf(here))
    expect(there.map((c) => c.clicks)).toEqual(here.map((c) => c.clicks))
    // 50 clicks of two accounts, at most 7 an event; every click once, in order per account.
    const events = eventsOf(there)
    expect(events.every((e) => e.clicks.length <= 7)).toBe(true)
    const byAccount = (key: string) => events.filter((e) => e.key === key).flatMap((e) => e.clicks.map((c) => c[1]))
    const expected = (key: string) =>
      Array.from({ length: 50 }, (_, i) => i).filter((i) => ((i * 7) % 3 === 2 ? "acc_2" : "acc_1") === key)
    expect(byAccount("acc_1")).toEqual(expected("acc_1").map((i) => t0 + i))
    expect(byAccount("acc_2")).toEqual(expected("acc_2").map((i) => t0 + i))
    expect(new Set(events.map((e) => e.id)).size).toBe(events.length)
    // Each publish chunk at most 20 clicks' worth of events (one event may pass it).
    for (const c of there) expect(c.clicks).toBeLessThanOrEqual(20 + 6)
  })

  it("a conversion that throws in the thread fails with its reason, and the thread goes on with the next round", async () => {
    const round = roundOf(10)
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const thread = yield* startConversionThread({ clicksPerPublish: 10_000 })
          // No secret for the clicks' days: the visitor hash cannot be made.
          const failed = yield* Effect.exit(thread.convert(round.data(), new Map(), "2026-11-27T00:00:00.000Z"))
          expect(Exit.isFailure(failed)).toBe(true)
          expect(JSON.stringify(failed)).toMatch(/ClickConversionError/)
          const chunks = yield* thread.convert(round.data(), secretsOf(round), "2026-11-27T00:00:00.000Z")
          expect(chunks.reduce((s, c) => s + c.clicks, 0)).toBe(10)
        })
      )
    )
  })

  it("a thread that ends fails the round it had, and the next conversion starts a new thread", async () => {
    const round = roundOf(10)
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const thread = yield* startConversionThread({ clicksPerPublish: 10_000 })
          const first = thread.worker()!
          // Asked, then cut before it can answer (it is still starting: a thread takes a while to load).
          const fiber = yield* Effect.fork(thread.convert(round.data(), secretsOf(round), "2026-11-27T00:00:00.000Z"))
          yield* Effect.yieldNow()
          yield* Effect.promise(() => first.terminate())
          const cut = yield* Fiber.await(fiber)
          expect(Exit.isFailure(cut)).toBe(true)
          expect(JSON.stringify(cut)).toMatch(/click conversion thread ended/)
          const chunks = yield* thread.convert(round.data(), secretsOf(round), "2026-11-27T00:00:00.000Z")
          expect(chunks.reduce((s, c) => s + c.clicks, 0)).toBe(10)
          expect(thread.worker()).not.toBe(first)
        })
      )
    )
  })
})
