/**
 * The interface of an HTTP server engine (infra/http/UwsServer.ts, infra/http/NodeHttpServer.ts):
 * one request and its answer, the handler, the options. HttpServer.ts chooses the engine.
 */

/**
 * A status with headers that every answer of it carries (a redirect's Cache-Control), checked
 * once: uWebSockets.js writes them with the status line, in one call, where a header written on
 * its own is a call with two native arguments (~0.1 µs a request, UwsServer.ts).
 */
export class StatusWithHeaders {
  /** The engine's encoding, made on first use (UwsServer.ts). */
  encoded: unknown = undefined
  constructor(
    readonly code: number,
    readonly headers: ReadonlyArray<readonly [name: string, value: string]>
  ) {
    for (const [name, value] of headers) {
      if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name) || !/^[\x20-\x7e]*$/.test(value))
        throw new Error(`not a header a status can carry: ${JSON.stringify([name, value])}`)
    }
  }
}

/** The writing half of an exchange: the same calls whether the answer is given at once or later. */
export interface HttpAnswer {
  writeStatus(status: number | StatusWithHeaders): this
  /** A header; a value given as bytes is sent as they are (visible ASCII: the redirector's Location). */
  writeHeader(name: string, value: string | Uint8Array): this
  /**
   * Ends the answer with its body (text or bytes) and a Content-Length. For HEAD the body is
   * left out and its length still announced.
   */
  end(body: string | Uint8Array): void
  /** Ends an answer that has no body and no Content-Length (204, 304). */
  endWithoutBody(): void
}

/** An answer given after the handler returned (see HttpExchange.defer). */
export interface DeferredAnswer extends HttpAnswer {
  /** The client went away: further writes are ignored. */
  readonly aborted: boolean
}

/**
 * A peer's address as an engine gives it cheapest: an IPv4 address as a number (a.b.c.d as
 * a * 2^24 + b * 2^16 + c * 2^8 + d: uWebSockets.js with the peer-address library's current
 * peer, PeerAddress.ts), 4 or 16 bytes (uWebSockets.js otherwise; `ipText` formats them) or
 * the text (node:http).
 */
export type RawPeer = number | ArrayBuffer | string

/**
 * One request and its answer. A handler answers at once (the fast path: everything read and
 * the answer ended before it returns; the uWebSockets.js request lives on the stack of the
 * call and its exchange object is reused for the next request), or calls `defer` or
 * `readBody` before it returns and answers later through what they give.
 */
export interface HttpExchange extends HttpAnswer {
  /** As sent, upper case for every real client: "GET", "HEAD", … */
  readonly method: string
  /** The path, without the query string. */
  readonly path: string
  /** A request header by lower-case name; "" when absent. Only before the handler returns. */
  header(lowerCaseName: string): string
  /** The query string without "?"; "" when absent. Only before the handler returns. */
  query(): string
  /** The peer of the TCP connection (never a forwarded-for header). Only before the handler returns. */
  remoteAddress(): string
  /**
   * The same peer in the engine's cheapest form. For hot paths that only need a key.
   */
  remoteAddressRaw(): RawPeer
  /**
   * Answer later: read what the answer needs from the request first. Writes on the exchange
   * itself are not allowed afterwards.
   */
  defer(): DeferredAnswer
  /**
   * Reads the request body and answers later (implies `defer`). The body resolves to
   * undefined when it is (or announces) more than `maxBytes`; the answer then closes the
   * connection, so the rest is never read.
   */
  readBody(maxBytes: number): { readonly answer: DeferredAnswer; readonly body: Promise<Uint8Array | undefined> }
}

export type HttpHandler = (exchange: HttpExchange) => void

export type HttpEngine = "uWebSockets.js" | "node:http"

export interface RunningHttpServer {
  readonly engine: HttpEngine
  readonly port: number
  /** Why uWebSockets.js is not used although it was not ruled out by HTTP_ENGINE=node. */
  readonly fallbackReason: string | undefined
}

export interface ServeOptions {
  readonly host: string
  readonly port: number
  readonly handler: HttpHandler
  /** Called with what a handler threw (the client gets a 500). */
  readonly onError: (error: unknown) => void
  /** How long a close waits for keep-alive connections to finish before cutting them. */
  readonly drainMs?: number
  /**
   * Share the port with other processes that ask for the same (SO_REUSEPORT: the kernel
   * spreads connections among them). Off by default: a port in use fails the start. Only
   * uWebSockets.js can (node:http in Node 20 has no such option).
   */
  readonly reusePort?: boolean
}
