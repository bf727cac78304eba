import * as net from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call, startTestApi, type TestAccount, type TestApi } from "../support/api.js"
import type { ErrorBody, Link, Page } from "../support/resources.js"

let t: TestApi
let a: TestAccount
beforeAll(async () => {
  t = await startTestApi()
  a = await t.newAccount()
})
afterAll(() => t.close())

/** A raw HTTP/1.1 exchange, so the test controls framing (chunked, bad bytes, odd headers). */
const raw = (head: string, body: Buffer | Array<Buffer>) =>
  new Promise<{ status: number; text: string }>((resolve, reject) => {
    const socket = net.connect(Number(new URL(t.baseUrl).port), "127.0.0.1")
    let data = ""
    socket.on("data", (c) => (data += c.toString("latin1")))
    socket.on("error", reject)
    socket.on("close", () => {
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1] ?? 0)
      resolve({ status, text: data.slice(data.indexOf("\r\n\r\n") + 4) })
    })
    socket.write(head)
    for (const chunk of Array.isArray(body) ? body : [body]) socket.write(chunk)
  })

const postHead = (extra: string) =>
  `POST /v1/links HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer ${a.key}\r\n` +
  `Idempotency-Key: body-${Math.random().toString(36).slice(2)}\r\n${extra}\r\n`

const countLinks = async () => (await call<Page<Link>>(`${t.api}/links?limit=100`, { key: a.key })).json.data.length

describe("request bodies", () => {
  it("a chunked body over 1 MiB is 413 payload_too_large without being kept, and creates nothing", async () => {
    const before = await countLinks()
    const chunk = Buffer.alloc(256 * 1024, "a")
    const chunks: Array<Buffer> = [Buffer.from(`${(9 + 2).toString(16)}\r\n{"url":"h",\r\n`)]
    for (let i = 0; i < 8; i++) chunks.push(Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from("\r\n"))
    chunks.push(Buffer.from("0\r\n\r\n"))
    const res = await raw(postHead("Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"), chunks)
    expect(res.status).toBe(413)
    expect(JSON.parse(res.text).error.code).toBe("payload_too_large")
    expect(await countLinks()).toBe(before)
  })

  it("a chunked body under the limit is read normally", async () => {
    const body = Buffer.from(JSON.stringify({ url: "https://example.com/chunked" }))
    const res = await raw(postHead("Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"), [
      Buffer.from(`${body.length.toString(16)}\r\n`),
      body,
      Buffer.from("\r\n0\r\n\r\n")
    ])
    expect(res.status).toBe(201)
  })

  it("bytes that are not UTF-8 are 400, not silently replaced", async () => {
    const body = Buffer.concat([
      Buffer.from('{"url":"https://example.com/'),
      Buffer.from([0xff, 0xfe]),
      Buffer.from('"}')
    ])
    const res = await raw(postHead(`Content-Type: application/json\r\nContent-Length: ${body.length}\r\n`), body)
    expect(res.status).toBe(400)
    expect(JSON.parse(res.text).error.detail).toContain("UTF-8")
  })

  it("another charset or a Content-Encoding is 415", async () => {
    for (const headers of [
      { "content-type": "application/json; charset=iso-8859-1" },
      { "content-type": "application/json; charset=utf-16" },
      { "content-type": "application/json", "content-encoding": "gzip" }
    ]) {
      const res = await fetch(`${t.api}/links`, {
        method: "POST",
        headers: { authorization: `Bearer ${a.key}`, "idempotency-key": `enc-${Math.random()}`, ...headers },
        body: JSON.stringify({ url: "https://example.com/x" })
      })
      expect(res.status, JSON.stringify(headers)).toBe(415)
      expect(((await res.json()) as ErrorBody).error.code).toBe("unsupported_media_type")
    }
    const ok = await call(`${t.api}/links`, {
      method: "POST",
      key: a.key,
      body: { url: "https://example.com/utf8" },
      contentType: "application/json; charset=UTF-8"
    })
    expect(ok.status).toBe(201)
  })

  it("NUL characters and unpaired surrogates in any JSON string are 400 naming the field, never a 5xx", async () => {
    for (const [rawBody, field] of [
      ['{"url":"https://example.com/\\u0000"}', "url"],
      ['{"url":"https://example.com/\\ud800"}', "url"],
      ['{"url":"https://example.com/","custom_slug":"ab\\u0000cd"}', "custom_slug"],
      ['{"url\\u0000":"https://example.com/"}', "url"]
    ] as const) {
      const res = await call<ErrorBody>(`${t.api}/links`, { method: "POST", key: a.key, rawBody })
      expect(res.status, rawBody).toBe(400)
      expect(res.json.error.detail, rawBody).toContain(field)
    }
  })
})

describe("keys in URLs", () => {
  it("a key in a path segment or in any query parameter is 401 on every route, public ones included", async () => {
    for (const url of [
      `${t.api}/${a.key}`,
      `${t.api}/links/${a.key}`,
      `${t.api}/openapi.json?api_key=${a.key}`,
      `${t.api}/openapi.json?x=${a.key}`
    ]) {
      const res = await call<ErrorBody>(url)
      expect(res.status, url).toBe(401)
      expect(res.json.error.code).toBe("unauthenticated")
      expect(res.text).not.toContain(a.key)
    }
  })

  it("a key in a cookie is 401 too, even beside a valid Authorization header", async () => {
    const res = await call<ErrorBody>(`${t.api}/links`, { key: a.key, headers: { cookie: `session=${a.key}` } })
    expect(res.status).toBe(401)
    expect(res.json.error.detail).toContain("cookie")
  })

  it("a path holding a NUL byte names nothing: 404, not a database error", async () => {
    for (const path of ["/links/%00", "/utm-presets/utmp_%00", "/links/link_%00abc/options"]) {
      const res = await call(`${t.api}${path}`, { key: a.key })
      expect(res.status, path).toBe(404)
    }
  })

  it("the 404 for an unknown route does not echo a huge path back", async () => {
    const res = await call<ErrorBody>(`${t.api}/${"x".repeat(5000)}`, { key: a.key })
    expect(res.status).toBe(404)
    expect(res.json.error.message.length).toBeLessThan(300)
  })
})

describe("Idempotency-Key length", () => {
  it("is counted in characters, not bytes", async () => {
    const cyrillic80 = "ж".repeat(80)
    const ok = await fetch(`${t.api}/links`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${a.key}`,
        "content-type": "application/json",
        "idempotency-key": Buffer.from(`${cyrillic80}${Math.random()}`.slice(0, 100)).toString("latin1")
      },
      body: JSON.stringify({ url: "https://example.com/cyr" })
    })
    expect(ok.status).toBe(201)
    const short = await fetch(`${t.api}/links`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${a.key}`,
        "content-type": "application/json",
        "idempotency-key": Buffer.from("ééééé").toString("latin1")
      },
      body: JSON.stringify({ url: "https://example.com/e" })
    })
    expect(short.status).toBe(400)
    expect(((await short.json()) as ErrorBody).error.code).toBe("idempotency_key_invalid")
  })
})
