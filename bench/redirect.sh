#!/usr/bin/env bash
# Redirect throughput, measured in ONE run on this machine (ratios, because absolute numbers
# move with the machine's noise):
#   (a) bare      a bare uWebSockets.js server answering every request with a fixed 302
#   (b) capture   the redirector (its own process) with click capture on
#   (c) nocapture the same redirector with CLICK_CAPTURE=off
#   (d) custom    the capture redirector again, on a verified custom domain (Host header): its
#                 ratio to (b) is printed (target >= 0.90); skipped without dnsmasq
# Each phase is GET only (every request a click on (b)). Then a counting run on (b): GET for
# all but the last 2 seconds, HEAD (a redirect that is not a click) for the rest, so that no
# click is in flight when wrk cuts its connections and the clicks sent are known exactly; the
# script waits until the analytics have drained and compares them with the clicks the
# analytics count (GET /v1/links/{id}/analytics: clicks + bot_clicks). For the throughput
# phase it checks that the analytics count lies between wrk's completed GETs and that plus
# the connections (requests cut in flight may or may not have been answered). Then it reads
# the capture redirector's /metrics: the clicks it captured during the counting run must be
# exactly the clicks sent, and every click it captured must be published; otherwise it fails.
#
#   bash bench/redirect.sh            (or: npm run bench:redirect)
#   bash bench/redirect.sh --crash    the crash mode: a redirector killed with SIGKILL in the
#                                     middle of a burst BENCH_KILLS times (default 5), then
#                                     restarted to publish its spool (bench/redirect-crash.ts);
#                                     compares the clicks that got a 302 with the analytics.
#
# Isolation: the service (embedded PostgreSQL, the event log, the click projector, chDB) is
# not what is measured, yet it shares the CPU: it runs under `nice -n BENCH_NICE` (default
# 10), its embedded PostgreSQL's scheduler autogroups too (bench/lib.sh deprioritize: each
# PostgreSQL backend is a session of its own, which `nice` alone never reached), and before
# each phase the script waits until its processes are quiet (< 10% of a core), so that a
# phase does not pay for the clicks of the phase before (the capture phase leaves hundreds
# of thousands of clicks to project, and the nocapture phase came right after it: that is
# what moved capture-off between 0.81 and 1.0 of bare). During each measured run the
# service's own process (the click projector; its PostgreSQL, which takes the capture
# redirector's clicks, runs on) and the two servers not measured are stopped (SIGSTOP, then
# SIGCONT): running, they took 0.5-4 us (the service) and 0.3-0.8 us (the idle servers) of CPU
# per request from the two cores wrk and the server share.
# Each phase prints where the machine's CPU went, per request: the server's own (all its
# threads), the service's, the idle servers', and the rest (wrk and the kernel's share not
# charged to a process; it grows to fill its core, so it is larger per request when the
# server is slower). The server's own CPU per request is the figure to compare: the
# throughput ratio follows it, and a slow spell of the machine raises every phase's.
#
# The three throughput phases run BENCH_ROUNDS times (default 3). In a round, after each
# server's warm-up and with the service quiet and stopped, the phases take turns in
# BENCH_SLICES slices (default 5) of BENCH_DURATION / BENCH_SLICES seconds (bare, capture,
# nocapture, custom, bare, ...): a fast or slow spell of the machine (the same server's CPU per
# request moved by a quarter between two runs seconds apart) then falls on every phase, not on
# one. A phase's result in a round is its req/s over all its slices (p50 and p99: the median
# of the slices'); each phase reports its median round, and each ratio is the median over
# the rounds of the ratio within the round. A slice during which the host took more than
# BENCH_STEAL_LIMIT of the machine's time (steal: its other guests ran on our cores) is
# measured again, at most BENCH_STEAL_RETAKES times (bench/lib.sh, steady_slice), and a line
# says how much the kept slices lost to the host; the rest's CPU per request leaves steal out.
#
# Tunables: BENCH_DURATION (seconds per phase and round, default 10), BENCH_SLICES (default 5,
# or BENCH_DURATION if less; 1: one run per phase), BENCH_WARMUP (seconds, default 3),
# BENCH_FIRST_WARMUP (seconds per server before the first round, default 20), BENCH_ROUNDS,
# BENCH_THREADS (wrk threads, default 1), BENCH_CONNECTIONS (default 64), BENCH_DRAIN_TIMEOUT
# (seconds to wait for the analytics, default 120), BENCH_STEAL_LIMIT (per mille, default 20),
# BENCH_STEAL_RETAKES (default 3), BENCH_STEAL_WAIT (s, default 60), BENCH_KEEP=1 keeps the temporary dir.
#
# The service runs on the embedded default (embedded PostgreSQL and event log, chDB) in a
# temporary DATA_DIR; the two redirectors attach to its PostgreSQL. The last line on stdout
# is one JSON object:
#   {"bare_rps", "capture_rps", "nocapture_rps", "capture_ratio", "nocapture_ratio",
#    "capture_p99_ms", "clicks_sent", "clicks_counted", "custom_ratio" (null when skipped),
#    "metrics_captured" (the counting run's clicks by the capture redirector's /metrics),
#    "metrics_captured_total", "metrics_published_total" (all its clicks, captured and published),
#    "bare_cpu_us", "capture_cpu_us", "nocapture_cpu_us" (the server's own CPU per request, median
#    of the rounds), "capture_cpu_ratio", "nocapture_cpu_ratio" (bare's over each, median of the
#    rounds' own: the throughput ratio if the server alone set the pace), "steal_permil" (the
#    machine's time the host took during the slices kept, per mille), "steal_retaken" (slices
#    measured again for it), "steal_over" (slices kept over BENCH_STEAL_LIMIT after the last retake)}
# and in the crash mode {"kills", "redirected", "sent", "counted", "lost", "lost_ratio", "spool_mapped"}.
set -euo pipefail
MODE=throughput
case "${1:-}" in
  "") ;;
  --crash) MODE=crash ;;
  *)
    printf 'usage: bash bench/redirect.sh [--crash]\n' >&2
    exit 2
    ;;
