#!/usr/bin/env bash
# Issue 24 item 5: 10,000 partitions (100 topics x 100), 20 Java consumers and 20 Java
# producers (acks=all) at 5,000 records/s on a fresh Logbook broker: e2e latency, broker
# CPU per GB and at rest (see ManyPartitions.java). Run it twice to see what incremental
# fetch sessions save:
#   integration-tests/java/many-partitions.sh                      # sessions (default 1000 slots)
#   LOGBOOK_ARGS="--fetch-session-cache-slots 0" integration-tests/java/many-partitions.sh
# Against a broker started by hand (e.g. Kafka): BOOTSTRAP=host:port BROKER_PID=pid many-partitions.sh
# Extra arguments go to ManyPartitions: [TOPICS PARTITIONS CONSUMERS PRODUCERS RATE SECONDS VALUE_BYTES IDLE_SECONDS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mvn -q -f "$here/pom.xml" package
cp="$here/target/classes:$(cat "$here/target/classpath.txt")"
if [ -n "${BOOTSTRAP:-}" ]; then
  exec java -cp "$cp" logbook.it.ManyPartitions "$BOOTSTRAP" "$BROKER_PID" "$@"
fi
bin=${LOGBOOK_BIN:-$root/target/release/logbook}
[ -x "$bin" ] || (cd "$root" && cargo build --release -p logbook-broker)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
data=$(mktemp -d)
log=${BROKER_LOG:-$(mktemp --suffix=.broker.log)}
# 10,000 partitions need their file descriptors: 2,000 connections leave room under a
# 20,000 open-files limit (the partition budget is the limit less max connections).
RUST_LOG=${RUST_LOG:-warn} "$bin" --listen 127.0.0.1:$port --data-dir "$data" --connections-max 2000 ${LOGBOOK_ARGS:-} 2>"$log" >&2 &
broker=$!
trap 'kill $broker 2>/dev/null || true; wait $broker 2>/dev/null || true; rm -rf "$data"' EXIT
for _ in $(seq 100); do (: </dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
java -cp "$cp" logbook.it.ManyPartitions "127.0.0.1:$port" "$broker" "$@"
echo "broker peak RSS: $(awk '/VmHWM/ {print $2/1024 " MiB"}' /proc/$broker/status)"
