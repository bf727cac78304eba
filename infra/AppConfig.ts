import { Config, Context, Effect, Layer, Option, Redacted } from "effect"
import {
  invalidTrustedProxy,
  makeTrustedProxies,
  type TrustedProxies,
  trustedProxyEntries
} from "./http/TrustedProxies.js"

const trimSlash = (s: string) => s.replace(/\/+$/, "")

// Validation sits before the default: that way a failure names the variable.
const httpBase = (name: string, suffix = "") =>
  Config.string(name).pipe(
    Config.validate({
      message: `must be an absolute http(s) URL${suffix ? ` ending with ${suffix}` : ""}`,
      validation: (s) => URL.canParse(s) && /^https?:$/.test(new URL(s).protocol) && trimSlash(s).endsWith(suffix)
    }),
    Config.map(trimSlash),
    Config.option
  )

const port = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.validate({ message: "must be a TCP port (0 to 65535)", validation: (n) => n >= 0 && n <= 65535 }),
    Config.withDefault(fallback)
  )

/** The ports the service's listeners take, by setting: `listenPorts` reads them all. */
const portSettings = {
  apiPort: port("API_PORT", 8080),
  shortPort: port("SHORT_PORT", 8081),
  mediaPort: port("MEDIA_PORT", 8082),
  // Health endpoints of a workers process run on its own (`npm run start:workers`).
  workersPort: port("WORKERS_PORT", 8084),
  // The snapshot host (apps/snapshots): its own origin, so captured pages share nothing with the others.
  snapshotPort: port("SNAPSHOT_PORT", 8083)
}
const ports = Config.all(portSettings)

/**
 * Every setting the service reads, read once at start. Names are stable: scripts rely on
 * them. The public bases default to localhost on the configured ports.
 */
export const appConfig = Config.all({
  dataDir: Config.string("DATA_DIR").pipe(Config.withDefault("./data")),
  ports,
  apiBase: httpBase("PUBLIC_API_BASE", "/v1"),
  shortBase: httpBase("PUBLIC_SHORT_BASE"),
  imageHost: httpBase("PUBLIC_IMAGE_HOST"),
  snapshotHost: httpBase("PUBLIC_SNAPSHOT_HOST"),
  // Empty counts as unset: the embedded default.
  databaseUrl: Config.option(Config.redacted("DATABASE_URL")).pipe(
    Config.map(Option.filter((url) => Redacted.value(url).trim() !== ""))
  ),
  // Comma-separated host:port list; empty or unset: the embedded log in PostgreSQL.
  kafkaBrokers: Config.string("KAFKA_BROKERS").pipe(
    Config.map((s) =>
      s
        .split(",")
        .map((b) => b.trim())
        .filter((b) => b !== "")
    ),
    Config.validate({
      message: "must be a comma-separated list of host:port",
      validation: (list) => list.every((b) => /^[^\s:/]+:\d{1,5}$/.test(b))
    }),
    Config.withDefault([] as ReadonlyArray<string>)
  ),
  // http(s)://[user:password@]host:port[/database]; unset: chDB in-process under DATA_DIR.
  clickhouseUrl: Config.option(Config.redacted("CLICKHOUSE_URL")).pipe(
    Config.validate({
      message: "must be an http(s) URL of a ClickHouse server",
      validation: (o) =>
        Option.isNone(o) ||
        Redacted.value(o.value).trim() === "" ||
        (URL.canParse(Redacted.value(o.value)) && /^https?:$/.test(new URL(Redacted.value(o.value)).protocol))
    }),
    Config.map(Option.filter((url) => Redacted.value(url).trim() !== ""))
  ),
  // The header a trusted proxy in front of the redirector sets to the visitor's country
  // (e.g. CF-IPCountry); unset: country is unknown. Never read from untrusted clients.
  countryHeader: Config.string("TRUSTED_COUNTRY_HEADER").pipe(
    Config.validate({ message: "must be an HTTP header name", validation: (s) => /^[A-Za-z0-9-]*$/.test(s) }),
    Config.map((s) => s.toLowerCase()),
    Config.withDefault("")
  ),
  // The reverse proxies whose X-Forwarded-For is believed (http/TrustedProxies.ts); unset: nobody's.
  trustedProxies: Config.string("TRUSTED_PROXIES").pipe(
    Config.validate({
      message: "must be a comma-separated list of IP addresses or CIDR ranges (e.g. 10.0.0.0/8,fd00::/8,127.0.0.1)",
      validation: (s) => invalidTrustedProxy(trustedProxyEntries(s)) === undefined
    }),
    Config.withDefault(""),
    Config.map((s) => makeTrustedProxies(trustedProxyEntries(s)))
  )
}).pipe(
  Config.map(({ ports, apiBase, shortBase, imageHost, snapshotHost, ...rest }) => ({
    ...ports,
    ...rest,
    apiBase: Option.getOrElse(apiBase, () => `http://localhost:${ports.apiPort}/v1`),
    shortBase: Option.getOrElse(shortBase, () => `http://localhost:${ports.shortPort}`),
    imageHost: Option.getOrElse(imageHost, () => `http://localhost:${ports.mediaPort}`),
    snapshotHost: Option.getOrElse(snapshotHost, () => `http://localhost:${ports.snapshotPort}`)
  }))
)

export interface AppConfigShape {
  readonly dataDir: string
  readonly apiPort: number
  readonly shortPort: number
  readonly mediaPort: number
  readonly workersPort: number
  readonly snapshotPort: number
  readonly apiBase: string
  readonly shortBase: string
  readonly imageHost: string
  /** {snapshot_host}: PUBLIC_SNAPSHOT_HOST, default http://localhost:SNAPSHOT_PORT. */
  readonly snapshotHost: string
  readonly databaseUrl: Option.Option<Redacted.Redacted>
  /** Empty: the embedded log in PostgreSQL. */
  readonly kafkaBrokers: ReadonlyArray<string>
  /** None: chDB in-process under DATA_DIR/clickhouse. */
  readonly clickhouseUrl: Option.Option<Redacted.Redacted>
  /** Lower-case header name, or "" when no trusted proxy sets one. */
  readonly countryHeader: string
  /** TRUSTED_PROXIES: the proxies whose X-Forwarded-For names the client; none by default. */
  readonly trustedProxies: TrustedProxies
}

/** The ports the service's listeners take (every one of `portSettings`): nothing else of it may bind them. */
export const listenPorts = (c: AppConfigShape): ReadonlyArray<number> =>
  (Object.keys(portSettings) as Array<keyof typeof portSettings>).map((setting) => c[setting])

export class AppConfig extends Context.Tag("AppConfig")<AppConfig, AppConfigShape>() {
  static readonly layer = Layer.effect(AppConfig, appConfig)
  static readonly make = (overrides: Partial<AppConfigShape>) =>
    Layer.effect(
      AppConfig,
      Effect.map(appConfig, (c) => ({ ...c, ...overrides }))
    )
}
