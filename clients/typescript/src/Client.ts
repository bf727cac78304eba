import { FetchHttpClient, HttpApiClient, HttpClient, type HttpClientError, HttpClientRequest } from "@effect/platform"
import { Effect, FiberRef, type Layer, Option, Schedule } from "effect"
import { Api } from "../../../apps/api/Api.js"
import { API_PREFIX } from "../../../apps/api/OpenApiDoc.js"

/**
 * The Effect client: `HttpApiClient.make` over the service's own `Api` definition, so every
 * operation, payload, success and error is typed from the code the server runs and cannot
 * drift. On top of it: the API key, an Idempotency-Key on every POST, PATCH and DELETE
 * (generated unless given with `withIdempotencyKey`), and retries only where they are safe.
 */

export interface ClientOptions {
  /** `{base_url}`, e.g. `https://api.example.com/v1` (PUBLIC_API_BASE). */
  readonly baseUrl: string
  /** The account API key (sent as `Authorization: Bearer …`). */
  readonly apiKey: string
  /** How many times a transient failure is retried (default 3; 0 turns retries off). */
  readonly retries?: number
}

/** The Idempotency-Key of the writes run inside `withIdempotencyKey`; none: one is generated per call. */
const CurrentIdempotencyKey = FiberRef.unsafeMake<Option.Option<string>>(Option.none())

/**
 * Runs the writes of `effect` with this Idempotency-Key (8 to 128 characters): the same key
 * with the same request replays the first response, so a write can be sent again safely.
 */
export const withIdempotencyKey =
  (key: string) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.locally(effect, CurrentIdempotencyKey, Option.some(key))

const WRITES = new Set(["POST", "PATCH", "PUT", "DELETE"])

/** A fresh Idempotency-Key. */
export const newIdempotencyKey = (): string => `client-${crypto.randomUUID()}`

/** The Idempotency-Key header on a write without one: the given key, or a fresh one. */
const addIdempotencyKey = (request: HttpClientRequest.HttpClientRequest) =>
  !WRITES.has(request.method) || request.headers["idempotency-key"] !== undefined
    ? Effect.succeed(request)
    : Effect.map(FiberRef.get(CurrentIdempotencyKey), (key) =>
        HttpClientRequest.setHeader(request, "idempotency-key", Option.getOrElse(key, newIdempotencyKey))
      )

/**
 * The client's HTTP pipeline. The Idempotency-Key is set once per call, outside the retries
 * (HttpClient's own request mapping runs again on every attempt), so a retried write carries
 * the same key: the service replays it instead of doing it twice. Retried: transport failures
 * and 408, 429, 500, 502, 503 and 504, with backoff. A GET is safe by itself, and every write
 * carries a key, so every operation retries only where it is safe.
 */
const transformClient =
  (options: ClientOptions) =>
  (client: HttpClient.HttpClient): HttpClient.HttpClient => {
    const authenticated = client.pipe(HttpClient.mapRequest(HttpClientRequest.bearerToken(options.apiKey)))
    const retries = options.retries ?? 3
    const retried =
      retries <= 0
        ? authenticated
        : authenticated.pipe(
            HttpClient.retryTransient({
              schedule: Schedule.exponential("200 millis").pipe(Schedule.jittered),
              times: retries
            })
          )
    return HttpClient.makeWith<never, never, HttpClientError.HttpClientError, never>(
      (request) => Effect.flatMap(request, addIdempotencyKey).pipe(Effect.flatMap((keyed) => retried.execute(keyed))),
      Effect.succeed
    )
  }

/** The origin the Api's routes (which carry `/v1`) hang from: `{base_url}` without it. */
const originOf = (baseUrl: string) => {
  const trimmed = baseUrl.replace(/\/+$/, "")
  return trimmed.endsWith(API_PREFIX) ? trimmed.slice(0, -API_PREFIX.length) : trimmed
}

/** The typed client (needs an HttpClient; `ClientLive` gives it fetch's). */
export const makeClient = (options: ClientOptions) =>
  HttpApiClient.make(Api, { baseUrl: originOf(options.baseUrl), transformClient: transformClient(options) })

/** The client's type: `client.links.create({ payload })`, `client.images.get({ path: { id } })`, … */
export type Client = Effect.Effect.Success<ReturnType<typeof makeClient>>

/** The HttpClient the client runs on: the platform's fetch. */
export const ClientLive: Layer.Layer<HttpClient.HttpClient> = FetchHttpClient.layer
