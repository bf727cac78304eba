import { HttpApi, type HttpApiGroup, HttpRouter } from "@effect/platform"
import { Context, Effect, Option } from "effect"
import type { Principal } from "../../../domain/Account.js"
import type { Scope } from "../../../domain/Scope.js"
import * as E from "../Errors.js"

/** The scope an endpoint requires: an annotation on the endpoint, read once per API. */
export class RequiredScope extends Context.Tag("RequiredScope")<RequiredScope, Scope>() {}

/** The scope of every endpoint that requires one, by its route ("METHOD /v1/path/:param"). */
export const scopeTable = <Groups extends HttpApiGroup.HttpApiGroup.Any, Err, R>(
  api: HttpApi.HttpApi<string, Groups, Err, R>
): ReadonlyMap<string, Scope> => {
  const table = new Map<string, Scope>()
  HttpApi.reflect(api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, mergedAnnotations }) => {
      const scope = Context.getOption(mergedAnnotations as Context.Context<RequiredScope>, RequiredScope)
      if (Option.isSome(scope)) table.set(`${endpoint.method} ${endpoint.path}`, scope.value)
    }
  })
  return table
}

/**
 * The rule "a key may only do what its scopes allow": the matched endpoint's scope must be
 * among the principal's, else 403 api_scope_required naming it.
 */
export const requireScope = (table: ReadonlyMap<string, Scope>, principal: Principal) =>
  Effect.flatMap(HttpRouter.RouteContext, ({ route }) => {
    const scope = table.get(`${route.method} ${route.path}`)
    if (scope === undefined || principal.scopes.has(scope)) return Effect.void
    return E.fail(E.ApiScopeRequired, "The API key lacks the scope this operation requires.", `missing scope: ${scope}`)
  })
