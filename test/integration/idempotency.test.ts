import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call, idem, startTestApi, type TestAccount, type TestApi } from "../support/api.js"
import { expectEnvelope, expectError, type Reply } from "../support/http.js"
import type { Envelope, ErrorBody, Link, Page } from "../support/resources.js"

let t: TestApi
beforeAll(async () => {
  t = await startTestApi()
})
afterAll(() => t.close())

const listIds = async (key: string): Promise<Array<string>> => {
  const r = await call<Page<Link>>(`${t.api}/links?limit=100`, { key })
  return expectEnvelope(r, 200).map((l) => l.id)
}

const post = <B = Envelope<Link>>(key: string, body: unknown, idempotencyKey: string | null) =>
  call<B>(`${t.api}/links`, { method: "POST", key, body, idempotencyKey })

const expectReplayOf = (replay: Reply, original: Reply) => {
  expect(replay.status, replay.text).toBe(original.status)
  expect(replay.text).toBe(original.text)
  expect(replay.headers.get("idempotent-replayed")).toBe("true")
  // The replay is the original response: its X-Request-Id is the request_id in the body.
  const body = JSON.parse(original.text)
  expect(replay.headers.get("x-request-id")).toBe(body.meta?.request_id ?? body.error?.request_id)
}

describe("the Idempotency-Key header", () => {
  let a: TestAccount
  let linkId: string
  beforeAll(async () => {
    a = await t.newAccount()
    linkId = expectEnvelope(await post(a.key, { url: "https://example.com/base" }, idem()), 201).id
  })

  it("is required on POST, PATCH and DELETE: 400 idempotency_key_required, and nothing changes", async () => {
    const before = await listIds(a.key)
    expectError(await post(a.key, { url: "https://example.com/x" }, null), 400, "idempotency_key_required")
    const patch = await call(`${t.api}/links/${linkId}`, {
      method: "PATCH",
      key: a.key,
      body: { url: "https://example.com/changed" },
      idempotencyKey: null
    })
    expectError(patch, 400, "idempotency_key_required")
    const del = await call(`${t.api}/links/${linkId}`, { method: "DELETE", key: a.key, idempotencyKey: null })
    expectError(del, 400, "idempotency_key_required")
    expect(await listIds(a.key)).toEqual(before)
    const link = expectEnvelope(await call<Envelope<Link>>(`${t.api}/links/${linkId}`, { key: a.key }), 200)
    expect(link.destination_url).toBe("https://example.com/base")
    expect(link.publication_status).toBe("active")
  })

  it.each([
    ["empty", ""],
    ["7 characters", "1234567"],
    ["129 characters", "k".repeat(129)],
    ["1000 characters", "k".repeat(1000)]
  ])("of %s is 400 idempotency_key_invalid (or _required when empty)", async (_, key) => {
    const r = await post<ErrorBody>(a.key, { url: "https://example.com/len" }, key)
    expect(r.status, r.text).toBe(400)
    expect(["idempotency_key_invalid", "idempotency_key_required"]).toContain(r.json.error.code)
    if (key.length > 0) expectError(r, 400, "idempotency_key_invalid", /Idempotency-Key/)
  })

  it.each([
    ["8", "a".repeat(8)],
    ["128", "b".repeat(128)]
  ])("of %s characters is accepted", async (_, key) => {
    expectEnvelope(await post(a.key, { url: "https://example.com/ok" }, key), 201)
  })

  it("is not needed on GET", async () => {
    expectEnvelope(await call(`${t.api}/links`, { key: a.key }), 200)
  })
})

