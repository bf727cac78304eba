import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.js"
import { CurrentPrincipal } from "../middleware/Authentication.js"
import { envelope } from "../Shared.js"
import { Usage } from "./Usage.js"

export const UsageHttp = HttpApiBuilder.group(Api, "usage", (handlers) =>
  Effect.gen(function* () {
    const usage = yield* Usage

    return handlers.handle("get", () =>
      Effect.gen(function* () {
        const current = yield* usage.get(yield* CurrentPrincipal)
        return yield* envelope({
          plan: current.plan,
          links: current.links,
          images: {
            uploads: current.imageUploads,
            storage_bytes: {
              used: current.storage.used,
              limit: current.storage.limit,
              total_used: current.storage.totalUsed,
              unmetered_used: current.storage.unmeteredUsed
            }
          },
          domains: current.domains,
          snapshots: current.snapshots
        })
      })
    )
  })
)
