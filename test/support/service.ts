import { type ChildProcess, execFile, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { promisify } from "node:util"
import { freePort } from "./ports.js"
import { waitFor } from "./waitFor.js"

const root = path.resolve(import.meta.dirname, "../..")
const execFileAsync = promisify(execFile)

export interface Ports {
  readonly api: number
  readonly short: number
  readonly media: number
  readonly snapshot: number
}

export const freePorts = async (): Promise<Ports> => ({
  api: await freePort(),
  short: await freePort(),
  media: await freePort(),
  snapshot: await freePort()
})

/** The environment of a service on these ports and this data directory. */
export const serviceEnv = (dataDir: string, ports: Ports, extra: Record<string, string> = {}) => ({
  ...process.env,
  DATA_DIR: dataDir,
  API_PORT: String(ports.api),
  SHORT_PORT: String(ports.short),
  MEDIA_PORT: String(ports.media),
  SNAPSHOT_PORT: String(ports.snapshot),
  PUBLIC_API_BASE: `http://127.0.0.1:${ports.api}/v1`,
  PUBLIC_SHORT_BASE: `http://127.0.0.1:${ports.short}`,
  PUBLIC_IMAGE_HOST: `http://127.0.0.1:${ports.media}`,
  PUBLIC_SNAPSHOT_HOST: `http://127.0.0.1:${ports.snapshot}`,
  LOG_LEVEL: "Info",
  DATABASE_URL: "",
  ...extra
})

/** `npm start`'s process (apps/all/main.ts), with what it wrote. */
export class Service {
  stdout = ""
  stderr = ""
  readonly proc: ChildProcess
  readonly started = Date.now()
  constructor(env: NodeJS.ProcessEnv) {
    this.proc = spawn(process.execPath, ["--import", "tsx", "apps/all/main.ts"], { cwd: root, env })
    this.proc.stdout!.on("data", (c) => (this.stdout += c))
    this.proc.stderr!.on("data", (c) => (this.stderr += c))
  }
  get exited() {
    return this.proc.exitCode !== null || this.proc.signalCode !== null
  }
  /** The JSON log lines so far (a line that is not JSON throws). */
  logLines(): Array<{ readonly message: string | Array<string>; readonly [k: string]: unknown }> {
    return this.stdout
      .split("\n")
      .filter((l) => l.trim() !== "")
      .map((l) => JSON.parse(l))
  }
  messages(): Array<string> {
    return this.logLines().map((l) => (Array.isArray(l.message) ? l.message.join(" ") : String(l.message)))
  }
  /** Until the "ready" line is logged (or the process ends: then it throws). */
  async ready(timeoutMs = 200_000): Promise<number> {
    const seen = await waitFor(
      () => (this.exited ? "exited" : this.stdout.split("\n").some((l) => l.includes('"ready: ')) && "ready"),
      { timeoutMs, intervalMs: 20, message: () => `the ready line\n${this.stdout.slice(-3000)}\n${this.stderr}` }
    )
    if (seen === "exited") throw new Error(`service exited: ${this.stdout.slice(-3000)}\n${this.stderr}`)
    return Date.now() - this.started
  }
  exit(): Promise<number | null> {
    return new Promise((resolve) => {
      if (this.exited) return resolve(this.proc.exitCode)
      this.proc.once("exit", (code) => resolve(code))
    })
  }
  async stop(): Promise<number | null> {
    if (!this.exited) this.proc.kill("SIGTERM")
    return this.exit()
  }
}

/** The operator CLI, asynchronously, its --json output parsed. */
export const cli = async (env: NodeJS.ProcessEnv, ...args: Array<string>) => {
  const { stdout } = await execFileAsync(process.execPath, ["scripts/cli.mjs", ...args, "--json"], {
    cwd: root,
    env
  })
  return JSON.parse(stdout)
}

/** The pid of the embedded PostgreSQL running on this data directory, if any. */
export const postgresPid = (dataDir: string): number | undefined => {
  const pidFile = path.join(dataDir, "postgres", "postmaster.pid")
  if (!fs.existsSync(pidFile)) return undefined
  const pid = Number(fs.readFileSync(pidFile, "utf8").split("\n")[0])
  try {
    process.kill(pid, 0)
    return pid
  } catch {
    return undefined
  }
}

export interface RawOutcome {
  /** Everything the server sent. */
  readonly response: string
  /** The status of the first response, or 0 without one. */
  readonly status: number
  /** When the server closed the connection, in ms after the first byte was sent. */
  readonly closedAfterMs: number
}

/**
 * A hostile client on a raw socket: sends `parts` with `pauseMs` between them (a slow
 * client), then waits until the server closes the connection (at most `timeoutMs`).
 */
export const rawClient = (
  port: number,
  parts: ReadonlyArray<string | Buffer>,
  options: { readonly pauseMs?: number; readonly timeoutMs?: number } = {}
) =>
  new Promise<RawOutcome>((resolve, reject) => {
    const started = Date.now()
    const socket = net.connect(port, "127.0.0.1")
    let response = ""
    let closed = false
    const timer = setTimeout(() => {
      socket.destroy()
      reject(new Error(`the server kept the connection open for ${options.timeoutMs ?? 60_000} ms: ${response}`))
    }, options.timeoutMs ?? 60_000)
    socket.on("data", (c) => (response += c.toString("latin1")))
    socket.on("error", () => {})
    socket.on("close", () => {
      closed = true
      clearTimeout(timer)
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(response)?.[1] ?? 0)
      resolve({ response, status, closedAfterMs: Date.now() - started })
    })
    socket.on("connect", async () => {
      for (const [i, part] of parts.entries()) {
        if (closed) return
        if (i > 0 && options.pauseMs) await new Promise((r) => setTimeout(r, options.pauseMs))
        if (!closed) socket.write(part)
      }
    })
  })
