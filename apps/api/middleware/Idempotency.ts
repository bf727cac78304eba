import { createHash } from "node:crypto"
import {
  type HttpApiBuilder,
  type HttpApiEndpoint,
  HttpApiMiddleware,
  HttpApiSchema,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"
import { Chunk, Context, Data, Effect, Either, Layer, Option, Schema } from "effect"
import { Transactions } from "../../../domain/ports/Database.js"
import { IdempotencyStore } from "../../../domain/ports/IdempotencyStore.js"
import * as E from "../Errors.js"
import { CurrentPrincipal } from "./Authentication.js"
import { JsonBody } from "./JsonBody.js"
import { CurrentUpload } from "./UploadBody.js"

/** At most this many URL imports fetch at once per process (each holds a database connection). */
const OUTBOUND_CONCURRENCY = 8

/**
 * The operation fetches from the network inside its transaction (URL import): only a few run
 * at once per process, so that slow sources cannot hold every database connection; the
 * others wait before opening theirs.
 */
export class OutboundFetch extends Context.Tag("OutboundFetch")<OutboundFetch, true>() {}

/** The request's Idempotency-Key, checked: 8 to 128 characters. */
class CurrentIdempotencyKey extends Context.Tag("CurrentIdempotencyKey")<CurrentIdempotencyKey, string>() {}

/**
 * Every POST, PATCH and DELETE carries this middleware: its Idempotency-Key of 8 to 128
 * characters is checked before its body is read (400 idempotency_key_required /
 * idempotency_key_invalid), and its operation runs once per key (IdempotentOperations,
 * through `withIdempotency` in the group's handlers: 409 idempotency_key_reused /
 * idempotency_request_in_progress).
 */
export class IdempotencyKey extends HttpApiMiddleware.Tag<IdempotencyKey>()("IdempotencyKey", {
  provides: CurrentIdempotencyKey,
  failure: Schema.Union(
    E.IdempotencyKeyRequired,
    E.IdempotencyKeyInvalid,
    E.IdempotencyKeyReused,
    E.IdempotencyRequestInProgress
  )
}) {}

export const IdempotencyKeyLive = Layer.succeed(
  IdempotencyKey,
  Effect.gen(function* () {
    const raw = (yield* HttpServerRequest.HttpServerRequest).headers["idempotency-key"]
    if (raw === undefined) {
      return yield* E.fail(
        E.IdempotencyKeyRequired,
        "The Idempotency-Key header is required.",
        "Idempotency-Key: 8 to 128 characters"
      )
    }
    // Header values arrive as latin1: count the characters of the UTF-8 text the client sent.
    const key = Buffer.from(raw, "latin1").toString("utf8")
    const length = [...key].length
    if (length < 8 || length > 128) {
      return yield* E.fail(
        E.IdempotencyKeyInvalid,
        "The Idempotency-Key header must be 8 to 128 characters.",
        `Idempotency-Key has ${length} characters`
      )
    }
    return key
  })
)

/** Sorted keys at every depth: two JSON bodies that mean the same fingerprint the same. */
const canonicalJson = (value: unknown): string => {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`
  }
  return JSON.stringify(value)
}

/**
 * What the request means: method, route, sorted query, and its body (the canonical JSON that
 * JsonBody parsed, or the upload's fingerprint).
 */
const fingerprintOf = (endpoint: HttpApiEndpoint.HttpApiEndpoint.AnyWithProps) =>
  Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    const url = new URL(request.url, "http://localhost")
    const params = [...url.searchParams].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    const upload = yield* Effect.serviceOption(CurrentUpload)
    const body = Option.isSome(upload)
      ? upload.value.fingerprint
      : (endpoint.middlewares as ReadonlySet<unknown>).has(JsonBody)
        ? canonicalJson(yield* Effect.orDie(request.json))
        : ""
    return createHash("sha256")
      .update(`${request.method} ${url.pathname}?${new URLSearchParams(params)}\n${body}`)
      .digest("hex")
  })

interface Stored {
  readonly status: number
  readonly contentType: string | null
  readonly body: Uint8Array
}

/** The replay of a stored response: the original, body and request id alike. */
const replay = (stored: Stored) => {
  const response =
    stored.body.length === 0
      ? HttpServerResponse.empty({ status: stored.status })
      : HttpServerResponse.uint8Array(stored.body, {
          status: stored.status,
          contentType: stored.contentType ?? "application/json"
        })
  const headers: Record<string, string> = { "idempotent-replayed": "true" }
  const originalId = storedRequestId(stored.body)
  // X-Request-Id stays equal to the request_id in the body.
  if (originalId !== undefined) headers["x-request-id"] = originalId
  return HttpServerResponse.setHeaders(response, headers)
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

const encoder = new TextEncoder()

/** The endpoint's success, as the response HttpApi would send: the first of its success schemas that encodes it. */
const successResponse = (endpoint: HttpApiEndpoint.HttpApiEndpoint.AnyWithProps) => {
  const schemas = new Set<Schema.Schema.Any>()
  HttpApiSchema.deunionize(schemas, endpoint.successSchema)
  const encoders = [...schemas].map((schema) => ({
    status: HttpApiSchema.getStatusSuccess(schema),
    encode: Schema.encodeUnknown(schema as Schema.Schema<unknown, unknown>)
  }))
  return (value: unknown): Effect.Effect<HttpServerResponse.HttpServerResponse> =>
    HttpServerResponse.isServerResponse(value)
      ? Effect.succeed(value)
      : Effect.firstSuccessOf(
          encoders.map(({ status, encode }) =>
            Effect.map(encode(value), (json) =>
              HttpServerResponse.uint8Array(encoder.encode(JSON.stringify(json)), {
                status,
                contentType: "application/json"
              })
            )
          )
        ).pipe(Effect.orDie)
}

/** What a response stores: its status, type and bytes; none for a streamed body. */
const storable = (response: HttpServerResponse.HttpServerResponse): Stored | undefined =>
  response.body._tag === "Uint8Array"
    ? { status: response.status, contentType: response.body.contentType, body: response.body.body }
    : response.body._tag === "Empty"
      ? { status: response.status, contentType: null, body: new Uint8Array() }
      : undefined

/** The outcome is not stored: the transaction rolls back and the key stays unused. */
class NotStored extends Data.TaggedError("NotStored")<{
  readonly outcome: Either.Either<HttpServerResponse.HttpServerResponse, unknown>
}> {}

/**
 * Runs a POST, PATCH or DELETE once per Idempotency-Key. The record and the change commit in
 * one transaction: a transaction-scoped advisory lock on (account, key) tells a concurrent
 * duplicate that the first is still running (409 with Retry-After); a stored response with
 * the same fingerprint is replayed (Idempotent-Replayed: true), another fingerprint is 409
 * idempotency_key_reused. Whether the outcome is stored is decided from the typed outcome:
 * every success, and each error of the catalogue marked `stored`; never a 5xx.
 */
export class IdempotentOperations extends Effect.Service<IdempotentOperations>()("IdempotentOperations", {
  effect: Effect.gen(function* () {
    const records = yield* IdempotencyStore
    const transactions = yield* Transactions
    // URL imports fetch inside their transaction (up to 15 s): at most OUTBOUND_CONCURRENCY
    // at once, waiting before they take a connection, well below the pool's 20.
    const outboundSlots = yield* Effect.makeSemaphore(OUTBOUND_CONCURRENCY)

    const run = <A, Err, R>(
      endpoint: HttpApiEndpoint.HttpApiEndpoint.AnyWithProps,
      operation: Effect.Effect<A, Err, R>
    ) => {
      const toResponse = successResponse(endpoint)
      const outbound = Option.isSome(Context.getOption(endpoint.annotations, OutboundFetch))
      const once = Effect.gen(function* () {
        const principal = yield* CurrentPrincipal
        const key = yield* CurrentIdempotencyKey
        const fingerprint = yield* fingerprintOf(endpoint)
        if (!(yield* records.tryLock(principal.accountId, key))) {
          return yield* E.fail(
            E.IdempotencyRequestInProgress,
            "A request with this Idempotency-Key is still in progress.",
            undefined,
            { "retry-after": "1" }
          )
        }
        const found = yield* records.find(principal.accountId, key)
        if (Option.isSome(found)) {
          if (found.value.fingerprint !== fingerprint) {
            return yield* E.fail(
              E.IdempotencyKeyReused,
              "This Idempotency-Key was used with a different request.",
              "use a new Idempotency-Key for a different request"
            )
          }
          return replay(found.value)
        }
        const outcome = yield* Effect.either(Effect.flatMap(operation, toResponse))
        let response: HttpServerResponse.HttpServerResponse
        if (Either.isRight(outcome)) {
          response = outcome.right
        } else {
          const def = E.catalogued(outcome.left)
          if (def === undefined || !def.stored) return yield* new NotStored({ outcome })
          response = E.toResponse(def, outcome.left as E.ErrorBody)
        }
        const stored = storable(response)
        if (stored === undefined || response.status >= 500) return yield* new NotStored({ outcome })
        yield* records.save(principal.accountId, key, { fingerprint, ...stored, body: Buffer.from(stored.body) })
        return response
      })
      const transaction = transactions.withTransaction(once).pipe(
        Effect.catchIf(
          (failure): failure is NotStored => failure instanceof NotStored,
          ({ outcome }) => (Either.isRight(outcome) ? Effect.succeed(outcome.right) : Effect.fail(outcome.left as Err))
        )
      )
      return outbound ? outboundSlots.withPermits(1)(transaction) : transaction
    }
    return { run } as const
  })
}) {}

/**
 * The handlers of a group, with every endpoint that carries the IdempotencyKey middleware run
 * through IdempotentOperations (the middlewares before it provide what it reads).
 */
export const withIdempotency = <E, P, R, Endpoints extends HttpApiEndpoint.HttpApiEndpoint.Any>(
  operations: IdempotentOperations,
  handlers: HttpApiBuilder.Handlers<E, P, R, Endpoints>
): HttpApiBuilder.Handlers<E, P, R, Endpoints> => {
  const items = Chunk.map(handlers.handlers, (item): HttpApiBuilder.Handlers.Item<E, R> => {
    const endpoint = item.endpoint as HttpApiEndpoint.HttpApiEndpoint.AnyWithProps
    if (!(endpoint.middlewares as ReadonlySet<unknown>).has(IdempotencyKey)) return item
    return {
      ...item,
      handler: (request) =>
        operations.run(endpoint, item.handler(request)) as Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
    }
  })
  return Object.assign(Object.create(Object.getPrototypeOf(handlers)), handlers, { handlers: items })
}
