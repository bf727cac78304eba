import { Data, Effect } from "effect"

/** Why a process could not start, said in one line that names the setting to change. */
export class StartupError extends Data.TaggedError("StartupError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

const codeOf = (u: unknown): string | undefined => {
  for (let e = u, depth = 0; e && typeof e === "object" && depth < 5; depth++) {
    const code = (e as { code?: unknown }).code
    if (typeof code === "string") return code
    e = (e as { cause?: unknown }).cause
  }
  return undefined
}

/**
 * A listener that could not bind, named by its variable: `API_PORT=8080 is in use`.
 * uWebSockets.js does not say why; a port in use is by far the likeliest cause there.
 */
export const listenFailed =
  (variable: string, port: number) =>
  (error: unknown): StartupError => {
    const code = codeOf(error)
    const why =
      code === "EACCES"
        ? "is not permitted (ports below 1024 need privileges)"
        : code === "EADDRNOTAVAIL"
          ? "cannot be bound on this machine"
          : code === undefined || code === "EADDRINUSE"
            ? "is in use"
            : `cannot be bound (${code})`
    const hint = code === undefined || code === "EADDRINUSE" ? `; stop what listens there or set ${variable}` : ""
    return new StartupError({ message: `${variable}=${port} ${why}${hint}`, cause: error })
  }

const isListenFailure = (e: unknown): boolean => {
  const tagged = e as { readonly _tag?: unknown; readonly message?: unknown }
  return (
    tagged._tag === "ServeError" ||
    (tagged._tag === "HttpServerError" && String(tagged.message).startsWith("could not listen")) ||
    codeOf(e) === "EADDRINUSE" ||
    codeOf(e) === "EACCES"
  )
}

/** An effect that binds a listener, whose bind failure becomes `listenFailed(variable, port)`. */
export const naming =
  (variable: string, port: number) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | StartupError, R> =>
    Effect.catchIf(effect, isListenFailure, (e) => Effect.fail(listenFailed(variable, port)(e)))
