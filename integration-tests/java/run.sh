#!/usr/bin/env bash
# Builds the checker, starts a throwaway Logbook broker on a free port, runs the checks
# against it and stops the broker. Exit status is the checker's.
#   integration-tests/java/run.sh [check-id-prefix ...]      e.g. run.sh 2 3a
# Environment: LOGBOOK_BIN (default target/release/logbook), LOGBOOK_ARGS (extra broker flags),
#              RUST_LOG (default info),
#              BROKER_LOG (default a temp file; printed at the end).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${LOGBOOK_BIN:-$root/target/release/logbook}
[ -x "$bin" ] || (cd "$root" && cargo build --release -p logbook-broker)
mvn -q -f "$here/pom.xml" package
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
data=$(mktemp -d)
log=${BROKER_LOG:-$(mktemp --suffix=.broker.log)}
RUST_LOG=${RUST_LOG:-info} "$bin" --listen 127.0.0.1:$port --data-dir "$data" ${LOGBOOK_ARGS:-} 2>"$log" >&2 &
broker=$!
trap 'kill $broker 2>/dev/null || true; wait $broker 2>/dev/null || true; rm -rf "$data"; echo "broker log: $log" >&2' EXIT
for _ in $(seq 100); do (: </dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
java -cp "$here/target/classes:$(cat "$here/target/classpath.txt")" logbook.it.Main "127.0.0.1:$port" "$@"
