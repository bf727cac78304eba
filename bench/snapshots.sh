#!/usr/bin/env bash
# Snapshot capture, measured in ONE run (a ratio, because absolute numbers move with the
# machine's noise): the capture of a local page with 50 resources through the real capture
# path against the sum of bare HTTP fetches of the same URLs. See bench/snapshots.ts.
#
#   bash bench/snapshots.sh            (or: npm run bench:snapshots)
#
# Needs a PostgreSQL server: BENCH_DATABASE_URL, else TEST_DATABASE_URL, else
# postgres://postgres@127.0.0.1:5432/postgres (a temporary database is created and dropped).
# Tunables: BENCH_RESOURCES (default 50), BENCH_RUNS (default 5). The last line on stdout is
# one JSON object: {"resources", "capture_ms", "bare_sum_ms", "ratio"}.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ -d node_modules/tsx ] || { echo "bench/snapshots.sh: node_modules is missing: run npm install first" >&2; exit 1; }
exec node --import tsx bench/snapshots.ts
