import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import * as http from "node:http"
import * as net from "node:net"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { waitFor } from "./waitFor.js"

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")

/**
 * The redirector's peer-address cache (infra/http/peer-address.c), built as scripts/redirector.sh
 * builds it: its path, or undefined where there is no C compiler (the launcher then starts
 * without it, and the suites that check it are skipped by name).
 */
export const peerAddressLibrary: string | undefined = (() => {
  try {
    return execFileSync("sh", ["scripts/peer-address.sh"], { cwd: ROOT, encoding: "utf8", stdio: "pipe" }).trim()
  } catch {
    return undefined
  }
})()

/** A redirector started as `npm run start:redirector` starts it: its own process. */
export interface RedirectorProcess {
  readonly child: ChildProcess
  readonly port: number
  /** Everything it wrote to stdout and stderr so far. */
  readonly output: () => string
  /** Resolves with the exit code (or signal) once it has exited. */
  readonly exited: Promise<number | NodeJS.Signals>
}

/** A TCP port nothing listens on right now. */
export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port
      server.close(() => resolve(port))
    })
  })

export const spawnRedirector = (env: Record<string, string>): RedirectorProcess => {
  // Its launcher execs node: the child's pid is the redirector's, for kill -9.
  const child = spawn("sh", ["scripts/redirector.sh"], {
    cwd: ROOT,
    env: { ...process.env, KAFKA_BROKERS: "", LOG_LEVEL: "Info", ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  child.stdout!.on("data", (chunk) => (output += chunk))
  child.stderr!.on("data", (chunk) => (output += chunk))
  const exited = new Promise<number | NodeJS.Signals>((resolve) =>
    child.once("exit", (code, signal) => resolve(code ?? signal ?? -1))
  )
  return { child, port: Number(env.SHORT_PORT), output: () => output, exited }
}

/** One GET (or HEAD) on a fresh or kept-alive connection: the status, or an error. */
export const request = (url: string, options: { agent?: http.Agent; method?: string } = {}) =>
  new Promise<{ status: number; location: string | undefined }>((resolve, reject) => {
    const req = http.request(url, { agent: options.agent ?? false, method: options.method ?? "GET" }, (res) => {
      res.resume()
      res.on("end", () => resolve({ status: res.statusCode ?? 0, location: res.headers.location }))
      res.on("error", reject)
    })
    req.on("error", reject)
    req.setTimeout(30_000, () => req.destroy(new Error("timeout")))
    req.end()
  })

/** Waits until the process answers /readyz with 200 (fails at once if it exits). */
export const waitReady = async (p: RedirectorProcess, timeoutMs = 120_000) => {
  let exit: number | NodeJS.Signals | undefined
  void p.exited.then((code) => (exit = code))
  await waitFor(
    async () => {
      if (exit !== undefined) throw new Error(`the redirector exited (${exit}) during start-up:\n${p.output()}`)
      // Its own log too: on a shared port (REDIRECTOR_REUSE_PORT) /readyz may be answered by another process.
      if (!p.output().includes("slug table loaded")) return false
      return (await request(`http://127.0.0.1:${p.port}/readyz`).catch(() => ({ status: 0 }))).status === 200
    },
    { timeoutMs, intervalMs: 100, message: () => `the redirector on ${p.port} to be ready:\n${p.output()}` }
  )
}

/** Stops a process we started and waits for it to be gone. */
export const stop = async (p: RedirectorProcess, signal: NodeJS.Signals = "SIGTERM") => {
  if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill(signal)
  return p.exited
}

/**
 * GETs of `url` on `connections` kept-alive connections until `stop()` says so: the number
 * that got their 302 (a response that arrived whole), and the number sent.
 */
export const burst = (url: string, connections: number) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections })
  let redirected = 0
  let sent = 0
  let stopping = false
  const workers = Array.from({ length: connections }, async () => {
    while (!stopping) {
      sent++
      try {
        const res = await request(url, { agent })
        if (res.status === 302) redirected++
      } catch {
        if (stopping) return
        await new Promise((r) => setImmediate(r))
      }
    }
  })
  return {
    redirected: () => redirected,
    sent: () => sent,
    stop: async () => {
      stopping = true
      await Promise.all(workers)
      agent.destroy()
      return { redirected, sent }
    }
  }
}
