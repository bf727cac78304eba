#!/usr/bin/env bash
# API throughput benchmark: link create, link read, and a bare @effect/platform baseline,
# all measured in ONE run on this machine, so the ratio read_rps/bare_rps is comparable
# across noisy machines even when the absolute numbers are not. It never fails on speed;
# it fails only if something does not start or a phase gets errors instead of answers.
#
#   bash bench/api.sh            (or: npm run bench:api)
#
# Tunables (environment):
#   BENCH_DURATION=10s      length of each measured wrk phase
#   BENCH_WARMUP=3s         length of the warm-up before each phase (0 to skip)
#   BENCH_THREADS=2         wrk threads
#   BENCH_CONNECTIONS=32    wrk connections
#   BENCH_API_PORT=18480    first port tried for the API (next free one is used)
#   BENCH_BARE_PORT=18490   first port tried for the bare server
#   BENCH_KEEP=1            keep the temporary DATA_DIR and server logs
#
# Everything runs in a temporary DATA_DIR with the embedded PostgreSQL (DATABASE_URL is
# ignored), the service with LOG_LEVEL=Warn. Human-readable lines come first; the last
# line on stdout is exactly one JSON object:
#   {"create_rps": N, "read_rps": N, "bare_rps": N, "read_ratio": N}
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

DURATION=${BENCH_DURATION:-10s}
WARMUP=${BENCH_WARMUP:-3s}
THREADS=${BENCH_THREADS:-2}
CONNECTIONS=${BENCH_CONNECTIONS:-32}

BENCH_NAME=bench/api.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
ensure_wrk
command -v curl >/dev/null 2>&1 || die "curl is required"
[ -d node_modules/tsx ] || die "node_modules is missing: run npm ci first"

# --- temporary data dir, ports ---------------------------------------------------------
TMP=$(mktemp -d "${TMPDIR:-/tmp}/shortlinks-bench.XXXXXX")
DATA_DIR_BENCH=$TMP/data
mkdir -p "$DATA_DIR_BENCH"
# As root the embedded PostgreSQL runs as the `postgres` user, which must be able to
# traverse every directory above its data dir (mktemp makes this one 0700).
chmod 0711 "$TMP"
API_PID=""
BARE_PID=""
WRK_PID=""

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  stop_pid "$WRK_PID" 5
  stop_pid "$BARE_PID" 10
  stop_pid "$API_PID" 60
  stop_embedded_postgres "$DATA_DIR_BENCH"
  if [ "$status" -ne 0 ]; then
    for f in api.log bare.log; do
      if [ -s "$TMP/$f" ]; then
        printf -- '--- last lines of %s ---\n' "$f" >&2
        tail -n 30 "$TMP/$f" >&2 || true
      fi
    done
  fi
  if [ "${BENCH_KEEP:-0}" = 1 ]; then
    printf 'bench/api.sh: kept %s\n' "$TMP" >&2
  else
    rm -rf "$TMP"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The service's environment: its ports, embedded engines under the temporary DATA_DIR.
service_env "${BENCH_API_PORT:-18480}"
free_port BARE_PORT "${BENCH_BARE_PORT:-18490}"
# The bench account's plan: request rate and link quota out of reach, so the rate limiter and
# the usage counter run on every request (they are part of what is measured) but never refuse.
export PLANS='{"bench":{"requests_per_second":1000000000,"request_burst":1000000000,"links_per_month":1000000000000}}'

NODE_VERSION=$(node --version)
log "bench: node $NODE_VERSION, $(nproc 2>/dev/null || echo '?') cpus, wrk -t$THREADS -c$CONNECTIONS -d$DURATION (warm-up $WARMUP)"

# --- start the service and the bare server (same Node, same tsx loader) -------------------
start=$(date +%s)
node --import tsx apps/all/main.ts >"$TMP/api.log" 2>&1 &
API_PID=$!
wait_http "$API/v1/openapi.json" "$API_PID" "the API (apps/all/main.ts)"
log "bench: API up on port $API_PORT after $(($(date +%s) - start))s (embedded PostgreSQL in $DATA_DIR)"

BARE_PORT=$BARE_PORT node --import tsx bench/bare.ts >"$TMP/bare.log" 2>&1 &
BARE_PID=$!
wait_http "http://127.0.0.1:$BARE_PORT/health" "$BARE_PID" "the bare server (bench/bare.ts)" 60
log "bench: bare @effect/platform server up on port $BARE_PORT"

# --- account, key, one link to read -----------------------------------------------------
ACCOUNT_JSON=$(npm run --silent cli -- accounts create --name bench --plan bench --json) || die "cli accounts create failed"
ACCOUNT_ID=$(printf '%s' "$ACCOUNT_JSON" | tail -n 1 | json_field id) || die "cli accounts create printed no id"
KEY_JSON=$(npm run --silent cli -- keys create --account "$ACCOUNT_ID" --scopes links:read,links:write --json) ||
  die "cli keys create failed"
