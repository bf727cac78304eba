#!/usr/bin/env bash
# The redirector of this working tree against the one of a git ref, in ONE run on this
# machine: a change to the request path measured against what it changes, side by side.
#   - copies the ref's files (`git archive`, default HEAD) into a directory of its own, which
#     builds its own bundle and preload library (scripts/redirector.sh) on start;
#   - seeds BENCH_LINKS links (default 1,000,000, every slug of one width: bench/seed-links.ts)
#     and starts both redirectors over them, click capture on;
#   - phases: `tree` and `ref` (a random slug of all of them per request, bench/redirect.lua
#     with BENCH_RANDOM) and `tree-one` and `ref-one` (the same two processes, always /s1);
#     BENCH_ROUNDS rounds, in each every phase in BENCH_SLICES slices taken in turns (the two
#     processes alternating all along), the other redirector stopped meanwhile, and a slice
#     the host stole from measured again (bench/lib.sh, steady_slice);
#   - prints per round and as medians the tree's requests a second over the ref's (random
#     links and one link), each one's random over one link, and the CPU a request of each.
# Two runs of bench/redirect-scale.sh, one per version, differ by ±0.03 on a shared VM; two
# redirectors in turns in one run see the same machine. Its A/A runs (against HEAD, nothing
# changed) came out within 1%, so one run tells a change of more than ~2% from none on a quiet
# host, ~4% on a noisier one (docs/redirect-tier.md, "The host without PCID, profiled" and "A
# Zen 4 host that counts steal").
#
#   bash bench/redirect-ab.sh [REF]       (or: npm run bench:redirect-ab -- REF)
#
# Tunables: BENCH_LINKS, BENCH_DURATION (s per phase and round, default 10), BENCH_SLICES,
# BENCH_WARMUP (s, default 3), BENCH_FIRST_WARMUP (s per phase, default 10), BENCH_ROUNDS
# (default 3), BENCH_THREADS (default 1), BENCH_CONNECTIONS (default 64), BENCH_NICE (default
# 10), BENCH_STEAL_LIMIT, BENCH_STEAL_RETAKES, BENCH_STEAL_WAIT, BENCH_KEEP=1,
# BENCH_NODE_FLAGS (more node flags for both redirectors). The last line on stdout is one JSON
# object: {"ref", "links", "tree_vs_ref", "tree_vs_ref_one", "tree_vs_ref_slices",
# "tree_scale_vs_one", "ref_scale_vs_one", per phase "<phase>_rps" and "<phase>_cpu_us",
# "steal_permil", "steal_retaken", "steal_over"}
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BENCH_NAME=bench/redirect-ab.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
REF=${1:-HEAD}
REF_COMMIT=$(git rev-parse --verify --quiet "$REF^{commit}") || die "not a commit: $REF"
bench_start 10 3 shortlinks-bench-ab
LINKS=${BENCH_LINKS:-1000000}
[[ $LINKS =~ ^[1-9][0-9]*$ ]] || die "BENCH_LINKS must be a positive integer"
ALL_PID="" TREE_PID="" REF_PID=""

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  stop_pid "$WRK_PID" 5
  resume_all
  stop_pid "$TREE_PID" 30
  stop_pid "$REF_PID" 30
  stop_pid "$ALL_PID" 60
  bench_finish "$status" all.log tree.log ref.log
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The ref's files, with this tree's node_modules (a ref with other dependencies needs its own).
mkdir -p "$TMP/ref"
git archive "$REF_COMMIT" | tar -x -C "$TMP/ref"
ln -s "$PWD/node_modules" "$TMP/ref/node_modules"

service_env 18700
free_port TREE_PORT 18710
free_port REF_PORT 18711
log "bench: node $(node --version), $(nproc 2>/dev/null || echo '?') cpus, this tree against $REF (${REF_COMMIT:0:12}), $LINKS links, wrk -t$THREADS -c$CONNECTIONS, ${DURATION}s per phase"
start_service "$NICE"
bench_account
WIDTH=${#LINKS}
log "bench: seeding $LINKS links"
node --import tsx bench/seed-links.ts "$ACCOUNT_ID" "$LINKS" "$WIDTH" || die "seeding failed"
quiet_service "$ALL_PID"
# As in bench/redirect-scale.sh: the service's own process stopped, its PostgreSQL (the event
# log the clicks go to) runs on, niced.
pause_pids "$ALL_PID"
# shellcheck disable=SC2086 # BENCH_NODE_FLAGS: words
SHORT_PORT=$TREE_PORT sh scripts/redirector.sh ${BENCH_NODE_FLAGS:-} >"$TMP/tree.log" 2>&1 &
TREE_PID=$!
wait_http "http://127.0.0.1:$TREE_PORT/readyz" "$TREE_PID" "this tree's redirector" 300 200
# shellcheck disable=SC2086
SHORT_PORT=$REF_PORT sh "$TMP/ref/scripts/redirector.sh" ${BENCH_NODE_FLAGS:-} >"$TMP/ref.log" 2>&1 &
REF_PID=$!
wait_http "http://127.0.0.1:$REF_PORT/readyz" "$REF_PID" "the redirector of $REF" 300 200
for port in "$TREE_PORT" "$REF_PORT"; do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/s$LINKS")" = 302 ] ||
    die "the last seeded slug does not redirect on port $port"