esac
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BENCH_NAME=bench/redirect.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
# shellcheck source=bench/custom-domain.sh
. bench/custom-domain.sh
bench_start 20 3 shortlinks-bench
DRAIN_TIMEOUT=${BENCH_DRAIN_TIMEOUT:-120}
[ "$DURATION" -ge 4 ] || die "BENCH_DURATION must be at least 4 (seconds)"
ALL_PID="" BARE_PID="" CAP_PID="" NOCAP_PID=""

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  stop_pid "$WRK_PID" 5
  resume_all
  stop_pid "$BARE_PID" 10
  stop_pid "$CAP_PID" 30
  stop_pid "$NOCAP_PID" 30
  stop_pid "$ALL_PID" 60
  stop_pid "$DNSMASQ_PID" 5
  bench_finish "$status" all.log bare.log capture.log nocapture.log crash.log
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

service_env 18580
free_port BARE_PORT 18590
free_port CAP_PORT 18591
free_port NOCAP_PORT 18592
custom_domain_dns

log "bench: node $(node --version), $(nproc 2>/dev/null || echo '?') cpus, wrk -t$THREADS -c$CONNECTIONS, ${DURATION}s per phase (warm-up ${WARMUP}s)"

start_service "$NICE"

bench_account
API_KEY=$(npm run --silent cli -- keys create --account "$ACCOUNT_ID" --scopes links:read,links:write,analytics:read,domains:read,domains:write --json |
  tail -n 1 | json_field key) || die "cli keys create failed"

