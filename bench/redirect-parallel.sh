#!/usr/bin/env bash
# One redirector per core, processes or threads? Measured in ONE run on this machine, click
# capture on, GET of one fixed slug (every request a click), wrk as in bench/redirect.sh:
#   one      one redirector process (REDIRECTOR_THREADS=1, the default)
#   procs    two redirector processes on one port (REDIRECTOR_REUSE_PORT=1)
#   threads  one redirector process with two worker threads (REDIRECTOR_THREADS=2)
# The three run side by side (idle but for the phase that measures them), BENCH_ROUNDS rounds
# interleaved (one, procs, threads, one, ...); each ratio against `one` is the median of the
# ratios within the rounds, and the RSS of each setup (the sum of its processes) is taken
# after the rounds. The service (embedded PostgreSQL, the event log, the click projector)
# runs niced, and each phase waits until it is quiet (bench/lib.sh quiet_service).
#
#   bash bench/redirect-parallel.sh        (or: npm run bench:redirect-parallel)
#
# On a machine shared with other work the ratios are noisy: two servers only help when two
# cores are free for them, and wrk and the service take their share of the same cores.
# Tunables: BENCH_DURATION (s per phase, default 10), BENCH_WARMUP (s, default 3),
# BENCH_FIRST_WARMUP (s per setup, default 10), BENCH_ROUNDS (default 3), BENCH_THREADS (wrk
# threads, default 1), BENCH_CONNECTIONS (default 64), BENCH_NICE (default 10), BENCH_KEEP=1.
# The last line on stdout is one JSON object:
#   {"one_rps", "procs_rps", "threads_rps", "procs_ratio", "threads_ratio", "one_rss_mb",
#    "procs_rss_mb", "threads_rss_mb", "rounds"}
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BENCH_NAME=bench/redirect-parallel.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_start 10 3 shortlinks-bench-parallel
ALL_PID="" ONE_PID="" PROC1_PID="" PROC2_PID="" THREADS_PID=""

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  stop_pid "$WRK_PID" 5
  stop_pid "$ONE_PID" 30
  stop_pid "$PROC1_PID" 30
  stop_pid "$PROC2_PID" 30
  stop_pid "$THREADS_PID" 30
  stop_pid "$ALL_PID" 60
  bench_finish "$status" all.log one.log proc1.log proc2.log threads.log
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

service_env 18780
free_port ONE_PORT 18790
free_port PROCS_PORT 18791
free_port THREADS_PORT 18792

log "bench: node $(node --version), $(nproc 2>/dev/null || echo '?') cpus, wrk -t$THREADS -c$CONNECTIONS, ${DURATION}s per phase, $ROUNDS rounds"
start_service "$NICE"
bench_account
node --import tsx bench/seed-links.ts "$ACCOUNT_ID" 1 || die "seeding the link failed"

# Started as `npm run start:redirector` starts one (scripts/redirector.sh: its node flags and glibc tunable).
# exec: $! is the node process itself (its RSS, its SIGTERM).
redirector() { exec sh scripts/redirector.sh; }
SHORT_PORT=$ONE_PORT redirector >"$TMP/one.log" 2>&1 &
ONE_PID=$!
SHORT_PORT=$PROCS_PORT REDIRECTOR_REUSE_PORT=1 redirector >"$TMP/proc1.log" 2>&1 &
PROC1_PID=$!
SHORT_PORT=$PROCS_PORT REDIRECTOR_REUSE_PORT=1 redirector >"$TMP/proc2.log" 2>&1 &
PROC2_PID=$!
SHORT_PORT=$THREADS_PORT REDIRECTOR_THREADS=2 LOG_LEVEL=Info redirector >"$TMP/threads.log" 2>&1 &
THREADS_PID=$!
wait_http "http://127.0.0.1:$ONE_PORT/s1" "$ONE_PID" "the single redirector" 120 302
for pid in "$PROC1_PID" "$PROC2_PID"; do wait_http "http://127.0.0.1:$PROCS_PORT/readyz" "$pid" "a shared-port redirector" 120 200; done
for ((i = 0; i < 600; i++)); do
  grep -q 'redirector ready: 2 threads' "$TMP/threads.log" && break
  kill -0 "$THREADS_PID" 2>/dev/null || die "the threaded redirector exited during start-up"
  sleep 0.2
