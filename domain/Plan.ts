import { Schema } from "effect"

/**
 * What an account's plan allows: monthly quotas, standing limits and request rates
 * (DESIGN.md, "Plans and rates"). Field names are those of the `PLANS` setting.
 * Unmetered Partner Keys skip every one of them (contract, Authentication 7).
 */
export interface PlanLimits {
  /** Links created per calendar month (UTC). */
  readonly links_per_month: number
  /** Image uploads and URL imports per calendar month (UTC). */
  readonly image_uploads_per_month: number
  /** Stored image bytes. */
  readonly storage_bytes: number
  /** Snapshots per calendar month (UTC). */
  readonly snapshots_per_month: number
  /** Snapshots of one target host an account may have queued or capturing at once. */
  readonly snapshot_captures_per_host: number
  /** Custom domains registered and not disabled. */
  readonly custom_domains: number
  /** Custom domain registrations in any 24 hours (disabled ones count: the rate of POST /domains). */
  readonly domain_registrations_per_day: number
  /** How far ahead a link's expires_at may be, in days; null: no ceiling. */
  readonly link_expiry_max_days: number | null
  /** Token bucket refill rate per account (the sustained rate). */
  readonly requests_per_second: number
  /** Token bucket capacity per account (the largest burst). */
  readonly request_burst: number
}

export type PlanTable = Readonly<Record<string, PlanLimits>>

const GiB = 1024 * 1024 * 1024

/**
 * The built-in plans. Generous on purpose: an ordinary client, a test suite or a demo never
 * meets them; operators tighten them with `PLANS`.
 */
export const DEFAULT_PLANS: PlanTable = {
  free: {
    links_per_month: 100_000,
    image_uploads_per_month: 10_000,
    storage_bytes: 10 * GiB,
    snapshots_per_month: 10_000,
    snapshot_captures_per_host: 4,
    custom_domains: 5,
    domain_registrations_per_day: 20,
    link_expiry_max_days: 365,
    requests_per_second: 10_000,
    request_burst: 20_000
  },
  pro: {
    links_per_month: 1_000_000,
    image_uploads_per_month: 100_000,
    storage_bytes: 100 * GiB,
    snapshots_per_month: 100_000,
    snapshot_captures_per_host: 16,
    custom_domains: 50,
    domain_registrations_per_day: 200,
    link_expiry_max_days: null,
    requests_per_second: 50_000,
    request_burst: 100_000
  },
  business: {
    links_per_month: 10_000_000,
    image_uploads_per_month: 1_000_000,
    storage_bytes: 1024 * GiB,
    snapshots_per_month: 1_000_000,
    snapshot_captures_per_host: 64,
    custom_domains: 500,
    domain_registrations_per_day: 2_000,
    link_expiry_max_days: null,
    requests_per_second: 200_000,
    request_burst: 400_000
  }
}

/** The plan an account gets when none is named. */
export const DEFAULT_PLAN = "free"

export const PLAN_NAME = /^[A-Za-z0-9_-]{1,64}$/

const Count = Schema.Number.pipe(
  Schema.int({ message: () => "must be an integer" }),
  Schema.between(0, Number.MAX_SAFE_INTEGER, { message: () => "must be a whole number from 0" })
)
const optional = <S extends Schema.Schema.All>(schema: S) => Schema.optionalWith(schema, { exact: true })

/** One plan in `PLANS`: any subset of the fields, merged over the plan's defaults. */
export const PlanOverride = Schema.Struct({
  links_per_month: optional(Count),
  image_uploads_per_month: optional(Count),
  storage_bytes: optional(Count),
  snapshots_per_month: optional(Count),
  snapshot_captures_per_host: optional(Count),
  custom_domains: optional(Count),
  domain_registrations_per_day: optional(Count),
  link_expiry_max_days: optional(
    Schema.NullOr(
      Schema.Number.pipe(
        Schema.int({ message: () => "must be an integer" }),
        Schema.between(1, 1_000_000, { message: () => "must be null (no ceiling) or a whole number of days from 1" })
      )
    )
  ),
  requests_per_second: optional(
    Schema.Number.pipe(
      Schema.finite({ message: () => "must be a finite number" }),
      Schema.positive({ message: () => "must be greater than 0" })
    )
  ),
  request_burst: optional(
    Schema.Number.pipe(
      Schema.int({ message: () => "must be an integer" }),
      Schema.between(1, Number.MAX_SAFE_INTEGER, { message: () => "must be a whole number from 1" })
    )
  )
})
export type PlanOverride = typeof PlanOverride.Type

/** The whole `PLANS` value: plan name -> partial plan. Unknown fields are refused (a typo would be silent). */
export const PlanOverrides = Schema.Record({
  key: Schema.String.pipe(
    Schema.pattern(PLAN_NAME, { message: () => "plan names are 1 to 64 of A-Z, a-z, 0-9, _ and -" })
  ),
  value: PlanOverride
}).annotations({ parseOptions: { onExcessProperty: "error", errors: "all" } })
export type PlanOverrides = typeof PlanOverrides.Type

/**
 * The defaults with the overrides merged over them, plan by plan. A new plan name starts
 * from the `free` defaults.
 */
