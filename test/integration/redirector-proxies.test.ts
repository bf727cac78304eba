import * as http from "node:http"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { call } from "../support/api.js"
import { clicksInLog } from "../support/clicks.js"
import { freePort, spawnRedirector, waitReady } from "../support/redirectorProcess.js"
import { redirectorSuite } from "../support/redirectorSuite.js"
import type { Envelope, Link } from "../support/resources.js"
import { waitFor } from "../support/waitFor.js"

/**
 * TRUSTED_PROXIES through a real redirector process (`apps/redirector/main.ts`): this test
 * connects from 127.0.0.1, so it is the reverse proxy when 127.0.0.1 is trusted, and an
 * ordinary visitor (whose X-Forwarded-For means nothing) when it is not.
 */
const suite = redirectorSuite("redirector-proxies")

const startRedirector = async (env: Record<string, string>) => {
  const port = await freePort()
  const p = spawnRedirector({
    DATABASE_URL: suite.api.databaseUrl,
    SHORT_PORT: String(port),
    DATA_DIR: path.join(suite.dataDir, String(port)),
    ...env
  })
  suite.track(p)
  await waitReady(p)
  return p
}

const createLink = async (url: string) => {
  const r = await call<Envelope<Link>>(`${suite.api.api}/links`, {
    method: "POST",
    key: suite.account.key,
    body: { url }
  })
  expect(r.status, r.text).toBe(201)
  return r.json.data as { id: string; slug: string }
}

const AGENT = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36"

/** A click from 127.0.0.1 with this X-Forwarded-For (a HEAD is not a click); resolves with the status. */
const click = (port: number, slug: string, forwardedFor: string, method = "GET") =>
  new Promise<number>((resolve, reject) => {
    const req = http.request(
      `http://127.0.0.1:${port}/${slug}`,
      { agent: false, method, headers: { "User-Agent": AGENT, "X-Forwarded-For": forwardedFor } },
      (res) => {
        res.resume()
        res.on("end", () => resolve(res.statusCode ?? 0))
      }
    )
    req.on("error", reject)
    req.setTimeout(30_000, () => req.destroy(new Error("timeout")))
    req.end()
  })

/** Until the redirector has the link (it follows the link events): HEADs, which are not clicks. */
const live = (port: number, slug: string) =>
  waitFor(async () => (await click(port, slug, "", "HEAD")) === 302, {
    timeoutMs: 60_000,
    message: `/${slug} to redirect on ${port}`
  })

/** The clicks of a link in clicks.v1 (each event once) and how many distinct visitors made them. */
const clicksOf = async (linkId: string) => {
  const found = await suite.infra.runPromise(clicksInLog(linkId))
  return { clicks: found.length, visitors: new Set(found.map((f) => f.click.visitor)).size }
}

const settled = async (linkId: string, clicks: number) => {
  await waitFor(async () => (await clicksOf(linkId)).clicks >= clicks, {
    timeoutMs: 60_000,
    message: () => `${clicks} clicks of ${linkId} in clicks.v1`
  })
  return clicksOf(linkId)
}

describe("TRUSTED_PROXIES, through a redirector process", () => {
  it("a trusted proxy's clicks are attributed to the right-most forwarded address (spoofed left-most entries ignored): distinct visitors are counted", {
    timeout: 240_000
  }, async () => {
    const p = await startRedirector({ TRUSTED_PROXIES: "127.0.0.1,::1,10.0.0.0/8" })
    const link = await createLink("https://example.com/behind-a-proxy")
    const sent = [
      "198.51.100.1",
      "6.6.6.6, 198.51.100.2",
      "198.51.100.3, 10.0.0.7",
      "[2001:db8::4]:51000",
      "198.51.100.5",
      // The same visitors again, whatever they claim to the left of what the proxy appended.
      "1.1.1.1, 198.51.100.1",
      "2.2.2.2, 198.51.100.2, 10.1.2.3",
      "2001:DB8:0:0::4"
    ]
    await live(p.port, link.slug)
    for (const forwardedFor of sent) expect(await click(p.port, link.slug, forwardedFor)).toBe(302)
    expect(await settled(link.id, sent.length)).toEqual({ clicks: sent.length, visitors: 5 })
  })

  it("an untrusted peer's X-Forwarded-For is ignored: all its clicks are one visitor (the default: trust nobody)", {
    timeout: 240_000
  }, async () => {
    const unset = await startRedirector({})
    const elsewhere = await startRedirector({ TRUSTED_PROXIES: "10.0.0.0/8" })
    const link = await createLink("https://example.com/no-proxy")
    for (const p of [unset, elsewhere]) {
      await live(p.port, link.slug)
      for (let i = 1; i <= 4; i++) expect(await click(p.port, link.slug, `198.51.100.${i}`)).toBe(302)
    }
    expect(await settled(link.id, 8)).toEqual({ clicks: 8, visitors: 1 })
  })

  it("a bad TRUSTED_PROXIES stops start-up with a line naming it", { timeout: 120_000 }, async () => {
    const p = spawnRedirector({
      DATABASE_URL: suite.api.databaseUrl,
      SHORT_PORT: String(await freePort()),
      DATA_DIR: path.join(suite.dataDir, "bad"),
      TRUSTED_PROXIES: "10.0.0.0/8,proxy.internal"
    })
    suite.track(p)
    expect(await p.exited).not.toBe(0)
    expect(p.output()).toMatch(/TRUSTED_PROXIES.*IP addresses or CIDR ranges/)
  })
})
