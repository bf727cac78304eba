import { Validator } from "@seriousme/openapi-schema-validator"
import { describe, expect, it } from "vitest"
import { openApiDocument, openApiDocumentFor, endpoints as routes, toOpenApiPath } from "../../apps/api/OpenApiDoc.js"

/** The parts of a JSON Schema these tests read. */
interface SchemaObject {
  readonly $ref?: string
  readonly anyOf?: ReadonlyArray<SchemaObject>
  readonly type?: string
  readonly format?: string
  readonly pattern?: string
  readonly description?: string
  readonly required?: ReadonlyArray<string>
  readonly additionalProperties?: boolean | SchemaObject
  readonly enum?: ReadonlyArray<string>
  readonly properties?: Readonly<Record<string, SchemaObject>>
}

interface MediaType {
  readonly schema: SchemaObject
}

interface Parameter {
  readonly name: string
  readonly in: string
  readonly required?: boolean
  readonly description?: string
  readonly schema: SchemaObject
}

interface Response {
  readonly description: string
  /** Every response has X-Request-Id (the pipeline sets it; a test checks). */
  readonly headers: Readonly<Record<string, unknown>>
  readonly content?: Readonly<Record<string, MediaType>>
}

interface Operation {
  readonly description?: string
  readonly parameters?: ReadonlyArray<Parameter>
  readonly requestBody?: { readonly content: Readonly<Record<string, MediaType>> }
  readonly responses: Readonly<Record<string, Response>>
  readonly security?: ReadonlyArray<Readonly<Record<string, ReadonlyArray<string>>>>
  readonly "x-required-scope"?: string
}

/** The OpenAPI 3.1 document as these tests read it. */
interface Document {
  readonly info: { readonly version: string }
  readonly paths: Readonly<Record<string, Readonly<Record<string, Operation>>>>
  readonly components: {
    readonly schemas: Readonly<Record<string, SchemaObject>>
    readonly headers: Readonly<Record<string, unknown>>
  }
}

// The generated document is plain JSON values; this is the OpenAPI shape the tests expect of it
// (the first test has it checked by an OpenAPI validator).
const doc = openApiDocument as unknown as Document
const op = (path: string, method: string) => doc.paths[path]?.[method]
const codesOf = (operation: Operation, status: string): Array<string | undefined> => {
  const schema = operation.responses?.[status]?.content?.["application/json"]?.schema
  if (schema === undefined) return []
  const refs = schema.anyOf ?? [schema]
  return refs.map((r) => {
    const name = r.$ref!.split("/").at(-1)!
    return doc.components.schemas[name].properties!.error.properties!.code.enum?.[0]
  })
}

