import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call, idem, type Reply, startTestApi, type TestAccount, type TestApi } from "../support/api.js"
import { field } from "../support/http.js"
import type { Envelope, ErrorBody, Page, UtmPreset } from "../support/resources.js"
import { waitFor } from "../support/waitFor.js"

let t: TestApi
let acct: TestAccount
beforeAll(async () => {
  t = await startTestApi()
  acct = await t.newAccount()
})
afterAll(() => t.close())

let counter = 0
const uniqueName = (label = "preset") => `${label} ${Date.now()}-${counter++}`

const create = <B = Envelope<UtmPreset>>(key: string, body: unknown, idempotencyKey?: string) =>
  call<B>(`${t.api}/utm-presets`, {
    method: "POST",
    key,
    body,
    ...(idempotencyKey === undefined ? {} : { idempotencyKey })
  })

const createOk = async (key: string, body: { name: string; utm: Record<string, string> }) => {
  const res = await create(key, body)
  expect(res.status, res.text).toBe(201)
  return res.json.data
}

const expectError = (res: { status: number; text: string; json: unknown }, status: number, code: string) => {
  expect(res.status, res.text).toBe(status)
  const error = field(res.json, "error")
  expect(field(error, "code"), res.text).toBe(code)
  expect(typeof field(error, "message")).toBe("string")
  expect(field(error, "request_id")).toMatch(/^req_/)
}

