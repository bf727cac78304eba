import { ConfigProvider, Effect, Either } from "effect"
import { describe, expect, it } from "vitest"
import {
  DEFAULT_PLANS,
  expiryCeiling,
  expiryWithinPlan,
  linkQuota,
  mergePlans,
  newBucket,
  type PlanLimits,
  quotaDetail,
  retryAfterSeconds,
  takeToken,
  usagePeriod
} from "../../domain/Plan.js"
import { parsePlans, plansConfig } from "../../infra/Plans.js"
import { makeRateLimiter } from "../../infra/RateLimiter.js"

const DAY = 86_400_000
const plan = (overrides: Partial<PlanLimits> = {}): PlanLimits => ({ ...DEFAULT_PLANS.free!, ...overrides })

describe("plan table", () => {
  it("has generous built-in free, pro and business plans", () => {
    expect(Object.keys(DEFAULT_PLANS)).toEqual(["free", "pro", "business"])
    const free = DEFAULT_PLANS.free!
    expect(free.links_per_month).toBeGreaterThanOrEqual(100_000)
    expect(free.requests_per_second).toBeGreaterThanOrEqual(1_000)
    expect(free.request_burst).toBeGreaterThanOrEqual(2_000)
    expect(free.link_expiry_max_days).toBe(365)
    for (const name of ["pro", "business"]) {
      const p = DEFAULT_PLANS[name]!
      expect(p.link_expiry_max_days, name).toBeNull()
      for (const field of [
        "links_per_month",
        "image_uploads_per_month",
        "storage_bytes",
        "snapshots_per_month",
        "custom_domains",
        "requests_per_second",
        "request_burst"
      ] as const) {
        expect(p[field], `${name}.${field}`).toBeGreaterThan(free[field])
      }
    }
  })

  it("merges a partial plan over its defaults; a new plan starts from free", () => {
    const table = mergePlans({ pro: { links_per_month: 7 }, tiny: { request_burst: 3, link_expiry_max_days: null } })
    expect(table.pro).toEqual({ ...DEFAULT_PLANS.pro, links_per_month: 7 })
    expect(table.free).toEqual(DEFAULT_PLANS.free)
    expect(table.tiny).toEqual({ ...DEFAULT_PLANS.free, request_burst: 3, link_expiry_max_days: null })
    expect(Object.keys(table)).toEqual(["free", "pro", "business", "tiny"])
  })

  it("parses PLANS: empty is the defaults; bad JSON, shapes, names, fields and values are refused", () => {
    expect(parsePlans("")).toEqual(Either.right(DEFAULT_PLANS))
    expect(parsePlans('{"free":{"links_per_month":5}}')).toEqual(
      Either.right({ ...DEFAULT_PLANS, free: { ...DEFAULT_PLANS.free!, links_per_month: 5 } })
    )
    const refused = (text: string) => Either.getLeft(parsePlans(text)).pipe((o) => (o._tag === "Some" ? o.value : ""))
    expect(refused("{bad")).toMatch(/must be JSON/)
    expect(refused("[1]")).toMatch(/JSON object/)
    expect(refused("null")).toMatch(/JSON object/)
    expect(refused('{"free":{"links_per_month":-1}}')).toMatch(/^free\.links_per_month: /)
    expect(refused('{"free":{"links_per_month":1.5}}')).toMatch(/^free\.links_per_month: /)
    expect(refused('{"free":{"links_per_month":"5"}}')).toMatch(/^free\.links_per_month: /)
    expect(refused('{"free":{"link_per_month":5}}')).toMatch(/free\.link_per_month/)
    expect(refused('{"free":{"requests_per_second":0}}')).toMatch(/free\.requests_per_second/)
    expect(refused('{"free":{"request_burst":0}}')).toMatch(/free\.request_burst/)
    expect(refused('{"free":{"link_expiry_max_days":0}}')).toMatch(/free\.link_expiry_max_days/)
    expect(refused('{"no spaces":{}}')).toMatch(/no spaces/)
  })

  it("reads PLANS through Config: a failure names PLANS and is one line", async () => {
    const read = (env: Record<string, string>) =>
      Effect.runPromise(
        Effect.either(Effect.withConfigProvider(plansConfig, ConfigProvider.fromMap(new Map(Object.entries(env)))))
      )
    expect(await read({})).toEqual(Either.right(DEFAULT_PLANS))
    const bad = await read({ PLANS: '{\n"free": {\n"links_per_month": -1}}' })
    expect(Either.isLeft(bad)).toBe(true)
    const message = String(Either.getLeft(bad).pipe((o) => (o._tag === "Some" ? o.value : "")))
    expect(message).toContain("PLANS")
    expect(message).not.toContain("\n")
  })
})