new_link() {
  curl -sS --max-time 30 -X POST "$API/v1/links" -H "Authorization: Bearer $API_KEY" \
    -H "Content-Type: application/json" -H "Idempotency-Key: bench-$1-$$-$RANDOM$RANDOM" \
    --data "{\"url\":\"https://example.com/bench/$1\",\"custom_slug\":\"$1$$\"}" | json_field data.id
}
# counted LINK_ID: clicks + bot_clicks the analytics hold for the link (-1 if unreadable).
counted() {
  curl -sS --max-time 30 -H "Authorization: Bearer $API_KEY" "$API/v1/links/$1/analytics?granularity=day" |
    node -e 'let s="";process.stdin.on("data",c=>s+=c).on("end",()=>{try{const t=JSON.parse(s).data.totals;console.log(t.clicks+t.bot_clicks)}catch{console.log(-1)}})' ||
    echo -1
}

if [ "$MODE" = crash ]; then
  CRASH_ID=$(new_link crash) || die "could not create the crash link"
  free_port CRASH_PORT 18593
  log "bench: crash mode: ${BENCH_KILLS:-5} kills with SIGKILL mid-burst on port $CRASH_PORT, $CONNECTIONS connections"
  mkdir -p "$TMP/crash-spool"
  REDIRECTOR_SPOOL_DIR=$TMP/crash-spool BENCH_CONNECTIONS=$CONNECTIONS \
    node --import tsx bench/redirect-crash.ts "$CRASH_PORT" "/crash$$" | tee "$TMP/crash.log" ||
    die "the crash run failed"
  CRASH=$(grep '^CRASH_RESULT ' "$TMP/crash.log" | tail -n 1 | cut -d' ' -f2-)
  REDIRECTED=$(printf '%s' "$CRASH" | json_field redirected)
  log "bench: waiting for the analytics to count the $REDIRECTED clicks that got a 302 (at most ${DRAIN_TIMEOUT}s)"
  drain_start=$(date +%s)
  while :; do
    COUNTED=$(counted "$CRASH_ID")
    [ "$COUNTED" -ge "$REDIRECTED" ] && break
    [ $(($(date +%s) - drain_start)) -lt "$DRAIN_TIMEOUT" ] || break
    sleep 1
  done
  sleep 2 # anything arriving late would show as more
  COUNTED=$(counted "$CRASH_ID")
  node -e '
    const r = JSON.parse(process.argv[1]); const counted = Number(process.argv[2])
    const lost = Math.max(0, r.redirected - counted)
    // Mapped spool files: none may be lost; written a turn at a time (no addon): at most 1%.
    const bar = r.mapped ? "none, the spool mapped" : "1%, the spool written a turn at a time"
    console.log(`crash: ${r.kills} kills; ${r.redirected} clicks got a 302, ${counted} counted, ${lost} lost (${(100 * lost / r.redirected).toFixed(3)}%, bar ${bar}); ${r.sent} sent (a click answered as the process died may count without its 302)`)
    console.log(JSON.stringify({ kills: r.kills, redirected: r.redirected, sent: r.sent, counted, lost, lost_ratio: Number((lost / r.redirected).toFixed(5)), spool_mapped: r.mapped }))
    if (lost > (r.mapped ? 0 : r.redirected / 100) || counted > r.sent) process.exit(1)' "$CRASH" "$COUNTED" || die "the crash bar was not met"
  exit 0
fi

WARM_ID=$(new_link warm) || die "could not create the warm-up link"
LINK_ID=$(new_link run) || die "could not create the measured link"
COUNT_ID=$(new_link count) || die "could not create the counting link"
WARM_PATH=/warm$$
RUN_PATH=/run$$
COUNT_PATH=/count$$
custom_domain_verify "bench$$.example.test"

