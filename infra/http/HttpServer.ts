import { createRequire } from "node:module"
import { Config, type ConfigError, Effect, type Scope } from "effect"
import { httpDeadlinesConfig } from "./ClientErrors.js"
import { HttpServerError } from "./EngineShared.js"
import type { RunningHttpServer, ServeOptions } from "./Exchange.js"
import { serveNode } from "./NodeHttpServer.js"
import { serveUws, type UwsModule } from "./UwsServer.js"

export { HttpServerError } from "./EngineShared.js"
export type {
  DeferredAnswer,
  HttpAnswer,
  HttpEngine,
  HttpExchange,
  HttpHandler,
  RawPeer,
  RunningHttpServer,
  ServeOptions
} from "./Exchange.js"
export { StatusWithHeaders } from "./Exchange.js"
export { ipText, ipv4Offset, ipv4Text } from "./IpText.js"

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
