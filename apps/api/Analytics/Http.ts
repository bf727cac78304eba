import { HttpApiBuilder } from "@effect/platform"
import { Effect, Either, Option } from "effect"
import { Analytics, parseDimensions, resolveRange, toReport } from "../../../domain/Analytics.js"
import { isLinkId } from "../../../domain/Link.js"
import { LinkRepo } from "../../../domain/ports/LinkRepo.js"
import { Api } from "../Api.js"
import * as E from "../Errors.js"
import { CurrentPrincipal } from "../middleware/Authentication.js"
import { envelope } from "../Shared.js"

export const AnalyticsHttp = HttpApiBuilder.group(Api, "analytics", (handlers) =>
  Effect.gen(function* () {
    const links = yield* LinkRepo
    const analytics = yield* Analytics

    return handlers.handle("get", ({ path, urlParams }) =>
      Effect.gen(function* () {
        const range = resolveRange({
          from: urlParams.from,
          to: urlParams.to,
          granularity: urlParams.granularity,
          now: Date.now()
        })
        if (Either.isLeft(range)) return yield* E.fail(E.InvalidRequest, "The range is not valid.", range.left)
        const dimensions = parseDimensions(urlParams.dimensions)
        if (Either.isLeft(dimensions)) {
          return yield* E.fail(E.InvalidRequest, "The dimensions are not valid.", dimensions.left)
        }
        const principal = yield* CurrentPrincipal
        // Another account's link is 404 too; an id of another shape names no link.
        const link = isLinkId(path.id) ? yield* links.find(principal.accountId, path.id) : Option.none()
        if (Option.isNone(link)) return yield* E.fail(E.NotFound, "No such link.")
        const query = { linkId: link.value.id, ...range.right, dimensions: dimensions.right }
        // A store failure is a defect here: RequestId answers it as a failed dependency (503).
        const aggregates = yield* Effect.orDie(analytics.query(query))
        return yield* envelope(toReport(query, aggregates))
      }).pipe(Effect.withSpan("Analytics.get"))
    )
  })
)
