import { request } from "node:http"
import {
  ConfigProvider,
  Context,
  Effect,
  Exit,
  Layer,
  Logger,
  LogLevel,
  ManagedRuntime,
  Option,
  Redacted,
  Scope
} from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Domains } from "../../apps/api/Domains/Domains.js"
import { VerifiedHostsLive } from "../../apps/redirector/HostTable.js"
import { NOT_FOUND_PAGE, Redirector, RedirectorLayer } from "../../apps/redirector/Redirector.js"
import { sweepOnce } from "../../apps/workers/DomainSweep.js"
import { AppConfig } from "../../infra/AppConfig.js"
import { dnsResolverLayer } from "../../infra/dns/DnsResolver.js"
import { Plans } from "../../infra/Plans.js"
import { DomainRepoLive } from "../../infra/postgres/Domains.js"
import { LinkRepoLive } from "../../infra/postgres/Links.js"
import { OutboxLive } from "../../infra/postgres/Outbox.js"
import { OutboxRelayLive } from "../../infra/postgres/OutboxRelay.js"
import { VisitorSecretRepoLive } from "../../infra/postgres/VisitorSecrets.js"
import { ALL_SCOPES, call, startTestApi, type TestAccount, type TestApi } from "../support/api.js"
import { dnsmasqBinary, startTestDns, type TestDns } from "../support/dnsmasq.js"
import { embeddedEventLogLayer } from "../support/eventlog.js"
import type { Domain, Envelope, Link } from "../support/resources.js"
import { waitFor } from "../support/waitFor.js"

/** One request with the Host header given (fetch does not let a caller set it). */
const hit = (port: number, path: string, host: string, method = "GET") =>
  new Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }>(
    (resolve, reject) => {
      const req = request({ host: "127.0.0.1", port, path, method, headers: { host } }, (res) => {
        let body = ""
        res.setEncoding("utf8")
        res.on("data", (c) => (body += c))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
      })
      req.on("error", reject)
      req.end()
    }
  )

/** The outbox relay and the log the redirector follows, and what the workers' sweep runs on. */
const infraLayer = (databaseUrl: string) =>
  Layer.merge(
    OutboxRelayLive,
    Domains.Default.pipe(
      Layer.provideMerge(DomainRepoLive),
      Layer.provide(OutboxLive),
      Layer.provide(dnsResolverLayer({ servers: [dns.server], timeoutMs: 1500 })),
      Layer.provide(Plans.make()),
      Layer.provide(
        AppConfig.make({ databaseUrl: Option.some(Redacted.make(databaseUrl)), shortBase: "http://sho.rt" })
      )
    )
  ).pipe(
    Layer.provideMerge(embeddedEventLogLayer(databaseUrl)),
    Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
  )

let api: TestApi
let dns: TestDns
let infra: ManagedRuntime.ManagedRuntime<Layer.Layer.Success<ReturnType<typeof infraLayer>>, unknown>
let alice: TestAccount
let bob: TestAccount
let counter = 0

const createLink = async (account: TestAccount, url: string) => {
  const r = await call<Envelope<Link>>(`${api.api}/links`, { method: "POST", key: account.key, body: { url } })
  expect(r.status, r.text).toBe(201)
  return r.json.data
}

const published: Record<string, Array<string>> = {}
/** Registers, publishes and verifies a fresh custom domain of the account. */
const verifiedDomain = async (account: TestAccount) => {
  const r = await call<Envelope<Domain>>(`${api.api}/domains`, {
    method: "POST",
    key: account.key,
    body: { hostname: `go${counter++}.example.test` }
  })
  expect(r.status, r.text).toBe(201)
  published[r.json.data.verification.record_name] = [r.json.data.verification.record_value]
  await dns.setTxt(published)
  const v = await call<Envelope<Domain>>(`${api.api}/domains/${r.json.data.id}/verify`, {
    method: "POST",
    key: account.key
  })
  expect(v.json.data.state, v.text).toBe("verified")
  return v.json.data
}

/** A redirector with the verified hosts table, on a random port, on the given engine. */
const startRedirector = (engine: "uws" | "node") =>
  infra.runPromise(
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const config = AppConfig.make({
        databaseUrl: Option.some(Redacted.make(api.databaseUrl)),
        shortPort: 0,
        shortBase: "http://sho.rt"
      })
      const context = yield* Layer.buildWithScope(
        RedirectorLayer.pipe(
          Layer.provide(VerifiedHostsLive.pipe(Layer.provide(DomainRepoLive))),
          Layer.provide(Layer.merge(LinkRepoLive, VisitorSecretRepoLive)),
          Layer.provide(config),
          Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
        ),
        scope
      ).pipe(
        Effect.withConfigProvider(
          ConfigProvider.fromMap(new Map([["HTTP_ENGINE", engine]])).pipe(
            ConfigProvider.orElse(() => ConfigProvider.fromEnv())
          )
        )
      )
      const info = Context.get(context, Redirector)
      return { info, close: () => infra.runPromise(Scope.close(scope, Exit.void)) }
    })
  )

