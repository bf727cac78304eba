import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { createClient } from "@hey-api/openapi-ts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { jpeg } from "../fixtures/images/make.js"
import { call, idem, startTestApi, type TestAccount, type TestApi } from "../support/api.js"

/**
 * A client generated from the served OpenAPI document with @hey-api/openapi-ts: it
 * type-checks against a small program, and the program calls the running service through it
 * with the contract's base URL (`{base_url}`, ending with /v1; paths are relative to it).
 */
const run = promisify(execFile)
const root = fileURLToPath(new URL("../../", import.meta.url))
// Inside the worktree (not /tmp): the program resolves typescript's node types from here.
const dir = path.join(root, ".tmp", `generated-client-${process.pid}-${Date.now()}`)

const PROGRAM = `import { createClient, createConfig } from "./client/client/index.js"
import { imagesUpload, linksCreate, linksGet, usageGet } from "./client/sdk.gen.js"
import type { Image, Link } from "./client/types.gen.js"

export const program = async (baseUrl: string, key: string, idempotencyKey: string, photo: Blob) => {
  const client = createClient(createConfig({ baseUrl, auth: key }))
  const created = await linksCreate({
    client,
    body: { url: "https://example.com/generated" },
    headers: { "Idempotency-Key": idempotencyKey }
  })
  if (created.data === undefined) throw new Error(\`create failed: \${created.response.status}\`)
  const link: Link = created.data.data
  const read = await linksGet({ client, path: { id: link.id } })
  const missing = await linksGet({ client, path: { id: "link_missing" } })
  // The error bodies are typed by code: not_found is one of this operation's.
  const code = missing.error?.error.code
  const notFound: typeof code = "not_found"
  const usage = await usageGet({ client })
  // A multipart upload, typed by the generated client: the file part and a form field, no casts.
  const uploaded = await imagesUpload({
    client,
    body: { file: photo, content_rating: "general" },
    headers: { "Idempotency-Key": \`\${idempotencyKey}-upload\` }
  })
  if (uploaded.data === undefined) throw new Error(\`upload failed: \${uploaded.response.status}\`)
  const image: Image = uploaded.data.data
  return {
    uploaded: uploaded.response.status,
    imageStatus: image.status,
    imageRating: image.content_rating,
    created: created.response.status,
    id: link.id,
    readUrl: read.data?.data.destination_url,
    missing: missing.response.status,
    code,
    typed: notFound,
    usage: usage.response.status
  }
}
`
/** The same program with wrong bodies: the generated types must refuse them. */
const WRONG = `import { imagesUpload, linksCreate } from "./client/sdk.gen.js"
export const wrong = () => linksCreate({ body: { url: 42 }, headers: { "Idempotency-Key": "12345678" } })
export const wrongRating = (file: Blob) =>
  imagesUpload({ body: { file, content_rating: "sensitive" }, headers: { "Idempotency-Key": "12345678" } })
`

const tsc = (file: string) =>
  run(
    path.join(root, "node_modules/.bin/tsc"),
    [
      "--noEmit",
      "--strict",
      "--skipLibCheck",
      "--target",
      "es2022",
      "--module",
      "nodenext",
      "--moduleResolution",
      "nodenext",
      "--lib",
      "es2022,dom",
      file
    ],
    { cwd: dir }
  ).then(
    () => ({ ok: true, output: "" }),
    (e: { stdout?: string }) => ({ ok: false, output: String(e.stdout ?? e) })
  )

let t: TestApi
let acct: TestAccount
beforeAll(async () => {
  t = await startTestApi()
  acct = await t.newAccount()
  fs.mkdirSync(dir, { recursive: true })
  // The document as the service serves it.
  const served = await call(`${t.api}/openapi.json`)
  expect(served.status).toBe(200)
  fs.writeFileSync(path.join(dir, "openapi.json"), served.text)
  await createClient({
    input: path.join(dir, "openapi.json"),
    output: path.join(dir, "client"),
    plugins: ["@hey-api/client-fetch"],
    logs: { level: "silent" }
  })
  fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify({ type: "module" }))
  fs.writeFileSync(path.join(dir, "program.ts"), PROGRAM)
  fs.writeFileSync(path.join(dir, "wrong.ts"), WRONG)
}, 180_000)
afterAll(async () => {
  fs.rmSync(dir, { recursive: true, force: true })
  await t?.close()
})

describe("a client generated with @hey-api/openapi-ts from GET /openapi.json", () => {
  it("type-checks a program using it (a multipart upload without casts), and refuses wrong bodies", {
    timeout: 180_000
  }, async () => {
    const good = await tsc("program.ts")
    expect(good.output).toBe("")
    expect(good.ok).toBe(true)
    const wrong = await tsc("wrong.ts")
    expect(wrong.ok).toBe(false)
    expect(wrong.output).toMatch(/wrong\.ts\(2,.*TS2322/s)
    // The multipart form's fields are typed too: `sensitive` is no creation rating.
    expect(wrong.output).toMatch(/wrong\.ts\(4,.*TS2322/s)
  })

  it("calls the running service with the contract's base URL", { timeout: 60_000 }, async () => {
    const { program } = (await import(path.join(dir, "program.ts"))) as {
      program: (
        baseUrl: string,
        key: string,
        idempotencyKey: string,
        photo: Blob
      ) => Promise<{
        uploaded: number
        imageStatus: string
        imageRating: string | null
        created: number
        id: string
        readUrl: string | undefined
        missing: number
        code: string | undefined
        usage: number
      }>
    }
    const photo = new Blob([await jpeg(64, 48)], { type: "image/jpeg" })
    const result = await program(t.api, acct.key, idem(), photo)
    expect(result).toMatchObject({
      created: 201,
      readUrl: "https://example.com/generated",
      missing: 404,
      code: "not_found",
      usage: 200,
      uploaded: 202,
      imageStatus: "processing",
      imageRating: null
    })
    expect(result.id).toMatch(/^link_/)
  })
})
