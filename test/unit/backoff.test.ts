import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, TestClock } from "effect"
import { nextBackoff, retryWithBackoff } from "../../infra/eventlog/Backoff.js"

// The event log's back-off (and the outbox relay's), under the TestClock.

describe("backoff", () => {
  it.effect("waits 100 ms after the first failure, doubles after each, and stays at 5 s", () =>
    Effect.gen(function* () {
      const delays: Array<number> = []
      let step = yield* nextBackoff(undefined)
      delays.push(Duration.toMillis(step.delay))
      for (let i = 0; i < 11; i++) {
        step = yield* nextBackoff(step)
        delays.push(Duration.toMillis(step.delay))
      }
      expect(delays).toEqual([100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000, 5000, 5000, 5000])
      expect(step.attempt).toBe(12)
      // Far into an outage (past where 2^n overflows) it is still capped.
      for (let i = 0; i < 2000; i++) step = yield* nextBackoff(step)
      expect(Duration.toMillis(step.delay)).toBe(5000)
    })
  )

  it.effect("retryWithBackoff runs again after failures and defects, numbering each, after the back-off", () =>
    Effect.gen(function* () {
      const heard: Array<number> = []
      let runs = 0
      const flaky = Effect.suspend(() => {
        runs++
        if (runs === 1) return Effect.fail("down")
        if (runs === 2) return Effect.die(new Error("crashed"))
        return Effect.succeed("up")
      })
      const fiber = yield* Effect.fork(retryWithBackoff(flaky, (_, attempt) => Effect.sync(() => heard.push(attempt))))
      yield* TestClock.adjust("99 millis")
      expect(runs).toBe(1)
      yield* TestClock.adjust("1 millis")
      expect(runs).toBe(2)
      yield* TestClock.adjust("199 millis")
      expect(runs).toBe(2)
      yield* TestClock.adjust("1 millis")
      expect(yield* Fiber.join(fiber)).toBe("up")
      expect(heard).toEqual([1, 2])
    })
  )

  it.effect("each call starts the back-off over; interruption ends it", () =>
    Effect.gen(function* () {
      const heard: Array<number> = []
      const failing = retryWithBackoff(Effect.fail("down"), (_, attempt) => Effect.sync(() => heard.push(attempt)))
      const first = yield* Effect.fork(failing)
      yield* TestClock.adjust("300 millis")
      yield* Fiber.interrupt(first)
      const second = yield* Effect.fork(failing)
      yield* TestClock.adjust("0 millis")
      const exit = yield* Fiber.interrupt(second)
      expect(Exit.isInterrupted(exit)).toBe(true)
      expect(heard).toEqual([1, 2, 3, 1])
    })
  )
})