describe.skipIf(dnsmasqBinary === undefined)("redirects on verified custom domains (dnsmasq installed)", () => {
  beforeAll(async () => {
    dns = await startTestDns()
    api = await startTestApi({ dnsServers: [dns.server], plans: { roomy: { custom_domains: 100 } } })
    infra = ManagedRuntime.make(infraLayer(api.databaseUrl))
    await infra.runPromise(Effect.void)
    alice = await api.newAccount(ALL_SCOPES, { plan: "roomy" })
    bob = await api.newAccount(ALL_SCOPES, { plan: "roomy" })
  }, 120_000)
  afterAll(async () => {
    await infra?.dispose()
    await api?.close()
    await dns?.stop()
  })

  describe.each(["uws", "node"] as const)("on the %s engine", (engine) => {
    let r: Awaited<ReturnType<typeof startRedirector>>
    let port: number
    beforeAll(async () => {
      r = await startRedirector(engine)
      port = r.info.port
    }, 120_000)
    afterAll(() => r?.close())

    it("serves the account's links on its verified host (any case, any port), and only those", async () => {
      expect(r.info.engine).toBe(engine === "uws" ? "uWebSockets.js" : "node:http")
      const d = await verifiedDomain(alice)
      const mine = await createLink(alice, "https://example.com/alice")
      const theirs = await createLink(bob, "https://example.com/bob")
      await waitFor(async () => (await hit(port, `/${mine.slug}`, d.hostname)).status === 302, {
        timeoutMs: 60_000,
        message: "the custom host to serve the link"
      })
      for (const host of [d.hostname, d.hostname.toUpperCase(), `${d.hostname}:443`, `${d.hostname}.`]) {
        const res = await hit(port, `/${mine.slug}`, host)
        expect(res.status, host).toBe(302)
        expect(res.headers.location).toBe("https://example.com/alice")
        expect(res.headers["cache-control"]).toBe("private, no-store")
      }
      expect((await hit(port, `/${mine.slug}`, d.hostname, "HEAD")).status).toBe(302)
      // Canonical keeps working, for both accounts' links.
      await waitFor(async () => (await hit(port, `/${theirs.slug}`, "sho.rt")).status === 302, { timeoutMs: 60_000 })
      expect((await hit(port, `/${mine.slug}`, "sho.rt")).status).toBe(302)
      expect((await hit(port, `/${mine.slug}`, `127.0.0.1:${port}`)).status).toBe(302)
      // Another account's slug, an unknown slug and the bare root: 404 page, noindex.
      for (const path of [`/${theirs.slug}`, "/nope-nope", "/"]) {
        const res = await hit(port, path, d.hostname)
        expect(res.status, path).toBe(404)
        expect(res.headers["x-robots-tag"], path).toBe("noindex")
        expect(res.body).toBe(NOT_FOUND_PAGE)
      }
    })

    it("an unknown host answers the 404 page, even for a slug that exists", async () => {
      const link = await createLink(alice, "https://example.com/unknown-host")
      await waitFor(async () => (await hit(port, `/${link.slug}`, "sho.rt")).status === 302, { timeoutMs: 60_000 })
      const res = await hit(port, `/${link.slug}`, "unknown.example.test")
      expect(res.status).toBe(404)
      expect(res.body).toBe(NOT_FOUND_PAGE)
      expect(res.headers["x-robots-tag"]).toBeUndefined()
      expect((await hit(port, "/healthz", "unknown.example.test")).status).toBe(200)
    })

    it("the TLS ask answers 200 only for verified hosts, on any Host", async () => {
      const d = await verifiedDomain(bob)
      const ask = (domain: string, host = `127.0.0.1:${port}`) =>
        hit(port, `/.well-known/tls-ask?domain=${encodeURIComponent(domain)}`, host)
      await waitFor(async () => (await ask(d.hostname)).status === 200, { timeoutMs: 60_000 })
      expect((await ask(d.hostname.toUpperCase())).status).toBe(200)
      expect((await ask(d.hostname, "sho.rt")).status).toBe(200)
      expect((await ask("unknown.example.test")).status).toBe(404)
      expect((await ask("sho.rt")).status).toBe(404)
      expect((await hit(port, "/.well-known/tls-ask", `127.0.0.1:${port}`)).status).toBe(404)
      expect((await hit(port, "/.well-known/tls-ask?domain=%E0%A4%A", `127.0.0.1:${port}`)).status).toBe(404)
    })

    it("disabling the domain stops its host within the budget; canonical links are unaffected", async () => {
      const d = await verifiedDomain(alice)
      const link = await createLink(alice, "https://example.com/to-disable")
      await waitFor(async () => (await hit(port, `/${link.slug}`, d.hostname)).status === 302, { timeoutMs: 60_000 })
      const off = await call(`${api.api}/domains/${d.id}/disable`, { method: "POST", key: alice.key })
      expect(off.status, off.text).toBe(200)
      const started = Date.now()
      await waitFor(async () => (await hit(port, `/${link.slug}`, d.hostname)).status === 404, { timeoutMs: 60_000 })
      console.info(`${engine}: disable-to-404 latency ${Date.now() - started} ms`)
      expect((await hit(port, `/.well-known/tls-ask?domain=${d.hostname}`, "sho.rt")).status).toBe(404)
      expect((await hit(port, `/${link.slug}`, "sho.rt")).status).toBe(302)
    })

    it("a proof gone from DNS past the grace period (re-verification) stops the host; canonical unaffected", async () => {
      const d = await verifiedDomain(alice)
      const link = await createLink(alice, "https://example.com/reverify")
      await waitFor(async () => (await hit(port, `/${link.slug}`, d.hostname)).status === 302, { timeoutMs: 60_000 })
      delete published[d.verification.record_name]
      await dns.setTxt(published)
      await infra.runPromise(sweepOnce({ recheckMs: 0, graceMs: 0, sweepMs: 100, batch: 1000 }))
      const started = Date.now()
      await waitFor(async () => (await hit(port, `/${link.slug}`, d.hostname)).status === 404, { timeoutMs: 60_000 })
      console.info(`${engine}: unverified-to-404 latency ${Date.now() - started} ms`)
      expect((await hit(port, `/${link.slug}`, "sho.rt")).status).toBe(302)
    })
  })
})