describe("UTM presets: create, read, list", () => {
  it("creates a preset (201) and reads it back", async () => {
    const created = await create(acct.key, {
      name: "Newsletter",
      utm: { utm_source: "newsletter", utm_medium: "email", utm_campaign: "spring" }
    })
    expect(created.status, created.text).toBe(201)
    const preset = created.json.data
    expect(preset).toMatchObject({
      name: "Newsletter",
      utm: { utm_source: "newsletter", utm_medium: "email", utm_campaign: "spring" }
    })
    expect(preset.id).toMatch(/^utmp_[A-Za-z0-9]{22}$/)
    expect(Object.keys(preset.utm).sort()).toEqual(["utm_campaign", "utm_medium", "utm_source"])
    expect(Number.isNaN(Date.parse(preset.created_at))).toBe(false)
    expect(preset.updated_at).toBe(preset.created_at)
    expect(created.json.meta.request_id).toMatch(/^req_/)
    expect(created.headers.get("x-request-id")).toBe(created.json.meta.request_id)

    const read = await call<Envelope<UtmPreset>>(`${t.api}/utm-presets/${preset.id}`, { key: acct.key })
    expect(read.status, read.text).toBe(200)
    expect(read.json.data).toEqual(preset)
    expect(read.json.meta.request_id).toMatch(/^req_/)
  })

  it("accepts any single UTM parameter and values of exactly 200 characters", async () => {
    for (const key of ["utm_source", "utm_medium", "utm_campaign", "utm_term", "utm_content"]) {
      const p = await createOk(acct.key, { name: uniqueName(key), utm: { [key]: "v".repeat(200) } })
      expect(p.utm).toEqual({ [key]: "v".repeat(200) })
    }
    const long = await createOk(acct.key, { name: "n".repeat(100), utm: { utm_source: "x" } })
    expect(long.name).toBe("n".repeat(100))
  })

  it("lists the account's presets newest first, in pages linked by next_cursor", async () => {
    const a = await t.newAccount(["links:read", "links:write"])
    const ids: Array<string> = []
    for (let i = 0; i < 5; i++) ids.push((await createOk(a.key, { name: `p${i}`, utm: { utm_source: `s${i}` } })).id)

    const all = await call<Page<UtmPreset>>(`${t.api}/utm-presets`, { key: a.key })
    expect(all.status, all.text).toBe(200)
    expect(all.json.data.map((p) => p.id)).toEqual([...ids].reverse())
    expect(all.json.meta).toEqual({ request_id: expect.stringMatching(/^req_/), next_cursor: null })

    const seen: Array<string> = []
    const pageSizes: Array<number> = []
    let url: string | undefined = `${t.api}/utm-presets?limit=2`
    while (url !== undefined) {
      const res: Reply<Page<UtmPreset>> = await call(url, { key: a.key })
      expect(res.status, res.text).toBe(200)
      pageSizes.push(res.json.data.length)
      seen.push(...res.json.data.map((p) => p.id))
      const next: string | null = res.json.meta.next_cursor
      url = next === null ? undefined : `${t.api}/utm-presets?limit=2&cursor=${encodeURIComponent(next)}`
    }
    expect(pageSizes).toEqual([2, 2, 1])
    expect(seen).toEqual([...ids].reverse())

    // A page that ends exactly at the last preset has no next page.
    const exact = await call<Page<UtmPreset>>(`${t.api}/utm-presets?limit=5`, { key: a.key })
    expect(exact.json.data).toHaveLength(5)
    expect(exact.json.meta.next_cursor).toBeNull()
  })

  it("lists nothing for an account without presets", async () => {
    const empty = await t.newAccount(["links:read"])
    const res = await call<Page<UtmPreset>>(`${t.api}/utm-presets`, { key: empty.key })
    expect(res.status, res.text).toBe(200)
    expect(res.json.data).toEqual([])
    expect(res.json.meta.next_cursor).toBeNull()
  })

  it("rejects a malformed cursor and an out-of-range limit (400 with detail)", async () => {
    const badCursor = await call<ErrorBody>(`${t.api}/utm-presets?cursor=nonsense`, { key: acct.key })
    expectError(badCursor, 400, "invalid_request")
    expect(badCursor.json.error.detail).toContain("cursor")
    for (const limit of ["0", "101", "abc", "1.5", "", "-1", "1e1", "0x10", " 5", "9999999999999999999999"]) {
      const res = await call<ErrorBody>(`${t.api}/utm-presets?limit=${encodeURIComponent(limit)}`, { key: acct.key })
      expectError(res, 400, "invalid_request")
      // One clean reason, the same as GET /links gives.
      expect(res.json.error.detail, limit).toBe("limit: must be an integer from 1 to 100")
      const links = await call<ErrorBody>(`${t.api}/links?limit=${encodeURIComponent(limit)}`, { key: acct.key })
      expect(links.json.error.detail, limit).toBe(res.json.error.detail)
    }
  })

  it("answers 404 not_found for an unknown id", async () => {
    expectError(await call(`${t.api}/utm-presets/utmp_doesnotexist`, { key: acct.key }), 404, "not_found")
  })

  it("answers 404 for ids that cannot be preset ids without querying the presets table", async () => {
    // With the table locked, any query on it waits: only an answer given before SQL comes back.
    const client = new pg.Client({ connectionString: t.databaseUrl })
    await client.connect()
    try {
      await client.query("BEGIN")
      await client.query("LOCK TABLE utm_presets IN ACCESS EXCLUSIVE MODE")
      // A well-formed id does reach the table, and waits for the lock (the control).
      let controlDone = false
      const control = call(`${t.api}/utm-presets/utmp_WellFormedButUnknown000`, { key: acct.key }).then((r) => {
        controlDone = true
        return r
      })
      /** Queries of this database waiting for the lock on utm_presets. */
      const waitingForTheLock = async (): Promise<number> =>
        (
          await client.query(
            `SELECT count(*)::int AS n FROM pg_locks
             WHERE relation = 'utm_presets'::regclass AND NOT granted
               AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`
          )
        ).rows[0].n
      await waitFor(async () => (await waitingForTheLock()) >= 1, { message: "the control to wait for the lock" })
      const ids = [
        "utmp_%00",
        "utmp_a%00b",
        `utmp_${"a".repeat(65)}`,
        `utmp_${"a".repeat(3000)}`,
        "utmp_",
        "utmp_a-b",
        "UTMP_abc",
        "utmp_%C3%A9",
        "not-a-preset",
        "link_abc"
      ]
      for (const id of ids) {
        const url = `${t.api}/utm-presets/${id}`
        for (const c of [{}, { method: "PATCH", body: { name: "x" } }, { method: "DELETE" }]) {
          // Either it answers, or its query joins the control in waiting for the lock.
          const stop = new AbortController()
          const waited = waitFor(async () => (await waitingForTheLock()) > 1, {
            signal: stop.signal,
            message: `an answer to ${c.method ?? "GET"} ${url}`
          }).then(() => ({ status: 0, text: "no answer: the request waited for SQL", json: {} }))
          const res = await Promise.race([call(url, { key: acct.key, ...c }), waited]).finally(async () => {
            // The poll ends once its query in flight on `client` is done: the next one may start.
            stop.abort()
            await waited.catch(() => undefined)
          })
          expectError(res, 404, "not_found")
        }
      }
      expect(controlDone).toBe(false)
      await client.query("ROLLBACK")
      expectError(await control, 404, "not_found")
    } finally {
      await client.end()
    }
  })
})

