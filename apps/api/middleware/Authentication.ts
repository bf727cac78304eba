import {
  type HttpApi,
  type HttpApiGroup,
  HttpApiMiddleware,
  HttpApiSecurity,
  HttpServerRequest
} from "@effect/platform"
import { Context, Effect, Layer, Option, Schema } from "effect"
import type { Principal } from "../../../domain/Account.js"
import { AccountRepo } from "../../../domain/ports/AccountRepo.js"
import * as E from "../Errors.js"
import { RateLimit } from "./RateLimit.js"
import { requireScope, scopeTable } from "./Scopes.js"

/** The account and key a request was authenticated as. */
export class CurrentPrincipal extends Context.Tag("CurrentPrincipal")<CurrentPrincipal, Principal>() {}

/** `Bearer <key>`: the scheme (any case), one or more spaces, the key, nothing else. */
const BEARER = /^Bearer +([^\s]+) *$/i

/**
 * Who is asking, how fast, and whether they may: the API key from the Authorization header
 * (401 unauthenticated when missing, malformed, unknown or revoked), then the account's
 * request rate (RateLimit: 429), then the endpoint's scope (Scopes: 403). Every endpoint
 * carries it, outermost of its middlewares, so nothing of a request is read or run before it.
 */
export class Authentication extends HttpApiMiddleware.Tag<Authentication>()("Authentication", {
  provides: CurrentPrincipal,
  failure: Schema.Union(E.Unauthenticated, E.RateLimited, E.ApiScopeRequired),
  security: { bearer: HttpApiSecurity.bearer }
}) {}

export const AuthenticationLive = <Groups extends HttpApiGroup.HttpApiGroup.Any, Err, R>(
  api: HttpApi.HttpApi<string, Groups, Err, R>
) =>
  Layer.effect(
    Authentication,
    Effect.gen(function* () {
      const accounts = yield* AccountRepo
      const rateLimit = yield* RateLimit
      const scopes = scopeTable(api)

      // HttpApiSecurity.bearer hands over an empty token for a missing header and cuts the
      // prefix without checking it: the header is read here to tell the client which it was.
      const principalOf = (header: string | undefined) =>
        Effect.gen(function* () {
          if (header === undefined || header === "") {
            return yield* E.fail(E.Unauthenticated, "Missing API key.", "send Authorization: Bearer <API_KEY>")
          }
          const match = BEARER.exec(header)
          if (match === null) {
            return yield* E.fail(E.Unauthenticated, "Malformed Authorization header.", "expected: Bearer <API_KEY>")
          }
          const principal = yield* accounts.authenticate(match[1]!)
          if (Option.isNone(principal)) {
            return yield* E.fail(E.Unauthenticated, "The API key is not valid.", "the key is unknown or revoked")
          }
          return principal.value
        })

      return Authentication.of({
        bearer: () =>
          Effect.gen(function* () {
            const request = yield* HttpServerRequest.HttpServerRequest
            const principal = yield* principalOf(request.headers.authorization)
            yield* rateLimit.check(principal)
            yield* requireScope(scopes, principal)
            return principal
          })
      })
    })
  )
