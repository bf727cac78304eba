#!/usr/bin/env bash
# The redirector with a million links, measured in ONE run on this machine:
#   - seeds BENCH_LINKS links (default 1,000,000: one INSERT … SELECT generate_series, see
#     bench/seed-links.ts) after a redirector (`one`) has loaded the first of them only;
#   - starts a second redirector (`scale`) over all of them and prints its time to ready
#     (spawn to /readyz 200, and the slug table load the redirector logs) and its RSS, and
#     the table's share of it (RSS of `scale` minus RSS of `one`, both loaded and idle before
#     any traffic), and both RSS again after the warm-up (clicks waiting to be published included);
#   - throughput with a random slug per request (bench/redirect.lua with BENCH_RANDOM: every
#     request a new string in every phase, so wrk's work is the same for all of them): bare
#     uWebSockets.js (any path), `one` (always /s1, written with N's digits: /s0000001) and
#     `scale` (/s1 … /sN, each as wide as N), click capture on,
#     and the same two redirectors with click capture off (`one-off`, `scale-off`): what the
#     table's size costs apart from what distinct links cost click capture. BENCH_ROUNDS
#     rounds; within a round the phases take turns in BENCH_SLICES slices (as in
#     bench/redirect.sh), every other slice backwards, so a fast or slow spell of the machine
#     falls on all of them and no phase always follows the same one; each ratio is the median
#     of the rounds (and scale/one's, for comparison, also the median of the slice pairs);
#   - `scale-hot`: the same million-link redirector, capture on, with a random slug among the
#     first BENCH_HOT_LINKS (default 1,000) only, whose buckets stay in the CPU's caches: every
#     click is still on another link than the one before (capture's work for it is nearly the
#     same: an event's list of links holds at most those links), but the lookup seldom misses;
#   - `scale-one`: the same million-link redirector, capture on, always /s1 (as `one`). So
#     scale's extra over one splits in three, each part within one process but the last:
#     scale over scale-hot is the lookup's cache misses, scale-hot over scale-one click
#     capture's work for a click on another link each time, and scale-one over one what the
#     two processes differ by with the same requests (its young generation, grown during the
#     million links' load, and its JIT's luck: docs/redirect-tier.md); scale/scale-one is
#     what random slugs cost one redirector;
#   - per phase, the CPU per request of the server, of the service (its PostgreSQL) and of
#     the rest of the machine (wrk, the kernel's loopback; not the time the host stole);
#   - a slice during which the host took more than BENCH_STEAL_LIMIT of the machine's time
#     (steal) is measured again (bench/lib.sh, steady_slice), and a line says how much the kept
#     slices lost to it.
# Only the redirectors are measured: the service's own process (API, workers, chDB) is stopped
# once the links are seeded, and its PostgreSQL, which takes the clicks, runs niced (bench/lib.sh
# deprioritize); the servers not measured are stopped during each phase. The exact click
# counts through the projector are bench/redirect.sh's check.
#
#   bash bench/redirect-scale.sh          (or: npm run bench:redirect-scale)
#
# Targets: ready within 10 s, at most 500 MB RSS for the table, scale/one >= 0.95.
# Tunables: BENCH_LINKS, BENCH_HOT_LINKS, BENCH_DURATION (s per phase and round, default 10), BENCH_SLICES,
# BENCH_WARMUP (s, default 3), BENCH_FIRST_WARMUP (s per server, default 15), BENCH_ROUNDS
# (default 3), BENCH_THREADS
# (default 1), BENCH_CONNECTIONS (default 64), BENCH_NICE (niceness of the service, default
# 10), BENCH_STEAL_LIMIT (per mille, default 20), BENCH_STEAL_RETAKES (default 3), BENCH_STEAL_WAIT (s, default 60), BENCH_KEEP=1, BENCH_CPU_PROF=DIR (CPU profiles of the two redirectors with capture on),
# BENCH_NODE_FLAGS (more node flags for those two, e.g. --perf-basic-prof for perf). The last line on stdout is one JSON object:
#   {"links", "ready_s", "load_ms", "load_cpu_ms", "load_rss_mb", "load_huge_mb", "idle_rss_mb", "idle_one_rss_mb", "table_rss_mb",
#    "rss_mb", "one_rss_mb", "bare_rps",
#    "one_rps", "scale_rps", "scale_hot_rps", "scale_one_rps", "one_off_rps", "scale_off_rps", "scale_ratio", "one_ratio", "scale_vs_one",
#    "scale_vs_one_nocapture", "scale_vs_hot", "hot_vs_scale_one", "scale_one_vs_one", "scale_vs_scale_one", "scale_vs_one_slices" and
#    "scale_vs_one_nocapture_slices", "scale_vs_scale_one_slices" (the medians of the slice pairs' ratios), per phase "<phase>_cpu_us", "<phase>_service_cpu_us", "<phase>_other_cpu_us",
#    and the other's parts "<phase>_wrk_cpu_us" ("<phase>_wrk_system_cpu_us" of it in the kernel), "<phase>_kthreads_cpu_us" (the kernel's threads), "<phase>_unowned_cpu_us" (on no
#    process's account: interrupts while a core idled) and "<phase>_irq_cpu_us" (interrupts and softirqs on anyone's account),
#    "steal_permil" (the machine's time the host took during the slices kept, per mille), "steal_retaken" (slices
#    measured again for it), "steal_over" (slices kept over the limit after the last retake)}
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BENCH_NAME=bench/redirect-scale.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_start 15 3 shortlinks-bench-scale
LINKS=${BENCH_LINKS:-1000000}
[[ $LINKS =~ ^[1-9][0-9]*$ ]] || die "BENCH_LINKS must be a positive integer"
HOT_LINKS=${BENCH_HOT_LINKS:-1000}
[[ $HOT_LINKS =~ ^[1-9][0-9]*$ ]] && [ "$HOT_LINKS" -le "$LINKS" ] ||
  die "BENCH_HOT_LINKS must be a positive integer, at most BENCH_LINKS"
