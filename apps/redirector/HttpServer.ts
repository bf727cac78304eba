import type * as Uws from "uWebSockets.js"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import { createRequire } from "node:module"
import { Config, type ConfigError, Data, Effect, type Scope } from "effect"

/**
 * One request and its answer, for handlers that answer at once. Everything must be read and
 * the answer ended before the handler returns: the uWebSockets.js request lives on the stack
 * of the call, and its exchange object is reused for the next request.
 */
export interface HttpExchange {
  /** As sent, upper case for every real client: "GET", "HEAD", … */
  readonly method: string
  /** The path, without the query string. */
  readonly path: string
  /** A request header by lower-case name; "" when absent. */
  header(lowerCaseName: string): string
  /** The peer of the TCP connection (never a forwarded-for header). */
  remoteAddress(): string
  writeStatus(code: number): HttpExchange
  writeHeader(name: string, value: string): HttpExchange
  /** Ends the answer; for HEAD the body is left out. */
  end(body: string): void
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
}

const STATUS_LINES: Record<number, string> = {
  200: "200 OK",
  204: "204 No Content",
  301: "301 Moved Permanently",
  302: "302 Found",
  304: "304 Not Modified",
  400: "400 Bad Request",
  404: "404 Not Found",
  405: "405 Method Not Allowed",
  500: "500 Internal Server Error",
  503: "503 Service Unavailable"
}

const INTERNAL_ERROR = "Internal Server Error\n"

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

/**
 * An address in the text form node:http gives: dotted IPv4 (also for IPv4-mapped IPv6), and
 * RFC 5952 IPv6 (lower case, no leading zeros, the longest run of zero groups as "::").
 */
export const ipText = (b: Uint8Array): string => {
  if (b.length === 4) return `${b[0]}.${b[1]}.${b[2]}.${b[3]}`
  if (b.length !== 16) return ""
  if (b[10] === 0xff && b[11] === 0xff && b.subarray(0, 10).every((x) => x === 0)) {
    return `${b[12]}.${b[13]}.${b[14]}.${b[15]}`
  }
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

/** The exchange of the uWebSockets.js engine: one object per server, refilled per request. */
class UwsExchange implements HttpExchange {
  method = ""
  path = ""
  isHead = false
  ended = false
  closing = false
  res!: Uws.HttpResponse
  req!: Uws.HttpRequest

  header(name: string): string {
    return this.req.getHeader(name)
  }
  writeHeader(name: string, value: string): HttpExchange {
    this.res.writeHeader(name, value)
    return this
  }
  remoteAddress(): string {
    // The binary form and our own formatting cost about half of the text form plus decoding.
    return ipText(new Uint8Array(this.res.getRemoteAddress()))
  }
  writeStatus(code: number): HttpExchange {
    this.res.writeStatus(STATUS_LINES[code] ?? String(code))
    return this
  }
  end(body: string): void {
    // This uWS build sends a body on HEAD if given one, and endWithoutBody(n) with n > 0
    // never completes the response: a HEAD answer announces Content-Length: 0.
    if (this.isHead) this.res.endWithoutBody(0, this.closing)
    else this.res.end(body, this.closing)
    this.ended = true
  }
}

const serveUws = (uws: UwsModule, options: ServeOptions) =>
  Effect.acquireRelease(
    Effect.async<{ socket: Uws.us_listen_socket; exchange: UwsExchange; port: number }, HttpServerError>((resume) => {
      const exchange = new UwsExchange()
      const app = uws.App()
      app.any("/*", (res, req) => {
        exchange.res = res
        exchange.req = req
        exchange.ended = false
        const method = req.getCaseSensitiveMethod()
        exchange.method = method
        exchange.isHead = method === "HEAD"
        exchange.path = req.getUrl()
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
      app.listen(options.host, options.port, (socket) => {
        if (socket === false) {
          resume(
            Effect.fail(
              new HttpServerError({
                message: `could not listen on ${options.host}:${options.port} (address in use or not permitted)`
              })
            )
          )
        } else {
          resume(Effect.succeed({ socket, exchange, port: uws.us_socket_local_port(socket as never) }))
        }
      })
    }),
    ({ socket, exchange }) =>
      Effect.gen(function* () {
        uws.us_listen_socket_close(socket)
        // From now on every answer closes its connection; idle keep-alive connections are
        // closed by uWS's own idle timeout. Answers are synchronous, so nothing is half done;
        // the short wait lets requests already on the wire still be answered.
        exchange.closing = true
        yield* Effect.sleep("50 millis")
      })
  )

/** The exchange of the node:http engine: one per request (this engine is the fallback). */
class NodeExchange implements HttpExchange {
  readonly method: string
  readonly path: string
  ended = false
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
  }
  header(name: string): string {
    const v = this.req.headers[name]
    return v === undefined ? "" : Array.isArray(v) ? v.join(", ") : v
  }
  writeHeader(name: string, value: string): HttpExchange {
    this.headers.push(name, value)
    return this
  }
  remoteAddress(): string {
    return this.req.socket.remoteAddress ?? ""
  }
  writeStatus(code: number): HttpExchange {
    this.code = code
    return this
  }
  end(body: string): void {
    this.headers.push("Content-Length", String(Buffer.byteLength(body)))
    this.res.writeHead(this.code, this.headers)
    this.res.end(body)
    this.ended = true
  }
}

const serveNode = (options: ServeOptions) =>
  Effect.acquireRelease(
    Effect.async<{ server: ReturnType<typeof createServer>; port: number }, HttpServerError>((resume) => {
      const server = createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
        const exchange = new NodeExchange(req, res)
        try {
          options.handler(exchange)
        } catch (error) {
          options.onError(error)
        }
        if (!exchange.ended) exchange.writeStatus(500).writeHeader("Content-Type", "text/plain").end(INTERNAL_ERROR)
      })
      server.on("clientError", (_error, socket) => {
        if (socket.writable) socket.end("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        else socket.destroy()
      })
      const onError = (error: Error) =>
        resume(
          Effect.fail(
            new HttpServerError({ message: `could not listen on ${options.host}:${options.port}`, cause: error })
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
    if (wanted !== "node") {
      const uws = loadUws()
      if ("module" in uws) {
        const { port } = yield* serveUws(uws.module, options)
        return { engine: "uWebSockets.js", port, fallbackReason: undefined } as const
      }
      if (wanted === "uws") {
        return yield* new HttpServerError({ message: `HTTP_ENGINE=uws but uWebSockets.js does not load: ${uws.error}` })
      }
      const { port } = yield* serveNode(options)
      return { engine: "node:http", port, fallbackReason: `uWebSockets.js does not load: ${uws.error}` } as const
    }
    const { port } = yield* serveNode(options)
    return { engine: "node:http", port, fallbackReason: undefined } as const
  })
