/**
 * The slug table's own memory, without PostgreSQL: builds a table from COUNT synthetic link
 * states (default 1,000,000; the shapes bench/seed-links.ts writes) in batches, as the load
 * does, and prints the heap and RSS after a full collection, before and after.
 *
 *   node --expose-gc --import tsx bench/slug-table-memory.ts [COUNT]
 *
 * Every string is a fresh flat one, as the driver decodes it from a row (a concatenation
 * would leave a rope behind and measure more than a load keeps).
 */
import { SlugTable } from "../apps/redirector/SlugTable.js"

const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) {
  process.stderr.write("run with node --expose-gc\n")
  process.exit(2)
}
const count = Number(process.argv[2] ?? 1_000_000)
const flat = (s: string) => Buffer.from(s).toString()
const mb = (bytes: number) => Math.round(bytes / 1048576)
const measure = () => {
  gc()
  gc()
  const m = process.memoryUsage()
  return { heap: m.heapUsed, rss: m.rss }
}

const before = measure()
const table = new SlugTable()
const started = performance.now()
const cpu = process.cpuUsage()
const BATCH = 10_000
for (let from = 1; from <= count; from += BATCH) {
  const rows = []
  for (let n = from; n < Math.min(from + BATCH, count + 1); n++) {
    rows.push({
      id: flat(`link_scale${n}`),
      accountId: flat("acct_0123456789abcdefghijkl"),
      slug: flat(`s${n}`),
      destinationUrl: flat(`https://example.com/scale/${n}`),
      active: true,
      utm: null,
      expiresAt: null,
      updatedAt: 1_750_000_000_000 + n
    })
  }
  for (const row of rows) table.apply(row)
}
const used = process.cpuUsage(cpu)
const ms = Math.round(performance.now() - started)
const after = measure()
const out = {
  links: count,
  active: table.size,
  build_ms: ms,
  build_cpu_ms: Math.round((used.user + used.system) / 1000),
  heap_mb: mb(after.heap - before.heap),
  rss_mb: mb(after.rss - before.rss),
  heap_bytes_per_link: Math.round((after.heap - before.heap) / count),
  total_rss_mb: mb(after.rss)
}
console.log(JSON.stringify(out))
