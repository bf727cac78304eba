import type * as Uws from "uWebSockets.js"
import { Effect } from "effect"
import { type HttpDeadlines, MAX_HEADER_BYTES } from "./ClientErrors.js"
import { contentLength, HttpServerError, INTERNAL_ERROR } from "./EngineShared.js"
import type { DeferredAnswer, HttpExchange, ServeOptions, StatusWithHeaders } from "./Exchange.js"
import { ipText, ipv4Text } from "./IpText.js"
import { currentPeerView } from "./PeerAddress.js"

export type UwsModule = typeof Uws

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

/**
 * Arguments as bytes: uWebSockets.js turns a string argument into UTF-8 in a buffer it
 * allocates and frees per call (V8's String::Utf8Value), and reads bytes where they are; for a
 * header read that is ~250 ns against ~135 ns on a 2-core VM. Status lines and header names are
 * few and fixed, so each is encoded once, as an ArrayBuffer of its own (a Buffer would cost
 * the binding one more step to its memory); values stay as given (many change per answer).
 */
const bytesOf = (s: string): ArrayBuffer => {
  const bytes = new Uint8Array(s.length)
  bytes.set(Buffer.from(s, "latin1"))
  return bytes.buffer
}
const STATUS_BYTES: Record<number, ArrayBuffer> = Object.fromEntries(
  Object.entries(STATUS_LINES).map(([code, line]) => [code, bytesOf(line)])
)
/** Header names encoded so far, at most NAMES_HELD: past that a name goes as the string it is. */
const nameBytes = new Map<string, ArrayBuffer>()
const NAMES_HELD = 256
const nameOf = (name: string): ArrayBuffer | string => {
  let bytes = nameBytes.get(name)
  if (bytes === undefined) {
    if (nameBytes.size >= NAMES_HELD) return name
    bytes = bytesOf(name)
    nameBytes.set(name, bytes)
  }
  return bytes
}
/**
 * The status line's text after "HTTP/1.1 ", as uWebSockets.js writes it (then "\r\n"): with a
 * status's fixed headers it is "302 Found\r\nCache-Control: private, no-store", one argument.
 */
const statusOf = (status: number | StatusWithHeaders): ArrayBuffer | string => {
  if (typeof status === "number") return STATUS_BYTES[status] ?? String(status)
  if (status.encoded === undefined) {
    const line = STATUS_LINES[status.code] ?? String(status.code)
    status.encoded = bytesOf(line + status.headers.map(([name, value]) => `\r\n${name}: ${value}`).join(""))
  }
  return status.encoded as ArrayBuffer
}

const TIMED_OUT = "The request did not arrive in time; the connection is closed.\n"
const TOO_LARGE = `The request line and headers are larger than ${MAX_HEADER_BYTES} bytes.\n`

/** What a server's exchanges share: answers close their connection once it is stopping. */
interface ServerState {
  closing: boolean
  /** A body must have arrived this long after its request (HTTP_REQUEST_TIMEOUT_MS). */
  readonly requestTimeoutMs: number
  /** Deferred answers not yet ended or aborted: a close waits for them (up to drainMs). */
  pending: number
}

/**
 * Ends a uWS response. This uWS build sends a body on HEAD if given one, and
 * endWithoutBody(n) with n > 0 (or any explicit first argument but a number) never completes
 * the response unless it also closes the connection: a kept-alive HEAD answer writes its
 * Content-Length itself and calls endWithoutBody() without arguments.
 */