describe("UTM presets: validation", () => {
  const invalidCreates: Array<[string, unknown, Array<string>]> = [
    ["an extra top-level property", { name: "x", utm: { utm_source: "a" }, extra: 1 }, ["extra"]],
    ["an unknown UTM parameter", { name: "x", utm: { utm_source: "a", utm_id: "b" } }, ["utm.utm_id"]],
    ["an empty utm object", { name: "x", utm: {} }, ["utm", "at least one"]],
    ["a missing utm", { name: "x" }, ["utm"]],
    ["a missing name", { utm: { utm_source: "a" } }, ["name"]],
    ["an empty name", { name: "", utm: { utm_source: "a" } }, ["name", "empty"]],
    ["a name of only spaces", { name: "   ", utm: { utm_source: "a" } }, ["name", "not whitespace"]],
    ["a name of only tabs and line breaks", { name: "\t\r\n ", utm: { utm_source: "a" } }, ["name", "not whitespace"]],
    [
      "a name of only Unicode spaces",
      { name: "\u00a0\u2003\u3000", utm: { utm_source: "a" } },
      ["name", "not whitespace"]
    ],
    ["a name of 101 characters", { name: "n".repeat(101), utm: { utm_source: "a" } }, ["name", "100"]],
    ["an empty UTM value", { name: "x", utm: { utm_medium: "" } }, ["utm.utm_medium", "empty"]],
    ["a UTM value of 201 characters", { name: "x", utm: { utm_term: "t".repeat(201) } }, ["utm.utm_term", "200"]],
    ["a non-string UTM value", { name: "x", utm: { utm_source: 5 } }, ["utm.utm_source"]],
    ["a null UTM value", { name: "x", utm: { utm_source: null } }, ["utm.utm_source"]],
    ["utm as an array", { name: "x", utm: ["utm_source"] }, ["utm"]],
    ["a non-object body", ["x"], ["body"]]
  ]

  for (const [label, body, fragments] of invalidCreates) {
    it(`POST rejects ${label} (400 invalid_request naming the field)`, async () => {
      const res = await create<ErrorBody>(acct.key, body)
      expectError(res, 400, "invalid_request")
      for (const fragment of fragments) expect(res.json.error.detail, res.text).toContain(fragment)
    })
  }

  it("POST reports every problem at once", async () => {
    const res = await create<ErrorBody>(acct.key, { name: "", utm: { utm_source: "", bogus: "x" }, more: true })
    expectError(res, 400, "invalid_request")
    const detail: string = res.json.error.detail!
    for (const fragment of ["name", "utm.utm_source", "utm.bogus", "more"]) expect(detail, detail).toContain(fragment)
  })

  it("POST rejects malformed JSON (400) and a non-JSON content type (415)", async () => {
    const malformed = await call(`${t.api}/utm-presets`, { method: "POST", key: acct.key, rawBody: "{" })
    expectError(malformed, 400, "invalid_request")
    const text = await call(`${t.api}/utm-presets`, {
      method: "POST",
      key: acct.key,
      rawBody: "name=x",
      contentType: "text/plain"
    })
    expectError(text, 415, "unsupported_media_type")
  })

  it("a rejected request leaves its Idempotency-Key usable", async () => {
    const key = idem()
    expectError(await create(acct.key, { name: "fixable", utm: {} }, key), 400, "invalid_request")
    const fixed = await create(acct.key, { name: uniqueName("fixable"), utm: { utm_source: "a" } }, key)
    expect(fixed.status, fixed.text).toBe(201)
  })

  it("PATCH rejects an empty body, extra properties and invalid fields (400 with detail)", async () => {
    const p = await createOk(acct.key, { name: uniqueName(), utm: { utm_source: "a" } })
    const url = `${t.api}/utm-presets/${p.id}`
    const cases: Array<[unknown, Array<string>]> = [
      [{}, ["name", "utm"]],
      [{ name: "ok", id: "utmp_other" }, ["id"]],
      [{ utm: { utm_source: "a", extra: "b" } }, ["utm.extra"]],
      [{ utm: {} }, ["utm", "at least one"]],
      [{ name: "" }, ["name"]],
      [{ name: "  " }, ["name", "not whitespace"]],
      [{ name: "n".repeat(101) }, ["name", "100"]],
      [{ utm: { utm_campaign: "c".repeat(201) } }, ["utm.utm_campaign", "200"]],
      [{ name: null }, ["name"]]
    ]
    for (const [body, fragments] of cases) {
      const res = await call<ErrorBody>(url, { method: "PATCH", key: acct.key, body })
      expectError(res, 400, "invalid_request")
      for (const fragment of fragments) expect(res.json.error.detail, JSON.stringify(body)).toContain(fragment)
    }
    const unchanged = await call<Envelope<UtmPreset>>(url, { key: acct.key })
    expect(unchanged.json.data).toEqual(p)
  })
})