describe("monthly quotas", () => {
  it("count per calendar month in UTC", () => {
    expect(usagePeriod(new Date("2024-01-31T23:59:59.999Z"))).toBe("2024-01")
    expect(usagePeriod(new Date("2024-02-01T00:00:00Z"))).toBe("2024-02")
    expect(usagePeriod(new Date("2024-11-30T23:30:00-02:00"))).toBe("2024-12")
    expect(usagePeriod(new Date("2025-12-01T00:00:00Z"))).toBe("2025-12")
  })

  it("Unmetered Partner Keys skip the link quota", () => {
    expect(linkQuota(plan({ links_per_month: 10 }), false)).toBe(10)
    expect(linkQuota(plan({ links_per_month: 10 }), true)).toBeNull()
  })

  it("detail names the quota, what is used and the limit", () => {
    expect(quotaDetail("links_per_month", 100, 100)).toBe("links_per_month: 100 of 100 used")
  })
})

describe("link expiry ceiling", () => {
  const now = Date.parse("2024-05-01T00:00:00Z")
  it("allows up to link_expiry_max_days ahead, not one millisecond more", () => {
    const p = plan({ link_expiry_max_days: 30 })
    expect(expiryCeiling(p, false, now)).toBe(now + 30 * DAY)
    expect(expiryWithinPlan(p, false, now + 30 * DAY, now)).toBe(true)
    expect(expiryWithinPlan(p, false, now + 30 * DAY + 1, now)).toBe(false)
  })
  it("has no ceiling when the plan has none, or for Unmetered Partner Keys", () => {
    expect(expiryCeiling(plan({ link_expiry_max_days: null }), false, now)).toBeNull()
    expect(expiryWithinPlan(plan({ link_expiry_max_days: 1 }), true, now + 10_000 * DAY, now)).toBe(true)
    expect(expiryWithinPlan(DEFAULT_PLANS.pro!, false, now + 10_000 * DAY, now)).toBe(true)
    expect(expiryWithinPlan(DEFAULT_PLANS.free!, false, now + 366 * DAY, now)).toBe(false)
  })
})

describe("request rate (token bucket)", () => {
  it("allows a burst, then one request per 1/rate seconds", () => {
    const bucket = newBucket(3, 0)
    expect([0, 0, 0].map(() => takeToken(bucket, 0, 2, 3))).toEqual([0, 0, 0])
    // Empty: the next token comes in 500 ms at 2 per second.
    expect(takeToken(bucket, 0, 2, 3)).toBe(500)
    expect(takeToken(bucket, 250, 2, 3)).toBe(250)
    expect(takeToken(bucket, 500, 2, 3)).toBe(0)
    expect(takeToken(bucket, 500, 2, 3)).toBe(500)
  })

  it("never holds more than the burst, however long it was idle", () => {
    const bucket = newBucket(2, 0)
    expect(takeToken(bucket, 0, 1, 2)).toBe(0)
    expect(takeToken(bucket, 1_000_000, 1, 2)).toBe(0)
    expect(takeToken(bucket, 1_000_000, 1, 2)).toBe(0)
    expect(takeToken(bucket, 1_000_000, 1, 2)).toBeGreaterThan(0)
  })

  it("a refused request takes nothing", () => {
    const bucket = newBucket(1, 0)
    expect(takeToken(bucket, 0, 1, 1)).toBe(0)
    for (let i = 0; i < 10; i++) expect(takeToken(bucket, 0, 1, 1)).toBe(1000)
    expect(takeToken(bucket, 1000, 1, 1)).toBe(0)
  })

  it("Retry-After is whole seconds, rounded up, at least 1", () => {
    expect(retryAfterSeconds(0.1)).toBe(1)
    expect(retryAfterSeconds(1000)).toBe(1)
    expect(retryAfterSeconds(1001)).toBe(2)
    expect(retryAfterSeconds(60_000)).toBe(60)
  })

  it("keeps one bucket per account and drops the full ones after a while", () => {
    let now = 0
    const limiter = makeRateLimiter({ clock: () => now })
    const p = { perSecond: 1, burst: 2 }
    expect(limiter.take("a", p)).toBe(0)
    expect(limiter.take("a", p)).toBe(0)
    expect(limiter.take("a", p)).toBe(1000)
    expect(limiter.take("b", p)).toBe(0)
    expect(limiter.size()).toBe(2)
    now = 61_000
    expect(limiter.take("c", p)).toBe(0)
    // a and b were full again; c was just used.
    expect(limiter.size()).toBe(1)
    expect(limiter.take("a", p)).toBe(0)
  })

  it("refuses a new key once maxKeys keys are active (fail closed), until idle ones are swept", () => {
    let now = 0
    const limiter = makeRateLimiter({ clock: () => now, maxKeys: 2 })
    const p = { perSecond: 0.5, burst: 1 }
    expect(limiter.take("a", p)).toBe(0)
    expect(limiter.take("b", p)).toBe(0)
    expect(limiter.take("c", p)).toBe(2000)
    expect(limiter.size()).toBe(2)
    now = 61_000
    expect(limiter.take("c", p)).toBe(0)
  })
})
