import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call, idem, startTestApi, type TestAccount, type TestApi } from "../support/api.js"
import { expectEnvelope, expectError, fetchBytes, prng, type RawReply, rawRequest, wire } from "../support/http.js"
import type { Envelope, ErrorBody, Link, Page } from "../support/resources.js"

let t: TestApi
let acct: TestAccount
let linkId: string
beforeAll(async () => {
  t = await startTestApi()
  acct = await t.newAccount()
  const r = await call<Envelope<Link>>(`${t.api}/links`, {
    method: "POST",
    key: acct.key,
    body: { url: "https://example.com/errors" }
  })
  linkId = expectEnvelope(r, 201).id
})
afterAll(() => t.close())

describe("unknown routes are 404 not_found in the error shape", () => {
  it.each([
    ["GET", "/v1/nope"],
    ["GET", "/v1/links/abc/def"],
    ["GET", "/v1/links/"],
    ["GET", "/V1/LINKS"],
    ["GET", "/v1/Links"],
    ["GET", "/v1//links"],
    ["GET", "//v1/links"],
    ["GET", "/v1/links.json"],
    ["GET", "/v1/links.csv/x"],
    ["GET", "/v2/links"],
    ["GET", "/links"],
    ["GET", "/v1"],
    ["GET", "/"],
    ["POST", "/v1/nope"],
    ["PUT", "/v1/nope/abc"]
  ])("%s %s", async (method, path) => {
    const r = await call<ErrorBody>(`${t.baseUrl}${path}`, {
      method,
      key: acct.key,
      body: method === "GET" ? undefined : {}
    })
    const error = expectError(r, 404, "not_found")
    expect(Object.keys(r.json)).toEqual(["error"])
    expect(error.request_id).toMatch(/^req_/)
  })
})

describe("a known path with another method is 405 method_not_allowed with Allow", () => {
  it.each([
    ["PUT", "/v1/links", "GET, HEAD, POST"],
    ["PATCH", "/v1/links", "GET, HEAD, POST"],
    ["DELETE", "/v1/links", "GET, HEAD, POST"],
    ["POST", "/v1/links/abc", "GET, HEAD, PATCH, DELETE"],
    ["PUT", "/v1/links/abc", "GET, HEAD, PATCH, DELETE"],
    ["POST", "/v1/openapi.json", "GET, HEAD"]
  ])("%s %s", async (method, path, allow) => {
    const r = await call<ErrorBody>(`${t.baseUrl}${path}`, { method, key: acct.key })
    const error = expectError(r, 405, "method_not_allowed")
    expect(r.headers.get("allow")).toBe(allow)
    expect(error.request_id).toMatch(/^req_/)
  })
})

describe("request ids", () => {
  it("every error body has error.code, error.message and error.request_id, and X-Request-Id is the same id", async () => {
    const other = await t.newAccount()
    const readOnly = await t.newKey(acct.accountId, ["links:read"])
    const replies = [
      expectError(await call(`${t.api}/links`, { method: "POST", key: acct.key, body: {} }), 400, "invalid_request"),
      expectError(await call(`${t.api}/links`), 401, "unauthenticated"),
      expectError(await call(`${t.api}/links`, { method: "POST", key: readOnly, body: {} }), 403, "api_scope_required"),
      expectError(await call(`${t.api}/links/${linkId}`, { key: other.key }), 404, "not_found"),
      expectError(
        await call(`${t.api}/links`, {
          method: "POST",
          key: acct.key,
          body: { url: "https://e.com", custom_slug: "healthz" }
        }),
        409,
        "slug_taken"
      ),
      expectError(
        await call(`${t.api}/links`, { method: "POST", key: acct.key, rawBody: "{}", contentType: "text/plain" }),
        415,
        "unsupported_media_type"
      ),
      expectError(
        await call(`${t.api}/links`, { method: "POST", key: acct.key, body: { url: "http://sho.rt/x" } }),
        422,
        "url_not_allowed"
      )
    ]
    expect(new Set(replies.map((e) => e.request_id)).size).toBe(replies.length)
  })

  it("success responses carry X-Request-Id equal to meta.request_id, and ids are unique", async () => {
    const a = expectEnvelope(await call<Envelope<Link>>(`${t.api}/links/${linkId}`, { key: acct.key }), 200)
    expect(a.id).toBe(linkId)
    const ids = new Set<string>()
    for (let i = 0; i < 5; i++) {
      const r = await call<Page<Link>>(`${t.api}/links?limit=1`, { key: acct.key })
      expectEnvelope(r, 200)
      ids.add(r.json.meta.request_id)
    }
    expect(ids.size).toBe(5)
  })

  it("non-JSON responses (CSV, QR, OpenAPI) carry X-Request-Id too", async () => {
    const csv = await call(`${t.api}/links.csv`, { key: acct.key })
    expect(csv.headers.get("x-request-id")).toMatch(/^req_/)
    const qr = await fetchBytes(`${t.api}/links/${linkId}/qr`, acct.key)
    expect(qr.headers.get("x-request-id")).toMatch(/^req_/)
    const doc = await call(`${t.api}/openapi.json`)
    expect(doc.headers.get("x-request-id")).toMatch(/^req_/)
  })

  it("a JSON body over 1 MiB is 413 payload_too_large", async () => {
    const r = await call(`${t.api}/links`, {
      method: "POST",
      key: acct.key,
      body: { url: `https://example.com/${"a".repeat(1024 * 1024)}` }
    })
    expectError(r, 413, "payload_too_large")
  })

  it.each([
    ["arrays", (d: number) => `${"[".repeat(d)}${"]".repeat(d)}`],
    ["objects", (d: number) => `${'{"a":'.repeat(d)}1${"}".repeat(d)}`]
  ])("deeply nested JSON %s are 400 invalid_request, at the top level and inside url", async (_, nest) => {
    for (const depth of [100, 10_000, 100_000]) {
      for (const rawBody of [nest(depth), `{"url":${nest(depth)}}`]) {
        const r = await call(`${t.api}/links`, { method: "POST", key: acct.key, rawBody })
        expectError(r, 400, "invalid_request", /body|url/)
      }
    }
  })
})

