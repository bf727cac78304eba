import { Effect } from "effect"
import type { Principal } from "../../../domain/Account.js"
import {
  domainQuota,
  imageUploadQuota,
  linkQuota,
  snapshotQuota,
  storageQuota,
  usagePeriod
} from "../../../domain/Plan.js"
import { DomainRepo } from "../../../domain/ports/DomainRepo.js"
import { StorageRepo } from "../../../domain/ports/StorageRepo.js"
import { UsageRepo } from "../../../domain/ports/UsageRepo.js"
import { Plans } from "../../../infra/Plans.js"

/** A counted quantity and the limit that applies to the caller (null: none). */
export interface Metered {
  readonly used: number
  readonly limit: number | null
}

/** An account's usage this month, as the calling key sees it. */
export interface AccountUsage {
  readonly plan: string
  readonly links: Metered
  readonly imageUploads: Metered
  /** Custom domains registered and not disabled. */
  readonly domains: Metered
  readonly snapshots: Metered
  readonly storage: Metered & {
    /** Every stored byte, ordinary and Partner, reservations included. */
    readonly totalUsed: number
    /** Bytes of images uploaded with Unmetered Partner Keys. */
    readonly unmeteredUsed: number
  }
}

/** The account's usage against its plan: read-only, in no transaction of its own. */
export class Usage extends Effect.Service<Usage>()("Usage", {
  effect: Effect.gen(function* () {
    const usage = yield* UsageRepo
    const storageRepo = yield* StorageRepo
    const domainRepo = yield* DomainRepo
    const plans = yield* Plans

    /**
     * This calendar month's (UTC) links and image uploads, and the stored bytes, each with
     * the limit that applies to the calling key.
     */
    const get = Effect.fn("Usage.get")(function* (principal: Principal) {
      const plan = plans.limits(principal.plan)
      const period = usagePeriod(new Date())
      const [links, uploads, storage, domains, snapshots] = yield* Effect.all(
        [
          usage.current(principal.accountId, period, "links"),
          usage.current(principal.accountId, period, "image_uploads"),
          storageRepo.current(principal.accountId),
          domainRepo.countActive(principal.accountId),
          usage.current(principal.accountId, period, "snapshots")
        ],
        { concurrency: "unbounded" }
      )
      const total = storage.ordinary + storage.unmetered
      return {
        plan: principal.plan,
        links: { used: links, limit: linkQuota(plan, principal.unmetered) },
        imageUploads: { used: uploads, limit: imageUploadQuota(plan, principal.unmetered) },
        domains: { used: domains, limit: domainQuota(plan, principal.unmetered) },
        snapshots: { used: snapshots, limit: snapshotQuota(plan, principal.unmetered) },
        storage: {
          // Ordinary keys count only ordinary images against their limit; Partner keys see the total.
          used: principal.unmetered ? total : storage.ordinary,
          limit: storageQuota(plan, principal.unmetered),
          totalUsed: total,
          unmeteredUsed: storage.unmetered
        }
      } satisfies AccountUsage
    })

    return { get } as const
  })
}) {}
