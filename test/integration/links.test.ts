import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call, startTestApi, type TestAccount, type TestApi } from "../support/api.js"
import { expectEnvelope, expectError, rawRequest, wire } from "../support/http.js"
import type { Envelope, ErrorBody, Link, Page } from "../support/resources.js"
import { waitFor } from "../support/waitFor.js"

const SHORT_BASE = "http://sho.rt"

let t: TestApi
let acct: TestAccount
beforeAll(async () => {
  t = await startTestApi({ shortBase: SHORT_BASE })
  acct = await t.newAccount()
})
afterAll(() => t.close())

const create = async (key: string, body: unknown) => {
  const r = await call<Envelope<Link>>(`${t.api}/links`, { method: "POST", key, body })
  return expectEnvelope(r, 201)
}

/** Every link of the account, following next_cursor to the end. */
const listAll = async (key: string, query = "", limit = 100) => {
  const out: Array<Link> = []
  let cursor: string | null = null
  for (let page = 0; page < 1000; page++) {
    const qs = new URLSearchParams(query)
    qs.set("limit", String(limit))
    if (cursor !== null) qs.set("cursor", cursor)
    const r = await call<Page<Link>>(`${t.api}/links?${qs}`, { key })
    expectEnvelope(r, 200)
    out.push(...r.json.data)
    cursor = r.json.meta.next_cursor
    if (cursor === null) return out
  }
  throw new Error("paging did not end")
}

describe("POST /links: success", () => {
  it("answers 201 with the envelope {data, meta.request_id} and a link_ id, active status and short_url from the short base and the slug", async () => {
    const r = await call<Envelope<Link>>(`${t.api}/links`, {
      method: "POST",
      key: acct.key,
      body: { url: "https://example.com/a?b=c#d" }
    })
    const link = expectEnvelope(r, 201)
    expect(Object.keys(r.json).sort()).toEqual(["data", "meta"])
    expect(link.id).toMatch(/^link_[A-Za-z0-9]+$/)
    expect(link.publication_status).toBe("active")
    expect(link.destination_url).toBe("https://example.com/a?b=c#d")
    expect(link.short_url).toBe(`${SHORT_BASE}/${link.slug}`)
    expect(link.short_urls[0]).toBe(link.short_url)
    expect(link.expires_at).toBeNull()
    expect(link.utm).toBeNull()
    expect(Number.isNaN(Date.parse(link.created_at))).toBe(false)
    expect(Number.isNaN(Date.parse(link.updated_at))).toBe(false)
    expect(Math.abs(Date.parse(link.created_at) - Date.now())).toBeLessThan(60_000)
  })

  it("generates slugs of 7 base62 characters that are unique and unguessable-looking", async () => {
    const slugs: Array<string> = []
    const ids: Array<string> = []
    for (let i = 0; i < 30; i++) {
      const link = await create(acct.key, { url: `https://example.com/gen/${i}` })
      slugs.push(link.slug)
      ids.push(link.id)
    }
    for (const slug of slugs) expect(slug).toMatch(/^[0-9A-Za-z]{7}$/)
    expect(new Set(slugs).size).toBe(slugs.length)
    expect(new Set(ids).size).toBe(ids.length)
    // Not a counter: neither sorted, nor sharing a prefix, and drawn from the whole alphabet.
    expect([...slugs].sort()).not.toEqual(slugs)
    expect(new Set(slugs.map((s) => s.slice(0, 3))).size).toBeGreaterThan(25)
    const chars = new Set(slugs.join(""))
    expect(chars.size).toBeGreaterThan(40)
    expect([...chars].some((c) => /[a-z]/.test(c))).toBe(true)
    expect([...chars].some((c) => /[A-Z]/.test(c))).toBe(true)
    expect([...chars].some((c) => /[0-9]/.test(c))).toBe(true)
  })

  it("uses a valid custom_slug as given (4 and 32 characters, underscore and hyphen allowed)", async () => {
    for (const slug of ["Ab_-", `${"x".repeat(31)}Z`, "My-Custom_slug-01"]) {
      const link = await create(acct.key, { url: "https://example.com/custom", custom_slug: slug })
      expect(link.slug).toBe(slug)
      expect(link.short_url).toBe(`${SHORT_BASE}/${slug}`)
      expect(link.publication_status).toBe("active")
    }
  })

  it("accepts a url of exactly 2048 characters and stores it unchanged", async () => {
    const url = `https://example.com/${"a".repeat(2048 - "https://example.com/".length)}`
    expect(url.length).toBe(2048)
    const link = await create(acct.key, { url })
    expect(link.destination_url).toBe(url)
  })

  it.each([
    "https://example.com/a?b=c&d=e#frag",
    "http://example.com:8443/path;params?q=1",
    "https://[2001:db8::1]:8443/x",
    "http://[::1]:3000/",
    "https://example.com/b%C3%BCcher?q=%E2%9C%93#%F0%9F%98%80",
    "https://xn--bcher-kva.de/x",
    "https://example.com/~user/a-b_c.d",
    "https://example.com/'()*!$&+,;=:@/x?'()*!$&+,;=:@/?#'()*!$&+,;=:@/?",
    "https://example.com/?a[]=1&a[]=2",
    "HTTPS://EXAMPLE.COM/UPPER%2fCASE"
  ])("accepts the RFC 3986 URI %s and stores it unchanged", async (url) => {
    const link = await create(acct.key, { url })
    expect(link.destination_url).toBe(url)
  })

  it("accepts application/json with parameters and in any letter case", async () => {
    for (const contentType of ["application/json; charset=utf-8", "Application/JSON"]) {
      const r = await call(`${t.api}/links`, {
        method: "POST",
        key: acct.key,
        rawBody: JSON.stringify({ url: "https://example.com/ct" }),
        contentType
      })
      expectEnvelope(r, 201)
    }
  })
})

