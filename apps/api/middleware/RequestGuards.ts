import { type HttpApp, HttpServerRequest } from "@effect/platform"
import { Effect, FiberRef } from "effect"
import { looksLikeApiKey } from "../../../domain/Account.js"
import * as E from "../Errors.js"

/** Query parameters that clients commonly (and wrongly) use to send a key. */
const KEY_PARAMS = new Set(["api_key", "apikey", "key", "access_token", "token", "auth", "authorization"])

/**
 * Where a key was sent other than in the Authorization header: a query parameter or path
 * segment that carries (or is named for) a credential, or a cookie.
 */
const misplacedCredential = (url: URL, request: HttpServerRequest.HttpServerRequest): string | undefined => {
  if (looksLikeApiKey(request.headers.cookie ?? "")) return "a cookie"
  for (const [name, value] of url.searchParams) {
    if (KEY_PARAMS.has(name.toLowerCase()) || looksLikeApiKey(value)) return `query parameter '${name}'`
  }
  let path = url.pathname
  try {
    path = decodeURIComponent(path)
  } catch {}
  return looksLikeApiKey(path) ? "a path segment" : undefined
}

const parseUrl = (url: string) => {
  try {
    return new URL(url, "http://localhost")
  } catch {
    return new URL("http://localhost/")
  }
}

/**
 * Refused before anything else, on every route (public ones included): a key anywhere but the
 * Authorization header (401, so that the client learns to stop), and a path with a NUL byte
 * (404: no resource is named with one, and PostgreSQL could not store it).
 */
export const guardRequests = <Err, R>(app: HttpApp.Default<Err, R>): HttpApp.Default<Err, R> =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    const url = parseUrl(request.url)
    const leaked = misplacedCredential(url, request)
    if (leaked === undefined && !url.pathname.includes("%00")) return app
    return Effect.map(FiberRef.get(E.CurrentRequestId), (requestId) =>
      leaked !== undefined
        ? E.respond(
            E.Unauthenticated,
            requestId,
            "API keys are accepted only in the Authorization header.",
            `${leaked} looks like a credential; send it as Authorization: Bearer <API_KEY>`
          )
        : E.respond(E.NotFound, requestId, "No such resource.")
    )
  })
