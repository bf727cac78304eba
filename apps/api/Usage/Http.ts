import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { imageUploadQuota, linkQuota, storageQuota, usagePeriod } from "../../../domain/Plan.js"
import { StorageRepo } from "../../../domain/ports/StorageRepo.js"
import { UsageRepo } from "../../../domain/ports/UsageRepo.js"
import { Plans } from "../../../infra/Plans.js"
import { Api } from "../Api.js"
import { CurrentPrincipal } from "../middleware/Authentication.js"
import { envelope } from "../Shared.js"

export const UsageHttp = HttpApiBuilder.group(Api, "usage", (handlers) =>
  Effect.gen(function* () {
    const usage = yield* UsageRepo
    const storageRepo = yield* StorageRepo
    const plans = yield* Plans

    return handlers.handle("get", () =>
      Effect.gen(function* () {
        const principal = yield* CurrentPrincipal
        const plan = plans.limits(principal.plan)
        const period = usagePeriod(new Date())
        const [links, uploads, storage] = yield* Effect.all(
          [
            usage.current(principal.accountId, period, "links"),
            usage.current(principal.accountId, period, "image_uploads"),
            storageRepo.current(principal.accountId)
          ],
          { concurrency: "unbounded" }
        )
        const total = storage.ordinary + storage.unmetered
        return yield* envelope({
          plan: principal.plan,
          links: { used: links, limit: linkQuota(plan, principal.unmetered) },
          images: {
            uploads: { used: uploads, limit: imageUploadQuota(plan, principal.unmetered) },
            storage_bytes: {
              // Ordinary keys count only ordinary images against their limit; Partner keys see the total.
              used: principal.unmetered ? total : storage.ordinary,
              limit: storageQuota(plan, principal.unmetered),
              total_used: total,
              unmetered_used: storage.unmetered
            }
          }
        })
      })
    )
  })
)