# Two redirectors of their own, attached to the service's PostgreSQL and event log, started
# as `npm run start:redirector` starts one (scripts/redirector.sh: its node flags and glibc tunable).
SHORT_PORT=$CAP_PORT CLICK_CAPTURE=on sh scripts/redirector.sh >"$TMP/capture.log" 2>&1 &
CAP_PID=$!
SHORT_PORT=$NOCAP_PORT CLICK_CAPTURE=off sh scripts/redirector.sh >"$TMP/nocapture.log" 2>&1 &
NOCAP_PID=$!
BARE_PORT=$BARE_PORT node --import tsx bench/bare-uws.ts >"$TMP/bare.log" 2>&1 &
BARE_PID=$!
wait_http "http://127.0.0.1:$CAP_PORT$RUN_PATH" "$CAP_PID" "the redirector (capture on)" 120 302
wait_http "http://127.0.0.1:$NOCAP_PORT$RUN_PATH" "$NOCAP_PID" "the redirector (capture off)" 120 302
wait_http "http://127.0.0.1:$BARE_PORT/" "$BARE_PID" "the bare uWebSockets.js server" 60 302
wait_custom_host "$CAP_PORT" "$RUN_PATH"
log "bench: redirectors and bare server up; measured link $LINK_ID (slug ${RUN_PATH#/})"
# The readiness probes above were GETs of the measured link on the capture redirector: one click
# (one more on the custom host).
PROBE_CLICKS=1
if [ -n "$CUSTOM_HOST" ]; then PROBE_CLICKS=2; fi

# warm NAME PORT: the short warm-up of a phase's server on the warm-up link.
warm() {
  [ "$WARMUP" -gt 0 ] || return 0
  BENCH_PATH=$WARM_PATH BENCH_GET_SECONDS=$WARMUP run_wrk "$TMP/wrk-$1-warm.txt" -t"$THREADS" -c"$CONNECTIONS" \
    -d"${WARMUP}s" -s bench/redirect.lua "http://127.0.0.1:$2" || die "wrk warm-up of $1 failed"
}

# measure NAME PORT PATH GET_SECONDS SECONDS: one measured wrk run (GET for GET_SECONDS, then
# HEAD) with the two servers not measured stopped (the caller stops the service); sets MEASURED
# to wrk's result with where the machine's CPU went meanwhile (see "Isolation" above): the
# server measured, the service, the two servers not measured, and the rest (wrk and the
# kernel's share), in clock ticks. A run that clicked the measured link (capture, custom; a
# slice kept or measured again) adds to CAPTURE_GETS (its GETs, but for the one wrk counts and
# does not send) and CAPTURE_RUNS: the analytics must hold those clicks.
CAPTURE_GETS=0 CAPTURE_RUNS=0
measure() {
  local name=$1 port=$2 path=$3 get_seconds=$4 seconds=$5 out=$TMP/wrk-$1.txt server_pid others
  local t0_server t0_service t0_others t0_busy cpu
  case $port in "$BARE_PORT") server_pid=$BARE_PID ;; "$CAP_PORT") server_pid=$CAP_PID ;; *) server_pid=$NOCAP_PID ;; esac
  others=$(all_but "$server_pid" "$BARE_PID" "$CAP_PID" "$NOCAP_PID")
  # shellcheck disable=SC2086 # one word per pid
  pause_pids $others
  t0_service=$(tree_ticks "$ALL_PID") t0_others=$(ticks_of $others) t0_server=$(ticks_of "$server_pid") t0_busy=$(busy_ticks)
  BENCH_PATH=$path BENCH_GET_SECONDS=$get_seconds run_wrk "$out" -t"$THREADS" -c"$CONNECTIONS" -d"${seconds}s" \
    --latency -s bench/redirect.lua "http://127.0.0.1:$port" || die "wrk $name failed: $(cat "$out")"
  # The machine's ticks first, before the samples below add their own.
  cpu="\"busy_ticks\":$(($(busy_ticks) - t0_busy)),\"server_ticks\":$(($(ticks_of "$server_pid") - t0_server))"
  cpu="$cpu,\"service_ticks\":$(($(tree_ticks "$ALL_PID") - t0_service)),\"others_ticks\":$(($(ticks_of $others) - t0_others)),\"hz\":$HZ,\"runs\":1"
  # shellcheck disable=SC2086
  resume_pids $others
  MEASURED=$(grep '^WRK_RESULT ' "$out" | tail -n 1 | cut -d' ' -f2-)
  [ -n "$MEASURED" ] || die "wrk $name printed no result: $(cat "$out")"
  MEASURED="${MEASURED%\}},$cpu}"
  case $name in capture | custom)
    CAPTURE_GETS=$((CAPTURE_GETS + $(sed -n 's/.*"gets":\([0-9]*\).*/\1/p' <<<"$MEASURED") - 1))
    CAPTURE_RUNS=$((CAPTURE_RUNS + 1))
    ;;
  esac
}

