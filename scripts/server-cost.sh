#!/usr/bin/env bash
# What a server costs on the path users take: the relay's and the board
# server's CPU per delivery, and the memory of an idle connection, with
# the release binary's own load testers (`bots`, `requests`), two sides
# alternated (ABBA), then the ratios of the means. The two sides are plain
# and TLS (docs/PERFORMANCE.md "What TLS costs"), or, with BEFORE set to
# another build's binary, that build against this one, both plain (a
# refactor's before and after, in one sitting; OVER=tls or OVER=quic: both
# over that instead). With SIDES="tls quic" the
# two sides are TLS over TCP and QUIC (the bots on the relay's QUIC port,
# their transforms as datagrams; docs/PERFORMANCE.md "What QUIC costs").
#
#   cargo build --release -p switchboard-server
#   scripts/server-cost.sh [BIN] [ROUNDS] [KINDS]
#   BEFORE=/tmp/old-switchboard-server scripts/server-cost.sh [BIN] [ROUNDS] [KINDS]
#   BEFORE=/tmp/old-switchboard-server OVER=quic scripts/server-cost.sh [BIN] [ROUNDS] [KINDS]
#   SIDES="tls quic" scripts/server-cost.sh [BIN] [ROUNDS] [KINDS]
#
# BIN defaults to target/release/switchboard-server, ROUNDS to 2, KINDS to
# every kind: `relay-apart` (300 bots × 10 Hz, immediate; the relay on CPU
# 0, the bots on CPU 1), `relay-together` (both on CPU 0), `relay` (where
# the scheduler puts them), `tick` (1,000 bots × 20 Hz, `--tick-hz 20`,
# `--compact`, apart), `tick-full` (the same without `--compact`: what
# QUIC datagrams carry), `manager` (`requests`, 300 clients), `idle` (10,000
# connections, resident growth). CPU is the server's, from /proc: user and
# system time. Each run takes 12 s (idle 30 s); needs `taskset`, and an
# open-file limit of 20,000 for `idle`.
set -euo pipefail
BIN=${1:-target/release/switchboard-server}
ROUNDS=${2:-2}
KINDS=${3:-relay-apart relay-together relay tick manager idle}
PORT=${PORT:-7400}
# Bots of the tick kinds (1,000 by default; fewer where a slow machine's
# relay saturates on its one core, which makes a figure of the collapse).
TICK_BOTS=${TICK_BOTS:-1000}
IDLE=${IDLE:-10000}
ulimit -n 20000 2>/dev/null || true
RESULTS=$(mktemp)
trap 'rm -f "$RESULTS"' EXIT

