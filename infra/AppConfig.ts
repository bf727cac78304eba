import { Config, Context, Effect, Layer, Option, Redacted } from "effect"

const trimSlash = (s: string) => s.replace(/\/+$/, "")

// Validation sits before the default: that way a failure names the variable.
const httpBase = (name: string, fallback: string, suffix = "") =>
  Config.string(name).pipe(
    Config.validate({
      message: `must be an absolute http(s) URL${suffix ? ` ending with ${suffix}` : ""}`,
      validation: (s) => URL.canParse(s) && /^https?:$/.test(new URL(s).protocol) && trimSlash(s).endsWith(suffix)
    }),
    Config.withDefault(fallback),
    Config.map(trimSlash)
  )

const port = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.validate({ message: "must be a TCP port (0 to 65535)", validation: (n) => n >= 0 && n <= 65535 }),
    Config.withDefault(fallback)
  )

/** Every setting the service reads, read once at start. Names are stable: scripts rely on them. */
export const appConfig = Config.all({
  dataDir: Config.string("DATA_DIR").pipe(Config.withDefault("./data")),
  apiPort: port("API_PORT", 8080),
  shortPort: port("SHORT_PORT", 8081),
  mediaPort: port("MEDIA_PORT", 8082),
  apiBase: httpBase("PUBLIC_API_BASE", "http://localhost:8080/v1", "/v1"),
  shortBase: httpBase("PUBLIC_SHORT_BASE", "http://localhost:8081"),
  imageHost: httpBase("PUBLIC_IMAGE_HOST", "http://localhost:8082"),
  // Empty counts as unset: the embedded default.
  databaseUrl: Config.option(Config.redacted("DATABASE_URL")).pipe(
    Config.map(Option.filter((url) => Redacted.value(url).trim() !== ""))
  )
})

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