export const mergePlans = (overrides: PlanOverrides, defaults: PlanTable = DEFAULT_PLANS): PlanTable => {
  const out: Record<string, PlanLimits> = { ...defaults }
  for (const [name, override] of Object.entries(overrides)) {
    out[name] = { ...(defaults[name] ?? defaults[DEFAULT_PLAN] ?? DEFAULT_PLANS.free!), ...override }
  }
  return out
}

// --- monthly quotas ------------------------------------------------------------------------

/** The calendar month (UTC) a use counts against: `YYYY-MM`. */
export const usagePeriod = (now: Date): string => {
  const month = now.getUTCMonth() + 1
  return `${now.getUTCFullYear()}-${month < 10 ? "0" : ""}${month}`
}

/** Metrics counted per account and period (usage_counters.metric). */
export type UsageMetric = "links" | "image_uploads" | "snapshots"

/**
 * The monthly link quota that applies, or null when none does: Unmetered Partner Keys skip
 * it (their links are still counted).
 */
export const linkQuota = (plan: PlanLimits, unmetered: boolean): number | null =>
  unmetered ? null : plan.links_per_month

/**
 * The monthly image upload quota (uploads and URL imports) that applies, or null for an
 * Unmetered Partner Key (its uploads are still counted).
 */
export const imageUploadQuota = (plan: PlanLimits, unmetered: boolean): number | null =>
  unmetered ? null : plan.image_uploads_per_month

/**
 * The storage limit that applies to a key's uploads, or null for an Unmetered Partner Key:
 * its images are counted apart (the account's Partner bytes) and never limited.
 */
export const storageQuota = (plan: PlanLimits, unmetered: boolean): number | null =>
  unmetered ? null : plan.storage_bytes

/** The custom domain count limit that applies, or null for an Unmetered Partner Key. */
export const domainQuota = (plan: PlanLimits, unmetered: boolean): number | null =>
  unmetered ? null : plan.custom_domains

/** The registrations-per-24-hours limit that applies, or null for an Unmetered Partner Key. */
export const domainRegistrationRate = (plan: PlanLimits, unmetered: boolean): number | null =>
  unmetered ? null : plan.domain_registrations_per_day

/** The monthly snapshot quota that applies, or null for an Unmetered Partner Key (still counted). */
export const snapshotQuota = (plan: PlanLimits, unmetered: boolean): number | null =>
  unmetered ? null : plan.snapshots_per_month

/** Captures of one host an account may have in progress, or null for an Unmetered Partner Key. */
export const snapshotHostQuota = (plan: PlanLimits, unmetered: boolean): number | null =>
  unmetered ? null : plan.snapshot_captures_per_host

/** `error.detail` of a used-up quota: the quota's name, what is used and the limit. */
export const quotaDetail = (quota: keyof PlanLimits, used: number, limit: number): string =>
  `${quota}: ${used} of ${limit} used`

// --- link expiry ceiling -------------------------------------------------------------------

const DAY_MS = 86_400_000

/**
 * The latest expires_at the plan allows at `now` (epoch ms), or null when there is no
 * ceiling: the plan has none, or the key is an Unmetered Partner Key.
 */
export const expiryCeiling = (plan: PlanLimits, unmetered: boolean, now: number): number | null =>
  unmetered || plan.link_expiry_max_days === null ? null : now + plan.link_expiry_max_days * DAY_MS

/** Whether an expiry instant is within the plan's ceiling. */
export const expiryWithinPlan = (plan: PlanLimits, unmetered: boolean, expiresAt: number, now: number): boolean => {
  const ceiling = expiryCeiling(plan, unmetered, now)
  return ceiling === null || expiresAt <= ceiling
}

// --- request rate --------------------------------------------------------------------------

/**
 * A token bucket: `tokens` available at instant `at` (ms), full again at `fullAt` if no
 * request comes. Mutable on purpose: it is updated in place on every request, without
 * allocating.
 */
export interface TokenBucket {
  tokens: number
  at: number
  fullAt: number
}

export const newBucket = (burst: number, now: number): TokenBucket => ({ tokens: burst, at: now, fullAt: now })

/**
 * Refills the bucket for the time elapsed (rate tokens per second, at most burst) and
 * takes one token. Returns 0 when a token was taken; otherwise the milliseconds until one
 * will be available (the bucket is then left as refilled, nothing taken).
 */
export const takeToken = (bucket: TokenBucket, now: number, rate: number, burst: number): number => {
  const elapsed = now - bucket.at
  let tokens = elapsed > 0 ? bucket.tokens + (elapsed * rate) / 1000 : bucket.tokens
  if (tokens > burst) tokens = burst
  if (elapsed > 0) bucket.at = now
  if (tokens < 1) {
    bucket.tokens = tokens
    return ((1 - tokens) * 1000) / rate
  }
  tokens -= 1
  bucket.tokens = tokens
  bucket.fullAt = now + ((burst - tokens) * 1000) / rate
  return 0
}

/** Retry-After for a wait: whole seconds, rounded up, at least 1. */
export const retryAfterSeconds = (waitMs: number): number => Math.max(1, Math.ceil(waitMs / 1000))
