import { type HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, FiberRef } from "effect"
import { DatabaseHealth } from "../../../domain/ports/Database.js"
import { AppConfig } from "../../../infra/AppConfig.js"
import * as E from "../Errors.js"

/**
 * What the API serves without a key, beside the v1 routes: `/healthz` (the process is up),
 * `/readyz` (the database answers within 2 s, else 503) and `/v1/openapi.json`.
 */
export const makeSystemRoutes = (openApiDocument: object) =>
  Effect.gen(function* () {
    const database = yield* DatabaseHealth
    const config = yield* AppConfig
    // Paths in the document carry /v1, so the server is {base_url} without it.
    const openapi = HttpServerResponse.unsafeJson(
      { ...openApiDocument, servers: [{ url: config.apiBase.replace(/\/v1$/, "") || "/" }] },
      { headers: { "cache-control": "public, max-age=60" } }
    )
    const healthy = HttpServerResponse.unsafeJson({ status: "ok" })
    const ready = HttpServerResponse.unsafeJson({ status: "ready" })
    const readiness = database.ping.pipe(
      Effect.timeout("2 seconds"),
      Effect.as(ready),
      Effect.catchAllCause(() =>
        Effect.map(FiberRef.get(E.CurrentRequestId), (requestId) =>
          E.respond(E.DependencyUnavailable, requestId, "The database is not reachable.", undefined, {
            "retry-after": "1"
          })
        )
      )
    )

    return <Err, R>(app: HttpApp.Default<Err, R>): HttpApp.Default<Err, R> =>
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
        const path = request.url.split("?", 1)[0]
        if (path === "/healthz") return Effect.succeed(healthy)
        if (path === "/readyz") return readiness
        if (path === "/v1/openapi.json" && (request.method === "GET" || request.method === "HEAD")) {
          return Effect.succeed(openapi)
        }
        return app
      })
  })
