import { Effect, Layer, Logger, LogLevel, ManagedRuntime, Option, Redacted } from "effect"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Domains } from "../../apps/api/Domains/Domains.js"
import { domainSweepLayer, sweepOnce } from "../../apps/workers/DomainSweep.js"
import { AppConfig } from "../../infra/AppConfig.js"
import { dnsResolverLayer } from "../../infra/dns/DnsResolver.js"
import { Plans } from "../../infra/Plans.js"
import { DomainRepoLive } from "../../infra/postgres/Domains.js"
import { OutboxLive } from "../../infra/postgres/Outbox.js"
import { ALL_SCOPES, call, startTestApi, type TestAccount, type TestApi } from "../support/api.js"
import { dnsmasqBinary, startTestDns, type TestDns } from "../support/dnsmasq.js"
import { testDatabaseLayer } from "../support/eventlog.js"
import type { Domain, Envelope, Link } from "../support/resources.js"
import { waitFor } from "../support/waitFor.js"

let api: TestApi
let dns: TestDns
let account: TestAccount
let counter = 0
const published: Record<string, Array<string>> = {}

/** What the workers run the sweep with: the Domains service over the API's database and the test DNS. */
const sweepLayer = () =>
  Layer.mergeAll(Domains.Default, DomainRepoLive).pipe(
    Layer.provideMerge(DomainRepoLive),
    Layer.provide(OutboxLive),
    Layer.provide(dnsResolverLayer({ servers: [dns.server], timeoutMs: 1500 })),
    Layer.provide(Plans.make()),
    Layer.provide(
      AppConfig.make({ databaseUrl: Option.some(Redacted.make(api.databaseUrl)), shortBase: "http://sho.rt" })
    ),
    Layer.provideMerge(testDatabaseLayer(api.databaseUrl)),
    Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
  )
let runtime: ManagedRuntime.ManagedRuntime<Layer.Layer.Success<ReturnType<typeof sweepLayer>>, unknown>

const read = async (id: string) =>
  (await call<Envelope<Domain>>(`${api.api}/domains/${id}`, { key: account.key })).json.data

const verifiedDomain = async () => {
  const r = await call<Envelope<Domain>>(`${api.api}/domains`, {
    method: "POST",
    key: account.key,
    body: { hostname: `sweep${counter++}.example.test` }
  })
  expect(r.status, r.text).toBe(201)
  published[r.json.data.verification.record_name] = [r.json.data.verification.record_value]
  await dns.setTxt(published)
  const v = await call<Envelope<Domain>>(`${api.api}/domains/${r.json.data.id}/verify`, {
    method: "POST",
    key: account.key
  })
  expect(v.json.data.state).toBe("verified")
  return v.json.data
}
const unpublish = async (d: Domain) => {
  delete published[d.verification.record_name]
  await dns.setTxt(published)
}

const outboxTypes = async (domainId: string) => {
  const client = new pg.Client({ connectionString: api.databaseUrl })
  await client.connect()
  try {
    const rows = await client.query("SELECT event->>'type' AS type FROM outbox WHERE key = $1 ORDER BY seq", [domainId])
    return rows.rows.map((r: { type: string }) => r.type)
  } finally {
    await client.end()
  }
}

describe.skipIf(dnsmasqBinary === undefined)("re-verification sweep against a real DNS server (dnsmasq)", () => {
  beforeAll(async () => {
    dns = await startTestDns()
    api = await startTestApi({ dnsServers: [dns.server], plans: { roomy: { custom_domains: 100 } } })
    account = await api.newAccount(ALL_SCOPES, { plan: "roomy" })
    runtime = ManagedRuntime.make(sweepLayer())
    await runtime.runPromise(Effect.void)
  }, 120_000)
  afterAll(async () => {
    await runtime?.dispose()
    await api?.close()
    await dns?.stop()
  })

  it("a proof still published keeps the domain verified and records the check", async () => {
    const d = await verifiedDomain()
    const checked = await runtime.runPromise(sweepOnce({ recheckMs: 0, graceMs: 0, sweepMs: 100, batch: 1000 }))
    expect(Option.getOrThrow(checked)).toBeGreaterThanOrEqual(1)
    const after = await read(d.id)
    expect(after.state).toBe("verified")
    expect(Date.parse(after.last_checked_at!)).toBeGreaterThan(Date.parse(d.last_checked_at!))
  })

  it("a missing proof within the grace period keeps it verified, with last_error; past it, pending again", async () => {
    const d = await verifiedDomain()
    const link = await call<Envelope<Link>>(`${api.api}/links`, {
      method: "POST",
      key: account.key,
      body: { url: "https://example.com/" }
    })
    expect(link.json.data.short_urls).toContain(`http://${d.hostname}/${link.json.data.slug}`)
    await unpublish(d)
    await runtime.runPromise(sweepOnce({ recheckMs: 0, graceMs: 3_600_000, sweepMs: 100, batch: 1000 }))
    expect(await read(d.id)).toMatchObject({ state: "verified", last_error: "no TXT record" })
    await runtime.runPromise(sweepOnce({ recheckMs: 0, graceMs: 0, sweepMs: 100, batch: 1000 }))
    expect(await read(d.id)).toMatchObject({ state: "pending", last_error: "no TXT record" })
    expect(await outboxTypes(d.id)).toEqual(["domain.registered", "domain.verified", "domain.unverified"])
    const again = await call<Envelope<Link>>(`${api.api}/links/${link.json.data.id}`, { key: account.key })
    expect(again.json.data.short_urls[0]).toBe(`http://sho.rt/${link.json.data.slug}`)
    expect(again.json.data.short_urls).not.toContain(`http://${d.hostname}/${link.json.data.slug}`)
  })

  it("one checker at a time: while another process holds the sweep lock, a pass does nothing", async () => {
    const d = await verifiedDomain()
    await unpublish(d)
    const client = new pg.Client({ connectionString: api.databaseUrl })
    await client.connect()
    try {
      await client.query("BEGIN")
      await client.query("SELECT pg_advisory_xact_lock($1::bigint)", [String(0x646f6d61696e73n)])
      const pass = await runtime.runPromise(sweepOnce({ recheckMs: 0, graceMs: 0, sweepMs: 100, batch: 1000 }))
      expect(Option.isNone(pass)).toBe(true)
      expect((await read(d.id)).state).toBe("verified")
      await client.query("ROLLBACK")
    } finally {
      await client.end()
    }
  })

  it("the running sweep (as the workers run it) takes a domain whose proof is gone back to pending", async () => {
    const d = await verifiedDomain()
    await unpublish(d)
    const sweeper = ManagedRuntime.make(
      domainSweepLayer({ recheckMs: 0, graceMs: 0, sweepMs: 100, batch: 1000 }).pipe(Layer.provide(sweepLayer()))
    )
    try {
      await sweeper.runPromise(Effect.void)
      await waitFor(async () => (await read(d.id)).state === "pending", {
        timeoutMs: 60_000,
        message: "the sweep to take the domain back to pending"
      })
    } finally {
      await sweeper.dispose()
    }
  })
})
