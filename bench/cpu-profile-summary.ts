/**
 * Where a process's CPU went: the self time of each function of a V8 CPU profile (as
 * `node --cpu-prof` writes it), largest first, as a share of the samples.
 *
 *   node --import tsx bench/cpu-profile-summary.ts FILE.cpuprofile [TOP]
 *
 * For the redirector under load: start it with `node --cpu-prof --cpu-prof-dir=DIR …`, run
 * wrk against it, stop it with SIGTERM (the profile is written at exit), summarize.
 */
import * as fs from "node:fs"

interface Node {
  readonly id: number
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number }
}
interface Profile {
  readonly nodes: ReadonlyArray<Node>
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

const [file, topText] = process.argv.slice(2)
if (file === undefined) {
  process.stderr.write("usage: node --import tsx bench/cpu-profile-summary.ts FILE.cpuprofile [TOP]\n")
  process.exit(2)
}
const profile = JSON.parse(fs.readFileSync(file, "utf8")) as Profile
const byId = new Map(profile.nodes.map((n) => [n.id, n]))
const selfUs = new Map<string, number>()
let total = 0
profile.samples.forEach((id, i) => {
  const node = byId.get(id)!
  const f = node.callFrame
  const where = f.url === "" ? "" : ` ${f.url.replace(/^.*\/(?=[^/]+\/[^/]+$)/, "")}:${f.lineNumber + 1}`
  const key = `${f.functionName || "(anonymous)"}${where}`
  const dt = Math.max(0, profile.timeDeltas[i] ?? 0)
  selfUs.set(key, (selfUs.get(key) ?? 0) + dt)
  total += dt
})
const rows = [...selfUs.entries()].sort((a, b) => b[1] - a[1]).slice(0, Number(topText ?? 30))
process.stdout.write(`${(total / 1e6).toFixed(2)} s sampled\n`)
for (const [key, us] of rows) {
  process.stdout.write(
    `${((100 * us) / total).toFixed(1).padStart(5)}%  ${(us / 1e3).toFixed(0).padStart(7)} ms  ${key}\n`
  )
}
