# Shared by the bench/*.sh scripts (sourced, not run): logging, wrk install, free ports,
# process stop, HTTP wait, JSON field extraction. The sourcing script sets BENCH_NAME.

log() { printf '%s\n' "$*"; }
die() {
  printf '%s: %s\n' "${BENCH_NAME:-bench}" "$*" >&2
  exit 1
}

ensure_wrk() {
  command -v wrk >/dev/null 2>&1 && return 0
  log "wrk not found; installing it with apt-get"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  ($sudo apt-get install -y -qq wrk >/dev/null 2>&1 || { $sudo apt-get update -qq >/dev/null && $sudo apt-get install -y -qq wrk >/dev/null; }) ||
    die "could not install wrk (apt-get install -y wrk)"
  command -v wrk >/dev/null 2>&1 || die "wrk is still missing after apt-get"
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
TAKEN_PORTS=" "
# free_port VAR FIRST: the first port from FIRST that nothing listens on and that this
# script has not handed out yet, into VAR.
free_port() {
  local p=$2
  while port_in_use "$p" || [[ $TAKEN_PORTS == *" $p "* ]]; do
    p=$((p + 1))
    [ "$p" -lt 65535 ] || die "no free port from $2"
  done
  TAKEN_PORTS="$TAKEN_PORTS$p "
  printf -v "$1" '%s' "$p"
}

# service_env FIRST: the service's environment for a benchmark. Free ports from FIRST for
# every server the service (apps/all/main.ts) or a workers process opens (API_PORT,
# SHORT_PORT, MEDIA_PORT, SNAPSHOT_PORT, WORKERS_PORT), exported with its public bases;
# embedded engines under DATA_DIR_BENCH (no DATABASE_URL, KAFKA_BROKERS or CLICKHOUSE_URL from
# the caller's environment), LOG_LEVEL=Warn; API: the API's address.
service_env() {
  free_port API_PORT "$1"
  free_port SHORT_PORT $((API_PORT + 1))
  free_port MEDIA_PORT $((SHORT_PORT + 1))
  free_port SNAPSHOT_PORT $((MEDIA_PORT + 1))
  free_port WORKERS_PORT $((SNAPSHOT_PORT + 1))
  API=http://127.0.0.1:$API_PORT
  unset DATABASE_URL KAFKA_BROKERS CLICKHOUSE_URL
  export DATA_DIR=$DATA_DIR_BENCH API_PORT SHORT_PORT MEDIA_PORT SNAPSHOT_PORT WORKERS_PORT LOG_LEVEL=Warn
  export PUBLIC_API_BASE=$API/v1 PUBLIC_SHORT_BASE=http://127.0.0.1:$SHORT_PORT PUBLIC_IMAGE_HOST=http://127.0.0.1:$MEDIA_PORT
}

# Stop one process we started: SIGTERM, wait up to $2 s, then SIGKILL.
stop_pid() {
  local pid=$1 secs=${2:-30} i
  [ -n "$pid" ] || return 0
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < secs * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    printf '%s: pid %s did not stop after SIGTERM; killing it\n' "${BENCH_NAME:-bench}" "$pid" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

# stop_embedded_postgres DATA_DIR: the service stops its embedded PostgreSQL on shutdown; if
# it could not (killed), stop the server of that data dir (and only that one).
stop_embedded_postgres() {
  local pidfile=$1/postgres/postmaster.pid pgpid i
  [ -f "$pidfile" ] || return 0
  pgpid=$(head -n 1 "$pidfile" 2>/dev/null || true)
  if [[ $pgpid =~ ^[0-9]+$ ]] && kill -0 "$pgpid" 2>/dev/null; then
    printf '%s: stopping leftover embedded PostgreSQL (pid %s)\n' "${BENCH_NAME:-bench}" "$pgpid" >&2
    kill -INT "$pgpid" 2>/dev/null || true
    for ((i = 0; i < 300; i++)); do
      kill -0 "$pgpid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$pgpid" 2>/dev/null && kill -KILL "$pgpid" 2>/dev/null || true
  fi
}

# Wait until $1 answers HTTP with status $5 (default: any status), while pid $2 is alive.
wait_http() {
  local url=$1 pid=$2 name=$3 secs=${4:-180} want=${5:-} i code
  for ((i = 0; i < secs * 5; i++)); do
    kill -0 "$pid" 2>/dev/null || die "$name exited during start-up"
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$url" || true)
    if [ -z "$want" ] && [ "$code" != 000 ]; then return 0; fi
    if [ -n "$want" ] && [ "$code" = "$want" ]; then return 0; fi
    sleep 0.2
  done
  die "$name did not answer on $url within ${secs}s"
}

# json_field PATH < json: the string or number at a dotted path, or fail.
json_field() { node -e 'let s="";process.stdin.on("data",c=>s+=c).on("end",()=>{let v=JSON.parse(s);for(const k of process.argv[1].split("."))v=v?.[k];if((typeof v!=="string"||!v)&&typeof v!=="number"){process.stderr.write("no "+process.argv[1]+" in: "+s+"\n");process.exit(1)}process.stdout.write(String(v))})' "$1"; }

# run_wrk OUT ARGS...: wrk in the background so that a signal to the script interrupts the
# wait at once (bash runs traps only between foreground commands); cleanup stops WRK_PID.
WRK_PID=""
run_wrk() {
  local out=$1 status=0
  shift
  wrk "$@" >"$out" 2>&1 &
  WRK_PID=$!
  wait "$WRK_PID" || status=$?
  WRK_PID=""
  return "$status"
}

# tree_pids PID: PID and every process under it (the service's embedded PostgreSQL and its
# backends included), one per line.
tree_pids() {
  ps -e -o pid=,ppid= | awk -v root="$1" '
    { parent[$1] = $2; all[NR] = $1 }
    END {
      for (i = 1; i <= NR; i++) {
        p = all[i]
        while (p != "" && p != 0 && p != 1) { if (p == root) { print all[i]; break } ; p = parent[p] }
      }
    }'
}

# tree_ticks PID: CPU time (clock ticks, user + system) used so far by PID and every process
# under it.
# shellcheck disable=SC2046 # one word per pid
tree_ticks() { ticks_of $(tree_pids "$1"); }

# ticks_of PID...: CPU time (clock ticks, user + system, all threads) used so far by these
# processes alone (0 for one that is gone).
ticks_of() {
  local p total=0 t
  for p in "$@"; do
    t=$(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null | awk '{ print $12 + $13 }') || continue
    total=$((total + ${t:-0}))
  done
  printf '%s' "$total"
}

# Processes a bench stopped (SIGSTOP) to keep them off the CPU while it measures something
# else; its cleanup continues them (resume_all) before it stops them.
PAUSED=" "
# pause_pids PID...: stops them.
pause_pids() {
  local p
  for p in "$@"; do
    kill -STOP "$p"
    PAUSED="$PAUSED$p "
  done
}
# resume_pids PID...: continues them.
resume_pids() {
  local p
  for p in "$@"; do
    kill -CONT "$p" 2>/dev/null || true
    PAUSED=${PAUSED/ $p / }
  done
}
# shellcheck disable=SC2086 # one word per pid
resume_all() { resume_pids $PAUSED; }
# all_but PID PID...: the pids after the first that are not the first, one per word.
all_but() {
  local p
  for p in "${@:2}"; do [ "$p" = "$1" ] || printf '%s ' "$p"; done
}

# deprioritize PID NICE: PID's whole tree runs at niceness NICE, its scheduler autogroups too.
# `nice` alone is not enough: with autogroups on (kernel.sched_autogroup_enabled=1, the
# default) each session competes with the benchmark's as an equal whatever its processes'
# niceness, and PostgreSQL calls setsid() in every backend it forks, so each connection of the
# embedded PostgreSQL is an autogroup of its own (a projector writing one row per click then
# took ~0.7 of a core from the measured servers: bench/redirect-scale.sh, 25.8 us of service
# CPU per request). New backends start at nice 0: `quiet_service` calls this again before each
# measurement. Only autogroups other than the benchmark's own are reniced (that one holds wrk
# and the measured servers).
deprioritize() {
  local p own group
  own=$(cut -d' ' -f1 /proc/$$/autogroup 2>/dev/null || true)
  for p in $(tree_pids "$1"); do
    renice -n "$2" -p "$p" >/dev/null 2>&1 || true
    group=$(cut -d' ' -f1 "/proc/$p/autogroup" 2>/dev/null || true)
    [ -n "$group" ] && [ "$group" != "$own" ] && { echo "$2" >"/proc/$p/autogroup"; } 2>/dev/null || true
  done
}

# start_service [NICENESS]: the service (apps/all/main.ts: the API, the workers, the embedded
# engines in DATA_DIR) in the background as ALL_PID, its log $TMP/all.log, once /readyz
# answers. With a niceness it runs under `nice` and its PostgreSQL's backends are
# deprioritized too (deprioritize): for the benchmarks that measure other servers beside it.
start_service() {
  local start
  start=$(date +%s)
  if [ -n "${1:-}" ]; then
    nice -n "$1" node --import tsx apps/all/main.ts >"$TMP/all.log" 2>&1 &
  else
    node --import tsx apps/all/main.ts >"$TMP/all.log" 2>&1 &
  fi
  ALL_PID=$!
  wait_http "$API/readyz" "$ALL_PID" "the service (apps/all/main.ts)" 180 200
  [ -z "${1:-}" ] || deprioritize "$ALL_PID" "$1"
  log "bench: service up after $(($(date +%s) - start))s (embedded engines in $DATA_DIR)"
}

# bench_account: creates an account named bench through the operator CLI, its id in ACCOUNT_ID.
bench_account() {
  ACCOUNT_ID=$(npm run --silent cli -- accounts create --name bench --json | tail -n 1 | json_field id) ||
    die "cli accounts create failed"
}

# quiet_wait PID NAME: waits (at most BENCH_QUIET_TIMEOUT s, default 60) until PID's process
# tree uses less than 10% of a core over a second, so that a phase does not measure the
# service still digesting the clicks of the phase before. Prints how long it waited.
quiet_wait() {
  local pid=$1 name=$2 hz start before after
  hz=$(getconf CLK_TCK)
  start=$(date +%s)
  while :; do
    before=$(tree_ticks "$pid")
    sleep 1
    after=$(tree_ticks "$pid")
    [ $((after - before)) -le $((hz / 10)) ] && break
    if [ $(($(date +%s) - start)) -ge "${BENCH_QUIET_TIMEOUT:-60}" ]; then
      log "bench: $name still busy ($(((after - before) * 100 / hz))% of a core) after ${BENCH_QUIET_TIMEOUT:-60}s; measuring anyway"
      return 0
    fi
  done
  QUIET_WAITED=$(($(date +%s) - start))
}

# quiet_service PID: before a measurement, the service (PID's tree) has digested the phase
# before (quiet_wait) and runs niced at BENCH_NICE, the backends it opened since included.
quiet_service() {
  quiet_wait "$1" "the service"
  deprioritize "$1" "$NICE"
}

# busy_ticks: the machine's CPU time (clock ticks, all cores) spent on its own work so far
# (user, nice, system, interrupts; not what the host stole: steal_ticks).
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8; exit }' "$PROC_STAT"; }
# irq_ticks: the machine's CPU time (clock ticks, all cores) spent in interrupts and softirqs so
# far, whichever process's account the kernel charged it to (this kernel charges a tick in a
# softirq to the process it interrupted; one that interrupted no process, the idle loop, to
# none).
irq_ticks() { awk '/^cpu / { print $7 + $8; exit }' "$PROC_STAT"; }
# task_ticks: two numbers, the CPU time (clock ticks, user + system) used so far by the kernel's
# own threads (kthreadd and its children: kworkers writing pages back, the journal's, ksoftirqd)
# and by every process alive now, kernel threads included.
task_ticks() {
  # cat goes on past a process that ended after the shell listed it, and fails at the end
  # (which is no failure here: set -e and pipefail would end the benchmark).
  { cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk '
    { s = $0; sub(/^.*\) /, "", s); split(s, f, " "); t = f[12] + f[13]; all += t
      if ($1 == 2 || f[2] == 2) kernel += t }
    END { print kernel + 0, all + 0 }'
}
# children_ticks PID: the CPU time (clock ticks) of the processes that shell PID started and
# waited for once they ended, so far (its cutime and cstime): two numbers, user + system and
# system.
children_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $14 + $15, $15 }'; }
# steal_ticks: the CPU time (clock ticks, all cores) the host took from this VM so far: time
# its cores had work and ran the host's other guests instead (steal in /proc/stat).
steal_ticks() { awk '/^cpu / { print $9; exit }' "$PROC_STAT"; }
# The kernel's counters (a test gives a file of its own).
PROC_STAT=${BENCH_PROC_STAT:-/proc/stat}
HZ=$(getconf CLK_TCK)
CPUS=$(nproc 2>/dev/null || echo 1)

