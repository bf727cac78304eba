import type * as Uws from "uWebSockets.js"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import { createRequire } from "node:module"
import { Config, type ConfigError, Data, Effect, type Scope } from "effect"
import {
  answerClientError,
  type HttpDeadlines,
  httpDeadlinesConfig,
  MAX_HEADER_BYTES,
  serverOptions
} from "./ClientErrors.js"

/** The writing half of an exchange: the same calls whether the answer is given at once or later. */
export interface HttpAnswer {
  writeStatus(code: number): this
  writeHeader(name: string, value: string): this
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
   * The same peer in the engine's cheapest form: 4 or 16 bytes (uWebSockets.js; `ipText`
   * formats them) or the text (node:http). For hot paths that only need a key.
   */
  remoteAddressRaw(): ArrayBuffer | string
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

export class HttpServerError extends Data.TaggedError("HttpServerError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

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

const STATUS_LINES: Record<number, string> = {
  200: "200 OK",
  202: "202 Accepted",
  204: "204 No Content",
  301: "301 Moved Permanently",
  302: "302 Found",
  303: "303 See Other",
  304: "304 Not Modified",
  400: "400 Bad Request",
  404: "404 Not Found",
  405: "405 Method Not Allowed",
  408: "408 Request Timeout",
  413: "413 Content Too Large",
  415: "415 Unsupported Media Type",
  429: "429 Too Many Requests",
  431: "431 Request Header Fields Too Large",
  500: "500 Internal Server Error",
  503: "503 Service Unavailable"
}

const INTERNAL_ERROR = "Internal Server Error\n"
const TIMED_OUT = "The request did not arrive in time; the connection is closed.\n"
const TOO_LARGE = `The request line and headers are larger than ${MAX_HEADER_BYTES} bytes.\n`

/** HTTP_ENGINE: `uws` or `node` forces one; unset or `auto` takes uWebSockets.js when it loads. */
export const httpEngineConfig = Config.string("HTTP_ENGINE").pipe(
  // Validation sits before the mapping and the default: that way a failure names the variable.
  Config.validate({
    message: "must be one of auto, uws, node",
    validation: (s) => ["", "auto", "uws", "node"].includes(s.trim().toLowerCase())
  }),
  Config.map((s) => (s.trim() === "" ? "auto" : s.trim().toLowerCase()) as "auto" | "uws" | "node"),
  Config.withDefault("auto" as const)
)

type UwsModule = typeof Uws

let uwsModule: { readonly module: UwsModule } | { readonly error: string } | undefined

/**
 * The native uWebSockets.js binary for this platform and Node ABI. Loaded directly rather
 * than through the package's entry point, which swaps in its own slow JavaScript emulation
 * when the binary does not load: we want our node:http engine in that case, and to say why.
 */
export const loadUws = (): { readonly module: UwsModule } | { readonly error: string } => {
  if (uwsModule !== undefined) return uwsModule
  try {
    const require = createRequire(import.meta.url)
    const name = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`
    uwsModule = { module: require(`uWebSockets.js/binaries/${name}`) as UwsModule }
  } catch (error) {
    uwsModule = { error: error instanceof Error ? error.message.split("\n")[0]! : String(error) }
  }
  return uwsModule
}

/** Where the IPv4 address starts in `b` (4 bytes, or IPv4-mapped IPv6); -1 for anything else. */
export const ipv4Offset = (b: Uint8Array): number =>
  b.length === 4
    ? 0
    : b.length === 16 && b[10] === 0xff && b[11] === 0xff && b.subarray(0, 10).every((x) => x === 0)
      ? 12
      : -1

/**
 * An address in the text form node:http gives: dotted IPv4 (also for IPv4-mapped IPv6), and
 * RFC 5952 IPv6 (lower case, no leading zeros, the longest run of zero groups as "::").
 */
export const ipText = (b: Uint8Array): string => {
  const o = ipv4Offset(b)
  if (o >= 0) return `${b[o]}.${b[o + 1]}.${b[o + 2]}.${b[o + 3]}`
  if (b.length !== 16) return ""
  const groups: Array<number> = []
  for (let i = 0; i < 16; i += 2) groups.push((b[i]! << 8) | b[i + 1]!)
  let bestStart = -1
  let bestLength = 1
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++
      continue
    }
    let j = i
    while (j < 8 && groups[j] === 0) j++
    if (j - i > bestLength) {
      bestStart = i
      bestLength = j - i
    }
    i = j
  }
  const hex = groups.map((g) => g.toString(16))
  if (bestStart < 0) return hex.join(":")
  return `${hex.slice(0, bestStart).join(":")}::${hex.slice(bestStart + bestLength).join(":")}`
}

/** What a server's exchanges share: answers close their connection once it is stopping. */
interface ServerState {
  closing: boolean
  /** A body must have arrived this long after its request (HTTP_REQUEST_TIMEOUT_MS). */
  readonly requestTimeoutMs: number
  /** Deferred answers not yet ended or aborted: a close waits for them (up to drainMs). */
  pending: number
}

const contentLength = (body: string | Uint8Array) =>
  typeof body === "string" ? Buffer.byteLength(body) : body.byteLength

/**
 * Ends a uWS response. This uWS build sends a body on HEAD if given one, and
 * endWithoutBody(n) with n > 0 (or any explicit first argument but a number) never completes
 * the response unless it also closes the connection: a kept-alive HEAD answer writes its
 * Content-Length itself and calls endWithoutBody() without arguments.
 */
const uwsEnd = (res: Uws.HttpResponse, isHead: boolean, body: string | Uint8Array, close: boolean) => {
  if (!isHead) res.end(body, close)
  else {
    const length = contentLength(body)
    if (length === 0 || close) res.endWithoutBody(length, close)
    else res.writeHeader("Content-Length", String(length)).endWithoutBody()
  }
}

/** Ends a uWS response that has no body (204, 304); one that closes says Content-Length: 0. */
const uwsEndEmpty = (res: Uws.HttpResponse, close: boolean) => {
  if (close) res.endWithoutBody(0, true)
  else res.endWithoutBody()
}

/** The exchange of the uWebSockets.js engine: one object per server, refilled per request. */
class UwsExchange implements HttpExchange {
  method = ""
  path = ""
  isHead = false
  /** Ended, or handed over to a deferred answer. */
  ended = false
  res!: Uws.HttpResponse
  req!: Uws.HttpRequest
  constructor(readonly state: ServerState) {}

  header(name: string): string {
    return this.req.getHeader(name)
  }
  query(): string {
    return this.req.getQuery() ?? ""
  }
  writeHeader(name: string, value: string): this {
    this.res.writeHeader(name, value)
    return this
  }
  remoteAddress(): string {
    // The binary form and our own formatting cost about half of the text form plus decoding.
    return ipText(new Uint8Array(this.res.getRemoteAddress()))
  }
  remoteAddressRaw(): ArrayBuffer {
    return this.res.getRemoteAddress()
  }
  writeStatus(code: number): this {
    this.res.writeStatus(STATUS_LINES[code] ?? String(code))
    return this
  }
  end(body: string | Uint8Array): void {
    uwsEnd(this.res, this.isHead, body, this.state.closing)
    this.ended = true
  }
  endWithoutBody(): void {
    uwsEndEmpty(this.res, this.state.closing)
    this.ended = true
  }
  defer(): DeferredAnswer {
    this.ended = true
    return new UwsDeferred(this.res, this.isHead, this.state)
  }
  readBody(maxBytes: number) {
    const declared = this.req.getHeader("content-length")
    const answer = this.defer() as UwsDeferred
    if (declared !== "" && !(Number(declared) <= maxBytes)) {
      answer.closeAfter = true
      return { answer, body: Promise.resolve(undefined) }
    }
    const body = new Promise<Uint8Array | undefined>((resolve) => {
      const chunks: Array<Buffer> = []
      let size = 0
      let done = false
      // A body that does not arrive in time: 408 and the connection closed; the caller's own
      // answer to the undefined body is then ignored.
      const deadline = setTimeout(() => {
        if (done) return
        done = true
        answer.closeAfter = true
        answer.writeStatus(408).writeHeader("Content-Type", "text/plain; charset=utf-8").end(TIMED_OUT)
        resolve(undefined)
      }, this.state.requestTimeoutMs)
      answer.onAbort = () => {
        clearTimeout(deadline)
        resolve(undefined)
      }
      this.res.onData((chunk, isLast) => {
        if (done) return
        size += chunk.byteLength
        if (size > maxBytes) {
          done = true
          clearTimeout(deadline)
          answer.closeAfter = true
          return resolve(undefined)
        }
        // The chunk is neutered when this callback returns: copy it.
        if (chunk.byteLength > 0) chunks.push(Buffer.from(new Uint8Array(chunk)))
        if (isLast) {
          done = true
          clearTimeout(deadline)
          resolve(Buffer.concat(chunks, size))
        }
      })
    })
    return { answer, body }
  }
}

/** A uWS answer given later: headers are buffered, then written and ended in one cork. */
class UwsDeferred implements DeferredAnswer {
  aborted = false
  closeAfter = false
  onAbort: (() => void) | undefined
  private done = false
  private status = "200 OK"
  private readonly headers: Array<string> = []
  constructor(
    private readonly res: Uws.HttpResponse,
    private readonly isHead: boolean,
    private readonly state: ServerState
  ) {
    state.pending++
    // Without an abort handler uWS terminates the process when the handler returns.
    res.onAborted(() => {
      this.aborted = true
      this.settle()
      this.onAbort?.()
    })
  }
  private settle() {
    if (this.done) return
    this.done = true
    this.state.pending--
  }
  writeStatus(code: number): this {
    this.status = STATUS_LINES[code] ?? String(code)
    return this
  }
  writeHeader(name: string, value: string): this {
    this.headers.push(name, value)
    return this
  }
  private finish(write: (res: Uws.HttpResponse, close: boolean) => void) {
    if (this.aborted || this.done) return
    this.settle()
    const close = this.closeAfter || this.state.closing
    this.res.cork(() => {
      this.res.writeStatus(this.status)
      for (let i = 0; i < this.headers.length; i += 2) this.res.writeHeader(this.headers[i]!, this.headers[i + 1]!)
      write(this.res, close)
    })
  }
  end(body: string | Uint8Array): void {
    this.finish((res, close) => uwsEnd(res, this.isHead, body, close))
  }
  endWithoutBody(): void {
    this.finish(uwsEndEmpty)
  }
}

/** Waits until no deferred answer is pending, or `ms` passed. */
const drainPending = (state: ServerState, ms: number) =>
  Effect.promise(async () => {
    const until = Date.now() + ms
    while (state.pending > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 10))
  })

const serveUws = (uws: UwsModule, options: ServeOptions, deadlines: HttpDeadlines) =>
  Effect.acquireRelease(
    Effect.async<{ socket: Uws.us_listen_socket; state: ServerState; port: number }, HttpServerError>((resume) => {
      const state: ServerState = { closing: false, pending: 0, requestTimeoutMs: deadlines.requestTimeoutMs }
      const exchange = new UwsExchange(state)
      const app = uws.App()
      app.any("/*", (res, req) => {
        exchange.res = res
        exchange.req = req
        exchange.ended = false
        const method = req.getCaseSensitiveMethod()
        exchange.method = method
        exchange.isHead = method === "HEAD"
        exchange.path = req.getUrl()
        // uWebSockets.js takes request lines far beyond node's 16 KiB: the same limit here.
        if (exchange.path.length > MAX_HEADER_BYTES) {
          res.cork(() => {
            res.writeStatus(STATUS_LINES[431]!).writeHeader("Content-Type", "text/plain; charset=utf-8")
            res.end(TOO_LARGE, true)
          })
          return
        }
        try {
          options.handler(exchange)
        } catch (error) {
          options.onError(error)
        }
        // Unanswered (it threw, or forgot): uWS aborts the process on a dangling response.
        if (!exchange.ended) {
          try {
            exchange.writeStatus(500).writeHeader("Content-Type", "text/plain").end(INTERNAL_ERROR)
          } catch {
            res.close()
          }
        }
      })
      // uSockets shares ports by default: without the exclusive flag a second process on a
      // used port would start silently and take part of the traffic.
      const LIBUS_LISTEN_DEFAULT = 0
      const LIBUS_LISTEN_EXCLUSIVE_PORT = 1
      const flags = options.reusePort === true ? LIBUS_LISTEN_DEFAULT : LIBUS_LISTEN_EXCLUSIVE_PORT
      const listen = app.listen as unknown as (
        host: string,
        port: number,
        flags: number,
        cb: (socket: Uws.us_listen_socket | false) => void
      ) => void
      listen.call(app, options.host, options.port, flags, (socket) => {
        if (socket === false) {
          resume(
            Effect.fail(
              new HttpServerError({
                message:
                  `could not listen on ${options.host}:${options.port}: port ${options.port} is in use` +
                  (options.reusePort === true ? " by a listener that does not share it" : "") +
                  " (or not permitted)"
              })
            )
          )
        } else {
          resume(Effect.succeed({ socket, state, port: uws.us_socket_local_port(socket as never) }))
        }
      })
    }),
    ({ socket, state }) =>
      Effect.gen(function* () {
        uws.us_listen_socket_close(socket)
        // From now on every answer closes its connection; idle keep-alive connections are
        // closed by uWS's own idle timeout. Deferred answers in flight get up to drainMs;
        // the short wait lets requests already on the wire still be answered.
        state.closing = true
        yield* drainPending(state, options.drainMs ?? 5_000)
        yield* Effect.sleep("50 millis")
      })
  )

/** The exchange of the node:http engine: one per request (this engine is the fallback). */
class NodeExchange implements HttpExchange, DeferredAnswer {
  readonly method: string
  readonly path: string
  private readonly rawQuery: string
  ended = false
  deferred = false
  aborted = false
  private code = 200
  private readonly headers: Array<string> = []
  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse
  ) {
    this.method = req.method ?? "GET"
    const url = req.url ?? "/"
    const q = url.indexOf("?")
    this.path = q < 0 ? url : url.slice(0, q)
    this.rawQuery = q < 0 ? "" : url.slice(q + 1)
  }
  header(name: string): string {
    const v = this.req.headers[name]
    return v === undefined ? "" : Array.isArray(v) ? v.join(", ") : v
  }
  query(): string {
    return this.rawQuery
  }
  writeHeader(name: string, value: string): this {
    this.headers.push(name, value)
    return this
  }
  remoteAddress(): string {
    return this.req.socket.remoteAddress ?? ""
  }
  remoteAddressRaw(): string {
    return this.remoteAddress()
  }
  writeStatus(code: number): this {
    this.code = code
    return this
  }
  end(body: string | Uint8Array): void {
    if (this.ended || this.aborted) return
    this.headers.push("Content-Length", String(contentLength(body)))
    this.res.writeHead(this.code, this.headers)
    this.res.end(body)
    this.ended = true
  }
  endWithoutBody(): void {
    if (this.ended || this.aborted) return
    this.res.writeHead(this.code, this.headers)
    this.res.end()
    this.ended = true
  }
  defer(): DeferredAnswer {
    this.deferred = true
    this.res.once("close", () => {
      if (!this.ended) this.aborted = true
    })
    return this
  }
  readBody(maxBytes: number) {
    const answer = this.defer()
    const tooLarge = () => {
      this.headers.push("Connection", "close")
      return undefined
    }
    const declared = this.header("content-length")
    if (declared !== "" && !(Number(declared) <= maxBytes)) {
      return { answer, body: Promise.resolve(tooLarge()) }
    }
    const body = new Promise<Uint8Array | undefined>((resolve) => {
      const chunks: Array<Buffer> = []
      let size = 0
      const onData = (chunk: Buffer) => {
        size += chunk.byteLength
        if (size > maxBytes) {
          this.req.off("data", onData)
          this.req.pause()
          return resolve(tooLarge())
        }
        chunks.push(chunk)
      }
      this.req.on("data", onData)
      this.req.once("end", () => resolve(Buffer.concat(chunks, size)))
      this.req.once("error", () => resolve(undefined))
      this.req.once("close", () => resolve(undefined))
    })
    return { answer, body }
  }
}

const serveNode = (options: ServeOptions, deadlines: HttpDeadlines) =>
  Effect.acquireRelease(
    Effect.async<{ server: ReturnType<typeof createServer>; port: number }, HttpServerError>((resume) => {
      const server = createServer({ keepAliveTimeout: 65_000, ...serverOptions(deadlines) }, (req, res) => {
        const exchange = new NodeExchange(req, res)
        try {
          options.handler(exchange)
        } catch (error) {
          options.onError(error)
        }
        if (!exchange.ended && !exchange.deferred) {
          exchange.writeStatus(500).writeHeader("Content-Type", "text/plain").end(INTERNAL_ERROR)
        }
      })
      server.on("clientError", answerClientError("text"))
      const onError = (error: NodeJS.ErrnoException) =>
        resume(
          Effect.fail(
            new HttpServerError({
              message:
                error.code === "EADDRINUSE"
                  ? `could not listen on ${options.host}:${options.port}: port ${options.port} is in use`
                  : `could not listen on ${options.host}:${options.port}: ${error.message}`,
              cause: error
            })
          )
        )
      server.once("error", onError)
      server.listen(options.port, options.host, () => {
        server.off("error", onError)
        const address = server.address()
        resume(Effect.succeed({ server, port: typeof address === "object" && address ? address.port : options.port }))
      })
    }),
    ({ server }) =>
      Effect.async<void>((resume) => {
        // Stop accepting, answer what is in flight, close keep-alive connections once idle,
        // and cut whatever is still open after drainMs.
        const idle = setInterval(() => server.closeIdleConnections(), 50)
        const cut = setTimeout(() => server.closeAllConnections(), options.drainMs ?? 5_000)
        server.close(() => {
          clearInterval(idle)
          clearTimeout(cut)
          resume(Effect.void)
        })
        server.closeIdleConnections()
      })
  )

/**
 * A minimal HTTP server for the redirector and the media host: uWebSockets.js when its
 * native module loads (unless HTTP_ENGINE=node), node:http otherwise, behind one interface.
 * Closing the scope stops listening and lets in-flight requests finish.
 */
export const serveHttp = (
  options: ServeOptions
): Effect.Effect<RunningHttpServer, HttpServerError | ConfigError.ConfigError, Scope.Scope> =>
  Effect.gen(function* () {
    const wanted = yield* httpEngineConfig
    const deadlines = yield* httpDeadlinesConfig
    if (wanted !== "node") {
      const uws = loadUws()
      if ("module" in uws) {
        const { port } = yield* serveUws(uws.module, options, deadlines)
        return { engine: "uWebSockets.js", port, fallbackReason: undefined } as const
      }
      if (wanted === "uws") {
        return yield* new HttpServerError({ message: `HTTP_ENGINE=uws but uWebSockets.js does not load: ${uws.error}` })
      }
      if (options.reusePort === true) {
        return yield* new HttpServerError({
          message: `port ${options.port} cannot be shared: uWebSockets.js does not load (${uws.error}) and node:http cannot share a port`
        })
      }
      const { port } = yield* serveNode(options, deadlines)
      return { engine: "node:http", port, fallbackReason: `uWebSockets.js does not load: ${uws.error}` } as const
    }
    if (options.reusePort === true) {
      return yield* new HttpServerError({
        message: `port ${options.port} cannot be shared with HTTP_ENGINE=node: node:http cannot share a port`
      })
    }
    const { port } = yield* serveNode(options, deadlines)
    return { engine: "node:http", port, fallbackReason: undefined } as const
  })
