import { spawn } from "node:child_process"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call, idem, type TestAccount, type TestApi } from "../support/api.js"
import { expectEnvelope, expectError } from "../support/http.js"
import type { Envelope, Page, Snapshot, Usage } from "../support/resources.js"
import { startSnapshotWorld } from "../support/snapshotSite.js"
import { waitFor } from "../support/waitFor.js"

const root = path.resolve(import.meta.dirname, "../..")
let world: Awaited<ReturnType<typeof startSnapshotWorld>>
let t: TestApi
let acct: TestAccount
let site: typeof world.site
let host: typeof world.host

beforeAll(async () => {
  world = await startSnapshotWorld({
    api: { plans: { onesnap: { snapshots_per_month: 1 }, onehost: { snapshot_captures_per_host: 1 } } }
  })
  ;({ t, site, host } = world)
  acct = await t.newAccount()
})
afterAll(() => world?.close())

const post = (key: string, body: unknown, idempotencyKey?: string) =>
  call<Envelope<Snapshot>>(`${t.api}/snapshots`, {
    method: "POST",
    key,
    body,
    ...(idempotencyKey === undefined ? {} : { idempotencyKey })
  })

describe("POST /snapshots: refused at once, nothing created", () => {
  it.each([
    ["a missing url", {}],
    ["a non-URL", { url: "not a url" }],
    ["another scheme", { url: "ftp://example.com/a" }],
    ["a javascript: URL", { url: "javascript:alert(1)" }],
    ["an extra property", { url: "https://example.com/", depth: 3 }],
    ["a URL over 2048 characters", { url: `https://example.com/${"a".repeat(2050)}` }]
  ])("%s is 400 invalid_request", async (_what, body) => {
    expectError(await post(acct.key, body), 400, "invalid_request")
  })

  it.each([
    ["a private IPv4 literal", "http://10.0.0.1/"],
    ["the metadata address", "http://169.254.169.254/latest/meta-data/"],
    ["a private address in hexadecimal", "http://0x0a000001/"],
    ["an IPv4-mapped private IPv6 literal", "http://[::ffff:192.168.0.1]/"],
    ["a unique-local IPv6 literal", "http://[fd00::1]/"]
  ])("%s is 422 url_not_allowed", async (_what, url) => {
    expectError(await post(acct.key, { url }), 422, "url_not_allowed")
  })

  it("credentials in the URL are 400 invalid_request saying why, as for a link's destination", async () => {
    const r = await post(acct.key, { url: "https://user:pass@example.com/" })
    expectError(r, 400, "invalid_request")
    expect(JSON.stringify(r.json)).toMatch(/must not contain credentials/)
  })

  it("a name that does not resolve is accepted (202) and ends failed with a reason at capture time", async () => {
    const s = expectEnvelope(await post(acct.key, { url: "http://no-such-host.invalid/" }), 202)
    const ended = await waitFor(
      async () => {
        const r = expectEnvelope(await call<Envelope<Snapshot>>(`${t.api}/snapshots/${s.id}`, { key: acct.key }), 200)
        return r.capture_status === "failed" ? r : false
      },
      { timeoutMs: 90_000 }
    )
    expect(ended.failure).toMatch(/^source_unreachable: cannot resolve no-such-host\.invalid/)
  }, 120_000)

  it("nothing was created by the refused requests", async () => {
    const fresh = await t.newAccount()
    await post(fresh.key, { url: "http://10.0.0.1/" })
    await post(fresh.key, { url: "ftp://x/" })
    const list = expectEnvelope(await call<Page<Snapshot>>(`${t.api}/snapshots`, { key: fresh.key }), 200)
    expect(list).toEqual([])
    const usage = expectEnvelope(await call<Envelope<Usage>>(`${t.api}/usage`, { key: fresh.key }), 200)
    expect(usage.snapshots.used).toBe(0)
  })
})

