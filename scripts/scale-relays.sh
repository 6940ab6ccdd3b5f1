#!/usr/bin/env bash
# Measures RELAYS relays sharing zones through Redis under BOTS load bots at
# 10 Hz in zones of 20 for SECONDS (docs/SCALING.md). With one relay, no
# Redis is involved: the baseline.
#   scripts/scale-relays.sh 3 1500 20
#   scripts/scale-relays.sh 1 1500 20
# Several relays run with one thread each and a third of the quiet rate
# (their share of the machine); THREADS and QUIET override that.
set -euo pipefail
RELAYS=${1:-3}
BOTS=${2:-1500}
SECONDS_=${3:-20}
cd "$(dirname "$0")/.."
cargo build --release -q -p switchboard-server
BIN=target/release/switchboard-server
command -v redis-server >/dev/null || { echo "needs redis-server (scripts/install-test-deps)"; exit 1; }
REDIS_PORT=$((20000 + RANDOM % 20000))
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no >/dev/null 2>&1 &
PIDS=($!)
trap 'kill "${PIDS[@]}" 2>/dev/null || true' EXIT
sleep 0.5
THREADS=${THREADS:-1}
QUIET=${QUIET:-$((100000 / RELAYS))}
RELAY_PIDS=()
ADDRS=()
for i in $(seq 1 "$RELAYS"); do
    port=$((7300 + i))
    args=(relay --bind loopback --port "$port")
    if [ "$RELAYS" -gt 1 ]; then
        args+=(--redis "redis://127.0.0.1:$REDIS_PORT/" --threads "$THREADS" --quiet-rate "$QUIET")
    fi
    "$BIN" "${args[@]}" >/dev/null 2>&1 &
    RELAY_PIDS+=($!)
    PIDS+=($!)
    ADDRS+=("127.0.0.1:$port")
done
sleep 1.5
bots=(bots --addr "${ADDRS[0]}" --count "$BOTS" --rate 10 --zone-size 20 --seconds "$SECONDS_")
for addr in "${ADDRS[@]:1}"; do bots+=(--also "$addr"); done
for pid in "${RELAY_PIDS[@]}"; do bots+=(--server-pid "$pid"); done
"$BIN" "${bots[@]}" 2>/dev/null