describe("POST /links: invalid input is 400 invalid_request, with detail naming the field and rule", () => {
  const long = `https://example.com/${"a".repeat(2049 - "https://example.com/".length)}`
  const cases: Array<[string, string, RegExp]> = [
    ["extra property", JSON.stringify({ url: "https://example.com", extra: 1 }), /extra/],
    [
      "extra property alongside custom_slug",
      JSON.stringify({ url: "https://e.com", custom_slug: "abcd", utm: {} }),
      /utm/
    ],
    ["missing url", JSON.stringify({}), /url/],
    ["missing url with a custom_slug", JSON.stringify({ custom_slug: "abcdef" }), /url/],
    ["url longer than 2048 characters", JSON.stringify({ url: long }), /url.*2048/],
    ["url that is not a URI", JSON.stringify({ url: "not a url" }), /url/],
    ["url without a scheme", JSON.stringify({ url: "example.com/x" }), /url/],
    ["scheme-relative url", JSON.stringify({ url: "//example.com/x" }), /url/],
    ["ftp: url", JSON.stringify({ url: "ftp://example.com/file" }), /url.*http/],
    ["javascript: url", JSON.stringify({ url: "javascript:alert(1)" }), /url.*http/],
    ["mailto: url", JSON.stringify({ url: "mailto:someone@example.com" }), /url.*http/],
    ["data: url", JSON.stringify({ url: "data:text/html,<script>alert(1)</script>" }), /url.*http/],
    ["http: url without //", JSON.stringify({ url: "http:example.com" }), /url/],
    ["http: url with an empty host", JSON.stringify({ url: "http:///example.com" }), /url/],
    ["https:// alone", JSON.stringify({ url: "https://" }), /url/],
    ["url with a space", JSON.stringify({ url: "https://example.com/a b" }), /url/],
    ["url with a control character", JSON.stringify({ url: "https://example.com/\u0000" }), /url/],
    ...[
      "https://example.com/a|b",
      'https://example.com/"quoted"',
      "https://example.com/%zz",
      "https://example.com/100%",
      "https://example.com/%4",
      "https://example.com/{x}",
      "https://example.com/<script>",
      "https://example.com/a\\b",
      "https://example.com/a^b",
      "https://example.com/a`b",
      "https://example.com/?q=a|b",
      "https://example.com/#<frag>",
      "https://bücher.de/x",
      "https://example.com/bücher",
      "https://example.com/\u{1F600}",
      "https://example.com/\u00a0"
    ].map((url): [string, string, RegExp] => [
      `non-URI url ${JSON.stringify(url)}`,
      JSON.stringify({ url }),
      /url: .*(URI \(RFC 3986\)|whitespace)/
    ]),
    ["empty url", JSON.stringify({ url: "" }), /url/],
    ["custom_slug of 3 characters", JSON.stringify({ url: "https://e.com", custom_slug: "abc" }), /custom_slug/],
    [
      "custom_slug of 33 characters",
      JSON.stringify({ url: "https://e.com", custom_slug: "a".repeat(33) }),
      /custom_slug/
    ],
    ["custom_slug with a space", JSON.stringify({ url: "https://e.com", custom_slug: "ab cd" }), /custom_slug/],
    ["custom_slug with a slash", JSON.stringify({ url: "https://e.com", custom_slug: "ab/cd" }), /custom_slug/],
    ["custom_slug with a dot", JSON.stringify({ url: "https://e.com", custom_slug: "ab.cd" }), /custom_slug/],
    [
      "custom_slug with non-ASCII letters",
      JSON.stringify({ url: "https://e.com", custom_slug: "ünïcode" }),
      /custom_slug/
    ],
    ["empty custom_slug", JSON.stringify({ url: "https://e.com", custom_slug: "" }), /custom_slug/],
    ["url as a number", JSON.stringify({ url: 5 }), /url/],
    ["url as null", JSON.stringify({ url: null }), /url/],
    ["url as a boolean", JSON.stringify({ url: true }), /url/],
    ["url as an array", JSON.stringify({ url: ["https://e.com"] }), /url/],
    ["url as an object", JSON.stringify({ url: { href: "https://e.com" } }), /url/],
    ["custom_slug as a number", JSON.stringify({ url: "https://e.com", custom_slug: 12345 }), /custom_slug/],
    ["custom_slug as null", JSON.stringify({ url: "https://e.com", custom_slug: null }), /custom_slug/],
    ["JSON array body", "[]", /body/],
    ["JSON array of an object", JSON.stringify([{ url: "https://e.com" }]), /body/],
    ["JSON null body", "null", /body/],
    ["JSON number body", "42", /body/],
    ["JSON string body", '"https://e.com"', /body/],
    ["JSON boolean body", "true", /body/],
    ["malformed JSON", '{"url": "https://e.com"', /body/],
    ["JSON with single quotes", "{'url': 'https://e.com'}", /body/],
    ["JSON with a trailing comma", '{"url": "https://e.com",}', /body/],
    ["two JSON documents", '{"url":"https://e.com"}{"url":"https://e.com"}', /body/],
    ["empty body", "", /body/],
    ["whitespace-only body", "   ", /body/]
  ]

  it.each(cases)("rejects %s", async (_, rawBody, detail) => {
    const r = await call(`${t.api}/links`, { method: "POST", key: acct.key, rawBody, contentType: "application/json" })
    expectError(r, 400, "invalid_request", detail)
  })

  it("names every broken field at once", async () => {
    const r = await call(`${t.api}/links`, {
      method: "POST",
      key: acct.key,
      body: { url: "ftp://x", custom_slug: "a", extra: true }
    })
    const error = expectError(r, 400, "invalid_request")
    expect(error.detail).toMatch(/url/)
    expect(error.detail).toMatch(/custom_slug/)
    expect(error.detail).toMatch(/extra/)
  })

  it("creates no link for any rejected request", async () => {
    const other = await t.newAccount()
    for (const [, rawBody] of cases) {
      await call(`${t.api}/links`, { method: "POST", key: other.key, rawBody, contentType: "application/json" })
    }
    expect(await listAll(other.key)).toEqual([])
  })
})

