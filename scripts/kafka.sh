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
# shellcheck source=lib/service.sh
. "$ROOT/scripts/lib/service.sh"

KAFKA_HOME="${KAFKA_HOME:-$HOME/.cache/shortlinks-kafka}"
PORT="${KAFKA_PORT:-19092}"
CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-19093}"
HEAP="${KAFKA_HEAP:--Xms128m -Xmx512m}"
START_TIMEOUT="${KAFKA_START_TIMEOUT:-120}"
HOST=127.0.0.1

SVC_NAME=kafka.sh
SVC_NOUN=broker
SVC_AT=on
SVC_ENV_VAR=TEST_KAFKA_BROKERS
SVC_ADDRESS="$HOST:$PORT"
SVC_PROC_PATTERN='kafka\.Kafka'   # a Kafka JVM
SVC_WORKDIR_PREFIX=shortlinks-kafka
SVC_STATE_DIR="${KAFKA_STATE_DIR:-/tmp/shortlinks-kafka-state}"
SVC_PID_FILE="$SVC_STATE_DIR/kafka.pid"
SVC_LOCK_FILE="$SVC_STATE_DIR/lock"
SVC_LOG_FILE="$SVC_STATE_DIR/kafka.log"
SVC_WORK_FILE="$SVC_STATE_DIR/workdir"   # path of the temp dir holding config and data
SVC_ADDR_FILE="$SVC_STATE_DIR/address"   # host:port the running broker listens on
SVC_STOP_TIMEOUT="${KAFKA_STOP_TIMEOUT:-30}"

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


kafka_version() {
  local jar
  jar="$(ls "$LIBS"/kafka_2.13-*.jar 2>/dev/null | head -n1)"
  jar="${jar##*/kafka_2.13-}"
  echo "${jar%.jar}"
}

service_start() {
  svc_require_free_ports "$HOST" "$PORT" "$CONTROLLER_PORT"
  ensure_jars
  local t0=$SECONDS dir
  svc_make_workdir
  dir="$WORKDIR"
  write_config "$dir"

  local jvm=(java $HEAP -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExplicitGCInvokesConcurrent
    -Djava.awt.headless=true -Dlog4j.configuration="file:$dir/log4j.properties"
    -Dkafka.logs.dir="$dir/logs" -cp "$LIBS/*")

  "${jvm[@]}" kafka.tools.StorageTool format -t "$(cluster_id)" -c "$dir/server.properties" \
    >"$SVC_LOG_FILE" 2>&1 || { cat "$SVC_LOG_FILE" >&2; cleanup_leftovers; die "storage format failed"; }

  # The broker's output goes after the format's in the log; it runs in the caller's directory.
  svc_spawn . "${jvm[@]}" kafka.Kafka "$dir/server.properties"
  svc_wait_ready "$dir" "$START_TIMEOUT" 0.3 "broker not ready after ${START_TIMEOUT}s (log: $SVC_LOG_FILE)"
  log "started Kafka $(kafka_version) in $((SECONDS - t0))s (pid $SERVICE_PID, data $dir, log $SVC_LOG_FILE)"
  svc_print_address "$SVC_ADDRESS"
}

service_ready() { grep -q 'Kafka Server started' "$SVC_LOG_FILE" && port_open "$HOST" "$PORT"; }
service_show_log() { tail -n 40 "$SVC_LOG_FILE" >&2; }
service_status_note() { echo "data $(cat "$SVC_WORK_FILE" 2>/dev/null), log $SVC_LOG_FILE"; }

svc_main "$@"
