#!/usr/bin/env bash
# Analytics query cost at scale: fills chDB (in-process, in a temporary directory) with
# synthetic clicks of one link (100 million by default, spread over a year) plus some for a
# thousand other links, through the projector's own input table (Null table -> materialized
# view -> hourly/daily rollup; the synthetic clicks are turned into the input's rollup rows,
# one per click and rollup row, in SQL), then times the per-link query the API runs (totals, day
# series, four breakdowns) for the last 30 days and for a whole year, next to a baseline that
# scans the same link's raw rows once (count of human clicks in a MergeTree of one row per
# click, filled by its own inserts of the same clicks). Ratios from one run on one machine; it never fails on
# speed, only when the rollup and the raw rows disagree on the counts.
#
#   bash bench/analytics.sh
#
# Tunables (environment):
#   BENCH_CLICKS=100000000      clicks of the measured link
#   BENCH_OTHER_CLICKS=5000000  clicks spread over 1000 other links
#   BENCH_DIR=<dir>             chDB directory (default: a temporary one)
#   BENCH_KEEP=1                keep BENCH_DIR afterwards
#
# Progress goes to stderr; stdout is exactly one JSON line:
#   {"clicks":N,"other_clicks":N,"fill_seconds":N,"rollup_rows":N,"rollup_rows_link":N,
#    "query_30d_ms":N,"query_366d_ms":N,"raw_count_ms":N,"ratio_366d_to_raw_count":N}
# Filling takes a while (each synthetic click becomes ten rollup rows before they aggregate,
# and sparse links aggregate little): about 13 minutes on two cores, most of it the other
# links and the final merge. One run here (with the first version of the tables) gave:
#   {"clicks":100000000,"other_clicks":5000000,"fill_seconds":773.9,"rollup_rows":42042520,
#    "rollup_rows_link":4075942,"query_30d_ms":43.2,"query_366d_ms":156.5,"raw_count_ms":1711.5,
#    "ratio_366d_to_raw_count":0.09}
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ -d node_modules/chdb ] || { echo "bench/analytics.sh: node_modules is missing: run npm ci first" >&2; exit 1; }
exec node --import tsx bench/analytics.ts