describe("POST /links: content type", () => {
  const body = JSON.stringify({ url: "https://example.com/ct" })
  it.each([
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/xml",
    "application/jsonp",
    "application/vnd.api+json",
    "text/json"
  ])("answers 415 unsupported_media_type for Content-Type %s", async (contentType) => {
    const r = await call(`${t.api}/links`, { method: "POST", key: acct.key, rawBody: body, contentType })
    expectError(r, 415, "unsupported_media_type")
  })

  it("answers 415 when a body comes without a Content-Type", async () => {
    const r = await rawRequest<ErrorBody>(
      t.baseUrl,
      wire("POST", "/v1/links", { Authorization: `Bearer ${acct.key}`, "Idempotency-Key": "no-content-type-1" }, body)
    )
    expect(r.status, r.text).toBe(415)
    expect(r.json.error.code).toBe("unsupported_media_type")
    expect(r.headers["x-request-id"]).toBe(r.json.error.request_id)
  })

  it("answers 415 for a POST without body or Content-Type", async () => {
    const r = await call(`${t.api}/links`, { method: "POST", key: acct.key })
    expectError(r, 415, "unsupported_media_type")
  })
})

describe("POST /links: slugs in use, reserved slugs and own hosts", () => {
  it("answers 409 slug_taken for a custom_slug this account already uses", async () => {
    await create(acct.key, { url: "https://example.com/1", custom_slug: "taken-by-me" })
    const r = await call(`${t.api}/links`, {
      method: "POST",
      key: acct.key,
      body: { url: "https://example.com/2", custom_slug: "taken-by-me" }
    })
    expectError(r, 409, "slug_taken", /custom_slug/)
  })

  it("answers 409 slug_taken for a custom_slug another account uses, and leaves that link alone", async () => {
    const owner = await t.newAccount()
    const original = await create(owner.key, { url: "https://example.com/owner", custom_slug: "someone-elses" })
    const r = await call(`${t.api}/links`, {
      method: "POST",
      key: acct.key,
      body: { url: "https://example.com/intruder", custom_slug: "someone-elses" }
    })
    expectError(r, 409, "slug_taken")
    const again = await call<Envelope<Link>>(`${t.api}/links/${original.id}`, { key: owner.key })
    expect(expectEnvelope(again, 200).destination_url).toBe("https://example.com/owner")
  })

  it("concurrent creates of one custom_slug: exactly one wins, the others get 409 slug_taken", async () => {
    const racers = await Promise.all(Array.from({ length: 4 }, () => t.newAccount()))
    const replies = await Promise.all(
      racers.flatMap((r) =>
        [0, 1].map(() =>
          call(`${t.api}/links`, {
            method: "POST",
            key: r.key,
            body: { url: "https://example.com/race", custom_slug: "raced-slug" }
          })
        )
      )
    )
    expect(replies.filter((r) => r.status === 201)).toHaveLength(1)
    for (const r of replies.filter((r) => r.status !== 201)) expectError(r, 409, "slug_taken")
  })

  it.each(["healthz", "HealthZ", "HEALTHZ", "readyz", "openapi", "admin", "links"])(
    "answers 409 slug_taken for the reserved slug %s (case-insensitive)",
    async (slug) => {
      const r = await call(`${t.api}/links`, {
        method: "POST",
        key: acct.key,
        body: { url: "https://example.com/reserved", custom_slug: slug }
      })
      expectError(r, 409, "slug_taken", /custom_slug/)
    }
  )

  it.each([
    "https://user:pass@example.com/",
    "https://user@example.com/x",
    "https://@example.com/",
    "http://example.com@evil.example/login"
  ])("refuses a destination with credentials (%s): 400 naming url and saying why, nothing created", async (url) => {
    const before = (await call<Page<Link>>(`${t.api}/links?limit=100`, { key: acct.key })).json.data.length
    const r = await call(`${t.api}/links`, { method: "POST", key: acct.key, body: { url } })
    expectError(r, 400, "invalid_request", /url: must not contain credentials/)
    expect((await call<Page<Link>>(`${t.api}/links?limit=100`, { key: acct.key })).json.data.length).toBe(before)
  })

  it("a past expires_at is 400 with a detail that names the rule, not the schema", async () => {
    const created = await call<Envelope<Link>>(`${t.api}/links`, {
      method: "POST",
      key: acct.key,
      body: { url: "https://example.com/past" }
    })
    const id = expectEnvelope(created, 201).id
    const r = await call(`${t.api}/links/${id}/options`, {
      method: "PATCH",
      key: acct.key,
      body: { expires_at: "2000-01-01T00:00:00Z" }
    })
    const error = expectError(r, 400, "invalid_request", /expires_at: must be in the future/)
    expect(error.detail).not.toMatch(/Expected|actual/)
  })

  it.each([
    "http://sho.rt/abc",
    "https://sho.rt/abc",
    "HTTP://SHO.RT/abc",
    "http://sho.rt:80/abc",
    "http://sho.rt",
    "http://sho.rt./abc"
  ])("rejects a destination on the service's own short host: %s (422 url_not_allowed)", async (url) => {
    const r = await call(`${t.api}/links`, { method: "POST", key: acct.key, body: { url } })
    expectError(r, 422, "url_not_allowed", /url/)
  })

  // The test API's own bases: http://sho.rt (port 80), http://localhost:8080/v1, http://localhost:8082.
  it.each([
    "http://localhost:8080/v1/links",
    "http://LOCALHOST:8082/x",
    "http://localhost./x",
    "http://localhost/x",
    "https://localhost:80/x",
    "http://app.localhost:8080/x",
    "http://127.0.0.1:8080/x",
    "http://127.9.9.9:8082/x",
    "http://127.0.0.1/x",
    "http://2130706433:8080/x",
    "http://0x7f000001:8080/x",
    "http://0177.0.0.1:8080/x",
    "http://127.1:8080/x",
    "http://%6c%6fcalhost:8080/x",
    "http://[::1]:8080/x",
    "http://[0:0:0:0:0:0:0:1]:8082/x",
    "http://[::ffff:127.0.0.1]:8080/x",
    "http://[::ffff:7f00:1]/x",
    "http://0.0.0.0:8080/x",
    "http://[::]:8082/x"
  ])("rejects a loopback alias on one of the service's own ports: %s (422 url_not_allowed)", async (url) => {
    const r = await call(`${t.api}/links`, { method: "POST", key: acct.key, body: { url } })
    expectError(r, 422, "url_not_allowed", /url: must not point to this service/)
  })

  it("allows loopback hosts on other ports, and private addresses, as destinations", async () => {
    for (const url of [
      "http://localhost:3000/dev",
      "http://127.0.0.1:8081/x",
      "https://localhost/x",
      "http://[::1]:9000/",
      "http://10.0.0.1:8080/intranet",
      "http://192.168.1.1/router",
      "http://172.16.0.5:8082/x",
      "http://[fd00::1]:8080/x",
      "http://169.254.169.254/latest"
    ]) {
      expect((await create(acct.key, { url })).destination_url).toBe(url)
    }
  })

  it("PATCH refuses a loopback alias on an own port too", async () => {
    const link = await create(acct.key, { url: "https://example.com/loop" })
    const r = await call(`${t.api}/links/${link.id}`, {
      method: "PATCH",
      key: acct.key,
      body: { url: "http://2130706433:8082/x" }
    })
    expectError(r, 422, "url_not_allowed")
  })

  it("allows hosts that only resemble the short host", async () => {
    for (const url of ["https://sho.rt.example.com/x", "https://notsho.rt/x", "https://example.com/sho.rt"]) {
      await create(acct.key, { url })
    }
  })
})

