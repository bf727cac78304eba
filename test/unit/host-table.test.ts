import { describe, expect, it } from "vitest"
import { HostTable, makeHostRouting } from "../../apps/redirector/HostTable.js"
import { SlugTable } from "../../apps/redirector/SlugTable.js"
import type { HttpExchange } from "../../infra/http/HttpServer.js"

const state = (id: string, accountId: string, hostname: string, verified: boolean, updatedAt: number) => ({
  id,
  accountId,
  hostname,
  verified,
  updatedAt
})

/** An exchange that records what was answered. */
const exchange = (host: string, path: string, method = "GET") => {
  const answer: { status?: number; headers: Record<string, string>; body?: string } = { headers: {} }
  const ex = {
    method,
    path,
    header: (name: string) => (name === "host" ? host : ""),
    query: () => "",
    writeStatus(code: number) {
      answer.status = code
      return ex
    },
    writeHeader(name: string, value: string) {
      answer.headers[name.toLowerCase()] = value
      return ex
    },
    end(body: string) {
      answer.body = body
    }
  }
  return { ex: ex as unknown as HttpExchange, answer }
}

describe("HostTable", () => {
  it("keeps verified hosts only, newest version wins, and only the holder removes a host", () => {
    const t = new HostTable()
    expect(t.apply(state("dom_a", "acct_a", "go.example.org", true, 10))).toBe(true)
    expect(t.accountOf("go.example.org")).toBe("acct_a")
    expect(t.apply(state("dom_a", "acct_a", "go.example.org", false, 5))).toBe(false)
    expect(t.accountOf("go.example.org")).toBe("acct_a")
    // Another registration of the host took it over; the old one's late disable leaves it.
    t.apply(state("dom_b", "acct_b", "go.example.org", true, 30))
    t.apply(state("dom_a", "acct_a", "go.example.org", false, 20))
    expect(t.accountOf("go.example.org")).toBe("acct_b")
    t.apply(state("dom_b", "acct_b", "go.example.org", false, 40))
    expect(t.accountOf("go.example.org")).toBeUndefined()
    expect(t.size).toBe(0)
  })
})

describe("Host routing", () => {
  const hosts = new HostTable()
  hosts.apply(state("dom_a", "acct_a", "go.example.org", true, 1))
  const slugs = new SlugTable()
  slugs.apply({
    id: "link_a",
    accountId: "acct_a",
    slug: "mine",
    destinationUrl: "https://example.com/a",
    active: true,
    utm: null,
    expiresAt: null,
    updatedAt: 1
  })
  slugs.apply({
    id: "link_b",
    accountId: "acct_b",
    slug: "theirs",
    destinationUrl: "https://example.com/b",
    active: true,
    utm: null,
    expiresAt: null,
    updatedAt: 1
  })
  const routing = makeHostRouting(hosts, slugs, "https://sho.rt", "NOT FOUND")

  it("leaves the canonical host, loopback hosts and a missing Host to the canonical path", () => {
    for (const host of ["sho.rt", "SHO.RT:443", "127.0.0.1:8081", "localhost", "[::1]:8081", ""]) {
      const { ex, answer } = exchange(host, "/theirs")
      expect(routing.divert(ex), host).toBe(false)
      expect(answer.status).toBeUndefined()
    }
  })

  it("passes the account's own slugs on its host, refuses others with noindex, and unknown hosts plainly", () => {
    expect(routing.divert(exchange("Go.Example.org:80", "/mine").ex)).toBe(false)
    for (const path of ["/theirs", "/nothing", "/"]) {
      const { ex, answer } = exchange("go.example.org", path)
      expect(routing.divert(ex)).toBe(true)
      expect(answer).toMatchObject({ status: 404, body: "NOT FOUND", headers: { "x-robots-tag": "noindex" } })
    }
    const { ex, answer } = exchange("evil.example.net", "/mine")
    expect(routing.divert(ex)).toBe(true)
    expect(answer.status).toBe(404)
    expect(answer.headers["x-robots-tag"]).toBeUndefined()
    expect(routing.divert(exchange("evil.example.net", "/healthz").ex)).toBe(false)
    expect(routing.divert(exchange("evil.example.net", "/.well-known/tls-ask").ex)).toBe(false)
  })

  it("answers a run of one custom Host as its first request, and follows the table between them", () => {
    // The last other Host is remembered: the same header again, with other hosts in between,
    // and after its domain is removed and verified again.
    const table = new HostTable()
    table.apply(state("dom_a", "acct_a", "go.example.org", true, 1))
    const own = makeHostRouting(table, slugs, "https://sho.rt", "NOT FOUND")
    const divert = (host: string, path: string) => own.divert(exchange(host, path).ex)
    expect([divert("go.example.org", "/mine"), divert("go.example.org", "/theirs")]).toEqual([false, true])
    expect([divert("sho.rt", "/theirs"), divert("go.example.org", "/mine")]).toEqual([false, false])
    expect([divert("evil.example.net", "/mine"), divert("go.example.org", "/mine")]).toEqual([true, false])
    table.apply(state("dom_a", "acct_a", "go.example.org", false, 2))
    expect(divert("go.example.org", "/mine")).toBe(true)
    table.apply(state("dom_c", "acct_b", "go.example.org", true, 3))
    expect([divert("go.example.org", "/mine"), divert("go.example.org", "/theirs")]).toEqual([true, false])
    expect(divert("", "/theirs")).toBe(false)
  })
})
