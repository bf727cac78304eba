import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { jpeg } from "../fixtures/images/make.js"
import { cli, freePorts, type Ports, postgresPid, rawClient, Service, serviceEnv } from "../support/service.js"
import { waitFor } from "../support/waitFor.js"

/**
 * Operating the service as a process (`npm start`): an honest "ready", a start-up failure
 * named by its variable, the embedded PostgreSQL never outliving the service, and hostile
 * clients on the API, short and media ports. Deadlines are generous: every step starts or
 * stops processes on a possibly busy machine.
 */
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "shortlinks-ops-"))
// Short HTTP deadlines, so that slow clients are judged within seconds.
const DEADLINES = { HTTP_HEADER_TIMEOUT_MS: "1500", HTTP_REQUEST_TIMEOUT_MS: "3000" }
let ports: Ports
let env: NodeJS.ProcessEnv
let service: Service
let key = ""

beforeAll(async () => {
  ports = await freePorts()
  env = serviceEnv(dataDir, ports, DEADLINES)
  service = new Service(env)
  await service.ready()
}, 240_000)

afterAll(async () => {
  await service?.stop()
  const left = postgresPid(dataDir)
  if (left !== undefined) process.kill(left, "SIGINT")
  fs.rmSync(dataDir, { recursive: true, force: true })
}, 60_000)

describe("start", { timeout: 240_000 }, () => {
  it("'ready' is logged once, after every listener is bound, naming each public URL; every log line is JSON", async () => {
    // Started before the ready line was seen: each port must answer at once.
    const [api, short, media] = await Promise.all(
      [ports.api, ports.short, ports.media].map((p) => fetch(`http://127.0.0.1:${p}/healthz`).then((r) => r.status))
    )
    expect([api, short, media]).toEqual([200, 200, 200])
    const ready = service.messages().filter((m) => m.startsWith("ready: "))
    expect(ready).toHaveLength(1)
    for (const url of [env.PUBLIC_API_BASE, env.PUBLIC_SHORT_BASE, env.PUBLIC_IMAGE_HOST])
      expect(ready[0]).toContain(url)
    expect(service.stderr).not.toContain("DeprecationWarning")
  })

  it("a port in use stops start-up with one line naming the variable, and no 'ready'", async () => {
    const otherDir = fs.mkdtempSync(path.join(os.tmpdir(), "shortlinks-ops2-"))
    try {
      // Another data directory, the API port of the running service.
      const second = new Service(serviceEnv(otherDir, { ...(await freePorts()), api: ports.api }, DEADLINES))
      expect(await second.exit()).toBe(1)
      expect(second.stderr.trim().split("\n")).toEqual([
        `start-up failed: API_PORT=${ports.api} is in use; stop what listens there or set API_PORT`
      ])
      expect(second.messages().filter((m) => m.startsWith("ready"))).toEqual([])
      expect(postgresPid(otherDir)).toBeUndefined()
    } finally {
      fs.rmSync(otherDir, { recursive: true, force: true })
    }
  })

  it("a second instance on the same DATA_DIR stops with one line saying so, and the first one goes on", async () => {
    const second = new Service(serviceEnv(dataDir, await freePorts(), DEADLINES))
    expect(await second.exit()).toBe(1)
    const lines = second.stderr.trim().split("\n")
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/^start-up failed: .* is in use by process \d+ \(the running service\?\)/)
    expect(second.messages().filter((m) => m.startsWith("ready"))).toEqual([])
    expect((await fetch(`http://127.0.0.1:${ports.api}/readyz`)).status).toBe(200)
  })

  it("the CLI creates an account and a key with every scope", async () => {
    const account = await cli(env, "accounts", "create", "--name", "ops")
    const created = await cli(
      env,
      "keys",
      "create",
      "--account",
      account.id,
      "--scopes",
      "links:read,links:write,analytics:read,images:read,images:write"
    )
    key = created.key
    expect(key).toMatch(/^sk_/)
  })
})