describe("replays", () => {
  it("the same key with the same body replays the same status and body, marked Idempotent-Replayed: true, and creates one link", async () => {
    const a = await t.newAccount()
    const key = idem()
    const first = await post(a.key, { url: "https://example.com/once" }, key)
    expectEnvelope(first, 201)
    expect(first.headers.get("idempotent-replayed")).toBeNull()
    for (let i = 0; i < 3; i++) expectReplayOf(await post(a.key, { url: "https://example.com/once" }, key), first)
    expect(await listIds(a.key)).toEqual([first.json.data.id])
  })

  it("JSON key order and whitespace do not change the fingerprint", async () => {
    const a = await t.newAccount()
    const key = idem()
    const first = await call(`${t.api}/links`, {
      method: "POST",
      key: a.key,
      idempotencyKey: key,
      rawBody: '{"url":"https://example.com/order","custom_slug":"order-slug"}'
    })
    expectEnvelope(first, 201)
    const reordered = await call(`${t.api}/links`, {
      method: "POST",
      key: a.key,
      idempotencyKey: key,
      rawBody: '{ "custom_slug" : "order-slug",\n  "url" : "https://example.com/order" }'
    })
    expectReplayOf(reordered, first)
    expect(await listIds(a.key)).toHaveLength(1)
  })

  it("the same key with a different body is 409 idempotency_key_reused and creates nothing", async () => {
    const a = await t.newAccount()
    const key = idem()
    expectEnvelope(await post(a.key, { url: "https://example.com/first" }, key), 201)
    expectError(await post(a.key, { url: "https://example.com/second" }, key), 409, "idempotency_key_reused")
    expectError(
      await post(a.key, { url: "https://example.com/first", custom_slug: "added-slug" }, key),
      409,
      "idempotency_key_reused"
    )
    expect(await listIds(a.key)).toHaveLength(1)
  })

  it("the same key on a different route is 409 idempotency_key_reused and changes nothing", async () => {
    const a = await t.newAccount()
    const key = idem()
    const created = expectEnvelope(await post(a.key, { url: "https://example.com/route" }, key), 201)
    const patch = await call(`${t.api}/links/${created.id}`, {
      method: "PATCH",
      key: a.key,
      idempotencyKey: key,
      body: { url: "https://example.com/route" }
    })
    expectError(patch, 409, "idempotency_key_reused")
    const del = await call(`${t.api}/links/${created.id}`, { method: "DELETE", key: a.key, idempotencyKey: key })
    expectError(del, 409, "idempotency_key_reused")
    const read = expectEnvelope(await call<Envelope<Link>>(`${t.api}/links/${created.id}`, { key: a.key }), 200)
    expect(read.publication_status).toBe("active")
  })

  it("a PATCH key used on another link's path is 409 idempotency_key_reused", async () => {
    const a = await t.newAccount()
    const one = expectEnvelope(await post(a.key, { url: "https://example.com/one" }, idem()), 201)
    const two = expectEnvelope(await post(a.key, { url: "https://example.com/two" }, idem()), 201)
    const key = idem()
    const body = { url: "https://example.com/same" }
    expectEnvelope(
      await call(`${t.api}/links/${one.id}`, { method: "PATCH", key: a.key, idempotencyKey: key, body }),
      200
    )
    const other = await call(`${t.api}/links/${two.id}`, { method: "PATCH", key: a.key, idempotencyKey: key, body })
    expectError(other, 409, "idempotency_key_reused")
    expect(
      expectEnvelope(await call<Envelope<Link>>(`${t.api}/links/${two.id}`, { key: a.key }), 200).destination_url
    ).toBe("https://example.com/two")
  })

  it("a replayed PATCH returns the stored response and does not run again", async () => {
    const a = await t.newAccount()
    const link = expectEnvelope(await post(a.key, { url: "https://example.com/v0" }, idem()), 201)
    const key = idem()
    const first = await call(`${t.api}/links/${link.id}`, {
      method: "PATCH",
      key: a.key,
      idempotencyKey: key,
      body: { url: "https://example.com/v1" }
    })
    expectEnvelope(first, 200)
    expectEnvelope(
      await call(`${t.api}/links/${link.id}`, {
        method: "PATCH",
        key: a.key,
        idempotencyKey: idem(),
        body: { url: "https://example.com/v2" }
      }),
      200
    )
    const replay = await call<Envelope<Link>>(`${t.api}/links/${link.id}`, {
      method: "PATCH",
      key: a.key,
      idempotencyKey: key,
      body: { url: "https://example.com/v1" }
    })
    expectReplayOf(replay, first)
    expect(replay.json.data.destination_url).toBe("https://example.com/v1")
    const read = expectEnvelope(await call<Envelope<Link>>(`${t.api}/links/${link.id}`, { key: a.key }), 200)
    expect(read.destination_url).toBe("https://example.com/v2")
  })

  it("a replayed DELETE returns the stored 200", async () => {
    const a = await t.newAccount()
    const link = expectEnvelope(await post(a.key, { url: "https://example.com/del" }, idem()), 201)
    const key = idem()
    const first = await call<Envelope<Link>>(`${t.api}/links/${link.id}`, {
      method: "DELETE",
      key: a.key,
      idempotencyKey: key
    })
    expect(expectEnvelope(first, 200).publication_status).toBe("disabled")
    expectReplayOf(
      await call(`${t.api}/links/${link.id}`, { method: "DELETE", key: a.key, idempotencyKey: key }),
      first
    )
  })

  it("keys are per account: two accounts use the same key independently", async () => {
    const a = await t.newAccount()
    const b = await t.newAccount()
    const key = idem()
    const ra = await post(a.key, { url: "https://example.com/shared-key" }, key)
    const rb = await post(b.key, { url: "https://example.com/shared-key" }, key)
    expectEnvelope(ra, 201)
    expectEnvelope(rb, 201)
    expect(rb.headers.get("idempotent-replayed")).toBeNull()
    expect(rb.json.data.id).not.toBe(ra.json.data.id)
    // A different body under the same key is fine in another account too.
    const c = await t.newAccount()
    expectEnvelope(await post(c.key, { url: "https://example.com/other-body" }, key), 201)
    expect(await listIds(a.key)).toEqual([ra.json.data.id])
    expect(await listIds(b.key)).toEqual([rb.json.data.id])
  })

  it("keys belong to the account, not the API key: another key of the same account gets the replay", async () => {
    const a = await t.newAccount(["links:read", "links:write"])
    const second = await t.newKey(a.accountId, ["links:write"])
    const key = idem()
    const first = await post(a.key, { url: "https://example.com/same-account" }, key)
    expectEnvelope(first, 201)
    expectReplayOf(await post(second, { url: "https://example.com/same-account" }, key), first)
    expect(await listIds(a.key)).toHaveLength(1)
  })
})

