import { type HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { SqlError } from "@effect/sql/SqlError"
import { Cause, Effect } from "effect"
import { AnalyticsError } from "../../../domain/Analytics.js"
import { BlobStoreError } from "../../../domain/ports/BlobStore.js"
import { EmbeddedPostgresError } from "../../../infra/EmbeddedPostgres.js"
import { newRequestId } from "../../../infra/Ids.js"
import * as E from "../Errors.js"

/**
 * A dependency that is down (PostgreSQL, the analytics store, the blob store): the request is
 * answered 503 with Retry-After, not 500.
 */
const isDependencyFailure = (u: unknown): boolean =>
  u instanceof SqlError ||
  u instanceof EmbeddedPostgresError ||
  u instanceof AnalyticsError ||
  u instanceof BlobStoreError

const KEY_SHAPE = /sk_[0-9A-Za-z]{22}_[0-9a-f]+/g
/** Log lines never carry a key, even one a client put in the path. */
const redactKeys = (path: string) => path.replace(KEY_SHAPE, "sk_[redacted]")

/** A request that failed unexpectedly: 503 for a dependency, else 500, with the contract's body. */
const unexpected = (cause: Cause.Cause<unknown>, requestId: string) =>
  Effect.logError("request failed", cause).pipe(
    Effect.annotateLogs({ request_id: requestId }),
    Effect.as(
      isDependencyFailure(Cause.squash(cause))
        ? E.respond(E.DependencyUnavailable, requestId, "A dependency is temporarily unavailable.", undefined, {
            "retry-after": "1"
          })
        : E.respond(E.InternalError, requestId, "Internal error.")
    )
  )

/**
 * The outermost middleware: gives each request its id (CurrentRequestId, the `X-Request-Id`
 * header, `request_id` in every body), answers a request that failed unexpectedly with the
 * contract's error body (never a stack trace), and logs one line per request, without the
 * query string (where a misplaced key would be).
 */
export const withRequestId = <Err, R>(app: HttpApp.Default<Err, R>): HttpApp.Default<never, R> =>
  Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    const requestId = newRequestId()
    const started = performance.now()
    const response = yield* app.pipe(
      Effect.locally(E.CurrentRequestId, requestId),
      Effect.catchAllCause((cause) =>
        Cause.isInterruptedOnly(cause) ? Effect.failCause(cause) : unexpected(cause, requestId)
      )
    )
    const replayed = response.headers["idempotent-replayed"] === "true"
    yield* Effect.logInfo("request").pipe(
      Effect.annotateLogs({
        method: request.method,
        path: redactKeys(request.url.split("?", 1)[0]!),
        status: response.status,
        ms: Math.round((performance.now() - started) * 10) / 10,
        request_id: requestId,
        // A replay answers with the first request's id: log it so the two can be joined.
        ...(replayed ? { replay_of: response.headers["x-request-id"] } : {})
      })
    )
    return response.headers["x-request-id"] === undefined
      ? HttpServerResponse.setHeader(response, "x-request-id", requestId)
      : response
  }) as HttpApp.Default<never, R>
