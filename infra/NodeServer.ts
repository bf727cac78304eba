import { createServer } from "node:http"
import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer } from "effect"

/**
 * A node:http server for an Effect app, with a shutdown that drains: on release it stops
 * accepting, lets in-flight requests finish, closes keep-alive connections as soon as they
 * go idle, and cuts whatever is left after `drainMs`.
 */
export const nodeServerLayer = (options: {
  readonly port: number
  readonly host?: string
  readonly drainMs?: number
}) => {
  const server = createServer({ keepAliveTimeout: 65_000 })
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
}