# Slices the host stole from. On a shared host the hypervisor can take a large share of the
# VM's time for seconds at a time (on one Intel host up to 65% of both cores for tens of seconds, and
# nothing for minutes before: docs/redirect-tier.md, "A host that steals"). The benchmark's
# processes are then not running, whichever phase's slice it falls on: its requests a second
# measure the host. So a slice during which the host took more than BENCH_STEAL_LIMIT per mille
# of the machine's time (default 20: 2%) is measured again once a second has passed without
# (steal_settle), at most BENCH_STEAL_RETAKES times (default 3; then the last take is kept and
# counted). steady_slice NAME SECONDS COMMAND... runs the slice (COMMAND, a measured run of
# NAME SECONDS long) until one is kept; steal_retake NAME TAKE SECONDS STOLEN decides after
# each take (the TAKEth of that slice, STOLEN ticks taken by the host during it): true when it
# is to be measured again (it says so). steal_summary: a line of what the kept slices lost to
# the host and how many were measured again; steal_json: the same for a JSON line
# (steal_permil, steal_retaken, steal_over: slices kept over the limit).
STEAL_LIMIT=${BENCH_STEAL_LIMIT:-20}
STEAL_RETAKES=${BENCH_STEAL_RETAKES:-3}
[[ $STEAL_LIMIT =~ ^[0-9]+$ ]] || die "BENCH_STEAL_LIMIT must be a whole number of per mille"
[[ $STEAL_RETAKES =~ ^[0-9]+$ ]] || die "BENCH_STEAL_RETAKES must be a whole number"
STEAL_RETAKEN=0 STEAL_OVER=0 STEAL_KEPT=0 STEAL_KEPT_OF=0 STEAL_KEPT_PERMIL=0
steal_retake() {
  local stolen=$4 of permil
  # The machine's time over the slice, in ticks of all its cores.
  of=$(($3 * HZ * CPUS))
  permil=$((of > 0 ? 1000 * stolen / of : 0))
  if [ "$permil" -gt "$STEAL_LIMIT" ]; then
    if [ "$2" -le "$STEAL_RETAKES" ]; then
      STEAL_RETAKEN=$((STEAL_RETAKEN + 1))
      steal_settle
      log "bench: the host took $((permil / 10)).$((permil % 10))% of the machine during a slice of $1 (limit $((STEAL_LIMIT / 10)).$((STEAL_LIMIT % 10))%): measured again after $STEAL_SETTLED s"
      return 0
    fi
    STEAL_OVER=$((STEAL_OVER + 1))
  fi
  STEAL_KEPT=$((STEAL_KEPT + stolen)) STEAL_KEPT_OF=$((STEAL_KEPT_OF + of))
  STEAL_KEPT_PERMIL=$((STEAL_KEPT_OF > 0 ? 1000 * STEAL_KEPT / STEAL_KEPT_OF : 0))
  return 1
}
steady_slice() {
  local name=$1 seconds=$2 take t0
  shift 2
  for ((take = 1; ; take++)); do
    t0=$(steal_ticks)
    "$@"
    steal_retake "$name" "$take" "$seconds" $(($(steal_ticks) - t0)) || return 0
  done
}
# steal_settle: waits until a second passes in which the host took at most the limit (at most
# BENCH_STEAL_WAIT s, default 60): a host busy elsewhere takes the cores for many seconds at a
# time, and a slice measured again at once would fall into the same spell. The seconds waited
# in STEAL_SETTLED.
STEAL_WAIT=${BENCH_STEAL_WAIT:-60}
[[ $STEAL_WAIT =~ ^[0-9]+$ ]] || die "BENCH_STEAL_WAIT must be a whole number of seconds"
steal_settle() {
  local t0
  STEAL_SETTLED=0
  while [ "$STEAL_SETTLED" -lt "$STEAL_WAIT" ]; do
    t0=$(steal_ticks)
    sleep 1
    STEAL_SETTLED=$((STEAL_SETTLED + 1))
    [ $((1000 * ($(steal_ticks) - t0))) -gt $((STEAL_LIMIT * HZ * CPUS)) ] || return 0
  done
}
steal_summary() {
  log "bench: the host took $((STEAL_KEPT_PERMIL / 10)).$((STEAL_KEPT_PERMIL % 10))% of the machine's time during the slices kept; $STEAL_RETAKEN slices measured again for steal over $((STEAL_LIMIT / 10)).$((STEAL_LIMIT % 10))%, $STEAL_OVER kept over it after $STEAL_RETAKES retakes"
}
steal_json() { printf '{"steal_permil":%d,"steal_retaken":%d,"steal_over":%d}' "$STEAL_KEPT_PERMIL" "$STEAL_RETAKEN" "$STEAL_OVER"; }

