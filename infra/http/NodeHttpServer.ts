import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import { Effect } from "effect"
import { answerClientError, type HttpDeadlines, serverOptions } from "./ClientErrors.js"
import { contentLength, HttpServerError, INTERNAL_ERROR } from "./EngineShared.js"
import type { DeferredAnswer, HttpExchange, ServeOptions, StatusWithHeaders } from "./Exchange.js"

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
  writeHeader(name: string, value: string | Uint8Array): this {
    this.headers.push(name, typeof value === "string" ? value : Buffer.from(value).toString("latin1"))
    return this
  }
  remoteAddress(): string {
    return this.req.socket.remoteAddress ?? ""
  }
  remoteAddressRaw(): string {
    return this.remoteAddress()
  }
  writeStatus(status: number | StatusWithHeaders): this {
    if (typeof status === "number") this.code = status
    else {
      this.code = status.code
      for (const [name, value] of status.headers) this.headers.push(name, value)
    }
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

export const serveNode = (options: ServeOptions, deadlines: HttpDeadlines) =>
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