# run KIND SIDE: one run, one line "KIND SIDE us_per_delivery|bytes_per_connection"
# (SIDE: plain or tls with BIN; before or after, plain, with BEFORE and BIN)
run() {
    local kind=$1 mode=$2 dir server=() bots=() spid bpid fp tls=() quic=() BIN=$BIN
    [ "$mode" = before ] && BIN=$BEFORE
    dir=$(mktemp -d)
    case $kind in
        relay-apart | tick | tick-full) server=(taskset -c 0) bots=(taskset -c 1) ;;
        relay-together) server=(taskset -c 0) bots=(taskset -c 0) ;;
    esac
    case $kind in
        tick | tick-full) "${server[@]}" "$BIN" relay --bind all --port "$PORT" --quic-port "$PORT" --threads 1 --tick-hz 20 --data-dir "$dir" >"$dir/out" 2>&1 & ;;
        manager) "$BIN" --bind all --port "$PORT" --quic-port "$PORT" --data-dir "$dir" >"$dir/out" 2>&1 & ;;
        *) "${server[@]}" "$BIN" relay --bind all --port "$PORT" --quic-port "$PORT" --threads 1 --data-dir "$dir" >"$dir/out" 2>&1 & ;;
    esac
    spid=$!
    for _ in $(seq 100); do grep -q sha256 "$dir/out" 2>/dev/null && break; sleep 0.1; done
    fp=$(grep -o "sha256 [0-9a-f:]*" "$dir/out" | head -1 | cut -d' ' -f2)
    local over=$mode
    [ "$mode" = before ] || [ "$mode" = after ] && over=${OVER:-plain}
    [ "$over" = tls ] && tls=(--tls --trust "$fp")
    [ "$over" = quic ] && quic=(--quic-addr "127.0.0.1:$PORT")
    local cpu0 rss0 rss1=""
    cpu0=$(awk '{print $14 + $15}' "/proc/$spid/stat")
    rss0=$(awk '/VmRSS/{print $2}' "/proc/$spid/status")
    case $kind in
        tick) "${bots[@]}" "$BIN" bots --addr "127.0.0.1:$PORT" --count "$TICK_BOTS" --rate 20 --zone-size 20 \
            --seconds 12 --threads 1 --compact --json "${tls[@]}" "${quic[@]}" >"$dir/report" 2>/dev/null ;;
        tick-full) "${bots[@]}" "$BIN" bots --addr "127.0.0.1:$PORT" --count "$TICK_BOTS" --rate 20 --zone-size 20 \
            --seconds 12 --threads 1 --batch --json "${tls[@]}" "${quic[@]}" >"$dir/report" 2>/dev/null ;;
        manager) "$BIN" requests --addr "127.0.0.1:$PORT" --count 300 --rate 0.5 --seconds 12 \
            --json "${tls[@]}" "${quic[@]}" >"$dir/report" 2>/dev/null ;;
        idle)
            "$BIN" bots --addr "127.0.0.1:$PORT" --count "$IDLE" --rate 0 --seconds 30 --threads 1 \
                --json "${tls[@]}" "${quic[@]}" >"$dir/report" 2>/dev/null &
            bpid=$!
            sleep 25
            rss1=$(awk '/VmRSS/{print $2}' "/proc/$spid/status")
            wait "$bpid" ;;
        *) "${bots[@]}" "$BIN" bots --addr "127.0.0.1:$PORT" --count 300 --rate 10 --zone-size 20 \
            --seconds 12 --threads 1 --json "${tls[@]}" "${quic[@]}" >"$dir/report" 2>/dev/null ;;
    esac
    local cpu1
    cpu1=$(awk '{print $14 + $15}' "/proc/$spid/stat")
    kill "$spid"
    wait "$spid" 2>/dev/null || true
    python3 - "$dir/report" "$kind" "$mode" "$cpu0" "$cpu1" "$rss0" "${rss1:-0}" "$IDLE" <<'PY'
import json, sys
report, kind, mode, cpu0, cpu1, rss0, rss1, idle = sys.argv[1:]
r = json.load(open(report))
if kind == "idle":
    assert r["bots_connected"] == int(idle), f"only {r['bots_connected']} of {idle} connected"
    print(kind, mode, (int(rss1) - int(rss0)) * 1024 / int(idle))
else:
    n = r.get("received", r.get("deliveries", 0))
    assert n > 0 and r.get("disconnects", 0) == 0, f"{kind} {mode}: {r}"
    print(kind, mode, (int(cpu1) - int(cpu0)) / 100 * 1e6 / n)
PY
    rm -rf "$dir"
}

if [ -n "${BEFORE:-}" ]; then SIDES=(before after); elif [ -n "${SIDES:-}" ]; then read -ra SIDES <<<"$SIDES"; else SIDES=(plain tls); fi
for round in $(seq "$ROUNDS"); do
    for kind in $KINDS; do
        # A B, then B A: neither side always runs first.
        order=("${SIDES[@]}")
        [ $((round % 2)) = 0 ] && order=("${SIDES[1]}" "${SIDES[0]}")
        for side in "${order[@]}"; do
            line=$(run "$kind" "$side")
            echo "$line" | tee -a "$RESULTS"
        done
    done
done
python3 - "$RESULTS" "${SIDES[@]}" <<'PY'
import sys
from collections import defaultdict
results, a, b = sys.argv[1:]
runs = defaultdict(list)
for line in open(results):
    kind, side, value = line.split()
    runs[kind, side].append(float(value))
print(f"\n{'kind':<16}{a:>24}{b:>24}{f'{b} / {a}':>16}")
for kind in dict.fromkeys(k for k, _ in runs):
    first, second = runs[kind, a], runs[kind, b]
    unit = "B" if kind == "idle" else "us"
    fmt = lambda xs: ", ".join(f"{x:.0f}" if unit == "B" else f"{x:.2f}" for x in xs) + f" {unit}"
    ratio = (sum(second) / len(second)) / (sum(first) / len(first))
    print(f"{kind:<16}{fmt(first):>24}{fmt(second):>24}{ratio:>15.2f}x")
PY
