#!/usr/bin/env bash
# A real ClickHouse server for the test suites (TEST_CLICKHOUSE_URL), from Debian's
# clickhouse-server package, run as a background process of our own with our own config in
# a temp dir (never the system service). Nothing it creates lives in the repository.
#
#   scripts/clickhouse.sh start    start (or reuse) it; prints TEST_CLICKHOUSE_URL=http://...
#   scripts/clickhouse.sh stop     stop it and delete its data (a no-op when nothing runs)
#   scripts/clickhouse.sh status   exit 0 and print the URL when running, exit 3 when not
#
# Environment (all optional):
#   CLICKHOUSE_HTTP_PORT        HTTP interface on 127.0.0.1   (default 18123)
#   CLICKHOUSE_TCP_PORT         native protocol on 127.0.0.1  (default 19000)
#   CLICKHOUSE_STATE_DIR        pid, log, work-dir pointer    (default /tmp/shortlinks-clickhouse-state)
#   CLICKHOUSE_START_TIMEOUT    seconds to wait for /ping     (default 60)
#   CLICKHOUSE_STOP_TIMEOUT     seconds between SIGTERM and SIGKILL (default 30)
#
# WHAT THIS SERVER SUPPORTS AND LACKS. Debian bookworm ships ClickHouse 18.16.1 (Dec 2018);
# each item was tried over HTTP (curl) and with @clickhouse/client 1.23 against it. Keep the
# server-path analytics SQL to the "works" list, or gate the rest.
#   works:
#     - MergeTree family with PARTITION BY / ORDER BY syntax; ReplacingMergeTree(ver) and
#       SELECT ... FINAL (also with WHERE); OPTIMIZE TABLE ... FINAL; ALTER ... DELETE
#     - AggregatingMergeTree with AggregateFunction(uniq, String) / AggregateFunction(count)
#       columns, filled by INSERT ... SELECT uniqState(x), countState() and read back with
#       uniqMerge()/countMerge(); also CREATE MATERIALIZED VIEW ... ENGINE =
#       AggregatingMergeTree() ... AS SELECT ... uniqState(...) fed by inserts into the source
#     - toStartOfHour, toStartOfFifteenMinutes, toStartOfDay, toMonday, toStartOfMonth, with an
#       optional time zone argument; DateTime('UTC') columns; server time zone is set to UTC
#     - INSERT INTO t FORMAT JSONEachRow over HTTP (query in the URL, rows in the body);
#       DateTime values as 'YYYY-MM-DD hh:mm:ss' or unix seconds; ISO 8601 ('...T...Z') only
#       with the setting date_time_input_format=best_effort (fractional seconds are dropped);
#       input_format_skip_unknown_fields=1 works
#     - SELECT ... FORMAT JSON / JSONEachRow; (U)Int64 are quoted strings in JSON unless
#       output_format_json_quote_64bit_integers=0, same as current servers
#     - Nullable, Enum8, UUID, uniq/uniqExact/count(DISTINCT), topK, LIMIT n BY, WITH,
#       UNION ALL, ANY LEFT JOIN ... USING / ON
#     - @clickhouse/client 1.23: ping, query (JSON, JSONEachRow), command, insert
#       (JSONEachRow, with columns), clickhouse_settings
#   lacks:
#     - query parameters {name:Type} (19.x): the braces are a syntax error and param_x is an
#       "Unknown setting", so @clickhouse/client's query_params fails on this server; bind
#       values client-side (quote/escape) on the server path, or gate the feature
#     - DateTime64 and toDateTime64 (20.x): store milliseconds as UInt64/Int64, or DateTime
#     - LowCardinality is experimental: CREATE TABLE with a LowCardinality(String) column
#       fails unless the query setting allow_experimental_low_cardinality_type=1 is sent
#       (e.g. ?allow_experimental_low_cardinality_type=1); use plain String instead
#     - toStartOfInterval(t, INTERVAL n unit) (19.x): use toStartOfHour and friends
#     - SimpleAggregateFunction type (19.8), ReplacingMergeTree(ver, is_deleted) (23.x),
#       TTL clauses (19.6), IPv4/IPv6 column types (19.x), async_insert setting (21.11)
set -euo pipefail

# shellcheck source=lib/service.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/service.sh"

HTTP_PORT="${CLICKHOUSE_HTTP_PORT:-18123}"
TCP_PORT="${CLICKHOUSE_TCP_PORT:-19000}"
START_TIMEOUT="${CLICKHOUSE_START_TIMEOUT:-60}"
HOST=127.0.0.1
SERVER_BIN=/usr/sbin/clickhouse-server
URL="http://$HOST:$HTTP_PORT"

SVC_NAME=clickhouse.sh
SVC_NOUN=server
SVC_AT=at
SVC_ENV_VAR=TEST_CLICKHOUSE_URL
SVC_ADDRESS="$URL"
SVC_PROC_PATTERN=clickhouse
SVC_WORKDIR_PREFIX=shortlinks-clickhouse
SVC_STATE_DIR="${CLICKHOUSE_STATE_DIR:-/tmp/shortlinks-clickhouse-state}"
SVC_PID_FILE="$SVC_STATE_DIR/clickhouse.pid"
SVC_LOCK_FILE="$SVC_STATE_DIR/lock"
SVC_LOG_FILE="$SVC_STATE_DIR/clickhouse.log"   # stdout/stderr of the process
SVC_WORK_FILE="$SVC_STATE_DIR/workdir"
SVC_ADDR_FILE="$SVC_STATE_DIR/url"
SVC_STOP_TIMEOUT="${CLICKHOUSE_STOP_TIMEOUT:-30}"