/** A reply from the service (JSON) must have the error shape; Node's own parser rejections have no body. */
const checkRaw = (label: string, r: RawReply<ErrorBody | undefined>) => {
  expect(r.status, `${label}: ${r.text.slice(0, 300)}`).toBeLessThan(500)
  if (r.status >= 400 && r.json !== undefined) {
    expect(r.json.error?.code, label).toBeTypeOf("string")
    expect(r.json.error?.message, label).toBeTypeOf("string")
    expect(r.json.error?.request_id, label).toBeTypeOf("string")
    expect(r.headers["x-request-id"], label).toBe(r.json.error.request_id)
  }
}

describe("fuzz: malformed requests never yield a 5xx", () => {
  const auth = () => ({ Authorization: `Bearer ${acct.key}` })

  it("random byte bodies, with JSON and other content types", async () => {
    const rnd = prng(1)
    const types = ["application/json", "application/json; charset=utf-8", "text/plain", "application/octet-stream", ""]
    for (let i = 0; i < 60; i++) {
      const body = rnd.bytes(rnd.int(i % 10 === 0 ? 20_000 : 300))
      const contentType = rnd.pick(types)
      const headers: Record<string, string> = { ...auth(), "Idempotency-Key": idem() }
      if (contentType !== "") headers["Content-Type"] = contentType
      const path = rnd.pick(["/v1/links", `/v1/links/${linkId}`])
      const method = path === "/v1/links" ? "POST" : "PATCH"
      checkRaw(`${method} ${path} random bytes #${i}`, await rawRequest(t.baseUrl, wire(method, path, headers, body)))
    }
  })

  it("random JSON values as bodies", async () => {
    const rnd = prng(2)
    const value = (depth: number): unknown => {
      switch (rnd.int(depth > 4 ? 5 : 8)) {
        case 0:
          return null
        case 1:
          return rnd.next() * 1e6 - 5e5
        case 2:
          return rnd.int(2) === 0
        case 3:
          return rnd.pick([
            "",
            "https://example.com",
            "http://sho.rt/x",
            "javascript:x",
            "\u0000",
            "\ud800",
            "é".repeat(3000)
          ])
        case 4:
          return rnd.bytes(rnd.int(40)).toString("latin1")
        case 5:
          return Array.from({ length: rnd.int(4) }, () => value(depth + 1))
        default: {
          const o: Record<string, unknown> = {}
          for (let k = rnd.int(4); k > 0; k--) {
            o[rnd.pick(["url", "custom_slug", "__proto__", "constructor", "x", ""])] = value(depth + 1)
          }
          return o
        }
      }
    }
    for (let i = 0; i < 80; i++) {
      const body = rnd.int(3) === 0 ? { url: value(1), custom_slug: value(1) } : value(0)
      const method = rnd.pick(["POST", "PATCH"])
      const url = method === "POST" ? `${t.api}/links` : `${t.api}/links/${linkId}`
      const r = await call<ErrorBody>(url, { method, key: acct.key, rawBody: JSON.stringify(body) ?? "null" })
      expect(r.status, `${method} ${JSON.stringify(body)?.slice(0, 200)}: ${r.text}`).toBeLessThan(500)
      if (r.status >= 400) expect(r.headers.get("x-request-id")).toBe(r.json.error.request_id)
    }
  })

  it("bad UTF-8 in the body and in the path", async () => {
    const bad = [
      Buffer.from([0xff]),
      Buffer.from([0xc0, 0xaf]),
      Buffer.from([0xed, 0xa0, 0x80]),
      Buffer.from([0xe0, 0xa4])
    ]
    for (const b of bad) {
      const body = Buffer.concat([Buffer.from('{"url":"https://example.com/'), b, Buffer.from('"}')])
      const headers = { ...auth(), "Content-Type": "application/json", "Idempotency-Key": idem() }
      checkRaw("bad UTF-8 body", await rawRequest(t.baseUrl, wire("POST", "/v1/links", headers, body)))
      const slugBody = Buffer.concat([Buffer.from('{"url":"https://e.com","custom_slug":"ab'), b, Buffer.from('cd"}')])
      checkRaw("bad UTF-8 slug", await rawRequest(t.baseUrl, wire("POST", "/v1/links", headers, slugBody)))
      const path = Buffer.concat([Buffer.from("/v1/links/link_"), b])
      checkRaw("raw bad UTF-8 path", await rawRequest(t.baseUrl, wire("GET", path, auth())))
      const encoded = `/v1/links/link_${[...b].map((x) => `%${x.toString(16).toUpperCase()}`).join("")}`
      const r = await rawRequest<ErrorBody | undefined>(t.baseUrl, wire("GET", encoded, auth()))
      checkRaw(`encoded bad UTF-8 path ${encoded}`, r)
      expect(r.status).toBe(404)
      const q = await rawRequest<ErrorBody | undefined>(
        t.baseUrl,
        wire("GET", `/v1/links?q=${encoded.slice(10)}`, auth())
      )
      checkRaw(`bad UTF-8 q ${encoded}`, q)
    }
  })

  it("huge headers", async () => {
    for (const size of [1_000, 8_000, 15_000, 100_000]) {
      const headers = { ...auth(), "X-Junk": "j".repeat(size) }
      checkRaw(`X-Junk of ${size}`, await rawRequest(t.baseUrl, wire("GET", "/v1/links", headers)))
      const big = { Authorization: `Bearer ${"k".repeat(size)}` }
      checkRaw(`Authorization of ${size}`, await rawRequest(t.baseUrl, wire("GET", "/v1/links", big)))
      const key = { ...auth(), "Idempotency-Key": "i".repeat(size), "Content-Type": "application/json" }
      checkRaw(
        `Idempotency-Key of ${size}`,
        await rawRequest(t.baseUrl, wire("POST", "/v1/links", key, '{"url":"https://e.com"}'))
      )
    }
    const many: Record<string, string> = { ...auth() }
    for (let i = 0; i < 500; i++) many[`X-H${i}`] = "v"
    checkRaw("500 headers", await rawRequest(t.baseUrl, wire("GET", "/v1/links", many)))
  })

  it("weird methods", async () => {
    for (const method of [
      "FOO",
      "PROPFIND",
      "BREW",
      "PURGE",
      "LINK",
      "OPTIONS",
      "TRACE",
      "get",
      "Post",
      "HEAD",
      "M-SEARCH"
    ]) {
      for (const path of ["/v1/links", `/v1/links/${linkId}`, "/v1/nope"]) {
        let r: RawReply<ErrorBody | undefined>
        try {
          r = await rawRequest(t.baseUrl, wire(method, path, { ...auth(), "Idempotency-Key": idem() }))
        } catch {
          continue // the HTTP parser closed the connection: no response at all is not a 5xx
        }
        checkRaw(`${method} ${path}`, r)
      }
    }
  })

  it("path traversal and odd ids", async () => {
    const paths = [
      "/v1/links/..",
      "/v1/links/../links",
      "/v1/links/..%2F..%2Fetc%2Fpasswd",
      "/v1/links/%2e%2e",
      "/v1/links/%2e%2e%2f%2e%2e%2fopenapi.json",
      "/v1/./links",
      "//v1/links",
      "/v1//links",
      "/v1/links/link_x/../../openapi.json",
      `/v1/links/${linkId}%00`,
      `/v1/links/${linkId}%20`,
      "/v1/links/%",
      "/v1/links/%ZZ",
      "/v1/links/%E0%A4%A",
      "/v1/links/link_%F0%9F%92%A9",
      "/v1/links/link_';DROP TABLE links;--",
      "/v1/links/link_%27%3BDROP%20TABLE%20links%3B--",
      "/v1/links/*",
      "/v1/links/link_x?limit=0",
      "/v1/links/link_x#frag",
      "/v1/links/link_x;a=b",
      `/v1/links/${"a".repeat(101)}`,
      `/v1/links/link_${"a".repeat(1000)}`,
      `/v1/links/link_${"a".repeat(10_000)}`,
      `/v1/links/link_${"a".repeat(100_000)}`,
      `/v1/links/link_${"a".repeat(1000)}/qr`
    ]
    for (const path of paths) {
      for (const method of ["GET", "PATCH", "DELETE"]) {
        const headers = { ...auth(), "Idempotency-Key": idem(), "Content-Type": "application/json" }
        const body = method === "PATCH" ? '{"url":"https://example.com/traversal"}' : undefined
        const r = await rawRequest<ErrorBody | undefined>(t.baseUrl, wire(method, path, headers, body))
        checkRaw(`${method} ${path.slice(0, 80)}`, r)
      }
    }
    // The link the fuzz aimed at is unchanged.
    const link = expectEnvelope(await call<Envelope<Link>>(`${t.api}/links/${linkId}`, { key: acct.key }), 200)
    expect(link.destination_url).toBe("https://example.com/errors")
    expect(link.publication_status).toBe("active")
  })

  it("random query strings on GET /links and the QR endpoint", async () => {
    const rnd = prng(3)
    const names = [
      "limit",
      "cursor",
      "q",
      "status",
      "created_after",
      "created_before",
      "size",
      "margin",
      "ecc",
      "format",
      "domain",
      "x"
    ]
    const values = [
      "",
      "0",
      "-1",
      "1e309",
      "NaN",
      "Infinity",
      "%00",
      "%FF",
      "%",
      "2024-02-30",
      "99999-01-01",
      "+275760-09-13",
      "0000-00-00",
      "active",
      "svg",
      "H",
      "a".repeat(3000),
      "%25%5F%5C",
      "djE6OTk5OTk5OTk5OTk5OTk5OTk5OQ"
    ]
    for (let i = 0; i < 120; i++) {
      const parts = Array.from({ length: 1 + rnd.int(3) }, () => `${rnd.pick(names)}=${rnd.pick(values)}`)
      const path = rnd.pick(["/v1/links", `/v1/links/${linkId}/qr`, "/v1/links.csv"])
      const r = await rawRequest<ErrorBody | undefined>(t.baseUrl, wire("GET", `${path}?${parts.join("&")}`, auth()))
      checkRaw(`GET ${path}?${parts.join("&").slice(0, 200)}`, r)
    }
  })

  it("the service still answers normally after the fuzz", async () => {
    const r = await call(`${t.api}/links`, {
      method: "POST",
      key: acct.key,
      body: { url: "https://example.com/after" }
    })
    expectEnvelope(r, 201)
    expect((await call(`${t.baseUrl}/healthz`)).status).toBe(200)
  })
})

describe("HEAD", () => {
  it("HEAD on a GET endpoint answers like GET, without a body", async () => {
    const t2 = await startTestApi()
    try {
      const a = await t2.newAccount()
      const created = await call<Envelope<Link>>(`${t2.api}/links`, {
        method: "POST",
        key: a.key,
        body: { url: "https://example.com/h" }
      })
      const res = await fetch(`${t2.api}/links/${created.json.data.id}`, {
        method: "HEAD",
        headers: { authorization: `Bearer ${a.key}` }
      })
      expect(res.status).toBe(200)
      expect(res.headers.get("content-type")).toContain("application/json")
      expect(await res.text()).toBe("")
      const missing = await fetch(`${t2.api}/links/link_doesnotexist0000000000`, {
        method: "HEAD",
        headers: { authorization: `Bearer ${a.key}` }
      })
      expect(missing.status).toBe(404)
      const unauth = await fetch(`${t2.api}/links`, { method: "HEAD" })
      expect(unauth.status).toBe(401)
    } finally {
      await t2.close()
    }
  })
})
