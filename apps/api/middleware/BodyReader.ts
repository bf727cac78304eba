import type { HttpServerRequest } from "@effect/platform"
import { NodeHttpServerRequest } from "@effect/platform-node"
import { Effect } from "effect"

export type BodyRead =
  | { readonly _tag: "Ok"; readonly bytes: Buffer }
  | { readonly _tag: "TooLarge" }
  | { readonly _tag: "Aborted" }

/** Bytes drained past the limit (so that the client still reads its 413) before the connection is cut. */
const DRAIN_LIMIT = 64 * 1024 * 1024

/**
 * The one request body reader: at most `limit` bytes, whether or not the body declares a
 * length (chunked bodies too). Past the limit nothing more is kept, and then either
 * - `drain`: the rest is read and dropped, so the client still receives its 413 on a
 *   connection that stays usable (JSON bodies; after 64 MiB more the connection is cut), or
 * - `stop`: reading stops at once and the request stays paused; the caller answers 413 with
 *   `Connection: close` (uploads: nothing of a large body is read in vain).
 */
export const readBody = (
  request: HttpServerRequest.HttpServerRequest,
  limit: number,
  pastLimit: "drain" | "stop"
): Effect.Effect<BodyRead> =>
  Effect.async<BodyRead>((resume) => {
    const incoming = NodeHttpServerRequest.toIncomingMessage(request)
    if (incoming.readableEnded) return resume(Effect.succeed({ _tag: "Ok", bytes: Buffer.alloc(0) }))
    const chunks: Array<Buffer> = []
    let size = 0
    let over = false
    const stop = () => {
      incoming.off("data", onData)
      incoming.off("end", onEnd)
      incoming.off("error", onAbort)
      incoming.off("aborted", onAbort)
    }
    const finish = (read: BodyRead) => {
      stop()
      resume(Effect.succeed(read))
    }
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (!over && size <= limit) {
        chunks.push(chunk)
        return
      }
      over = true
      chunks.length = 0
      if (pastLimit === "stop") {
        incoming.pause()
        finish({ _tag: "TooLarge" })
      } else if (size > limit + DRAIN_LIMIT) {
        finish({ _tag: "Aborted" })
        incoming.destroy()
      }
    }
    const onEnd = () => finish(over ? { _tag: "TooLarge" } : { _tag: "Ok", bytes: Buffer.concat(chunks, size) })
    const onAbort = () => finish({ _tag: "Aborted" })
    incoming.on("data", onData)
    incoming.on("end", onEnd)
    incoming.on("error", onAbort)
    incoming.on("aborted", onAbort)
    return Effect.sync(stop)
  })

/** Whether the request announces a body (a length above 0, or chunked). */
export const announcesBody = (request: HttpServerRequest.HttpServerRequest): boolean =>
  request.headers["transfer-encoding"] !== undefined || Number(request.headers["content-length"] ?? "0") > 0