# result NAME RUN...: the runs of one phase (a round's slices, or one run) summed into one
# result (req/s over their whole time; p50 and p99 the median of theirs), printed with its
# CPU per request; sets RESULT_<NAME>. Fails on any error answer.
result() {
  local name=$1 line
  shift
  line=$(node --input-type=module -e '
    import { median } from "./bench/summary.mjs"
    const [name, ...runs] = process.argv.slice(1)
    const rs = runs.map((s) => JSON.parse(s))
    const sum = (k) => rs.reduce((a, r) => a + r[k], 0)
    const r = { requests: sum("requests"), gets: sum("gets"), heads: sum("heads"), duration_s: sum("duration_s"),
      non3xx: sum("non3xx"), socket_errors: sum("socket_errors"),
      p50_ms: median(rs.map((x) => x.p50_ms)), p99_ms: median(rs.map((x) => x.p99_ms)),
      server_ticks: sum("server_ticks"), service_ticks: sum("service_ticks"), others_ticks: sum("others_ticks"),
      busy_ticks: sum("busy_ticks"), hz: rs[0].hz, runs: sum("runs") }
    r.rps = (r.requests - r.non3xx) / r.duration_s
    const us = (ticks) => ((ticks / r.hz) * 1e6 / r.requests).toFixed(2)
    // A process of the service that ends during the run (a PostgreSQL backend) takes its ticks
    // along: its share then reads low (shown as 0), and the rest high.
    const service = Math.max(0, r.service_ticks)
    const rest = r.busy_ticks - r.server_ticks - service - r.others_ticks
    const runsText = r.runs > 1 ? `, ${r.runs} runs` : ""
    console.error(`${name.padEnd(9)} ${r.rps.toFixed(1).padStart(9)} req/s   p50 ${r.p50_ms.toFixed(2)} ms   p99 ${r.p99_ms.toFixed(2)} ms   (${r.gets} GET + ${r.heads} HEAD in ${r.duration_s.toFixed(1)} s${runsText}, errors: status ${r.non3xx}, socket ${r.socket_errors})`)
    console.error(`          CPU per request: server ${us(r.server_ticks)} us (${(r.server_ticks / r.hz / r.duration_s).toFixed(2)} of a core), service ${us(service)} us, idle servers ${us(r.others_ticks)} us, rest (wrk) ${us(rest)} us; machine busy ${(r.busy_ticks / r.hz / r.duration_s).toFixed(2)} cores`)
    console.log(JSON.stringify(r))
    if (r.requests === 0 || r.non3xx + r.socket_errors > 0) process.exit(1)' "$name" "$@" 2>&1 >"$TMP/result.json") ||
    die "phase $name had errors: $line"
  log "$line"
  printf -v "RESULT_$name" '%s' "$(cat "$TMP/result.json")"
}

# run_phase NAME PORT PATH GET_SECONDS: warm-up, a quiet service, then one measured run of
# DURATION seconds with the service stopped; sets RESULT_<NAME>.
run_phase() {
  local name=$1 port=$2
  warm "$name" "$port"
  # Not a fixed pause: until the service has digested the phase before (see Isolation above).
  quiet_service "$ALL_PID"
  # The counting run: the capture redirector's own counters before it (its warm-up included).
  if [ "$name" = count ]; then CAPTURED_BEFORE=$(scrape "$port" redirector_clicks_captured_total); fi
  pause_pids "$ALL_PID"
  measure "$name" "$port" "$3" "$4" "$DURATION"
  resume_pids "$ALL_PID"
  result "$name" "$MEASURED"
}

log "bench: throughput phases: GET {short_base}/{slug} only, every request a click on the capture redirector; $ROUNDS rounds of bare, capture, nocapture, each phase in $SLICES slices of ${SLICE}s taken in turns (the median round of each counts)"
# A long first warm-up of each server on the warm-up link: the capture redirector takes tens
# of seconds to reach its steady rate (its heap grows to the load, PostgreSQL extends the
# log's table), and the short warm-up before each phase does not get it there.
log "bench: first warm-up, ${FIRST_WARMUP}s per server"
for port in "$BARE_PORT" "$CAP_PORT" "$NOCAP_PORT"; do
  BENCH_PATH=$WARM_PATH BENCH_GET_SECONDS=$FIRST_WARMUP run_wrk "$TMP/wrk-first-warm-$port.txt" -t"$THREADS" \
    -c"$CONNECTIONS" -d"${FIRST_WARMUP}s" -s bench/redirect.lua "http://127.0.0.1:$port" || die "wrk first warm-up failed"
done
RUNS_bare=() RUNS_capture=() RUNS_nocapture=() RUNS_custom=()
PHASES="bare capture nocapture${CUSTOM_HOST:+ custom}"
port_of() { case $1 in bare) echo "$BARE_PORT" ;; capture | custom) echo "$CAP_PORT" ;; *) echo "$NOCAP_PORT" ;; esac; }
host_of() { if [ "$1" = custom ]; then echo "$CUSTOM_HOST"; fi; }
for ((round = 1; round <= ROUNDS; round++)); do
  # Each phase warmed up, the service quiet and then stopped; then the phases take turns,
  # slice by slice, so that a slow or fast spell of the machine falls on all of them.
  for phase in $PHASES; do BENCH_HOST=$(host_of "$phase") warm "$phase" "$(port_of "$phase")"; done
  quiet_service "$ALL_PID"
  pause_pids "$ALL_PID"
  SLICES_bare=() SLICES_capture=() SLICES_nocapture=() SLICES_custom=()
  for ((slice = 1; slice <= SLICES; slice++)); do
    for phase in $PHASES; do
      # A slice the host stole from is measured again (bench/lib.sh, steady_slice); the clicks
      # of a capture slice measured again still count (measure adds them to CAPTURE_GETS).
      BENCH_HOST=$(host_of "$phase") steady_slice "$phase" "$SLICE" \
        measure "$phase" "$(port_of "$phase")" "$RUN_PATH" $((SLICE + 3600)) "$SLICE"
      eval "SLICES_$phase+=(\"\$MEASURED\")"
    done
  done
  resume_pids "$ALL_PID"
  for phase in $PHASES; do
    eval "result \"\$phase\" \"\${SLICES_$phase[@]}\""
    eval "RUNS_$phase+=(\"\$RESULT_$phase\")"
  done
