import { Config, Context, Effect, Layer, Option, Redacted } from "effect"

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

const ports = Config.all({
  apiPort: port("API_PORT", 8080),
  shortPort: port("SHORT_PORT", 8081),
  mediaPort: port("MEDIA_PORT", 8082)
})

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
  // Empty counts as unset: the embedded default.
  databaseUrl: Config.option(Config.redacted("DATABASE_URL")).pipe(
    Config.map(Option.filter((url) => Redacted.value(url).trim() !== ""))
  )
}).pipe(
  Config.map(({ ports, apiBase, shortBase, imageHost, ...rest }) => ({
    ...ports,
    ...rest,
    apiBase: Option.getOrElse(apiBase, () => `http://localhost:${ports.apiPort}/v1`),
    shortBase: Option.getOrElse(shortBase, () => `http://localhost:${ports.shortPort}`),
    imageHost: Option.getOrElse(imageHost, () => `http://localhost:${ports.mediaPort}`)
  }))
)

export interface AppConfigShape {
  readonly dataDir: string
  readonly apiPort: number
  readonly shortPort: number
  readonly mediaPort: number
  readonly apiBase: string
  readonly shortBase: string
  readonly imageHost: string
  readonly databaseUrl: Option.Option<Redacted.Redacted>
}

export class AppConfig extends Context.Tag("AppConfig")<AppConfig, AppConfigShape>() {
  static readonly layer = Layer.effect(AppConfig, appConfig)
  static readonly make = (overrides: Partial<AppConfigShape>) =>
    Layer.effect(
      AppConfig,
      Effect.map(appConfig, (c) => ({ ...c, ...overrides }))
    )
}
