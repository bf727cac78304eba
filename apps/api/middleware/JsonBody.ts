import { HttpApiMiddleware, HttpServerRequest } from "@effect/platform"
import { Effect, Layer, Schema } from "effect"
import * as E from "../Errors.js"
import { readBody } from "./BodyReader.js"

const JSON_BODY_LIMIT = 1024 * 1024
/** No request body of this API nests deeper; deeper ones would only exhaust the stack. */
const JSON_MAX_DEPTH = 64

const UNPAIRED_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

/**
 * Where a JSON value is nested deeper than `maxDepth`, or holds a string (key or value)
 * that PostgreSQL cannot store or that is not text: a NUL or an unpaired surrogate.
 * Iterative, so that no input can overflow the stack.
 */
const jsonProblem = (value: unknown, maxDepth: number): string | undefined => {
  const stack: Array<[unknown, number, string]> = [[value, 1, "body"]]
  const badString = (s: string) => s.includes("\u0000") || UNPAIRED_SURROGATE.test(s)
  while (stack.length > 0) {
    const [v, depth, path] = stack.pop()!
    if (typeof v === "string") {
      if (badString(v)) return `${path}: must not contain NUL or unpaired surrogate characters`
      continue
    }
    if (v === null || typeof v !== "object") continue
    if (depth > maxDepth) return `body: JSON nested deeper than ${maxDepth} levels`
    for (const [k, child] of Object.entries(v)) {
      const childPath = path === "body" ? k : `${path}.${k}`
      if (badString(k)) return `${childPath}: property names must not contain NUL or unpaired surrogate characters`
      stack.push([child, depth + 1, childPath])
    }
  }
  return undefined
}

/** The parameters of a Content-Type header: media type (lower case) and charset, if any. */
const mediaTypeOf = (header: string | undefined) => {
  const [mediaType = "", ...params] = (header ?? "").split(";")
  const charset = params
    .map((p) => p.trim().toLowerCase())
    .find((p) => p.startsWith("charset="))
    ?.slice(8)
    .replace(/"/g, "")
  return { mediaType: mediaType.trim().toLowerCase(), charset }
}

/**
 * The request HttpApi decodes the payload from: its body already read under the limit and
 * parsed once, so HttpApi's own reader (which turns malformed JSON into a 500) never runs.
 */
const withParsedBody = (request: HttpServerRequest.HttpServerRequest, text: string, json: unknown) =>
  Object.create(request, {
    text: { value: Effect.succeed(text) },
    json: { value: Effect.succeed(json) },
    arrayBuffer: { value: Effect.sync(() => new TextEncoder().encode(text).buffer) }
  }) as HttpServerRequest.HttpServerRequest

/**
 * A JSON request body: UTF-8 `application/json` without a Content-Encoding (else 415), at
 * most JSON_BODY_LIMIT bytes, chunked or not (else 413, after draining what was sent), valid
 * JSON of at most 64 levels holding no NUL or unpaired surrogate (else 400).
 */
export class JsonBody extends HttpApiMiddleware.Tag<JsonBody>()("JsonBody", {
  provides: HttpServerRequest.HttpServerRequest,
  failure: Schema.Union(E.InvalidRequest, E.UnsupportedMediaType, E.PayloadTooLarge)
}) {}

const invalid = (message: string, detail: string) => E.fail(E.InvalidRequest, message, detail)

export const JsonBodyLive = Layer.succeed(
  JsonBody,
  Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    const { mediaType, charset } = mediaTypeOf(request.headers["content-type"])
    const encoding = (request.headers["content-encoding"] ?? "identity").trim().toLowerCase()
    const unsupported = (detail: string) =>
      E.fail(E.UnsupportedMediaType, "This endpoint accepts application/json (UTF-8).", detail)
    if (mediaType !== "application/json") {
      return yield* unsupported(`Content-Type '${mediaType || "(none)"}' is not supported`)
    }
    if (charset !== undefined && charset !== "utf-8" && charset !== "utf8") {
      return yield* unsupported(`charset '${charset}' is not supported; send UTF-8`)
    }
    if (encoding !== "identity") return yield* unsupported(`Content-Encoding '${encoding}' is not supported`)
    const tooLarge = E.fail(E.PayloadTooLarge, `JSON bodies are limited to ${JSON_BODY_LIMIT} bytes.`)
    if (Number(request.headers["content-length"] ?? "0") > JSON_BODY_LIMIT) return yield* tooLarge
    const read = yield* readBody(request, JSON_BODY_LIMIT, "drain")
    if (read._tag !== "Ok") return yield* tooLarge
    let text: string
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(read.bytes)
    } catch {
      return yield* invalid("The request body is not valid UTF-8.", "body: must be UTF-8 encoded JSON")
    }
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch {
      return yield* invalid(
        "The request body is not valid JSON.",
        text.trim().length === 0 ? "body: a JSON object is required" : "body: malformed JSON"
      )
    }
    const problem = jsonProblem(body, JSON_MAX_DEPTH)
    if (problem !== undefined) return yield* invalid("The request body cannot be accepted.", problem)
    return withParsedBody(request, text, body)
  })
)
