import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { Scope } from "../../domain/Scope.js"
import { ALL_SCOPES, call, startTestApi, type TestAccount, type TestApi } from "../support/api.js"
import { expectEnvelope, expectError, rawRequest, wire } from "../support/http.js"
import type { Envelope, ErrorBody, Link, Page } from "../support/resources.js"
import { waitFor } from "../support/waitFor.js"

let t: TestApi
let acct: TestAccount
let linkId: string
beforeAll(async () => {
  t = await startTestApi()
  acct = await t.newAccount()
  const r = await call<Envelope<Link>>(`${t.api}/links`, {
    method: "POST",
    key: acct.key,
    body: { url: "https://example.com/auth" }
  })
  linkId = expectEnvelope(r, 201).id
})
afterAll(() => t.close())

/** The parts of GET /openapi.json read here. */
interface OpenApiBody {
  readonly openapi: string
  readonly info: { readonly version: string }
  readonly paths: Readonly<Record<string, unknown>>
  readonly servers: ReadonlyArray<{ readonly url: string }>
}

/** Every Short Link operation: what it needs, how to call it, and what success looks like. */
interface Op {
  readonly name: string
  readonly scope: Scope
  readonly status: number
  readonly send: (headers: Record<string, string>, id: string) => ReturnType<typeof call>
}
const ops: ReadonlyArray<Op> = [
  {
    name: "POST /links",
    scope: "links:write",
    status: 201,
    send: (headers) => call(`${t.api}/links`, { method: "POST", headers, body: { url: "https://example.com/op" } })
  },
  { name: "GET /links", scope: "links:read", status: 200, send: (headers) => call(`${t.api}/links`, { headers }) },
  {
    name: "GET /links?q=",
    scope: "links:read",
    status: 200,
    send: (headers) => call(`${t.api}/links?q=example`, { headers })
  },
  {
    name: "GET /links.csv",
    scope: "links:read",
    status: 200,
    send: (headers) => call(`${t.api}/links.csv`, { headers })
  },
  {
    name: "GET /links/{id}",
    scope: "links:read",
    status: 200,
    send: (headers, id) => call(`${t.api}/links/${id}`, { headers })
  },
  {
    name: "PATCH /links/{id}",
    scope: "links:write",
    status: 200,
    send: (headers, id) =>
      call(`${t.api}/links/${id}`, { method: "PATCH", headers, body: { url: "https://example.com/patched" } })
  },
  {
    name: "DELETE /links/{id}",
    scope: "links:write",
    status: 200,
    send: (headers, id) => call(`${t.api}/links/${id}`, { method: "DELETE", headers })
  },
  {
    name: "GET /links/{id}/qr",
    scope: "links:read",
    status: 200,
    send: (headers, id) => call(`${t.api}/links/${id}/qr`, { headers })
  }
]
const bearer = (key: string) => ({ authorization: `Bearer ${key}` })

/** A fresh active link of the test account, for operations that change it. */
const freshLink = async () => {
  const r = await call<Envelope<Link>>(`${t.api}/links`, {
    method: "POST",
    key: acct.key,
    body: { url: "https://example.com/fresh" }
  })
  return expectEnvelope(r, 201).id as string
}

const linkCount = async (key: string) => {
  const r = await call<Page<Link>>(`${t.api}/links?limit=100`, { key })
  return expectEnvelope(r, 200).length as number
}

