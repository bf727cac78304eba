import { newBucket, retryAfterSeconds, type TokenBucket, takeToken } from "../domain/Plan.js"

/** How often idle buckets (full again) are dropped, so memory follows the active keys. */
const SWEEP_EVERY_MS = 60_000

export interface Rate {
  /** Tokens refilled per second. */
  readonly perSecond: number
  /** Bucket capacity: how many may come at once. */
  readonly burst: number
}

/**
 * The one rate limiter: token buckets by key (an account on the API, a client address or an
 * image on the image host), in the memory of this process. The hot path is a Map lookup and a
 * few arithmetic operations on a bucket updated in place: no allocation once a key has a
 * bucket. Past `maxKeys` active keys a new key is refused (fail closed) until idle ones are
 * swept.
 */
export const makeRateLimiter = (options: { readonly clock?: () => number; readonly maxKeys?: number } = {}) => {
  const clock = options.clock ?? (() => performance.now())
  const maxKeys = options.maxKeys ?? Number.POSITIVE_INFINITY
  const buckets = new Map<string, TokenBucket>()
  let lastSweep = clock()

  const sweep = (now: number) => {
    lastSweep = now
    // A full bucket is the same as no bucket.
    for (const [key, bucket] of buckets) if (bucket.fullAt <= now) buckets.delete(key)
  }

  /** Takes a token for the key: 0 when allowed, otherwise the milliseconds to wait. */
  const take = (key: string, rate: Rate): number => {
    const now = clock()
    if (now - lastSweep > SWEEP_EVERY_MS) sweep(now)
    let bucket = buckets.get(key)
    if (bucket === undefined) {
      if (buckets.size >= maxKeys) return 1000 / rate.perSecond
      bucket = newBucket(rate.burst, now)
      buckets.set(key, bucket)
    }
    return takeToken(bucket, now, rate.perSecond, rate.burst)
  }

  return { take, size: () => buckets.size } as const
}

/** A wait in milliseconds as a Retry-After value: whole seconds, rounded up, at least 1. */
export { retryAfterSeconds }
