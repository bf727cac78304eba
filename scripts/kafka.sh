#!/usr/bin/env bash
# A real Apache Kafka broker for the test suites (TEST_KAFKA_BROKERS), assembled from Maven
# Central through infra/kafka/pom.xml and run as a single KRaft node (broker + controller)
# on Java 17. Nothing it creates lives in the repository.
#
#   scripts/kafka.sh start    start (or reuse) the broker; prints TEST_KAFKA_BROKERS=host:port
#   scripts/kafka.sh stop     stop it and delete its data (a no-op when nothing runs)
#   scripts/kafka.sh status   exit 0 and print the address when running, exit 3 when not
#
# Environment (all optional):
#   KAFKA_HOME               jar cache, reused across runs   (default ~/.cache/shortlinks-kafka)
#   KAFKA_STATE_DIR          pid, log, work-dir pointer      (default /tmp/shortlinks-kafka-state)
#   KAFKA_PORT               client listener on 127.0.0.1    (default 19092)
#   KAFKA_CONTROLLER_PORT    KRaft controller listener       (default 19093)
#   KAFKA_HEAP               JVM heap flags                  (default "-Xms128m -Xmx512m")
#   KAFKA_START_TIMEOUT      seconds to wait for readiness   (default 120)
#   KAFKA_STOP_TIMEOUT       seconds between SIGTERM and SIGKILL (default 30)
#
# The broker's log is kept in $KAFKA_STATE_DIR/kafka.log (also after stop, for post-mortems).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
POM="$ROOT/infra/kafka/pom.xml"

KAFKA_HOME="${KAFKA_HOME:-$HOME/.cache/shortlinks-kafka}"
STATE_DIR="${KAFKA_STATE_DIR:-/tmp/shortlinks-kafka-state}"
PORT="${KAFKA_PORT:-19092}"
CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-19093}"
HEAP="${KAFKA_HEAP:--Xms128m -Xmx512m}"
START_TIMEOUT="${KAFKA_START_TIMEOUT:-120}"
STOP_TIMEOUT="${KAFKA_STOP_TIMEOUT:-30}"
HOST=127.0.0.1

PID_FILE="$STATE_DIR/kafka.pid"
LOG_FILE="$STATE_DIR/kafka.log"
WORK_FILE="$STATE_DIR/workdir"   # path of the temp dir holding config and data
ADDR_FILE="$STATE_DIR/address"   # host:port the running broker listens on

