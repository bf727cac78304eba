import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { freePorts, postgresPid } from "../support/service.js"

/**
 * The README's quick start, run as a reader pastes it: the fenced block after
 * `<!-- quickstart -->`, with only the ports (free ones instead of 8080 and 8081) and the
 * two files it writes (into a temporary directory) changed.
 */
const root = path.resolve(import.meta.dirname, "../..")
const work = fs.mkdtempSync(path.join(os.tmpdir(), "shortlinks-quickstart-"))
const dataDir = path.join(work, "data")

const quickStartBlock = (readme: string): string => {
  const marker = readme.indexOf("<!-- quickstart -->")
  if (marker < 0) throw new Error("README.md has no <!-- quickstart --> block")
  const match = /```sh\n([\s\S]*?)\n```/.exec(readme.slice(marker))
  if (match === null) throw new Error("no ```sh block after <!-- quickstart -->")
  return match[1]!
}

afterAll(() => {
  const left = postgresPid(dataDir)
  if (left !== undefined) process.kill(left, "SIGINT")
  fs.rmSync(work, { recursive: true, force: true })
})

describe("README quick start", () => {
  it("runs pasted as is: a 302 with the UTM keys, one click by day in the analytics, 404 once disabled, a clean stop", async () => {
    const ports = await freePorts()
    const block = quickStartBlock(fs.readFileSync(path.join(root, "README.md"), "utf8"))
    expect(block).toContain("npm start")
    const log = path.join(work, "shortlinks.log")
    const script = block
      .replaceAll("http://localhost:8080", `http://127.0.0.1:${ports.api}`)
      .replaceAll("shortlinks.log", log)
      .replaceAll("qr.svg", path.join(work, "qr.svg"))
    const env = {
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
      DATABASE_URL: "",
      LOG_LEVEL: "info"
    }
    // Its own process group: on a deadline the shell and the service it started are stopped together.
    const shell = spawn("bash", ["-e", "-c", script], { cwd: root, env, detached: true })
    let stdout = ""
    let stderr = ""
    shell.stdout.on("data", (c) => (stdout += c))
    shell.stderr.on("data", (c) => (stderr += c))
    const deadline = setTimeout(() => process.kill(-shell.pid!, "SIGTERM"), 400_000)
    const code = await new Promise<number | null>((resolve) => shell.once("exit", resolve))
    clearTimeout(deadline)
    const context = `${stdout}\n${stderr}\n${fs.existsSync(log) ? fs.readFileSync(log, "utf8").slice(-3000) : ""}`
    expect(code, context).toBe(0)
    expect(stdout, context).toContain(
      "302 https://example.com/hello?utm_source=newsletter&utm_medium=email&utm_campaign=launch"
    )
    expect(stdout, context).toMatch(/clicks: 1,/)
    expect(stdout.trim().split("\n").at(-1), context).toBe("404")
    expect(fs.readFileSync(path.join(work, "qr.svg"), "utf8")).toContain("<svg")
    const lines = fs.readFileSync(log, "utf8").trim().split("\n")
    // npm's own two lines ("> shortlinks@1.0.0 start", the command) come first.
    const json = lines.filter((l) => l.startsWith("{")).map((l) => JSON.parse(l))
    expect(json.at(-1).message).toMatch(/^stopped: /)
    expect(postgresPid(dataDir)).toBeUndefined()
  }, 420_000)
})