const slowHeaders = ["GET /healthz HTTP/1.1\r\nHost: x\r\n", "X-Slow: 1\r\n", "X-Slow: 2\r\n", "X-Slow: 3\r\n"]
const longLine = `GET /${"a".repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`

describe("hostile clients on the API port", { timeout: 60_000 }, () => {
  it("slow headers: 408 request_timeout, and the connection is closed", async () => {
    const r = await rawClient(ports.api, slowHeaders, { pauseMs: 1_000 })
    expect(r.status).toBe(408)
    expect(r.response).toContain('"code":"request_timeout"')
  })

  it("a slow body: 408 request_timeout, and the connection is closed", async () => {
    const head =
      `POST /v1/links HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nIdempotency-Key: slow-body-1\r\n` +
      "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    const r = await rawClient(ports.api, [head, '{"url":', '"https://'], { pauseMs: 1_000 })
    expect(r.status).toBe(408)
    expect(r.response).toContain('"code":"request_timeout"')
  })

  it("a request line over 16 KiB: 431 headers_too_large", async () => {
    const r = await rawClient(ports.api, [longLine])
    expect(r.status).toBe(431)
    expect(r.response).toContain('"code":"headers_too_large"')
  })

  it.each([
    ["PUT", "/v1/links", "GET, HEAD, POST"],
    ["TRACE", "/v1/links/abc", "GET, HEAD, PATCH, DELETE"],
    ["FOO", "/v1/links", "GET, HEAD, POST"]
  ])("%s %s: 405 method_not_allowed with Allow", async (method, p, allow) => {
    const r = await rawClient(ports.api, [`${method} ${p} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`])
    expect(r.status).toBe(405)
    expect(r.response).toContain('"code":"method_not_allowed"')
    expect(r.response).toMatch(new RegExp(`\\r\\nallow: ${allow}\\r\\n`, "i"))
  })
})

describe.each([
  ["short", () => ports.short, "/some-slug"],
  ["media", () => ports.media, "/v/abcdefg/report"]
])("hostile clients on the %s port", { timeout: 60_000 }, (_name, port, postPath) => {
  it("slow headers: the connection is closed (uWebSockets.js: without an answer, after about 10 s)", async () => {
    const r = await rawClient(port(), slowHeaders, { pauseMs: 1_000, timeoutMs: 45_000 })
    expect([0, 408]).toContain(r.status)
  })

  it("a request line over 16 KiB: 431", async () => {
    const r = await rawClient(port(), [longLine])
    expect(r.status).toBe(431)
  })

  it("TRACE: 405 with Allow", async () => {
    const r = await rawClient(port(), [`TRACE ${postPath} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`])
    expect(r.status).toBe(405)
    expect(r.response).toMatch(/\r\nallow: /i)
  })

  it("a method HTTP does not know: refused and closed, never a 2xx or a 500", async () => {
    const r = await rawClient(port(), [`FOO ${postPath} HTTP/1.1\r\nHost: x\r\n\r\n`], { timeoutMs: 45_000 })
    expect(r.status === 0 || (r.status >= 400 && r.status < 500)).toBe(true)
  })
})

describe("hostile clients on the media port: a slow body", { timeout: 60_000 }, () => {
  it("an abuse report whose body does not arrive in time: 408, and the connection is closed", async () => {
    const head =
      "POST /v/abcdefg/report HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 50\r\n\r\n"
    const r = await rawClient(ports.media, [head, "reason=", "spam"], { pauseMs: 1_000 })
    expect(r.status).toBe(408)
  })
})

/** A client of the embedded PostgreSQL of the running service. */
const database = () => {
  const port = Number(fs.readFileSync(path.join(dataDir, "postgres", "postmaster.pid"), "utf8").split("\n")[3])
  const password = fs.readFileSync(path.join(dataDir, "postgres.secret"), "utf8").trim()
  return new pg.Client({ host: "127.0.0.1", port, user: "postgres", password, database: "postgres" })
}

