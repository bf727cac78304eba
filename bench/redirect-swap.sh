#!/usr/bin/env bash
# What a click on another link each time costs a redirector, with the two processes' own
# difference taken out: two redirectors with click capture on over the same BENCH_LINKS links
# (default 1,000, whose buckets stay in the CPU's caches); in each round one gets /s1 only and
# the other a random link of them, each phase BENCH_DURATION seconds (default 10) with the other
# redirector stopped, and the two swap roles every round. Prints each phase's CPU per request
# of the redirector's main thread and of its other threads (V8's helpers, libuv's), and the
# sums over the rounds: random over one link is capture's work for a click on another link
# (and the lookup's, in a table that fits the caches). bench/redirect-scale.sh's scale-hot
# phase asks the same of the million-link redirector, whose 1,000 hot buckets lie in as many
# pages (docs/redirect-tier.md, "The same redirector with one link").
#
#   bash bench/redirect-swap.sh
#
# Tunables: BENCH_LINKS, BENCH_DURATION, BENCH_ROUNDS (default 6, even), BENCH_CONNECTIONS (64).
# The last line on stdout is one JSON object: {"links", "one_us", "random_us", "one_other_us",
# "random_other_us", "random_over_one_us", "rounds"} (µs of CPU a request, all threads but the
# `_other_` ones, which are the threads besides the main one).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BENCH_NAME=bench/redirect-swap.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_start 10 6 shortlinks-bench-swap
LINKS=${BENCH_LINKS:-1000}
[[ $LINKS =~ ^[1-9][0-9]*$ ]] || die "BENCH_LINKS must be a positive integer"
[ $((ROUNDS % 2)) = 0 ] || die "BENCH_ROUNDS must be even (the redirectors swap roles every round)"
A_PID="" B_PID=""
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  stop_pid "$WRK_PID" 5
  resume_all
  stop_pid "$A_PID" 30
  stop_pid "$B_PID" 30
  stop_pid "$ALL_PID" 60
  bench_finish "$status" all.log a.log b.log
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

service_env 18680
free_port A_PORT 18691
free_port B_PORT 18692
log "bench: node $(node --version), $(nproc 2>/dev/null || echo '?') cpus, $LINKS links, wrk -t1 -c$CONNECTIONS, ${DURATION}s per phase, $ROUNDS rounds"
start_service "$NICE"
bench_account
WIDTH=${#LINKS}
node --import tsx bench/seed-links.ts "$ACCOUNT_ID" "$LINKS" "$WIDTH" || die "seeding failed"
quiet_service "$ALL_PID"
pause_pids "$ALL_PID"
SHORT_PORT=$A_PORT sh scripts/redirector.sh >"$TMP/a.log" 2>&1 &
A_PID=$!
SHORT_PORT=$B_PORT sh scripts/redirector.sh >"$TMP/b.log" 2>&1 &
B_PID=$!
wait_http "http://127.0.0.1:$A_PORT/readyz" "$A_PID" "redirector a" 120 200
wait_http "http://127.0.0.1:$B_PORT/readyz" "$B_PID" "redirector b" 120 200
deprioritize "$ALL_PID" "$NICE"

# threads PID: "MAIN OTHER", the clock ticks (user + system) of its main thread and of the rest
# (the process's, which count threads that have ended too, less the main thread's:
# /proc/PID/task/PID/stat, read by ticks_of as the "pid" PID/task/PID).
threads() {
  local all main
  all=$(ticks_of "$1")
  main=$(ticks_of "$1/task/$1")
  echo "$main $((all - main))"
}
# phase PID PORT RANDOM SECONDS: "REQUESTS MAIN OTHER" (ticks during the phase).
phase() {
  local before after
  before=$(threads "$1")
  BENCH_PATH=/s BENCH_RANDOM=$3 BENCH_PAD=$WIDTH BENCH_GET_SECONDS=$(($4 + 3600)) run_wrk "$TMP/wrk.txt" -t1 \
    -c"$CONNECTIONS" -d"$4s" -s bench/redirect.lua "http://127.0.0.1:$2" || die "wrk failed"
  after=$(threads "$1")
  echo "$(wrk_field requests) $before $after" | awk '{ print $1, $4 - $2, $5 - $3 }'
}
log "bench: warm-up, ${FIRST_WARMUP}s each way per redirector"
for random in 1 "$LINKS"; do
  phase "$A_PID" "$A_PORT" "$random" "$FIRST_WARMUP" >/dev/null
  phase "$B_PID" "$B_PORT" "$random" "$FIRST_WARMUP" >/dev/null
done
RESULTS=()
for ((round = 1; round <= ROUNDS; round++)); do
  if [ $((round % 2)) = 1 ]; then a_links=1 b_links=$LINKS; else a_links=$LINKS b_links=1; fi
  pause_pids "$B_PID"
  a=$(phase "$A_PID" "$A_PORT" "$a_links" "$DURATION")
  resume_pids "$B_PID"
  pause_pids "$A_PID"
  b=$(phase "$B_PID" "$B_PORT" "$b_links" "$DURATION")
  resume_pids "$A_PID"
  log "round $round: a on $a_links link(s): $a; b on $b_links link(s): $b (requests, main-thread ticks, other ticks)"
  RESULTS+=("$a_links $a" "$b_links $b")
done

HZ=$(getconf CLK_TCK) node -e '
  const rows = process.argv.slice(1).map((s) => s.split(" ").map(Number))
  const hz = Number(process.env.HZ)
  // Rows: links, requests, main-thread ticks, other ticks. µs of CPU a request over all the rounds.
  const sum = (random, f) => rows.filter((r) => (r[0] > 1) === random).reduce((t, r) => t + f(r), 0)
  const us = (random, f) => ((sum(random, f) / hz) * 1e6) / sum(random, (r) => r[1])
  const f2 = (x) => Number(x.toFixed(2))
  const all = (r) => r[2] + r[3]
  const other = (r) => r[3]
  const out = {
    links: Math.max(...rows.map((r) => r[0])),
    one_us: f2(us(false, all)), random_us: f2(us(true, all)),
    one_other_us: f2(us(false, other)), random_other_us: f2(us(true, other)),
    random_over_one_us: f2(us(true, all) - us(false, all)),
    rounds: rows.length / 2
  }
  console.log(`one link: ${out.one_us} us of CPU a request (other threads ${out.one_other_us}); a random link of ${out.links}: ${out.random_us} (${out.random_other_us}); random over one ${out.random_over_one_us}`)
  console.log(JSON.stringify(out))
' "${RESULTS[@]}"