const uwsEnd = (res: Uws.HttpResponse, isHead: boolean, body: string | Uint8Array, close: boolean) => {
  // An empty body goes as no argument at all: bytes (or a string) would be converted per call.
  if (!isHead) res.end(body === "" ? undefined : body, close)
  else {
    const length = contentLength(body)
    if (length === 0 || close) res.endWithoutBody(length, close)
    else res.writeHeader(nameOf("Content-Length"), String(length)).endWithoutBody()
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
  /** Set while the handler runs: uWebSockets.js called it on what it just read from this request's connection. */
  serving = false
  constructor(
    readonly state: ServerState,
    /** This thread's current peer (PeerAddress.ts), when the peer-address library and its addon are loaded. */
    private readonly peer: Uint32Array | undefined
  ) {}

  header(name: string): string {
    return this.req.getHeader(nameOf(name))
  }
  query(): string {
    return this.req.getQuery() ?? ""
  }
  writeHeader(name: string, value: string | Uint8Array): this {
    this.res.writeHeader(nameOf(name), value)
    return this
  }
  remoteAddress(): string {
    const raw = this.remoteAddressRaw()
    // The binary form and our own formatting cost about half of the text form plus decoding.
    return typeof raw === "number" ? ipv4Text(raw) : ipText(new Uint8Array(raw))
  }
  remoteAddressRaw(): number | ArrayBuffer {
    // While the handler runs, the peer noted at the read that brought this request (two array
    // reads); otherwise a call that allocates an ArrayBuffer per read (and, without the
    // library, makes a getpeername(2)): uWebSockets.js keeps no address per connection.
    const peer = this.peer
    if (peer !== undefined && this.serving && peer[0] === 4) return peer[1]!
    return this.res.getRemoteAddress()
  }
  writeStatus(status: number | StatusWithHeaders): this {
    this.res.writeStatus(statusOf(status))
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
    const declared = this.header("content-length")
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
  private status: ArrayBuffer | string = STATUS_BYTES[200]!
  private readonly headers: Array<string | Uint8Array> = []
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
  writeStatus(status: number | StatusWithHeaders): this {
    this.status = statusOf(status)
    return this
  }
  writeHeader(name: string, value: string | Uint8Array): this {
    // Bytes are copied: a view of a table that may change before the answer is written.
    this.headers.push(name, typeof value === "string" ? value : value.slice())
    return this
  }
  private finish(write: (res: Uws.HttpResponse, close: boolean) => void) {
    if (this.aborted || this.done) return
    this.settle()
    const close = this.closeAfter || this.state.closing
    this.res.cork(() => {
      this.res.writeStatus(this.status)
      for (let i = 0; i < this.headers.length; i += 2)
        this.res.writeHeader(nameOf(this.headers[i] as string), this.headers[i + 1]!)
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

export const serveUws = (uws: UwsModule, options: ServeOptions, deadlines: HttpDeadlines) =>
  Effect.acquireRelease(
    Effect.async<
      { app: Uws.TemplatedApp; socket: Uws.us_listen_socket; state: ServerState; port: number },
      HttpServerError
    >((resume) => {
      const state: ServerState = { closing: false, pending: 0, requestTimeoutMs: deadlines.requestTimeoutMs }
      const exchange = new UwsExchange(state, currentPeerView())
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
            res.writeStatus(statusOf(431)).writeHeader(nameOf("Content-Type"), "text/plain; charset=utf-8")
            res.end(TOO_LARGE, true)
          })
          return
        }
        exchange.serving = true
        try {
          options.handler(exchange)
        } catch (error) {
          options.onError(error)
        } finally {
          exchange.serving = false
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
          resume(Effect.succeed({ app, socket, state, port: uws.us_socket_local_port(socket as never) }))
        }
      })
    }),
    ({ app, socket, state }) =>
      Effect.gen(function* () {
        uws.us_listen_socket_close(socket)
        // From now on every answer closes its connection. Deferred answers in flight get up
        // to drainMs; the short wait lets requests already on the wire still be answered.
        state.closing = true
        yield* drainPending(state, options.drainMs ?? 5_000)
        yield* Effect.sleep("50 millis")
        // Then the connections still open (idle keep-alive ones) are cut: a worker thread's
        // event loop must hold no uWS handle when it ends (Node aborts the process otherwise).
        const closeAll = (app as unknown as { close?: () => void }).close
        closeAll?.call(app)
      })
  )
