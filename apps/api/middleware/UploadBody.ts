import {
  HttpApi,
  type HttpApiGroup,
  HttpApiMiddleware,
  type HttpApp,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"
import { NodeHttpServerRequest } from "@effect/platform-node"
import { Context, Effect, FiberRef, Layer, Schema } from "effect"
import * as E from "../Errors.js"
import { announcesBody } from "./BodyReader.js"
import { readUpload, type Upload } from "./Upload.js"

/** The upload the UploadBody middleware read for this request. */
export class CurrentUpload extends Context.Tag("CurrentUpload")<CurrentUpload, Upload>() {}

/**
 * Whether this request's upload body is still unread: set for a request to an upload
 * endpoint that announces a body, cleared once the middleware has read (or given up on) it.
 */
const UnreadUpload = FiberRef.unsafeMake<{ unread: boolean }>({ unread: false })

const markRead = Effect.flatMap(FiberRef.get(UnreadUpload), (state) =>
  Effect.sync(() => {
    state.unread = false
  })
)

/**
 * An image upload body (raw bytes or multipart, see Upload.ts): 415 for another
 * content type, 413 past the 10 MiB file limit (without reading the rest), 400 empty or
 * malformed. Read before the idempotency check, which fingerprints what it means.
 */
export class UploadBody extends HttpApiMiddleware.Tag<UploadBody>()("UploadBody", {
  provides: CurrentUpload,
  failure: Schema.Union(E.InvalidRequest, E.UnsupportedMediaType, E.PayloadTooLarge)
}) {}

export const UploadBodyLive = Layer.succeed(
  UploadBody,
  Effect.gen(function* () {
    const read = yield* readUpload(yield* HttpServerRequest.HttpServerRequest)
    switch (read._tag) {
      case "Ok":
        yield* markRead
        return read.upload
      case "TooLarge":
        if (!read.unread) yield* markRead
        return yield* E.fail(E.PayloadTooLarge, read.message)
      case "Unsupported":
        return yield* E.fail(E.UnsupportedMediaType, read.message, read.detail)
      case "Invalid":
        // Aborted or fully read: either way nothing of the body is left to skip.
        yield* markRead
        return yield* E.fail(E.InvalidRequest, read.message, read.detail)
    }
  })
)

/**
 * How long the connection of a refused upload stays half-closed after the answer: long
 * enough for a client that is still sending to read the 413 before the connection is cut
 * (closing a socket with unread bytes sends a reset, which makes the client's TCP stack
 * discard an answer it has not read yet), without reading any more of the body.
 */
const LINGER_MS = 2_000

/**
 * For an upload refused before its body was (fully) read: nothing more of the body is read
 * (node would otherwise drain it after the answer), and once the answer is out (it says
 * `Connection: close`) the socket is half-closed and destroyed after LINGER_MS.
 */
const closeAfterAnswer = (request: HttpServerRequest.HttpServerRequest): void => {
  const incoming = NodeHttpServerRequest.toIncomingMessage(request)
  incoming.pause()
  // node drains a body nobody started to read once the answer is written; one read of what
  // is already buffered marks it as being consumed, and backpressure stops the socket.
  if (!incoming.readableEnded) incoming.read(0)
  const socket = incoming.socket as (typeof incoming.socket & { destroySoon?: () => void }) | null
  if (socket === null || socket.destroyed) return
  // What node calls once an answer with Connection: close is written.
  socket.destroySoon = () => {
    socket.end()
    const timer = setTimeout(() => socket.destroy(), LINGER_MS)
    timer.unref()
    socket.once("close", () => clearTimeout(timer))
  }
}

/** "METHOD /path" of every endpoint that takes an upload body (their paths have no parameters). */
const uploadRoutes = <Groups extends HttpApiGroup.HttpApiGroup.Any, Err, R>(
  api: HttpApi.HttpApi<string, Groups, Err, R>
): ReadonlySet<string> => {
  const routes = new Set<string>()
  HttpApi.reflect(api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, middleware }) => {
      if ((middleware as ReadonlySet<unknown>).has(UploadBody)) routes.add(`${endpoint.method} ${endpoint.path}`)
    }
  })
  return routes
}

/**
 * An upload refused before its body is read (authentication, scope, idempotency key, size,
 * type) closes the connection after the answer instead of draining up to 10 MiB.
 */
export const closeUnreadUploads = <Groups extends HttpApiGroup.HttpApiGroup.Any, Err, R>(
  api: HttpApi.HttpApi<string, Groups, Err, R>
) => {
  const routes = uploadRoutes(api)
  return <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      const path = request.url.split("?", 1)[0]!
      if (!routes.has(`${request.method} ${path}`) || !announcesBody(request)) return app
      const state = { unread: true }
      return Effect.locally(app, UnreadUpload, state).pipe(
        Effect.map((response) => {
          if (!state.unread) return response
          closeAfterAnswer(request)
          return HttpServerResponse.setHeader(response, "connection", "close")
        })
      )
    })
}
