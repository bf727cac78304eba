import { NodeRuntime } from "@effect/platform-node"
import { Cause, Config, ConfigError, Effect, Exit, Layer, Logger, LogLevel, Option } from "effect"
import { StartupError } from "./StartupError.js"

/** LOG_LEVEL (default Info) and one JSON object per log line. */
const LEVELS: Record<string, LogLevel.LogLevel> = {
  all: LogLevel.All,
  trace: LogLevel.Trace,
  debug: LogLevel.Debug,
  info: LogLevel.Info,
  warn: LogLevel.Warning,
  warning: LogLevel.Warning,
  error: LogLevel.Error,
  fatal: LogLevel.Fatal,
  none: LogLevel.None,
  off: LogLevel.None
}

/** LOG_LEVEL, case-insensitive: trace, debug, info, warn(ing), error, fatal, none/off, all. */
const logLevel = Config.string("LOG_LEVEL").pipe(
  Config.validate({
    message: `must be one of ${Object.keys(LEVELS).join(", ")}`,
    validation: (s) => s.trim().toLowerCase() in LEVELS
  }),
  Config.withDefault("info"),
  Config.map((s) => LEVELS[s.trim().toLowerCase()]!)
)

export const LoggingLive = Layer.unwrapEffect(
  Effect.map(logLevel, (level) => Layer.merge(Logger.json, Logger.minimumLogLevel(level)))
)

/**
 * The one line that says why an app could not start (a bad setting names its variable, a
 * port that cannot be bound names its variable, a known failure says what and why), or
 * undefined for a defect.
 */
export const failureLine = (cause: Cause.Cause<unknown>): string | undefined => {
  const failure = Cause.failureOption(cause)
  if (Option.isNone(failure)) return undefined
  if (ConfigError.isConfigError(failure.value)) return `configuration error: ${String(failure.value)}`
  if (failure.value instanceof StartupError) return `start-up failed: ${failure.value.message}`
  // A known failure (database unreachable, port taken…): one line that says what and why.
  const e = failure.value as { _tag?: string; message?: string; cause?: { message?: string } }
  const why = e.cause?.message ? `: ${e.cause.message}` : ""
  return `start-up failed: ${e._tag ?? "error"}: ${e.message ?? String(e)}${why}`
}

/**
 * Runs an app until SIGINT/SIGTERM, then releases its layers in reverse order: the HTTP
 * server stops accepting and drains in-flight requests, then pools close, then the
 * embedded database stops, and the last log line says so. A bad setting or a port that
 * cannot be bound stops start-up with one line on stderr naming the variable.
 */
export const runMain = <E>(app: Layer.Layer<never, E>) =>
  NodeRuntime.runMain(
    Layer.launch(app).pipe(
      Effect.onExit((exit) =>
        Exit.isInterrupted(exit)
          ? Effect.logInfo("stopped: every listener closed, the workers stopped, the engines closed")
          : Effect.void
      ),
      Effect.provide(LoggingLive),
      Effect.catchAllCause((cause) => {
        const line = failureLine(cause)
        if (line === undefined) return Effect.failCause(cause)
        return Effect.sync(() => {
          process.stderr.write(`${line}\n`)
          process.exitCode = 1
        })
      })
    ),
    { disablePrettyLogger: true }
  )
