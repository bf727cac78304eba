import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call, startTestApi, type TestAccount, type TestApi } from "../support/api.js"
import type { Envelope, ErrorBody, Link, Page } from "../support/resources.js"
import { waitFor } from "../support/waitFor.js"

let t: TestApi
let a: TestAccount
let admin: pg.Client
let dbName = ""

beforeAll(async () => {
  t = await startTestApi()
  a = await t.newAccount()
  dbName = new URL(t.databaseUrl).pathname.slice(1)
  const serverUrl = new URL(t.databaseUrl)
  serverUrl.pathname = "/postgres"
  admin = new pg.Client({ connectionString: serverUrl.toString() })
  await admin.connect()
})
afterAll(async () => {
  await admin.query(`ALTER DATABASE ${dbName} ALLOW_CONNECTIONS true`).catch(() => {})
  await admin.end()
  await t.close()
})

const cutDatabase = async () => {
  await admin.query(`ALTER DATABASE ${dbName} ALLOW_CONNECTIONS false`)
  await admin.query(
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
    [dbName]
  )
}

describe("when PostgreSQL is unreachable", () => {
  it("reads and writes answer 503 dependency_unavailable with Retry-After, readiness fails, nothing is half-written; all recover after", async () => {
    const created = await call<Envelope<Link>>(`${t.api}/links`, {
      method: "POST",
      key: a.key,
      body: { url: "https://example.com/before" }
    })
    expect(created.status).toBe(201)
    const id = created.json.data.id
    // Warm the key cache so the failure is the database, not authentication.
    expect((await call(`${t.api}/links/${id}`, { key: a.key })).status).toBe(200)

    await cutDatabase()
    const read = await call<ErrorBody>(`${t.api}/links/${id}`, { key: a.key })
    expect(read.status).toBe(503)
    expect(read.json.error.code).toBe("dependency_unavailable")
    expect(read.headers.get("retry-after")).toBe("1")
    expect(read.json.error.request_id).toBe(read.headers.get("x-request-id"))

    const write = await call<ErrorBody>(`${t.api}/links`, {
      method: "POST",
      key: a.key,
      body: { url: "https://example.com/during" },
      idempotencyKey: "outage-key-0001"
    })
    expect(write.status).toBe(503)
    expect(write.json.error.code).toBe("dependency_unavailable")
    expect((await fetch(`${t.baseUrl}/readyz`)).status).toBe(503)
    expect((await fetch(`${t.baseUrl}/healthz`)).status).toBe(200)

    await admin.query(`ALTER DATABASE ${dbName} ALLOW_CONNECTIONS true`)
    // The pool reconnects on its own.
    await waitFor(
      async () => {
        expect((await fetch(`${t.baseUrl}/readyz`)).status).toBe(200)
        return true
      },
      { message: "readiness to come back" }
    )
    // The failed write left nothing behind and did not use its key up.
    const retry = await call(`${t.api}/links`, {
      method: "POST",
      key: a.key,
      body: { url: "https://example.com/during" },
      idempotencyKey: "outage-key-0001"
    })
    expect(retry.status).toBe(201)
    expect(retry.headers.get("idempotent-replayed")).toBeNull()
    const list = await call<Page<Link>>(`${t.api}/links?limit=100`, { key: a.key })
    expect(list.json.data.map((l) => l.destination_url).sort()).toEqual([
      "https://example.com/before",
      "https://example.com/during"
    ])
  }, 60_000)
})
