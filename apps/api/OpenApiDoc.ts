import { HttpApi, OpenApi } from "@effect/platform"
import { Context, Option } from "effect"
import { Api } from "./Api.js"
import * as E from "./Errors.js"
import { IdempotencyKey } from "./middleware/Idempotency.js"
import { RequiredScope } from "./middleware/Scopes.js"
import { SuccessDoc } from "./Shared.js"

type Json = any

const DECODE_ERROR_REF = "#/components/schemas/HttpApiDecodeError"

/** HttpApi documents its own decode error; ErrorEnvelope answers with the contract's body instead. */
const dropDecodeError = (node: Json): Json => {
  if (Array.isArray(node)) return node.map(dropDecodeError)
  if (node === null || typeof node !== "object") return node
  if (Array.isArray(node.anyOf)) {
    const anyOf = node.anyOf.filter((s: Json) => s?.$ref !== DECODE_ERROR_REF).map(dropDecodeError)
    const { anyOf: _, ...rest } = node
    return anyOf.length === 1 ? { ...rest, ...anyOf[0] } : { ...rest, anyOf }
  }
  return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, dropDecodeError(v)]))
}

const toOpenApiPath = (template: string) => template.replace(/:([A-Za-z_]+)/g, "{$1}")

/** The response headers the middlewares set, shared by the operations that send them. */
const HEADERS: Json = {
  "X-Request-Id": {
    description:
      "The id of this request, the same as `meta.request_id` or `error.request_id` in the body (a replayed response keeps the first request's id). Quote it in support reports.",
    required: true,
    schema: { type: "string" }
  },
  "Idempotent-Replayed": {
    description:
      "`true` when this is the stored response to an earlier request with the same Idempotency-Key and the same content, replayed; absent on a first response.",
    schema: { type: "string", enum: ["true"] }
  },
  "Retry-After": {
    description:
      "Seconds to wait before retrying. Sent with 503 and 429, and with 409 `idempotency_request_in_progress`.",
    schema: { type: "integer", minimum: 0 }
  }
}
const headerRef = (name: keyof typeof HEADERS & string) => ({ $ref: `#/components/headers/${name}` })

/** The error schemas an error response lists (components), from its `anyOf` or single `$ref`. */
const errorSchemas = (spec: Json, schema: Json): Array<Json> =>
  (schema?.anyOf ?? (schema === undefined ? [] : [schema])).map(
    (r: Json) => spec.components?.schemas?.[String(r?.$ref).split("/").at(-1)!]
  )
const codeOf = (error: Json): string | undefined => error?.properties?.error?.properties?.code?.enum?.[0]

/**
 * The description of an error response, from the errors it lists: HttpApi takes the first
 * error's (or its decode error's) description for the whole status.
 */
const describeErrors = (errors: Array<Json>): string | undefined => {
  if (errors.length === 0 || errors.some((e) => typeof e?.description !== "string")) return undefined
  if (errors.length === 1) return errors[0].description
  return [
    "One of these errors (branch on `error.code`):",
    ...errors.map((e) => `- \`${codeOf(e)}\`: ${e.description}`)
  ].join("\n")
}

export interface EndpointDoc {
  readonly method: string
  /** The path template, e.g. /v1/links/:id */
  readonly template: string
  readonly scope: string | undefined
  /** A POST, PATCH or DELETE under the Idempotency-Key rules. */
  readonly mutating: boolean
  readonly success: Context.Tag.Service<SuccessDoc> | undefined
}

/** Every endpoint of the API, with what the document adds to HttpApi's description of it. */
export const endpoints: ReadonlyArray<EndpointDoc> = (() => {
  const out: Array<EndpointDoc> = []
  HttpApi.reflect(Api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, mergedAnnotations, middleware }) => {
      out.push({
        method: endpoint.method,
        template: endpoint.path,
        scope: Option.getOrUndefined(
          Context.getOption(mergedAnnotations as Context.Context<RequiredScope>, RequiredScope)
        ),
        mutating: (middleware as ReadonlySet<unknown>).has(IdempotencyKey),
        success: Option.getOrUndefined(Context.getOption(mergedAnnotations as Context.Context<SuccessDoc>, SuccessDoc))
      })
    }
  })
  return out
})()

/** Whether a response with this error code may be stored and replayed (the catalogue says). */
const isStored = (code: string | undefined) => code !== undefined && E.errorDefOf(code)?.stored === true

/**
 * The OpenAPI 3.1 document, generated from the same schemas the server validates with,
 * plus what the middlewares do for every operation: the Idempotency-Key header and the
 * scope each operation requires.
 */
export const openApiDocument: Json = (() => {
  const spec: Json = dropDecodeError(OpenApi.fromApi(Api))
  for (const name of ["HttpApiDecodeError", "Issue", "PropertyKey"]) delete spec.components?.schemas?.[name]
  spec.components = { ...spec.components, headers: { ...spec.components?.headers, ...HEADERS } }
  for (const route of endpoints) {
    const op = spec.paths?.[toOpenApiPath(route.template)]?.[route.method.toLowerCase()]
    if (op === undefined) continue
    const extra = route.success
    for (const [code, response] of Object.entries<Json>(op.responses ?? {})) {
      const status = Number(code)
      let replayable = status >= 200 && status < 300
      if (status >= 400) {
        const schema = response.content?.["application/json"]?.schema
        // Only HttpApi's own decode error: nothing of this operation can fail validation.
        if (schema?.$ref === DECODE_ERROR_REF) {
          delete op.responses[code]
          continue
        }
        const errors = errorSchemas(spec, schema)
        response.description = describeErrors(errors) ?? response.description
        replayable = status < 500 && errors.some((e) => isStored(codeOf(e)))
      }
      const headers: Json = { "X-Request-Id": headerRef("X-Request-Id") }
      if (route.mutating && replayable) headers["Idempotent-Replayed"] = headerRef("Idempotent-Replayed")
      if (status === 503 || status === 429 || (route.mutating && status === 409)) {
        headers["Retry-After"] = headerRef("Retry-After")
      }
      if (status >= 200 && status < 300 && extra !== undefined) {
        for (const [name, description] of Object.entries(extra.headers ?? {})) {
          headers[name] = { description, required: true, schema: { type: "string" } }
        }
        if (extra.content !== undefined) response.content = { ...response.content, ...extra.content }
      }
      response.headers = { ...response.headers, ...headers }
    }
    if (route.scope !== undefined) {
      op["x-required-scope"] = route.scope
      op.description = [op.description, `Requires scope \`${route.scope}\`.`].filter(Boolean).join("\n\n")
    }
    if (route.mutating) {
      op.parameters = [
        ...(op.parameters ?? []),
        {
          name: "Idempotency-Key",
          in: "header",
          required: true,
          description:
            "8 to 128 characters. The same key with the same request replays the first response for 24 hours (header Idempotent-Replayed: true); with a different request it is 409 idempotency_key_reused.",
          schema: { type: "string", minLength: 8, maxLength: 128 }
        }
      ]
    }
  }
  return spec
})()
