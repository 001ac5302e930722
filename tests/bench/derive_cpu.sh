#!/usr/bin/env bash
# What deriving calls from standard spans costs the whole collector: the derived sources' mix
# (1,000-span requests, 80 % ordinary spans, 20 % tool spans) at 100,000 spans/s into the collector
# with every derived source on, then with every source off, in alternating rounds against a fresh
# Tansu each. One run of a pair moves by more than the difference, so it prints every run, the
# median CPU per span of each side, and the median of the rounds' ratios; and the collector's
# peak RSS on each side, with the keys its join across requests held at the end of a deriving
# run (the loader renumbers every request's traces, so every call is a new one).
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

# One run: prints the collector's CPU per span, its peak RSS in MiB and the keys its join across
# requests held at the end (0 with every source off).
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
    local figures keys
    figures=$("$bin/candor-loadgen" --endpoint "http://127.0.0.1:$grpc" --seconds "$seconds" \
        --collector-pid "$collector" --connections 16 --batch 1000 --mix --rate 100000 \
        | awk '$1 == "collector_cpu_s" { cpu = $6 } $1 == "collector_peak_rss_mib" { rss = $2 }
               END { print cpu, rss }')
    keys=$(curl -sf "127.0.0.1:$metrics/metrics" \
        | awk '$1 == "candor_collector_derived_join_keys" { print $2 }')
    echo "$figures ${keys:-0}"
    kill "${pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
    pids=()
}

on=(); off=(); on_rss=(); off_rss=(); keys=()
for round in $(seq "$rounds"); do
    read -r cpu rss held < <(run)
    on+=("$cpu"); on_rss+=("$rss"); keys+=("$held")
    read -r cpu rss _ < <(run --config "$work/derived-off.toml")
    off+=("$cpu"); off_rss+=("$rss")
    echo "round $round: CPU per span deriving ${on[-1]} µs (peak RSS ${on_rss[-1]} MiB," \
        "${keys[-1]} join keys), every source off ${off[-1]} µs (${off_rss[-1]} MiB)"
done
python3 - "${on[*]}" "${off[*]}" "${on_rss[*]}" "${off_rss[*]}" "${keys[*]}" <<'EOF'
import statistics
import sys

on, off, on_rss, off_rss, keys = ([float(x) for x in arg.split()] for arg in sys.argv[1:6])
ratios = [a / b for a, b in zip(on, off)]
print(f"median CPU per span: deriving {statistics.median(on):.2f} µs, "
      f"every source off {statistics.median(off):.2f} µs "
      f"(+{100 * (statistics.median(on) / statistics.median(off) - 1):.0f} %)")
print(f"rounds' ratios: {', '.join(f'{r:.2f}' for r in ratios)}; "
      f"median {statistics.median(ratios):.2f}")
print(f"median peak RSS: deriving {statistics.median(on_rss):.1f} MiB, "
      f"every source off {statistics.median(off_rss):.1f} MiB; "
      f"join keys held at the end: median {statistics.median(keys):.0f}")
EOF
