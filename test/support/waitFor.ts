import { setTimeout as delay } from "node:timers/promises"
import { inspect } from "node:util"
import { Effect, Runtime } from "effect"

/**
 * The one way the suites wait for something to happen: poll a condition until it holds,
 * with a deadline generous enough for a busy 2-core machine. The deadline only bounds a
 * failing test; a passing one goes on as soon as the condition holds.
 *
 * Never wait a fixed time for something to happen. A sleep is right only where the time is
 * the point: pacing a client, a server that answers late on purpose, or giving something a
 * bounded chance to happen that must NOT happen (say so beside it).
 */

/** The values that mean "not yet". */
export type Falsy = false | 0 | 0n | "" | null | undefined

/** What a met condition returned. */
export type Truthy<A> = Exclude<A, Falsy>

export interface WaitForOptions {
  /** How long to keep trying (ms). Default 30 000. */
  readonly timeoutMs?: number
  /** The pause between two attempts (ms). Default 50. */
  readonly intervalMs?: number
  /**
   * What is waited for, for the error on timeout ("the projector to catch up"). A function
   * is called only then, to describe the state at that moment (a process's output, say).
   */
  readonly message?: string | (() => string)
  /** Stops waiting: the promise rejects with the signal's reason. */
  readonly signal?: AbortSignal
}

export const DEFAULT_TIMEOUT_MS = 30_000
export const DEFAULT_INTERVAL_MS = 50

/** The deadline passed and the condition never held; `cause` is the last attempt's error, if it threw. */
export class WaitForTimeoutError extends Error {
  override readonly name = "WaitForTimeoutError"
}

const show = (value: unknown) => inspect(value, { depth: 3, breakLength: Number.POSITIVE_INFINITY }).slice(0, 2_000)

const describeError = (error: unknown) => (error instanceof Error ? `${error.name}: ${error.message}` : show(error))

/**
 * Calls `condition` until it returns a truthy value, which it resolves with. An attempt that
 * throws (or rejects), or returns `false`, `0`, `""`, `null` or `undefined`, is "not yet":
 * the next one follows `intervalMs` later. Past `timeoutMs` (one last attempt is made at the
 * deadline), it rejects with a WaitForTimeoutError naming what was waited for and how the last
 * attempt ended, so an assertion used as a condition still explains the failure:
 *
 *   await waitFor(() => seen.size === 200, { message: "200 messages" })
 *   const row = await waitFor(async () => (await rowOf(id)) ?? false)
 *   await waitFor(async () => {
 *     expect((await hit(url)).status).toBe(302)
 *     return true // an assertion block ends with `return true`: nothing returned means "not yet"
 *   })
 *
 * A single attempt is not cut short: one that never settles is bounded by the test's timeout.
 */
export const waitFor = async <A>(
  condition: () => A | PromiseLike<A>,
  options: WaitForOptions = {}
): Promise<Truthy<A>> => {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS
  const intervalMs = options.intervalMs ?? DEFAULT_INTERVAL_MS
  const signal = options.signal
  const started = performance.now()
  let attempts = 0
  let last = "no attempt ended"
  let lastError: unknown
  for (;;) {
    signal?.throwIfAborted()
    attempts++
    try {
      const value = await condition()
      if (value) return value as Truthy<A>
      last = `returned ${show(value)}${value === undefined ? " (an assertion block as condition must end with `return true`)" : ""}`
      lastError = undefined
    } catch (error) {
      last = `threw ${describeError(error)}`
      lastError = error
    }
    signal?.throwIfAborted()
    const left = timeoutMs - (performance.now() - started)
    if (left <= 0) {
      const what = typeof options.message === "function" ? options.message() : (options.message ?? "the condition")
      throw new WaitForTimeoutError(
        `timed out after ${timeoutMs} ms waiting for ${what} (${attempts} attempts); the last one ${last}`,
        lastError === undefined ? undefined : { cause: lastError }
      )
    }
    try {
      await delay(Math.min(intervalMs, left), undefined, signal === undefined ? undefined : { signal })
    } catch (error) {
      signal?.throwIfAborted()
      throw error
    }
  }
}

/**
 * waitFor for Effect code: runs `condition` until it succeeds with a truthy value (a failure or
 * a defect, an assertion thrown inside, is "not yet"), and fails with WaitForTimeoutError past
 * the deadline. It waits on real time, also under `it.effect`'s TestClock; interrupting the
 * fiber stops the polling.
 *
 *   yield* waitForEffect(Effect.sync(() => closed.has("/slow")), { message: "the server to see the close" })
 */
export const waitForEffect = <A, E, R>(
  condition: Effect.Effect<A, E, R>,
  options: Omit<WaitForOptions, "signal"> = {}
): Effect.Effect<Truthy<A>, WaitForTimeoutError, R> =>
  Effect.flatMap(Effect.runtime<R>(), (runtime) => {
    const run = Runtime.runPromise(runtime)
    return Effect.tryPromise({
      try: (signal) => waitFor(() => run(condition, { signal }), { ...options, signal }),
      catch: (error) =>
        error instanceof WaitForTimeoutError
          ? error
          : new WaitForTimeoutError(`waiting stopped: ${describeError(error)}`, { cause: error })
    })
  })
