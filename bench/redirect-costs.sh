#!/usr/bin/env bash
# What the redirect path's parts cost on this machine, without the redirector: the bare
# uWebSockets.js server of bench/redirect.sh (bench/bare-uws.ts) with one part added at a time,
# measured in ONE run as the server's CPU per request (user + system, from /proc) and req/s:
#   bare            a fixed 302, any path
#   address         + the peer's address read per request (uWS allocates an ArrayBuffer)
#   table-one       + the redirector's slug table of BENCH_LINKS links (default 1,000,000),
#                   every request /s1
#   table-random    the same table, a random path /s1 … /sN per request (the index slot and
#                   the link's record miss the caches)
#   table+address-one  both parts, every request /s1
#   table+address   both parts, random paths
# Every phase sends the same requests as wrk builds them (bench/redirect.lua with
# BENCH_RANDOM), so the difference between two phases is the server's. BENCH_ROUNDS rounds
# (default 3) interleaved; each figure is the median of the rounds.
#
#   bash bench/redirect-costs.sh
#
# Tunables: BENCH_LINKS, BENCH_DURATION (s per phase, default 10), BENCH_WARMUP (s, default 3),
# BENCH_FIRST_WARMUP (s per server, default 10), BENCH_ROUNDS, BENCH_THREADS (default 1),
# BENCH_CONNECTIONS (default 64), BENCH_KEEP=1. The last line on stdout is one JSON object:
# per phase "<phase>_rps" and "<phase>_cpu_us"; "address_us" (address minus bare),
# "random_table_us" (table-random minus table-one), "random_with_address_us" (table+address
# minus table+address-one), and the req/s ratios random/one without and with the address read
# ("random_vs_one", "random_vs_one_with_address": what a redirector's scale/one could reach).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BENCH_NAME=bench/redirect-costs.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_start 10 3 shortlinks-bench-costs
LINKS=${BENCH_LINKS:-1000000}
[[ $LINKS =~ ^[1-9][0-9]*$ ]] || die "BENCH_LINKS must be a positive integer"
MODES=("" address table table+address)
PIDS=()
PORTS=()

cleanup() {
  local status=$? pid
  trap - EXIT INT TERM
  stop_pid "$WRK_PID" 5
  for pid in "${PIDS[@]}"; do stop_pid "$pid" 10; done
  bench_finish "$status" server-0.log server-1.log server-2.log server-3.log
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "bench: node $(node --version), $(nproc 2>/dev/null || echo '?') cpus, $LINKS links, wrk -t$THREADS -c$CONNECTIONS, ${DURATION}s per phase"
for i in "${!MODES[@]}"; do
  free_port port $((18790 + i))
  BARE_MODE=${MODES[$i]} BARE_LINKS=$LINKS BARE_PORT=$port node --import tsx bench/bare-uws.ts >"$TMP/server-$i.log" 2>&1 &
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
NAMES=(bare address table-one table-random table+address-one table+address)
SERVERS=(0 1 2 2 3 3)
RANDOMS=("$LINKS" "$LINKS" 1 "$LINKS" 1 "$LINKS")

log "bench: first warm-up, ${FIRST_WARMUP}s per server"
for i in "${!MODES[@]}"; do phase "$i" "$LINKS" "$FIRST_WARMUP" "$TMP/warm.txt"; done

RUNS=()
for ((round = 1; round <= ROUNDS; round++)); do
  line="{"
  for p in "${!NAMES[@]}"; do
    server=${SERVERS[$p]}
    [ "$WARMUP" -gt 0 ] && phase "$server" "${RANDOMS[$p]}" "$WARMUP" "$TMP/warm.txt"
    before=$(tree_ticks "${PIDS[$server]}")
    phase "$server" "${RANDOMS[$p]}" "$DURATION" "$TMP/wrk.txt"
    ticks=$(($(tree_ticks "${PIDS[$server]}") - before))
    r=$(grep '^WRK_RESULT ' "$TMP/wrk.txt" | tail -n 1 | cut -d' ' -f2-)
    [ -n "$r" ] || die "wrk printed no result: $(cat "$TMP/wrk.txt")"
    printf '%s' "$r" | node -e 'let s="";process.stdin.on("data",c=>s+=c).on("end",()=>{const r=JSON.parse(s);const [name,round,ticks,hz]=process.argv.slice(1);console.log(`round ${round} ${name.padEnd(13)} ${r.rps.toFixed(1).padStart(9)} req/s  ${(ticks/hz*1e6/r.requests).toFixed(2)} us CPU a request`);if(r.requests===0||r.non3xx+r.socket_errors>0)process.exit(1)})' \
      "${NAMES[$p]}" "$round" "$ticks" "$HZ" || die "phase ${NAMES[$p]} had errors"
    line="$line\"${NAMES[$p]}\":${r%\}},\"ticks\":$ticks},"
  done
  RUNS+=("${line%,}}")
done

node -e '
  const [hz, ...runs] = process.argv.slice(1)
  const rounds = runs.map((s) => JSON.parse(s))
  const median = (xs) => [...xs].sort((x, y) => x - y)[(xs.length - 1) >> 1]
  const names = ["bare", "address", "table-one", "table-random", "table+address-one", "table+address"]
  const cpu = (n) => median(rounds.map((r) => (r[n].ticks / Number(hz)) * 1e6 / r[n].requests))
  const out = {}
  for (const n of names) {
    out[`${n}_rps`] = Number(median(rounds.map((r) => r[n].rps)).toFixed(1))
    out[`${n}_cpu_us`] = Number(cpu(n).toFixed(2))
  }
  out.address_us = Number(median(rounds.map((r) => (r.address.ticks / r.address.requests - r.bare.ticks / r.bare.requests) / Number(hz) * 1e6)).toFixed(2))
  out.random_table_us = Number(median(rounds.map((r) => (r["table-random"].ticks / r["table-random"].requests - r["table-one"].ticks / r["table-one"].requests) / Number(hz) * 1e6)).toFixed(2))
  out.random_with_address_us = Number(median(rounds.map((r) => (r["table+address"].ticks / r["table+address"].requests - r["table+address-one"].ticks / r["table+address-one"].requests) / Number(hz) * 1e6)).toFixed(2))
  out.random_vs_one = Number(median(rounds.map((r) => r["table-random"].rps / r["table-one"].rps)).toFixed(3))
  out.random_vs_one_with_address = Number(median(rounds.map((r) => r["table+address"].rps / r["table+address-one"].rps)).toFixed(3))
  console.log(`with the address read too: random paths cost ${out.random_with_address_us} us a request more than /s1; req/s random/one ${out.random_vs_one_with_address} (without the address read ${out.random_vs_one})`)
  console.log(`the address read: ${out.address_us} us a request; a random path over the table instead of one: ${out.random_table_us} us a request (table-random/table-one req/s ${(out["table-random_rps"] / out["table-one_rps"]).toFixed(3)})`)
  console.log(JSON.stringify(out))
' "$HZ" "${RUNS[@]}"
