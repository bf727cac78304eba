import { HttpApi, OpenApi } from "@effect/platform"
import { Context, Option } from "effect"
import { Api } from "./Api.js"
import * as E from "./Errors.js"
import { IdempotencyKey } from "./middleware/Idempotency.js"
import { RequiredScope } from "./middleware/Scopes.js"
import { type Examples, OPERATION_EXAMPLES } from "./OpenApiExamples.js"
import { type Json, type JsonObject, SuccessDoc } from "./Shared.js"

const DECODE_ERROR_REF = "#/components/schemas/HttpApiDecodeError"

const isObject = (node: Json | undefined): node is JsonObject =>
  typeof node === "object" && node !== null && !Array.isArray(node)

/** `node[key]` when both are objects; undefined otherwise. */
const child = (node: Json | undefined, key: string): JsonObject | undefined => {
  if (!isObject(node)) return undefined
  const value = node[key]
  return isObject(value) ? value : undefined
}

/** HttpApi documents its own decode error; ErrorEnvelope answers with the contract's body instead. */
const dropDecodeError = (node: Json): Json => {
  if (Array.isArray(node)) return node.map(dropDecodeError)
  return isObject(node) ? dropDecodeErrorIn(node) : node
}
const dropDecodeErrorIn = (node: JsonObject): JsonObject => {
  if (Array.isArray(node.anyOf)) {
    const anyOf = node.anyOf.filter((s) => !(isObject(s) && s.$ref === DECODE_ERROR_REF)).map(dropDecodeError)
    const { anyOf: _, ...rest } = node
    const [only] = anyOf
    return anyOf.length === 1 ? { ...rest, ...(isObject(only) ? only : {}) } : { ...rest, anyOf }
  }
  return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, v === undefined ? v : dropDecodeError(v)]))
}

/** The prefix every route of the Api has; the document's paths are relative to `{base_url}`, which ends with it. */
export const API_PREFIX = "/v1"

/** The document's path of a route template: `/v1/links/:id` is `/links/{id}` (relative to `{base_url}`). */
export const toOpenApiPath = (template: string) =>
  (template.startsWith(`${API_PREFIX}/`) ? template.slice(API_PREFIX.length) : template).replace(
    /:([A-Za-z_]+)/g,
    "{$1}"
  )

/** The license the documents state (an SPDX reference: no license is published). */
export const LICENSE = { name: "Proprietary", identifier: "LicenseRef-Proprietary" }

/**
 * What each group (an OpenAPI tag) is about. A group missing here still gets a description
 * (Redocly's recommended rules want one per tag), from its name.
 */
const TAG_DESCRIPTIONS: Record<string, string> = {
  links: "Short Links: create, list and search, export, change, disable, QR codes and per-link options.",
  "utm-presets": "Named sets of UTM parameters that links can apply to their destination.",
  analytics: "Click analytics of a Short Link: totals, time series and breakdowns.",
  images: "Hosted images: upload or import, asynchronous normalization, delivery URLs, content ratings.",
  usage: "The account's usage against its plan's limits."
}
const describeTags = (tags: Json | undefined): Json =>
  Array.isArray(tags)
    ? tags.map((tag) =>
        isObject(tag) && typeof tag.name === "string"
          ? { ...tag, description: tag.description ?? TAG_DESCRIPTIONS[tag.name] ?? `Operations on ${tag.name}.` }
          : tag
      )
    : []

/** The response headers the middlewares set, shared by the operations that send them. */
const HEADERS = {
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
} satisfies JsonObject
const headerRef = (name: keyof typeof HEADERS) => ({ $ref: `#/components/headers/${name}` })

/** The component name a `$ref` points at. */
const refName = (ref: Json): string =>
  String(isObject(ref) ? ref.$ref : undefined)
    .split("/")
    .at(-1)!

/** The error schemas an error response lists (components), from its `anyOf` or single `$ref`. */
const errorSchemas = (spec: JsonObject, schema: Json | undefined): Array<Json | undefined> => {
  const anyOf = isObject(schema) ? schema.anyOf : undefined
  const refs = Array.isArray(anyOf) ? anyOf : schema === undefined ? [] : [schema]
  const schemas = child(child(spec, "components"), "schemas")
  return refs.map((r) => schemas?.[refName(r)])
}
const codeOf = (error: Json | undefined): string | undefined => {
  const codes = child(child(child(child(error, "properties"), "error"), "properties"), "code")?.enum
  const code = Array.isArray(codes) ? codes[0] : undefined
  return typeof code === "string" ? code : undefined
}

/**
 * The description of an error response, from the errors it lists: HttpApi takes the first
 * error's (or its decode error's) description for the whole status.
 */
