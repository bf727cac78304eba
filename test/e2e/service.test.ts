import { type ChildProcess, execFile, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call } from "../support/api.js"
import { freePort } from "../support/ports.js"
import type { Envelope, ErrorBody, Link } from "../support/resources.js"
import { waitFor } from "../support/waitFor.js"

/**
 * The real process, as an operator runs it: `npm start` on the embedded default, the CLI
 * beside it, and SIGTERM at the end.
 */
const root = path.resolve(import.meta.dirname, "../..")
const execFileAsync = promisify(execFile)
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "shortlinks-e2e-"))
let port = 0
// The other listeners on free ports too: e2e files run side by side.
let otherPorts = { short: 0, media: 0, snapshot: 0 }
let proc: ChildProcess | undefined
let output = ""

const env = () => ({
  ...process.env,
  DATA_DIR: dataDir,
  API_PORT: String(port),
  SHORT_PORT: String(otherPorts.short),
  MEDIA_PORT: String(otherPorts.media),
  SNAPSHOT_PORT: String(otherPorts.snapshot),
  PUBLIC_API_BASE: `http://127.0.0.1:${port}/v1`,
  LOG_LEVEL: "Info",
  DATABASE_URL: ""
})

const start = async () => {
  output = ""
  proc = spawn(process.execPath, ["--import", "tsx", "apps/all/main.ts"], { cwd: root, env: env() })
  proc.stdout!.on("data", (c) => (output += c))
  proc.stderr!.on("data", (c) => (output += c))
  const p = proc
  // Until it answers ready (not yet while it refuses connections), or the process has exited.
  const state = await waitFor(
    async () => {
      if (p.exitCode !== null) return "exited"
      return (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200 && "ready"
    },
    { timeoutMs: 200_000, intervalMs: 200, message: () => `the service to be ready: ${output}` }
  )
  if (state === "exited") throw new Error(`service exited: ${output}`)
}

/** Whether new connections to the API port are refused (the listener is closed). */
const refusesConnections = () =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect(port, "127.0.0.1")
    socket.once("connect", () => {
      socket.destroy()
      resolve(false)
    })
    socket.once("error", () => resolve(true))
  })

const exited = (p: ChildProcess) =>
  new Promise<number | null>((resolve) =>
    p.exitCode !== null ? resolve(p.exitCode) : p.once("exit", (code) => resolve(code))
  )

/** The operator CLI (asynchronously: the test process is not blocked while it runs). */
const cli = async (...args: Array<string>) => {
  const { stdout } = await execFileAsync(process.execPath, ["scripts/cli.mjs", ...args, "--json"], {
    cwd: root,
    env: env()
  })
  return JSON.parse(stdout)
}

