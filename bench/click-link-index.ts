/**
 * A micro-benchmark of the flusher's index of an event's links (FirstSeen,
 * apps/redirector/ClickGroup.ts) against a Map, ns a lookup, in the two shapes a round takes:
 *   - one account whose events hold 13,000 random links of a million (16,000 clicks each);
 *   - 2,000 accounts a round, each with 8 clicks on 5 links (a new index per account).
 *
 *   node --import tsx bench/click-link-index.ts
 */
import { FirstSeen } from "../apps/redirector/ClickGroup.js"

let x = 0x2545f491
const keys = Array.from({ length: 1 << 20 }, () => {
  x ^= x << 13
  x ^= x >>> 17
  x ^= x << 5
  return (x >>> 0) % 1_000_000
})

interface Index {
  indexOf(n: number): number
  clear(): void
}
class MapIndex implements Index {
  private readonly m = new Map<number, number>()
  indexOf(n: number) {
    let i = this.m.get(n)
    if (i === undefined) {
      i = this.m.size
      this.m.set(n, i)
    }
    return i
  }
  clear() {
    this.m.clear()
  }
}

/** ns a lookup of `run` (which says how many it made), the median of 5 runs after a warm-up. */
const time = (run: () => number) => {
  const runs: Array<number> = []
  for (let r = 0; r < 6; r++) {
    const t = process.cpuUsage()
    const n = run()
    const u = process.cpuUsage(t)
    if (r > 0) runs.push(((u.user + u.system) * 1000) / n)
  }
  return runs.sort((a, b) => a - b)[2]!.toFixed(1)
}

let sink = 0
const oneAccount = (make: () => Index) => () => {
  const index = make()
  let k = 0
  for (let e = 0; e < 40; e++) {
    index.clear()
    for (let i = 0; i < 16_000; i++) sink += index.indexOf((keys[k++ & 0xfffff]! % 13_000) + e * 13_000)
  }
  return 40 * 16_000
}
const manyAccounts = (make: () => Index) => () => {
  let k = 0
  for (let r = 0; r < 50; r++)
    for (let g = 0; g < 2000; g++) {
      const index = make()
      for (let i = 0; i < 8; i++) sink += index.indexOf(keys[k++ & 0xfffff]! % 5)
    }
  return 50 * 2000 * 8
}

for (const [name, make] of [
  ["FirstSeen", () => new FirstSeen()],
  ["Map", () => new MapIndex()]
] as const) {
  process.stdout.write(
    `${name}: one account, random links of a million ${time(oneAccount(make))} ns a lookup; ` +
      `2,000 accounts of 5 links ${time(manyAccounts(make))} ns a lookup\n`
  )
}
if (sink < 0) process.stdout.write("unreachable\n")