describe("stop and crash", { timeout: 420_000 }, () => {
  it("kill -9 with an image in conversion: after the restart the job is taken over within seconds and the image ends ready", async () => {
    const upload = await fetch(`http://127.0.0.1:${ports.api}/v1/images`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "idempotency-key": "crash-upload-1", "content-type": "image/jpeg" },
      body: await jpeg(3000, 3000)
    })
    expect(upload.status).toBe(202)
    const id: string = ((await upload.json()) as { data: { id: string } }).data.id
    const db = database()
    await db.connect()
    try {
      await waitFor(
        async () =>
          (await db.query("SELECT lease_owner FROM image_jobs WHERE image_id = $1", [id])).rows[0]?.lease_owner,
        { timeoutMs: 60_000, message: "the conversion to be claimed" }
      )
    } finally {
      await db.end()
    }
    service.proc.kill("SIGKILL")
    await service.exit()
    const restarted = Date.now()
    service = new Service(env)
    const readyMs = await service.ready()
    const image = async () => {
      const r = await fetch(`http://127.0.0.1:${ports.api}/v1/images/${id}`, {
        headers: { authorization: `Bearer ${key}` }
      })
      return ((await r.json()) as { data: { status: string } }).data
    }
    const ready = await waitFor(async () => (await image()).status === "ready", {
      timeoutMs: 120_000,
      message: "the image to be converted after the crash"
    })
    expect(ready).toBe(true)
    const recoveredMs = Date.now() - restarted
    console.info(`after kill -9: ready ${readyMs} ms after the restart, the image converted ${recoveredMs} ms after it`)
    // The lease (10 s) and a sweep (2 s) bound the wait for the takeover; the rest is start and conversion.
    expect(recoveredMs - readyMs).toBeLessThan(60_000)
  })

  it("after kill -9 the embedded PostgreSQL stops by itself; the next start and clean stop leave nothing running", async () => {
    const pg = postgresPid(dataDir)
    expect(pg).toBeDefined()
    service.proc.kill("SIGKILL")
    await service.exit()
    const killed = Date.now()
    await waitFor(() => postgresPid(dataDir) === undefined, {
      timeoutMs: 60_000,
      message: "the embedded PostgreSQL to stop after its service was killed"
    })
    console.info(`embedded PostgreSQL gone ${Date.now() - killed} ms after kill -9 of the service`)
    service = new Service(env)
    console.info(`ready ${await service.ready()} ms after the restart`)
    expect(await service.stop()).toBe(0)
    const messages = service.messages()
    expect(messages.at(-1)).toMatch(/^stopped: /)
    expect(messages).toContain("embedded PostgreSQL stopped")
    expect(postgresPid(dataDir)).toBeUndefined()
  })

  it("a server left behind (its owner gone without the watchdog) is stopped at the next start, which stops its own at the end", async () => {
    // A leftover: a server whose owner file names a process that no longer exists.
    service = new Service(env)
    await service.ready()
    const leftover = postgresPid(dataDir)!
    // The watchdog is a shell reading a pipe: kill it first, then the service.
    const watchdogs = fs
      .readdirSync("/proc")
      .filter((d) => /^\d+$/.test(d))
      .filter((d) => {
        try {
          const cmd = fs.readFileSync(`/proc/${d}/cmdline`, "utf8")
          return cmd.includes("postgres-watchdog") && cmd.includes(`\0${leftover}`)
        } catch {
          return false
        }
      })
    expect(watchdogs).toHaveLength(1)
    process.kill(Number(watchdogs[0]), "SIGKILL")
    service.proc.kill("SIGKILL")
    await service.exit()
    expect(postgresPid(dataDir)).toBe(leftover)
    service = new Service(env)
    await service.ready()
    expect(service.messages().some((m) => m.includes("left behind"))).toBe(true)
    expect(postgresPid(dataDir)).not.toBe(leftover)
    expect(await service.stop()).toBe(0)
    expect(postgresPid(dataDir)).toBeUndefined()
    // Not a listener left either.
    const refused = await new Promise<boolean>((resolve) => {
      const s = net.connect(ports.api, "127.0.0.1")
      s.once("connect", () => resolve(!s.destroy()))
      s.once("error", () => resolve(true))
    })
    expect(refused).toBe(true)
  })
})
