import { createHash } from "node:crypto"
import { type HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Cause, Effect, identity, Option } from "effect"
import { looksLikeApiKey, type Principal } from "../../domain/Account.js"
import { retryAfterSeconds } from "../../domain/Plan.js"
import { AccountRepo } from "../../domain/ports/AccountRepo.js"
import { IdempotencyStore } from "../../domain/ports/IdempotencyStore.js"
import { AppConfig } from "../../infra/AppConfig.js"
import { newRequestId } from "../../infra/Ids.js"
import { Plans } from "../../infra/Plans.js"
import { jsonProblem, readBody, withParsedBody } from "./Body.js"
import * as E from "./Errors.js"
import { openApiDocument } from "./OpenApiDoc.js"
import { makeRateLimiter } from "./RateLimiter.js"
import { matchRoute, type Route } from "./Routes.js"
import { PrincipalRef } from "./Security.js"
import { announcesBody, closeAfterAnswer, readUpload, UploadRef } from "./Upload.js"

const JSON_BODY_LIMIT = 1024 * 1024
const OUTBOUND_CONCURRENCY = 8
/** No request body of this API nests deeper; deeper ones would only exhaust the stack. */
const JSON_MAX_DEPTH = 64
/** Query parameters that clients commonly (and wrongly) use to send a key. */
const KEY_PARAMS = new Set(["api_key", "apikey", "key", "access_token", "token", "auth", "authorization"])
/**
 * Responses to requests rejected before the operation ran are not stored, so the key can
 * be used again once the request is fixed; 5xx are not stored either.
 */
const NOT_STORED = new Set([
  "invalid_request",
  "unauthenticated",
  "api_scope_required",
  "payload_too_large",
  "unsupported_media_type",
  "rate_limited"
])

/** Ends the request with this response: a plain value, not an Error, so no stack trace is captured. */
interface Respond {
  readonly _tag: "Respond"
  readonly response: HttpServerResponse.HttpServerResponse
}
const respond = (r: { readonly response: HttpServerResponse.HttpServerResponse }): Effect.Effect<never, Respond> =>
  Effect.fail({ _tag: "Respond", response: r.response })

const errorResponse = (
  def: E.ErrorDef,
  requestId: string,
  message: string,
  detail?: string,
  headers?: Record<string, string>
) =>
  HttpServerResponse.unsafeJson(E.errorBody(def, requestId, message, detail), {
    status: def.status,
    ...(headers === undefined ? {} : { headers })
  })

/** The same request seen as a GET, for HEAD. */
const asGet = (request: HttpServerRequest.HttpServerRequest): HttpServerRequest.HttpServerRequest =>
  Object.create(request, { method: { value: "GET", enumerable: true } })

const shorten = (path: string) => (path.length > 200 ? `${path.slice(0, 200)}…` : path)

const KEY_SHAPE = /sk_[0-9A-Za-z]{22}_[0-9a-f]+/g
/** Log lines never carry a key, even one a client put in the path. */
const redactKeys = (path: string) => path.replace(KEY_SHAPE, "sk_[redacted]")

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

/** Sorted keys at every depth: two JSON bodies that mean the same fingerprint the same. */
const canonicalJson = (value: unknown): string => {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value).sort()
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as any)[k])}`).join(",")}}`
  }
  return JSON.stringify(value)
}

/** Whether a parsed JSON value nests objects and arrays deeper than `max` (iteratively: no recursion). */
const bodyBytes = (response: HttpServerResponse.HttpServerResponse): Uint8Array | undefined =>
  response.body._tag === "Uint8Array"
    ? response.body.body
    : response.body._tag === "Empty"
      ? new Uint8Array()
      : undefined

const errorCode = (response: HttpServerResponse.HttpServerResponse): string | undefined => {
  const bytes = bodyBytes(response)
  if (bytes === undefined || response.status < 400) return undefined
  try {
    return JSON.parse(Buffer.from(bytes).toString())?.error?.code
  } catch {
    return undefined
  }
}

/** The request id inside a stored JSON response (meta.request_id or error.request_id). */
const storedRequestId = (bytes: Uint8Array): string | undefined => {
  try {
    const body = JSON.parse(Buffer.from(bytes).toString())
    const id = body?.meta?.request_id ?? body?.error?.request_id
    return typeof id === "string" ? id : undefined
  } catch {
    return undefined
  }
}

