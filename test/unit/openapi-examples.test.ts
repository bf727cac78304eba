import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { HttpApi } from "@effect/platform"
import { Either, Option, ParseResult, Schema, type SchemaAST } from "effect"
import { describe, expect, it } from "vitest"
import { Api } from "../../apps/api/Api.js"
import { openApiDocumentFor } from "../../apps/api/OpenApiDoc.js"
import { type Example, OPERATION_EXAMPLES } from "../../apps/api/OpenApiExamples.js"

interface Reflected {
  readonly payloads: ReadonlyMap<string, { readonly ast: SchemaAST.AST }>
  readonly responses: ReadonlyMap<number, Option.Option<SchemaAST.AST>>
}
const operations = new Map<string, Reflected>()
HttpApi.reflect(Api, {
  onGroup: () => {},
  onEndpoint: ({ endpoint, errors, group, payloads, successes }) => {
    const responses = new Map<number, Option.Option<SchemaAST.AST>>()
    for (const [status, { ast }] of [...successes, ...errors]) responses.set(status, ast)
    operations.set(group.topLevel ? endpoint.name : `${group.identifier}.${endpoint.name}`, { payloads, responses })
  }
})

/** Decodes `value` as the server would read (or a client would read) it: excess properties are errors too. */
const decode = (ast: SchemaAST.AST, value: unknown) =>
  Schema.decodeUnknownEither(Schema.make(ast), { onExcessProperty: "error", errors: "all" })(value).pipe(
    Either.mapLeft(ParseResult.TreeFormatter.formatErrorSync)
  )

interface Case {
  readonly operationId: string
  readonly where: string
  /** A request example's media type. */
  readonly type?: string
  /** A response example's status. */
  readonly status?: number
  readonly name: string
  readonly example: Example
}
const cases: ReadonlyArray<Case> = Object.entries(OPERATION_EXAMPLES).flatMap(([operationId, examples]) => [
  ...Object.entries(examples.request ?? {}).flatMap(([type, named]) =>
    Object.entries(named).map(([name, example]) => ({ operationId, where: `request ${type}`, type, name, example }))
  ),
  ...Object.entries(examples.responses ?? {}).flatMap(([status, named]) =>
    Object.entries(named).map(([name, example]) => ({
      operationId,
      where: `response ${status}`,
      status: Number(status),
      name,
      example
    }))
  )
])

describe("the OpenAPI document's examples decode with their endpoints' own schemas", () => {
  it("the main operations have examples: create, get and list links, analytics, upload (both forms), get image, snapshot, domain, usage, errors", () => {
    for (const id of [
      "links.create",
      "links.get",
      "links.list",
      "analytics.get",
      "images.upload",
      "images.get",
      "snapshots.create",
      "domains.register",
      "usage.get"
    ]) {
      expect(OPERATION_EXAMPLES[id]?.responses, id).toBeDefined()
    }
    expect(Object.keys(OPERATION_EXAMPLES["images.upload"]?.request ?? {})).toEqual(
      expect.arrayContaining(["multipart/form-data", "image/jpeg", "image/png", "image/webp", "image/gif"])
    )
    expect(cases.filter((c) => c.status !== undefined && c.status >= 400).length).toBeGreaterThanOrEqual(3)
  })

  it.each(cases)("$operationId $where ($name)", ({ operationId, type, status, example }) => {
    const op = operations.get(operationId)
    expect(op, `no operation ${operationId}`).toBeDefined()
    if (status !== undefined) {
      const ast = op!.responses.get(status)
      expect(ast, `${operationId} has no ${status} response`).toBeDefined()
      expect(Option.isSome(ast!), `${operationId} ${status} has no body`).toBe(true)
      expect(decode(Option.getOrThrow(ast!), example.value)).toEqual(Either.right(expect.anything()))
    } else if (type === "application/json") {
      const payload = op!.payloads.get("application/json")
      expect(payload, `${operationId} takes no JSON body`).toBeDefined()
      expect(decode(payload!.ast, example.value)).toEqual(Either.right(expect.anything()))
    } else {
      // Not JSON (an upload): the document's schema for it, checked by Redocly below.
      expect(type ?? "").toMatch(/^(multipart\/form-data|image\/(jpeg|png|webp|gif))$/)
      if (type?.startsWith("image/")) expect(example.value).toBeUndefined()
    }
  })

  it("the served document carries every example, and Redocly's no-invalid-media-type-examples finds none invalid", {
    timeout: 120_000
  }, async () => {
    const doc = openApiDocumentFor("https://api.shortlinks.test/v1")
    const ops = Object.values(doc.paths as Record<string, Record<string, Record<string, unknown>>>).flatMap((item) =>
      Object.values(item)
    )
    for (const c of cases) {
      const op = ops.find((o) => o.operationId === c.operationId) as never as {
        requestBody?: { content: Record<string, { examples?: Record<string, unknown> }> }
        responses: Record<string, { content?: Record<string, { examples?: Record<string, unknown> }> }>
      }
      const media =
        c.status === undefined
          ? op.requestBody?.content[c.type!]
          : op.responses[String(c.status)]?.content?.["application/json"]
      expect(media?.examples?.[c.name], `${c.operationId} ${c.where} ${c.name}`).toEqual(c.example)
    }
    const root = fileURLToPath(new URL("../../", import.meta.url))
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "openapi-examples-"))
    try {
      fs.writeFileSync(path.join(dir, "openapi.json"), JSON.stringify(doc))
      const result = await promisify(execFile)(
        path.join(root, "node_modules/.bin/redocly"),
        ["lint", "--extends=recommended", "--format=stylish", path.join(dir, "openapi.json")],
        { cwd: dir }
      ).catch((e: { stdout?: string; stderr?: string }) => ({ stdout: e.stdout ?? "", stderr: e.stderr ?? "" }))
      expect(`${result.stdout}${result.stderr}`).not.toMatch(/no-invalid-media-type-examples/)
      expect(`${result.stdout}${result.stderr}`).toMatch(/validated/)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