log() { echo "kafka.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# The pid of our running broker, or nothing. A pid file whose process is gone, or is not a
# Kafka JVM (pid reuse), counts as not running.
running_pid() {
  [[ -f "$PID_FILE" ]] || return 0
  local pid
  pid="$(cat "$PID_FILE" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'kafka\.Kafka'; then
    echo "$pid"
  fi
}

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# Fetch the broker's jars once into $KAFKA_HOME/libs-<pom hash>; later runs only hash the pom.
ensure_jars() {
  command -v java >/dev/null || die "java not found (Java 17 is required)"
  [[ -f "$POM" ]] || die "missing $POM"
  local key
  key="$(sha256sum "$POM" | cut -c1-16)"
  LIBS="$KAFKA_HOME/libs-$key"
  if [[ -f "$LIBS/.complete" ]]; then return 0; fi
  command -v mvn >/dev/null || die "mvn not found (needed once, to fetch the broker's jars)"
  log "fetching Kafka jars from Maven Central into $LIBS (once)"
  mkdir -p "$KAFKA_HOME"
  local tmp="$LIBS.partial.$$"
  rm -rf "$tmp"
  # -f with an absolute path and an explicit output directory: nothing is written under infra/.
  local mvnlog="$KAFKA_HOME/mvn.log"
  if ! (cd "$KAFKA_HOME" && mvn -B -q -f "$POM" dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$tmp") >"$mvnlog" 2>&1 </dev/null 9>&-; then
    tail -n 40 "$mvnlog" >&2
    rm -rf "$tmp"
    die "mvn dependency:copy-dependencies failed (full output: $mvnlog)"
  fi
  ls "$tmp"/kafka_2.13-*.jar >/dev/null 2>&1 || { rm -rf "$tmp"; die "no kafka_2.13 jar was fetched"; }
  touch "$tmp/.complete"
  rm -rf "$LIBS"
  mv "$tmp" "$LIBS"
  # Jars of an older pom are no longer needed (no broker runs: start checked that first).
  find "$KAFKA_HOME" -mindepth 1 -maxdepth 1 -type d -name 'libs-*' ! -path "$LIBS" \
    -exec rm -rf {} + 2>/dev/null || true
}

# A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (Kafka's Uuid format;
# like Uuid.randomUuid, never starting with '-', which the CLI would read as an option).
cluster_id() {
  local id
  while :; do
    id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
    [[ "$id" != -* ]] && { echo "$id"; return; }
  done
}

write_config() {
  local dir="$1"
  mkdir -p "$dir/data" "$dir/logs"
  cat >"$dir/server.properties" <<EOF
# Single-node KRaft test broker, written by scripts/kafka.sh.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$HOST:$CONTROLLER_PORT
listeners=PLAINTEXT://$HOST:$PORT,CONTROLLER://$HOST:$CONTROLLER_PORT
advertised.listeners=PLAINTEXT://$HOST:$PORT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$dir/data
num.partitions=3
default.replication.factor=1
min.insync.replicas=1
auto.create.topics.enable=true
delete.topic.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=3
# Tests join consumer groups constantly: do not wait 3 s for more members.
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=2
num.recovery.threads.per.data.dir=1
log.retention.hours=1
EOF
  cat >"$dir/log4j.properties" <<'EOF'
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.org.apache.kafka=INFO
log4j.logger.kafka=INFO
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.request.logger=WARN
log4j.logger.kafka.log.LogCleaner=WARN
log4j.logger.org.apache.kafka.storage.internals.log=WARN
log4j.logger.kafka.log=WARN
EOF
}

cmd_start() {
  mkdir -p "$STATE_DIR"
  exec 9>"$STATE_DIR/lock"
  flock -w 300 9 || die "another kafka.sh holds $STATE_DIR/lock"

  local pid
  pid="$(running_pid)"
  if [[ -n "$pid" ]]; then
    local addr
    addr="$(cat "$ADDR_FILE" 2>/dev/null || echo "$HOST:$PORT")"
    [[ "$addr" == "$HOST:$PORT" ]] \
      || die "a broker started by this script already runs on $addr (pid $pid); stop it first"
    log "already running (pid $pid)"
    echo "TEST_KAFKA_BROKERS=$addr"
    return 0
  fi
  cleanup_leftovers

  for p in "$PORT" "$CONTROLLER_PORT"; do
    ! port_open "$HOST" "$p" || die "port $HOST:$p is already in use by another process"
  done

  ensure_jars
  local t0=$SECONDS
  local dir
  dir="$(mktemp -d "${TMPDIR:-/tmp}/shortlinks-kafka.XXXXXX")"
  echo "$dir" >"$WORK_FILE"
  write_config "$dir"

  local jvm=(java $HEAP -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExplicitGCInvokesConcurrent
    -Djava.awt.headless=true -Dlog4j.configuration="file:$dir/log4j.properties"
    -Dkafka.logs.dir="$dir/logs" -cp "$LIBS/*")

  "${jvm[@]}" kafka.tools.StorageTool format -t "$(cluster_id)" -c "$dir/server.properties" \
    >"$LOG_FILE" 2>&1 || { cat "$LOG_FILE" >&2; rm -rf "$dir"; rm -f "$WORK_FILE"; die "storage format failed"; }

  # New session, stdin closed and output to the log, so the broker outlives this script and
  # holds no caller's pipe open (nor our lock: fd 9 is closed for it). The child writes its own pid before exec'ing the JVM.
  setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$PID_FILE" \
    "${jvm[@]}" kafka.Kafka "$dir/server.properties" >>"$LOG_FILE" 2>&1 </dev/null 9>&- &
  echo "$HOST:$PORT" >"$ADDR_FILE"

  local deadline=$((SECONDS + START_TIMEOUT))
  while :; do
    pid="$(cat "$PID_FILE" 2>/dev/null || true)"
    if [[ -n "$pid" ]] && ! kill -0 "$pid" 2>/dev/null; then
      tail -n 40 "$LOG_FILE" >&2
      rm -f "$PID_FILE" "$ADDR_FILE"; rm -rf "$dir"; rm -f "$WORK_FILE"
      die "broker exited during startup (log: $LOG_FILE)"
    fi
    if grep -q 'Kafka Server started' "$LOG_FILE" && port_open "$HOST" "$PORT"; then break; fi
    if ((SECONDS >= deadline)); then
      tail -n 40 "$LOG_FILE" >&2
      cmd_stop_locked
      die "broker not ready after ${START_TIMEOUT}s (log: $LOG_FILE)"
    fi
    sleep 0.3
  done
  log "started Kafka $(kafka_version) in $((SECONDS - t0))s (pid $pid, data $dir, log $LOG_FILE)"
  echo "TEST_KAFKA_BROKERS=$HOST:$PORT"
}

kafka_version() {
  local jar
  jar="$(ls "$LIBS"/kafka_2.13-*.jar 2>/dev/null | head -n1)"
  jar="${jar##*/kafka_2.13-}"
  echo "${jar%.jar}"
}

# Remove what a crashed or killed run left behind (stale pid file, temp dir).
cleanup_leftovers() {
  if [[ -f "$WORK_FILE" ]]; then
    local dir
    dir="$(cat "$WORK_FILE")"
    # Only ever delete a directory this script created.
    if [[ "$(basename "$dir")" == shortlinks-kafka.* && -d "$dir" ]]; then rm -rf "$dir"; fi
    rm -f "$WORK_FILE"
  fi
  rm -f "$PID_FILE" "$ADDR_FILE"
}

cmd_stop_locked() {
  local pid
  pid="$(running_pid)"
  if [[ -n "$pid" ]]; then
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + STOP_TIMEOUT))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
      log "no exit ${STOP_TIMEOUT}s after SIGTERM; sending SIGKILL to $pid"
      kill -KILL "$pid" 2>/dev/null || true
      while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    fi
    log "stopped (pid $pid)"
  else
    log "not running"
  fi
  cleanup_leftovers
}

cmd_stop() {
  [[ -d "$STATE_DIR" ]] || { log "not running"; return 0; }
  exec 9>"$STATE_DIR/lock"
  flock -w 300 9 || die "another kafka.sh holds $STATE_DIR/lock"
  cmd_stop_locked
}

cmd_status() {
  local pid
  pid="$(running_pid)"
  if [[ -n "$pid" ]]; then
    local addr rss
    addr="$(cat "$ADDR_FILE" 2>/dev/null || echo "$HOST:$PORT")"
    rss="$(awk '/^VmRSS/ {print $2 " " $3}' "/proc/$pid/status" 2>/dev/null || true)"
    log "running (pid $pid, RSS ${rss:-?}, data $(cat "$WORK_FILE" 2>/dev/null), log $LOG_FILE)"
    echo "TEST_KAFKA_BROKERS=$addr"
  else
    log "not running"
    return 3
  fi
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
