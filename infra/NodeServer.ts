import { createServer } from "node:http"
import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { answerClientError, httpDeadlinesConfig, serverOptions } from "./http/ClientErrors.js"

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
