import { Data } from "effect"

/** Shared by both engines of HttpServer.ts (serveHttp): what does not depend on either. */

export class HttpServerError extends Data.TaggedError("HttpServerError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

export const INTERNAL_ERROR = "Internal Server Error\n"

export const contentLength = (body: string | Uint8Array) =>
  typeof body === "string" ? Buffer.byteLength(body) : body.byteLength
