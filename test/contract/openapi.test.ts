import { Validator } from "@seriousme/openapi-schema-validator"
import { describe, expect, it } from "vitest"
import { openApiDocument } from "../../apps/api/OpenApiDoc.js"
import { routes } from "../../apps/api/Routes.js"

const doc = openApiDocument as any
const op = (path: string, method: string) => doc.paths[path]?.[method]
const codesOf = (operation: any, status: string): Array<string> => {
  const schema = operation.responses?.[status]?.content?.["application/json"]?.schema
  if (schema === undefined) return []
  const refs = schema.anyOf ?? [schema]
  return refs.map((r: any) => {
    const name = r.$ref.split("/").at(-1)
    return doc.components.schemas[name].properties.error.properties.code.enum?.[0]
  })
}

describe("OpenAPI document", () => {
  it("is a valid OpenAPI 3.1 document (checked by an OpenAPI validator)", async () => {
    const validator = new Validator()
    const result = await validator.validate(structuredClone(doc))
    expect(result.errors ?? []).toEqual([])
    expect(result.valid).toBe(true)
    expect(validator.version).toBe("3.1")
  })

  it("has info.version 1.0.0 and documents every route of the server", () => {
    expect(doc.info.version).toBe("1.0.0")
    for (const route of routes) {
      const path = route.template.replace(/:([A-Za-z_]+)/g, "{$1}")
      expect(op(path, route.method.toLowerCase()), `${route.method} ${path}`).toBeDefined()
    }
  })

  it("documents the Idempotency-Key header on every POST, PATCH and DELETE, and only there", () => {
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      for (const [method, operation] of Object.entries<any>(item)) {
        const header = (operation.parameters ?? []).find((p: any) => p.in === "header" && p.name === "Idempotency-Key")
        if (["post", "patch", "delete"].includes(method)) {
          expect(header, `${method} ${path}`).toMatchObject({
            required: true,
            schema: { minLength: 8, maxLength: 128 }
          })
          expect(codesOf(operation, "400")).toEqual(
            expect.arrayContaining(["idempotency_key_required", "idempotency_key_invalid"])
          )
          expect(codesOf(operation, "409")).toEqual(
            expect.arrayContaining(["idempotency_key_reused", "idempotency_request_in_progress"])
          )
        } else {
          expect(header, `${method} ${path}`).toBeUndefined()
        }
      }
    }
  })

  it("documents on every operation the statuses and codes the pipeline can return", () => {
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      for (const [method, operation] of Object.entries<any>(item)) {
        expect(codesOf(operation, "401"), `${method} ${path}`).toEqual(["unauthenticated"])
        expect(codesOf(operation, "403"), `${method} ${path}`).toContain("api_scope_required")
        expect(codesOf(operation, "400"), `${method} ${path}`).toContain("invalid_request")
        expect(codesOf(operation, "500"), `${method} ${path}`).toEqual(["internal_error"])
        expect(codesOf(operation, "503"), `${method} ${path}`).toEqual(["dependency_unavailable"])
        expect(operation.security, `${method} ${path}`).toEqual([{ bearer: [] }])
      }
    }
    expect(codesOf(op("/v1/links", "post"), "409")).toContain("slug_taken")
    expect(codesOf(op("/v1/links", "post"), "415")).toEqual(["unsupported_media_type"])
    expect(codesOf(op("/v1/links/{id}", "patch"), "409")).toContain("link_disabled")
    expect(codesOf(op("/v1/links/{id}", "get"), "404")).toEqual(["not_found"])
  })

  it("describes CreateLink exactly: url (uri, max 2048) required, custom_slug pattern, no other properties", () => {
    const schema = doc.components.schemas.CreateLink
    expect(schema.required).toEqual(["url"])
    expect(schema.additionalProperties).toBe(false)
    const url = schema.properties.url.$ref
      ? doc.components.schemas[schema.properties.url.$ref.split("/").at(-1)]
      : schema.properties.url
    expect(url).toMatchObject({ type: "string", format: "uri", maxLength: 2048 })
    const slug = schema.properties.custom_slug.$ref
      ? doc.components.schemas[schema.properties.custom_slug.$ref.split("/").at(-1)]
      : schema.properties.custom_slug
    expect(slug.pattern).toBe("^[A-Za-z0-9_-]{4,32}$")
    expect(doc.components.schemas.UpdateLink).toMatchObject({ required: ["url"], additionalProperties: false })
  })

  it("documents the CSV export and the QR download with their media types", () => {
    expect(Object.keys(op("/v1/links.csv", "get").responses["200"].content)).toEqual(["text/csv"])
    expect(Object.keys(op("/v1/links/{id}/qr", "get").responses["200"].content)).toContain("image/png")
  })
})