done

# The phases in the order of the odd slices; the even ones take them in the order TURNED. So
# the two processes take turns all along and no phase follows one of its own process (which
# starts its slice with its code and data still in the caches: in A/A runs with the orders of
# bench/redirect-scale.sh, the phase that followed itself at every other slice's start came out
# 1.4-3% ahead of the same code in the other process).
NAMES=(tree ref tree-one ref-one)
TURNED=(tree-one ref-one tree ref)
declare -A PORT_OF=([tree]=$TREE_PORT [ref]=$REF_PORT [tree-one]=$TREE_PORT [ref-one]=$REF_PORT)
declare -A PID_OF=([tree]=$TREE_PID [ref]=$REF_PID [tree-one]=$TREE_PID [ref-one]=$REF_PID)
declare -A LINKS_OF=([tree]=$LINKS [ref]=$LINKS [tree-one]=1 [ref-one]=1)
# phase NAME SECONDS OUT: GET /s<k>, k random in 1..LINKS_OF[NAME], WIDTH digits.
phase() {
  BENCH_PATH=/s BENCH_RANDOM=${LINKS_OF[$1]} BENCH_PAD=$WIDTH BENCH_GET_SECONDS=$(($2 + 3600)) run_wrk "$3" -t"$THREADS" \
    -c"$CONNECTIONS" -d"$2s" --latency -s bench/redirect.lua "http://127.0.0.1:${PORT_OF[$1]}" || die "wrk $1 failed"
}
log "bench: first warm-up, ${FIRST_WARMUP}s per phase; then $ROUNDS rounds, in each every phase in $SLICES slices of ${SLICE}s taken in turns"
for name in "${NAMES[@]}"; do phase "$name" "$FIRST_WARMUP" "$TMP/warm.txt"; done
# measure_slice NAME: one slice of phase NAME, the other redirector stopped meanwhile
# (bench/lib.sh, ticks_of_run), measured again if the host stole from it (steady_slice).
measure_slice() {
  local pid=${PID_OF[$1]}
  steady_slice "$1" "$SLICE" ticks_of_run "$pid" "$(all_but "$pid" "$TREE_PID" "$REF_PID")" phase "$1" "$SLICE" "$TMP/wrk.txt"
  slice_add "$1" "$server" "$service" "$busy" "$children" "$kthreads" "$unowned" "$irq" "$children_system"
}
RUNS=()
for ((round = 1; round <= ROUNDS; round++)); do
  if [ "$WARMUP" -gt 0 ]; then
    for name in "${NAMES[@]}"; do phase "$name" "$WARMUP" "$TMP/warm.txt"; done
  fi
  quiet_service "$ALL_PID"
  slices_turns "$round" "${NAMES[*]}" "${TURNED[*]}"
done
steal_summary

STEAL_JSON=$(steal_json) node --input-type=module -e '
  import { fixed as f, median, slicedRounds } from "./bench/summary.mjs"
  const [ref, links, ...runs] = process.argv.slice(1)
  const { ratio, rps, list, pairs, cpuUs } = slicedRounds(runs)
  const out = {
    ref, links: Number(links),
    tree_vs_ref: f(ratio("tree", "ref"), 4), tree_vs_ref_one: f(ratio("tree-one", "ref-one"), 4),
    tree_vs_ref_slices: f(median(pairs("tree", "ref")), 4),
    tree_scale_vs_one: f(ratio("tree", "tree-one"), 4), ref_scale_vs_one: f(ratio("ref", "ref-one"), 4)
  }
  for (const name of ["tree", "ref", "tree-one", "ref-one"]) {
    out[`${name}_rps`] = f(rps(name), 1)
    out[`${name}_cpu_us`] = f(cpuUs(name), 2)
  }
  Object.assign(out, JSON.parse(process.env.STEAL_JSON))
  console.log(`slices: tree/ref, random links ${pairs("tree", "ref").map((x) => x.toFixed(3)).join(" ")} (median ${out.tree_vs_ref_slices})`)
  console.log(`rounds: tree/ref ${list("tree", "ref")}; one link ${list("tree-one", "ref-one")}; random/one: tree ${list("tree", "tree-one")}, ref ${list("ref", "ref-one")}`)
  console.log(`this tree against ${ref}: ${out.tree_vs_ref} of its requests a second with random links of ${links}, ${out.tree_vs_ref_one} with one link; ` +
    `CPU a request ${out.tree_cpu_us} against ${out.ref_cpu_us} us (one link ${out["tree-one_cpu_us"]} against ${out["ref-one_cpu_us"]}); ` +
    `random/one ${out.tree_scale_vs_one} against ${out.ref_scale_vs_one}`)
  console.log(JSON.stringify(out))
' "$REF" "$LINKS" "${RUNS[@]}"
