import { Effect, type Layer } from "effect"
import type { Principal } from "../../../domain/Account.js"
import { Plans } from "../../../infra/Plans.js"
import { makeRateLimiter, retryAfterSeconds } from "../../../infra/RateLimiter.js"
import * as E from "../Errors.js"

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
      const waitMs = limiter.take(principal.accountId, {
        perSecond: plan.requests_per_second,
        burst: plan.request_burst
      })
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
