#!/usr/bin/env bash
# What the redirect path's parts cost on this machine, without the redirector: the bare
# uWebSockets.js server of bench/redirect.sh (bench/bare-uws.ts) with one part added at a time,
# measured in ONE run as the server's CPU per request (user + system, from /proc) and req/s:
#   bare            a fixed 302, any path
#   address         + the peer's address read per request (a getpeername(2) and a new ArrayBuffer)
#   syscall         + one other system call per request instead (a 1-byte write to /dev/null):
#                   what the address read would cost if it were only its system call
#   table-one       + the redirector's slug table of BENCH_LINKS links (default 1,000,000),
#                   every request /s1
#   table-random    the same table, a random path /s1 … /sN per request (the index slot and
#                   the link's record miss the caches)
#   table+address-one  both parts, every request /s1
#   table+address   both parts, random paths
#   table+syscall-one, table+syscall    the table and the other system call, /s1 and random paths
#   table+buffer-one, table+buffer      the table and a new 4-byte ArrayBuffer per request (what
#                   the address read allocates, without its system call), /s1 and random paths:
#                   which part of the address read makes a random path dearer
#   address+cache   the address read with the redirector's peer-address cache preloaded
#                   (infra/http/peer-address.c, as scripts/redirector.sh starts it): no system call
#   table+address+cache-one, table+address+cache    the table and the cached address read, /s1
#                   and random paths (skipped, with the address+cache phase, without a C compiler)
#   address+view    the address read from the library's current-peer view instead (its Node-API
#                   addon, infra/http/peer-address-view.c, as the redirector reads it): no call
#                   into uWebSockets.js, nothing allocated
#   table+address+view-one, table+address+view    the table and that read, /s1 and random paths
#                   (skipped, with the address+view phase, where the addon could not be built)
# Every phase sends the same requests as wrk builds them (bench/redirect.lua with
# BENCH_RANDOM), so the difference between two phases is the server's. BENCH_ROUNDS rounds
# (default 3); within a round the phases take turns in BENCH_SLICES slices (default 5, fewer
# for a shorter BENCH_DURATION) of BENCH_DURATION / BENCH_SLICES seconds, each with the other
# servers stopped (SIGSTOP, then SIGCONT); each figure is the median of the rounds.
#
#   bash bench/redirect-costs.sh
#
# Tunables: BENCH_LINKS, BENCH_DURATION (s per phase and round, default 10), BENCH_SLICES,
# BENCH_WARMUP (s per server and round, default 3),
# BENCH_FIRST_WARMUP (s per server, default 10), BENCH_ROUNDS, BENCH_THREADS (default 1),
# BENCH_CONNECTIONS (default 64), BENCH_STEAL_LIMIT, BENCH_STEAL_RETAKES and BENCH_STEAL_WAIT (a slice during which
# the host took more than that share of the machine's time is measured again: bench/lib.sh),
# BENCH_KEEP=1. The last line on stdout is one JSON object:
# per phase "<phase>_rps" and "<phase>_cpu_us"; "steal_permil", "steal_retaken", "steal_over" (bench/lib.sh); "address_us" (address minus bare), "syscall_us"
# (syscall minus bare),
# "random_table_us" (table-random minus table-one), "random_with_address_us" (table+address
# minus table+address-one), and the req/s ratios random/one without and with the address read
# ("random_vs_one", "random_vs_one_with_address": what a redirector's scale/one could reach), and
# the same with the other system call or the buffer in place of the address read
# ("random_with_syscall_us", "random_with_buffer_us", "random_vs_one_with_syscall",
# "random_vs_one_with_buffer"); with the cache: "address_cached_us" (address+cache minus bare),
# "random_with_cached_address_us" and "random_vs_one_with_cached_address" (null without it); with
# the view: "address_view_us", "random_with_view_address_us" and "random_vs_one_with_view_address".
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BENCH_NAME=bench/redirect-costs.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_start 10 3 shortlinks-bench-costs
LINKS=${BENCH_LINKS:-1000000}
[[ $LINKS =~ ^[1-9][0-9]*$ ]] || die "BENCH_LINKS must be a positive integer"
MODES=("" address table table+address syscall table+syscall table+buffer)
# The last two servers again with the peer-address cache preloaded, where it can be built.
PRELOADS=("" "" "" "" "" "" "")
if PEER_SO=$(sh scripts/peer-address.sh); then
  MODES+=(address table+address)
  PRELOADS+=("$PEER_SO" "$PEER_SO")
  # And with its view, where the addon was built beside it.
  if [ -f "$(dirname "$PEER_SO")/peer-address-view.node" ]; then
    MODES+=(view table+view)
    PRELOADS+=("$PEER_SO" "$PEER_SO")
  else
    log "bench: no current-peer view (see above): its phases are skipped"
  fi