ALL_PID="" BARE_PID="" ONE_PID="" SCALE_PID="" ONE_OFF_PID="" SCALE_OFF_PID=""

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  stop_pid "$WRK_PID" 5
  resume_all
  stop_pid "$BARE_PID" 10
  stop_pid "$ONE_PID" 30
  stop_pid "$SCALE_PID" 30
  stop_pid "$ONE_OFF_PID" 30
  stop_pid "$SCALE_OFF_PID" 30
  stop_pid "$ALL_PID" 60
  bench_finish "$status" all.log bare.log one.log scale.log one-off.log scale-off.log
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

service_env 18680
free_port BARE_PORT 18690
free_port ONE_PORT 18691
free_port SCALE_PORT 18692
free_port ONE_OFF_PORT 18693
free_port SCALE_OFF_PORT 18694

log "bench: node $(node --version), $(nproc 2>/dev/null || echo '?') cpus, $LINKS links, wrk -t$THREADS -c$CONNECTIONS, ${DURATION}s per phase"
# The service (PostgreSQL, the event log, the click projector) is not what is measured: it
# runs niced, so it takes the CPU the measured servers leave.
start_service "$NICE"
bench_account

# BENCH_CPU_PROF=DIR: each redirector writes a V8 CPU profile into DIR/one or DIR/scale when
# it stops (summarize with bench/cpu-profile-summary.ts).
# BENCH_NODE_FLAGS: more node flags for the same two (`--perf-basic-prof`, for `perf record -p`).
node_flags() {
  [ -z "${BENCH_CPU_PROF:-}" ] || printf -- '--cpu-prof --cpu-prof-dir=%s/%s ' "$BENCH_CPU_PROF" "$1"
  printf -- '%s' "${BENCH_NODE_FLAGS:-}"
}
# Every slug has the digits of BENCH_LINKS (s0000001 … s1000000), and so every link's id and
# Location one length: the one-link phases' requests and answers are as long as the others'.
WIDTH=${#LINKS}
node --import tsx bench/seed-links.ts "$ACCOUNT_ID" 1 "$WIDTH" || die "seeding the first link failed"
# `one` loads the single link; the seeded rows after it send no events, so it keeps one.
SHORT_PORT=$ONE_PORT LOG_LEVEL=Info sh scripts/redirector.sh $(node_flags one) >"$TMP/one.log" 2>&1 &
ONE_PID=$!
SHORT_PORT=$ONE_OFF_PORT CLICK_CAPTURE=off sh scripts/redirector.sh >"$TMP/one-off.log" 2>&1 &
ONE_OFF_PID=$!
wait_http "http://127.0.0.1:$ONE_PORT/readyz" "$ONE_PID" "the one-link redirector" 120 200
wait_http "http://127.0.0.1:$ONE_OFF_PORT/readyz" "$ONE_OFF_PID" "the one-link redirector (capture off)" 120 200
log "bench: seeding $LINKS links"
node --import tsx bench/seed-links.ts "$ACCOUNT_ID" "$LINKS" "$WIDTH" || die "seeding failed"

quiet_service "$ALL_PID"
# From here on the service's own process is stopped (its embedded PostgreSQL, a process of its
# own, goes on: the redirectors load from it and publish clicks into its event log). What it
# would do is not measured here and is not the redirectors' cost: it projects the clicks into
# chDB, one row per click when each is on another link, ~25 us of CPU per click that took
# 0.4 of the machine from the measured servers and went on for minutes after each phase.
pause_pids "$ALL_PID"
log "bench: the service process is stopped (SIGSTOP) until the end; its PostgreSQL runs on"
start_ms=$(date +%s%3N)
SHORT_PORT=$SCALE_PORT LOG_LEVEL=Info sh scripts/redirector.sh $(node_flags scale) >"$TMP/scale.log" 2>&1 &
SCALE_PID=$!
wait_http "http://127.0.0.1:$SCALE_PORT/readyz" "$SCALE_PID" "the million-link redirector" 300 200
READY_MS=$(($(date +%s%3N) - start_ms))
LOADED=$(grep -o 'slug table loaded: [0-9]* links ([0-9]* active) in [0-9]* ms (cpu [0-9]* ms), rss [0-9]* MB\(, [0-9]* MB of it in huge pages\)\?' "$TMP/scale.log" | tail -n 1)
[ -n "$LOADED" ] || die "the redirector did not log its load"
LOAD_MS=$(printf '%s' "$LOADED" | sed -E 's/.* in ([0-9]+) ms.*/\1/')
LOAD_CPU_MS=$(printf '%s' "$LOADED" | sed -E 's/.*cpu ([0-9]+) ms.*/\1/')
LOAD_RSS=$(printf '%s' "$LOADED" | sed -E 's/.*rss ([0-9]+) MB.*/\1/')
# The MB in huge pages (scripts/redirector.sh), where the kernel says: empty otherwise.
LOAD_HUGE=$(printf '%s' "$LOADED" | sed -nE 's/.*, ([0-9]+) MB of it in huge pages.*/\1/p')
log "bench: $LOADED; ready $((READY_MS / 1000)).$(printf '%03d' $((READY_MS % 1000)))s after spawn"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$SCALE_PORT/s$LINKS")" = 302 ] || die "the last seeded slug does not redirect"
# The table's share: both redirectors idle and loaded, before any traffic (clicks waiting to
# be published would count as the table otherwise).
quiet_wait "$SCALE_PID" "the million-link redirector"
IDLE_RSS_SCALE=$(rss_mb "$SCALE_PID")
IDLE_RSS_ONE=$(rss_mb "$ONE_PID")
SHORT_PORT=$SCALE_OFF_PORT CLICK_CAPTURE=off sh scripts/redirector.sh >"$TMP/scale-off.log" 2>&1 &
SCALE_OFF_PID=$!
wait_http "http://127.0.0.1:$SCALE_OFF_PORT/readyz" "$SCALE_OFF_PID" "the million-link redirector (capture off)" 300 200