const describeErrors = (errors: ReadonlyArray<Json | undefined>): string | undefined => {
  const described = errors.flatMap((e) =>
    isObject(e) && typeof e.description === "string" ? [{ code: codeOf(e), description: e.description }] : []
  )
  if (errors.length === 0 || described.length < errors.length) return undefined
  if (described.length === 1) return described[0]!.description
  return [
    "One of these errors (branch on `error.code`):",
    ...described.map((e) => `- \`${e.code}\`: ${e.description}`)
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

/** A media type's `examples` (OpenApiExamples.ts), for the document. */
const examplesJson = (examples: Examples): JsonObject =>
  Object.fromEntries(Object.entries(examples).map(([name, example]) => [name, { ...example } as JsonObject]))

/** Puts the examples of OpenApiExamples.ts on their operations' request and response media types. */
const addExamples = (spec: JsonObject) => {
  for (const item of Object.values(child(spec, "paths") ?? {})) {
    for (const op of Object.values(isObject(item) ? item : {})) {
      const examples = isObject(op) ? OPERATION_EXAMPLES[String(op.operationId)] : undefined
      if (examples === undefined) continue
      const body = child(child(op, "requestBody"), "content")
      for (const [type, named] of Object.entries(examples.request ?? {})) {
        const media = child(body, type)
        if (media !== undefined) media.examples = examplesJson(named)
      }
      for (const [status, named] of Object.entries(examples.responses ?? {})) {
        const media = child(child(child(child(op, "responses"), status), "content"), "application/json")
        if (media !== undefined) media.examples = examplesJson(named)
      }
    }
  }
}

/** Whether a response with this error code may be stored and replayed (the catalogue says). */
const isStored = (code: string | undefined) => code !== undefined && E.errorDefOf(code)?.stored === true

/**
 * The OpenAPI 3.1 document, generated from the same schemas the server validates with,
 * plus what the middlewares do for every operation: the Idempotency-Key header and the
 * scope each operation requires.
 */
export const openApiDocument: JsonObject = (() => {
  // fromApi's OpenAPISpec is plain JSON, but as an interface it has no index signature to walk it by.
  const generated = dropDecodeErrorIn(OpenApi.fromApi(Api) as unknown as JsonObject)
  // Paths relative to {base_url} (the contract's), which already ends with the prefix.
  const paths = Object.fromEntries(
    Object.entries(child(generated, "paths") ?? {}).map(([path, item]) => [toOpenApiPath(path), item])
  )
  const spec: JsonObject = {
    ...generated,
    // HttpApi's License annotation has no SPDX `identifier` (OpenAPI 3.1), which Redocly wants.
    info: { ...child(generated, "info"), license: LICENSE },
    paths,
    tags: describeTags(generated.tags)
  }
  const schemas = child(child(spec, "components"), "schemas")
  for (const name of ["HttpApiDecodeError", "Issue", "PropertyKey"]) delete schemas?.[name]
  spec.components = {
    ...child(spec, "components"),
    headers: { ...child(child(spec, "components"), "headers"), ...HEADERS }
  }
  for (const route of endpoints) {
    const op = child(child(child(spec, "paths"), toOpenApiPath(route.template)), route.method.toLowerCase())
    if (op === undefined) continue
    const extra = route.success
    const responses = child(op, "responses") ?? {}
    for (const [code, response] of Object.entries(responses)) {
      if (!isObject(response)) continue
      const status = Number(code)
      let replayable = status >= 200 && status < 300
      if (status >= 400) {
        const schema = child(child(response, "content"), "application/json")?.schema
        // Only HttpApi's own decode error: nothing of this operation can fail validation.
        if (isObject(schema) && schema.$ref === DECODE_ERROR_REF) {
          delete responses[code]
          continue
        }
        const errors = errorSchemas(spec, schema)
        response.description = describeErrors(errors) ?? response.description
        replayable = status < 500 && errors.some((e) => isStored(codeOf(e)))
      }
      const headers: JsonObject = { "X-Request-Id": headerRef("X-Request-Id") }
      if (route.mutating && replayable) headers["Idempotent-Replayed"] = headerRef("Idempotent-Replayed")
      if (status === 503 || status === 429 || (route.mutating && status === 409)) {
        headers["Retry-After"] = headerRef("Retry-After")
      }
      if (status >= 200 && status < 300 && extra !== undefined) {
        for (const [name, description] of Object.entries(extra.headers ?? {})) {
          headers[name] = { description, required: true, schema: { type: "string" } }
        }
        if (extra.content !== undefined) response.content = { ...child(response, "content"), ...extra.content }
      }
      response.headers = { ...child(response, "headers"), ...headers }
    }
    if (route.scope !== undefined) {
      op["x-required-scope"] = route.scope
      op.description = [op.description, `Requires scope \`${route.scope}\`.`].filter(Boolean).join("\n\n")
    }
    if (route.mutating) {
      op.parameters = [
        ...(Array.isArray(op.parameters) ? op.parameters : []),
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
  addExamples(spec)
  return spec
})()

/** The document as served: its one server is `{base_url}` (PUBLIC_API_BASE), the paths are relative to it. */
export const openApiDocumentFor = (apiBase: string): JsonObject => ({
  ...openApiDocument,
  servers: [{ url: apiBase, description: "This service's API (PUBLIC_API_BASE)" }]
})