describe("GET /links/{id}", () => {
  it("returns the link as created", async () => {
    const link = await create(acct.key, { url: "https://example.com/read", custom_slug: "read-me" })
    const r = await call<Envelope<Link>>(`${t.api}/links/${link.id}`, { key: acct.key })
    expect(expectEnvelope(r, 200)).toEqual(link)
  })

  it.each([
    ["an unknown id", "link_DoesNotExist00000000"],
    ["an id of another shape", "not-a-link"],
    ["a very long id", `link_${"a".repeat(3000)}`],
    ["an id with a NUL byte", "link_%00"],
    ["an id with an encoded slash", "..%2F..%2Fetc%2Fpasswd"]
  ])("answers 404 not_found for %s", async (_, id) => {
    const r = await call(`${t.api}/links/${id}`, { key: acct.key })
    expectError(r, 404, "not_found")
  })
})

describe("PATCH /links/{id}", () => {
  it("changes the destination and nothing else, and GET shows it", async () => {
    const link = await create(acct.key, { url: "https://example.com/before" })
    // Changed once the clock has passed updated_at (shown in milliseconds), so that it moves.
    await waitFor(() => Date.now() > Date.parse(link.updated_at), { message: "the clock to pass updated_at" })
    const r = await call<Envelope<Link>>(`${t.api}/links/${link.id}`, {
      method: "PATCH",
      key: acct.key,
      body: { url: "https://example.org/after" }
    })
    const updated = expectEnvelope(r, 200)
    expect(updated.destination_url).toBe("https://example.org/after")
    expect(updated.id).toBe(link.id)
    expect(updated.slug).toBe(link.slug)
    expect(updated.short_url).toBe(link.short_url)
    expect(updated.publication_status).toBe("active")
    expect(updated.created_at).toBe(link.created_at)
    expect(Date.parse(updated.updated_at)).toBeGreaterThan(Date.parse(link.updated_at))
    const read = await call(`${t.api}/links/${link.id}`, { key: acct.key })
    expect(expectEnvelope(read, 200)).toEqual(updated)
  })

  it.each([
    [
      "a custom_slug (UpdateLink accepts url alone)",
      { url: "https://e.com/x", custom_slug: "newslug1" },
      /custom_slug/
    ],
    ["an extra property", { url: "https://e.com/x", publication_status: "disabled" }, /publication_status/],
    ["a missing url", {}, /url/],
    ["a non-http url", { url: "javascript:alert(1)" }, /url/],
    ["a non-URI url", { url: "https://example.com/a|b" }, /url: must be a URI \(RFC 3986\)/],
    ["a url with a bad percent-escape", { url: "https://example.com/%zz" }, /url: must be a URI/],
    ["a url with a non-ASCII host", { url: "https://bücher.de/x" }, /url: must be a URI/],
    ["a url longer than 2048 characters", { url: `https://e.com/${"b".repeat(2040)}` }, /url.*2048/],
    ["a non-object body", [], /body/]
  ])("rejects %s with 400 invalid_request and leaves the link unchanged", async (_, body, detail) => {
    const link = await create(acct.key, { url: "https://example.com/unchanged" })
    const r = await call(`${t.api}/links/${link.id}`, { method: "PATCH", key: acct.key, body })
    expectError(r, 400, "invalid_request", detail)
    const read = await call(`${t.api}/links/${link.id}`, { key: acct.key })
    expect(expectEnvelope(read, 200)).toEqual(link)
  })

  it("answers 415 for a non-JSON body", async () => {
    const link = await create(acct.key, { url: "https://example.com/ct" })
    const r = await call(`${t.api}/links/${link.id}`, {
      method: "PATCH",
      key: acct.key,
      rawBody: "url=https://e.com",
      contentType: "application/x-www-form-urlencoded"
    })
    expectError(r, 415, "unsupported_media_type")
  })

  it("rejects a destination on the own short host with 422 url_not_allowed", async () => {
    const link = await create(acct.key, { url: "https://example.com/x" })
    const r = await call(`${t.api}/links/${link.id}`, {
      method: "PATCH",
      key: acct.key,
      body: { url: `${SHORT_BASE}/${link.slug}` }
    })
    expectError(r, 422, "url_not_allowed")
  })

  it("answers 404 not_found for an unknown id", async () => {
    const r = await call(`${t.api}/links/link_DoesNotExist00000000`, {
      method: "PATCH",
      key: acct.key,
      body: { url: "https://example.com" }
    })
    expectError(r, 404, "not_found")
  })
})