done
steal_summary
# scrape PORT SERIES: a series' value on that port's /metrics (-1 if absent or unreadable).
scrape() {
  curl -sS --max-time 10 "http://127.0.0.1:$1/metrics" | awk -v s="$2" '$1 == s { v = $2 } END { print (v == "" ? -1 : v) }' ||
    echo -1
}

# median NAME: the result of the round with the median req/s of that phase.
median() {
  local -n runs="RUNS_$1"
  node -e '
    const runs = process.argv.slice(1).map((s) => JSON.parse(s)).sort((a, b) => a.rps - b.rps)
    console.log(JSON.stringify(runs[(runs.length - 1) >> 1]))' "${runs[@]}"
}
RESULT_bare=$(median bare)
RESULT_capture=$(median capture)
RESULT_nocapture=$(median nocapture)
log "bench: counting run on the capture redirector: GET for $((DURATION - 2))s, then HEAD (not a click)"
run_phase count "$CAP_PORT" "$COUNT_PATH" $((DURATION - 2))

# wrk calls the script's request() once more than it sends (to verify the script): a server
# counting what arrives sees gets − 1, with 1 or 2 threads alike (checked with a counting
# node:http server).
CLICKS_SENT=$(($(printf '%s' "$RESULT_count" | json_field gets) - 1))
THROUGHPUT_LOW=$((CAPTURE_GETS + PROBE_CLICKS - CAPTURE_RUNS * CONNECTIONS))
THROUGHPUT_HIGH=$((THROUGHPUT_LOW + 2 * CAPTURE_RUNS * CONNECTIONS))
log "bench: waiting for the analytics to count $CLICKS_SENT clicks of the counting run (at most ${DRAIN_TIMEOUT}s)"
drain_start=$(date +%s)
while :; do
  COUNTED=$(counted "$COUNT_ID")
  [ "$COUNTED" -ge "$CLICKS_SENT" ] && break
  [ $(($(date +%s) - drain_start)) -lt "$DRAIN_TIMEOUT" ] || break
  sleep 1
