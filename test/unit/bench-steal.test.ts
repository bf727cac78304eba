import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "bench-steal-"))
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

/** A /proc/stat with nothing stolen so far (steal: the eighth number). */
const STAT = "cpu  1000 0 500 9000 0 0 10 0 0 0\ncpu0 500 0 250 4500 0 0 5 0 0 0\n"

/**
 * Slices of 2 s on a machine of 2 cores at 100 ticks a second (400 ticks each): bench/lib.sh's
 * steady_slice runs each, as the benchmarks' slice loops do, and every take of it (the command
 * it runs) has the host steal the next of the given ticks. Prints the takes each slice needed,
 * then steal_json.
 */
const run = (stolen: ReadonlyArray<number>, env: Record<string, string> = {}) => {
  const file = path.join(dir, "stat")
  fs.writeFileSync(file, STAT)
  const script = `
    set -euo pipefail
    . bench/lib.sh
    HZ=100 CPUS=2
    STOLEN=(${stolen.join(" ")}) next=0 total=0 takes=0
    take() {
      total=$((total + STOLEN[next])) next=$((next + 1)) takes=$((takes + 1))
      awk -v t="$total" 'NR == 1 { $9 = t } { print }' "$PROC_STAT" > "$PROC_STAT.new"
      mv "$PROC_STAT.new" "$PROC_STAT"
    }
    while [ "$next" -lt "\${#STOLEN[@]}" ]; do
      takes=0
      steady_slice phase 2 take > /dev/null
      echo "$takes"
    done
    steal_json`
  return execFileSync("bash", ["-c", script], {
    cwd: ROOT,
    // No wait for a second without steal before a retake (steal_settle): the file stays as it is.
    env: { ...process.env, BENCH_PROC_STAT: file, BENCH_STEAL_WAIT: "0", ...env },
    encoding: "utf8"
  })
    .trim()
    .split("\n")
}

describe("the benchmarks' slices the host stole from (bench/lib.sh, steady_slice)", () => {
  it("keeps a slice the host took at most 2% of the machine from, and measures one it took more from again", () => {
    // 8 of 400 ticks is 2%: kept; 9 is over, and the slice's second take (0) is kept.
    expect(run([0, 8, 9, 0])).toEqual(["1", "1", "2", '{"steal_permil":6,"steal_retaken":1,"steal_over":0}'])
  })

  it("keeps the last take after BENCH_STEAL_RETAKES and counts it as over the limit", () => {
    expect(run([100, 100, 100], { BENCH_STEAL_RETAKES: "2" })).toEqual([
      "3",
      '{"steal_permil":250,"steal_retaken":2,"steal_over":1}'
    ])
  })

  it("follows BENCH_STEAL_LIMIT, in per mille of the machine's time", () => {
    expect(run([9, 40, 41, 0], { BENCH_STEAL_LIMIT: "100" })).toEqual([
      "1",
      "1",
      "2",
      '{"steal_permil":40,"steal_retaken":1,"steal_over":0}'
    ])
  })
})

describe("a round's slices in turns (bench/lib.sh, slices_turns)", () => {
  it("takes the phases in the first order in odd slices and in the second in even ones, then closes the round in the first", () => {
    const script = `
      set -euo pipefail
      . bench/lib.sh
      SLICES=3
      measure_slice() { echo "slice $1"; }
      slices_round() { echo "round $*"; }
      slices_turns 7 "a b c" "c a b"`
    const lines = execFileSync("bash", ["-c", script], { cwd: ROOT, encoding: "utf8" }).trim().split("\n")
    expect(lines).toEqual([
      "slice a",
      "slice b",
      "slice c",
      "slice c",
      "slice a",
      "slice b",
      "slice a",
      "slice b",
      "slice c",
      "round 7 a b c"
    ])
  })
})