describe("DELETE /links/{id}", () => {
  it("answers 200 with publication_status disabled; GET then shows it disabled", async () => {
    const link = await create(acct.key, { url: "https://example.com/to-disable" })
    const r = await call<Envelope<Link>>(`${t.api}/links/${link.id}`, { method: "DELETE", key: acct.key })
    const disabled = expectEnvelope(r, 200)
    expect(disabled.id).toBe(link.id)
    expect(disabled.slug).toBe(link.slug)
    expect(disabled.destination_url).toBe(link.destination_url)
    expect(disabled.publication_status).toBe("disabled")
    const read = await call<Envelope<Link>>(`${t.api}/links/${link.id}`, { key: acct.key })
    expect(expectEnvelope(read, 200).publication_status).toBe("disabled")
  })

  it("disabling a disabled link again is 200 and it stays disabled", async () => {
    const link = await create(acct.key, { url: "https://example.com/twice" })
    expectEnvelope(await call(`${t.api}/links/${link.id}`, { method: "DELETE", key: acct.key }), 200)
    const r = await call<Envelope<Link>>(`${t.api}/links/${link.id}`, { method: "DELETE", key: acct.key })
    expect(expectEnvelope(r, 200).publication_status).toBe("disabled")
  })

  it("a disabled link cannot be changed: PATCH is 409 link_disabled and the destination stays", async () => {
    const link = await create(acct.key, { url: "https://example.com/frozen" })
    expectEnvelope(await call(`${t.api}/links/${link.id}`, { method: "DELETE", key: acct.key }), 200)
    const r = await call(`${t.api}/links/${link.id}`, {
      method: "PATCH",
      key: acct.key,
      body: { url: "https://example.com/thawed" }
    })
    expectError(r, 409, "link_disabled")
    const read = await call<Envelope<Link>>(`${t.api}/links/${link.id}`, { key: acct.key })
    const after = expectEnvelope(read, 200)
    expect(after.destination_url).toBe("https://example.com/frozen")
    expect(after.publication_status).toBe("disabled")
  })

  it("the slug of a disabled link stays taken", async () => {
    const link = await create(acct.key, { url: "https://example.com/gone", custom_slug: "disabled-slug" })
    expectEnvelope(await call(`${t.api}/links/${link.id}`, { method: "DELETE", key: acct.key }), 200)
    const r = await call(`${t.api}/links`, {
      method: "POST",
      key: acct.key,
      body: { url: "https://example.com/new", custom_slug: "disabled-slug" }
    })
    expectError(r, 409, "slug_taken")
  })

  it("answers 404 not_found for an unknown id", async () => {
    const r = await call(`${t.api}/links/link_DoesNotExist00000000`, { method: "DELETE", key: acct.key })
    expectError(r, 404, "not_found")
  })
})

