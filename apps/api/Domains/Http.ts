import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.js"
import { mapDomainErrors } from "../DomainAnswers.js"
import { CurrentPrincipal } from "../middleware/Authentication.js"
import { IdempotentOperations, withIdempotency } from "../middleware/Idempotency.js"
import { envelope, keysetPage } from "../Shared.js"
import { toApiDomain } from "./Api.js"
import { Domains } from "./Domains.js"

export const DomainsHttp = HttpApiBuilder.group(Api, "domains", (handlers) =>
  Effect.gen(function* () {
    const operations = yield* IdempotentOperations
    const domains = yield* Domains

    return withIdempotency(
      operations,
      handlers
        .handle("register", ({ payload }) =>
          CurrentPrincipal.pipe(
            Effect.flatMap((p) => domains.register(p, payload.hostname)),
            Effect.flatMap((d) => envelope(toApiDomain(d))),
            mapDomainErrors
          )
        )
        .handle("list", ({ urlParams }) =>
          Effect.flatMap(CurrentPrincipal, (p) =>
            keysetPage(
              urlParams,
              (afterSeq: bigint | undefined, limit: number) => domains.list(p, { afterSeq, limit }),
              toApiDomain
            )
          )
        )
        .handle("get", ({ path }) =>
          CurrentPrincipal.pipe(
            Effect.flatMap((p) => domains.get(p, path.id)),
            Effect.flatMap((d) => envelope(toApiDomain(d))),
            mapDomainErrors
          )
        )
        .handle("verify", ({ path }) =>
          CurrentPrincipal.pipe(
            Effect.flatMap((p) => domains.verify(p, path.id)),
            Effect.flatMap((d) => envelope(toApiDomain(d))),
            mapDomainErrors
          )
        )
        .handle("disable", ({ path }) =>
          CurrentPrincipal.pipe(
            Effect.flatMap((p) => domains.disable(p, path.id)),
            Effect.flatMap((d) => envelope(toApiDomain(d))),
            mapDomainErrors
          )
        )
    )
  })
)
