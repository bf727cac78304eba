import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import * as http from "node:http"
import * as https from "node:https"
import type { AddressInfo } from "node:net"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as tls from "node:tls"
import { gzipSync } from "node:zlib"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { type FetchOptions, SafeFetcher } from "../../domain/ports/SafeFetcher.js"
import { redirectTarget, type SafeFetcherOptions, safeFetcherLayer } from "../../infra/fetcher/SafeFetcher.js"
import { waitForEffect } from "../support/waitFor.js"

const PNG = Uint8Array.from([
  0x89,
  0x50,
  0x4e,
  0x47,
  0x0d,
  0x0a,
  0x1a,
  0x0a,
  ...Array.from({ length: 56 }, (_, i) => i)
])

/** Requests each path received, by path without query. */
const hits = new Map<string, number>()
const hit = (path: string) => hits.set(path, (hits.get(path) ?? 0) + 1)
const hitsOf = (path: string) => hits.get(path) ?? 0
/** Paths whose response stream the client closed before it ended. */
const closedEarly = new Set<string>()

let server: http.Server
let raw: net.Server
let port: number
let rawPort: number
let base: string
let rawBase: string

const bytes = (n: number) => Buffer.alloc(n, 0x61)

const handle = (req: http.IncomingMessage, res: http.ServerResponse) => {
  const url = new URL(req.url!, "http://x")
  const path = url.pathname
  hit(path)
  const parts = path.split("/").filter(Boolean)
  res.on("close", () => {
    if (!res.writableFinished) closedEarly.add(path)
  })
  switch (parts[0]) {
    case "png":
      res.writeHead(200, { "content-type": "image/png", "content-length": PNG.length, "x-extra": "yes" })
      return res.end(PNG)
    case "echo":
      res.writeHead(200, { "content-type": "application/json" })
      return res.end(
        JSON.stringify({
          method: req.method,
          url: req.url,
          host: req.headers.host,
          accept: req.headers.accept,
          acceptEncoding: req.headers["accept-encoding"]
        })
      )
    case "sized": {
      // /sized/<n>/cl: with Content-Length; /sized/<n>/chunked: in two chunks, no length.
      const body = bytes(Number(parts[1]))
      if (parts[2] === "cl") {
        res.writeHead(200, { "content-length": body.length })
        return res.end(body)
      }
      res.writeHead(200)
      res.write(body.subarray(0, 10))
      return res.end(body.subarray(10))
    }
    case "huge-declared":
      // The body never comes: only refusing on the header ends this before the deadline.
      res.writeHead(200, { "content-length": 50_000_000 })
      return res.flushHeaders()
    case "endless": {
      res.writeHead(200, { "content-type": "image/png" })
      const timer = setInterval(() => res.write(bytes(1024)), 2)
      return res.on("close", () => clearInterval(timer))
    }
    case "slow": {
      res.writeHead(200, { "content-length": 1000 })
      const timer = setInterval(() => res.write("a"), 50)
      return res.on("close", () => clearInterval(timer))
    }
    case "silent":
      return
    case "r": {
      const n = Number(parts[1])
      // /r/<n>: n redirects to /png.
      res.writeHead(302, { location: n > 1 ? `/r/${n - 1}` : "/png" })
      return res.end()
    }
    case "loop":
      res.writeHead(302, { location: "/loop" })
      return res.end()
    case "to":
      res.writeHead(Number(url.searchParams.get("code") ?? 302), { location: url.searchParams.get("l")! })
      return res.end("moved")
    case "status":
      res.writeHead(Number(parts[1]))
      return res.end("status body")
    case "flaky":
      res.writeHead(hitsOf(path) === 1 ? 503 : 200)
      return res.end("ok")
    case "gzip": {
      const zipped = gzipSync(Buffer.from("hello"))
      res.writeHead(200, { "content-encoding": "gzip", "content-length": zipped.length })
      return res.end(zipped)
    }
    default:
      res.writeHead(404)
      return res.end()
  }
}