describe("ownership: another account's link is 404 not_found, never 403", () => {
  let owner: TestAccount
  let stranger: TestAccount
  let link: Link
  beforeAll(async () => {
    owner = await t.newAccount()
    stranger = await t.newAccount()
    link = await create(owner.key, { url: "https://example.com/private", custom_slug: "owned-link" })
  })

  it("GET /links/{id} of another account's link is 404", async () => {
    expectError(await call(`${t.api}/links/${link.id}`, { key: stranger.key }), 404, "not_found")
  })

  it("GET /links/{id}/qr of another account's link is 404", async () => {
    expectError(await call(`${t.api}/links/${link.id}/qr`, { key: stranger.key }), 404, "not_found")
  })

  it("PATCH of another account's link is 404 and changes nothing", async () => {
    const r = await call(`${t.api}/links/${link.id}`, {
      method: "PATCH",
      key: stranger.key,
      body: { url: "https://evil.example/" }
    })
    expectError(r, 404, "not_found")
    expect(expectEnvelope(await call(`${t.api}/links/${link.id}`, { key: owner.key }), 200)).toEqual(link)
  })

  it("DELETE of another account's link is 404 and leaves it active", async () => {
    const r = await call(`${t.api}/links/${link.id}`, { method: "DELETE", key: stranger.key })
    expectError(r, 404, "not_found")
    const read = expectEnvelope(await call<Envelope<Link>>(`${t.api}/links/${link.id}`, { key: owner.key }), 200)
    expect(read.publication_status).toBe("active")
  })

  it("lists, searches and the CSV export show only the caller's own links", async () => {
    expect((await listAll(stranger.key)).map((l) => l.id)).not.toContain(link.id)
    expect(await listAll(stranger.key, "q=owned-link")).toEqual([])
    const csv = await call(`${t.api}/links.csv`, { key: stranger.key })
    expect(csv.status).toBe(200)
    expect(csv.text).not.toContain(link.id)
  })
})

