/**
 * Micro-benchmark of the redirector's per-click memos (apps/redirector/ClickClassify.ts):
 * classifying the user agent and the Referer of a click, as the click capture does for
 * every click. Two workloads: all hits (a working set below the bound, the common case) and
 * churn (more distinct inputs than the bound, so entries are evicted). Each runs the memos
 * of ClickClassify.ts (over infra/BoundedCache.ts) and, as the reference, the insertion-order
 * Map they replaced, in alternating rounds (the machine is shared: compare within a run).
 * It reports the median time per click and the minor GCs (scavenges) during the rounds: a
 * hit that allocates nothing leaves the scavenge count near zero.
 *
 *   node --import tsx bench/click-classify.ts
 */
import { PerformanceObserver } from "node:perf_hooks"
import {
  cachedReferrerHost,
  cachedUserAgentParser,
  parseUserAgent,
  referrerHost,
  type UserAgentClass
} from "../apps/redirector/ClickClassify.js"

/** The memo before the one cache: a Map in insertion order, the oldest entry dropped when full. */
const insertionOrderMemo = <V>(compute: (input: string) => V, maxEntries = 10_000) => {
  const cache = new Map<string, V>()
  return (input: string): V => {
    let hit = cache.get(input)
    if (hit === undefined) {
      hit = compute(input)
      if (cache.size >= maxEntries) cache.delete(cache.keys().next().value!)
      cache.set(input, hit)
    }
    return hit
  }
}

const MEMOS = {
  BoundedCache: () => ({ classify: cachedUserAgentParser(), hostOf: cachedReferrerHost() }),
  "Map (before)": () => {
    const referrerMemo = insertionOrderMemo(referrerHost)
    return {
      classify: insertionOrderMemo<UserAgentClass>(parseUserAgent),
      hostOf: (referer: string) => (referer === "" ? null : referrerMemo(referer))
    }
  }
}

const BROWSERS = [
  "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36",
  "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1",
  "Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0",
  "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36"
]

const inputs = (distinct: number) => {
  const agents: Array<string> = []
  const referers: Array<string> = []
  for (let i = 0; i < distinct; i++) {
    agents.push(`${BROWSERS[i % BROWSERS.length]} build/${i}`)
    referers.push(i % 5 === 0 ? "" : `https://site${i}.example.com/page/${i}?q=${i}`)
  }
  return { agents, referers }
}

// GC entries are queued when they happen and can be taken after a turn of the event loop.
const gcs = new PerformanceObserver(() => {})
gcs.observe({ entryTypes: ["gc"] })
/** Minor GCs since the last call. */
const scavengesSince = () =>
  gcs.takeRecords().filter((entry) => (entry as { detail?: { kind?: number } }).detail?.kind === 1).length

const round = (memo: keyof typeof MEMOS, distinct: number, clicks: number) => {
  const { classify, hostOf } = MEMOS[memo]()
  const { agents, referers } = inputs(distinct)
  // Warm up: every input seen once (the parse itself is not what is measured).
  for (let i = 0; i < distinct; i++) {
    classify(agents[i]!)
    hostOf(referers[i]!)
  }
  let sink = 0
  const start = process.hrtime.bigint()
  for (let i = 0; i < clicks; i++) {
    // A stride through the inputs, not a scan: a recently used entry is not always the next.
    const k = (i * 7919) % distinct
    if (classify(agents[k]!).bot) sink++
    if (hostOf(referers[k]!) !== null) sink++
  }
  return { ns: Number(process.hrtime.bigint() - start) / clicks, sink }
}

const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const nextTick = () => new Promise((resolve) => setImmediate(resolve))

const workload = async (name: string, distinct: number, clicks: number, rounds: number) => {
  const times: Record<string, Array<number>> = { BoundedCache: [], "Map (before)": [] }
  const scavenges: Record<string, number> = { BoundedCache: 0, "Map (before)": 0 }
  for (let r = 0; r < rounds; r++) {
    for (const memo of Object.keys(MEMOS) as Array<keyof typeof MEMOS>) {
      await nextTick()
      scavengesSince()
      times[memo]!.push(round(memo, distinct, clicks).ns)
      await nextTick()
      scavenges[memo]! += scavengesSince()
    }
  }
  for (const memo of Object.keys(times)) {
    console.log(
      `${name}, ${memo}: median ${median(times[memo]!).toFixed(1)} ns/click over ${rounds} rounds of ${clicks} clicks, ${scavenges[memo]} scavenges`
    )
  }
}

await workload("hits (2,000 distinct inputs)", 2_000, 2_000_000, 7)
await workload("churn (12,000 distinct inputs)", 12_000, 50_000, 3)
