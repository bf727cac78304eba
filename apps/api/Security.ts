import { HttpApiMiddleware, HttpApiSecurity } from "@effect/platform"
import { Context, Effect, FiberRef, Option } from "effect"
import type { Principal } from "../../domain/Account.js"
import type { Scope } from "../../domain/Scope.js"
import { fail, Unauthenticated } from "./Errors.js"

export class CurrentPrincipal extends Context.Tag("CurrentPrincipal")<CurrentPrincipal, Principal>() {}

/** The scope an endpoint requires; read by the pipeline from the API definition. */
export class RequiredScope extends Context.Tag("RequiredScope")<RequiredScope, Scope>() {}

/** The principal the pipeline authenticated for this request. */
export const PrincipalRef = FiberRef.unsafeMake<Option.Option<Principal>>(Option.none())

/**
 * Bearer authentication as the OpenAPI document shows it. The pipeline has already
 * checked the key (once per request, before idempotency); this hands its result to the
 * handlers.
 */
export class Authentication extends HttpApiMiddleware.Tag<Authentication>()("Authentication", {
  provides: CurrentPrincipal,
  failure: Unauthenticated,
  security: { bearer: HttpApiSecurity.bearer }
}) {}

export const AuthenticationLive = Authentication.of({
  bearer: () =>
    Effect.flatMap(FiberRef.get(PrincipalRef), (principal) =>
      Option.match(principal, {
        onSome: Effect.succeed,
        // Only reachable if an endpoint were served without the pipeline in front of it.
        onNone: () => fail(Unauthenticated, "A valid API key is required.")
      })
    )
})
