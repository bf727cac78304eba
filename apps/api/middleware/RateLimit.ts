import { Effect, type Layer } from "effect"
import type { Principal } from "../../../domain/Account.js"
import { newBucket, type PlanLimits, retryAfterSeconds, type TokenBucket, takeToken } from "../../../domain/Plan.js"
import { Plans } from "../../../infra/Plans.js"
import * as E from "../Errors.js"

/** How often idle buckets (full again) are dropped, so memory follows the active accounts. */
const SWEEP_EVERY_MS = 60_000

/**
 * Token buckets by key (the plan's requests_per_second refill, request_burst capacity), in
 * the memory of this process. The hot path is a Map lookup and a few arithmetic operations
 * on a bucket updated in place: no allocation once a key has a bucket.
 */
export const makeRateLimiter = (clock: () => number = () => performance.now()) => {
  const buckets = new Map<string, TokenBucket>()
  let lastSweep = clock()

  const sweep = (now: number) => {
    lastSweep = now
    // A full bucket is the same as no bucket.
    for (const [key, bucket] of buckets) if (bucket.fullAt <= now) buckets.delete(key)
  }

  /** Takes a token for the key: 0 when allowed, otherwise the milliseconds to wait. */
  const take = (key: string, plan: Pick<PlanLimits, "requests_per_second" | "request_burst">): number => {
    const now = clock()
    if (now - lastSweep > SWEEP_EVERY_MS) sweep(now)
    let bucket = buckets.get(key)
    if (bucket === undefined) {
      bucket = newBucket(plan.request_burst, now)
      buckets.set(key, bucket)
    }
    return takeToken(bucket, now, plan.requests_per_second, plan.request_burst)
  }

  return { take, size: () => buckets.size } as const
}

/**
 * The account's request rate, checked right after authentication: 429 rate_limited with
 * Retry-After once its plan's bucket is empty. Unmetered Partner Keys skip it. In the
 * distributed mode every API process enforces the rate on its own, so an account may reach
 * up to N times its rate across N processes.
 */
export class RateLimit extends Effect.Service<RateLimit>()("RateLimit", {
  effect: Effect.gen(function* () {
    const plans = yield* Plans
    const limiter = makeRateLimiter()
    const check = (principal: Principal) => {
      if (principal.unmetered) return Effect.void
      const plan = plans.limits(principal.plan)
      const waitMs = limiter.take(principal.accountId, plan)
      if (waitMs === 0) return Effect.void
      const seconds = retryAfterSeconds(waitMs)
      return E.fail(
        E.RateLimited,
        "Too many requests for this account; retry after Retry-After seconds.",
        `requests_per_second: ${plan.requests_per_second} (burst ${plan.request_burst}) on plan ${principal.plan}; retry after ${seconds} s`,
        { "retry-after": String(seconds) }
      )
    }
    return { check } as const
  })
}) {}

export const RateLimitLive: Layer.Layer<RateLimit, never, Plans> = RateLimit.Default
