import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ALL_SCOPES, call, idem, startTestApi, type TestAccount, type TestApi } from "../support/api.js"
import { dnsmasqBinary, startTestDns, type TestDns } from "../support/dnsmasq.js"
import type { Domain, Envelope, ErrorBody, Link, Page } from "../support/resources.js"

let t: TestApi
let dns: TestDns
let alice: TestAccount
let bob: TestAccount
let counter = 0
/** A hostname no other test uses, under the test server's zone. */
const host = (label = "go") => `${label}${counter++}.example.test`

const expectError = (res: { status: number; text: string; json: unknown }, status: number, code: string) => {
  expect(res.status, res.text).toBe(status)
  const body = res.json as ErrorBody
  expect(body.error.code, res.text).toBe(code)
  expect(body.error.request_id).toMatch(/^req_/)
  return body.error
}

const register = (key: string, hostname: string, idempotencyKey?: string) =>
  call<Envelope<Domain>>(`${t.api}/domains`, {
    method: "POST",
    key,
    body: { hostname },
    ...(idempotencyKey === undefined ? {} : { idempotencyKey })
  })
const registerOk = async (key: string, hostname: string) => {
  const r = await register(key, hostname)
  expect(r.status, r.text).toBe(201)
  return r.json.data
}
const verify = (key: string, id: string) =>
  call<Envelope<Domain>>(`${t.api}/domains/${id}/verify`, { method: "POST", key })
const disable = (key: string, id: string) =>
  call<Envelope<Domain>>(`${t.api}/domains/${id}/disable`, { method: "POST", key })

/** The TXT records published: record name -> values. */
const published: Record<string, Array<string>> = {}
const publish = async (d: Domain, value = d.verification.record_value) => {
  published[d.verification.record_name] = [value]
  await dns.setTxt(published)
}

