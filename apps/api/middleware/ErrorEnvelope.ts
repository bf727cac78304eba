import { HttpApiBuilder, type HttpApp, HttpServerError, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { HttpApiDecodeError } from "@effect/platform/HttpApiError"
import { Effect, FiberRef } from "effect"
import * as E from "../Errors.js"

const shorten = (path: string) => (path.length > 200 ? `${path.slice(0, 200)}…` : path)

const pathOf = (url: string) => {
  try {
    return new URL(url, "http://localhost").pathname
  } catch {
    return "/"
  }
}

/**
 * `detail` for a schema failure: each field (or `body`) and the rule it broke. A union (a
 * nullable field, say) reports one issue per member; where a field has a rule of ours
 * ("must be in the future"), the schema's own texts for the other members ("Expected null,
 * actual …") are left out: they describe the schema, not what the client should fix.
 */
const describeIssues = (error: HttpApiDecodeError) => {
  const byField = new Map<string, Array<string>>()
  for (const issue of error.issues) {
    const field = issue.path.length === 0 ? "body" : issue.path.map(String).join(".")
    byField.set(field, [...(byField.get(field) ?? []), issue.message])
  }
  const lines: Array<string> = []
  for (const [field, messages] of byField) {
    const ours = messages.filter((m) => !/^Expected /.test(m))
    for (const message of ours.length > 0 ? ours : messages) lines.push(`${field}: ${message}`)
  }
  return lines.join("; ") || "The request does not match the schema."
}

/**
 * Failures that leave HttpApi in a shape of its own, answered in the contract's: a request
 * that fails the endpoint's schemas (HttpApiDecodeError) is 400 invalid_request naming each
 * field; a known path with another method is 405 method_not_allowed with Allow; a path no
 * route takes (or one the router cannot decode) is 404 not_found. Every other error of the
 * catalogue is answered as HttpApi encodes it, with its headers.
 */
const errorEnvelope =
  (allowedMethods: (path: string) => ReadonlyArray<string>) =>
  (app: HttpApp.Default): HttpApp.Default =>
    app.pipe(
      Effect.catchAll((error: unknown) =>
        Effect.gen(function* () {
          const requestId = yield* FiberRef.get(E.CurrentRequestId)
          if (error instanceof HttpApiDecodeError) {
            return E.respond(E.InvalidRequest, requestId, "The request failed validation.", describeIssues(error))
          }
          if (error instanceof HttpServerError.RouteNotFound) {
            const request = yield* HttpServerRequest.HttpServerRequest
            const allow = allowedMethods(pathOf(request.url))
            // A method the path takes that still found no route (a malformed segment): 404.
            if (allow.length > 0 && !allow.includes(request.method)) {
              const response = E.respond(
                E.MethodNotAllowed,
                requestId,
                `${request.method} is not allowed on ${shorten(pathOf(request.url))}; see Allow.`
              )
              return HttpServerResponse.setHeader(response, "Allow", allow.join(", "))
            }
            return E.respond(E.NotFound, requestId, `No route for ${request.method} ${shorten(pathOf(request.url))}.`)
          }
          const def = E.catalogued(error)
          if (def !== undefined) return E.toResponse(def, error as E.ErrorBody)
          // Anything else stays a failure: HttpApi encodes it, or RequestId answers it as unexpected.
          return yield* Effect.fail(error as never)
        })
      )
    )

/** The error envelope; `allowedMethods` gives the methods of a known path (see Methods.ts). */
export const errorEnvelopeLive = (allowedMethods: (path: string) => ReadonlyArray<string>) =>
  HttpApiBuilder.middleware(errorEnvelope(allowedMethods))
