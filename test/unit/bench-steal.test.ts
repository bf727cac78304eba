import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "bench-steal-"))
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

/** A /proc/stat whose first line says `steal` ticks were stolen so far. */
const stat = (steal: number) => `cpu  1000 0 500 9000 0 0 10 ${steal} 0 0\ncpu0 500 0 250 4500 0 0 5 0 0 0\n`

/**
 * Slices of 2 s on a machine of 2 cores at 100 ticks a second (400 ticks each), the host
 * stealing the given ticks during each: bench/lib.sh's steal_begin and steal_retake around
 * each, as the benchmarks' slice loops call them. Prints each slice's verdict, then the counters.
 */
const run = (stolen: ReadonlyArray<number>, env: Record<string, string> = {}) => {
  const file = path.join(dir, "stat")
  fs.writeFileSync(file, stat(0))
  const script = `
    set -euo pipefail
    . bench/lib.sh
    HZ=100 CPUS=2
    total=0 take=1
    for s in ${stolen.join(" ")}; do
      steal_begin
      total=$((total + s)); printf '%s' "$(awk -v t="$total" 'NR == 1 { $9 = t } { print }' "$PROC_STAT")" > "$PROC_STAT.new"
      mv "$PROC_STAT.new" "$PROC_STAT"
      if steal_retake phase "$take" 2 > /dev/null; then echo again; take=$((take + 1)); else echo kept; take=1; fi
    done
    echo "$STEAL_RETAKEN $STEAL_OVER $STEAL_KEPT_PERMIL"`
  return execFileSync("bash", ["-c", script], {
    cwd: ROOT,
    // No wait for a second without steal before a retake (steal_settle): the file stays as it is.
    env: { ...process.env, BENCH_PROC_STAT: file, BENCH_STEAL_WAIT: "0", ...env },
    encoding: "utf8"
  })
    .trim()
    .split("\n")
}

describe("the benchmarks' slices the host stole from (bench/lib.sh, steal_retake)", () => {
  it("keeps a slice the host took at most 2% of the machine from, and measures one it took more from again", () => {
    // 8 of 400 ticks is 2%: kept; 9 is over.
    expect(run([0, 8, 9, 0])).toEqual(["kept", "kept", "again", "kept", "1 0 6"])
  })

  it("keeps the last take after BENCH_STEAL_RETAKES and counts it as over the limit", () => {
    expect(run([100, 100, 100], { BENCH_STEAL_RETAKES: "2" })).toEqual(["again", "again", "kept", "2 1 250"])
  })

  it("follows BENCH_STEAL_LIMIT, in per mille of the machine's time", () => {
    expect(run([9, 40, 41], { BENCH_STEAL_LIMIT: "100" })).toEqual(["kept", "kept", "again", "1 0 61"])
  })
})