const postgresRunning = () => {
  const pidFile = path.join(dataDir, "postgres", "postmaster.pid")
  if (!fs.existsSync(pidFile)) return false
  const pid = Number(fs.readFileSync(pidFile, "utf8").split("\n")[0])
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

beforeAll(async () => {
  port = await freePort()
  otherPorts = { short: await freePort(), media: await freePort(), snapshot: await freePort() }
  await start()
}, 240_000)

afterAll(async () => {
  if (proc && proc.exitCode === null) {
    proc.kill("SIGTERM")
    await exited(proc)
  }
  fs.rmSync(dataDir, { recursive: true, force: true })
})

// Generous: the tests start CLI processes, on a possibly busy machine.
describe("the service as a process (embedded default)", { timeout: 120_000 }, () => {
  let key = ""
  let keyId = ""
  let linkId = ""

  it("the CLI creates an account and a key while the embedded server runs", async () => {
    const account = await cli("accounts", "create", "--name", "e2e")
    expect(account.id).toMatch(/^acct_/)
    const created = await cli("keys", "create", "--account", account.id, "--scopes", "links:read,links:write")
    expect(created.key).toMatch(/^sk_/)
    key = created.key
    keyId = created.id
  })

  it("the CLI rejects unknown scopes and unknown accounts with a JSON error and a non-zero exit", async () => {
    await expect(cli("keys", "create", "--account", "acct_nope", "--scopes", "links:read")).rejects.toThrow()
    await expect(cli("keys", "create", "--account", "acct_nope", "--scopes", "links:admin")).rejects.toThrow()
  })

  it("an API client creates and reads a link with that key; OpenAPI is served without a key", async () => {
    const created = await call<Envelope<Link>>(`http://127.0.0.1:${port}/v1/links`, {
      method: "POST",
      key,
      body: { url: "https://example.com/e2e" }
    })
    expect(created.status, created.text).toBe(201)
    linkId = created.json.data.id
    const read = await call<Envelope<Link>>(`http://127.0.0.1:${port}/v1/links/${linkId}`, { key })
    expect(read.json.data.destination_url).toBe("https://example.com/e2e")
    const openapi = await call<{ readonly openapi: string }>(`http://127.0.0.1:${port}/v1/openapi.json`)
    expect(openapi.json.openapi).toBe("3.1.0")
  })

  it("no log line ever holds the API key, not even when a client puts it in the URL", async () => {
    const leaked = await call(`http://127.0.0.1:${port}/v1/links?api_key=${key}`)
    expect(leaked.status).toBe(401)
    // Its log line is written before the answer, and reaches this process through a pipe.
    const requestId = leaked.headers.get("x-request-id")
    expect(requestId).toBeTruthy()
    await waitFor(() => output.includes(requestId!), { message: `the log line of request ${requestId}` })
    expect(output).toContain('"message":"request"')
    expect(output).not.toContain(key)
    expect(output).not.toContain(key.split("_")[2]!)
  })

  it("a revoked key is refused at once", async () => {
    await cli("keys", "revoke", "--id", keyId)
    const res = await call<ErrorBody>(`http://127.0.0.1:${port}/v1/links/${linkId}`, { key })
    expect(res.status).toBe(401)
    expect(res.json.error.code).toBe("unauthenticated")
  })

  it("SIGTERM lets an in-flight request finish, stops PostgreSQL, and loses nothing", async () => {
    const account = await cli("accounts", "create", "--name", "e2e2")
    const fresh = (await cli("keys", "create", "--account", account.id, "--scopes", "links:read,links:write"))
      .key as string
    const body = JSON.stringify({ url: "https://example.com/in-flight" })
    // Send the headers and half the body, signal, then the rest.
    const socket = net.connect(port, "127.0.0.1")
    await new Promise((r) => socket.once("connect", r))
    let response = ""
    let closed = false
    socket.on("data", (c) => (response += c))
    socket.on("close", () => {
      closed = true
    })
    // Expect: 100-continue makes node:http say when it has the request (headers parsed, handler called).
    socket.write(
      `POST /v1/links HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${fresh}\r\nIdempotency-Key: inflight-0001\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nExpect: 100-continue\r\n\r\n` +
        body.slice(0, 10)
    )
    const interim = "HTTP/1.1 100 Continue\r\n\r\n"
    await waitFor(() => response.startsWith(interim), { message: "the server to take the request (100 Continue)" })
    const done = exited(proc!)
    proc!.kill("SIGTERM")
    // The rest of the body goes once the shutdown has begun: the listener is closed.
    await waitFor(refusesConnections, { message: "the API to stop accepting connections" })
    socket.write(body.slice(10))
    const code = await done
    // The connection ends with the process: everything it answered has arrived.
    await waitFor(() => closed, { message: "the connection to close" })
    expect(response.slice(interim.length)).toMatch(/^HTTP\/1\.1 201/)
    expect(code).toBe(0)
    expect(postgresRunning()).toBe(false)

    // Restart on the same data: the link acknowledged during shutdown is there.
    const id = /"id":"(link_[^"]+)"/.exec(response)![1]
    await start()
    const read = await call<Envelope<Link>>(`http://127.0.0.1:${port}/v1/links/${id}`, { key: fresh })
    expect(read.status).toBe(200)
    expect(read.json.data.destination_url).toBe("https://example.com/in-flight")
  }, 240_000)
})
