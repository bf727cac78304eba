import type { ServerOptions } from "node:http"
import type { Duplex } from "node:stream"
import { Config } from "effect"
import { newRequestId } from "../Ids.js"

/**
 * The deadlines and limits every port of the service applies to a client before a handler
 * sees its request (see README, "HTTP limits"):
 * - the request line and headers must arrive within HTTP_HEADER_TIMEOUT_MS (10 s) and the
 *   whole request, body included, within HTTP_REQUEST_TIMEOUT_MS (60 s): else 408
 *   `request_timeout`, and the connection is closed;
 * - the request line and headers together may hold at most 16 KiB: else 431
 *   `headers_too_large`, and the connection is closed;
 * - a method HTTP does not know is 405 `method_not_allowed` with Allow where the path is
 *   known (else 404), anything else unparseable 400 `invalid_request`.
 */
export interface HttpDeadlines {
  readonly headerTimeoutMs: number
  readonly requestTimeoutMs: number
}

const millis = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.validate({ message: "must be an integer of at least 100 (ms)", validation: (n) => n >= 100 }),
    Config.withDefault(fallback)
  )

export const httpDeadlinesConfig: Config.Config<HttpDeadlines> = Config.all({
  headerTimeoutMs: millis("HTTP_HEADER_TIMEOUT_MS", 10_000),
  requestTimeoutMs: millis("HTTP_REQUEST_TIMEOUT_MS", 60_000)
})

export const MAX_HEADER_BYTES = 16 * 1024

/** A node:http server's options for these deadlines; expired ones reach `clientError` (answered below). */
export const serverOptions = (deadlines: HttpDeadlines): ServerOptions => ({
  maxHeaderSize: MAX_HEADER_BYTES,
  headersTimeout: deadlines.headerTimeoutMs,
  requestTimeout: Math.max(deadlines.requestTimeoutMs, deadlines.headerTimeoutMs),
  // How often node looks for expired requests: the deadlines hold to within this.
  connectionsCheckingInterval: Math.min(1_000, Math.ceil(deadlines.headerTimeoutMs / 4))
})

export interface ClientErrorAnswer {
  readonly status: number
  readonly reason: string
  readonly code: string
  readonly message: string
  readonly allow?: string
}

/** The path of the request line in what node could read of a refused request. */
const requestPath = (raw: Buffer | undefined): string | undefined => {
  if (raw === undefined) return undefined
  const line = raw.subarray(0, Math.min(raw.length, 4096)).toString("latin1").split("\r\n", 1)[0] ?? ""
  const target = line.split(" ")[1]
  return target === undefined ? undefined : target.split("?", 1)[0]
}

/**
 * What a request refused before any handler ran gets. `allowedMethods` gives the methods of
 * a known path (empty for an unknown one).
 */
export const clientErrorAnswer = (
  error: NodeJS.ErrnoException & { readonly rawPacket?: Buffer },
  allowedMethods: (path: string) => ReadonlyArray<string>
): ClientErrorAnswer => {
  switch (error.code) {
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return {
        status: 408,
        reason: "Request Timeout",
        code: "request_timeout",
        message: "The request did not arrive in time; the connection is closed."
      }
    case "HPE_HEADER_OVERFLOW":
      return {
        status: 431,
        reason: "Request Header Fields Too Large",
        code: "headers_too_large",
        message: `The request line and headers are larger than ${MAX_HEADER_BYTES} bytes.`
      }
    case "HPE_INVALID_METHOD": {
      const path = requestPath(error.rawPacket)
      const allow = path === undefined ? [] : allowedMethods(path)
      return allow.length > 0
        ? {
            status: 405,
            reason: "Method Not Allowed",
            code: "method_not_allowed",
            message: "This method is not one this path accepts; see Allow.",
            allow: allow.join(", ")
          }
        : { status: 404, reason: "Not Found", code: "not_found", message: "No route for this request." }
    }
    default:
      return { status: 400, reason: "Bad Request", code: "invalid_request", message: "The request is not valid HTTP." }
  }
}

/**
 * Answers a refused request on its socket and closes it: the contract's JSON error body
 * (`json`) or the plain text of the short and media hosts. A connection whose response has
 * begun, or that is gone, is only destroyed.
 */
export const answerClientError =
  (format: "json" | "text", allowedMethods: (path: string) => ReadonlyArray<string> = () => []) =>
  (error: NodeJS.ErrnoException, socket: Duplex) => {
    const pending = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage
    if (!socket.writable || error.code === "ECONNRESET" || pending?.headersSent === true) return socket.destroy()
    const answer = clientErrorAnswer(error, allowedMethods)
    const requestId = newRequestId()
    const body =
      format === "json"
        ? JSON.stringify({ error: { code: answer.code, message: answer.message, request_id: requestId } })
        : `${answer.message}\n`
    const type = format === "json" ? "application/json" : "text/plain; charset=utf-8"
    socket.end(
      `HTTP/1.1 ${answer.status} ${answer.reason}\r\nContent-Type: ${type}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        (answer.allow === undefined ? "" : `Allow: ${answer.allow}\r\n`) +
        `X-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`
    )
  }