describe("OpenAPI document", () => {
  it("is a valid OpenAPI 3.1 document (checked by an OpenAPI validator)", async () => {
    const validator = new Validator()
    const result = await validator.validate(structuredClone(openApiDocument))
    expect(result.errors ?? []).toEqual([])
    expect(result.valid).toBe(true)
    expect(validator.version).toBe("3.1")
  })

  it("has info.version 1.0.0 and documents every route of the server", () => {
    expect(doc.info.version).toBe("1.0.0")
    for (const route of routes) {
      const path = toOpenApiPath(route.template)
      expect(op(path, route.method.toLowerCase()), `${route.method} ${path}`).toBeDefined()
    }
  })

  it("has paths relative to {base_url}: the one server is PUBLIC_API_BASE, no path repeats /v1", () => {
    const served = openApiDocumentFor("https://api.example.com/v1") as unknown as Document & {
      readonly servers: ReadonlyArray<{ readonly url: string }>
    }
    expect(served.servers.map((s) => s.url)).toEqual(["https://api.example.com/v1"])
    expect(Object.keys(served.paths)).toEqual(expect.arrayContaining(["/links", "/links/{id}", "/images", "/usage"]))
    for (const path of Object.keys(served.paths)) expect(path.startsWith("/v1"), path).toBe(false)
    expect(routes.length).toBeGreaterThan(10)
    for (const route of routes) expect(served.paths[toOpenApiPath(route.template)], route.template).toBeDefined()
  })

  it("has a license and a description for every tag (Redocly's recommended rules)", () => {
    const full = openApiDocument as unknown as {
      readonly info: { readonly license?: { readonly name: string } }
      readonly tags: ReadonlyArray<{ readonly name: string; readonly description?: string }>
    }
    expect(full.info.license?.name).toBeTruthy()
    const used = new Set(
      Object.values(doc.paths).flatMap((item) =>
        Object.values(item).flatMap((o) => (o as { readonly tags?: ReadonlyArray<string> }).tags ?? [])
      )
    )
    expect([...used].sort()).toEqual(full.tags.map((t) => t.name).sort())
    for (const tag of full.tags) expect(tag.description, tag.name).toMatch(/\w{3,}/)
  })

  it("documents the Idempotency-Key header on every POST, PATCH and DELETE, and only there", () => {
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        const header = (operation.parameters ?? []).find((p) => p.in === "header" && p.name === "Idempotency-Key")
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
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        expect(codesOf(operation, "401"), `${method} ${path}`).toEqual(["unauthenticated"])
        expect(codesOf(operation, "403"), `${method} ${path}`).toContain("api_scope_required")
        // Every operation authenticates, so every one is subject to the account's request rate.
        expect(codesOf(operation, "429"), `${method} ${path}`).toEqual(["rate_limited"])
        expect(codesOf(operation, "500"), `${method} ${path}`).toEqual(["internal_error"])
        expect(codesOf(operation, "503"), `${method} ${path}`).toEqual(["dependency_unavailable"])
        expect(operation.security, `${method} ${path}`).toEqual([{ bearer: [] }])
      }
    }
    expect(codesOf(op("/links", "post"), "409")).toContain("slug_taken")
    expect(codesOf(op("/links", "post"), "415")).toEqual(["unsupported_media_type"])
    expect(codesOf(op("/links/{id}", "patch"), "409")).toContain("link_disabled")
    expect(codesOf(op("/domains", "post"), "409")).toContain("domain_taken")
    expect(codesOf(op("/domains/{id}/verify", "post"), "409")).toContain("domain_disabled")
    expect(codesOf(op("/domains/{id}/disable", "post"), "404")).toContain("not_found")
    expect(op("/domains", "get").security).toBeDefined()
    expect(codesOf(op("/links/{id}", "get"), "404")).toEqual(["not_found"])
  })

  it("documents 403 quota_exceeded where a plan limit applies: link create, link options, image upload and import, domain registration, snapshot create", () => {
    const withQuota: Array<string> = []
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        if (codesOf(operation, "403").includes("quota_exceeded")) withQuota.push(`${method} ${path}`)
      }
    }
    expect(withQuota.sort()).toEqual([
      "patch /links/{id}/options",
      "post /domains",
      "post /images",
      "post /images/url",
      "post /links",
      "post /snapshots"
    ])
    expect(doc.components.schemas.QuotaExceededError.description).toMatch(/quota/)
    expect(doc.components.schemas.RateLimitedError.description).toMatch(/Retry-After/)
  })

  it("documents 400 invalid_request on every operation with a payload or query parameters, and only there", () => {
    const validated: Array<string> = []
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        const takesInput =
          operation.requestBody !== undefined || (operation.parameters ?? []).some((p) => p.in === "query")
        const label = `${method} ${path}`
        if (takesInput) {
          validated.push(label)
          expect(codesOf(operation, "400"), label).toContain("invalid_request")
        } else {
          // A path id of any shape is looked up (404); nothing else of the request is validated.
          expect(codesOf(operation, "400"), label).not.toContain("invalid_request")
        }
        // No leftover of HttpApi's own decode error.
        expect(JSON.stringify(operation), label).not.toContain("HttpApiDecodeError")
      }
    }
    expect(validated).toEqual(
      expect.arrayContaining(["post /links", "get /links", "get /links.csv", "get /links/{id}/qr"])
    )
    expect(op("/links/{id}", "get").responses["400"]).toBeUndefined()
    expect(op("/links/{id}/options", "get").responses["400"]).toBeUndefined()
    expect(op("/utm-presets/{id}", "get").responses["400"]).toBeUndefined()
    expect(codesOf(op("/links/{id}", "delete"), "400").sort()).toEqual([
      "idempotency_key_invalid",
      "idempotency_key_required"
    ])
  })

  it("gives GET /links.csv the search parameters of GET /links except cursor and limit", () => {
    const names = (o: Operation) => (o.parameters ?? []).filter((p) => p.in === "query").map((p) => p.name)
    expect(names(op("/links.csv", "get")).sort()).toEqual(["created_after", "created_before", "q", "status"])
    expect(names(op("/links", "get")).sort()).toEqual([
      "created_after",
      "created_before",
      "cursor",
      "limit",
      "q",
      "status"
    ])
  })

  it("documents created_after and created_before as a date or a date-time", () => {
    for (const path of ["/links", "/links.csv"]) {
      for (const name of ["created_after", "created_before"]) {
        const param = op(path, "get").parameters!.find((p) => p.name === name)!
        expect(param.schema.anyOf, `${path} ${name}`).toEqual([
          { type: "string", format: "date" },
          { type: "string", format: "date-time" }
        ])
        expect(param.description, `${path} ${name}`).toMatch(/date.*date-time/)
      }
    }
  })

  it("documents the response headers: X-Request-Id everywhere, Idempotent-Replayed, Retry-After, Content-Disposition", () => {
    const headers = doc.components.headers
    expect(headers["X-Request-Id"]).toMatchObject({ required: true, schema: { type: "string" } })
    expect(headers["Idempotent-Replayed"]).toMatchObject({ schema: { type: "string", enum: ["true"] } })
    expect(headers["Retry-After"]).toMatchObject({ schema: { type: "integer" } })
    const ref = (name: string) => ({ $ref: `#/components/headers/${name}` })
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        const mutating = ["post", "patch", "delete"].includes(method)
        for (const [status, response] of Object.entries(operation.responses)) {
          const label = `${method} ${path} ${status}`
          expect(response.headers?.["X-Request-Id"], label).toEqual(ref("X-Request-Id"))
          if (status.startsWith("2")) {
            if (mutating) expect(response.headers["Idempotent-Replayed"], label).toEqual(ref("Idempotent-Replayed"))
            else expect(response.headers["Idempotent-Replayed"], label).toBeUndefined()
          }
          if (status === "503" || status === "429" || (mutating && status === "409")) {
            expect(response.headers["Retry-After"], label).toEqual(ref("Retry-After"))
          }
          // Rejections made before the operation runs are never stored, so never replayed;
          // quota_exceeded is the operation's own answer, stored and replayed like a success.
          const replayed403 = status === "403" && codesOf(operation, "403").includes("quota_exceeded")
          if (["400", "401", "403", "413", "415", "429", "500", "503"].includes(status) && !replayed403) {
            expect(response.headers["Idempotent-Replayed"], label).toBeUndefined()
          }
          if (replayed403) expect(response.headers["Idempotent-Replayed"], label).toEqual(ref("Idempotent-Replayed"))
        }
      }
    }
    // A replayed 409 is a stored answer of the operation (slug_taken), not of the idempotency check.
    expect(op("/links", "post").responses["409"].headers["Idempotent-Replayed"]).toEqual(ref("Idempotent-Replayed"))
    expect(op("/links/{id}", "delete").responses["409"].headers["Idempotent-Replayed"]).toBeUndefined()
    for (const [path, label] of [
      ["/links.csv", "CSV"],
      ["/links/{id}/qr", "QR"]
    ]) {
      expect(op(path, "get").responses["200"].headers["Content-Disposition"], label).toMatchObject({
        required: true,
        schema: { type: "string" }
      })
    }
  })

  it("describes an error response by the codes it lists, not by HttpApi's decode error", () => {
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        for (const [status, response] of Object.entries(operation.responses)) {
          if (Number(status) < 400) continue
          expect(response.description, `${method} ${path} ${status}`).not.toMatch(/did not match the expected schema/)
          for (const code of codesOf(operation, status)) {
            if (codesOf(operation, status).length > 1) expect(response.description).toContain(`\`${code}\``)
          }
        }
      }
    }
  })

  it("describes url_not_allowed truthfully: own hosts and loopback on its ports for links", () => {
    const description: string = doc.components.schemas.UrlNotAllowedError.description!
    expect(description).toMatch(/own hosts/)
    expect(description).toMatch(/loopback/)
    expect(description).toMatch(/private addresses are otherwise valid destinations/)
    expect(description).toMatch(/Server-side fetches.*private/)
  })

  it("describes CreateLink exactly: url (uri, max 2048) required, custom_slug pattern, no other properties", () => {
    const schema = doc.components.schemas.CreateLink
    expect(schema.required).toEqual(["url"])
    expect(schema.additionalProperties).toBe(false)
    const url = schema.properties!.url.$ref
      ? doc.components.schemas[schema.properties!.url.$ref.split("/").at(-1)!]
      : schema.properties!.url
    expect(url).toMatchObject({ type: "string", format: "uri", maxLength: 2048 })
    const slug = schema.properties!.custom_slug.$ref
      ? doc.components.schemas[schema.properties!.custom_slug.$ref.split("/").at(-1)!]
      : schema.properties!.custom_slug
    expect(slug.pattern).toBe("^[A-Za-z0-9_-]{4,32}$")
    expect(doc.components.schemas.UpdateLink).toMatchObject({ required: ["url"], additionalProperties: false })
  })

  it("documents the image endpoints: upload media types, 202, 413/415, the URL import's 422 codes, no scope on /usage", () => {
    const upload = op("/images", "post")
    expect(Object.keys(upload.requestBody!.content).sort()).toEqual([
      "image/gif",
      "image/jpeg",
      "image/png",
      "image/webp",
      "multipart/form-data"
    ])
    expect(upload.requestBody!.content["multipart/form-data"].schema.required).toEqual(["file"])
    expect(upload.responses["202"]).toBeDefined()
    expect(codesOf(upload, "413")).toEqual(["payload_too_large"])
    expect(codesOf(upload, "415")).toEqual(["unsupported_media_type"])
    expect(codesOf(upload, "403")).toContain("quota_exceeded")
    expect(codesOf(op("/images/url", "post"), "422").sort()).toEqual([
      "not_an_image",
      "redirect_not_allowed",
      "source_forbidden",
      "source_too_large",
      "source_unreachable",
      "url_not_allowed"
    ])
    expect(Object.keys(op("/images/{id}/rating", "patch").responses)).toEqual(
      expect.arrayContaining(["200", "202", "404", "409"])
    )
    expect(codesOf(op("/images/{id}/rating", "patch"), "409")).toContain("image_failed")
    expect(codesOf(op("/images/{id}", "get"), "404")).toEqual(["not_found"])
    expect(op("/usage", "get")["x-required-scope"]).toBeUndefined()
    const image = doc.components.schemas.Image
    expect(image.required).toEqual(
      expect.arrayContaining(["id", "status", "status_url", "url", "share_url", "mime_type", "content_rating"])
    )
    expect(doc.components.schemas.SourceForbiddenError.description).toMatch(/multipart/)
    expect(doc.components.schemas.StorageUsage.properties!.used.description).toMatch(/Partner/)
  })

  it("documents the CSV export and the QR download with their media types", () => {
    expect(Object.keys(op("/links.csv", "get").responses["200"].content!)).toEqual(["text/csv"])
    expect(Object.keys(op("/links/{id}/qr", "get").responses["200"].content!).sort()).toEqual([
      "image/png",
      "image/svg+xml"
    ])
  })
})
