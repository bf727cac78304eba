import { type HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, FiberRef } from "effect"
import { DatabaseHealth } from "../../../domain/ports/Database.js"
import { AppConfig } from "../../../infra/AppConfig.js"
import { PROMETHEUS_CONTENT_TYPE, prometheusText } from "../../../infra/Prometheus.js"
import * as E from "../Errors.js"

/** The documents the API serves without a key, generated from the Api and the event schemas. */
export interface SystemDocuments {
  /** The route prefix of the Api (`/v1`): `{base_url}`'s path. */
  readonly prefix: string
  /** The OpenAPI document whose server is the given `{base_url}`. */
  readonly openApi: (apiBase: string) => object
  /** The AsyncAPI document of the topics. */
  readonly asyncApi: object
  /** The reference page over an OpenAPI document, loading the script at the given URL. */
  readonly docsPage: (openApi: object, scriptUrl: string) => string
  /** The reference page's script (served from the same host, cached). */
  readonly docsScript: () => string
  /** The page's Content-Security-Policy. */
  readonly docsCsp: string
}

/** The paths the system routes answer (not counted in the request metrics). */
export const systemPaths = (prefix: string): ReadonlySet<string> =>
  new Set([
    "/healthz",
    "/readyz",
    "/metrics",
    `${prefix}/openapi.json`,
    `${prefix}/asyncapi.json`,
    `${prefix}/docs`,
    `${prefix}/docs/reference.js`
  ])

/**
 * What the API serves without a key, beside the v1 routes: `/healthz` (the process is up),
 * `/readyz` (the database answers within 2 s, else 503), `/metrics` (Prometheus text), `{base_url}/openapi.json`,
 * `{base_url}/asyncapi.json` and the reference page `{base_url}/docs` (with its script).
 */
export const makeSystemRoutes = (documents: SystemDocuments) =>
  Effect.gen(function* () {
    const database = yield* DatabaseHealth
    const config = yield* AppConfig
    const cached = { "cache-control": "public, max-age=60" }
    const openApi = documents.openApi(config.apiBase)
    const scriptPath = `${documents.prefix}/docs/reference.js`
    const pages = new Map<string, HttpServerResponse.HttpServerResponse>([
      [`${documents.prefix}/openapi.json`, HttpServerResponse.unsafeJson(openApi, { headers: cached })],
      [`${documents.prefix}/asyncapi.json`, HttpServerResponse.unsafeJson(documents.asyncApi, { headers: cached })],
      [
        `${documents.prefix}/docs`,
        HttpServerResponse.html(documents.docsPage(openApi, scriptPath)).pipe(
          HttpServerResponse.setHeaders({ ...cached, "content-security-policy": documents.docsCsp })
        )
      ],
      [
        scriptPath,
        HttpServerResponse.text(documents.docsScript(), {
          contentType: "text/javascript; charset=utf-8",
          headers: { "cache-control": "public, max-age=3600" }
        })
      ]
    ])
    const healthy = HttpServerResponse.unsafeJson({ status: "ok" })
    const metrics = Effect.map(prometheusText, (text) =>
      HttpServerResponse.text(text, { contentType: PROMETHEUS_CONTENT_TYPE, headers: { "cache-control": "no-store" } })
    )
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
        if (path === "/metrics" && request.method === "GET") return metrics
        const page = request.method === "GET" || request.method === "HEAD" ? pages.get(path) : undefined
        if (page !== undefined) return Effect.succeed(page)
        return app
      })
  })
