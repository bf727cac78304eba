import { OpenApi } from "@effect/platform"
import { Api } from "./Api.js"
import { routes } from "./Routes.js"

type Json = any

const DECODE_ERROR_REF = "#/components/schemas/HttpApiDecodeError"

/** HttpApi documents its own decode error; the pipeline answers with the contract's body instead. */
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

/**
 * The OpenAPI 3.1 document, generated from the same schemas the server validates with,
 * plus what the pipeline does for every operation: the Idempotency-Key header and the
 * scope each operation requires.
 */
export const openApiDocument: Json = (() => {
  const spec: Json = dropDecodeError(OpenApi.fromApi(Api))
  for (const name of ["HttpApiDecodeError", "Issue", "PropertyKey"]) delete spec.components?.schemas?.[name]
  for (const route of routes) {
    const op = spec.paths?.[toOpenApiPath(route.template)]?.[route.method.toLowerCase()]
    if (op === undefined) continue
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
