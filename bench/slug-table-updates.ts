/**
 * What updates cost the slug table: builds COUNT links (default 1,000,000; its buckets double
 * as it goes, each record placed again), then gives every link a Location too long for its
 * bucket, then a longer one still, so every record's bytes go to the arena, then move to its
 * end, and the arena is resized and then compacted. Prints the arena's bytes after each step
 * and the longest single `apply` of each round: the pause a redirector takes when one update
 * lands on the buckets' growth, the arena's resize or a compaction (every other update is
 * written in place or appended).
 *
 *   node --import tsx bench/slug-table-updates.ts [COUNT]
 */
import { type LinkState, SlugTable } from "../apps/redirector/SlugTable.js"

const count = Number(process.argv[2] ?? 1_000_000)
const state = (n: number, path: string, updatedAt: number): LinkState => ({
  id: `link_${n}`,
  accountId: "acct_bench",
  slug: `s${n}`,
  destinationUrl: `https://example.com/${path}/${n}`,
  active: true,
  utm: null,
  expiresAt: null,
  updatedAt
})
const table = new SlugTable()
const round = (path: string, updatedAt: number) => {
  let longest = 0
  const started = performance.now()
  for (let n = 0; n < count; n++) {
    const t = performance.now()
    table.apply(state(n, path, updatedAt))
    longest = Math.max(longest, performance.now() - t)
  }
  return {
    ms: Math.round(performance.now() - started),
    longest_apply_ms: Number(longest.toFixed(1)),
    arena_mb: Math.round(table.arenaBytes / 1048576)
  }
}
const out = {
  links: count,
  load: round("scale", 1),
  longer: round(`scale/${"l".repeat(100)}`, 2),
  longer_still: round(`scale/${"l".repeat(100)}/still`, 3)
}
if (table.entryOf(`/s${count - 1}`)?.location !== `https://example.com/scale/${"l".repeat(100)}/still/${count - 1}`) {
  process.stderr.write("bench/slug-table-updates.ts: the last link does not answer its last state\n")
  process.exit(1)
}
console.log(JSON.stringify(out))
