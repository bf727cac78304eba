#!/usr/bin/env bash
# The hosted-image pipeline, measured in ONE run on this machine (ratios, because absolute
# numbers move with the machine's noise): upload-to-ready of a ~10 MiB JPEG, a small PNG and
# an animated GIF next to a bare sharp(...).webp() of the same file with the same settings,
# and the redirector's throughput while conversions run over the same without them. See
# bench/images.ts for the method.
#
#   bash bench/images.sh            (or: npm run bench:images)
#
# Tunables: BENCH_DURATION (seconds per wrk phase, default 10), BENCH_RUNS (uploads per file,
# default 3), BENCH_KEEP=1 keeps the temporary dir.
#
# The service runs on the embedded default (embedded PostgreSQL and event log, chDB,
# filesystem blobs) in a temporary DATA_DIR, with IMAGE_CLASSIFIER=none so that
# classification after publication does not load the machine between measurements. The
# last line on stdout is one JSON object:
#   {"jpeg_ratio", "png_ratio", "gif_ratio", "redirect_under_load_ratio"}
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BENCH_NAME=bench/images.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
ensure_wrk
command -v curl >/dev/null 2>&1 || die "curl is required"
[ -d node_modules/tsx ] || die "node_modules is missing: run npm install first"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/shortlinks-bench-images.XXXXXX")
DATA_DIR_BENCH=$TMP/data
mkdir -p "$DATA_DIR_BENCH"
chmod 0711 "$TMP" # the embedded PostgreSQL runs as `postgres` when we are root
ALL_PID="" DRIVER_PID=""

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  stop_pid "$DRIVER_PID" 5
  stop_pid "$ALL_PID" 60
  stop_embedded_postgres "$DATA_DIR_BENCH"
  if [ "$status" -ne 0 ] && [ -s "$TMP/all.log" ]; then
    printf -- '--- last lines of the service log ---\n' >&2
    tail -n 30 "$TMP/all.log" >&2 || true
  fi
  if [ "${BENCH_KEEP:-0}" = 1 ]; then printf '%s: kept %s\n' "$BENCH_NAME" "$TMP" >&2; else rm -rf "$TMP"; fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

service_env 18680
unset S3_BUCKET
export IMAGE_CLASSIFIER=none

start_service
wait_http "http://127.0.0.1:$SHORT_PORT/readyz" "$ALL_PID" "the redirector" 60 200

bench_account
API_KEY=$(npm run --silent cli -- keys create --account "$ACCOUNT_ID" --scopes images:read,images:write,links:write --json |
  tail -n 1 | json_field key) || die "cli keys create failed"

BENCH_API=$API/v1 BENCH_KEY=$API_KEY BENCH_SHORT=http://127.0.0.1:$SHORT_PORT BENCH_TMP=$TMP \
  BENCH_DURATION=${BENCH_DURATION:-10} BENCH_RUNS=${BENCH_RUNS:-3} \
  node --import tsx bench/images.ts &
DRIVER_PID=$!
wait "$DRIVER_PID"
DRIVER_PID=""