API_KEY=$(printf '%s' "$KEY_JSON" | tail -n 1 | json_field key) || die "cli keys create printed no key"
log "bench: account $ACCOUNT_ID, key $(printf '%s' "$KEY_JSON" | tail -n 1 | json_field id)"

CREATE_OUT=$(curl -sS --max-time 30 -w '\n%{http_code}' -X POST "$API/v1/links" \
  -H "Authorization: Bearer $API_KEY" -H "Content-Type: application/json" \
  -H "Idempotency-Key: bench-setup-$$-$RANDOM$RANDOM" \
  --data '{"url":"https://example.com/bench/read"}') || die "POST /v1/links failed"
CREATE_STATUS=$(printf '%s' "$CREATE_OUT" | tail -n 1)
[[ $CREATE_STATUS == 2* ]] || die "POST /v1/links answered $CREATE_STATUS: $(printf '%s' "$CREATE_OUT" | head -n -1)"
LINK_ID=$(printf '%s' "$CREATE_OUT" | head -n -1 | json_field data.id) || die "POST /v1/links returned no data.id"
READ_STATUS=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 -H "Authorization: Bearer $API_KEY" "$API/v1/links/$LINK_ID")
[ "$READ_STATUS" = 200 ] || die "GET /v1/links/$LINK_ID answered $READ_STATUS"
log "bench: link $LINK_ID to read"

# --- phases ---------------------------------------------------------------------------
export BENCH_API_KEY=$API_KEY BENCH_DIR=$ROOT/bench
RUN_ID=$(date +%s)-$$

# run_phase NAME URL [wrk args...]: warm-up, then the measured run; sets RESULT_<NAME>.
run_phase() {
  local name=$1 url=$2
  shift 2
  local out=$TMP/wrk-$name.txt line
  if [ "$WARMUP" != 0 ] && [ "$WARMUP" != 0s ]; then
    BENCH_RUN_ID=$RUN_ID-warm run_wrk "$TMP/wrk-$name-warm.txt" -t"$THREADS" -c"$CONNECTIONS" --timeout 10s -d"$WARMUP" "$@" "$url" ||
      die "wrk warm-up of $name failed: $(cat "$TMP/wrk-$name-warm.txt")"
  fi
  sleep 1
  BENCH_RUN_ID=$RUN_ID run_wrk "$out" -t"$THREADS" -c"$CONNECTIONS" --timeout 10s -d"$DURATION" --latency "$@" "$url" || die "wrk $name failed: $(cat "$out")"
  line=$(grep '^WRK_RESULT ' "$out" | tail -n 1 | cut -d' ' -f2-)
  [ -n "$line" ] || die "wrk $name printed no result: $(cat "$out")"
  node -e '
    const [name, json] = process.argv.slice(1)
    const r = JSON.parse(json)
    console.log(`${name.padEnd(6)} ${r.rps.toFixed(1).padStart(9)} req/s   p50 ${r.p50_ms.toFixed(2)} ms   p99 ${r.p99_ms.toFixed(2)} ms   (${r.requests} requests in ${r.duration_s.toFixed(1)} s, non-2xx ${r.non2xx}, socket errors ${r.socket_errors})`)
    const bad = r.non2xx + r.socket_errors
    if (r.requests === 0 || bad > r.requests * 0.01) {
      console.error(`bench/api.sh: ${name}: ${bad} of ${r.requests} requests failed; the figure is not a throughput`)
      process.exit(1)
    }' "$name" "$line" || die "phase $name had errors (see $out)"
  printf -v "RESULT_$name" '%s' "$line"
}

log "bench: create = POST /v1/links (new Idempotency-Key each), read = GET /v1/links/{id}, bare = fixed JSON"
run_phase create "$API" -s bench/create.lua
run_phase read "$API/v1/links/$LINK_ID" -s bench/report.lua -H "Authorization: Bearer $API_KEY"
run_phase bare "http://127.0.0.1:$BARE_PORT/v1/links/$LINK_ID" -s bench/report.lua -H "Authorization: Bearer $API_KEY"

# --- summary ----------------------------------------------------------------------------
node -e '
  const [c, r, b] = process.argv.slice(1).map((s) => JSON.parse(s))
  const round = (x, d) => Number(x.toFixed(d))
  console.log(`ratios: read/bare ${(r.rps / b.rps).toFixed(3)}, create/bare ${(c.rps / b.rps).toFixed(3)}, create/read ${(c.rps / r.rps).toFixed(3)}`)
  console.log(`{"create_rps": ${round(c.rps, 1)}, "read_rps": ${round(r.rps, 1)}, "bare_rps": ${round(b.rps, 1)}, "read_ratio": ${round(r.rps / b.rps, 4)}}`)
' "$RESULT_create" "$RESULT_read" "$RESULT_bare"
