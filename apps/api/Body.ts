import type { HttpServerRequest } from "@effect/platform"
import { NodeHttpServerRequest } from "@effect/platform-node"
import { Effect } from "effect"

export type BodyRead =
  | { readonly _tag: "Ok"; readonly bytes: Buffer }
  | { readonly _tag: "TooLarge" }
  | { readonly _tag: "Aborted" }

/**
 * Reads a request body of at most `limit` bytes, whether or not it declares a length
 * (chunked bodies too). Past the limit nothing more is kept: the rest is drained so the
 * client still receives its 413, and after `drainLimit` more bytes the connection is cut.
 */
export const readBody = (
  request: HttpServerRequest.HttpServerRequest,
  limit: number,
  drainLimit = 64 * 1024 * 1024
): Effect.Effect<BodyRead> =>
  Effect.async<BodyRead>((resume) => {
    const incoming = NodeHttpServerRequest.toIncomingMessage(request)
    const chunks: Array<Buffer> = []
    let size = 0
    let over = false
    const done = (result: BodyRead) => {
      incoming.off("data", onData)
      incoming.off("end", onEnd)
      incoming.off("error", onError)
      incoming.off("aborted", onError)
      resume(Effect.succeed(result))
    }
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (!over && size <= limit) {
        chunks.push(chunk)
        return
      }
      over = true
      chunks.length = 0
      if (size > limit + drainLimit) {
        done({ _tag: "Aborted" })
        incoming.destroy()
      }
    }
    const onEnd = () => done(over ? { _tag: "TooLarge" } : { _tag: "Ok", bytes: Buffer.concat(chunks) })
    const onError = () => done({ _tag: "Aborted" })
    if (incoming.readableEnded) return resume(Effect.succeed({ _tag: "Ok", bytes: Buffer.alloc(0) }))
    incoming.on("data", onData)
    incoming.on("end", onEnd)
    incoming.on("error", onError)
    incoming.on("aborted", onError)
    return Effect.sync(() => {
      incoming.off("data", onData)
      incoming.off("end", onEnd)
      incoming.off("error", onError)
      incoming.off("aborted", onError)
    })
  })

/** The request as the inner app sees it once the pipeline has read and parsed its body. */
export const withParsedBody = (
  request: HttpServerRequest.HttpServerRequest,
  text: string,
  json: unknown
): HttpServerRequest.HttpServerRequest =>
  Object.create(request, {
    text: { value: Effect.succeed(text) },
    json: { value: Effect.succeed(json) },
    arrayBuffer: { value: Effect.sync(() => new TextEncoder().encode(text).buffer) }
  })

const UNPAIRED_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

/**
 * Where a JSON value is nested deeper than `maxDepth`, or holds a string (key or value)
 * that PostgreSQL cannot store or that is not text: a NUL or an unpaired surrogate.
 * Iterative, so that no input can overflow the stack.
 */
export const jsonProblem = (value: unknown, maxDepth: number): string | undefined => {
  const stack: Array<[unknown, number, string]> = [[value, 1, "body"]]
  const badString = (s: string) => s.includes("\u0000") || UNPAIRED_SURROGATE.test(s)
  while (stack.length > 0) {
    const [v, depth, path] = stack.pop()!
    if (typeof v === "string") {
      if (badString(v)) return `${path}: must not contain NUL or unpaired surrogate characters`
      continue
    }
    if (v === null || typeof v !== "object") continue
    if (depth > maxDepth) return `body: JSON nested deeper than ${maxDepth} levels`
    for (const [k, child] of Object.entries(v)) {
      const childPath = path === "body" ? k : `${path}.${k}`
      if (badString(k)) return `${childPath}: property names must not contain NUL or unpaired surrogate characters`
      stack.push([child, depth + 1, childPath])
    }
  }
  return undefined
}