done
sleep 2 # anything arriving late would show as an overcount
COUNTED=$(counted "$COUNT_ID")
log "bench: counting run: analytics count $COUNTED of $CLICKS_SENT clicks sent (drained after $(($(date +%s) - drain_start))s)"
# The capture redirector's own /metrics: the counting run's clicks captured (exactly what wrk
# sent), and every click it ever captured published (acknowledged by the event log).
drain_start=$(date +%s)
while :; do
  CAPTURED_TOTAL=$(scrape "$CAP_PORT" redirector_clicks_captured_total)
  PUBLISHED_TOTAL=$(scrape "$CAP_PORT" redirector_clicks_published_total)
  [ "$PUBLISHED_TOTAL" -ge "$CAPTURED_TOTAL" ] && break
  [ $(($(date +%s) - drain_start)) -lt "$DRAIN_TIMEOUT" ] || break
  sleep 1
done
METRICS_CAPTURED=$((CAPTURED_TOTAL - CAPTURED_BEFORE))
log "bench: capture redirector /metrics: counting run captured $METRICS_CAPTURED (bench sent $CLICKS_SENT, analytics $COUNTED); in all captured $CAPTURED_TOTAL, published $PUBLISHED_TOTAL"
if [ "$CAPTURED_BEFORE" -lt 0 ] || [ "$METRICS_CAPTURED" -ne "$CLICKS_SENT" ] || [ "$PUBLISHED_TOTAL" -ne "$CAPTURED_TOTAL" ]; then
  METRICS_MISMATCH=1
  log "bench: METRICS MISMATCH: /metrics of the capture redirector disagree with the bench's own counts"
fi
THROUGHPUT_COUNTED=$(counted "$LINK_ID")
# wrk's GET count includes requests written when it stopped: the server may or may not have
# answered those (at most one per connection).
if [ "$THROUGHPUT_COUNTED" -ge "$THROUGHPUT_LOW" ] && [ "$THROUGHPUT_COUNTED" -le "$THROUGHPUT_HIGH" ]; then
  log "bench: capture phases: analytics count $THROUGHPUT_COUNTED clicks, within wrk's $((THROUGHPUT_LOW + CAPTURE_RUNS * CONNECTIONS)) sent ± $((CAPTURE_RUNS * CONNECTIONS)) in flight at the cuts"
else
  log "bench: capture phases: analytics count $THROUGHPUT_COUNTED clicks, OUTSIDE wrk's $((THROUGHPUT_LOW + CAPTURE_RUNS * CONNECTIONS)) sent ± $((CAPTURE_RUNS * CONNECTIONS))"
fi