# wrk_field NAME: a number of the WRK_RESULT line (bench/redirect.lua) in $TMP/wrk.txt.
wrk_field() { grep '^WRK_RESULT ' "$TMP/wrk.txt" | tail -n 1 | sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p"; }

# Slices (bench/redirect-costs.sh, bench/redirect-scale.sh): within a round each phase runs
# in several wrk runs of $TMP/wrk.txt, taking turns with the others. slices_reset before a
# round; slice_add NAME SERVER_TICKS SERVICE_TICKS BUSY_TICKS [WRK KTHREADS UNOWNED IRQ WRK_SYSTEM] after
# each run (the ticks of ticks_of_run; it fails on an error answer or a run without result);
# slice_json NAME: the phase's round as one JSON object (requests, duration_s, rps over their
# whole time, slices_rps each run's in turn, p99_ms the median of the runs', and the ticks
# summed); slice_line ROUND NAME: the same for people;
# slices_round: both, for a round.
# The ticks a slice sums, slice_add's arguments after the name in this order (slice_json: each
# as "<field>_ticks").
SLICE_TICKS=(server service busy wrk kthreads unowned irq wrk_system)
slices_reset() {
  unset SL_REQS SL_SECS SL_P99 SL_RPS SL_TICKS
  declare -gA SL_REQS=() SL_SECS=() SL_P99=() SL_RPS=() SL_TICKS=()
}
slice_add() {
  local name=$1 requests duration field i=2
  requests=$(wrk_field requests)
  [ -n "$requests" ] && [ "$requests" -gt 0 ] || die "wrk $name printed no result: $(cat "$TMP/wrk.txt")"
  [ "$(wrk_field non3xx)" = 0 ] && [ "$(wrk_field socket_errors)" = 0 ] || die "phase $name had errors: $(cat "$TMP/wrk.txt")"
  duration=$(wrk_field duration_s)
  SL_REQS[$name]=$((${SL_REQS[$name]:-0} + requests))
  SL_SECS[$name]=$(awk -v a="${SL_SECS[$name]:-0}" -v b="$duration" 'BEGIN { printf "%.3f", a + b }')
  SL_RPS[$name]="${SL_RPS[$name]:+${SL_RPS[$name]},}$(awk -v r="$requests" -v s="$duration" 'BEGIN { printf "%.1f", r / s }')"
  SL_P99[$name]="${SL_P99[$name]:-} $(wrk_field p99_ms)"
  for field in "${SLICE_TICKS[@]}"; do
    SL_TICKS[$name.$field]=$((${SL_TICKS[$name.$field]:-0} + ${!i:-0})) i=$((i + 1))
  done
}
slice_json() {
  local field ticks=""
  for field in "${SLICE_TICKS[@]}"; do ticks="$ticks\"${field}_ticks\":${SL_TICKS[$1.$field]:-0},"; done
  awk -v r="${SL_REQS[$1]}" -v s="${SL_SECS[$1]}" -v p="${SL_P99[$1]}" -v ticks="$ticks" -v hz="$HZ" -v sl="${SL_RPS[$1]}" '
    BEGIN {
      n = split(p, x, " ")
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (x[j] + 0 < x[i] + 0) { t = x[i]; x[i] = x[j]; x[j] = t }
      printf "{\"requests\":%d,\"duration_s\":%.3f,\"rps\":%.1f,\"slices_rps\":[%s],\"p99_ms\":%.3f,%s\"hz\":%d}", r, s, r / s, sl, x[int((n + 1) / 2)], ticks, hz
    }'
}
slice_line() {
  awk -v round="$1" -v n="$2" -v r="${SL_REQS[$2]}" -v s="${SL_SECS[$2]}" -v t="${SL_TICKS[$2.server]}" -v hz="$HZ" \
    'BEGIN { printf "round %s %-17s %9.1f req/s  %.2f us of its CPU a request\n", round, n, r / s, t / hz * 1e6 / r }'
}
# slices_round ROUND NAME...: after a round, each phase's slice_line, and the round (each
# phase's slice_json by its name) appended to RUNS as one JSON object.
slices_round() {
  local round=$1 name line="{"
  shift
  for name in "$@"; do
    slice_line "$round" "$name"
    line="$line\"$name\":$(slice_json "$name"),"
  done
  RUNS+=("${line%,}}")
}

# ticks_of_run PID OTHERS COMMAND...: COMMAND (a measured run) with the processes OTHERS
# (pids, one word each) stopped meanwhile; sets server, service and busy to the ticks that
# PID's tree, the service (ALL_PID's tree: its PostgreSQL) and the machine used during it, and
# splits the rest: children to the ticks of the processes COMMAND started that ended (the
# benchmarks' wrk; of them children_system in the kernel, in their system calls and the
# softirqs that came during them),
# kthreads to the kernel's threads', unowned to the machine's ticks on the account of no
# process (busy less every process alive at both ends and children: interrupts that came while a
# core was idle, and any other process that ended), irq to the interrupts' and softirqs'
# whoever's account they are on (task_ticks, children_ticks, irq_ticks). What is left of the
# rest is the other processes' (none measured: the machine's idle services).
ticks_of_run() {
  local pid=$1 others=$2 self=$BASHPID server_before service_before busy_before tasks_before irq_before children_before kernel_after all_after children_after
  shift 2
  # shellcheck disable=SC2086 # one word per pid
  pause_pids $others
  server_before=$(tree_ticks "$pid") service_before=$(tree_ticks "$ALL_PID") tasks_before=$(task_ticks)
  busy_before=$(busy_ticks) irq_before=$(irq_ticks) children_before=$(children_ticks "$self")
  "$@"
  # The machine's ticks first, then the processes'.
  busy=$(($(busy_ticks) - busy_before)) irq=$(($(irq_ticks) - irq_before))
  children_after=$(children_ticks "$self")
  children=$((${children_after% *} - ${children_before% *})) children_system=$((${children_after#* } - ${children_before#* }))
  read -r kernel_after all_after <<<"$(task_ticks)"
  kthreads=$((kernel_after - ${tasks_before% *})) unowned=$((busy - children - (all_after - ${tasks_before#* })))
  server=$(($(tree_ticks "$pid") - server_before)) service=$(($(tree_ticks "$ALL_PID") - service_before))
  # shellcheck disable=SC2086
  resume_pids $others
}

# slices_turns ROUND ODD EVEN: one round of SLICES slices (bench/redirect-scale.sh,
# bench/redirect-ab.sh): slices_reset, then the odd slices take the phases in the order ODD and
# the even ones in the order EVEN (each a string of phase names), each phase's slice by the
# script's `measure_slice NAME` (which runs it, steady_slice, and adds it, slice_add), then
# slices_round over the phases in the order ODD.
slices_turns() {
  local round=$1 slice name
  local -a odd even order
  read -r -a odd <<<"$2"
  read -r -a even <<<"$3"
  slices_reset
  for ((slice = 1; slice <= SLICES; slice++)); do
    if ((slice % 2)); then order=("${odd[@]}"); else order=("${even[@]}"); fi
    for name in "${order[@]}"; do measure_slice "$name"; done
  done
  slices_round "$round" "${odd[@]}"
}

# rss_mb PID: resident memory of one process, in MB.
rss_mb() { awk '/^VmRSS:/ { printf "%d", $2 / 1024 }' "/proc/$1/status"; }

# bench_start FIRST_WARMUP ROUNDS TMP_NAME: what each redirect bench does first: checks its
# tools, reads the tunables they share (BENCH_DURATION, default 10 s; BENCH_SLICES, 5 or
# BENCH_DURATION if less: the slices of a phase's time within a round, each SLICE seconds;
# BENCH_WARMUP, 3 s; BENCH_FIRST_WARMUP, FIRST_WARMUP s; BENCH_ROUNDS, ROUNDS; BENCH_THREADS, 1;
# BENCH_CONNECTIONS, 64; BENCH_NICE, 10) and makes TMP, with the service's DATA_DIR_BENCH in it.
bench_start() {
  ensure_wrk
  command -v curl >/dev/null 2>&1 || die "curl is required"
  [ -d node_modules/tsx ] || die "node_modules is missing: run npm install first"
  DURATION=${BENCH_DURATION:-10}
  [[ $DURATION =~ ^[1-9][0-9]*$ ]] || die "BENCH_DURATION must be a positive integer (seconds)"
  SLICES=${BENCH_SLICES:-$((DURATION < 5 ? DURATION : 5))}
  [[ $SLICES =~ ^[1-9][0-9]*$ ]] && [ "$SLICES" -le "$DURATION" ] || die "BENCH_SLICES must be 1 to BENCH_DURATION"
  SLICE=$((DURATION / SLICES))
  WARMUP=${BENCH_WARMUP:-3}
  FIRST_WARMUP=${BENCH_FIRST_WARMUP:-$1}
  ROUNDS=${BENCH_ROUNDS:-$2}
  THREADS=${BENCH_THREADS:-1}
  CONNECTIONS=${BENCH_CONNECTIONS:-64}
  NICE=${BENCH_NICE:-10}
  [[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "BENCH_ROUNDS must be a positive integer"
  TMP=$(mktemp -d "${TMPDIR:-/tmp}/$3.XXXXXX")
  DATA_DIR_BENCH=$TMP/data
  mkdir -p "$DATA_DIR_BENCH"
  chmod 0711 "$TMP" # the embedded PostgreSQL runs as `postgres` when we are root
}

# bench_finish STATUS LOG...: the end of each cleanup, once its processes are stopped: the
# embedded PostgreSQL stopped, the logs' last lines shown when the run failed, TMP removed
# (kept with BENCH_KEEP=1), and the exit with STATUS.
bench_finish() {
  local status=$1 f
  shift
  stop_embedded_postgres "$DATA_DIR_BENCH"
  if [ "$status" -ne 0 ]; then
    for f in "$@"; do
      [ -s "$TMP/$f" ] && { printf -- '--- last lines of %s ---\n' "$f" >&2; tail -n 30 "$TMP/$f" >&2 || true; }
    done
  fi
  if [ "${BENCH_KEEP:-0}" = 1 ]; then printf '%s: kept %s\n' "$BENCH_NAME" "$TMP" >&2; else rm -rf "$TMP"; fi
  exit "$status"
}
