import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { peerAddressLibrary } from "../support/redirectorProcess.js"
import { waitFor } from "../support/waitFor.js"

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")

/** The five loopback addresses the clients connect from (Linux routes all of 127/8 to lo). */
const SOURCES = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"]
const rawHex = (ipv4: string) => Buffer.from(ipv4.split(".").map(Number)).toString("hex")

/** One GET on a connection of its own from `localAddress`: the body. */
const get = (port: number, localAddress: string, agent: http.Agent | false = false) =>
  new Promise<string>((resolve, reject) => {
    const req = http.get({ host: "127.0.0.1", port, path: "/", localAddress, agent }, (res) => {
      let body = ""
      res.on("data", (c) => (body += c))
      res.on("end", () => resolve(body))
    })
    req.on("error", reject)
  })

/** `n` GETs written at once on one connection from `localAddress`: the answers' bodies, in order. */
const pipelined = (port: number, localAddress: string, n: number) =>
  new Promise<Array<string>>((resolve, reject) => {
    let data = Buffer.alloc(0)
    const bodies: Array<string> = []
    const s = net.connect({ host: "127.0.0.1", port, localAddress }, () => {
      s.write("GET / HTTP/1.1\r\nHost: peer\r\n\r\n".repeat(n))
    })
    s.on("data", (chunk) => {
      data = Buffer.concat([data, chunk])
      for (;;) {
        const end = data.indexOf("\r\n\r\n")
        if (end < 0) break
        const length = /content-length: *(\d+)/i.exec(data.subarray(0, end).toString("latin1"))
        const size = length === null ? 0 : Number(length[1])
        if (data.length < end + 4 + size) break
        bodies.push(data.subarray(end + 4, end + 4 + size).toString("latin1"))
        data = data.subarray(end + 4 + size)
      }
      if (bodies.length >= n) {
        s.destroy()
        resolve(bodies)
      }
    })
    s.on("error", reject)
    s.on("close", () => resolve(bodies))
  })

/** One node:net connection from `localAddress`: what the server saw as its peer. */
const netPeer = (port: number, localAddress: string) =>
  new Promise<string>((resolve, reject) => {
    let body = ""
    const s = net.connect({ host: "127.0.0.1", port, localAddress })
    s.on("data", (c) => (body += c))
    s.on("end", () => resolve(body.trim()))
    s.on("error", reject)
  })

// The preload library of scripts/redirector.sh (REDIRECTOR_PEER_CACHE): getpeername answered
// from the address accept returned. Run in a process of its own with the library preloaded.
describe.skipIf(peerAddressLibrary === undefined)(
  "peer-address.so: the address a socket was accepted with, kept per descriptor (needs a C compiler)",
  () => {
    let child: ChildProcess
    let ports: {
      loaded: boolean
      view: boolean
      uwsPort: number
      netPort: number
      /** The same uWebSockets.js server in a worker thread. */
      thread: { view: boolean; uwsPort: number }
    }

    beforeAll(async () => {
      child = spawn(process.execPath, ["--import", "tsx", "test/fixtures/peer-address/server.mjs"], {
        cwd: ROOT,
        env: { ...process.env, LD_PRELOAD: peerAddressLibrary },
        stdio: ["ignore", "pipe", "inherit"]
      })
      let out = ""
      child.stdout!.on("data", (c) => (out += c))
      ports = await waitFor(() => (out.includes("\n") ? JSON.parse(out.split("\n")[0]!) : undefined), {
        timeoutMs: 60_000,
        message: "the fixture server to listen"
      })
    })

    afterAll(() => {
      child?.kill()
    })

    it("is loaded into the process, with its current-peer view (peer-address-view.node)", () => {
      expect(ports.loaded).toBe(true)
      expect(ports.view).toBe(true)
      expect(ports.thread.view).toBe(true)
    })

    it("answers from its table, not the kernel: a reset connection keeps the address it was accepted with; a new socket under the number has none, after close or close_range", () => {
      // A C probe (test/fixtures/peer-address/probe.c) asks once without the library, once with it.
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "peer-address-"))
      try {
        const probe = path.join(dir, "probe")
        execFileSync(process.env.CC ?? "cc", ["-O2", "-o", probe, "test/fixtures/peer-address/probe.c"], { cwd: ROOT })
        const run = (env: NodeJS.ProcessEnv) => execFileSync(probe, { env, encoding: "utf8" }).trim().split("\n")
        const { LD_PRELOAD: _, ...without } = process.env
        expect(run(without)).toEqual([
          "after reset: ENOTCONN",
          "number reused: ENOTCONN",
          "current after an accepted socket's recv: none",
          "current after another socket's recv: none",
          "current after an accepted socket's read: none",
          "reused after close_range: ENOTCONN"
        ])
        expect(run({ ...without, LD_PRELOAD: peerAddressLibrary })).toEqual([
          "after reset: 127.0.0.1",
          "number reused: ENOTCONN",
          "current after an accepted socket's recv: 127.0.0.1",
          "current after another socket's recv: none",
          "current after an accepted socket's read: 127.0.0.1",
          "reused after close_range: ENOTCONN"
        ])
      } finally {
        fs.rmSync(dir, { recursive: true, force: true })
      }
    })

    it("gives each connection its own peer while descriptor numbers are reused, on both servers", async () => {
      const seen: Array<[string, string]> = []
      const netSeen: Array<[string, string]> = []
      // Connections one after another: each closed before the next, so descriptor numbers come
      // back, alternating between uSockets (accept4 with an address, close) and libuv
      // (accept4 without one, syscall(SYS_close)).
      for (let i = 0; i < 200; i++) {
        const from = SOURCES[i % SOURCES.length]!
        seen.push([rawHex(from), await get(ports.uwsPort, from)])
        const other = SOURCES[(i * 3 + 1) % SOURCES.length]!
        netSeen.push([other, await netPeer(ports.netPort, other)])
      }
      for (const [want, got] of seen) expect(got).toBe(want)
      for (const [want, got] of netSeen) expect(got).toBe(want)
    })

    it("gives each of many pipelined requests, on connections from five addresses at once, its own connection's peer, in the main thread and in a worker thread", async () => {
      // Each connection writes its requests in one go, so one read brings several of them and
      // the server's reads of the five connections interleave; both threads serve at once.
      const answers = await Promise.all(
        Array.from({ length: 80 }, (_, i) => {
          const from = SOURCES[i % SOURCES.length]!
          const port = i % 2 === 0 ? ports.uwsPort : ports.thread.uwsPort
          return pipelined(port, from, 25).then((bodies) => ({ want: rawHex(from), bodies }))
        })
      )
      for (const { want, bodies } of answers) expect(bodies).toEqual(Array<string>(25).fill(want))
    })

    it("keeps the right peer for many concurrent and kept-alive connections", async () => {
      const agents = SOURCES.map(() => new http.Agent({ keepAlive: true, maxSockets: 8 }))
      try {
        const answers = await Promise.all(
          Array.from({ length: 400 }, (_, i) => {
            const k = i % SOURCES.length
            return get(ports.uwsPort, SOURCES[k]!, agents[k]).then((got) => [rawHex(SOURCES[k]!), got])
          })
        )
        for (const [want, got] of answers) expect(got).toBe(want)
      } finally {
        for (const a of agents) a.destroy()
      }
    })
  }
)