BENCH_PATH=/ BARE_PORT=$BARE_PORT node --import tsx bench/bare-uws.ts >"$TMP/bare.log" 2>&1 &
BARE_PID=$!
wait_http "http://127.0.0.1:$BARE_PORT/" "$BARE_PID" "the bare uWebSockets.js server" 60 302

# phase NAME PORT RANDOM SECONDS [OUT]: GET /s<k>, k random in 1..RANDOM, WIDTH digits.
phase() {
  BENCH_PATH=/s BENCH_RANDOM=$3 BENCH_PAD=$WIDTH BENCH_GET_SECONDS=$(($4 + 3600)) run_wrk "${5:-$TMP/wrk-$1.txt}" -t"$THREADS" \
    -c"$CONNECTIONS" -d"$4s" --latency -s bench/redirect.lua "http://127.0.0.1:$2" || die "wrk $1 failed"
}
deprioritize "$ALL_PID" "$NICE"
# The phases: each one's server (port and pid) and paths (/s1 only, /s1 … /sN, or the first
# BENCH_HOT_LINKS of them on the million-link redirector: scale-hot; /s1 on it: scale-one).
NAMES=(bare one scale scale-hot scale-one one-off scale-off)
BACKWARDS=()
for name in "${NAMES[@]}"; do BACKWARDS=("$name" "${BACKWARDS[@]}"); done
declare -A PORT_OF=([bare]=$BARE_PORT [one]=$ONE_PORT [scale]=$SCALE_PORT [scale-hot]=$SCALE_PORT [scale-one]=$SCALE_PORT [one-off]=$ONE_OFF_PORT [scale-off]=$SCALE_OFF_PORT)
declare -A PID_OF=([bare]=$BARE_PID [one]=$ONE_PID [scale]=$SCALE_PID [scale-hot]=$SCALE_PID [scale-one]=$SCALE_PID [one-off]=$ONE_OFF_PID [scale-off]=$SCALE_OFF_PID)
declare -A LINKS_OF=([bare]=$LINKS [one]=1 [scale]=$LINKS [scale-hot]=$HOT_LINKS [scale-one]=1 [one-off]=1 [scale-off]=$LINKS)
log "bench: first warm-up, ${FIRST_WARMUP}s per server; then $ROUNDS rounds, in each every phase in $SLICES slices of ${SLICE}s taken in turns"
for name in "${NAMES[@]}"; do phase "$name" "${PORT_OF[$name]}" "${LINKS_OF[$name]}" "$FIRST_WARMUP" "$TMP/warm-$name.txt"; done
RSS_SCALE=$(rss_mb "$SCALE_PID")
RSS_ONE=$(rss_mb "$ONE_PID")