describe("GET /links: paging", () => {
  let pager: TestAccount
  let created: Array<Link>
  beforeAll(async () => {
    pager = await t.newAccount()
    created = []
    for (let i = 0; i < 23; i++) created.push(await create(pager.key, { url: `https://example.com/page/${i}` }))
  })

  it("returns a collection {data, meta: {request_id, next_cursor}}, newest first, default limit 50", async () => {
    const r = await call<Page<Link>>(`${t.api}/links`, { key: pager.key })
    const data = expectEnvelope(r, 200)
    expect(Object.keys(r.json.meta).sort()).toEqual(["next_cursor", "request_id"])
    expect(data.map((l) => l.id)).toEqual([...created].reverse().map((l) => l.id))
    expect(r.json.meta.next_cursor).toBeNull()
  })

  it("the default page size is 50", async () => {
    const many = await t.newAccount()
    for (let i = 0; i < 51; i++) await create(many.key, { url: `https://example.com/fifty/${i}` })
    const r = await call<Page<Link>>(`${t.api}/links`, { key: many.key })
    expect(expectEnvelope(r, 200)).toHaveLength(50)
    expect(r.json.meta.next_cursor).toBeTypeOf("string")
    const rest = await call<Page<Link>>(`${t.api}/links?cursor=${encodeURIComponent(r.json.meta.next_cursor!)}`, {
      key: many.key
    })
    expect(expectEnvelope(rest, 200)).toHaveLength(1)
    expect(rest.json.meta.next_cursor).toBeNull()
  })

  it("pages through every link exactly once with cursor and limit, next_cursor null on the last page", async () => {
    const seen: Array<string> = []
    const sizes: Array<number> = []
    let cursor: string | null = null
    do {
      const qs: string = cursor === null ? "limit=5" : `limit=5&cursor=${encodeURIComponent(cursor)}`
      const r = await call<Page<Link>>(`${t.api}/links?${qs}`, { key: pager.key })
      const data = expectEnvelope(r, 200)
      sizes.push(data.length)
      seen.push(...data.map((l) => l.id))
      cursor = r.json.meta.next_cursor
    } while (cursor !== null)
    expect(sizes).toEqual([5, 5, 5, 5, 3])
    expect(seen).toEqual([...created].reverse().map((l) => l.id))
  })

  it("a page size that divides the total ends with next_cursor null, not an empty extra page", async () => {
    const div = await t.newAccount()
    for (let i = 0; i < 4; i++) await create(div.key, { url: `https://example.com/div/${i}` })
    const first = await call<Page<Link>>(`${t.api}/links?limit=2`, { key: div.key })
    expect(expectEnvelope(first, 200)).toHaveLength(2)
    const second = await call<Page<Link>>(`${t.api}/links?limit=2&cursor=${first.json.meta.next_cursor}`, {
      key: div.key
    })
    expect(expectEnvelope(second, 200)).toHaveLength(2)
    expect(second.json.meta.next_cursor).toBeNull()
  })

  it("links created while paging neither duplicate nor hide the links not yet seen", async () => {
    const live = await t.newAccount()
    const before: Array<string> = []
    for (let i = 0; i < 6; i++) before.push((await create(live.key, { url: `https://example.com/live/${i}` })).id)
    const first = await call<Page<Link>>(`${t.api}/links?limit=3`, { key: live.key })
    await create(live.key, { url: "https://example.com/live/new" })
    const second = await call<Page<Link>>(`${t.api}/links?limit=3&cursor=${first.json.meta.next_cursor}`, {
      key: live.key
    })
    const ids = [...first.json.data, ...second.json.data].map((l) => l.id)
    expect(ids).toEqual([...before].reverse())
  })

  it("accepts limit 1 and 100", async () => {
    const one = await call<Page<Link>>(`${t.api}/links?limit=1`, { key: pager.key })
    expect(expectEnvelope(one, 200)).toHaveLength(1)
    expect(one.json.data[0].id).toBe(created.at(-1)!.id)
    const hundred = await call(`${t.api}/links?limit=100`, { key: pager.key })
    expect(expectEnvelope(hundred, 200)).toHaveLength(23)
  })

  it.each(["0", "101", "-1", "abc", "1.5", "", "1e1", "0x10", " 5", "9999999999999999999999"])(
    "rejects limit=%j with 400 invalid_request naming limit",
    async (limit) => {
      const r = await call(`${t.api}/links?limit=${encodeURIComponent(limit)}`, { key: pager.key })
      expectError(r, 400, "invalid_request", /limit/)
    }
  )

  it("rejects a repeated limit parameter with 400", async () => {
    expectError(await call(`${t.api}/links?limit=1&limit=2`, { key: pager.key }), 400, "invalid_request", /limit/)
  })

  it.each([
    ["garbage", "abc"],
    ["punctuation", "!!!"],
    ["a number", "12"],
    ["a forged negative position", Buffer.from("v1:-1").toString("base64url")],
    ["a forged position beyond bigint", Buffer.from("v1:99999999999999999999").toString("base64url")],
    ["a forged position at the bigint edge", Buffer.from("v1:9999999999999999999").toString("base64url")],
    ["a very long value", "A".repeat(5000)]
  ])("rejects a malformed cursor (%s) with 400 invalid_request naming cursor", async (_, cursor) => {
    const r = await call(`${t.api}/links?cursor=${encodeURIComponent(cursor)}`, { key: pager.key })
    expectError(r, 400, "invalid_request", /cursor/)
  })

  it("an empty cursor (cursor=) is the first page, as if absent", async () => {
    const first = await call<Page<Link>>(`${t.api}/links?limit=3`, { key: pager.key })
    const empty = await call<Page<Link>>(`${t.api}/links?limit=3&cursor=`, { key: pager.key })
    expect(expectEnvelope(empty, 200).map((l) => l.id)).toEqual(expectEnvelope(first, 200).map((l) => l.id))
  })

  it("an account without links gets an empty page", async () => {
    const empty = await t.newAccount()
    const r = await call<Page<Link>>(`${t.api}/links`, { key: empty.key })
    expect(expectEnvelope(r, 200)).toEqual([])
    expect(r.json.meta.next_cursor).toBeNull()
  })
})

