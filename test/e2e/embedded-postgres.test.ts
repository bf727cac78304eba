import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect, Exit, Scope } from "effect"
import pg from "pg"
import { describe, expect, it } from "vitest"
import { acquireEmbeddedPostgres } from "../../infra/EmbeddedPostgres.js"

const isRoot = process.getuid?.() === 0

describe("embedded PostgreSQL", () => {
  it.skipIf(!isRoot)(
    "as root, starts on a DATA_DIR below a private (700) directory, stops cleanly, and keeps its data (needs root)",
    async () => {
      const privateDir = fs.mkdtempSync(path.join(os.tmpdir(), "shortlinks-private-"))
      fs.chmodSync(privateDir, 0o700)
      const dataDir = path.join(privateDir, "data")
      const run = async <A>(f: (client: pg.Client) => Promise<A>) => {
        const scope = Effect.runSync(Scope.make())
        try {
          const conn = await Effect.runPromise(Scope.extend(acquireEmbeddedPostgres(dataDir), scope))
          expect(conn.owned).toBe(true)
          const client = new pg.Client({ ...conn, user: conn.username })
          await client.connect()
          try {
            return await f(client)
          } finally {
            await client.end()
          }
        } finally {
          await Effect.runPromise(Scope.close(scope, Exit.void))
        }
      }
      try {
        await run((c) => c.query("CREATE TABLE kept (v text); INSERT INTO kept VALUES ('acknowledged')"))
        expect(fs.existsSync(path.join(dataDir, "postgres", "postmaster.pid"))).toBe(false)
        expect(fs.statSync(privateDir).mode & 0o077).toBe(0o001)
        const rows = await run((c) => c.query("SELECT v FROM kept"))
        expect(rows.rows).toEqual([{ v: "acknowledged" }])
      } finally {
        fs.rmSync(privateDir, { recursive: true, force: true })
      }
    },
    120_000
  )
})
