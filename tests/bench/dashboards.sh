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
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/candor-target}"
records="${1:-2000000}"
targets="${2:-1000}"
days="${3:-7}"
# The same package set as deploy/local/up.sh, so all share one release build of DataFusion.
cargo build --release --locked -p candor-collector -p candor-e2e -p candor-query -p candor-dashboards \
    --bin candor-collector --bin candor-loadgen --bin candor --bin candor-dashboards --example bench
bin="$CARGO_TARGET_DIR/release"
tansu="$(command -v tansu || echo "$HOME/.cargo/bin/tansu")"
work="$(mktemp -d)"
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 200); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; echo "port $1 never opened" >&2; return 1; }
metric() { curl -sf "127.0.0.1:$1/metrics" | awk -v s="$2" '$1 == s { print $2 }'; }
cpu_seconds() { awk '{ printf "%.2f", ($14 + $15) / 100 }' "/proc/$1/stat"; }

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
    --tables "$work/tables" >"$work/dashboards.log" 2>&1 &
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