/** A bare TCP server for responses node:http will not write: cut connections, close-delimited bodies. */
const handleRaw = (socket: net.Socket) => {
  let head = ""
  socket.on("error", () => {})
  socket.on("data", (chunk) => {
    head += chunk.toString("latin1")
    if (!head.includes("\r\n\r\n")) return
    const path = head.split(" ")[1]!.split("?")[0]!
    hit(`raw${path}`)
    const parts = path.split("/").filter(Boolean)
    switch (parts[0]) {
      case "reset-first":
        if (hitsOf(`raw${path}`) === 1) return socket.resetAndDestroy()
        return socket.end("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
      case "cut-body":
        // Deliberately late: the head and a part of the body first, the reset a little after.
        socket.write("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
        return setTimeout(() => socket.resetAndDestroy(), 20)
      case "close-delimited":
        return socket.end(`HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n${"a".repeat(Number(parts[1]))}`)
      default:
        return socket.end("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
    }
  })
}

beforeAll(async () => {
  server = http.createServer(handle)
  raw = net.createServer(handleRaw)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  await new Promise<void>((resolve) => raw.listen(0, "127.0.0.1", resolve))
  port = (server.address() as AddressInfo).port
  rawPort = (raw.address() as AddressInfo).port
  base = `http://127.0.0.1:${port}`
  rawBase = `http://127.0.0.1:${rawPort}`
})

afterAll(async () => {
  server.closeAllConnections()
  await new Promise((resolve) => server.close(resolve))
  await new Promise((resolve) => raw.close(resolve))
})

const LOCAL: SafeFetcherOptions = { allowLoopback: true, retryDelayMs: 10 }

const fetchWith = (options: SafeFetcherOptions, url: string, fetchOptions: Partial<FetchOptions> = {}) =>
  Effect.flatMap(SafeFetcher, (fetcher) => fetcher.fetch(url, { maxBytes: 1024 * 1024, ...fetchOptions })).pipe(
    Effect.provide(safeFetcherLayer(options))
  )

const failureOf = (options: SafeFetcherOptions, url: string, fetchOptions: Partial<FetchOptions> = {}) =>
  Effect.flip(fetchWith(options, url, fetchOptions))

/** A resolver that answers from a table and counts its calls. */
const tableResolver = (table: Record<string, ReadonlyArray<string>>) => {
  const calls: Array<string> = []
  const resolve = async (name: string) => {
    calls.push(name)
    const answer = table[name]
    if (answer === undefined) throw Object.assign(new Error(`no such name ${name}`), { code: "ENOTFOUND" })
    return answer
  }
  return { resolve, calls }
}

describe("SafeFetcher refusal rules (loopback not allowed)", () => {
  it.live("refuses every notation of a loopback literal before connecting", () =>
    Effect.gen(function* () {
      const before = hitsOf("/png")
      for (const host of [
        "127.0.0.1",
        "2130706433",
        "0x7f.1",
        "0177.0.0.1",
        "127.1",
        "127.0.0.1.",
        "0x7f000001",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
        "[::127.0.0.1]",
        "[64:ff9b::7f00:1]",
        "[2002:7f00:1::]",
        "0.0.0.0",
        "[::]"
      ]) {
        const e = yield* failureOf({}, `http://${host}:${port}/png`)
        expect(e._tag, host).toBe("UrlNotAllowed")
      }
      expect(hitsOf("/png")).toBe(before)
    })
  )

  it.live("refuses private, link-local, metadata and reserved literals with the reason", () =>
    Effect.gen(function* () {
      for (const [url, reason] of [
        ["http://10.0.0.1/", /private/],
        ["http://192.168.0.1/", /private/],
        ["http://172.16.5.4/", /private/],
        ["http://100.64.0.1/", /shared/],
        ["http://169.254.169.254/latest/meta-data/", /link-local/],
        ["http://2852039166/", /link-local/],
        ["http://[::ffff:169.254.169.254]/", /ipv4-mapped/],
        ["http://[fe80::1]/", /link-local/],
        ["http://[fd00:ec2::254]/", /unique-local/],
        ["http://224.0.0.1/", /multicast/],
        ["http://255.255.255.255/", /broadcast/],
        ["http://240.0.0.1/", /reserved/],
        ["http://198.18.0.1/", /benchmarking/],
        ["http://192.0.2.1/", /documentation/],
        ["http://[2001::1]/", /teredo/]
      ] as const) {
        const e = yield* failureOf({}, url)
        expect(e._tag, url).toBe("UrlNotAllowed")
        expect(e._tag === "UrlNotAllowed" && e.reason, url).toMatch(reason)
      }
    })
  )

  it.live("refuses localhost as resolved by the system resolver", () =>
    Effect.gen(function* () {
      const e = yield* failureOf({}, `http://localhost:${port}/png`)
      expect(e._tag).toBe("UrlNotAllowed")
      expect(e._tag === "UrlNotAllowed" && e.reason).toMatch(
        /localhost resolves to (127\.0\.0\.1|::1), which is not public \(loopback\)/
      )
    })
  )

  it.live("refuses a name that resolves to loopback when loopback is not allowed", () =>
    Effect.gen(function* () {
      const { resolve } = tableResolver({ "images.test": ["127.0.0.1"] })
      const e = yield* failureOf({ resolve }, `http://images.test:${port}/png`)
      expect(e._tag).toBe("UrlNotAllowed")
    })
  )

  it.live("refuses other schemes, credentials in the URL, port 0 and unparsable URLs", () =>
    Effect.gen(function* () {
      for (const url of [
        "ftp://example.com/a.png",
        "file:///etc/passwd",
        "data:image/png;base64,iVBORw0KGgo=",
        "javascript:alert(1)",
        "gopher://example.com/",
        "https://user:secret@example.com/a.png",
        "https://user@example.com/a.png",
        "http://example.com:0/",
        "not a url",
        "http://[fe80::1%25eth0]/",
        "http://1.2.3.4.5/"
      ]) {
        const e = yield* failureOf({}, url)
        expect(e._tag, url).toBe("UrlNotAllowed")
      }
    })
  )
})

describe("SafeFetcher mechanics (loopback allowed for the local test server)", () => {
  it.live(
    "returns the bytes, status, headers and final URL; sends GET, the Accept header and identity encoding, no fragment",
    () =>
      Effect.gen(function* () {
        const png = yield* fetchWith(LOCAL, `${base}/png#frag`)
        expect(png.status).toBe(200)
        expect(png.finalUrl).toBe(`${base}/png`)
        expect(png.headers["content-type"]).toBe("image/png")
        expect(png.headers["x-extra"]).toBe("yes")
        expect(png.body).toBeInstanceOf(Uint8Array)
        expect(Array.from(png.body)).toEqual(Array.from(PNG))

        const echo = yield* fetchWith(LOCAL, `${base}/echo?a=1#frag`, { accept: "image/*" })
        expect(JSON.parse(Buffer.from(echo.body).toString())).toEqual({
          method: "GET",
          url: "/echo?a=1",
          host: `127.0.0.1:${port}`,
          accept: "image/*",
          acceptEncoding: "identity"
        })
      })
  )

  it.live(
    "connects to the address it checked: a name only the custom resolver knows is resolved once and reached",
    () =>
      Effect.gen(function* () {
        const { resolve, calls } = tableResolver({ "images.test": ["127.0.0.1"] })
        const r = yield* fetchWith({ ...LOCAL, resolve }, `http://images.test:${port}/echo`)
        expect(JSON.parse(Buffer.from(r.body).toString()).host).toBe(`images.test:${port}`)
        expect(calls).toEqual(["images.test"])
      })
  )

  it.live(
    "keeps the checked address on retries: a resolver that would now answer a private address is not asked again",
    () =>
      Effect.gen(function* () {
        let answer: ReadonlyArray<string> = ["127.0.0.1"]
        const calls: Array<string> = []
        const resolve = async (name: string) => {
          calls.push(name)
          const current = answer
          answer = ["10.0.0.1"]
          return current
        }
        const r = yield* fetchWith({ ...LOCAL, resolve }, `http://flaky.test:${port}/flaky/rebind`)
        expect(r.status).toBe(200)
        expect(hitsOf("/flaky/rebind")).toBe(2)
        expect(calls).toEqual(["flaky.test"])
      })
  )

  it.live("refuses a name if any resolved address is not public, even with loopback allowed", () =>
    Effect.gen(function* () {
      const { resolve } = tableResolver({
        "mixed.test": ["127.0.0.1", "10.0.0.1"],
        "mapped.test": ["::ffff:127.0.0.1"],
        "meta.test": ["169.254.169.254"],
        "scoped.test": ["fe80::1%eth0"],
        "odd.test": ["0x7f.1"]
      })
      for (const [name, reason] of [
        ["mixed.test", /mixed\.test resolves to 10\.0\.0\.1, which is not public \(private\)/],
        ["mapped.test", /ipv4-mapped/],
        ["meta.test", /link-local/],
        ["scoped.test", /scoped/],
        ["odd.test", /not-an-address/]
      ] as const) {
        const e = yield* failureOf({ ...LOCAL, resolve }, `http://${name}:${port}/png`)
        expect(e._tag, name).toBe("UrlNotAllowed")
        expect(e._tag === "UrlNotAllowed" && e.reason).toMatch(reason)
      }
    })
  )

  it.live("allowLoopback allows loopback only: mapped loopback and private literals stay refused", () =>
    Effect.gen(function* () {
      for (const url of [`http://[::ffff:127.0.0.1]:${port}/png`, "http://10.0.0.1/", "http://[fc00::1]/"]) {
        const e = yield* failureOf(LOCAL, url)
        expect(e._tag, url).toBe("UrlNotAllowed")
      }
      const ok = yield* fetchWith(LOCAL, `http://2130706433:${port}/png`)
      expect(ok.status).toBe(200)
    })
  )

  it.live("refuses the service's own hosts, by host:port or by host on any port", () =>
    Effect.gen(function* () {
      const { resolve } = tableResolver({ "sho.rt": ["127.0.0.1"] })
      const own = { ...LOCAL, resolve, ownHosts: [`127.0.0.1:${port}`, "sho.rt"] }
      for (const url of [
        `${base}/png`,
        `http://0x7f.1:${port}/png`,
        `http://sho.rt:${port}/png`,
        `http://SHO.RT.:${port}/`
      ]) {
        const e = yield* failureOf(own, url)
        expect(e._tag, url).toBe("UrlNotAllowed")
        expect(e._tag === "UrlNotAllowed" && e.reason).toMatch(/this service/)
      }
      const other = yield* fetchWith(own, `${rawBase}/close-delimited/3`)
      expect(other.status).toBe(200)
      const e = yield* failureOf(own, `${rawBase}/x`.replace(`${rawPort}/x`, `${port}/png`))
      expect(e._tag).toBe("UrlNotAllowed")
    })
  )

  it.live("accepts a body of exactly maxBytes with Content-Length, chunked, or delimited by close", () =>
    Effect.gen(function* () {
      for (const url of [`${base}/sized/1000/cl`, `${base}/sized/1000/chunked`, `${rawBase}/close-delimited/1000`]) {
        const r = yield* fetchWith(LOCAL, url, { maxBytes: 1000 })
        expect(r.body.length, url).toBe(1000)
      }
    })
  )

  it.live("refuses one byte over maxBytes with Content-Length, chunked, or delimited by close", () =>
    Effect.gen(function* () {
      for (const url of [`${base}/sized/1001/cl`, `${base}/sized/1001/chunked`, `${rawBase}/close-delimited/1001`]) {
        const e = yield* failureOf(LOCAL, url, { maxBytes: 1000 })
        expect(e._tag, url).toBe("SourceTooLarge")
        expect(e._tag === "SourceTooLarge" && e.limit).toBe(1000)
      }
    })
  )

  it.live("refuses a Content-Length above the cap before reading: the body that never comes is not waited for", () =>
    Effect.gen(function* () {
      const e = yield* failureOf(LOCAL, `${base}/huge-declared`, { maxBytes: 1000, timeoutMs: 20_000 })
      expect(e._tag).toBe("SourceTooLarge")
    })
  )

  it.live("aborts an endless chunked body as soon as it passes the cap and closes the connection", () =>
    Effect.gen(function* () {
      const e = yield* failureOf(LOCAL, `${base}/endless`, { maxBytes: 10_000, timeoutMs: 20_000 })
      expect(e._tag).toBe("SourceTooLarge")
      yield* waitForEffect(
        Effect.sync(() => closedEarly.has("/endless")),
        { message: "the server to see /endless closed before its end" }
      )
      expect(closedEarly.has("/endless")).toBe(true)
    })
  )

  it.live("bounds the total time: a slow-loris body and a server that never answers end as SourceUnreachable", () =>
    Effect.gen(function* () {
      for (const path of ["/slow", "/silent"]) {
        const e = yield* failureOf(LOCAL, `${base}${path}`, { timeoutMs: 300 })
        expect(e._tag, path).toBe("SourceUnreachable")
        expect(e._tag === "SourceUnreachable" && e.reason).toMatch(/within 300 ms/)
      }
      yield* waitForEffect(
        Effect.sync(() => closedEarly.has("/slow") && closedEarly.has("/silent")),
        {
          message: "the server to see /slow and /silent closed before their end"
        }
      )
    })
  )

  it.live("follows up to maxRedirects (default 3) redirects, relative Locations included, and refuses one more", () =>
    Effect.gen(function* () {
      const ok = yield* fetchWith(LOCAL, `${base}/r/3`)
      expect(ok.finalUrl).toBe(`${base}/png`)
      expect(Array.from(ok.body)).toEqual(Array.from(PNG))
      const tooMany = yield* failureOf(LOCAL, `${base}/r/4`)
      expect(tooMany._tag).toBe("RedirectNotAllowed")
      expect(tooMany._tag === "RedirectNotAllowed" && tooMany.reason).toMatch(/more than 3 redirects/)
      const none = yield* failureOf(LOCAL, `${base}/r/1`, { maxRedirects: 0 })
      expect(none._tag).toBe("RedirectNotAllowed")
      const loop = yield* failureOf(LOCAL, `${base}/loop`)
      expect(loop._tag).toBe("RedirectNotAllowed")
      expect(hitsOf("/loop")).toBe(4)
    })
  )

  it.live("follows 301, 303, 307 and 308 with GET", () =>
    Effect.gen(function* () {
      for (const code of [301, 303, 307, 308]) {
        const r = yield* fetchWith(LOCAL, `${base}/to?code=${code}&l=${encodeURIComponent("/echo")}`)
        expect(JSON.parse(Buffer.from(r.body).toString()).method).toBe("GET")
      }
    })
  )

  it.live(
    "refuses a redirect hop to a private, mapped, metadata or non-http target even though loopback is allowed for the first hop",
    () =>
      Effect.gen(function* () {
        const { resolve } = tableResolver({ "rebind.test": ["10.0.0.1"], "ok.test": ["127.0.0.1"] })
        const before = hitsOf("/png")
        for (const location of [
          "http://10.0.0.1/",
          "http://[::ffff:169.254.169.254]/",
          "http://169.254.169.254/latest/meta-data/",
          "http://0xa9fea9fe/",
          "http://[fd00::1]/",
          `http://rebind.test:${port}/png`,
          `http://[::ffff:7f00:1]:${port}/png`,
          `http://user:pw@127.0.0.1:${port}/png`,
          "ftp://example.com/a.png",
          "file:///etc/passwd",
          "http://[::1"
        ]) {
          const e = yield* failureOf(
            { ...LOCAL, resolve },
            `http://ok.test:${port}/to?l=${encodeURIComponent(location)}`
          )
          expect(e._tag, location).toBe("RedirectNotAllowed")
          expect(e._tag === "RedirectNotAllowed" && e.location, location).toBe(location)
        }
        expect(hitsOf("/png")).toBe(before)
      })
  )

  it.live("gives SourceForbidden for a 403, without retrying", () =>
    Effect.gen(function* () {
      const e = yield* failureOf(LOCAL, `${base}/status/403`)
      expect(e._tag).toBe("SourceForbidden")
      expect(hitsOf("/status/403")).toBe(1)
    })
  )

  it.live("retries a 500 a bounded number of times, then gives SourceUnreachable", () =>
    Effect.gen(function* () {
      const e = yield* failureOf(LOCAL, `${base}/status/500`)
      expect(e._tag).toBe("SourceUnreachable")
      expect(e._tag === "SourceUnreachable" && e.reason).toMatch(/500/)
      expect(hitsOf("/status/500")).toBe(3)
      const once = yield* failureOf({ ...LOCAL, retries: 0 }, `${base}/status/502`)
      expect(once._tag).toBe("SourceUnreachable")
      expect(hitsOf("/status/502")).toBe(1)
    })
  )

  it.live("succeeds when a retried 503 turns into 200", () =>
    Effect.gen(function* () {
      const r = yield* fetchWith(LOCAL, `${base}/flaky/one`)
      expect(Buffer.from(r.body).toString()).toBe("ok")
      expect(hitsOf("/flaky/one")).toBe(2)
    })
  )

  it.live("gives SourceRejected with the status for other 4xx and unfollowed 3xx, without retrying", () =>
    Effect.gen(function* () {
      for (const code of [404, 410, 400, 300]) {
        const e = yield* failureOf(LOCAL, `${base}/status/${code}`)
        expect(e._tag, String(code)).toBe("SourceRejected")
        expect(e._tag === "SourceRejected" && e.status).toBe(code)
        expect(hitsOf(`/status/${code}`)).toBe(1)
      }
    })
  )

  it.live("retries a connection reset before any response, but not one after body bytes arrived", () =>
    Effect.gen(function* () {
      const r = yield* fetchWith(LOCAL, `${rawBase}/reset-first`)
      expect(Buffer.from(r.body).toString()).toBe("ok")
      expect(hitsOf("raw/reset-first")).toBe(2)
      const e = yield* failureOf(LOCAL, `${rawBase}/cut-body`)
      expect(e._tag).toBe("SourceUnreachable")
      expect(hitsOf("raw/cut-body")).toBe(1)
    })
  )

  it.live("gives SourceUnreachable for a refused connection and for names that do not resolve", () =>
    Effect.gen(function* () {
      const closed = net.createServer()
      yield* Effect.promise(() => new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve)))
      const closedPort = (closed.address() as AddressInfo).port
      yield* Effect.promise(() => new Promise((resolve) => closed.close(resolve)))
      const refused = yield* failureOf(LOCAL, `http://127.0.0.1:${closedPort}/`)
      expect(refused._tag).toBe("SourceUnreachable")
      expect(refused._tag === "SourceUnreachable" && refused.reason).toMatch(/ECONNREFUSED/)

      const system = yield* failureOf(LOCAL, "http://does-not-exist.invalid/a.png")
      expect(system._tag).toBe("SourceUnreachable")
      expect(system._tag === "SourceUnreachable" && system.reason).toMatch(/cannot resolve does-not-exist\.invalid/)

      const { resolve } = tableResolver({ "empty.test": [] })
      for (const name of ["unknown.test", "empty.test"]) {
        const e = yield* failureOf({ ...LOCAL, resolve }, `http://${name}/`)
        expect(e._tag, name).toBe("SourceUnreachable")
      }
    })
  )

  it.live("never decompresses: a gzip body the server imposes comes back as the encoded bytes", () =>
    Effect.gen(function* () {
      const r = yield* fetchWith(LOCAL, `${base}/gzip`)
      expect(r.headers["content-encoding"]).toBe("gzip")
      expect(Buffer.from(r.body).equals(gzipSync(Buffer.from("hello")))).toBe(true)
    })
  )
})

/** A self-signed certificate for `secure.test`, made with the openssl binary when there is one. */
const selfSigned = (): { key: string; cert: string } | undefined => {
  const dir = mkdtempSync(join(tmpdir(), "safe-fetcher-"))
  try {
    execFileSync(
      "openssl",
      ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=secure.test"].concat([
        "-keyout",
        join(dir, "key.pem"),
        "-out",
        join(dir, "cert.pem")
      ]),
      { stdio: "ignore" }
    )
    return { key: readFileSync(join(dir, "key.pem"), "utf8"), cert: readFileSync(join(dir, "cert.pem"), "utf8") }
  } catch {
    return undefined
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
const certificate = selfSigned()

describe.skipIf(certificate === undefined)("SafeFetcher over TLS (needs the openssl binary)", () => {
  it.live("sends the host name as SNI to the pinned address and verifies the certificate", () =>
    Effect.gen(function* () {
      const names: Array<string> = []
      const context = tls.createSecureContext(certificate!)
      const secure = https.createServer(
        {
          ...certificate!,
          SNICallback: (name, cb) => {
            names.push(name)
            cb(null, context)
          }
        },
        handle
      )
      yield* Effect.acquireRelease(
        Effect.promise(() => new Promise<void>((resolve) => secure.listen(0, "127.0.0.1", resolve))),
        () => Effect.promise(() => new Promise((resolve) => secure.close(resolve)))
      )
      const securePort = (secure.address() as AddressInfo).port
      const { resolve } = tableResolver({ "secure.test": ["127.0.0.1"] })
      const e = yield* failureOf({ ...LOCAL, resolve }, `https://secure.test:${securePort}/png`)
      expect(e._tag).toBe("SourceUnreachable")
      expect(e._tag === "SourceUnreachable" && e.reason).toMatch(/SELF_SIGNED/)
      expect(names).toEqual(["secure.test"])
    }).pipe(Effect.scoped)
  )
})

describe("redirect targets", () => {
  it("refuses https to http, resolves relative Locations against the current URL, and rejects unparsable ones", () => {
    const https = new URL("https://a.example/x/y?q=1")
    expect(redirectTarget(https, "http://a.example/z")).toEqual({ refused: "redirect from https to http" })
    expect(redirectTarget(https, "//b.example/z")).toEqual(new URL("https://b.example/z"))
    expect(redirectTarget(https, "z")).toEqual(new URL("https://a.example/x/z"))
    expect(redirectTarget(https, "https://b.example/")).toEqual(new URL("https://b.example/"))
    expect(redirectTarget(new URL("http://a.example/"), "https://b.example/")).toEqual(new URL("https://b.example/"))
    expect(redirectTarget(https, "http://[::1")).toEqual({ refused: "the Location header is not a URL" })
  })
})
