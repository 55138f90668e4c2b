#!/usr/bin/env bash
# Start a private Logbook broker (RUST_LOG=debug) on a free port, run this
# client's probe against it, stop the broker. Logs go to ./out/.
#   usage: ./run.sh [aiokafka|confluent]         (uses ../../target/release/logbook)
#          LOGBOOK_BIN=... ./run.sh
#          BOOTSTRAP=host:port ./run.sh   (skip starting a broker)
set -u
PROBE="${1:-aiokafka}"   # aiokafka or confluent
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BIN="${LOGBOOK_BIN:-$ROOT/target/release/logbook}"
OUT="$HERE/out"; mkdir -p "$OUT"
BPID=""
if [ -z "${BOOTSTRAP:-}" ]; then
  PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
  DATA=$(mktemp -d)
  EXTRA="--group-initial-rebalance-delay-ms 0"
  "$BIN" --help 2>&1 | grep -q -- --group-initial-rebalance-delay-ms || EXTRA=""
  RUST_LOG="${RUST_LOG:-debug}" "$BIN" --listen 127.0.0.1:$PORT --data-dir "$DATA" $EXTRA >"$OUT/$PROBE-broker.log" 2>&1 &
  BPID=$!
  for _ in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
  BOOTSTRAP=127.0.0.1:$PORT
  echo "broker pid=$BPID bootstrap=$BOOTSTRAP data=$DATA log=$OUT/$PROBE-broker.log"
fi
cd "$HERE"
[ -x .venv/bin/python ] || { python3 -m venv .venv && .venv/bin/pip install -q -r requirements.txt; } || exit 2
timeout 120 .venv/bin/python "${PROBE}_probe.py" "$BOOTSTRAP" 2>"$OUT/$PROBE-client.log"
RC=$?
if [ -n "$BPID" ]; then kill "$BPID" 2>/dev/null; wait "$BPID" 2>/dev/null; rm -rf "$DATA"; fi
exit $RC
