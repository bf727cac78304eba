/**
 * The request path's table access with a million links and a random path per lookup: the
 * slug table's records against a map of one object per link (the layout before them),
 * CPU time per lookup, five rounds each, interleaved.
 *
 *   node --max-semi-space-size=32 --import tsx bench/slug-table-lookup.ts [COUNT]
 */
import { SlugTable } from "../apps/redirector/SlugTable.js"

interface Entry {
  readonly location: string
  readonly linkId: string
  readonly accountId: string
  readonly expiresAt: number
}
const count = Number(process.argv[2] ?? 1_000_000)
const LOOKUPS = 4_000_000
const flat = (s: string) => Buffer.from(s).toString()
const table = new SlugTable()
const objects = new Map<string, Entry>()
for (let n = 1; n <= count; n++) {
  const state = {
    id: flat(`link_scale${n}`),
    accountId: flat("acct_0123456789abcdefghijkl"),
    slug: flat(`s${n}`),
    destinationUrl: flat(`https://example.com/scale/${n}`),
    active: true,
    utm: null,
    expiresAt: null,
    updatedAt: 1
  }
  table.apply(state)
  objects.set(flat(`/s${n}`), {
    location: state.destinationUrl,
    linkId: state.id,
    accountId: state.accountId,
    expiresAt: Number.POSITIVE_INFINITY
  })
}
// Each lookup builds its path anew, as a request gives a fresh string (no hash cached yet).
const slugs = Array.from({ length: 1 << 16 }, () => String(1 + Math.floor(Math.random() * count)))
let sink = 0
// What a redirect reads: the Location, and for click capture the link (its id, or its number in the table) and account.
const use = (location: string | Uint8Array, link: number, accountId: string) => {
  sink += location.length + link + accountId.length
}
const viaObjects = () => {
  const now = Date.now()
  for (let i = 0; i < LOOKUPS; i++) {
    const entry = objects.get(`/s${slugs[i & 65535]}`)
    if (entry !== undefined && now <= entry.expiresAt) use(entry.location, entry.linkId.length, entry.accountId)
  }
}
const viaColumns = () => {
  const now = Date.now()
  for (let i = 0; i < LOOKUPS; i++) {
    const row = table.rowOf(`/s${slugs[i & 65535]}`)
    if (row >= 0 && now <= table.expiresAt(row)) use(table.location(row), table.linkNumber(row), table.accountId(row))
  }
}
for (let round = 1; round <= 5; round++) {
  for (const [name, run] of [
    ["objects", viaObjects],
    ["records", viaColumns]
  ] as const) {
    const cpu = process.cpuUsage()
    run()
    const used = process.cpuUsage(cpu)
    console.log(`round ${round} ${name} ${(((used.user + used.system) * 1000) / LOOKUPS).toFixed(0)} ns CPU per lookup`)
  }
}
if (sink === 0) console.log("nothing found")