describe("scopes, ownership, idempotency, paging", () => {
  it("POST needs snapshots:write and GET snapshots:read (403 api_scope_required naming it)", async () => {
    const reader = await t.newAccount(["snapshots:read"])
    const writer = await t.newAccount(["snapshots:write"])
    expectError(
      await post(reader.key, { url: `${site.origin}/page.html` }),
      403,
      "api_scope_required",
      /snapshots:write/
    )
    const s = expectEnvelope(await post(writer.key, { url: `${site.origin}/page.html` }), 202)
    expectError(
      await call(`${t.api}/snapshots/${s.id}`, { key: writer.key }),
      403,
      "api_scope_required",
      /snapshots:read/
    )
    expectError(await call(`${t.api}/snapshots/${s.id}/warc`, { key: writer.key }), 403, "api_scope_required")
    expectError(await call(`${t.api}/snapshots/${s.id}`), 401, "unauthenticated")
  })

  it("another account's snapshot, an unknown and a malformed id are 404 not_found (also the WARC)", async () => {
    const s = expectEnvelope(await post(acct.key, { url: `${site.origin}/page.html` }), 202)
    const other = await t.newAccount()
    for (const id of [s.id, "snap_doesnotexist", "x%00y", "link_abc"]) {
      expectError(await call(`${t.api}/snapshots/${id}`, { key: other.key }), 404, "not_found")
      expectError(await call(`${t.api}/snapshots/${id}/warc`, { key: other.key }), 404, "not_found")
    }
  })

  it("the same Idempotency-Key replays the same snapshot; with another body it is 409", async () => {
    const key = idem()
    const first = expectEnvelope(await post(acct.key, { url: `${site.origin}/page.html` }, key), 202)
    const again = await post(acct.key, { url: `${site.origin}/page.html` }, key)
    expect(expectEnvelope(again, 202).id).toBe(first.id)
    expect(again.headers.get("idempotent-replayed")).toBe("true")
    expectError(await post(acct.key, { url: `${site.origin}/other.html` }, key), 409, "idempotency_key_reused")
    expectError(
      await call(`${t.api}/snapshots`, {
        method: "POST",
        key: acct.key,
        body: { url: "https://e.com/" },
        idempotencyKey: null
      }),
      400,
      "idempotency_key_required"
    )
  })

  it("GET /snapshots pages newest first with next_cursor; a forged cursor is 400", async () => {
    // Unmetered: five captures of one host at once are past the free plan's snapshot_captures_per_host.
    const a = await t.newAccount(undefined, { unmetered: true })
    const ids: Array<string> = []
    for (let i = 0; i < 5; i++)
      ids.push(expectEnvelope(await post(a.key, { url: `${site.origin}/page.html?${i}` }), 202).id)
    const seen: Array<string> = []
    let cursor: string | null = null
    do {
      const r: Awaited<ReturnType<typeof call<Page<Snapshot>>>> = await call<Page<Snapshot>>(
        `${t.api}/snapshots?limit=2${cursor ? `&cursor=${cursor}` : ""}`,
        { key: a.key }
      )
      seen.push(...expectEnvelope(r, 200).map((s) => s.id))
      cursor = r.json.meta.next_cursor
    } while (cursor !== null)
    expect(seen).toEqual([...ids].reverse())
    expectError(await call(`${t.api}/snapshots?cursor=abc`, { key: a.key }), 400, "invalid_request")
    expectError(await call(`${t.api}/snapshots?limit=0`, { key: a.key }), 400, "invalid_request")
  })
})

describe("plan limits and usage", () => {
  it("snapshots_per_month: the second snapshot is 403 quota_exceeded; an Unmetered Partner Key skips it but not URL safety", async () => {
    const a = await t.newAccount(undefined, { plan: "onesnap" })
    expectEnvelope(await post(a.key, { url: `${site.origin}/page.html` }), 202)
    expectError(
      await post(a.key, { url: `${site.origin}/page.html` }),
      403,
      "quota_exceeded",
      /snapshots_per_month: 1 of 1/
    )
    const usage = expectEnvelope(await call<Envelope<Usage>>(`${t.api}/usage`, { key: a.key }), 200)
    expect(usage.snapshots).toEqual({ used: 1, limit: 1 })
    const partner = await t.newKey(a.accountId, ["snapshots:write", "snapshots:read"], { unmetered: true })
    expectEnvelope(await post(partner, { url: `${site.origin}/page.html` }), 202)
    expectError(await post(partner, { url: "http://10.0.0.1/" }), 422, "url_not_allowed")
    const partnerUsage = expectEnvelope(await call<Envelope<Usage>>(`${t.api}/usage`, { key: partner }), 200)
    expect(partnerUsage.snapshots).toEqual({ used: 2, limit: null })
  })

  it("snapshot_captures_per_host: a second capture of a host in progress is 403 quota_exceeded; another host is fine", async () => {
    const a = await t.newAccount(undefined, { plan: "onehost" })
    expectEnvelope(await post(a.key, { url: `${site.origin}/slow.html` }), 202)
    expectError(
      await post(a.key, { url: `${site.origin}/page.html` }),
      403,
      "quota_exceeded",
      /snapshot_captures_per_host: 1 of 1 in progress for 127\.0\.0\.1/
    )
    expectEnvelope(await post(a.key, { url: site.origin.replace("127.0.0.1", "localhost") }), 202)
  })
})

/** The operator CLI against this test's database. */
const cli = (args: Array<string>) =>
  new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", "apps/cli/main.ts", ...args, "--json"], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: t.databaseUrl, DATA_DIR: "/nonexistent-never-used" }
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (c) => (stdout += c))
    child.stderr.on("data", (c) => (stderr += c))
    child.on("close", (status) => resolve({ status, stdout, stderr }))
  })

describe("withdrawal by an operator", { timeout: 120_000 }, () => {
  it("cli snapshots withdraw: served 404 at once, reads withdrawn; an unknown id is not_found", async () => {
    const s = expectEnvelope(await post(acct.key, { url: `${site.origin}/page.html` }), 202)
    await waitFor(
      async () =>
        expectEnvelope(await call<Envelope<Snapshot>>(`${t.api}/snapshots/${s.id}`, { key: acct.key }), 200)
          .publication_status === "published",
      { timeoutMs: 90_000 }
    )
    const page = `${host.origin}${new URL(s.snapshot_url).pathname}`
    expect((await fetch(page)).status).toBe(200)
    const out = await cli(["snapshots", "withdraw", "--id", s.id])
    expect(out.status, out.stderr).toBe(0)
    expect(JSON.parse(out.stdout)).toEqual({ id: s.id, capture_status: "captured", publication_status: "withdrawn" })
    expect((await fetch(page)).status).toBe(404)
    const after = expectEnvelope(await call<Envelope<Snapshot>>(`${t.api}/snapshots/${s.id}`, { key: acct.key }), 200)
    expect(after.publication_status).toBe("withdrawn")
    const unknown = await cli(["snapshots", "withdraw", "--id", "snap_nothere"])
    expect(unknown.status).not.toBe(0)
    expect(JSON.parse(unknown.stderr.trim()).error.code).toBe("not_found")
  })
})
