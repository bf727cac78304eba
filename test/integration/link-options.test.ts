import { Schema } from "effect"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { LinkEvent } from "../../domain/Events.js"
import { call, idem, startTestApi, type TestAccount, type TestApi } from "../support/api.js"
import type { Envelope, ErrorBody, Link, LinkOptions } from "../support/resources.js"

let t: TestApi
let a: TestAccount
let other: TestAccount
let linkId = ""
const future = () => new Date(Date.now() + 86_400_000).toISOString()

beforeAll(async () => {
  t = await startTestApi()
  a = await t.newAccount()
  other = await t.newAccount()
  const created = await call<Envelope<Link>>(`${t.api}/links`, {
    method: "POST",
    key: a.key,
    body: { url: "https://example.com/o" }
  })
  linkId = created.json.data.id
})
afterAll(() => t.close())

const options = <B = Envelope<LinkOptions>>(id = linkId, key = a.key) =>
  call<B>(`${t.api}/links/${id}/options`, { key })
const patch = <B = Envelope<LinkOptions>>(body: unknown, id = linkId, key = a.key) =>
  call<B>(`${t.api}/links/${id}/options`, { method: "PATCH", key, body })

describe("link options (UTM and expiry, DESIGN.md)", () => {
  it("a new link has no UTM parameters and no expiry", async () => {
    const res = await options()
    expect(res.status).toBe(200)
    expect(res.json.data).toEqual({ utm: null, expires_at: null })
    expect(typeof res.json.meta.request_id).toBe("string")
  })

  it("PATCH sets UTM and expiry; the link record and a later GET show them", async () => {
    const at = future()
    const res = await patch({ utm: { utm_source: "news", utm_campaign: "fall" }, expires_at: at })
    expect(res.status, res.text).toBe(200)
    expect(res.json.data).toEqual({ utm: { utm_source: "news", utm_campaign: "fall" }, expires_at: at })
    const link = await call<Envelope<Link>>(`${t.api}/links/${linkId}`, { key: a.key })
    expect(link.json.data.utm).toEqual({ utm_source: "news", utm_campaign: "fall" })
    expect(link.json.data.expires_at).toBe(at)
    expect((await options()).json.data.expires_at).toBe(at)
  })

  it("a field left out is kept; null clears it", async () => {
    const res = await patch({ expires_at: null })
    expect(res.json.data).toEqual({ utm: { utm_source: "news", utm_campaign: "fall" }, expires_at: null })
    const cleared = await patch({ utm: null })
    expect(cleared.json.data).toEqual({ utm: null, expires_at: null })
  })

  it("each change is an event in the outbox, in the same transaction", async () => {
    const client = new pg.Client({ connectionString: t.databaseUrl })
    await client.connect()
    try {
      const rows = await client.query("SELECT event FROM outbox WHERE key = $1 ORDER BY seq", [linkId])
      const types = rows.rows.map((r) => r.event.type)
      expect(types).toEqual(["link.created", "link.updated", "link.updated", "link.updated"])
      expect(rows.rows.at(-1).event.data.utm).toBeNull()
      // Every recorded event is what docs/events.md documents.
      for (const row of rows.rows) expect(Schema.is(LinkEvent)(row.event), JSON.stringify(row.event)).toBe(true)
    } finally {
      await client.end()
    }
  })

  it("rejects bad input with 400 and the field named: unknown UTM keys, empty values, past or malformed dates, empty body, extra properties", async () => {
    for (const [body, field] of [
      [{ utm: { utm_id: "x" } }, "utm"],
      [{ utm: { utm_source: "" } }, "utm.utm_source"],
      [{ utm: { utm_source: "x".repeat(201) } }, "utm.utm_source"],
      [{ expires_at: "2001-01-01T00:00:00Z" }, "expires_at"],
      [{ expires_at: "tomorrow" }, "expires_at"],
      [{ expires_at: "2099-01-01T00:00" }, "expires_at"],
      [{}, "body"],
      [{ utm: null, color: "red" }, "color"]
    ] as const) {
      const res = await patch<ErrorBody>(body)
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(res.json.error.code).toBe("invalid_request")
      expect(res.json.error.detail, JSON.stringify(body)).toContain(field)
    }
    expect((await options()).json.data).toEqual({ utm: null, expires_at: null })
  })

  it("scopes: reading needs links:read, changing needs links:write", async () => {
    const readOnly = await t.newKey(a.accountId, ["links:read"])
    const writeOnly = await t.newKey(a.accountId, ["links:write"])
    expect((await options(linkId, readOnly)).status).toBe(200)
    const denied = await patch<ErrorBody>({ utm: null }, linkId, readOnly)
    expect(denied.status).toBe(403)
    expect(denied.json.error.detail).toContain("links:write")
    const noRead = await options<ErrorBody>(linkId, writeOnly)
    expect(noRead.status).toBe(403)
    expect(noRead.json.error.detail).toContain("links:read")
  })

  it("another account's link and unknown ids are 404", async () => {
    expect((await options(linkId, other.key)).status).toBe(404)
    expect((await patch({ utm: null }, linkId, other.key)).status).toBe(404)
    expect((await options("link_unknown")).status).toBe(404)
  })

  it("a disabled link's options cannot change (409 link_disabled)", async () => {
    const created = await call<Envelope<Link>>(`${t.api}/links`, {
      method: "POST",
      key: a.key,
      body: { url: "https://example.com/d" }
    })
    const id = created.json.data.id
    await call(`${t.api}/links/${id}`, { method: "DELETE", key: a.key })
    const res = await patch<ErrorBody>({ expires_at: future() }, id)
    expect(res.status).toBe(409)
    expect(res.json.error.code).toBe("link_disabled")
  })

  it("PATCH needs an Idempotency-Key and replays under the same one", async () => {
    const missing = await call<ErrorBody>(`${t.api}/links/${linkId}/options`, {
      method: "PATCH",
      key: a.key,
      body: { utm: null },
      idempotencyKey: null
    })
    expect(missing.json.error.code).toBe("idempotency_key_required")
    const k = idem()
    const first = await call(`${t.api}/links/${linkId}/options`, {
      method: "PATCH",
      key: a.key,
      body: { utm: { utm_medium: "qr" } },
      idempotencyKey: k
    })
    const again = await call(`${t.api}/links/${linkId}/options`, {
      method: "PATCH",
      key: a.key,
      body: { utm: { utm_medium: "qr" } },
      idempotencyKey: k
    })
    expect(again.status).toBe(first.status)
    expect(again.json).toEqual(first.json)
    expect(again.headers.get("idempotent-replayed")).toBe("true")
  })
})
