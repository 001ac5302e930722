#!/usr/bin/env bash
# Measures the collector's spool and prints figures: CPU per event with the spool on and off
# while Kafka is up (the same load, same run); the spool's append rate while the broker is frozen
# (requests acknowledged from the spool); then, once the broker is back, how long the drainer
# takes to empty the spool and its drain rate. That every acknowledged event reaches the topic is
# checked by tests/e2e/spool.rs.
#
#   bash tests/bench/spool.sh [outage-seconds] [rate]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=tests/bench/lib.sh
source tests/bench/lib.sh
outage="${1:-30}"
rate="${2:-50000}"
connections=16
batch=500
build_release

# collector KAFKA_PORT GRPC_PORT METRICS_PORT LOG [SPOOL_DIR]: a collector with a 2 s delivery
# timeout, spooling into SPOOL_DIR when given (with room for the whole outage).
collector() {
    local config="$work/collector-$2.toml"
    printf '[kafka]\ndelivery_timeout = "2s"\n' >"$config"
    if [[ -n "${5:-}" ]]; then
        printf '[spool]\ndir = "%s"\nmax_bytes = 17179869184\n' "$5" >>"$config"
    fi
    exec "$bin/candor-collector" ingest --config "$config" --grpc-addr "127.0.0.1:$2" \
        --http-addr "127.0.0.1:$(free_port)" --metrics-addr "127.0.0.1:$3" \
        --kafka "127.0.0.1:$1" >"$4" 2>&1
}

start() {
    kafka=$(free_port); grpc=$(free_port); metrics=$(free_port)
    tansu_memory "$kafka" "$work/tansu.log" &
    broker=$!
    pids+=("$broker")
    wait_port "$kafka"
    collector "$kafka" "$grpc" "$metrics" "$work/collector.log" "$@" &
    ingest_pid=$!
    pids+=("$ingest_pid")
    for _ in $(seq 200); do curl -sf "127.0.0.1:$metrics/readyz" >/dev/null && break; sleep 0.1; done
}

stop() {
    kill "${pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
    pids=()
}

load() {
    "$bin/candor-loadgen" --endpoint "http://127.0.0.1:$grpc" --connections "$connections" \
        --batch "$batch" --collector-pid "$ingest_pid" "$@"
}

echo "== Kafka up, $rate events/s for 15 s: spool off"
start
load --seconds 15 --rate "$rate" --kafka "127.0.0.1:$kafka"
stop
echo "== Kafka up, $rate events/s for 15 s: spool on"
rm -rf "$work/spool"
start "$work/spool"
load --seconds 15 --rate "$rate" --kafka "127.0.0.1:$kafka"
echo "spool_appended $(metric "$metrics" 'candor_collector_spool_records_total{action="appended"}')"
stop

echo "== broker frozen for ${outage} s under $rate events/s: requests acknowledged from the spool"
rm -rf "$work/spool"
start "$work/spool"
# The topics exist and the producer is connected before the broker is frozen.
load --seconds 2 --rate 1000 >/dev/null
kill -STOP "$broker"
load --seconds "$outage" --rate "$rate" | tee "$work/outage.txt"
spooled=$(metric "$metrics" candor_collector_spool_records)
spooled_bytes=$(metric "$metrics" candor_collector_spool_bytes)
echo "spooled_records $spooled spooled_bytes $spooled_bytes spool_file_bytes $(stat -c %s "$work/spool/spool.redb")"
cpu_before=$(cpu_seconds "$ingest_pid")
thawed=$(date +%s.%N)
kill -CONT "$broker"
while :; do
    left=$(metric "$metrics" candor_collector_spool_records)
    [[ "$left" == 0 ]] && break
    sleep 0.2
done
drained_at=$(date +%s.%N)
cpu_after=$(cpu_seconds "$ingest_pid")
drained=$(metric "$metrics" 'candor_collector_spool_records_total{action="drained"}')
awk -v t0="$thawed" -v t1="$drained_at" -v n="$drained" -v c0="$cpu_before" -v c1="$cpu_after" 'BEGIN {
    printf "recovery_s %.1f drained_records %d drain_records_per_s %.0f collector_cpu_s %.2f\n", t1 - t0, n, n / (t1 - t0), c1 - c0
}'
stop