describe("a measured run with the servers not measured stopped (bench/lib.sh, ticks_of_run)", () => {
  it("stops the other processes during the command only, and counts each one's ticks around it, the command's own apart", () => {
    // The server: a shell spinning (its tree: it and its spinning child); the service: a sleep
    // (its ticks stay 0); the command: a second of a process of its own spinning beside it.
    const script = `
      set -euo pipefail
      . bench/lib.sh
      sleep 60 & other=$!
      sleep 60 & ALL_PID=$!
      bash -c 'while :; do :; done & wait' & spinner=$!
      # Whatever happens: none left behind, the stopped one included.
      trap 'kill -CONT "$other"; pkill -P "$spinner"; kill "$other" "$ALL_PID" "$spinner"' EXIT
      # The command's own process: a second of spinning too (its ticks the children's).
      during() { ps -o stat= -p "$other" | cut -c1; timeout 1 bash -c 'while :; do :; done' || true; }
      start=$(date +%s%N)
      ticks_of_run "$spinner" "$other" during
      wall_ms=$((($(date +%s%N) - start) / 1000000))
      echo "after $(ps -o stat= -p "$other" | cut -c1)"
      echo "$server $service $busy $(getconf CLK_TCK) $wall_ms $children $kthreads $unowned $children_system"`
    const lines = execFileSync("bash", ["-c", script], { cwd: ROOT, encoding: "utf8" }).trim().split("\n")
    expect(lines.slice(0, 2)).toEqual(["T", "after S"])
    const [server, service, busy, hz, wallMs, children, kthreads, unowned, childrenSystem] = lines[2]!
      .split(" ")
      .map(Number)
    // A second of one spinning process, counted from its child (the tree): at least a tenth of
    // it on the busiest machine, at most one core's ticks over the call's time (and the tick
    // either side). The machine counted it too; the sleeping service used none.
    expect(server).toBeGreaterThanOrEqual(hz! / 10)
    expect(server).toBeLessThanOrEqual((wallMs! / 1000) * hz! + 2)
    expect(busy).toBeGreaterThanOrEqual(server! / 2)
    expect(service).toBeLessThanOrEqual(1)
    // The command's spinner, ended by the time it returned, is the children's, not the server's; the
    // machine's busy ticks hold both, and what no process alive at both ends and no ended child
    // took is a share of them (a tick's rounding either way on each of the reads).
    expect(children).toBeGreaterThanOrEqual(hz! / 10)
    expect(children).toBeLessThanOrEqual((wallMs! / 1000) * hz! + 2)
    // It spun in user space: little of its time was the kernel's.
    expect(childrenSystem).toBeGreaterThanOrEqual(0)
    expect(childrenSystem).toBeLessThan(children! / 2)
    expect(busy).toBeGreaterThanOrEqual((server! + children!) / 2)
    expect(kthreads).toBeGreaterThanOrEqual(0)
    expect(Math.abs(unowned!)).toBeLessThan(busy!)
  })
})

describe("the machine's processes' ticks (bench/lib.sh, task_ticks)", () => {
  it("reads them while processes end between listing and reading, without failing the benchmark's set -e", () => {
    // Short-lived processes ending all the time: some are gone by the time cat opens their
    // stat. The benchmark runs with set -euo pipefail, where a failed read ended it.
    const script = `
      set -euo pipefail
      . bench/lib.sh
      for i in $(seq 50); do (sleep 0.005 &); sleep 0.003 & t=$(task_ticks); done
      wait
      echo "$t"`
    const [kernel, all] = execFileSync("bash", ["-c", script], { cwd: ROOT, encoding: "utf8" })
      .trim()
      .split(" ")
      .map(Number)
    expect(kernel).toBeGreaterThanOrEqual(0)
    expect(all).toBeGreaterThan(kernel!)
  })
})

describe("a phase's slices summed (bench/lib.sh, slice_add and slice_json)", () => {
  it("sums each tick field of its slices in the order slice_add takes them, and counts a field not given as 0", () => {
    const script = `
      set -euo pipefail
      . bench/lib.sh
      TMP=$(mktemp -d) HZ=100
      trap 'rm -rf "$TMP"' EXIT
      echo 'WRK_RESULT {"requests":1000,"duration_s":2.0,"p99_ms":1.5,"non3xx":0,"socket_errors":0}' > "$TMP/wrk.txt"
      slices_reset
      slice_add a 10 2 30 5 1 0 3 4
      slice_add a 11 3 31 6 2 -1 4 5
      slice_add b 7 1 9
      slice_json a; echo; slice_json b`
    const [a, b] = execFileSync("bash", ["-c", script], { cwd: ROOT, encoding: "utf8" })
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l))
    expect(a).toMatchObject({ requests: 2000, rps: 500, slices_rps: [500, 500], hz: 100 })
    expect(a).toMatchObject({ server_ticks: 21, service_ticks: 5, busy_ticks: 61, wrk_ticks: 11, kthreads_ticks: 3 })
    expect(a).toMatchObject({ unowned_ticks: -1, irq_ticks: 7, wrk_system_ticks: 9 })
    expect(b).toMatchObject({ server_ticks: 7, service_ticks: 1, busy_ticks: 9, wrk_ticks: 0, wrk_system_ticks: 0 })
  })
})