describe("GET /links: search and filters", () => {
  let s: TestAccount
  const links: Record<string, Link> = {}
  beforeAll(async () => {
    s = await t.newAccount()
    links.alpha = await create(s.key, { url: "https://Alpha.example.com/Path", custom_slug: "SlugOne" })
    links.beta = await create(s.key, { url: "https://beta.example.org/discount%25off", custom_slug: "slug-two" })
    links.gamma = await create(s.key, { url: "https://gamma.example.net/under_score", custom_slug: "third_one" })
    links.delta = await create(s.key, { url: "https://delta.example.net/plain", custom_slug: "fourthX" })
    links.epsilon = await create(s.key, { url: "https://epsilon.example.net/aXb", custom_slug: "fifthone" })
    expectEnvelope(await call(`${t.api}/links/${links.delta.id}`, { method: "DELETE", key: s.key }), 200)
  })
  const slugsOf = (all: ReadonlyArray<Link>) => all.map((l) => l.slug).sort()

  it("q matches a substring of the slug, case-insensitively", async () => {
    expect(slugsOf(await listAll(s.key, "q=slugone"))).toEqual(["SlugOne"])
    expect(slugsOf(await listAll(s.key, "q=SLUG"))).toEqual(["SlugOne", "slug-two"])
  })

  it("q matches a substring of the destination, case-insensitively", async () => {
    expect(slugsOf(await listAll(s.key, "q=ALPHA.EXAMPLE"))).toEqual(["SlugOne"])
    expect(slugsOf(await listAll(s.key, "q=example.net"))).toEqual(["fifthone", "fourthX", "third_one"])
  })

  it("q treats % and _ literally, not as LIKE wildcards", async () => {
    expect(slugsOf(await listAll(s.key, `q=${encodeURIComponent("%")}`))).toEqual(["slug-two"])
    expect(slugsOf(await listAll(s.key, `q=${encodeURIComponent("%25")}`))).toEqual(["slug-two"])
    expect(slugsOf(await listAll(s.key, "q=_"))).toEqual(["third_one"])
    expect(slugsOf(await listAll(s.key, "q=a_b"))).toEqual([])
    expect(slugsOf(await listAll(s.key, `q=${encodeURIComponent("\\")}`))).toEqual([])
  })

  it("q without a match returns an empty page", async () => {
    const r = await call<Page<Link>>(`${t.api}/links?q=nothing-like-this`, { key: s.key })
    expect(expectEnvelope(r, 200)).toEqual([])
    expect(r.json.meta.next_cursor).toBeNull()
  })

  it("status filters by publication_status; disabled links are listed unless filtered out", async () => {
    expect(slugsOf(await listAll(s.key, "status=disabled"))).toEqual(["fourthX"])
    expect(slugsOf(await listAll(s.key, "status=active"))).toEqual(["SlugOne", "fifthone", "slug-two", "third_one"])
    expect(await listAll(s.key)).toHaveLength(5)
  })

  it("rejects an unknown status with 400 naming status", async () => {
    expectError(await call(`${t.api}/links?status=deleted`, { key: s.key }), 400, "invalid_request", /status/)
  })

  it("q, status and paging combine: every match exactly once", async () => {
    const all = await listAll(s.key, "q=example&status=active", 1)
    expect(slugsOf(all)).toEqual(["SlugOne", "fifthone", "slug-two", "third_one"])
  })

  it("created_after and created_before bound the creation time", async () => {
    const d = await t.newAccount()
    const first = await create(d.key, { url: "https://example.com/early" })
    // At least 30 ms apart, so that the time halfway is neither link's at the precision shown.
    await waitFor(() => Date.now() > Date.parse(first.created_at) + 30, {
      message: "the clock to pass the first link's created_at by 30 ms"
    })
    const second = await create(d.key, { url: "https://example.com/late" })
    const mid = new Date((Date.parse(first.created_at) + Date.parse(second.created_at)) / 2).toISOString()
    expect((await listAll(d.key, `created_after=${mid}`)).map((l) => l.id)).toEqual([second.id])
    expect((await listAll(d.key, `created_before=${mid}`)).map((l) => l.id)).toEqual([first.id])
    expect(await listAll(d.key, `created_after=${mid}&created_before=${mid}`)).toEqual([])
    expect(await listAll(d.key, "created_after=2000-01-01&created_before=2999-01-01")).toHaveLength(2)
    expect(await listAll(d.key, "created_before=2000-01-01")).toEqual([])
    expect(await listAll(d.key, `created_after=${encodeURIComponent("2999-01-01T00:00:00+02:00")}`)).toEqual([])
  })

  it("the bounds are exclusive at the precision shown: created_after=<a link's created_at> leaves that link out", async () => {
    const d = await t.newAccount()
    const link = await create(d.key, { url: "https://example.com/exact" })
    const at = encodeURIComponent(link.created_at)
    expect(await listAll(d.key, `created_after=${at}`)).toEqual([])
    expect(await listAll(d.key, `created_before=${at}`)).toEqual([])
    const justBefore = new Date(Date.parse(link.created_at) - 1).toISOString()
    const justAfter = new Date(Date.parse(link.created_at) + 1).toISOString()
    expect((await listAll(d.key, `created_after=${justBefore}`)).map((l) => l.id)).toEqual([link.id])
    expect((await listAll(d.key, `created_before=${justAfter}`)).map((l) => l.id)).toEqual([link.id])
  })

  it.each([
    ["created_after", "yesterday"],
    ["created_after", "2024-13-01"],
    ["created_after", "2024-02-30"],
    ["created_after", "2023-02-29"],
    ["created_after", "2024-01-01T25:00:00Z"],
    ["created_after", "1700000000"],
    ["created_before", ""],
    ["created_before", "2024-01-32"],
    ["created_before", "2024/01/01"]
  ])("rejects %s=%j with 400 naming the parameter", async (name, value) => {
    const r = await call(`${t.api}/links?${name}=${encodeURIComponent(value)}`, { key: s.key })
    expectError(r, 400, "invalid_request", new RegExp(name))
  })

  it("rejects a q with a NUL character with 400 instead of failing", async () => {
    expectError(await call(`${t.api}/links?q=a%00b`, { key: s.key }), 400, "invalid_request", /q/)
  })
})