else
  log "bench: no peer-address cache (see above): its phases are skipped"
fi
PIDS=()
PORTS=()

cleanup() {
  local status=$? pid
  trap - EXIT INT TERM
  stop_pid "$WRK_PID" 5
  resume_all
  for pid in "${PIDS[@]}"; do stop_pid "$pid" 10; done
  bench_finish "$status" server-0.log server-1.log server-2.log server-3.log server-4.log server-5.log server-6.log \
    server-7.log server-8.log server-9.log server-10.log
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "bench: node $(node --version), $(nproc 2>/dev/null || echo '?') cpus, $LINKS links, wrk -t$THREADS -c$CONNECTIONS, ${DURATION}s per phase"
for i in "${!MODES[@]}"; do
  free_port port $((18790 + i))
  LD_PRELOAD=${PRELOADS[$i]} BARE_MODE=${MODES[$i]} BARE_LINKS=$LINKS BARE_PORT=$port \
    node --import tsx bench/bare-uws.ts >"$TMP/server-$i.log" 2>&1 &
  PIDS+=($!)
  PORTS+=("$port")
done
for i in "${!MODES[@]}"; do
  wait_http "http://127.0.0.1:${PORTS[$i]}/" "${PIDS[$i]}" "the bare server (${MODES[$i]:-plain})" 120 302
done

# phase SERVER RANDOM SECONDS OUT: GET /s<k>, k random in 1..RANDOM.
phase() {
  BENCH_PATH=/s BENCH_RANDOM=$2 BENCH_GET_SECONDS=$(($3 + 3600)) run_wrk "$4" -t"$THREADS" -c"$CONNECTIONS" \
    -d"$3s" --latency -s bench/redirect.lua "http://127.0.0.1:${PORTS[$1]}" || die "wrk failed"
}
# Phases: name, server (index into MODES), paths.
NAMES=(bare address syscall table-one table-random table+address-one table+address table+syscall-one table+syscall
  table+buffer-one table+buffer)
SERVERS=(0 1 4 2 2 3 3 5 5 6 6)
RANDOMS=("$LINKS" "$LINKS" "$LINKS" 1 "$LINKS" 1 "$LINKS" 1 "$LINKS" 1 "$LINKS")
if [ "${#MODES[@]}" -gt 7 ]; then
  NAMES+=(address+cache table+address+cache-one table+address+cache)
  SERVERS+=(7 8 8)
  RANDOMS+=("$LINKS" 1 "$LINKS")
fi
if [ "${#MODES[@]}" -gt 9 ]; then
  NAMES+=(address+view table+address+view-one table+address+view)
  SERVERS+=(9 10 10)
  RANDOMS+=("$LINKS" 1 "$LINKS")
fi

log "bench: $ROUNDS rounds; in each, every phase in $SLICES slices of ${SLICE}s taken in turns; first warm-up ${FIRST_WARMUP}s per server"
for i in "${!MODES[@]}"; do phase "$i" "$LINKS" "$FIRST_WARMUP" "$TMP/warm.txt"; done

# take_slice SERVER RANDOM OTHERS: one measured slice of SLICE seconds on that server (phase), the
# servers OTHERS (pids) stopped meanwhile; sets ticks to the server's CPU over it.
take_slice() {
  local before
  # shellcheck disable=SC2086 # one word per pid
  pause_pids $3
  before=$(ticks_of "${PIDS[$1]}")
  phase "$1" "$2" "$SLICE" "$TMP/wrk.txt"
  ticks=$(($(ticks_of "${PIDS[$1]}") - before))
  # shellcheck disable=SC2086
  resume_pids $3
}
# Within a round, after each server's warm-up, the phases take turns in slices (as in
# bench/redirect.sh), each with the servers not measured stopped: a fast or slow spell of the
# machine falls on every phase.
RUNS=()
for ((round = 1; round <= ROUNDS; round++)); do
  if [ "$WARMUP" -gt 0 ]; then
    for i in "${!MODES[@]}"; do phase "$i" "$LINKS" "$WARMUP" "$TMP/warm.txt"; done
  fi
  slices_reset
  for ((slice = 1; slice <= SLICES; slice++)); do
    for p in "${!NAMES[@]}"; do
      server=${SERVERS[$p]}
      # A slice the host stole from is measured again (bench/lib.sh, steady_slice).
      steady_slice "${NAMES[$p]}" "$SLICE" take_slice "$server" "${RANDOMS[$p]}" "$(all_but "${PIDS[$server]}" "${PIDS[@]}")"
      slice_add "${NAMES[$p]}" "$ticks" 0 0
    done
  done
  slices_round "$round" "${NAMES[@]}"
done
steal_summary

STEAL_JSON=$(steal_json) node --input-type=module -e '
  import { fixed, median, slicedRounds } from "./bench/summary.mjs"
  const runs = process.argv.slice(1)
  const { rounds, rps, ratio, cpuUs } = slicedRounds(runs)
  const cached = "address+cache" in rounds[0]
  const viewed = "address+view" in rounds[0]
  const names = ["bare", "address", "syscall", "table-one", "table-random", "table+address-one", "table+address",
    "table+syscall-one", "table+syscall", "table+buffer-one", "table+buffer",
    ...(cached ? ["address+cache", "table+address+cache-one", "table+address+cache"] : []),
    ...(viewed ? ["address+view", "table+address+view-one", "table+address+view"] : [])]
  const out = {}
  for (const n of names) {
    out[`${n}_rps`] = fixed(rps(n), 1)
    out[`${n}_cpu_us`] = fixed(cpuUs(n), 2)
  }
  // What phase `a` costs the server more a request than phase `b` (µs), and the req/s ratio of the two.
  const extraUs = (a, b) => fixed(median(rounds.map((r) => (r[a].server_ticks / r[a].requests - r[b].server_ticks / r[b].requests) / r[a].hz * 1e6)), 2)
  const randomRatio = (random, one) => fixed(ratio(random, one), 3)
  out.address_us = extraUs("address", "bare")
  out.syscall_us = extraUs("syscall", "bare")
  out.random_table_us = extraUs("table-random", "table-one")
  out.random_with_address_us = extraUs("table+address", "table+address-one")
  out.random_with_syscall_us = extraUs("table+syscall", "table+syscall-one")
  out.random_with_buffer_us = extraUs("table+buffer", "table+buffer-one")
  out.random_vs_one = randomRatio("table-random", "table-one")
  out.random_vs_one_with_address = randomRatio("table+address", "table+address-one")
  out.random_vs_one_with_syscall = randomRatio("table+syscall", "table+syscall-one")
  out.random_vs_one_with_buffer = randomRatio("table+buffer", "table+buffer-one")
  out.address_cached_us = cached ? extraUs("address+cache", "bare") : null
  out.random_with_cached_address_us = cached ? extraUs("table+address+cache", "table+address+cache-one") : null
  out.random_vs_one_with_cached_address = cached ? randomRatio("table+address+cache", "table+address+cache-one") : null
  out.address_view_us = viewed ? extraUs("address+view", "bare") : null
  out.random_with_view_address_us = viewed ? extraUs("table+address+view", "table+address+view-one") : null
  out.random_vs_one_with_view_address = viewed ? randomRatio("table+address+view", "table+address+view-one") : null
  console.log(`with the address read too: random paths cost ${out.random_with_address_us} us a request more than /s1; req/s random/one ${out.random_vs_one_with_address} (without the address read ${out.random_vs_one})`)
  console.log(`with the other system call instead: ${out.random_with_syscall_us} us more, req/s random/one ${out.random_vs_one_with_syscall}; with a new ArrayBuffer instead: ${out.random_with_buffer_us} us more, req/s random/one ${out.random_vs_one_with_buffer}`)
  console.log(`the address read: ${out.address_us} us a request; one other system call: ${out.syscall_us} us a request; a random path over the table instead of one: ${out.random_table_us} us a request (table-random/table-one req/s ${(out["table-random_rps"] / out["table-one_rps"]).toFixed(3)})`)
  if (cached) console.log(`with the peer-address cache: the address read ${out.address_cached_us} us a request; random paths ${out.random_with_cached_address_us} us more than /s1, req/s random/one ${out.random_vs_one_with_cached_address}`)
  if (viewed) console.log(`from the current-peer view: the address read ${out.address_view_us} us a request; random paths ${out.random_with_view_address_us} us more than /s1, req/s random/one ${out.random_vs_one_with_view_address}`)
  console.log(JSON.stringify({ ...out, ...JSON.parse(process.env.STEAL_JSON) }))
' "${RUNS[@]}"
