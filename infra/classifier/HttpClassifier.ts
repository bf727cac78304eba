/**
 * IMAGE_CLASSIFIER=http: an outside classification service.
 *
 * Protocol: `POST {IMAGE_CLASSIFIER_URL}` with the published image bytes as the body,
 * `Content-Type: image/webp` or `image/gif`, `Accept: application/json`, and
 * `Authorization: Bearer <IMAGE_CLASSIFIER_TOKEN>` when a token is configured. The service
 * answers 200 with a JSON object `{ "rating": "general" | "sensitive" | "nsfw" }`, optionally
 * with `"scores": { "<class>": <number>, … }` for the logs. Anything else (another status,
 * a body that is not such an object, no answer within IMAGE_CLASSIFIER_TIMEOUT_SECONDS) is a
 * ClassifierError: the worker retries a few times, then the image stays `unrated`.
 */
import { Effect, Option, Redacted, Schema } from "effect"
import { DeclaredRating } from "../../domain/Image.js"
import { sniffImageFormat } from "../../domain/ImageFormat.js"
import { type Classification, ClassifierError, type ClassifierShape } from "../../domain/ports/Classifier.js"

const Answer = Schema.Struct({
  rating: DeclaredRating,
  scores: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Number }))
})
const decodeAnswer = Schema.decodeUnknownOption(Schema.parseJson(Answer))

/** Answers larger than this are not a rating. */
const MAX_ANSWER_BYTES = 64 * 1024

export interface HttpClassifierOptions {
  readonly url: string
  readonly token: Option.Option<Redacted.Redacted>
  readonly timeoutSeconds: number
}

export const makeHttpClassifier = (options: HttpClassifierOptions): ClassifierShape => {
  const fail = (message: string, cause?: unknown) =>
    new ClassifierError({ message: `http classifier: ${message}`, cause })

  const request = (bytes: Uint8Array, signal: AbortSignal) => {
    const format = sniffImageFormat(bytes)
    const headers: Record<string, string> = {
      "content-type": format === null ? "application/octet-stream" : `image/${format}`,
      accept: "application/json"
    }
    if (Option.isSome(options.token)) headers.authorization = `Bearer ${Redacted.value(options.token.value)}`
    return fetch(options.url, { method: "POST", headers, body: bytes, signal, redirect: "error" })
  }

  const classify = Effect.fn("Classifier.classify")(function* (bytes: Uint8Array) {
    const response = yield* Effect.tryPromise({
      try: (signal) => request(bytes, signal),
      catch: (e) => fail(`request failed: ${e instanceof Error ? e.message : String(e)}`, e)
    })
    const body = yield* Effect.tryPromise({
      try: () => response.arrayBuffer(),
      catch: (e) => fail("reading the answer failed", e)
    })
    if (response.status !== 200) return yield* fail(`the service answered ${response.status}`)
    if (body.byteLength > MAX_ANSWER_BYTES) return yield* fail("the answer is too large")
    const answer = decodeAnswer(new TextDecoder().decode(body))
    if (Option.isNone(answer)) {
      return yield* fail('the answer is not {"rating": "general" | "sensitive" | "nsfw"}')
    }
    return { rating: answer.value.rating, scores: answer.value.scores ?? {} } satisfies Classification
  })

  return {
    name: "http",
    enabled: true,
    classify: (bytes) =>
      classify(bytes).pipe(
        Effect.timeoutFail({
          duration: `${options.timeoutSeconds} seconds`,
          onTimeout: () => fail(`no answer within ${options.timeoutSeconds} s`)
        })
      )
  }
}
