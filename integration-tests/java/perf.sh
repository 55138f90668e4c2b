#!/usr/bin/env bash
# Runs Kafka's own perf tools (kafka-tools ProducerPerformance and ConsumerPerformance)
# against a throwaway Logbook broker.   integration-tests/java/perf.sh [NUM_RECORDS] [RECORD_SIZE]
# Extra broker flags via LOGBOOK_ARGS, e.g. LOGBOOK_ARGS="--flush-policy os".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${LOGBOOK_BIN:-$root/target/release/logbook}
n=${1:-200000}; size=${2:-1024}
[ -x "$bin" ] || (cd "$root" && cargo build --release -p logbook-broker)
mvn -q -f "$here/pom.xml" -Pperf dependency:build-classpath -Dmdep.outputFile="$here/target/perf-classpath.txt"
cp="$(cat "$here/target/perf-classpath.txt")"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
data=$(mktemp -d)
log=${BROKER_LOG:-$(mktemp --suffix=.broker.log)}
RUST_LOG=${RUST_LOG:-info} "$bin" --listen 127.0.0.1:$port --data-dir "$data" ${LOGBOOK_ARGS:-} 2>"$log" >&2 &
broker=$!
trap 'kill $broker 2>/dev/null || true; wait $broker 2>/dev/null || true; rm -rf "$data"; echo "broker log: $log" >&2' EXIT
for _ in $(seq 100); do (: </dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
bs=127.0.0.1:$port
quiet=-Dorg.slf4j.simpleLogger.defaultLogLevel=warn
echo "== ProducerPerformance acks=all (idempotent) $n x $size B"
java $quiet -cp "$cp" org.apache.kafka.tools.ProducerPerformance --topic perf --num-records "$n" \
  --record-size "$size" --throughput -1 --producer-props bootstrap.servers=$bs acks=all
echo "== ProducerPerformance acks=1 lz4 linger.ms=5 $n x $size B"
java $quiet -cp "$cp" org.apache.kafka.tools.ProducerPerformance --topic perf-lz4 --num-records "$n" \
  --record-size "$size" --throughput -1 --producer-props bootstrap.servers=$bs acks=1 compression.type=lz4 linger.ms=5
echo "== ConsumerPerformance (subscribe + group) $n records of topic perf"
java $quiet -cp "$cp" org.apache.kafka.tools.ConsumerPerformance --bootstrap-server $bs --topic perf \
  --messages "$n" --timeout 30000
