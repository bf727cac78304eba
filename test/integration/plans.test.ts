import { spawn } from "node:child_process"
import * as path from "node:path"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { PlanLimits } from "../../domain/Plan.js"
import { call, idem, startTestApi, type TestApi } from "../support/api.js"
import { expectEnvelope, expectError, sleep } from "../support/http.js"
import type { Envelope, ErrorBody, Link, LinkOptions, Page } from "../support/resources.js"
import { waitFor } from "../support/waitFor.js"

/** Small plans, so that the limits are reached in a test; the built-in ones stay as they are. */
const PLANS: Record<string, Partial<PlanLimits>> = {
  three: { links_per_month: 3 },
  ten: { links_per_month: 10 },
  none: { links_per_month: 0 },
  // One token every 2 s: the test's requests take far less than that, even on a loaded machine.
  slow: { requests_per_second: 0.5, request_burst: 3 },
  short: { link_expiry_max_days: 30 }
}

const root = path.resolve(import.meta.dirname, "../..")
const DAY = 86_400_000
const inDays = (days: number) => new Date(Date.now() + days * DAY).toISOString()

let t: TestApi
let db: pg.Client

beforeAll(async () => {
  t = await startTestApi({ plans: PLANS })
  db = new pg.Client({ connectionString: t.databaseUrl })
  await db.connect()
})
afterAll(async () => {
  await db?.end()
  await t?.close()
})

const create = <B = Envelope<Link>>(
  key: string,
  body: unknown = { url: "https://example.com/q" },
  idempotencyKey?: string
) =>
  call<B>(`${t.api}/links`, { method: "POST", key, body, ...(idempotencyKey === undefined ? {} : { idempotencyKey }) })
const linkCount = async (accountId: string) =>
  Number((await db.query("SELECT count(*) AS n FROM links WHERE account_id = $1", [accountId])).rows[0].n)
const counter = async (accountId: string) => {
  const rows = await db.query("SELECT period, value FROM usage_counters WHERE account_id = $1 AND metric = 'links'", [
    accountId
  ])
  expect(rows.rows.length).toBeLessThanOrEqual(1)
  if (rows.rows[0] !== undefined) expect(rows.rows[0].period).toBe(new Date().toISOString().slice(0, 7))
  return rows.rows[0] === undefined ? 0 : Number(rows.rows[0].value)
}

describe("links per month (plan quota)", () => {
  it("refuses the create past the quota with 403 quota_exceeded, creating nothing; a refusal replays and counts nothing", async () => {
    const a = await t.newAccount(undefined, { plan: "three" })
    const slug = `q3-${Date.now().toString(36)}`
    expectEnvelope(await create(a.key, { url: "https://example.com/1", custom_slug: slug }), 201)
    // A create that does not happen (slug taken, 409, stored for replay) gives its link back.
    expectError(await create(a.key, { url: "https://example.com/1", custom_slug: slug }), 409, "slug_taken")
    expect(await counter(a.accountId)).toBe(1)
    expectEnvelope(await create(a.key), 201)
    expectEnvelope(await create(a.key), 201)
    expect(await counter(a.accountId)).toBe(3)

    const key = idem()
    const refused = await create(a.key, { url: "https://example.com/4" }, key)
    const error = expectError(refused, 403, "quota_exceeded", /^links_per_month: 3 of 3 used$/)
    expect(error.message).toMatch(/quota/)
    expect(await linkCount(a.accountId)).toBe(3)
    expect(await counter(a.accountId)).toBe(3)

    // A business outcome: stored and replayed like any other answer, and it moves nothing.
    const replay = await create<ErrorBody>(a.key, { url: "https://example.com/4" }, key)
    expect(replay.status).toBe(403)
    expect(replay.headers.get("idempotent-replayed")).toBe("true")
    expect(replay.json.error.request_id).toBe(error.request_id)
    expectError(await create(a.key, { url: "https://example.com/5" }), 403, "quota_exceeded")
    expect(await linkCount(a.accountId)).toBe(3)
    expect(await counter(a.accountId)).toBe(3)

    // Reading and changing existing links is not a create: it goes on.
    const list = expectEnvelope(await call<Page<Link>>(`${t.api}/links`, { key: a.key }), 200)
    expect(list).toHaveLength(3)
    const patched = await call(`${t.api}/links/${list[0].id}`, {
      method: "PATCH",
      key: a.key,
      body: { url: "https://example.com/changed" }
    })
    expectEnvelope(patched, 200)
  })

  it("is exact under concurrency: 20 simultaneous creates against a quota of 10, exactly 10 succeed", async () => {
    const a = await t.newAccount(undefined, { plan: "ten" })
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => create(a.key, { url: `https://example.com/c${i}` }))
    )
    const statuses = results.map((r) => r.status).sort()
    expect(statuses.filter((s) => s === 201)).toHaveLength(10)
    expect(statuses.filter((s) => s === 403)).toHaveLength(10)
    for (const r of results.filter((r) => r.status === 403)) {
      expectError(r, 403, "quota_exceeded", /^links_per_month: 10 of 10 used$/)
    }
    expect(await linkCount(a.accountId)).toBe(10)
    expect(await counter(a.accountId)).toBe(10)
  })

  it("a plan with a quota of 0 creates nothing", async () => {
    const a = await t.newAccount(undefined, { plan: "none" })
    expectError(await create(a.key), 403, "quota_exceeded", /^links_per_month: 0 of 0 used$/)
    expect(await linkCount(a.accountId)).toBe(0)
    expect(await counter(a.accountId)).toBe(0)
  })

  it("an Unmetered Partner Key skips the quota, and its links are still counted", async () => {
    const a = await t.newAccount(undefined, { plan: "three" })
    const partner = await t.newKey(a.accountId, ["links:write"], { unmetered: true })
    for (let i = 0; i < 3; i++) expectEnvelope(await create(a.key), 201)
    expectError(await create(a.key), 403, "quota_exceeded")
    for (let i = 0; i < 2; i++) expectEnvelope(await create(partner), 201)
    expect(await counter(a.accountId)).toBe(5)
    expect(await linkCount(a.accountId)).toBe(5)
    // The ordinary key sees the account's real use.
    expectError(await create(a.key), 403, "quota_exceeded", /^links_per_month: 5 of 3 used$/)
  })

  it("a plan change applies to the running API from the next request", async () => {
    const a = await t.newAccount()
    expectEnvelope(await create(a.key), 201)
    await t.setPlan(a.accountId, "none")
    // The key cache is evicted through NOTIFY: until it arrives, creating may still succeed.
    const last = await waitFor(
      async () => {
        const r = await create(a.key)
        return r.status !== 201 && r
      },
      { intervalMs: 100, message: "the plan change to reach the API" }
    )
    expectError(last, 403, "quota_exceeded", /^links_per_month: \d+ of 0 used$/)
  })
})