# measure_slice NAME: one slice of SLICE seconds of phase NAME on its server, the servers not
# measured stopped meanwhile (bench/redirect.sh does the same) and their ticks counted
# (bench/lib.sh, ticks_of_run), measured again if the host stole from it (steady_slice), added
# to the round (slices_turns).
measure_slice() {
  local pid=${PID_OF[$1]}
  steady_slice "$1" "$SLICE" ticks_of_run "$pid" "$(all_but "$pid" "${PID_OF[@]}")" \
    phase "$1" "${PORT_OF[$1]}" "${LINKS_OF[$1]}" "$SLICE" "$TMP/wrk.txt"
  slice_add "$1" "$server" "$service" "$busy" "$children" "$kthreads" "$unowned" "$irq" "$children_system"
}
RUNS=()
for ((round = 1; round <= ROUNDS; round++)); do
  if [ "$WARMUP" -gt 0 ]; then
    for name in "${NAMES[@]}"; do phase "$name" "${PORT_OF[$name]}" "${LINKS_OF[$name]}" "$WARMUP" "$TMP/warm.txt"; done
  fi
  quiet_service "$ALL_PID" # its PostgreSQL: the service's own process is stopped
  # Every other slice the phases take their turns backwards, so no phase always follows the
  # same one (what a phase leaves behind, its PostgreSQL's last inserts say, falls on each).
  slices_turns "$round" "${NAMES[*]}" "${BACKWARDS[*]}"
done
steal_summary

