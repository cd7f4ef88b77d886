#!/usr/bin/env bash
# Single-node Apache Kafka 4.x broker in KRaft mode, from jars resolved through Maven.
#
#   .ci/kafka.sh resolve          fetch the broker jars into .ci/kafka/lib (idempotent)
#   .ci/kafka.sh start RUNDIR     format storage, start a broker on free loopback ports,
#                                 wait until it accepts connections, print host:port
#   .ci/kafka.sh stop RUNDIR      stop the broker started in RUNDIR (no-op if none)
#   .ci/kafka.sh restart RUNDIR   start the broker of RUNDIR again (same ports, same data)
#   .ci/kafka.sh kill RUNDIR      SIGKILL the broker of RUNDIR (its data stays, unflushed)
#
# The broker listens on 127.0.0.1 only. Its log is RUNDIR/broker.log; RUNDIR/script
# names this script (so a test holding RUNDIR can restart the broker).
#
# AUDITA_KAFKA_PROXIED=N at start adds N listeners for clients that reach the broker
# through a proxy (Toxiproxy, for the fault tests of load-tests/src/nemesis.rs): the
# broker listens on an upstream port and advertises a proxy port, so a client
# bootstrapped at the proxy port keeps talking through the proxy (Kafka clients
# connect to the advertised address, not the bootstrap one). RUNDIR/proxied has a
# line "UPSTREAM_PORT PROXY_PORT" per listener; the proxy is the caller's to start.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
lib="$here/kafka/lib"

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# The jars are resolved once per pom: kept in $AUDITA_CI_CACHE/kafka-lib-<pom digest>
# (default ~/.cache/audita-ci) and copied from there into a fresh clone.
resolve() {
  if [ -f "$lib/.resolved" ]; then return 0; fi
  local cache
  cache="${AUDITA_CI_CACHE:-$HOME/.cache/audita-ci}/kafka-lib-$(sha256sum "$here/kafka/pom.xml" | cut -c1-16)"
  if [ -f "$cache/.resolved" ]; then
    rm -rf "$lib" && mkdir -p "$lib" && cp -a "$cache/." "$lib/"
    return 0
  fi
  (cd "$here/kafka" && mvn -q -B dependency:copy-dependencies -DoutputDirectory=lib -DincludeScope=runtime)
  touch "$lib/.resolved"
  if mkdir -p "$cache.tmp" && cp -a "$lib/." "$cache.tmp/"; then
    rm -rf "$cache" && mv "$cache.tmp" "$cache"
  fi
}

start() {
  local run="$1"
  resolve
  mkdir -p "$run"
  run="$(cd "$run" && pwd)"
  local port cport
  port=$(free_port); cport=$(free_port)
  while [ "$cport" = "$port" ]; do cport=$(free_port); done
  rm -rf "$run/data"
  local extra_listeners="" extra_advertised="" extra_map="" used="$port $cport"
  : > "$run/proxied"
  for i in $(seq 1 "${AUDITA_KAFKA_PROXIED:-0}"); do
    local up px
    up=$(free_port); while [[ " $used " == *" $up "* ]]; do up=$(free_port); done; used="$used $up"
    px=$(free_port); while [[ " $used " == *" $px "* ]]; do px=$(free_port); done; used="$used $px"
    extra_listeners="$extra_listeners,PROXIED$i://127.0.0.1:$up"
    extra_advertised="$extra_advertised,PROXIED$i://127.0.0.1:$px"
    extra_map="$extra_map,PROXIED$i:PLAINTEXT"
    echo "$up $px" >> "$run/proxied"
  done
  echo "$here/kafka.sh" > "$run/script"
  cat > "$run/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport$extra_listeners
advertised.listeners=PLAINTEXT://127.0.0.1:$port$extra_advertised
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT$extra_map
log.dirs=$run/data
num.partitions=4
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.flush.interval.messages=1000000
PROPS
  local cluster
  cluster=$(java $java_opts -cp "$lib/*" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)
  java $java_opts -cp "$lib/*" kafka.tools.StorageTool format -t "$cluster" -c "$run/server.properties" \
    >"$run/format.log" 2>&1 || { echo "kafka: storage format failed:" >&2; tail -n 20 "$run/format.log" >&2; return 1; }
  launch "$run" "$port"
}

java_opts="-Xms256m -Xmx768m -XX:+UseSerialGC -Djava.awt.headless=true -Dlog4j2.configurationFile=$here/kafka/log4j2.properties"

# Starts the broker of RUNDIR (configured, storage formatted) and waits for PORT.
launch() {
  local run="$1" port="$2"
  nohup java $java_opts -cp "$lib/*" kafka.Kafka "$run/server.properties" >"$run/broker.log" 2>&1 &
  echo $! > "$run/broker.pid"
  for _ in $(seq 1 240); do
    if ! kill -0 "$(cat "$run/broker.pid")" 2>/dev/null; then
      echo "kafka: broker exited during start-up:" >&2; tail -n 30 "$run/broker.log" >&2; return 1
    fi
    if grep -qE "Kafka Server started|\[KafkaRaftServer nodeId=1\] Kafka Server started" "$run/broker.log" 2>/dev/null \
       && python3 -c "import socket; socket.create_connection(('127.0.0.1',$port),1)" 2>/dev/null; then
      echo "127.0.0.1:$port" > "$run/bootstrap"
      echo "127.0.0.1:$port"
      return 0
    fi
    sleep 0.5
  done
  echo "kafka: broker did not start within 120 s:" >&2; tail -n 30 "$run/broker.log" >&2
  stop "$run"; return 1
}

restart() {
  local run="$1"
  run="$(cd "$run" && pwd)"
  [ -f "$run/server.properties" ] || { echo "kafka: no broker configured in $run" >&2; return 1; }
  stop "$run"
  local port
  port=$(sed -n 's#^listeners=PLAINTEXT://127.0.0.1:\([0-9]*\),.*#\1#p' "$run/server.properties")
  [ -n "$port" ] || { echo "kafka: no PLAINTEXT port in $run/server.properties" >&2; return 1; }
  mv -f "$run/broker.log" "$run/broker.log.1" 2>/dev/null || true
  launch "$run" "$port"
}

kill_broker() {
  local run="$1"
  [ -f "$run/broker.pid" ] || return 0
  local pid; pid=$(cat "$run/broker.pid")
  kill -9 "$pid" 2>/dev/null || true
  for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  rm -f "$run/broker.pid"
}

stop() {
  local run="$1"
  [ -f "$run/broker.pid" ] || return 0
  local pid; pid=$(cat "$run/broker.pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$run/broker.pid"
}

cmd="${1:-}"; shift || true
case "$cmd" in
  resolve) resolve ;;
  start) start "${1:?RUNDIR}" ;;
  stop) stop "${1:?RUNDIR}" ;;
  restart) restart "${1:?RUNDIR}" ;;
  kill) kill_broker "${1:?RUNDIR}" ;;
  *) echo "usage: $0 resolve | start RUNDIR | stop RUNDIR | restart RUNDIR | kill RUNDIR" >&2; exit 2 ;;
esac
