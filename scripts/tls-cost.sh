#!/usr/bin/env bash
# What TLS costs a server, against plain, on the path users take
# (docs/PERFORMANCE.md "What TLS costs"): the relay's and the board
# server's CPU per delivery, and the memory of an idle connection, with
# the release binary's own load testers (`bots`, `requests`), plain and
# TLS alternated, then the ratios of the means.
#
#   cargo build --release -p switchboard-server
#   scripts/tls-cost.sh [BIN] [ROUNDS] [KINDS]
#
# BIN defaults to target/release/switchboard-server, ROUNDS to 2, KINDS to
# every kind: `relay-apart` (300 bots × 10 Hz, immediate; the relay on CPU
# 0, the bots on CPU 1), `relay-together` (both on CPU 0), `relay` (where
# the scheduler puts them), `tick` (1,000 bots × 20 Hz, `--tick-hz 20`,
# `--compact`, apart), `manager` (`requests`, 300 clients), `idle` (10,000
# connections, resident growth). CPU is the server's, from /proc: user and
# system time. Each run takes 12 s (idle 30 s); needs `taskset`, and an
# open-file limit of 20,000 for `idle`.
set -euo pipefail
BIN=${1:-target/release/switchboard-server}
ROUNDS=${2:-2}
KINDS=${3:-relay-apart relay-together relay tick manager idle}
PORT=${PORT:-7400}
IDLE=${IDLE:-10000}
ulimit -n 20000 2>/dev/null || true
RESULTS=$(mktemp)
trap 'rm -f "$RESULTS"' EXIT

# run KIND MODE: one run, one line "KIND MODE us_per_delivery|bytes_per_connection"
run() {
    local kind=$1 mode=$2 dir server=() bots=() spid bpid fp tls=()
    dir=$(mktemp -d)
    case $kind in
        relay-apart | tick) server=(taskset -c 0) bots=(taskset -c 1) ;;
        relay-together) server=(taskset -c 0) bots=(taskset -c 0) ;;
    esac
    case $kind in
        tick) "${server[@]}" "$BIN" relay --bind all --port "$PORT" --threads 1 --tick-hz 20 --data-dir "$dir" >"$dir/out" 2>&1 & ;;
        manager) "$BIN" --bind all --port "$PORT" --data-dir "$dir" >"$dir/out" 2>&1 & ;;
        *) "${server[@]}" "$BIN" relay --bind all --port "$PORT" --threads 1 --data-dir "$dir" >"$dir/out" 2>&1 & ;;
    esac
    spid=$!
    for _ in $(seq 100); do grep -q sha256 "$dir/out" 2>/dev/null && break; sleep 0.1; done
    fp=$(grep -o "sha256 [0-9a-f:]*" "$dir/out" | head -1 | cut -d' ' -f2)
    [ "$mode" = tls ] && tls=(--tls --trust "$fp")
    local cpu0 rss0 rss1=""
    cpu0=$(awk '{print $14 + $15}' "/proc/$spid/stat")
    rss0=$(awk '/VmRSS/{print $2}' "/proc/$spid/status")
    case $kind in
        tick) "${bots[@]}" "$BIN" bots --addr "127.0.0.1:$PORT" --count 1000 --rate 20 --zone-size 20 \
            --seconds 12 --threads 1 --compact --json "${tls[@]}" >"$dir/report" 2>/dev/null ;;
        manager) "$BIN" requests --addr "127.0.0.1:$PORT" --count 300 --rate 0.5 --seconds 12 \
            --json "${tls[@]}" >"$dir/report" 2>/dev/null ;;
        idle)
            "$BIN" bots --addr "127.0.0.1:$PORT" --count "$IDLE" --rate 0 --seconds 30 --threads 1 \
                --json "${tls[@]}" >"$dir/report" 2>/dev/null &
            bpid=$!
            sleep 25
            rss1=$(awk '/VmRSS/{print $2}' "/proc/$spid/status")
            wait "$bpid" ;;
        *) "${bots[@]}" "$BIN" bots --addr "127.0.0.1:$PORT" --count 300 --rate 10 --zone-size 20 \
            --seconds 12 --threads 1 --json "${tls[@]}" >"$dir/report" 2>/dev/null ;;
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

for _ in $(seq "$ROUNDS"); do
    for kind in $KINDS; do
        for mode in plain tls; do
            line=$(run "$kind" "$mode")
            echo "$line" | tee -a "$RESULTS"
        done
    done
done
python3 - "$RESULTS" <<'PY'
import sys
from collections import defaultdict
runs = defaultdict(list)
for line in open(sys.argv[1]):
    kind, mode, value = line.split()
    runs[kind, mode].append(float(value))
print(f"\n{'kind':<16}{'plain':>24}{'TLS':>24}{'TLS / plain':>14}")
for kind in dict.fromkeys(k for k, _ in runs):
    plain, tls = runs[kind, "plain"], runs[kind, "tls"]
    unit = "B" if kind == "idle" else "us"
    fmt = lambda xs: ", ".join(f"{x:.0f}" if unit == "B" else f"{x:.2f}" for x in xs) + f" {unit}"
    ratio = (sum(tls) / len(tls)) / (sum(plain) / len(plain))
    print(f"{kind:<16}{fmt(plain):>24}{fmt(tls):>24}{ratio:>13.2f}x")
PY