query() { curl -sS --fail-with-body --max-time 10 "$1/" --data-binary "$2"; }

ensure_installed() {
  if [[ -x "$SERVER_BIN" ]] && command -v clickhouse-client >/dev/null; then return 0; fi
  log "installing clickhouse-server and clickhouse-client from Debian (once)"
  local sudo=()
  [[ "$(id -u)" == 0 ]] || sudo=(sudo)
  # The package's postinst would start the system service (port 8123/9000) through
  # invoke-rc.d; a temporary policy-rc.d forbids that, unless one already exists.
  local policy=/usr/sbin/policy-rc.d ours=
  if [[ ! -e "$policy" ]]; then
    printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
    "${sudo[@]}" chmod 755 "$policy"
    ours=1
    trap "${sudo[*]} rm -f $policy" EXIT
  fi
  local apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q
    --no-install-recommends clickhouse-server clickhouse-client)
  if ! "${apt[@]}" >&2; then
    "${sudo[@]}" apt-get update -q >&2
    "${apt[@]}" >&2
  fi
  if [[ -n "$ours" ]]; then "${sudo[@]}" rm -f "$policy"; trap - EXIT; fi
  [[ -x "$SERVER_BIN" ]] || die "clickhouse-server did not install"
}

write_config() {
  local dir="$1"
  mkdir -p "$dir/data" "$dir/tmp" "$dir/user_files" "$dir/format_schemas" "$dir/log"
  cat >"$dir/config.xml" <<EOF
<?xml version="1.0"?>
<!-- Test server written by scripts/clickhouse.sh. -->
<yandex>
    <logger>
        <level>information</level>
        <log>$dir/log/clickhouse-server.log</log>
        <errorlog>$dir/log/clickhouse-server.err.log</errorlog>
        <size>100M</size>
        <count>2</count>
    </logger>
    <listen_host>$HOST</listen_host>
    <http_port>$HTTP_PORT</http_port>
    <tcp_port>$TCP_PORT</tcp_port>
    <max_connections>1024</max_connections>
    <keep_alive_timeout>10</keep_alive_timeout>
    <max_concurrent_queries>100</max_concurrent_queries>
    <uncompressed_cache_size>134217728</uncompressed_cache_size>
    <mark_cache_size>134217728</mark_cache_size>
    <path>$dir/data/</path>
    <tmp_path>$dir/tmp/</tmp_path>
    <user_files_path>$dir/user_files/</user_files_path>
    <format_schema_path>$dir/format_schemas/</format_schema_path>
    <users_config>$dir/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <mlock_executable>false</mlock_executable>
    <builtin_dictionaries_reload_interval>3600</builtin_dictionaries_reload_interval>
    <max_session_timeout>3600</max_session_timeout>
    <default_session_timeout>60</default_session_timeout>
</yandex>
EOF
  cat >"$dir/users.xml" <<'EOF'
<?xml version="1.0"?>
<yandex>
    <profiles>
        <default>
            <max_memory_usage>2000000000</max_memory_usage>
            <use_uncompressed_cache>0</use_uncompressed_cache>
            <load_balancing>random</load_balancing>
        </default>
    </profiles>
    <users>
        <default>
            <password></password>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas>
        <default>
            <interval>
                <duration>3600</duration>
                <queries>0</queries>
                <errors>0</errors>
                <result_rows>0</result_rows>
                <read_rows>0</read_rows>
                <execution_time>0</execution_time>
            </interval>
        </default>
    </quotas>
</yandex>
EOF
}

server_version() { query "$1" 'SELECT version()' || echo '?'; }

service_start() {
  command -v curl >/dev/null || die "curl is required"
  svc_require_free_ports "$HOST" "$HTTP_PORT" "$TCP_PORT"
  ensure_installed
  local t0=$SECONDS dir
  svc_make_workdir
  dir="$WORKDIR"
  write_config "$dir"

  # Runs as the invoking user (root in CI): this version does not insist on a dedicated user,
  # and everything it writes is in $dir, which is also its working directory (the server may
  # write relative paths). The log holds this run's output only.
  : >"$SVC_LOG_FILE"
  svc_spawn "$dir" "$SERVER_BIN" --config-file="$dir/config.xml"
  svc_wait_ready "$dir" "$START_TIMEOUT" 0.2 "server not ready after ${START_TIMEOUT}s"
  log "started ClickHouse $(query "$URL" 'SELECT version()') in $((SECONDS - t0))s (pid $SERVICE_PID, data $dir)"
  svc_print_address "$URL"
}

service_ready() { [[ "$(curl -s --max-time 2 "$URL/ping" 2>/dev/null || true)" == "Ok." ]]; }
service_show_log() { tail -n 30 "$SVC_LOG_FILE" "$1/log/clickhouse-server.err.log" >&2 2>/dev/null || true; }
service_reuse_note() { echo ", version $(server_version "$1")"; }
service_status_note() { echo "version $(server_version "$1"), data $(cat "$SVC_WORK_FILE" 2>/dev/null)"; }

svc_main "$@"