/**
 * Schema failures leave HttpApi as its own HttpApiDecodeError body; they become the
 * contract's 400 here, with `detail` naming each field and the rule it broke.
 */
const rewriteDecodeError = (response: HttpServerResponse.HttpServerResponse, requestId: string) => {
  if (response.status !== 400) return response
  const bytes = bodyBytes(response)
  if (bytes === undefined) return response
  let body: any
  try {
    body = JSON.parse(Buffer.from(bytes).toString())
  } catch {
    return response
  }
  if (body?._tag !== "HttpApiDecodeError") return response
  const issues: Array<{ path: Array<unknown>; message: string }> = Array.isArray(body.issues) ? body.issues : []
  const detail = issues
    .map((i) => `${i.path.length === 0 ? "body" : i.path.map(String).join(".")}: ${i.message}`)
    .join("; ")
  return errorResponse(E.InvalidRequest, requestId, "The request failed validation.", detail || body.message)
}

// A dependency that is down (PostgreSQL, the analytics store, the blob store): 503 with Retry-After, not 500.
const isDatabaseFailure = (u: unknown) =>
  typeof u === "object" &&
  u !== null &&
  "_tag" in u &&
  (u._tag === "SqlError" ||
    u._tag === "EmbeddedPostgresError" ||
    u._tag === "AnalyticsError" ||
    u._tag === "BlobStoreError")

const isRouteNotFound = (u: unknown) => typeof u === "object" && u !== null && "_tag" in u && u._tag === "RouteNotFound"

/** What the pipeline learns about a request while handling it. */
interface RequestState {
  /** An upload whose body was not (fully) read: the answer closes the connection. */
  unreadUpload: boolean
}

