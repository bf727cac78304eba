import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { answerClientError, httpDeadlinesConfig, serverOptions } from "./http/ClientErrors.js"
import { newRequestId } from "./Ids.js"

/**
 * A node:http server for an Effect app, with a shutdown that drains: on release it stops
 * accepting, lets in-flight requests finish, closes keep-alive connections as soon as they
 * go idle, and cuts whatever is left after `drainMs`. Requests refused before any handler
 * runs (too slow, headers too large, not HTTP) get the contract's error body
 * (`http/ClientErrors.ts`); `allowedMethods` names the methods of a known path for a 405.
 */
export const nodeServerLayer = (options: {
  readonly port: number
  readonly host?: string
  readonly drainMs?: number
  readonly allowedMethods?: (path: string) => ReadonlyArray<string>
}) =>
  Layer.unwrapEffect(
    Effect.map(httpDeadlinesConfig, (deadlines) => {
      const server = createServer({ keepAliveTimeout: 65_000, ...serverOptions(deadlines) })
      server.on("clientError", answerClientError("json", options.allowedMethods))
      // The port listens before the app is built (the layers around it take seconds): until
      // the app's handler is attached, a request gets 503 at once instead of hanging.
      const starting = (_req: IncomingMessage, res: ServerResponse) => {
        const body = JSON.stringify({
          error: { code: "dependency_unavailable", message: "The service is starting.", request_id: newRequestId() }
        })
        res.writeHead(503, { "Content-Type": "application/json", "Retry-After": "1", Connection: "close" })
        res.end(body)
      }
      server.on("request", starting)
      server.on("newListener", (event) => {
        if (event === "request") server.off("request", starting)
      })
      const drain = Layer.scopedDiscard(
        Effect.gen(function* () {
          yield* HttpServer.HttpServer
          // Registered after the server, so it runs first on release, while close() waits.
          yield* Effect.addFinalizer(() =>
            Effect.sync(() => {
              const idle = setInterval(() => server.closeIdleConnections(), 50)
              const cut = setTimeout(() => server.closeAllConnections(), options.drainMs ?? 15_000)
              cut.unref()
              server.once("close", () => {
                clearInterval(idle)
                clearTimeout(cut)
              })
            })
          )
        })
      )
      const base = NodeHttpServer.layer(() => server, {
        port: options.port,
        ...(options.host === undefined ? {} : { host: options.host })
      })
      return Layer.provideMerge(drain, base)
    })
  )