describe("what is stored and what is not", () => {
  it("a request rejected by validation does not use the key up: the corrected request then gets 201", async () => {
    const a = await t.newAccount()
    const key = idem()
    expectError(await post(a.key, { url: "not a url" }, key), 400, "invalid_request")
    expectError(await post(a.key, { url: "https://example.com/x", bogus: 1 }, key), 400, "invalid_request")
    const bad = await call(`${t.api}/links`, { method: "POST", key: a.key, idempotencyKey: key, rawBody: "{" })
    expectError(bad, 400, "invalid_request")
    const fixed = await post(a.key, { url: "https://example.com/fixed" }, key)
    expectEnvelope(fixed, 201)
    expect(fixed.headers.get("idempotent-replayed")).toBeNull()
    expect(await listIds(a.key)).toEqual([fixed.json.data.id])
  })

  it("a 415 does not use the key up", async () => {
    const a = await t.newAccount()
    const key = idem()
    const r = await call(`${t.api}/links`, {
      method: "POST",
      key: a.key,
      idempotencyKey: key,
      rawBody: JSON.stringify({ url: "https://example.com/ct" }),
      contentType: "text/plain"
    })
    expectError(r, 415, "unsupported_media_type")
    expectEnvelope(await post(a.key, { url: "https://example.com/ct" }, key), 201)
  })

  it("401 and 403 do not use the key up", async () => {
    const a = await t.newAccount(["links:read", "links:write"])
    const readOnly = await t.newKey(a.accountId, ["links:read"])
    const key = idem()
    const body = { url: "https://example.com/auth-first" }
    expectError(
      await call(`${t.api}/links`, {
        method: "POST",
        idempotencyKey: key,
        body,
        headers: { authorization: "Bearer x" }
      }),
      401,
      "unauthenticated"
    )
    expectError(await post(readOnly, body, key), 403, "api_scope_required")
    const ok = await post(a.key, body, key)
    expectEnvelope(ok, 201)
    expect(ok.headers.get("idempotent-replayed")).toBeNull()
  })

  it("a 409 slug_taken is stored and replayed", async () => {
    const owner = await t.newAccount()
    const a = await t.newAccount()
    expectEnvelope(await post(owner.key, { url: "https://example.com/o", custom_slug: "stored-409" }, idem()), 201)
    const key = idem()
    const body = { url: "https://example.com/a", custom_slug: "stored-409" }
    const first = await post(a.key, body, key)
    expectError(first, 409, "slug_taken")
    expect(first.headers.get("idempotent-replayed")).toBeNull()
    const replay = await post<ErrorBody>(a.key, body, key)
    expectReplayOf(replay, first)
    expect(replay.json.error.code).toBe("slug_taken")
    // Stored: the same key with a different body is now a reuse, not a new attempt.
    expectError(await post(a.key, { url: "https://example.com/a" }, key), 409, "idempotency_key_reused")
    expect(await listIds(a.key)).toEqual([])
  })

  it("a 404 for an unknown link is stored and replayed", async () => {
    const a = await t.newAccount()
    const key = idem()
    const body = { url: "https://example.com/none" }
    const first = await call(`${t.api}/links/link_Unknown000000000000000`, {
      method: "PATCH",
      key: a.key,
      idempotencyKey: key,
      body
    })
    expectError(first, 404, "not_found")
    const replay = await call(`${t.api}/links/link_Unknown000000000000000`, {
      method: "PATCH",
      key: a.key,
      idempotencyKey: key,
      body
    })
    expectReplayOf(replay, first)
  })

  it("a 422 for a destination on the own short host is stored and replayed", async () => {
    const a = await t.newAccount()
    const key = idem()
    const body = { url: "http://sho.rt/loop" }
    const first = await post(a.key, body, key)
    expectError(first, 422, "url_not_allowed")
    expectReplayOf(await post(a.key, body, key), first)
  })
})

