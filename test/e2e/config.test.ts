import { spawnSync } from "node:child_process"
import * as path from "node:path"
import { describe, expect, it } from "vitest"

const root = path.resolve(import.meta.dirname, "../..")

const startWith = (env: Record<string, string>) =>
  spawnSync(process.execPath, ["--import", "tsx", "apps/api/main.ts"], {
    cwd: root,
    env: { ...process.env, DATA_DIR: "/nonexistent-never-used", ...env },
    timeout: 60_000
  })

describe("configuration", () => {
  for (const [name, value] of [
    ["API_PORT", "eighty"],
    ["API_PORT", "70000"],
    ["PUBLIC_API_BASE", "http://localhost:8080/v2"],
    ["PUBLIC_SHORT_BASE", "ftp://short"],
    ["LOG_LEVEL", "loud"],
    ["PLANS", "{not json"],
    ["PLANS", '{\n  "free": {\n    "links_per_month": -1\n  }\n}'],
    ["PLANS", '{"free":{"link_per_month":5}}']
  ] as const) {
    it(`a bad ${name} (${value.replace(/\n\s*/g, " ")}) stops start-up with one line naming the variable`, () => {
      const run = startWith({ [name]: value })
      expect(run.status).toBe(1)
      const lines = run.stderr.toString().trim().split("\n")
      expect(lines).toHaveLength(1)
      expect(lines[0]).toContain(name)
      expect(lines[0]).toMatch(/^configuration error: /)
    })
  }
})
