import { createServer } from "node:http"
import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { newRequestId } from "./Ids.js"

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
  // Requests node:http refuses before any handler runs still get the contract's error body.
  server.on("clientError", (error: NodeJS.ErrnoException, socket) => {
    if (!socket.writable || error.code === "ECONNRESET") return socket.destroy()
    const tooLarge = error.code === "HPE_HEADER_OVERFLOW"
    const status = tooLarge ? "431 Request Header Fields Too Large" : "400 Bad Request"
    const requestId = newRequestId()
    const body = JSON.stringify({
      error: {
        code: tooLarge ? "payload_too_large" : "invalid_request",
        message: tooLarge ? "The request headers are too large." : "The request is not valid HTTP.",
        request_id: requestId
      }
    })
    socket.end(
      `HTTP/1.1 ${status}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `X-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`
    )
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
}
