import { newBucket, type PlanLimits, type TokenBucket, takeToken } from "../../domain/Plan.js"

/** How often idle buckets (full again) are dropped, so memory follows the active accounts. */
const SWEEP_EVERY_MS = 60_000

/**
 * Per-account request rates: one token bucket per account (the plan's requests_per_second
 * refill, request_burst capacity), in the memory of this API process. In the distributed
 * mode every API process enforces the rate on its own, so an account may reach up to N times
 * its rate across N processes.
 *
 * The hot path is a Map lookup and a few arithmetic operations on a bucket updated in place:
 * no allocation once an account has a bucket.
 */
export const makeRateLimiter = (clock: () => number = () => performance.now()) => {
  const buckets = new Map<string, TokenBucket>()
  let lastSweep = clock()

  const sweep = (now: number) => {
    lastSweep = now
    // A full bucket is the same as no bucket.
    for (const [account, bucket] of buckets) if (bucket.fullAt <= now) buckets.delete(account)
  }

  /** Takes a token for the account: 0 when allowed, otherwise the milliseconds to wait. */
  const take = (accountId: string, plan: PlanLimits): number => {
    const now = clock()
    if (now - lastSweep > SWEEP_EVERY_MS) sweep(now)
    let bucket = buckets.get(accountId)
    if (bucket === undefined) {
      bucket = newBucket(plan.request_burst, now)
      buckets.set(accountId, bucket)
    }
    return takeToken(bucket, now, plan.requests_per_second, plan.request_burst)
  }

  return { take, size: () => buckets.size } as const
}