describe("UTM presets: update and delete", () => {
  it("PATCH renames, replaces the UTM parameters, or both (200)", async () => {
    const p = await createOk(acct.key, { name: uniqueName("orig"), utm: { utm_source: "a", utm_medium: "b" } })
    const url = `${t.api}/utm-presets/${p.id}`

    const newName = uniqueName("renamed")
    const renamed = await call<Envelope<UtmPreset>>(url, { method: "PATCH", key: acct.key, body: { name: newName } })
    expect(renamed.status, renamed.text).toBe(200)
    expect(renamed.json.data).toMatchObject({ id: p.id, name: newName, utm: { utm_source: "a", utm_medium: "b" } })
    expect(Date.parse(renamed.json.data.updated_at)).toBeGreaterThanOrEqual(Date.parse(renamed.json.data.created_at))

    const replaced = await call<Envelope<UtmPreset>>(url, {
      method: "PATCH",
      key: acct.key,
      body: { utm: { utm_campaign: "c" } }
    })
    expect(replaced.status, replaced.text).toBe(200)
    expect(replaced.json.data.name).toBe(newName)
    expect(replaced.json.data.utm).toEqual({ utm_campaign: "c" })

    const bothName = uniqueName("both")
    const both = await call<Envelope<UtmPreset>>(url, {
      method: "PATCH",
      key: acct.key,
      body: { name: bothName, utm: { utm_term: "t", utm_content: "x" } }
    })
    expect(both.status, both.text).toBe(200)
    expect(both.json.data).toMatchObject({ name: bothName, utm: { utm_term: "t", utm_content: "x" } })
    expect(both.json.data.created_at).toBe(p.created_at)

    // Keeping its own name is not a conflict.
    const same = await call<Envelope<UtmPreset>>(url, { method: "PATCH", key: acct.key, body: { name: bothName } })
    expect(same.status, same.text).toBe(200)

    const read = await call<Envelope<UtmPreset>>(url, { key: acct.key })
    expect(read.json.data).toEqual(same.json.data)
  })

  it("DELETE returns the deleted preset (200); afterwards it is gone", async () => {
    const p = await createOk(acct.key, { name: uniqueName("doomed"), utm: { utm_source: "a" } })
    const url = `${t.api}/utm-presets/${p.id}`
    const deleted = await call<Envelope<UtmPreset>>(url, { method: "DELETE", key: acct.key })
    expect(deleted.status, deleted.text).toBe(200)
    expect(deleted.json.data).toEqual(p)
    expect(deleted.json.meta.request_id).toMatch(/^req_/)

    expectError(await call(url, { key: acct.key }), 404, "not_found")
    expectError(await call(url, { method: "DELETE", key: acct.key }), 404, "not_found")
    expectError(await call(url, { method: "PATCH", key: acct.key, body: { name: "again" } }), 404, "not_found")
    const list = await call<Page<UtmPreset>>(`${t.api}/utm-presets?limit=100`, { key: acct.key })
    expect(list.json.data.map((x) => x.id)).not.toContain(p.id)

    // The name is free again.
    const again = await create(acct.key, { name: p.name, utm: { utm_source: "b" } })
    expect(again.status, again.text).toBe(201)
  })
})

