import { type ChildProcess, spawn } from "node:child_process"
import { createSocket, type Socket } from "node:dgram"
import { Resolver } from "node:dns/promises"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { waitFor } from "./waitFor.js"

const CANDIDATES = ["/usr/sbin/dnsmasq", "/usr/bin/dnsmasq", "/sbin/dnsmasq"]

/** The dnsmasq binary (Debian's package), or undefined when it is not installed. */
export const dnsmasqBinary: string | undefined = CANDIDATES.find((p) => fs.existsSync(p))

/** The zone the test server answers for itself: any other name under it is NXDOMAIN. */
export const TEST_ZONE = "test"

export interface TestDns {
  /** `127.0.0.1:port`, for DNS_SERVERS. */
  readonly server: string
  /** Replaces the TXT records (name -> values) and restarts the server with them. */
  readonly setTxt: (records: Readonly<Record<string, ReadonlyArray<string>>>) => Promise<void>
  /** A zone whose lookups are forwarded to a server that never answers: every name in it times out. */
  readonly silentZone: string
  readonly stop: () => Promise<void>
}

const udpFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = createSocket("udp4")
    s.once("error", () => resolve(false))
    s.bind(port, "127.0.0.1", () => s.close(() => resolve(true)))
  })

const tcpFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const server = net.createServer()
    server.once("error", () => resolve(false))
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)))
  })

/**
 * A port free for both UDP and TCP (dnsmasq binds both), below Linux's ephemeral range
 * (32768 and up): the ports other tests get from the kernel (`listen(0)`, outgoing
 * connections) never land there, so nobody takes it while dnsmasq restarts with new records.
 */
const freeDnsPort = async () => {
  for (let i = 0; i < 500; i++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000)
    if ((await udpFree(port)) && (await tcpFree(port))) return port
  }
  throw new Error("no free port for dnsmasq between 20000 and 32000")
}

const quote = (v: string) => `"${v.replace(/["\\]/g, "")}"`

/**
 * A real DNS server for domain verification: Debian's dnsmasq on a high loopback port, with
 * the TXT records the test sets (a change restarts it with a new config: it starts in
 * milliseconds). Names under `.test` it does not know are NXDOMAIN; names under
 * `silentZone` are forwarded to a UDP socket that never answers (lookups time out).
 */
export const startTestDns = async (): Promise<TestDns> => {
  if (dnsmasqBinary === undefined) throw new Error("dnsmasq is not installed")
  fs.mkdirSync(path.join(process.cwd(), ".tmp"), { recursive: true })
  const dir = fs.mkdtempSync(path.join(process.cwd(), ".tmp", "dnsmasq-"))
  const silent: Socket = createSocket("udp4")
  await new Promise<void>((resolve) => silent.bind(0, "127.0.0.1", resolve))
  const silentPort = silent.address().port
  let port = await freeDnsPort()
  const silentZone = "silent.test"
  let child: ChildProcess | undefined
  let output = ""

  const stopChild = async () => {
    const c = child
    child = undefined
    if (c === undefined || c.exitCode !== null) return
    const exited = new Promise<void>((resolve) => c.once("exit", () => resolve()))
    c.kill("SIGTERM")
    await exited
  }

  const start = async (records: Readonly<Record<string, ReadonlyArray<string>>>) => {
    const lines = [
      `port=${port}`,
      "listen-address=127.0.0.1",
      "bind-interfaces",
      "no-resolv",
      "no-hosts",
      "no-poll",
      "cache-size=0",
      `local=/${TEST_ZONE}/`,
      `server=/${silentZone}/127.0.0.1#${silentPort}`,
      ...Object.entries(records).map(([name, values]) => `txt-record=${name},${values.map(quote).join(",")}`),
      // A record that always exists: the readiness probe below asks for it.
      `txt-record=ready.${TEST_ZONE},"up"`
    ]
    const conf = path.join(dir, "dnsmasq.conf")
    fs.writeFileSync(conf, `${lines.join("\n")}\n`)
    output = ""
    const c = spawn(dnsmasqBinary, ["--keep-in-foreground", `--conf-file=${conf}`, "--user=root", "--pid-file="], {
      stdio: ["ignore", "pipe", "pipe"]
    })
    c.stdout?.on("data", (d) => (output += String(d)))
    c.stderr?.on("data", (d) => (output += String(d)))
    child = c
    const probe = new Resolver({ timeout: 200, tries: 1 })
    probe.setServers([`127.0.0.1:${port}`])
    const state = await waitFor(
      async () => {
        if (c.exitCode !== null) return "exited"
        return (await probe.resolveTxt(`ready.${TEST_ZONE}`).catch(() => [])).length > 0 && "answering"
      },
      { timeoutMs: 60_000, message: () => `dnsmasq to answer on 127.0.0.1:${port} (${output})` }
    )
    if (state === "exited") throw new Error(`dnsmasq exited: ${output}`)
  }

  // A port taken between the check and dnsmasq's bind: another one (before anyone knows it).
  for (let attempt = 1; ; attempt++) {
    try {
      await start({})
      break
    } catch (e) {
      if (attempt >= 5 || !output.includes("Address already in use")) throw e
      await stopChild()
      port = await freeDnsPort()
    }
  }
  return {
    server: `127.0.0.1:${port}`,
    silentZone,
    setTxt: async (records) => {
      await stopChild()
      await start(records)
    },
    stop: async () => {
      await stopChild()
      silent.close()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}