STEAL_JSON=$(steal_json) node --input-type=module -e '
  import { fixed as f, median, slicedRounds } from "./bench/summary.mjs"
  const [links, readyMs, loadMs, loadCpuMs, loadRss, loadHuge, idleScale, idleOne, rssScale, rssOne, ...runs] = process.argv.slice(1)
  const { rounds, ratio, rps, list, pairs, cpuUs } = slicedRounds(runs)
  const out = {
    links: Number(links), ready_s: f(readyMs / 1000, 3), load_ms: Number(loadMs), load_cpu_ms: Number(loadCpuMs),
    load_rss_mb: Number(loadRss), load_huge_mb: loadHuge === "" ? null : Number(loadHuge),
    idle_rss_mb: Number(idleScale), idle_one_rss_mb: Number(idleOne), table_rss_mb: Number(idleScale) - Number(idleOne),
    rss_mb: Number(rssScale), one_rss_mb: Number(rssOne),
    bare_rps: f(rps("bare"), 1), one_rps: f(rps("one"), 1), scale_rps: f(rps("scale"), 1), scale_hot_rps: f(rps("scale-hot"), 1), scale_one_rps: f(rps("scale-one"), 1),
    one_off_rps: f(rps("one-off"), 1), scale_off_rps: f(rps("scale-off"), 1),
    scale_ratio: f(ratio("scale", "bare"), 4), one_ratio: f(ratio("one", "bare"), 4), scale_vs_one: f(ratio("scale", "one"), 4),
    scale_vs_one_nocapture: f(ratio("scale-off", "one-off"), 4),
    scale_vs_hot: f(ratio("scale", "scale-hot"), 4), hot_vs_scale_one: f(ratio("scale-hot", "scale-one"), 4),
    scale_one_vs_one: f(ratio("scale-one", "one"), 4), scale_vs_scale_one: f(ratio("scale", "scale-one"), 4),
    ...JSON.parse(process.env.STEAL_JSON)
  }
  // CPU per request in µs (median of the rounds): the server, the service, the rest (wrk).
  // (A process that ends during a phase, a PostgreSQL autovacuum worker, takes its ticks along:
  // the service share can come out a little below what it was, never below 0 here.)
  const cpu = (a, field) => Math.max(0, cpuUs(a, field))
  const names = ["bare", "one", "scale", "scale-hot", "scale-one", "one-off", "scale-off"]
  for (const name of names) {
    out[`${name}_cpu_us`] = f(cpu(name, "server_ticks"), 2)
    out[`${name}_service_cpu_us`] = f(cpu(name, "service_ticks"), 2)
    out[`${name}_other_cpu_us`] = f(median(rounds.map((r) => ((r[name].busy_ticks - r[name].server_ticks - r[name].service_ticks) / r[name].hz) * 1e6 / r[name].requests)), 2)
    // The rest split (bench/lib.sh, ticks_of_run): wrk, the kernel threads, no process, and
    // the interrupts and softirqs charged to whichever process they interrupted, or none.
    for (const part of ["wrk", "wrk_system", "kthreads", "unowned", "irq"]) out[`${name}_${part}_cpu_us`] = f(cpuUs(name, `${part}_ticks`), 2)
  }
  const slices = (a, b) => pairs(a, b).map((x) => x.toFixed(3)).join(" ")
  out.scale_vs_one_slices = f(median(pairs("scale", "one")), 4)
  out.scale_vs_one_nocapture_slices = f(median(pairs("scale-off", "one-off")), 4)
  out.scale_vs_scale_one_slices = f(median(pairs("scale", "scale-one")), 4)
  console.log(`slices: scale/one ${slices("scale", "one")} (median ${out.scale_vs_one_slices}); capture off ${slices("scale-off", "one-off")} (median ${out.scale_vs_one_nocapture_slices}); scale/scale-one ${slices("scale", "scale-one")} (median ${out.scale_vs_scale_one_slices})`)
  console.log(`rounds: scale/one ${list("scale", "one")}; scale/bare ${list("scale", "bare")}; one/bare ${list("one", "bare")}; capture off: scale/one ${list("scale-off", "one-off")}; scale/scale-hot ${list("scale", "scale-hot")}; scale-hot/scale-one ${list("scale-hot", "scale-one")}; scale-one/one ${list("scale-one", "one")}; scale/scale-one ${list("scale", "scale-one")}`)
  console.log(names.map((n) => `${n}: ${out[`${n}_cpu_us`]} us of its own CPU per request, service ${out[`${n}_service_cpu_us`]}, the rest ${out[`${n}_other_cpu_us`]} ` +
    `(wrk ${out[`${n}_wrk_cpu_us`]}, ${out[`${n}_wrk_system_cpu_us`]} of it in the kernel, kernel threads ${out[`${n}_kthreads_cpu_us`]}, no process ${out[`${n}_unowned_cpu_us`]}; interrupts and softirqs, whoever was charged ${out[`${n}_irq_cpu_us`]})`).join("; "))
  // Where the extra CPU of a random link goes (medians of the rounds: the parts need not add up exactly).
  const extra = (a, b) => f(out[`${a}_cpu_us`] - out[`${b}_cpu_us`], 2)
  console.log(`a random link of ${links} over one link: ${extra("scale", "one")} us more of the redirector CPU a request: ` +
    `the cache misses of the lookup ${extra("scale", "scale-hot")} (scale over scale-hot), the work of click capture for a click on another link each time ${extra("scale-hot", "scale-one")} (scale-hot over scale-one), ` +
    `the other process ${extra("scale-one", "one")} (scale-one over one); with capture off a random link costs ${extra("scale-off", "one-off")} more (scale-off over one-off)`)
  console.log(`ready ${out.ready_s} s after spawn (load ${out.load_ms} ms; target 10 s), RSS ${out.idle_rss_mb} MB idle (table ${out.table_rss_mb} MB; target <= 500), ${out.rss_mb} MB after the warm-up, scale/one ${out.scale_vs_one} (target >= 0.95; ${out.scale_vs_one_nocapture} with click capture off; ${out.scale_vs_scale_one} against /s1 on the same redirector)`)
  console.log(JSON.stringify(out))
' "$LINKS" "$READY_MS" "$LOAD_MS" "$LOAD_CPU_MS" "$LOAD_RSS" "$LOAD_HUGE" "$IDLE_RSS_SCALE" "$IDLE_RSS_ONE" "$RSS_SCALE" "$RSS_ONE" "${RUNS[@]}"