describe("UTM presets: names are unique per account", () => {
  it("leading and trailing whitespace is removed from names, so a name padded with it is the same name", async () => {
    const name = uniqueName("padded")
    const p = await createOk(acct.key, { name: ` \t${name}  `, utm: { utm_source: "a" } })
    expect(p.name).toBe(name)
    expect((await call<Envelope<UtmPreset>>(`${t.api}/utm-presets/${p.id}`, { key: acct.key })).json.data.name).toBe(
      name
    )
    expectError(await create(acct.key, { name, utm: { utm_source: "b" } }), 409, "utm_preset_name_taken")
    expectError(await create(acct.key, { name: `${name}\n`, utm: { utm_source: "b" } }), 409, "utm_preset_name_taken")
    // Inner whitespace is kept.
    const inner = await createOk(acct.key, { name: `${name}  x`, utm: { utm_source: "c" } })
    expect(inner.name).toBe(`${name}  x`)
    const renamed = await call<Envelope<UtmPreset>>(`${t.api}/utm-presets/${inner.id}`, {
      method: "PATCH",
      key: acct.key,
      body: { name: `  ${name} renamed ` }
    })
    expect(renamed.status, renamed.text).toBe(200)
    expect(renamed.json.data.name).toBe(`${name} renamed`)
  })

  it("POST with a name the account already uses is 409 utm_preset_name_taken", async () => {
    const name = uniqueName("dup")
    await createOk(acct.key, { name, utm: { utm_source: "a" } })
    const dup = await create<ErrorBody>(acct.key, { name, utm: { utm_medium: "b" } })
    expectError(dup, 409, "utm_preset_name_taken")
    expect(dup.json.error.detail).toContain("name")

    // Names compare exactly.
    expect((await create(acct.key, { name: name.toUpperCase(), utm: { utm_source: "a" } })).status).toBe(201)
    // Another account may use the same name.
    const other = await t.newAccount(["links:read", "links:write"])
    expect((await create(other.key, { name, utm: { utm_source: "a" } })).status).toBe(201)
  })

  it("PATCH renaming onto another preset's name is 409, leaves both unchanged, and replays", async () => {
    const first = await createOk(acct.key, { name: uniqueName("first"), utm: { utm_source: "a" } })
    const second = await createOk(acct.key, { name: uniqueName("second"), utm: { utm_source: "b" } })
    const url = `${t.api}/utm-presets/${second.id}`
    const key = idem()
    const body = { name: first.name, utm: { utm_source: "changed" } }
    const conflict = await call(url, { method: "PATCH", key: acct.key, body, idempotencyKey: key })
    expectError(conflict, 409, "utm_preset_name_taken")

    // The conflict was answered (and recorded) inside the request's transaction.
    const replay = await call(url, { method: "PATCH", key: acct.key, body, idempotencyKey: key })
    expect(replay.status, replay.text).toBe(409)
    expect(replay.headers.get("idempotent-replayed")).toBe("true")
    expect(replay.json).toEqual(conflict.json)

    expect((await call<Envelope<UtmPreset>>(url, { key: acct.key })).json.data).toEqual(second)
    expect((await call<Envelope<UtmPreset>>(`${t.api}/utm-presets/${first.id}`, { key: acct.key })).json.data).toEqual(
      first
    )
  })
})

