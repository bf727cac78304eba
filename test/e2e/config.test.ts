import { spawn } from "node:child_process"
import * as path from "node:path"
import { describe, expect, it } from "vitest"

const root = path.resolve(import.meta.dirname, "../..")

/** Starts the API with these settings and collects how it ends (without blocking the test process). */
const startWith = (env: Record<string, string>) =>
  new Promise<{ status: number | null; stderr: string }>((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", "apps/api/main.ts"], {
      cwd: root,
      env: { ...process.env, DATA_DIR: "/nonexistent-never-used", ...env },
      stdio: ["ignore", "ignore", "pipe"],
      timeout: 60_000
    })
    let stderr = ""
    child.stderr.on("data", (c) => (stderr += c))
    child.on("error", reject)
    child.on("close", (status) => resolve({ status, stderr }))
  })

// Each test starts a process (bounded at 60 s above): the test's own deadline is longer.
describe("configuration", { timeout: 90_000 }, () => {
  for (const [name, value] of [
    ["API_PORT", "eighty"],
    ["API_PORT", "70000"],
    ["PUBLIC_API_BASE", "http://localhost:8080/v2"],
    ["PUBLIC_SHORT_BASE", "ftp://short"],
    ["LOG_LEVEL", "loud"],
    ["PLANS", "{not json"],
    ["PLANS", '{\n  "free": {\n    "links_per_month": -1\n  }\n}'],
    ["PLANS", '{"free":{"link_per_month":5}}'],
    ["DNS_SERVERS", "dns.google"],
    ["DNS_TIMEOUT_MS", "0"],
    ["OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"],
    ["OTEL_SERVICE_NAME", " "]
  ] as const) {
    it(`a bad ${name} (${value.replace(/\n\s*/g, " ")}) stops start-up with one line naming the variable`, async () => {
      const run = await startWith({ [name]: value })
      expect(run.status).toBe(1)
      const lines = run.stderr.trim().split("\n")
      expect(lines).toHaveLength(1)
      expect(lines[0]).toContain(name)
      expect(lines[0]).toMatch(/^configuration error: /)
    })
  }
})
