/**
 * The baseline for bench/api.sh: a bare @effect/platform HttpRouter app on
 * @effect/platform-node that answers every GET /v1/links/:id with a fixed JSON body
 * (roughly the size and shape of the real API's link envelope). No database, no auth,
 * no pipeline: what the HTTP stack alone costs on this machine with this Node.
 *
 * Started the same way as the service: `node --import tsx bench/bare.ts`, port BARE_PORT.
 */
import { createServer } from "node:http"
import { HttpRouter, HttpServer, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Config, Effect, Layer, Logger, LogLevel } from "effect"

const body = {
  data: {
    id: "link_0000000000000000000000",
    slug: "bench000",
    short_url: "http://localhost:8081/bench000",
    destination_url: "https://example.com/bench",
    publication_status: "active",
    created_at: "2024-01-01T00:00:00.000Z",
    updated_at: "2024-01-01T00:00:00.000Z",
    expires_at: null,
    utm: null,
    short_urls: ["http://localhost:8081/bench000"]
  }
}

const router = HttpRouter.empty.pipe(
  HttpRouter.get("/v1/links/:id", Effect.succeed(HttpServerResponse.unsafeJson(body))),
  HttpRouter.get("/health", Effect.succeed(HttpServerResponse.unsafeJson({ ok: true })))
)

const BareServerLive = Layer.unwrapEffect(
  Effect.map(Config.integer("BARE_PORT").pipe(Config.withDefault(18481)), (port) =>
    HttpServer.serve(router).pipe(
      HttpServer.withLogAddress,
      Layer.provide(NodeHttpServer.layer(() => createServer({ keepAliveTimeout: 65_000 }), { port }))
    )
  )
)

NodeRuntime.runMain(
  Layer.launch(BareServerLive).pipe(Effect.provide(Layer.merge(Logger.json, Logger.minimumLogLevel(LogLevel.Warning)))),
  { disablePrettyLogger: true }
)