describe("UTM presets: scopes and ownership", () => {
  it("links:read reads but cannot create, change or delete (403 naming links:write)", async () => {
    const writer = await createOk(acct.key, { name: uniqueName("scoped"), utm: { utm_source: "a" } })
    const reader = await t.newKey(acct.accountId, ["links:read"])

    expect((await call(`${t.api}/utm-presets`, { key: reader })).status).toBe(200)
    const read = await call<Envelope<UtmPreset>>(`${t.api}/utm-presets/${writer.id}`, { key: reader })
    expect(read.status, read.text).toBe(200)
    expect(read.json.data.id).toBe(writer.id)

    const attempts = [
      call<ErrorBody>(`${t.api}/utm-presets`, {
        method: "POST",
        key: reader,
        body: { name: "r", utm: { utm_source: "a" } }
      }),
      call<ErrorBody>(`${t.api}/utm-presets/${writer.id}`, { method: "PATCH", key: reader, body: { name: "r" } }),
      call<ErrorBody>(`${t.api}/utm-presets/${writer.id}`, { method: "DELETE", key: reader })
    ]
    for (const res of await Promise.all(attempts)) {
      expectError(res, 403, "api_scope_required")
      expect(res.json.error.detail).toContain("links:write")
    }
    expect((await call<Envelope<UtmPreset>>(`${t.api}/utm-presets/${writer.id}`, { key: reader })).json.data).toEqual(
      writer
    )
  })

  it("links:write writes but cannot read (403 naming links:read)", async () => {
    const writeOnly = await t.newKey(acct.accountId, ["links:write"])
    const created = await createOk(writeOnly, { name: uniqueName("writer"), utm: { utm_source: "a" } })
    for (const url of [`${t.api}/utm-presets`, `${t.api}/utm-presets/${created.id}`]) {
      const res = await call<ErrorBody>(url, { key: writeOnly })
      expectError(res, 403, "api_scope_required")
      expect(res.json.error.detail).toContain("links:read")
    }
    const patched = await call(`${t.api}/utm-presets/${created.id}`, {
      method: "PATCH",
      key: writeOnly,
      body: { utm: { utm_medium: "m" } }
    })
    expect(patched.status, patched.text).toBe(200)
    expect((await call(`${t.api}/utm-presets/${created.id}`, { method: "DELETE", key: writeOnly })).status).toBe(200)
  })

  it("other scopes do not reach presets", async () => {
    const imagesOnly = await t.newKey(acct.accountId, ["images:read", "images:write", "domains:write"])
    expectError(await call(`${t.api}/utm-presets`, { key: imagesOnly }), 403, "api_scope_required")
    expectError(await create(imagesOnly, { name: uniqueName(), utm: { utm_source: "a" } }), 403, "api_scope_required")
  })

  it("requires an API key (401)", async () => {
    expectError(await call(`${t.api}/utm-presets`), 401, "unauthenticated")
    expectError(await call(`${t.api}/utm-presets`, { key: "not-a-real-key" }), 401, "unauthenticated")
  })

  it("another account's preset is 404 not_found for every operation, and stays unchanged", async () => {
    const mine = await createOk(acct.key, { name: uniqueName("mine"), utm: { utm_source: "a" } })
    const other = await t.newAccount()
    const url = `${t.api}/utm-presets/${mine.id}`
    expectError(await call(url, { key: other.key }), 404, "not_found")
    expectError(await call(url, { method: "PATCH", key: other.key, body: { name: "stolen" } }), 404, "not_found")
    expectError(await call(url, { method: "DELETE", key: other.key }), 404, "not_found")
    const list = await call<Page<UtmPreset>>(`${t.api}/utm-presets`, { key: other.key })
    expect(list.json.data).toEqual([])
    expect((await call<Envelope<UtmPreset>>(url, { key: acct.key })).json.data).toEqual(mine)
  })
})