describe("link expiry ceiling (plan limit)", () => {
  const patchExpiry = async (key: string, id: string, expires_at: string) =>
    call<Envelope<LinkOptions>>(`${t.api}/links/${id}/options`, { method: "PATCH", key, body: { expires_at } })

  it("refuses an expires_at further ahead than link_expiry_max_days with 403 quota_exceeded", async () => {
    const a = await t.newAccount(undefined, { plan: "short" })
    const id = expectEnvelope(await create(a.key), 201).id
    const key = idem()
    const refused = await call(`${t.api}/links/${id}/options`, {
      method: "PATCH",
      key: a.key,
      body: { expires_at: inDays(31) },
      idempotencyKey: key
    })
    expectError(refused, 403, "quota_exceeded", /^link_expiry_max_days: 30 \(expires_at may be at most .+Z\)$/)
    expect(
      (await call<Envelope<LinkOptions>>(`${t.api}/links/${id}/options`, { key: a.key })).json.data.expires_at
    ).toBeNull()
    const within = inDays(29)
    expect(expectEnvelope(await patchExpiry(a.key, id, within), 200).expires_at).toBe(within)
    // Clearing the expiry and UTM changes are never limited.
    expectEnvelope(
      await call(`${t.api}/links/${id}/options`, { method: "PATCH", key: a.key, body: { expires_at: null } }),
      200
    )
  })

  it("an Unmetered Partner Key skips the ceiling", async () => {
    const a = await t.newAccount(undefined, { plan: "short" })
    const partner = await t.newKey(a.accountId, ["links:write", "links:read"], { unmetered: true })
    const id = expectEnvelope(await create(a.key), 201).id
    const far = inDays(400)
    expect(expectEnvelope(await patchExpiry(partner, id, far), 200).expires_at).toBe(far)
  })

  it("the built-in plans: free allows 365 days, pro has no ceiling", async () => {
    const free = await t.newAccount()
    const id = expectEnvelope(await create(free.key), 201).id
    expectEnvelope(await patchExpiry(free.key, id, inDays(364)), 200)
    expectError(await patchExpiry(free.key, id, inDays(366)), 403, "quota_exceeded", /link_expiry_max_days: 365/)
    const pro = await t.newAccount(undefined, { plan: "pro" })
    const proId = expectEnvelope(await create(pro.key), 201).id
    expectEnvelope(await patchExpiry(pro.key, proId, inDays(3650)), 200)
  })
})

