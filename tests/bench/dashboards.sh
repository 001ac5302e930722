#!/usr/bin/env bash
# Measures the dashboards and prints figures:
#   1. the model on its own (dashboards/examples/bench.rs): records/s decoded and applied on one
#      thread, memory and overview/page/JSON/metrics times for TARGETS targets over DAYS days;
#   2. keeping up with the stream: N event records (and their counter points) spread over the
#      last HOURS hours, preloaded into Tansu (memory engine), then the time the real
#      `candor-dashboards` process (its history at least HOURS + 1 hours) takes to read them all
#      through its consumer, its CPU and peak memory, and the page's response times;
#   3. a restart's history from the tables: the same records compacted into the tables, then
#      the time a fresh `candor-dashboards` takes to read them from the tables (the stream then
#      starts where the tables end, with nothing left to read), its CPU and peak memory.
#
#   bash tests/bench/dashboards.sh [records] [targets] [days] [hours]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=tests/bench/lib.sh
source tests/bench/lib.sh
records="${1:-2000000}"
targets="${2:-1000}"
days="${3:-7}"
hours="${4:-1}"
history_h=$(( hours + 1 > 6 ? hours + 1 : 6 ))
build_release --example bench

echo "== 1. the model: $targets targets, $days day(s), 5-minute buckets"
"$bin/examples/bench" "$targets" "$days" 5

echo "== 2. keeping up: $records event records preloaded, spread over the last $hours hour(s) (replayed from Kafka)"
kafka=$(free_port)
"$tansu" broker --listener-url "tcp://127.0.0.1:$kafka" --advertised-listener-url "tcp://127.0.0.1:$kafka" \
    --storage-engine memory://tansu/ >"$work/tansu.log" 2>&1 &
pids+=($!)
wait_port "$kafka"
"$bin/candor-loadgen" --raw-kafka "127.0.0.1:$kafka" --preload "$records" --spread-s "$(( hours * 3600 ))" --counts
port=$(free_port)
started=$(date +%s.%N)
"$bin/candor-dashboards" --listen "127.0.0.1:$port" --kafka "127.0.0.1:$kafka" \
    --tables "$work/tables" --state-dir "$work/dashboards" --history "${history_h}h" >"$work/dashboards.log" 2>&1 &
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

echo "== 3. the history from the tables: the same records compacted, then read at a start"
kill "$dashboards"; wait "$dashboards" 2>/dev/null || true
compactor_metrics=$(free_port)
"$bin/candor-collector" compact --table-root "$work/tables" --kafka "127.0.0.1:$kafka" \
    --metrics-addr "127.0.0.1:$compactor_metrics" --max-age 2s --group-id bench >"$work/compactor.log" 2>&1 &
compactor=$!
pids+=("$compactor")
while true; do
    rows=$(metric "$compactor_metrics" 'candor_compactor_rows_written_total{table="outcome_events"}' || true)
    [[ -n "$rows" && "${rows%.*}" -ge "$records" ]] && break
    kill -0 "$compactor" || { echo "the compactor died; see its log:"; tail -20 "$work/compactor.log"; exit 1; }
    sleep 0.2
done
# Every topic stored, counts and heartbeats too: the tables' positions are the brokers' ends.
sleep 5
kill "$compactor"; wait "$compactor" 2>/dev/null || true
port=$(free_port)
started=$(date +%s.%N)
"$bin/candor-dashboards" --listen "127.0.0.1:$port" --kafka "127.0.0.1:$kafka" \
    --tables "$work/tables" --state-dir "$work/dashboards-tables" --history "${history_h}h" \
    --log-format json >"$work/dashboards-tables.log" 2>&1 &
dashboards=$!
pids+=("$dashboards")
while true; do
    ready=$(metric "$port" candor_dashboards_history_ready || true)
    [[ "$ready" == "1" ]] && break
    kill -0 "$dashboards" || { echo "the dashboards died; see their log:"; tail -20 "$work/dashboards-tables.log"; exit 1; }
    sleep 0.2
done
finished=$(date +%s.%N)
from_kafka=$(curl -sf "127.0.0.1:$port/metrics" | awk '$1 ~ /^candor_dashboards_records_total/ { n += $2 } END { print n + 0 }')
cpu=$(cpu_seconds "$dashboards")
rss_kb=$(awk '/VmHWM/ { print $2 }' "/proc/$dashboards/status")
rows=$(grep -o '"rows":[0-9]*' "$work/dashboards-tables.log" | head -1 | cut -d: -f2)
read_s=$(grep -o '"seconds":[0-9.]*' "$work/dashboards-tables.log" | head -1 | cut -d: -f2)
python3 - "${rows:-0}" "${read_s:-nan}" "$from_kafka" "$started" "$finished" "$cpu" "$rss_kb" <<'PY'
import sys
rows, read_s, from_kafka, t0, t1, cpu, rss = sys.argv[1:]
wall = float(t1) - float(t0)
print(f"rows_from_tables {int(rows)} read_s {float(read_s):.1f} records_from_kafka {int(float(from_kafka))} "
      f"start_to_ready_s {wall:.1f} rows_per_s {int(rows) / float(read_s):,.0f} cpu_s {float(cpu):.1f} "
      f"peak_rss_mib {int(rss) / 1024:.0f}")
PY
