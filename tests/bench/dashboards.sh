#!/usr/bin/env bash
# Measures the dashboards and prints figures:
#   1. the model on its own (dashboards/examples/bench.rs): records/s decoded and applied on one
#      thread, memory and overview/page/JSON/metrics times for TARGETS targets over DAYS days;
#   2. keeping up with the stream: N event records (and their counter points) preloaded into
#      Tansu (memory engine), then the time the real `candor-dashboards` process takes to read
#      them all through its consumer, its CPU and peak memory, and the page's response times.
#
#   bash tests/bench/dashboards.sh [records] [targets] [days]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=tests/bench/lib.sh
source tests/bench/lib.sh
records="${1:-2000000}"
targets="${2:-1000}"
days="${3:-7}"
build_release --example bench

echo "== 1. the model: $targets targets, $days day(s), 5-minute buckets"
"$bin/examples/bench" "$targets" "$days" 5

echo "== 2. keeping up: $records event records preloaded, spread over the last hour"
kafka=$(free_port)
"$tansu" broker --listener-url "tcp://127.0.0.1:$kafka" --advertised-listener-url "tcp://127.0.0.1:$kafka" \
    --storage-engine memory://tansu/ >"$work/tansu.log" 2>&1 &
pids+=($!)
wait_port "$kafka"
"$bin/candor-loadgen" --raw-kafka "127.0.0.1:$kafka" --preload "$records" --spread-s 3600 --counts
port=$(free_port)
started=$(date +%s.%N)
"$bin/candor-dashboards" --listen "127.0.0.1:$port" --kafka "127.0.0.1:$kafka" \
    --tables "$work/tables" --state-dir "$work/dashboards" >"$work/dashboards.log" 2>&1 &
dashboards=$!
pids+=("$dashboards")
events_metric='candor_dashboards_records_total{topic="candor.outcome-events.v1"}'
while true; do
    read_events=$(metric "$port" "$events_metric" || true)
    [[ -n "$read_events" && "${read_events%.*}" -ge "$records" ]] && break
    kill -0 "$dashboards" || { echo "the dashboards died; see their log:"; tail -20 "$work/dashboards.log"; exit 1; }
    sleep 0.2
done
finished=$(date +%s.%N)
all=$(curl -sf "127.0.0.1:$port/metrics" | awk '$1 ~ /^candor_dashboards_records_total/ { n += $2 } END { print n }')
cpu=$(cpu_seconds "$dashboards")
rss_kb=$(awk '/VmHWM/ { print $2 }' "/proc/$dashboards/status")
python3 - "$records" "$all" "$started" "$finished" "$cpu" "$rss_kb" <<'PY'
import sys
events, total, t0, t1, cpu, rss = sys.argv[1:]
wall = float(t1) - float(t0)
print(f"events {int(events)} records_all_topics {int(float(total))} wall_s {wall:.1f} "
      f"records_per_s {float(total) / wall:,.0f} cpu_s {float(cpu):.1f} "
      f"records_per_cpu_s {float(total) / float(cpu):,.0f} peak_rss_mib {int(rss) / 1024:.0f}")
PY
for path in "/?range=1h" "/?range=6h" "/api/overview?range=1h" "/metrics"; do
    times=()
    for _ in 1 2 3 4 5; do
        times+=("$(curl -s -o /dev/null -w '%{time_total}' "127.0.0.1:$port$path")")
    done
    printf '%s\n' "${times[@]}" | sort -n | awk -v p="$path" 'NR == 3 { printf "GET %s median %.1f ms\n", p, $1 * 1000 }'
done
