import { Cause, Duration, Effect, Schedule } from "effect"

/**
 * The back-off of the event log's loops (and the outbox relay's) after consecutive failures:
 * 100 ms, doubled after each, at most 5 s. Its output is the delay.
 */
export const backoff: Schedule.Schedule<Duration.Duration> = Schedule.exponential("100 millis").pipe(
  Schedule.union(Schedule.spaced("5 seconds")),
  Schedule.delays
)

/**
 * Runs `effect` again after each failure or defect, after the back-off; `onFailure` hears
 * each one with its number in the run of failures. Interruption ends it. Each call starts a
 * fresh run, so a loop of `Effect.forever(retryWithBackoff(step, ...))` starts the back-off
 * over after every success.
 */
export const retryWithBackoff = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  onFailure: (cause: Cause.Cause<E>, attempt: number) => Effect.Effect<void>
): Effect.Effect<A, E, R> =>
  Effect.suspend(() => {
    let attempt = 0
    return Effect.sandbox(effect).pipe(
      Effect.tapError((cause) => (Cause.isInterrupted(cause) ? Effect.void : onFailure(cause, ++attempt))),
      Effect.retry({ schedule: backoff, while: (cause) => !Cause.isInterrupted(cause) }),
      Effect.unsandbox
    )
  })

/** Where a run of consecutive failures stands: the latest attempt and when the next is due. */
export interface BackoffStep {
  readonly attempt: number
  readonly delay: Duration.Duration
  /** Epoch milliseconds. */
  readonly retryAt: number
  readonly state: unknown
}

/**
 * One more failure after `previous` (undefined: the first of a run), stepped through
 * `backoff` by hand: for loops whose retry is not `Effect.retry` (a kafkajs callback, a sweep
 * that goes on with the other partitions while one waits).
 */
export const nextBackoff = (previous: BackoffStep | undefined): Effect.Effect<BackoffStep> =>
  Effect.suspend(() => {
    const now = Date.now()
    return Effect.map(
      backoff.step(now, undefined, previous === undefined ? backoff.initial : previous.state),
      ([state, delay]): BackoffStep => ({
        attempt: (previous?.attempt ?? 0) + 1,
        delay,
        retryAt: now + Duration.toMillis(delay),
        state
      })
    )
  })