done
grep -q 'redirector ready: 2 threads' "$TMP/threads.log" || die "the threaded redirector was not ready within 120s"
# A connection can land on either process of `procs`: until both answer /s1 with 302.
for ((i = 0; i < 600; i++)); do
  ok=0
  for _ in 1 2 3 4 5 6 7 8; do
    [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$PROCS_PORT/s1")" = 302 ] && ok=$((ok + 1))
  done
  [ "$ok" = 8 ] && break
  sleep 0.2
done
log "bench: one (pid $ONE_PID), procs (pids $PROC1_PID $PROC2_PID), threads (pid $THREADS_PID) up"

# phase NAME PORT SECONDS [OUT]: GET /s1 on PORT for SECONDS.
phase() {
  BENCH_PATH=/s1 BENCH_GET_SECONDS=$(($3 + 3600)) run_wrk "${4:-$TMP/wrk-$1.txt}" -t"$THREADS" \
    -c"$CONNECTIONS" -d"$3s" --latency -s bench/redirect.lua "http://127.0.0.1:$2" || die "wrk $1 failed"
}
port_of() { case $1 in one) echo "$ONE_PORT" ;; procs) echo "$PROCS_PORT" ;; *) echo "$THREADS_PORT" ;; esac; }
log "bench: first warm-up, ${FIRST_WARMUP}s per setup"
for name in one procs threads; do phase "$name" "$(port_of "$name")" "$FIRST_WARMUP" "$TMP/warm-$name.txt"; done

RUNS=()
for ((round = 1; round <= ROUNDS; round++)); do
  line="{"
  for name in one procs threads; do
    [ "$WARMUP" -gt 0 ] && phase "$name" "$(port_of "$name")" "$WARMUP" "$TMP/warm.txt"
    quiet_service "$ALL_PID"
    phase "$name" "$(port_of "$name")" "$DURATION"
    r=$(grep '^WRK_RESULT ' "$TMP/wrk-$name.txt" | tail -n 1 | cut -d' ' -f2-)
    [ -n "$r" ] || die "wrk $name printed no result: $(cat "$TMP/wrk-$name.txt")"
    printf '%s' "$r" | node -e 'let s="";process.stdin.on("data",c=>s+=c).on("end",()=>{const r=JSON.parse(s);console.log(`round '"$round"' ${process.argv[1].padEnd(7)} ${r.rps.toFixed(1).padStart(9)} req/s  p99 ${r.p99_ms.toFixed(2)} ms  (errors: status ${r.non3xx}, socket ${r.socket_errors})`);if(r.requests===0||r.non3xx+r.socket_errors>0)process.exit(1)})' "$name" ||
      die "phase $name had errors"
    line="$line\"$name\":$r,"
  done
  RUNS+=("${line%,}}")
done
RSS_ONE=$(rss_mb "$ONE_PID")
RSS_PROCS=$(($(rss_mb "$PROC1_PID") + $(rss_mb "$PROC2_PID")))
RSS_THREADS=$(rss_mb "$THREADS_PID")

node --input-type=module -e '
  import { fixed as f, slicedRounds } from "./bench/summary.mjs"
  const [rssOne, rssProcs, rssThreads, ...runs] = process.argv.slice(1)
  const { rounds, rps, ratio, list } = slicedRounds(runs)
  console.log(`rounds: procs/one ${list("procs", "one")}; threads/one ${list("threads", "one")}`)
  const out = {
    one_rps: f(rps("one"), 1), procs_rps: f(rps("procs"), 1), threads_rps: f(rps("threads"), 1),
    procs_ratio: f(ratio("procs", "one"), 4), threads_ratio: f(ratio("threads", "one"), 4),
    one_rss_mb: Number(rssOne), procs_rss_mb: Number(rssProcs), threads_rss_mb: Number(rssThreads), rounds: rounds.length
  }
  console.log(`medians: procs/one ${out.procs_ratio}, threads/one ${out.threads_ratio}; RSS one ${out.one_rss_mb} MB, procs ${out.procs_rss_mb} MB (2 processes), threads ${out.threads_rss_mb} MB (1 process, 2 threads)`)
  console.log(JSON.stringify(out))
' "$RSS_ONE" "$RSS_PROCS" "$RSS_THREADS" "${RUNS[@]}"