export const makePipeline = Effect.gen(function* () {
  const accounts = yield* AccountRepo
  const idempotency = yield* IdempotencyStore
  const sql = yield* SqlClient.SqlClient
  const config = yield* AppConfig
  const plans = yield* Plans
  const rateLimiter = makeRateLimiter()
  // URL imports hold a database connection while they fetch (up to 15 s): at most this many
  // at once per process, well below the pool's 20 connections.
  const outboundSlots = yield* Effect.makeSemaphore(OUTBOUND_CONCURRENCY)
  // Paths in the document carry /v1, so the server is {base_url} without it.
  const openapi = HttpServerResponse.unsafeJson(
    { ...openApiDocument, servers: [{ url: config.apiBase.replace(/\/v1$/, "") || "/" }] },
    { headers: { "cache-control": "public, max-age=60" } }
  )

  const authenticate = (request: HttpServerRequest.HttpServerRequest, requestId: string) =>
    Effect.gen(function* () {
      const header = request.headers.authorization
      if (header === undefined || header === "") {
        return yield* respond({
          response: errorResponse(
            E.Unauthenticated,
            requestId,
            "Missing API key.",
            "send Authorization: Bearer <API_KEY>"
          )
        })
      }
      const match = /^Bearer +([^\s]+) *$/i.exec(header)
      if (match === null) {
        return yield* respond({
          response: errorResponse(
            E.Unauthenticated,
            requestId,
            "Malformed Authorization header.",
            "expected: Bearer <API_KEY>"
          )
        })
      }
      const principal = yield* accounts.authenticate(match[1]!)
      if (Option.isNone(principal)) {
        return yield* respond({
          response: errorResponse(
            E.Unauthenticated,
            requestId,
            "The API key is not valid.",
            "the key is unknown or revoked"
          )
        })
      }
      return principal.value
    })

  /**
   * The account's request rate (its plan's token bucket), checked right after
   * authentication. Unmetered Partner Keys skip it; unauthenticated requests never reach it
   * (edge rate rules are separate).
   */
  const rateLimited = (principal: Principal, requestId: string) => {
    if (principal.unmetered) return undefined
    const plan = plans.limits(principal.plan)
    const waitMs = rateLimiter.take(principal.accountId, plan)
    if (waitMs === 0) return undefined
    const seconds = retryAfterSeconds(waitMs)
    return errorResponse(
      E.RateLimited,
      requestId,
      "Too many requests for this account; retry after Retry-After seconds.",
      `requests_per_second: ${plan.requests_per_second} (burst ${plan.request_burst}) on plan ${principal.plan}; retry after ${seconds} s`,
      { "retry-after": String(seconds) }
    )
  }

  const invalid = (requestId: string, message: string, detail: string) =>
    respond({ response: errorResponse(E.InvalidRequest, requestId, message, detail) })

  /** Reads, checks and parses a JSON body; the inner app then sees it already parsed. */
  const readJson = (request: HttpServerRequest.HttpServerRequest, requestId: string) =>
    Effect.gen(function* () {
      const [mediaType = "", ...params] = (request.headers["content-type"] ?? "").split(";")
      const contentType = mediaType.trim().toLowerCase()
      const charset = params
        .map((p) => p.trim().toLowerCase())
        .find((p) => p.startsWith("charset="))
        ?.slice(8)
        .replace(/"/g, "")
      const encoding = (request.headers["content-encoding"] ?? "identity").trim().toLowerCase()
      const unsupported = (detail: string) =>
        respond({
          response: errorResponse(
            E.UnsupportedMediaType,
            requestId,
            "This endpoint accepts application/json (UTF-8).",
            detail
          )
        })
      if (contentType !== "application/json") {
        return yield* unsupported(`Content-Type '${contentType || "(none)"}' is not supported`)
      }
      if (charset !== undefined && charset !== "utf-8" && charset !== "utf8") {
        return yield* unsupported(`charset '${charset}' is not supported; send UTF-8`)
      }
      if (encoding !== "identity") return yield* unsupported(`Content-Encoding '${encoding}' is not supported`)
      const tooLarge = respond({
        response: errorResponse(E.PayloadTooLarge, requestId, `JSON bodies are limited to ${JSON_BODY_LIMIT} bytes.`)
      })
      if (Number(request.headers["content-length"] ?? "0") > JSON_BODY_LIMIT) return yield* tooLarge
      const read = yield* readBody(request, JSON_BODY_LIMIT)
      if (read._tag !== "Ok") return yield* tooLarge
      let text: string
      try {
        text = new TextDecoder("utf-8", { fatal: true }).decode(read.bytes)
      } catch {
        return yield* invalid(requestId, "The request body is not valid UTF-8.", "body: must be UTF-8 encoded JSON")
      }
      let body: unknown
      try {
        body = JSON.parse(text)
      } catch {
        return yield* invalid(
          requestId,
          "The request body is not valid JSON.",
          text.trim().length === 0 ? "body: a JSON object is required" : "body: malformed JSON"
        )
      }
      const problem = jsonProblem(body, JSON_MAX_DEPTH)
      if (problem !== undefined) return yield* invalid(requestId, "The request body cannot be accepted.", problem)
      return { text, body }
    })

  /** Reads and parses an image upload (Upload.ts); a rejection ends the request, stored never. */
  const readImageUpload = (request: HttpServerRequest.HttpServerRequest, requestId: string, state: RequestState) =>
    Effect.gen(function* () {
      const read = yield* readUpload(request)
      switch (read._tag) {
        case "Ok":
          state.unreadUpload = false
          return read.upload
        case "TooLarge":
          if (!read.unread) state.unreadUpload = false
          return yield* respond({ response: errorResponse(E.PayloadTooLarge, requestId, read.message) })
        case "Unsupported":
          return yield* respond({
            response: errorResponse(E.UnsupportedMediaType, requestId, read.message, read.detail)
          })
        case "Invalid":
          // Aborted or fully read: either way nothing of the body is left to skip.
          state.unreadUpload = false
          return yield* invalid(requestId, read.message, read.detail)
      }
    })

  /**
   * The idempotency record and the change commit in one transaction. A transaction-scoped
   * advisory lock on (account, key) tells a concurrent duplicate that the first is still
   * running; once it commits, the record is there to replay.
   */
  const idempotent = (
    principal: Principal,
    key: string,
    fingerprint: string,
    requestId: string,
    run: Effect.Effect<HttpServerResponse.HttpServerResponse>
  ) =>
    sql.withTransaction(
      Effect.gen(function* () {
        if (!(yield* idempotency.tryLock(principal.accountId, key))) {
          return yield* respond({
            response: errorResponse(
              E.IdempotencyRequestInProgress,
              requestId,
              "A request with this Idempotency-Key is still in progress.",
              undefined,
              { "retry-after": "1" }
            )
          })
        }
        const found = yield* idempotency.find(principal.accountId, key)
        if (Option.isSome(found)) {
          const existing = found.value
          if (existing.fingerprint !== fingerprint) {
            return yield* respond({
              response: errorResponse(
                E.IdempotencyKeyReused,
                requestId,
                "This Idempotency-Key was used with a different request.",
                "use a new Idempotency-Key for a different request"
              )
            })
          }
          const replay =
            existing.body.length === 0
              ? HttpServerResponse.empty({ status: existing.status })
              : HttpServerResponse.uint8Array(existing.body, {
                  status: existing.status,
                  contentType: existing.contentType ?? "application/json"
                })
          // The replay is the original response, body and request id alike: X-Request-Id stays
          // equal to the request_id in the body.
          const originalId = storedRequestId(existing.body)
          const headers: Record<string, string> = { "idempotent-replayed": "true" }
          if (originalId !== undefined) headers["x-request-id"] = originalId
          return yield* respond({ response: HttpServerResponse.setHeaders(replay, headers) })
        }
        const response = rewriteDecodeError(yield* run, requestId)
        const body = bodyBytes(response)
        const code = errorCode(response)
        if (response.status >= 500 || body === undefined || (code !== undefined && NOT_STORED.has(code))) {
          // Roll back whatever ran: the key stays unused.
          return yield* respond({ response })
        }
        yield* idempotency.save(principal.accountId, key, {
          fingerprint,
          status: response.status,
          contentType: response.body._tag === "Uint8Array" ? response.body.contentType : null,
          body: Buffer.from(body)
        })
        return response
      })
    )

  const handle = (
    app: HttpApp.Default,
    request: HttpServerRequest.HttpServerRequest,
    url: URL,
    requestId: string,
    state: RequestState
  ) =>
    Effect.gen(function* () {
      const path = url.pathname
      // A key anywhere but the Authorization header is refused on every route, public ones included.
      const leaked = misplacedCredential(url, request)
      if (leaked !== undefined) {
        return errorResponse(
          E.Unauthenticated,
          requestId,
          "API keys are accepted only in the Authorization header.",
          `${leaked} looks like a credential; send it as Authorization: Bearer <API_KEY>`
        )
      }
      // No resource is named with a NUL byte (and PostgreSQL could not store one).
      if (/%00/.test(path)) return errorResponse(E.NotFound, requestId, "No such resource.")
      if (path === "/healthz") return HttpServerResponse.unsafeJson({ status: "ok" })
      if (path === "/readyz") {
        return yield* sql`SELECT 1`.pipe(
          Effect.timeout("2 seconds"),
          Effect.as(HttpServerResponse.unsafeJson({ status: "ready" })),
          Effect.catchAllCause(() =>
            Effect.succeed(
              errorResponse(E.DependencyUnavailable, requestId, "The database is not reachable.", undefined, {
                "retry-after": "1"
              })
            )
          )
        )
      }
      if (path === "/v1/openapi.json" && (request.method === "GET" || request.method === "HEAD")) return openapi

      // HEAD is GET without a body (node:http drops the body of a HEAD response).
      const head = request.method === "HEAD"
      const match = matchRoute(head ? "GET" : request.method, path)
      if (match._tag === "NoRoute") {
        return errorResponse(E.NotFound, requestId, `No route for ${request.method} ${shorten(path)}.`)
      }
      const route: Route = match.route
      // An upload refused before its body is read (authentication, scope, key, size, type):
      // the connection closes after the answer instead of draining up to 10 MiB.
      state.unreadUpload = route.body === "upload" && announcesBody(request)
      const principal = yield* authenticate(request, requestId)
      const limited = rateLimited(principal, requestId)
      if (limited !== undefined) return limited
      if (route.scope !== undefined && !principal.scopes.has(route.scope)) {
        return errorResponse(
          E.ApiScopeRequired,
          requestId,
          "The API key lacks the scope this operation requires.",
          `missing scope: ${route.scope}`
        )
      }
      // Header values arrive as latin1: count the characters of the UTF-8 text the client sent.
      const rawKey = route.mutating ? request.headers["idempotency-key"] : undefined
      const key = rawKey === undefined ? undefined : Buffer.from(rawKey, "latin1").toString("utf8")
      if (route.mutating) {
        if (key === undefined) {
          return errorResponse(
            E.IdempotencyKeyRequired,
            requestId,
            "The Idempotency-Key header is required.",
            "Idempotency-Key: 8 to 128 characters"
          )
        }
        const length = [...key].length
        if (length < 8 || length > 128) {
          return errorResponse(
            E.IdempotencyKeyInvalid,
            requestId,
            "The Idempotency-Key header must be 8 to 128 characters.",
            `Idempotency-Key has ${length} characters`
          )
        }
      }
      const json = route.body === "json" ? yield* readJson(request, requestId) : undefined
      const upload = route.body === "upload" ? yield* readImageUpload(request, requestId, state) : undefined
      const inner = head ? asGet(request) : json !== undefined ? withParsedBody(request, json.text, json.body) : request
      // The inner app's requirements are the request's own (HttpServerRequest and friends).
      const run = app.pipe(
        Effect.locally(PrincipalRef, Option.some(principal)),
        upload === undefined ? identity : Effect.locally(UploadRef, Option.some(upload)),
        inner === request ? identity : Effect.provideService(HttpServerRequest.HttpServerRequest, inner)
      ) as Effect.Effect<HttpServerResponse.HttpServerResponse>
      if (key === undefined) return rewriteDecodeError(yield* run, requestId)
      const params = [...url.searchParams].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      const fingerprint = createHash("sha256")
        .update(
          `${request.method} ${path}?${new URLSearchParams(params)}\n${
            json !== undefined ? canonicalJson(json.body) : upload !== undefined ? upload.fingerprint : ""
          }`
        )
        .digest("hex")
      const operation = idempotent(principal, key, fingerprint, requestId, run)
      return yield* route.outbound ? outboundSlots.withPermits(1)(operation) : operation
    }).pipe(Effect.catchTag("Respond", (r) => Effect.succeed(r.response)))

  return <R>(inner: HttpApp.Default<never, R>): HttpApp.Default<never, R> => {
    const app = inner as HttpApp.Default
    return Effect.gen(function* () {
      const request = yield* HttpServerRequest.HttpServerRequest
      const requestId = newRequestId()
      const started = performance.now()
      let url: URL
      try {
        url = new URL(request.url, "http://localhost")
      } catch {
        url = new URL("http://localhost/")
      }
      const state: RequestState = { unreadUpload: false }
      const answer = yield* handle(app, request, url, requestId, state).pipe(
        Effect.locally(E.CurrentRequestId, requestId),
        Effect.catchAllCause((cause) => {
          if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause)
          const failure = Cause.squash(cause)
          // The route table matched but HttpApi's router did not (a path parameter longer than
          // it takes, or percent-encoding it cannot decode): there is no such resource.
          if (isRouteNotFound(failure)) {
            return Effect.succeed(
              errorResponse(E.NotFound, requestId, `No route for ${request.method} ${shorten(url.pathname)}.`)
            )
          }
          const unavailable = isDatabaseFailure(failure)
          return Effect.logError("request failed", cause).pipe(
            Effect.annotateLogs({ request_id: requestId }),
            Effect.as(
              unavailable
                ? errorResponse(
                    E.DependencyUnavailable,
                    requestId,
                    "A dependency is temporarily unavailable.",
                    undefined,
                    { "retry-after": "1" }
                  )
                : errorResponse(E.InternalError, requestId, "Internal error.")
            )
          )
        })
      )
      if (state.unreadUpload) closeAfterAnswer(request)
      const response = state.unreadUpload ? HttpServerResponse.setHeader(answer, "connection", "close") : answer
      // Never the query string: it is where a misplaced key would be.
      yield* Effect.logInfo("request").pipe(
        Effect.annotateLogs({
          method: request.method,
          path: redactKeys(url.pathname),
          status: response.status,
          ms: Math.round((performance.now() - started) * 10) / 10,
          request_id: requestId,
          // A replay answers with the first request's id: log it so the two can be joined.
          ...(response.headers["idempotent-replayed"] === "true" ? { replay_of: response.headers["x-request-id"] } : {})
        })
      )
      return response.headers["x-request-id"] === undefined
        ? HttpServerResponse.setHeader(response, "x-request-id", requestId)
        : response
    }) as HttpApp.Default<never, R>
  }
})