# The ratios are the median over the rounds of each round's own ratio: the three phases of a
# round run within a minute of each other, so a slow spell of the machine moves them together.
STEAL_JSON=$(steal_json) node --input-type=module -e '
  import { fixed as round, median } from "./bench/summary.mjs"
  const [b, c, n, rb, rc, rn] = process.argv.slice(1, 7).map((s) => JSON.parse(s))
  const [sent, counted] = process.argv.slice(7, 9).map(Number)
  const ru = JSON.parse(process.argv[9])
  const [metricsCaptured, capturedTotal, publishedTotal] = process.argv.slice(10, 13).map(Number)
  const captureRatios = rb.map((r, i) => rc[i].rps / r.rps)
  const nocaptureRatios = rb.map((r, i) => rn[i].rps / r.rps)
  const captureRatio = median(captureRatios)
  const nocaptureRatio = median(nocaptureRatios)
  const list = (xs) => xs.map((x) => x.toFixed(3)).join(", ")
  console.log(`rounds: capture/bare ${list(captureRatios)}; nocapture/bare ${list(nocaptureRatios)}`)
  const customRatios = ru.map((r, i) => r.rps / rc[i].rps)
  const customRatio = ru.length > 0 ? median(customRatios) : null
  if (customRatio !== null) console.log(`custom host: custom/capture per round ${list(customRatios)}; median ${customRatio.toFixed(3)} (target >= 0.90)`)
  console.log(`ratios (median of the rounds): capture/bare ${captureRatio.toFixed(3)} (target >= 0.70), nocapture/bare ${nocaptureRatio.toFixed(3)} (target >= 0.90); clicks ${counted === sent ? "exact" : "MISMATCH"}`)
  // Each server: its own CPU per request (all its threads), and bare over each: the throughput
  // ratio if the server alone set the pace (here wrk shares the two cores with it).
  const cpuUs = (r) => (r.server_ticks / r.hz) * 1e6 / r.requests
  const cpu = { bare: median(rb.map(cpuUs)), capture: median(rc.map(cpuUs)), nocapture: median(rn.map(cpuUs)) }
  const captureCpuRatio = median(rb.map((r, i) => cpuUs(r) / cpuUs(rc[i])))
  const nocaptureCpuRatio = median(rb.map((r, i) => cpuUs(r) / cpuUs(rn[i])))
  console.log(`server CPU per request (median): bare ${cpu.bare.toFixed(2)} us, capture ${cpu.capture.toFixed(2)} us, nocapture ${cpu.nocapture.toFixed(2)} us; bare/capture ${captureCpuRatio.toFixed(3)}, bare/nocapture ${nocaptureCpuRatio.toFixed(3)}`)
  console.log(JSON.stringify({
    bare_rps: round(b.rps, 1), capture_rps: round(c.rps, 1), nocapture_rps: round(n.rps, 1),
    capture_ratio: round(captureRatio, 4), nocapture_ratio: round(nocaptureRatio, 4),
    capture_p99_ms: round(c.p99_ms, 3), clicks_sent: sent, clicks_counted: counted,
    custom_ratio: customRatio === null ? null : round(customRatio, 4),
    metrics_captured: metricsCaptured, metrics_captured_total: capturedTotal, metrics_published_total: publishedTotal,
    bare_cpu_us: round(cpu.bare, 2), capture_cpu_us: round(cpu.capture, 2), nocapture_cpu_us: round(cpu.nocapture, 2),
    capture_cpu_ratio: round(captureCpuRatio, 4), nocapture_cpu_ratio: round(nocaptureCpuRatio, 4),
    ...JSON.parse(process.env.STEAL_JSON)
  }))
' "$RESULT_bare" "$RESULT_capture" "$RESULT_nocapture" "[$(IFS=,; echo "${RUNS_bare[*]}")]" \
  "[$(IFS=,; echo "${RUNS_capture[*]}")]" "[$(IFS=,; echo "${RUNS_nocapture[*]}")]" "$CLICKS_SENT" "$COUNTED" \
  "[$(IFS=,; echo "${RUNS_custom[*]}")]" "$METRICS_CAPTURED" "$CAPTURED_TOTAL" "$PUBLISHED_TOTAL"
[ "${METRICS_MISMATCH:-0}" = 0 ] || die "the capture redirector's /metrics disagree with the bench's counts (see above)"