describe("concurrent requests with the same key", () => {
  const fire = (key: string, apiKey: string, body: unknown, n: number) =>
    Promise.all(Array.from({ length: n }, () => post(apiKey, body, key)))

  it.each([1, 2, 3])(
    "round %i: 10 at once create exactly one link; the others replay it or get 409 idempotency_request_in_progress with Retry-After",
    async () => {
      const a = await t.newAccount()
      const key = idem()
      const replies = await fire(key, a.key, { url: "https://example.com/race" }, 10)
      const created = replies.filter((r) => r.status === 201 && r.headers.get("idempotent-replayed") === null)
      expect(created, replies.map((r) => `${r.status} ${r.text}`).join("\n")).toHaveLength(1)
      const original = created[0]!
      for (const r of replies) {
        if (r === original) continue
        if (r.status === 201) {
          expectReplayOf(r, original)
        } else {
          expectError(r, 409, "idempotency_request_in_progress")
          expect(r.headers.get("retry-after")).toMatch(/^[1-9]\d*$/)
        }
      }
      expect(await listIds(a.key)).toEqual([original.json.data.id])
      // After the race the key replays the winner.
      expectReplayOf(await post(a.key, { url: "https://example.com/race" }, key), original)
    }
  )

  it("10 at once with different bodies under one key: one link, the others 409 (reused or in progress)", async () => {
    const a = await t.newAccount()
    const key = idem()
    const replies = await Promise.all(
      Array.from({ length: 10 }, (_, i) => post<ErrorBody>(a.key, { url: `https://example.com/race/${i}` }, key))
    )
    const created = replies.filter((r) => r.status === 201)
    expect(created, replies.map((r) => `${r.status} ${r.text}`).join("\n")).toHaveLength(1)
    for (const r of replies) {
      if (r === created[0]) continue
      expect(r.status, r.text).toBe(409)
      expect(["idempotency_key_reused", "idempotency_request_in_progress"]).toContain(r.json.error.code)
    }
    expect(await listIds(a.key)).toHaveLength(1)
  })

  it("10 concurrent DELETEs with one key: one disables, the others replay or are in progress", async () => {
    const a = await t.newAccount()
    const link = expectEnvelope(await post(a.key, { url: "https://example.com/race-del" }, idem()), 201)
    const key = idem()
    const replies = await Promise.all(
      Array.from({ length: 10 }, () =>
        call(`${t.api}/links/${link.id}`, { method: "DELETE", key: a.key, idempotencyKey: key })
      )
    )
    const originals = replies.filter((r) => r.status === 200 && r.headers.get("idempotent-replayed") === null)
    expect(originals).toHaveLength(1)
    for (const r of replies) {
      if (r === originals[0]) continue
      if (r.status === 200) expectReplayOf(r, originals[0]!)
      else expectError(r, 409, "idempotency_request_in_progress")
    }
  })

  it("concurrent requests with distinct keys each create their own link", async () => {
    const a = await t.newAccount()
    const replies = await Promise.all(
      Array.from({ length: 10 }, () => post(a.key, { url: "https://example.com/distinct" }, idem()))
    )
    for (const r of replies) expectEnvelope(r, 201)
    expect(new Set(replies.map((r) => r.json.data.id)).size).toBe(10)
    expect(await listIds(a.key)).toHaveLength(10)
  })
})