describe("authentication: a missing or invalid credential is 401 unauthenticated", () => {
  it.each(ops.map((op) => [op.name, op] as const))("%s without Authorization is 401", async (_, op) => {
    expectError(await op.send({}, linkId), 401, "unauthenticated")
  })

  const badHeaders: Array<[string, () => string]> = [
    ["an empty Authorization header", () => ""],
    ['"Bearer" without a token', () => "Bearer"],
    ['"Bearer " with an empty token', () => "Bearer "],
    ["the Basic scheme", () => `Basic ${Buffer.from(`user:${acct.key}`).toString("base64")}`],
    ["the Basic scheme with arbitrary credentials", () => "Basic x"],
    ["the Token scheme with a valid key", () => `Token ${acct.key}`],
    ["a valid key without a scheme", () => acct.key],
    ["two tokens", () => `Bearer ${acct.key} ${acct.key}`],
    ["an unknown key of the right shape", () => `Bearer sk_${"A".repeat(22)}_${"0".repeat(64)}`],
    [
      "a valid key id with a wrong secret",
      () => `Bearer ${acct.key.slice(0, -1)}${acct.key.endsWith("0") ? "1" : "0"}`
    ],
    ["a truncated key", () => `Bearer ${acct.key.slice(0, -10)}`],
    ["a key with a suffix", () => `Bearer ${acct.key}x`],
    ["random text", () => "Bearer not-a-key-at-all"],
    ["a very long token", () => `Bearer ${"x".repeat(6000)}`]
  ]
  it.each(badHeaders)("%s is 401", async (_, header) => {
    expectError(await call(`${t.api}/links`, { headers: { authorization: header() } }), 401, "unauthenticated")
  })

  it("a header with non-ASCII bytes is 401, not a failure", async () => {
    const r = await rawRequest<ErrorBody>(
      t.baseUrl,
      wire("GET", "/v1/links", { Authorization: Buffer.from([0x42, 0x65, 0x61, 0x72, 0x65, 0x72, 0x20, 0xff, 0xfe]) })
    )
    expect(r.status, r.text).toBe(401)
    expect(r.json.error.code).toBe("unauthenticated")
  })

  it("the scheme name is case-insensitive (RFC 7235): bearer works", async () => {
    expectEnvelope(await call(`${t.api}/links`, { headers: { authorization: `bearer ${acct.key}` } }), 200)
  })

  it("a revoked key is 401 (and was 200 before revocation)", async () => {
    const victim = await t.newAccount(["links:read"])
    expectEnvelope(await call(`${t.api}/links`, { key: victim.key }), 200)
    await t.revokeKey(victim.keyId)
    // The key cache learns of the revocation through NOTIFY: until then the key may still pass.
    const r = await waitFor(
      async () => {
        const r = await call(`${t.api}/links`, { key: victim.key })
        return r.status !== 200 && r
      },
      { message: "the revoked key to stop passing" }
    )
    expectError(r, 401, "unauthenticated")
  })

  it("revoking one key leaves the account's other keys working", async () => {
    const owner = await t.newAccount(["links:read"])
    const second = await t.newKey(owner.accountId, ["links:read"])
    await t.revokeKey(owner.keyId)
    // Once the revocation has reached the API (the revoked key is refused), the other still works.
    const revoked = await waitFor(
      async () => {
        const r = await call(`${t.api}/links`, { key: owner.key })
        return r.status !== 200 && r
      },
      { message: "the revoked key to stop passing" }
    )
    expectError(revoked, 401, "unauthenticated")
    expectEnvelope(await call(`${t.api}/links`, { key: second }), 200)
  })

  it("authentication comes before everything else: no key on an unknown link id or an invalid body is still 401", async () => {
    expectError(await call(`${t.api}/links/link_nope`), 401, "unauthenticated")
    const r = await call(`${t.api}/links`, { method: "POST", body: { nope: true } })
    expectError(r, 401, "unauthenticated")
    expectError(await call(`${t.api}/links?limit=0`), 401, "unauthenticated")
  })
})

describe("authentication: a key is never accepted in the URL", () => {
  it.each(["api_key", "apikey", "key", "access_token", "token", "API_KEY"])(
    "?%s=<key> is 401 even with a valid Authorization header",
    async (param) => {
      const r = await call(`${t.api}/links?${param}=${encodeURIComponent(acct.key)}`, { key: acct.key })
      expectError(r, 401, "unauthenticated", new RegExp(param))
    }
  )

  it("?api_key=<key> alone is 401", async () => {
    expectError(await call(`${t.api}/links?api_key=${acct.key}`), 401, "unauthenticated")
  })

  it("a key under any other query parameter name is 401", async () => {
    expectError(await call(`${t.api}/links?q=${acct.key}`, { key: acct.key }), 401, "unauthenticated")
  })

  it("a POST with the key in the URL is 401 and creates nothing", async () => {
    const owner = await t.newAccount()
    const r = await call(`${t.api}/links?api_key=${owner.key}`, {
      method: "POST",
      key: owner.key,
      body: { url: "https://example.com/leak" }
    })
    expectError(r, 401, "unauthenticated")
    expect(await linkCount(owner.key)).toBe(0)
  })
})