describe("UTM presets: idempotency", () => {
  it("replays a POST with the same key and body, creating one preset", async () => {
    const a = await t.newAccount(["links:read", "links:write"])
    const key = idem()
    const body = { name: "Once", utm: { utm_source: "a", utm_medium: "b" } }
    const first = await create(a.key, body, key)
    expect(first.status, first.text).toBe(201)
    expect(first.headers.get("idempotent-replayed")).toBeNull()
    // Same content, keys in another order: the same request.
    const second = await create(a.key, { utm: { utm_medium: "b", utm_source: "a" }, name: "Once" }, key)
    expect(second.status, second.text).toBe(201)
    expect(second.headers.get("idempotent-replayed")).toBe("true")
    expect(second.json).toEqual(first.json)
    const list = await call<Page<UtmPreset>>(`${t.api}/utm-presets`, { key: a.key })
    expect(list.json.data).toHaveLength(1)

    const reused = await create(a.key, { name: "Other", utm: { utm_source: "a" } }, key)
    expectError(reused, 409, "idempotency_key_reused")

    // A fresh key with the same body is a new request: the name is now taken.
    expectError(await create(a.key, body), 409, "utm_preset_name_taken")
  })

  it("replays DELETE with the same key", async () => {
    const p = await createOk(acct.key, { name: uniqueName("del"), utm: { utm_source: "a" } })
    const key = idem()
    const url = `${t.api}/utm-presets/${p.id}`
    const first = await call(url, { method: "DELETE", key: acct.key, idempotencyKey: key })
    expect(first.status, first.text).toBe(200)
    const again = await call(url, { method: "DELETE", key: acct.key, idempotencyKey: key })
    expect(again.status, again.text).toBe(200)
    expect(again.headers.get("idempotent-replayed")).toBe("true")
    expect(again.json).toEqual(first.json)
  })

  it("requires an Idempotency-Key of 8 to 128 characters on POST, PATCH and DELETE", async () => {
    const p = await createOk(acct.key, { name: uniqueName("idem"), utm: { utm_source: "a" } })
    const url = `${t.api}/utm-presets/${p.id}`
    expectError(
      await call(`${t.api}/utm-presets`, {
        method: "POST",
        key: acct.key,
        body: { name: uniqueName(), utm: { utm_source: "a" } },
        idempotencyKey: null
      }),
      400,
      "idempotency_key_required"
    )
    expectError(
      await call(url, { method: "PATCH", key: acct.key, body: { name: "x" }, idempotencyKey: null }),
      400,
      "idempotency_key_required"
    )
    expectError(
      await call(url, { method: "DELETE", key: acct.key, idempotencyKey: "short" }),
      400,
      "idempotency_key_invalid"
    )
    expect((await call(url, { key: acct.key })).status).toBe(200)
  })
})

/** The parts of GET /openapi.json read here. */
interface OpenApiBody {
  readonly paths: Readonly<
    Record<
      string,
      Readonly<
        Record<string, { readonly "x-required-scope"?: string; readonly responses: Readonly<Record<string, unknown>> }>
      >
    >
  >
  readonly components: { readonly schemas: Readonly<Record<string, unknown>> }
}

describe("UTM presets: OpenAPI document", () => {
  it("documents the preset routes, their scopes, schemas and the 409 code", async () => {
    const res = await call<OpenApiBody>(`${t.api}/openapi.json`)
    expect(res.status).toBe(200)
    const doc = res.json
    const collection = doc.paths["/utm-presets"]
    const item = doc.paths["/utm-presets/{id}"]
    expect(collection.post["x-required-scope"]).toBe("links:write")
    expect(collection.get["x-required-scope"]).toBe("links:read")
    expect(item.get["x-required-scope"]).toBe("links:read")
    expect(item.patch["x-required-scope"]).toBe("links:write")
    expect(item.delete["x-required-scope"]).toBe("links:write")
    expect(Object.keys(collection.post.responses)).toContain("201")
    expect(JSON.stringify(collection.post.responses["409"])).toContain("UtmPresetNameTakenError")
    expect(JSON.stringify(item.patch.responses["409"])).toContain("UtmPresetNameTakenError")
    expect(JSON.stringify(item.get.responses["404"])).toContain("NotFoundError")
    const schemas = doc.components.schemas
    expect(schemas.CreateUtmPreset).toMatchObject({ required: ["name", "utm"], additionalProperties: false })
    expect(schemas.UpdateUtmPreset).toMatchObject({ additionalProperties: false, minProperties: 1 })
    expect(schemas.UtmPresetParameters).toMatchObject({ additionalProperties: false, minProperties: 1 })
    expect(schemas.UtmPresetName).toMatchObject({ type: "string", minLength: 1, maxLength: 100 })
    expect(schemas.UtmValue).toMatchObject({ type: "string", minLength: 1, maxLength: 200 })
  })
})
