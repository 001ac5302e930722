#!/usr/bin/env bash
# Measures the collector under OTLP/gRPC load against Tansu (memory engine) and prints figures:
# accepted events/s at full speed, latency at half that rate and at 100,000 events/s, CPU per
# event, peak RSS, and the check that the events topic holds every acknowledged event. Then the
# same load against Rotel (a Rust OpenTelemetry collector with a Kafka exporter, from PyPI) with
# acks=all and zstd, for comparison; Rotel answers before Kafka delivery and writes one Kafka
# message per batch, so its stored count is not comparable and is not checked.
#
#   bash tests/bench/collector.sh [seconds]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=tests/bench/lib.sh
source tests/bench/lib.sh
seconds="${1:-15}"
build_release

run_once() {
    local rate_args=("$@")
    local kafka grpc http metrics
    kafka=$(free_port); grpc=$(free_port); http=$(free_port); metrics=$(free_port)
    tansu_memory "$kafka" "$work/tansu.log" &
    pids+=($!)
    wait_port "$kafka"
    ingest "$kafka" "$grpc" "$http" "$metrics" "$work/collector.log" "${collector_args[@]}" &
    local collector=$!
    pids+=("$collector")
    for _ in $(seq 200); do curl -sf "127.0.0.1:$metrics/readyz" >/dev/null && break; sleep 0.1; done
    "$bin/candor-loadgen" --endpoint "http://127.0.0.1:$grpc" --seconds "$seconds" \
        --collector-pid "$collector" --kafka "127.0.0.1:$kafka" "${rate_args[@]}"
    kill "${pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
    pids=()
}

run_rotel() {
    local venv="$HOME/.cache/rotel-venv"
    if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/pip" show rotel >/dev/null 2>&1; then
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check rotel==0.0.1a15
    fi
    local rotel
    rotel="$(find "$venv" -name rotel-agent -type f | head -n 1)"
    local kafka grpc http
    kafka=$(free_port); grpc=$(free_port); http=$(free_port)
    "$tansu" broker --listener-url "tcp://127.0.0.1:$kafka" --advertised-listener-url "tcp://127.0.0.1:$kafka" \
        --storage-engine memory://tansu/ >"$work/tansu.log" 2>&1 &
    pids+=($!)
    wait_port "$kafka"
    "$tansu" topic create otlp_traces --broker "tcp://127.0.0.1:$kafka" --partitions 3 >/dev/null
    "$rotel" start --otlp-grpc-endpoint "127.0.0.1:$grpc" --otlp-http-endpoint "127.0.0.1:$http" \
        --exporter kafka --kafka-exporter-brokers "127.0.0.1:$kafka" --kafka-exporter-acks all \
        --kafka-exporter-compression zstd >"$work/rotel.log" 2>&1 &
    local agent=$!
    pids+=("$agent")
    wait_port "$grpc"
    "$bin/candor-loadgen" --endpoint "http://127.0.0.1:$grpc" --seconds "$seconds" \
        --collector-pid "$agent" "$@"
    kill "${pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
    pids=()
}

# Each connection has one request in flight, so the connections bound a run's rate: with 4, the
# collector delivered 77,000 events/s, limited by the time Kafka takes to acknowledge a request's
# records (about 25 ms), not by the collector or the broker; 16 keep both busy.
connections=16
collector_args=()
echo "== full speed"
run_once --connections "$connections" --batch 500 | tee "$work/full.txt"
full=$(awk '/^accepted_events_per_s/ {print $2}' "$work/full.txt")
half=$(( ${full%.*} / 2 ))
echo "== half of the measured maximum: $half events/s"
run_once --connections "$connections" --batch 500 --rate "$half"
echo "== 100,000 events/s"
run_once --connections "$connections" --batch 500 --rate 100000
echo "== ceiling: a raw rdkafka producer of the same records (idempotent, acks=all, zstd, 10,000 in flight)"
kafka=$(free_port)
"$tansu" broker --listener-url "tcp://127.0.0.1:$kafka" --advertised-listener-url "tcp://127.0.0.1:$kafka" \
    --storage-engine memory://tansu/ >"$work/tansu.log" 2>&1 &
pids+=($!)
wait_port "$kafka"
"$bin/candor-loadgen" --raw-kafka "127.0.0.1:$kafka" --seconds "$seconds"
kill "${pids[@]}" 2>/dev/null || true
wait 2>/dev/null || true

echo "== rotel, full speed (acks=all, zstd; answers before delivery)"
run_rotel --connections "$connections" --batch 500

# The realistic mix of the derived sources (80 % ordinary spans, 20 % tool spans), at a fixed
# rate every run can take: the collector deriving, the collector with every derived source off
# (today's cost of ignoring spans), and Rotel.
mix_rate=100000
echo "== mix of 1,000-span requests at $mix_rate spans/s: deriving"
run_once --connections "$connections" --batch 1000 --mix --rate "$mix_rate"
echo "== mix at $mix_rate spans/s: every derived source off"
printf '[derived]\ngenai = false\nmcp = false\nhttp = false\n' >"$work/derived-off.toml"
collector_args=(--config "$work/derived-off.toml")
run_once --connections "$connections" --batch 1000 --mix --rate "$mix_rate"
collector_args=()
echo "== rotel, mix at $mix_rate spans/s"
run_rotel --connections "$connections" --batch 1000 --mix --rate "$mix_rate"
