import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber } from "effect"
import { WaitForTimeoutError, waitFor, waitForEffect } from "../support/waitFor.js"

// The helper's contract. The short deadlines here are the parameter under test: nothing
// asserted depends on how fast the machine is.

describe("waitFor", () => {
  it("resolves with the first truthy value; falsy values and throws are 'not yet'", async () => {
    const answers: Array<() => unknown> = [
      () => false,
      () => {
        throw new Error("not ready")
      },
      () => undefined,
      () => 0,
      () => "",
      () => null,
      () => ({ ready: true })
    ]
    let calls = 0
    const value = await waitFor(async () => answers[calls++]!(), { intervalMs: 1 })
    expect(value).toEqual({ ready: true })
    expect(calls).toBe(answers.length)
  })

  it("returns at once when the condition already holds", async () => {
    let calls = 0
    expect(
      await waitFor(() => {
        calls++
        return 42
      })
    ).toBe(42)
    expect(calls).toBe(1)
  })

  it("past the deadline, fails with what was waited for and how the last attempt ended", async () => {
    const failure = new Error("expected 404 to be 302")
    const error = await waitFor(
      () => {
        throw failure
      },
      { timeoutMs: 100, intervalMs: 10, message: "the redirect" }
    ).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(WaitForTimeoutError)
    expect((error as Error).message).toMatch(/^timed out after 100 ms waiting for the redirect \(\d+ attempts\)/)
    expect((error as Error).message).toContain("threw Error: expected 404 to be 302")
    expect((error as Error).cause).toBe(failure)

    const falsy = await waitFor(() => false, { timeoutMs: 50, intervalMs: 10 }).catch((e: unknown) => e)
    expect((falsy as Error).message).toContain("waiting for the condition")
    expect((falsy as Error).message).toContain("returned false")
  })

  it("makes one last attempt at the deadline", async () => {
    const started = performance.now()
    const value = await waitFor(() => performance.now() - started >= 90 && "late", { timeoutMs: 100, intervalMs: 500 })
    expect(value).toBe("late")
  })

  it("describes the state at the timeout when the message is a function", async () => {
    let state = "starting"
    const error = await waitFor(
      () => {
        state = "still starting"
        return false
      },
      { timeoutMs: 50, intervalMs: 10, message: () => `the service (${state})` }
    ).catch((e: unknown) => e)
    expect((error as Error).message).toContain("waiting for the service (still starting)")
  })

  it("stops when its signal aborts, with the signal's reason", async () => {
    const stop = new AbortController()
    let calls = 0
    const waiting = waitFor(
      () => {
        calls++
        return false
      },
      { signal: stop.signal, intervalMs: 10 }
    )
    const reason = new Error("not needed any more")
    stop.abort(reason)
    await expect(waiting).rejects.toBe(reason)
    const after = calls
    await new Promise((r) => setTimeout(r, 50)) // deliberate: no attempt may follow the abort
    expect(calls).toBe(after)
  })
})

describe("waitForEffect", () => {
  it.effect("polls on real time, also under the TestClock, until the effect succeeds with a truthy value", () =>
    Effect.gen(function* () {
      let calls = 0
      const value = yield* waitForEffect(
        Effect.suspend(() => {
          calls++
          if (calls === 1) return Effect.fail("not yet")
          if (calls === 2) return Effect.die(new Error("an assertion thrown inside"))
          return Effect.succeed(calls >= 4 && `after ${calls}`)
        }),
        { intervalMs: 1 }
      )
      expect(value).toBe("after 4")
    })
  )

  it.effect("fails with WaitForTimeoutError past the deadline", () =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(waitForEffect(Effect.succeed(false), { timeoutMs: 50, message: "never" }))
      expect(Exit.isFailure(exit)).toBe(true)
      const error = yield* Effect.flip(waitForEffect(Effect.fail("down"), { timeoutMs: 50, intervalMs: 10 }))
      expect(error).toBeInstanceOf(WaitForTimeoutError)
      expect(error.message).toContain("down")
    })
  )

  it.live("stops polling when its fiber is interrupted", () =>
    Effect.gen(function* () {
      let calls = 0
      const fiber = yield* Effect.fork(
        waitForEffect(
          Effect.sync(() => ++calls > 1_000_000),
          { intervalMs: 5 }
        )
      )
      yield* Effect.promise(() => waitFor(() => calls >= 2))
      yield* Fiber.interrupt(fiber)
      const after = calls
      yield* Effect.sleep(50) // deliberate: no attempt may follow the interruption
      expect(calls).toBe(after)
    })
  )
})