describe("scopes: nine independent permissions; a missing one is 403 api_scope_required naming it", () => {
  it.each(ops.map((op) => [op.name, op.scope, op] as const))(
    "%s needs %s: every other scope together is not enough",
    async (_, scope, op) => {
      const owner = await t.newAccount(ALL_SCOPES.filter((s) => s !== scope))
      const r = await op.send(bearer(owner.key), linkId)
      const error = expectError(r, 403, "api_scope_required")
      expect(error.detail).toContain(scope)
    }
  )

  it.each(ops.map((op) => [op.name, op.scope, op] as const))("%s works with %s alone", async (_, scope, op) => {
    // The key belongs to the link's account, so the operation reaches the link.
    const key = await t.newKey(acct.accountId, [scope])
    const r = await op.send(bearer(key), await freshLink())
    expect(r.status, r.text).toBe(op.status)
  })

  it("links:write does not imply links:read", async () => {
    const key = await t.newKey(acct.accountId, ["links:write"])
    for (const op of ops.filter((o) => o.scope === "links:read")) {
      const error = expectError(await op.send(bearer(key), linkId), 403, "api_scope_required")
      expect(error.detail).toContain("links:read")
    }
  })

  it("links:read never permits creation, change or deletion, and nothing changes", async () => {
    const key = await t.newKey(acct.accountId, ["links:read"])
    const before = await call<Envelope<Link>>(`${t.api}/links/${linkId}`, { key: acct.key })
    const count = await linkCount(acct.key)
    for (const op of ops.filter((o) => o.scope === "links:write")) {
      const error = expectError(await op.send(bearer(key), linkId), 403, "api_scope_required")
      expect(error.detail).toContain("links:write")
    }
    expect(await linkCount(acct.key)).toBe(count)
    const after = await call<Envelope<Link>>(`${t.api}/links/${linkId}`, { key: acct.key })
    expect(after.json.data).toEqual(before.json.data)
  })

  it("the scopes of other areas grant nothing on Short Links", async () => {
    const key = await t.newKey(
      acct.accountId,
      ALL_SCOPES.filter((s) => !s.startsWith("links:"))
    )
    for (const op of ops) {
      const error = expectError(await op.send(bearer(key), linkId), 403, "api_scope_required")
      expect(error.detail).toContain(op.scope)
    }
  })

  it("a key with no scopes at all is authenticated but may do nothing (403, not 401)", async () => {
    const key = await t.newKey(acct.accountId, [])
    for (const op of ops) expectError(await op.send(bearer(key), linkId), 403, "api_scope_required")
  })

  it("the scope is checked before the body and the Idempotency-Key", async () => {
    const key = await t.newKey(acct.accountId, ["links:read"])
    const r = await call(`${t.api}/links`, {
      method: "POST",
      headers: bearer(key),
      idempotencyKey: null,
      rawBody: "{not json",
      contentType: "text/plain"
    })
    expectError(r, 403, "api_scope_required", /links:write/)
  })
})

describe("public endpoints", () => {
  it("GET /v1/openapi.json needs no key and is the OpenAPI 3.1 document, version 1.0.0", async () => {
    const r = await call<OpenApiBody>(`${t.api}/openapi.json`)
    expect(r.status, r.text).toBe(200)
    expect(r.headers.get("content-type")).toMatch(/^application\/json/)
    expect(r.json.openapi).toMatch(/^3\.1\./)
    expect(r.json.info.version).toBe("1.0.0")
    expect(Object.keys(r.json.paths).some((p) => p.endsWith("/links"))).toBe(true)
    // servers + a path of the document = the real address: the server is {base_url} (PUBLIC_API_BASE).
    expect(r.json.servers.map((s) => s.url)).toEqual(["http://localhost:8080/v1"])
    expect(Object.keys(r.json.paths).some((p) => p.startsWith("/v1"))).toBe(false)
  })

  it("GET /v1/openapi.json ignores an invalid Authorization header", async () => {
    const r = await call(`${t.api}/openapi.json`, { headers: { authorization: "Bearer wrong" } })
    expect(r.status, r.text).toBe(200)
  })

  it("GET /healthz needs no key", async () => {
    const r = await call(`${t.baseUrl}/healthz`)
    expect(r.status, r.text).toBe(200)
  })
})
