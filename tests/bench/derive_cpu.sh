#!/usr/bin/env bash
# What deriving calls from standard spans costs the whole collector: the derived sources' mix
# (1,000-span requests, 80 % ordinary spans, 20 % tool spans) at 100,000 spans/s into the collector
# with every derived source on, then with every source off, in alternating rounds against a fresh
# Tansu each. One run of a pair moves by more than the difference, so it prints every run, the
# median CPU per span of each side, and the median of the rounds' ratios.
#
#   bash tests/bench/derive_cpu.sh [rounds] [seconds]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=tests/bench/lib.sh
source tests/bench/lib.sh
rounds="${1:-7}"
seconds="${2:-15}"
build_release

printf '[derived]\ngenai = false\nmcp = false\nhttp = false\n' >"$work/derived-off.toml"

# One run: prints the collector's CPU per span.
run() {
    local kafka grpc http metrics collector
    kafka=$(free_port); grpc=$(free_port); http=$(free_port); metrics=$(free_port)
    tansu_memory "$kafka" "$work/tansu.log" &
    pids+=($!)
    wait_port "$kafka"
    ingest "$kafka" "$grpc" "$http" "$metrics" "$work/collector.log" "$@" &
    collector=$!
    pids+=("$collector")
    for _ in $(seq 200); do curl -sf "127.0.0.1:$metrics/readyz" >/dev/null && break; sleep 0.1; done
    "$bin/candor-loadgen" --endpoint "http://127.0.0.1:$grpc" --seconds "$seconds" \
        --collector-pid "$collector" --connections 16 --batch 1000 --mix --rate 100000 \
        | awk '$1 == "collector_cpu_s" { print $6 }'
    kill "${pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
    pids=()
}

on=(); off=()
for round in $(seq "$rounds"); do
    on+=("$(run)")
    off+=("$(run --config "$work/derived-off.toml")")
    echo "round $round: CPU per span deriving ${on[-1]} µs, every source off ${off[-1]} µs"
done
python3 - "${on[*]}" "${off[*]}" <<'EOF'
import statistics
import sys

on = [float(x) for x in sys.argv[1].split()]
off = [float(x) for x in sys.argv[2].split()]
ratios = [a / b for a, b in zip(on, off)]
print(f"median CPU per span: deriving {statistics.median(on):.2f} µs, "
      f"every source off {statistics.median(off):.2f} µs "
      f"(+{100 * (statistics.median(on) / statistics.median(off) - 1):.0f} %)")
print(f"rounds' ratios: {', '.join(f'{r:.2f}' for r in ratios)}; "
      f"median {statistics.median(ratios):.2f}")
EOF
