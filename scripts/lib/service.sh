# Process management shared by the scripts that run a test server in the background
# (scripts/kafka.sh, scripts/clickhouse.sh): locking, pid tracking, start/stop/status and the
# start|stop|status dispatch. Sourced, not run; the caller has `set -euo pipefail`.
#
# The caller sets, before calling svc_main:
#   SVC_NAME            prefix of log lines and lock messages        (e.g. kafka.sh)
#   SVC_NOUN            what runs, in messages                       (broker, server)
#   SVC_AT              preposition before its address in messages   (on, at)
#   SVC_ENV_VAR         variable printed on stdout as VAR=address    (TEST_KAFKA_BROKERS)
#   SVC_ADDRESS         the address this configuration listens on    (127.0.0.1:19092)
#   SVC_PROC_PATTERN    grep pattern its /proc/<pid>/cmdline matches (pid reuse guard)
#   SVC_WORKDIR_PREFIX  basename prefix of its temp dir; only such dirs are ever deleted
#   SVC_STATE_DIR       directory for the files below
#   SVC_PID_FILE, SVC_LOCK_FILE, SVC_LOG_FILE
#   SVC_WORK_FILE       holds the path of the temp dir with config and data
#   SVC_ADDR_FILE       holds the address the running server listens on
#   SVC_STOP_TIMEOUT    seconds between SIGTERM and SIGKILL
# and defines:
#   service_start            start a new server (called locked, with no server running and
#                            leftovers cleaned); uses svc_require_free_ports, svc_make_workdir,
#                            svc_spawn, svc_wait_ready, svc_print_address
#   service_ready            exit 0 once the server answers
#   service_show_log DIR     show the tail of its logs on stderr (startup failed)
#   service_status_note ADDR what `status` prints after "running (pid P, RSS R, "
# and may override:
#   service_reuse_note ADDR  appended to "already running (pid P" (default: nothing)
#
# The lock is fd 9, held until the script exits; anything long-lived it starts gets 9>&-.

log() { echo "$SVC_NAME: $*" >&2; }
die() { log "$*"; exit 1; }

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

service_reuse_note() { :; }

svc_lock() {
  exec 9>"$SVC_LOCK_FILE"
  flock -w 300 9 || die "another $SVC_NAME holds $SVC_LOCK_FILE"
}

# The pid of our running server, or nothing. A pid file whose process is gone, or is not
# ours (pid reuse), counts as not running.
running_pid() {
  [[ -f "$SVC_PID_FILE" ]] || return 0
  local pid
  pid="$(cat "$SVC_PID_FILE" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "$SVC_PROC_PATTERN"; then
    echo "$pid"
  fi
}

# The address of the running server (as recorded at start), else the configured one.
svc_address() { cat "$SVC_ADDR_FILE" 2>/dev/null || echo "$SVC_ADDRESS"; }

svc_print_address() { echo "$SVC_ENV_VAR=$1"; }

# Remove what a crashed or killed run left behind (stale pid file, temp dir).
cleanup_leftovers() {
  if [[ -f "$SVC_WORK_FILE" ]]; then
    local dir
    dir="$(cat "$SVC_WORK_FILE")"
    # Only ever delete a directory this script created.
    if [[ "$(basename "$dir")" == "$SVC_WORKDIR_PREFIX".* && -d "$dir" ]]; then rm -rf "$dir"; fi
    rm -f "$SVC_WORK_FILE"
  fi
  rm -f "$SVC_PID_FILE" "$SVC_ADDR_FILE"
}

svc_require_free_ports() {
  local host="$1" p
  shift
  for p in "$@"; do
    ! port_open "$host" "$p" || die "port $host:$p is already in use by another process"
  done
}

# A new temp dir for config and data, recorded in $SVC_WORK_FILE; its path is left in WORKDIR.
svc_make_workdir() {
  WORKDIR="$(mktemp -d "${TMPDIR:-/tmp}/$SVC_WORKDIR_PREFIX.XXXXXX")"
  echo "$WORKDIR" >"$SVC_WORK_FILE"
}

# svc_spawn CWD COMMAND...: run COMMAND in CWD, in a new session, stdin closed and output
# appended to the log, so it outlives this script and holds no caller's pipe open (nor our
# lock: fd 9 is closed for it). The child writes its own pid before exec'ing COMMAND.
svc_spawn() {
  local cwd="$1"
  shift
  setsid bash -c 'echo $$ >"$1"; cd "$2"; shift 2; exec "$@"' _ "$SVC_PID_FILE" "$cwd" \
    "$@" >>"$SVC_LOG_FILE" 2>&1 </dev/null 9>&- &
  echo "$SVC_ADDRESS" >"$SVC_ADDR_FILE"
}

# svc_wait_ready DIR TIMEOUT INTERVAL TIMEOUT-MESSAGE: poll service_ready every INTERVAL
# seconds; leaves the server's pid in SERVICE_PID. Dies (after showing the log and cleaning
# up) when the server exits first, or with TIMEOUT-MESSAGE after TIMEOUT seconds.
svc_wait_ready() {
  local dir="$1" timeout="$2" interval="$3" message="$4" pid
  local deadline=$((SECONDS + timeout))
  while :; do
    pid="$(cat "$SVC_PID_FILE" 2>/dev/null || true)"
    if [[ -n "$pid" ]] && ! kill -0 "$pid" 2>/dev/null; then
      service_show_log "$dir"
      cleanup_leftovers
      die "$SVC_NOUN exited during startup (log: $SVC_LOG_FILE)"
    fi
    if service_ready; then break; fi
    if ((SECONDS >= deadline)); then
      service_show_log "$dir"
      svc_stop_locked
      die "$message"
    fi
    sleep "$interval"
  done
  SERVICE_PID="$pid"
}

svc_start() {
  mkdir -p "$SVC_STATE_DIR"
  svc_lock
  local pid
  pid="$(running_pid)"
  if [[ -n "$pid" ]]; then
    local addr
    addr="$(svc_address)"
    [[ "$addr" == "$SVC_ADDRESS" ]] \
      || die "a $SVC_NOUN started by this script already runs $SVC_AT $addr (pid $pid); stop it first"
    log "already running (pid $pid$(service_reuse_note "$addr"))"
    svc_print_address "$addr"
    return 0
  fi
  cleanup_leftovers
  service_start
}

svc_stop_locked() {
  local pid
  pid="$(running_pid)"
  if [[ -n "$pid" ]]; then
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + SVC_STOP_TIMEOUT))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
      log "no exit ${SVC_STOP_TIMEOUT}s after SIGTERM; sending SIGKILL to $pid"
      kill -KILL "$pid" 2>/dev/null || true
      while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    fi
    log "stopped (pid $pid)"
  else
    log "not running"
  fi
  cleanup_leftovers
}

svc_stop() {
  [[ -d "$SVC_STATE_DIR" ]] || { log "not running"; return 0; }
  svc_lock
  svc_stop_locked
}

svc_status() {
  local pid
  pid="$(running_pid)"
  if [[ -n "$pid" ]]; then
    local addr rss
    addr="$(svc_address)"
    rss="$(awk '/^VmRSS/ {print $2 " " $3}' "/proc/$pid/status" 2>/dev/null || true)"
    log "running (pid $pid, RSS ${rss:-?}, $(service_status_note "$addr"))"
    svc_print_address "$addr"
  else
    log "not running"
    return 3
  fi
}

svc_main() {
  case "${1:-}" in
    start) svc_start ;;
    stop) svc_stop ;;
    status) svc_status ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
  esac
}
