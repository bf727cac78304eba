import { HttpApi } from "@effect/platform"
import { Context, Option } from "effect"
import type { Scope } from "../../domain/Scope.js"
import { Api } from "./Api.js"
import { RequiredScope } from "./Security.js"
import { BodyKind, OutboundFetch } from "./Shared.js"

export interface Route {
  readonly method: string
  /** The path template, e.g. /v1/links/:id */
  readonly template: string
  readonly pattern: RegExp
  readonly scope: Scope | undefined
  readonly body: "json" | "upload" | undefined
  readonly mutating: boolean
  /** Fetches from the network (see OutboundFetch). */
  readonly outbound: boolean
}

/** The route table, read from the API definition: the pipeline's view of every endpoint. */
export const routes: ReadonlyArray<Route> = (() => {
  const out: Array<Route> = []
  HttpApi.reflect(Api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, mergedAnnotations }) => {
      const pattern = new RegExp(
        `^${endpoint.path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/:[A-Za-z_]+/g, "[^/]+")}$`
      )
      out.push({
        method: endpoint.method,
        template: endpoint.path,
        pattern,
        scope: Option.getOrUndefined(
          Context.getOption(mergedAnnotations as Context.Context<RequiredScope>, RequiredScope)
        ),
        body: Option.getOrUndefined(Context.getOption(mergedAnnotations as Context.Context<BodyKind>, BodyKind)),
        outbound: Option.isSome(Context.getOption(mergedAnnotations as Context.Context<OutboundFetch>, OutboundFetch)),
        mutating: endpoint.method === "POST" || endpoint.method === "PATCH" || endpoint.method === "DELETE"
      })
    }
  })
  return out
})()

export type Match = { readonly _tag: "Route"; readonly route: Route } | { readonly _tag: "NoRoute" }

export const matchRoute = (method: string, path: string): Match => {
  for (const route of routes) {
    if (route.method === method && route.pattern.test(path)) return { _tag: "Route", route }
  }
  return { _tag: "NoRoute" }
}