describe.skipIf(dnsmasqBinary === undefined)("custom domains against a real DNS server (dnsmasq)", () => {
  beforeAll(async () => {
    dns = await startTestDns()
    t = await startTestApi({
      dnsServers: [dns.server],
      dnsTimeoutMs: 1500,
      plans: {
        roomy: { custom_domains: 1000, domain_registrations_per_day: 1000 },
        tiny: { custom_domains: 2, domain_registrations_per_day: 3 }
      }
    })
    alice = await t.newAccount(ALL_SCOPES, { plan: "roomy" })
    bob = await t.newAccount(ALL_SCOPES, { plan: "roomy" })
  }, 120_000)
  afterAll(async () => {
    await t?.close()
    await dns?.stop()
  })

  it("registers a pending domain (201) with a TXT proof bound to the registration", async () => {
    const hostname = host()
    const r = await register(alice.key, hostname.toUpperCase())
    expect(r.status, r.text).toBe(201)
    const d = r.json.data
    expect(d).toMatchObject({
      hostname,
      state: "pending",
      last_error: null,
      last_checked_at: null,
      verified_at: null,
      verification: { method: "dns_txt", record_name: `_shortlinks-challenge.${hostname}` }
    })
    expect(d.id).toMatch(/^dom_[0-9A-Za-z]{22}$/)
    expect(d.verification.record_value.length).toBeGreaterThan(32)
    const read = await call<Envelope<Domain>>(`${t.api}/domains/${d.id}`, { key: alice.key })
    expect(read.status).toBe(200)
    expect(read.json.data).toEqual(d)
  })

  it("normalises an international name to punycode", async () => {
    const d = await registerOk(alice.key, `bücher${counter++}.example.test`)
    expect(d.hostname).toMatch(/^xn--bcher\d+-[a-z0-9]+\.example\.test$/)
  })

  it.each([
    ["", "not_empty"],
    ["*.example.test", "no_wildcard"],
    ["go.example.test:8080", "no_port"],
    ["go.example.test.", "no_trailing_dot"],
    ["192.0.2.1", "no_ip_literal"],
    ["[::1]", "no_ip_literal"],
    ["127.1", "no_ip_literal"],
    ["localhost", "at_least_two_labels"],
    [`${"a".repeat(64)}.example.test`, "label_length"],
    [`${"a.".repeat(120)}example.test`, "total_length"],
    ["go_1.example.test", "label_characters"],
    ["-go.example.test", "label_characters"],
    ["https://go.example.test/", "valid_characters"],
    ["sho.rt", "not_own_host"],
    ["links.sho.rt", "not_own_host"]
  ])("refuses %j (400, detail naming rule %s) and stores nothing", async (hostname, rule) => {
    const before = await call<Page<Domain>>(`${t.api}/domains?limit=100`, { key: bob.key })
    const error = expectError(await register(bob.key, hostname), 400, "invalid_request")
    expect(error.detail).toContain(`rule ${rule}`)
    const after = await call<Page<Domain>>(`${t.api}/domains?limit=100`, { key: bob.key })
    expect(after.json.data.length).toBe(before.json.data.length)
  })

  it("refuses a body with other properties or a missing hostname (400)", async () => {
    expectError(
      await call(`${t.api}/domains`, { method: "POST", key: alice.key, body: { hostname: host(), x: 1 } }),
      400,
      "invalid_request"
    )
    expectError(await call(`${t.api}/domains`, { method: "POST", key: alice.key, body: {} }), 400, "invalid_request")
  })

  it("verify: no TXT record, then a wrong value, then a timeout, each as last_error; then verified", async () => {
    const d = await registerOk(alice.key, host())
    const none = await verify(alice.key, d.id)
    expect(none.status, none.text).toBe(200)
    expect(none.json.data).toMatchObject({ state: "pending", last_error: "no TXT record", verified_at: null })
    expect(none.json.data.last_checked_at).not.toBeNull()

    await publish(d, "shortlinks-verify=someone-else")
    const differs = await verify(alice.key, d.id)
    expect(differs.json.data).toMatchObject({ state: "pending", last_error: "TXT present but value differs" })

    const slow = await registerOk(alice.key, `go${counter++}.${dns.silentZone}`)
    const timedOut = await verify(alice.key, slow.id)
    expect(timedOut.status, timedOut.text).toBe(200)
    expect(timedOut.json.data).toMatchObject({ state: "pending", last_error: "timeout" })

    await publish(d)
    const ok = await verify(alice.key, d.id)
    expect(ok.json.data).toMatchObject({ state: "verified", last_error: null })
    expect(ok.json.data.verified_at).not.toBeNull()
  })

  it("a hostname registered by one account is 409 domain_taken for another, verified or not", async () => {
    const d = await registerOk(alice.key, host())
    expectError(await register(bob.key, d.hostname), 409, "domain_taken")
    await publish(d)
    expect((await verify(alice.key, d.id)).json.data.state).toBe("verified")
    expectError(await register(bob.key, d.hostname.toUpperCase()), 409, "domain_taken")
  })

  it("disabled, then registered again: a new token, and the old record in DNS proves nothing", async () => {
    const first = await registerOk(alice.key, host())
    await publish(first)
    expect((await verify(alice.key, first.id)).json.data.state).toBe("verified")
    const disabled = await disable(alice.key, first.id)
    expect(disabled.status).toBe(200)
    expect(disabled.json.data.state).toBe("disabled")
    expect((await disable(alice.key, first.id)).json.data.state).toBe("disabled")
    expectError(await verify(alice.key, first.id), 409, "domain_disabled")

    const again = await registerOk(bob.key, first.hostname)
    expect(again.id).not.toBe(first.id)
    expect(again.verification.record_value).not.toBe(first.verification.record_value)
    const stale = await verify(bob.key, again.id)
    expect(stale.json.data).toMatchObject({ state: "pending", last_error: "TXT present but value differs" })
    await publish(again)
    expect((await verify(bob.key, again.id)).json.data.state).toBe("verified")
  })

  it("another account's domain is 404 for read, verify and disable", async () => {
    const d = await registerOk(alice.key, host())
    expectError(await call(`${t.api}/domains/${d.id}`, { key: bob.key }), 404, "not_found")
    expectError(await verify(bob.key, d.id), 404, "not_found")
    expectError(await disable(bob.key, d.id), 404, "not_found")
    expectError(await call(`${t.api}/domains/dom_nothing`, { key: alice.key }), 404, "not_found")
    expectError(await call(`${t.api}/domains/%00`, { key: alice.key }), 404, "not_found")
    expect((await call<Envelope<Domain>>(`${t.api}/domains/${d.id}`, { key: alice.key })).json.data.state).toBe(
      "pending"
    )
  })

  it("scopes: domains:read reads only, domains:write writes only (403 api_scope_required naming the scope)", async () => {
    const reader = await t.newKey(alice.accountId, ["domains:read"])
    const writer = await t.newKey(alice.accountId, ["domains:write"])
    const e1 = expectError(await register(reader, host()), 403, "api_scope_required")
    expect(e1.detail).toContain("domains:write")
    const d = await registerOk(writer, host())
    const e2 = expectError(await call(`${t.api}/domains/${d.id}`, { key: writer }), 403, "api_scope_required")
    expect(e2.detail).toContain("domains:read")
    expectError(await call(`${t.api}/domains`, { key: writer }), 403, "api_scope_required")
    expectError(await verify(reader, d.id), 403, "api_scope_required")
    expectError(await disable(reader, d.id), 403, "api_scope_required")
    expect((await call(`${t.api}/domains/${d.id}`, { key: reader })).status).toBe(200)
    expectError(await call(`${t.api}/domains`, { key: "sk_nope" }), 401, "unauthenticated")
  })

  it("idempotency: a replay answers the stored response, another body is 409, a missing key 400", async () => {
    const key = idem()
    const hostname = host()
    const first = await register(alice.key, hostname, key)
    expect(first.status).toBe(201)
    const replay = await register(alice.key, hostname, key)
    expect(replay.status).toBe(201)
    expect(replay.headers.get("idempotent-replayed")).toBe("true")
    expect(replay.json.data).toEqual(first.json.data)
    expectError(await register(alice.key, host(), key), 409, "idempotency_key_reused")
    expectError(
      await call(`${t.api}/domains`, {
        method: "POST",
        key: alice.key,
        body: { hostname: host() },
        idempotencyKey: null
      }),
      400,
      "idempotency_key_required"
    )
    const taken = idem()
    expectError(await register(bob.key, hostname, taken), 409, "domain_taken")
    const takenAgain = await register(bob.key, hostname, taken)
    expect(takenAgain.headers.get("idempotent-replayed")).toBe("true")
    expect(takenAgain.status).toBe(409)
  })

  it("lists the account's domains newest first with cursor paging", async () => {
    const carol = await t.newAccount()
    const made = [
      await registerOk(carol.key, host()),
      await registerOk(carol.key, host()),
      await registerOk(carol.key, host())
    ]
    const p1 = await call<Page<Domain>>(`${t.api}/domains?limit=2`, { key: carol.key })
    expect(p1.json.data.map((d) => d.id)).toEqual([made[2]!.id, made[1]!.id])
    const p2 = await call<Page<Domain>>(`${t.api}/domains?limit=2&cursor=${p1.json.meta.next_cursor}`, {
      key: carol.key
    })
    expect(p2.json.data.map((d) => d.id)).toEqual([made[0]!.id])
    expect(p2.json.meta.next_cursor).toBeNull()
    expectError(await call(`${t.api}/domains?cursor=nope`, { key: carol.key }), 400, "invalid_request")
  })

  it("a link's short_urls follow the account's verified domains; QR encodes a verified domain", async () => {
    const dave = await t.newAccount()
    const link = await call<Envelope<Link>>(`${t.api}/links`, {
      method: "POST",
      key: dave.key,
      body: { url: "https://example.com/page" }
    })
    expect(link.status, link.text).toBe(201)
    const { id, slug } = link.json.data
    expect(link.json.data.short_urls).toEqual([`http://sho.rt/${slug}`])
    const d = await registerOk(dave.key, host())
    expectError(await call(`${t.api}/links/${id}/qr?domain=${d.hostname}`, { key: dave.key }), 400, "invalid_request")
    await publish(d)
    expect((await verify(dave.key, d.id)).json.data.state).toBe("verified")
    const read = await call<Envelope<Link>>(`${t.api}/links/${id}`, { key: dave.key })
    expect(read.json.data.short_urls).toEqual([`http://sho.rt/${slug}`, `http://${d.hostname}/${slug}`])
    const listed = await call<Page<Link>>(`${t.api}/links`, { key: dave.key })
    expect(listed.json.data[0]!.short_urls).toEqual(read.json.data.short_urls)
    const qr = await fetch(`${t.api}/links/${id}/qr?format=svg&domain=${d.hostname.toUpperCase()}`, {
      headers: { authorization: `Bearer ${dave.key}` }
    })
    expect(qr.status).toBe(200)
    const canonicalQr = await (
      await fetch(`${t.api}/links/${id}/qr?format=svg`, { headers: { authorization: `Bearer ${dave.key}` } })
    ).text()
    expect(await qr.text()).not.toBe(canonicalQr)
    // Another account's verified domain is not the caller's.
    expectError(await call(`${t.api}/links/${id}/qr?domain=go.unknown.test`, { key: dave.key }), 400, "invalid_request")
    await disable(dave.key, d.id)
    const after = await call<Envelope<Link>>(`${t.api}/links/${id}`, { key: dave.key })
    expect(after.json.data.short_urls).toEqual([`http://sho.rt/${slug}`])
  })

  it("plans: custom_domains counts live domains and domain_registrations_per_day the registrations (403 quota_exceeded); GET /usage shows them; unmetered keys skip both", async () => {
    const tiny = await t.newAccount(ALL_SCOPES, { plan: "tiny" })
    const a = await registerOk(tiny.key, host())
    const b = await registerOk(tiny.key, host())
    const count = expectError(await register(tiny.key, host()), 403, "quota_exceeded")
    expect(count.detail).toBe("custom_domains: 2 of 2 used")
    const usage = await call<Envelope<{ domains: { used: number; limit: number | null } }>>(`${t.api}/usage`, {
      key: tiny.key
    })
    expect(usage.json.data.domains).toEqual({ used: 2, limit: 2 })
    await disable(tiny.key, a.id)
    await registerOk(tiny.key, host())
    await disable(tiny.key, b.id)
    const rate = expectError(await register(tiny.key, host()), 403, "quota_exceeded")
    expect(rate.detail).toBe("domain_registrations_per_day: 3 of 3 used")
    const partner = await t.newKey(tiny.accountId, ["domains:write", "domains:read"], { unmetered: true })
    await registerOk(partner, host())
    const partnerUsage = await call<Envelope<{ domains: { used: number; limit: number | null } }>>(`${t.api}/usage`, {
      key: partner
    })
    expect(partnerUsage.json.data.domains).toEqual({ used: 2, limit: null })
  })

  it("the operator CLI lists an account's domains (domains list --account ID --json)", async () => {
    const erin = await t.newAccount()
    const d = await registerOk(erin.key, host())
    await disable(erin.key, d.id)
    const d2 = await registerOk(erin.key, host())
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["--import", "tsx", "apps/cli/main.ts", "domains", "list", "--account", erin.accountId, "--json"],
      { env: { ...process.env, DATABASE_URL: t.databaseUrl, LOG_LEVEL: "warn" }, timeout: 120_000 }
    )
    const out = JSON.parse(stdout) as { account_id: string; domains: Array<Domain> }
    expect(out.account_id).toBe(erin.accountId)
    expect(out.domains.map((x) => [x.id, x.state])).toEqual([
      [d2.id, "pending"],
      [d.id, "disabled"]
    ])
  }, 120_000)
})
