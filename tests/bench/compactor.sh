#!/usr/bin/env bash
# Measures the compactor against Tansu (memory engine) and prints figures:
#   1. throughput: N distinct realistic records preloaded into the events topic, then the time
#      until the compactor has committed them all, and its CPU time (files every 2 s);
#   2. bytes per event on disk after optimize, and the same rows written by pyarrow's Parquet
#      writer (same codec, level and row-group size) with its time, beside the compactor's own
#      time writing files and committing;
#   3. the time from a record's production to its visibility in the table at default settings
#      (files every 60 s), under a steady stream.
#
#   bash tests/bench/compactor.sh [records] [stream-seconds]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=tests/bench/lib.sh
source tests/bench/lib.sh
records="${1:-2000000}"
stream_seconds="${2:-150}"
build_release

start_tansu() {
    kafka=$(free_port)
    "$tansu" broker --listener-url "tcp://127.0.0.1:$kafka" --advertised-listener-url "tcp://127.0.0.1:$kafka" \
        --storage-engine memory://tansu/ >"$work/tansu-$kafka.log" 2>&1 &
    pids+=($!)
    wait_port "$kafka"
}
rows_metric='candor_compactor_rows_written_total{table="outcome_events"}'

echo "== 1. throughput: $records records preloaded"
start_tansu
# An hour of events twenty hours old: yesterday's partition, closed, so optimize merges it. The
# hour gives each target's times the gaps of a busy pipeline (a record every 2 ms in all), not
# the microsecond steps of records made as fast as possible, which compress as no real ones do.
"$bin/candor-loadgen" --raw-kafka "127.0.0.1:$kafka" --preload "$records" --age-s 72000 --spread-s 3600
metrics=$(free_port)
started=$(date +%s.%N)
"$bin/candor-collector" compact --table-root "$work/tables" --kafka "127.0.0.1:$kafka" \
    --metrics-addr "127.0.0.1:$metrics" --max-age 2s --group-id bench >"$work/compactor.log" 2>&1 &
compactor=$!
pids+=("$compactor")
while true; do
    rows=$(metric "$metrics" "$rows_metric" || true)
    [[ -n "$rows" && "${rows%.*}" -ge "$records" ]] && break
    kill -0 "$compactor" || { echo "the compactor died; see its log:"; tail -20 "$work/compactor.log"; exit 1; }
    sleep 0.2
done
finished=$(date +%s.%N)
cpu=$(cpu_seconds "$compactor")
write_s=$(metric "$metrics" 'candor_compactor_commit_duration_seconds_sum{table="outcome_events"}')
stages=""
for stage in sort build write commit; do
    seconds=$(metric "$metrics" "candor_compactor_commit_stage_seconds_sum{table=\"outcome_events\",stage=\"$stage\"}" || true)
    stages+="$stage ${seconds:-nan} "
done
commits=$(metric "$metrics" 'candor_compactor_commits_total{table="outcome_events"}')
rss_kb=$(awk '/VmHWM/ { print $2 }' "/proc/$compactor/status")
python3 - "$records" "$started" "$finished" "$cpu" "$write_s" "$commits" "$rss_kb" $stages <<'PY'
import sys
n, t0, t1, cpu, write_s, commits, rss, *stages = sys.argv[1:]
n, wall, cpu = int(n), float(t1) - float(t0), float(cpu)
print(f"rows {n} wall_s {wall:.1f} events_per_s {n / wall:,.0f} cpu_s {cpu:.1f} "
      f"events_per_cpu_s {n / cpu:,.0f} commits {commits} write_and_commit_s {float(write_s):.1f} "
      f"peak_rss_mib {int(rss) / 1024:.0f}")
# Sorting the rows, building their Arrow batch, the Parquet writer, the Delta commit.
print("stages_s " + " ".join(f"{name} {float(s):.2f}" for name, s in zip(stages[::2], stages[1::2])))
PY
kill "$compactor"; wait "$compactor" 2>/dev/null || true
"$python" tests/bench/compactor_report.py size "$work/tables/outcome_events"
"$bin/candor-collector" maintain --table-root "$work/tables" --optimize | grep outcome_events
echo "after optimize:"
"$python" tests/bench/compactor_report.py size "$work/tables/outcome_events"
"$python" tests/bench/compactor_report.py pyarrow "$work/tables/outcome_events" "$work/pyarrow.parquet"

echo "== 3. production to visibility at default settings: ${stream_seconds}s of 2,000 records/s"
start_tansu
metrics=$(free_port)
"$bin/candor-collector" compact --table-root "$work/stream" --kafka "127.0.0.1:$kafka" \
    --metrics-addr "127.0.0.1:$metrics" --group-id bench-stream >"$work/compactor-stream.log" 2>&1 &
pids+=($!)
stream_records=$((stream_seconds * 2000))
"$bin/candor-loadgen" --raw-kafka "127.0.0.1:$kafka" --preload "$stream_records" --rate 2000
# Wait for the last file (at most files.max_age after the last record).
for _ in $(seq 600); do
    rows=$(metric "$metrics" "$rows_metric" || true)
    [[ -n "$rows" && "${rows%.*}" -ge "$stream_records" ]] && break
    sleep 0.2
done
"$python" tests/bench/compactor_report.py latency "$work/stream/outcome_events"
