/**
 * The slug table's load on its own: every link of the database DATABASE_URL names (or the
 * embedded PostgreSQL of DATA_DIR) through the redirector's binary COPY into a fresh table, then
 * the line the redirector logs and one JSON line. With `--cpu-prof` it shows where the load's
 * CPU goes (bench/cpu-profile-summary.ts), without the event log or the HTTP server.
 *
 *   DATABASE_URL=… node --expose-gc --import tsx bench/slug-table-load.ts
 *   (seed first: node --import tsx bench/seed-links.ts ACCOUNT_ID 1000000)
 */
import { Effect, Layer } from "effect"
import { loadLinks, SlugTable } from "../apps/redirector/SlugTable.js"
import { AppConfig } from "../infra/AppConfig.js"
import { DatabaseLive } from "../infra/Database.js"
import { LinkRepoLive } from "../infra/postgres/Links.js"

const gc = (globalThis as { gc?: () => void }).gc
const mb = (bytes: number) => Math.round(bytes / 1048576)

const load = Effect.gen(function* () {
  const table = new SlugTable()
  const started = Date.now()
  const cpu = process.cpuUsage()
  const loaded = yield* loadLinks(table)
  const used = process.cpuUsage(cpu)
  const out = {
    links: loaded,
    active: table.size,
    load_ms: Date.now() - started,
    load_cpu_ms: Math.round((used.user + used.system) / 1000),
    rss_mb: mb(process.memoryUsage.rss()),
    rss_after_gc_mb: 0,
    heap_after_gc_mb: 0
  }
  gc?.()
  out.rss_after_gc_mb = mb(process.memoryUsage.rss())
  out.heap_after_gc_mb = mb(process.memoryUsage().heapUsed)
  process.stdout.write(`${JSON.stringify(out)}\n`)
})

Effect.runPromise(
  Effect.provide(load, LinkRepoLive.pipe(Layer.provide(DatabaseLive), Layer.provide(AppConfig.layer)))
).catch((error) => {
  process.stderr.write(`bench/slug-table-load.ts: ${error}\n`)
  process.exit(1)
})
