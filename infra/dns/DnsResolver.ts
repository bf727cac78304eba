import { Resolver } from "node:dns/promises"
import { isIP } from "node:net"
import { Config, type ConfigError, Duration, Effect, Layer } from "effect"
import type { ProofLookup } from "../../domain/Domain.js"
import { DnsResolver } from "../../domain/ports/DnsResolver.js"

export interface DnsResolverOptions {
  /** `host[:port]` (IPv6 as `[addr]:port`); empty: the system's resolvers. */
  readonly servers: ReadonlyArray<string>
  /** The bound of one lookup, retries included. */
  readonly timeoutMs: number
}

const SERVER = /^(?:\[([0-9a-fA-F:.]+)\]|([0-9.]+))(?::(\d{1,5}))?$/

/** Whether a DNS_SERVERS entry is an address with an optional port (names would need a resolver themselves). */
export const isDnsServer = (entry: string): boolean => {
  const m = SERVER.exec(entry)
  if (m === null) return false
  const address = m[1] ?? m[2]!
  return isIP(address) !== 0 && (m[3] === undefined || Number(m[3]) <= 65535)
}

const serverList = (s: string): ReadonlyArray<string> =>
  s
    .split(",")
    .map((e) => e.trim())
    .filter((e) => e !== "")

/** DNS_SERVERS (comma-separated `host[:port]`, default the system's) and DNS_TIMEOUT_MS (default 5000). */
export const dnsConfig = Config.all({
  // Validation sits before the mapping and the default: that way a failure names the variable.
  servers: Config.string("DNS_SERVERS").pipe(
    Config.validate({
      message: "must be a comma-separated list of IP addresses with optional ports (1.1.1.1, 127.0.0.1:5353, [::1]:53)",
      validation: (s) => serverList(s).every(isDnsServer)
    }),
    Config.map(serverList),
    Config.withDefault([] as ReadonlyArray<string>)
  ),
  timeoutMs: Config.integer("DNS_TIMEOUT_MS").pipe(
    Config.validate({ message: "must be 100 to 60000 (milliseconds)", validation: (n) => n >= 100 && n <= 60_000 }),
    Config.withDefault(5000)
  )
})

const TIMEOUT_CODES = new Set(["ETIMEOUT", "ETIMEDOUT", "ECANCELLED"])
const NO_RECORD_CODES = new Set(["ENODATA", "ENOTFOUND"])

const lookupOf = (error: unknown): ProofLookup => {
  const code = (error as { code?: unknown } | null)?.code
  if (typeof code === "string" && NO_RECORD_CODES.has(code)) return { _tag: "NoRecord" }
  if (typeof code === "string" && TIMEOUT_CODES.has(code)) return { _tag: "Timeout" }
  return { _tag: "Failed", reason: typeof code === "string" ? code : String(error) }
}

/** The adapter: a node:dns Resolver on the given servers; each lookup bounded by the timeout. */
export const makeDnsResolver = (options: DnsResolverOptions) => {
  const perTry = Math.max(50, Math.floor(options.timeoutMs / 2))
  const resolver = new Resolver({ timeout: perTry, tries: 2 })
  if (options.servers.length > 0) resolver.setServers([...options.servers])
  const txt = (name: string): Effect.Effect<ProofLookup> =>
    Effect.tryPromise(() => resolver.resolveTxt(name)).pipe(
      Effect.map((records): ProofLookup => ({ _tag: "Found", values: records.map((parts) => parts.join("")) })),
      Effect.catchAll((e) => Effect.succeed(lookupOf(e.error))),
      Effect.timeoutTo({
        duration: Duration.millis(options.timeoutMs),
        onSuccess: (found) => found,
        onTimeout: (): ProofLookup => ({ _tag: "Timeout" })
      }),
      Effect.withSpan("DnsResolver.txt", { attributes: { name } })
    )
  return DnsResolver.of({ txt })
}

export const dnsResolverLayer = (options: DnsResolverOptions) => Layer.succeed(DnsResolver, makeDnsResolver(options))

/** From DNS_SERVERS and DNS_TIMEOUT_MS. */
export const DnsResolverLive: Layer.Layer<DnsResolver, ConfigError.ConfigError> = Layer.effect(
  DnsResolver,
  Effect.gen(function* () {
    return makeDnsResolver(yield* dnsConfig)
  })
)