describe("request rate (per-account token bucket)", () => {
  it("answers 429 rate_limited with Retry-After once the burst is used, and allows again after waiting", async () => {
    const a = await t.newAccount(undefined, { plan: "slow" })
    const second = await t.newKey(a.accountId, ["links:read", "links:write"])
    // The burst (3) is the account's, whichever of its keys is used.
    expect((await call(`${t.api}/links`, { key: a.key })).status).toBe(200)
    expect((await call(`${t.api}/links`, { key: second })).status).toBe(200)
    expect((await call(`${t.api}/links`, { key: a.key })).status).toBe(200)
    const limited = await call<ErrorBody>(`${t.api}/links`, { key: second })
    expectError(limited, 429, "rate_limited", /^requests_per_second: 0\.5 \(burst 3\) on plan slow; retry after \d s$/)
    const retryAfter = limited.headers.get("retry-after")
    expect(retryAfter).toMatch(/^[12]$/)
    expect(limited.json.error.detail).toContain(`retry after ${retryAfter} s`)

    // A limited write never ran: after the wait, the same Idempotency-Key creates (no replay).
    const key = idem()
    const write = await create(a.key, { url: "https://example.com/r" }, key)
    expectError(write, 429, "rate_limited")
    // Deliberate: the client does what Retry-After says (the test is that this is enough).
    await sleep(Number(write.headers.get("retry-after")) * 1000 + 50)
    const created = await create(a.key, { url: "https://example.com/r" }, key)
    expectEnvelope(created, 201)
    expect(created.headers.get("idempotent-replayed")).toBeNull()

    // Another account is not affected.
    const other = await t.newAccount(undefined, { plan: "slow" })
    expect((await call(`${t.api}/links`, { key: other.key })).status).toBe(200)
  })

  it("an Unmetered Partner Key skips the request rate", async () => {
    const a = await t.newAccount(undefined, { plan: "slow", unmetered: true })
    const statuses = []
    for (let i = 0; i < 10; i++) statuses.push((await call(`${t.api}/links`, { key: a.key })).status)
    expect(statuses).toEqual(Array(10).fill(200))
  })

  it("unauthenticated requests are not counted here (edge rate rules are separate)", async () => {
    const statuses = []
    for (let i = 0; i < 10; i++) statuses.push((await call(`${t.api}/links`)).status)
    expect(statuses).toEqual(Array(10).fill(401))
  })
})

/** The operator CLI against this test's database, with these plans in PLANS. */
const cli = (args: Array<string>, plans: string = JSON.stringify(PLANS)) =>
  new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, ["scripts/cli.mjs", ...args, "--json"], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: t.databaseUrl, DATA_DIR: "/nonexistent-never-used", PLANS: plans }
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (c) => (stdout += c))
    child.stderr.on("data", (c) => (stderr += c))
    child.on("close", (status) => resolve({ status, stdout, stderr }))
  })

// Generous: the tests start CLI processes, on a possibly busy machine.
describe("operator CLI: plans", { timeout: 120_000 }, () => {
  it("accounts create refuses an unknown plan, listing the known ones; a known plan is taken", async () => {
    const [unknown, known] = await Promise.all([
      cli(["accounts", "create", "--name", "x", "--plan", "platinum"]),
      cli(["accounts", "create", "--name", "y", "--plan", "three"])
    ])
    expect(unknown.status).not.toBe(0)
    expect(unknown.stdout).toBe("")
    const error = JSON.parse(unknown.stderr.trim()).error
    expect(error.code).toBe("unknown_plan")
    expect(error.message).toBe(
      "unknown plan 'platinum'; known plans: free, pro, business, three, ten, none, slow, short"
    )
    expect(Number((await db.query("SELECT count(*) AS n FROM accounts WHERE name = 'x'")).rows[0].n)).toBe(0)

    expect(known.status, known.stderr).toBe(0)
    const account = JSON.parse(known.stdout)
    expect(account).toMatchObject({ name: "y", plan: "three" })
    expect((await db.query("SELECT plan FROM accounts WHERE id = $1", [account.id])).rows[0].plan).toBe("three")
  })

  it("accounts set-plan moves an account to a known plan, and refuses unknown plans and accounts", async () => {
    const a = await t.newAccount()
    const [moved, unknownPlan, unknownAccount] = await Promise.all([
      cli(["accounts", "set-plan", "--id", a.accountId, "--plan", "none"]),
      cli(["accounts", "set-plan", "--id", a.accountId, "--plan", "gold"]),
      cli(["accounts", "set-plan", "--id", "acct_nope", "--plan", "pro"])
    ])
    expect(moved.status, moved.stderr).toBe(0)
    expect(JSON.parse(moved.stdout)).toEqual({ id: a.accountId, plan: "none" })
    expect(unknownPlan.status).not.toBe(0)
    expect(JSON.parse(unknownPlan.stderr).error).toMatchObject({ code: "unknown_plan" })
    expect(JSON.parse(unknownPlan.stderr).error.message).toMatch(/known plans: free, pro, business/)
    expect(unknownAccount.status).not.toBe(0)
    expect(JSON.parse(unknownAccount.stderr).error.code).toBe("account_not_found")
    expect((await db.query("SELECT plan FROM accounts WHERE id = $1", [a.accountId])).rows[0].plan).toBe("none")
    // The running API sees the change from the next request (the CLI notifies it).
    const last = await waitFor(
      async () => {
        const r = await create(a.key)
        return r.status !== 201 && r
      },
      { intervalMs: 100, message: "the plan change to reach the API" }
    )
    expectError(last, 403, "quota_exceeded")
  })

  it("a bad PLANS stops the CLI with a configuration error naming PLANS", async () => {
    const run = await cli(["accounts", "create", "--name", "z"], "{not json")
    expect(run.status).not.toBe(0)
    const lines = run.stderr.trim().split("\n")
    expect(lines).toHaveLength(1)
    const error = JSON.parse(lines[0]!).error
    expect(error.code).toBe("configuration_error")
    expect(error.message).toContain("PLANS")
  })
})
