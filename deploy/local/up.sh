#!/usr/bin/env bash
# Runs Candor's local stack with demo traffic: Tansu (SQLite storage under the data directory),
# the collector, the compactor (Delta tables under DATA/tables), the dashboards (web UI on 3000),
# local flaky tool servers, and the adapter's probe calling them through Candor every second.
# Ctrl-C stops everything. A second run reuses the data.
#
#   ./deploy/local/up.sh [--data-dir DIR] [--no-demo]      (env CANDOR_DATA_DIR, default ./data)
#
# Not built yet: `candor demo` (several services, switchable scenarios) and `candor canary`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root="$(pwd)"
data="${CANDOR_DATA_DIR:-$root/data}"
demo=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --data-dir) data="$2"; shift 2 ;;
        --no-demo) demo=0; shift ;;
        *) echo "usage: $0 [--data-dir DIR] [--no-demo]" >&2; exit 2 ;;
    esac
done
mkdir -p "$data"
data="$(cd "$data" && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/candor-target}"

if ! command -v tansu >/dev/null && [[ ! -x "$HOME/.cargo/bin/tansu" ]]; then
    echo "installing Tansu (a release build of about 15 minutes, once per machine)"
    cargo install tansu --locked --features dynostore,libsql
fi
tansu="$(command -v tansu || echo "$HOME/.cargo/bin/tansu")"
# One build for every binary, with the same package set as the benchmarks (tests/bench/): cargo
# unifies features per build, and a different set would compile DataFusion again.
cargo build --release --locked -p candor-collector -p candor-e2e -p candor-query -p candor-dashboards \
    --bin candor-collector --bin candor-loadgen --bin candor --bin candor-dashboards
bin="$CARGO_TARGET_DIR/release"

for port in 9092 4317 4318 8888 8889 8181 3000; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "port $port is taken; stop what uses it and run again" >&2
        exit 1
    fi
done

pids=()
stop() {
    trap - EXIT
    echo; echo "stopping"
    # Newest first, each awaited: the compactor and the collector finish their last commit and
    # flush while the broker is still up.
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        kill "${pids[$i]}" 2>/dev/null || true
        wait "${pids[$i]}" 2>/dev/null || true
    done
}
trap stop EXIT
# Ctrl-C or SIGTERM ends the script; leaving runs `stop`.
trap 'exit 130' INT TERM

(cd "$data" && exec "$tansu" broker --listener-url tcp://127.0.0.1:9092 \
    --advertised-listener-url tcp://127.0.0.1:9092 --storage-engine sqlite://tansu.db) \
    >"$data/tansu.log" 2>&1 &
pids+=($!)
"$bin/candor-collector" ingest --config "$root/deploy/collector.example.toml" >"$data/collector.log" 2>&1 &
pids+=($!)
for _ in $(seq 150); do
    curl -sf 127.0.0.1:8888/readyz >/dev/null && break
    sleep 0.2
done
curl -sf 127.0.0.1:8888/readyz >/dev/null || { echo "the collector did not become ready; see $data/collector.log" >&2; exit 1; }
"$bin/candor-collector" compact --config "$root/deploy/compactor.example.toml" \
    --table-root "$data/tables" >"$data/compactor.log" 2>&1 &
pids+=($!)
for _ in $(seq 150); do
    curl -sf 127.0.0.1:8889/readyz >/dev/null && break
    sleep 0.2
done
curl -sf 127.0.0.1:8889/readyz >/dev/null || { echo "the compactor did not become ready; see $data/compactor.log" >&2; exit 1; }
# The dashboards: their own consumer group, the tables read-only, no dependency on the collector.
"$bin/candor-dashboards" --listen 127.0.0.1:3000 --kafka 127.0.0.1:9092 --tables "$data/tables" \
    >"$data/dashboards.log" 2>&1 &
pids+=($!)
for _ in $(seq 150); do
    curl -sf 127.0.0.1:3000/readyz >/dev/null && break
    sleep 0.2
done
curl -sf 127.0.0.1:3000/readyz >/dev/null || { echo "the dashboards did not become ready; see $data/dashboards.log" >&2; exit 1; }

cat <<INFO
Candor is running.
  dashboards       http://127.0.0.1:3000/   (forensics /events, JSON /api/overview, /metrics)
  OTLP             grpc 127.0.0.1:4317   http 127.0.0.1:4318
  collector        http://127.0.0.1:8888/metrics   /readyz
  compactor        http://127.0.0.1:8889/metrics   /readyz   (files every 60 s)
  tables           $data/tables  (outcome_events, outcome_counts, rejected, heartbeats)
  Kafka (Tansu)    127.0.0.1:9092
  data and logs    $data
  read a topic     $bin/candor-collector read --topic candor.outcome-events.v1 --kafka-brokers 127.0.0.1:9092
  ask              $bin/candor --data-dir $data rates --since 15m
                   $bin/candor --data-dir $data spikes
                   $bin/candor --data-dir $data incident --target http://127.0.0.1:8181/slow --since 15m
INFO

if [[ "$demo" == 1 ]]; then
    python3 "$root/deploy/local/flaky_tools.py" 8181 &
    pids+=($!)
    echo "demo traffic: the probe calls four flaky tools every second (Ctrl-C stops)"
    while true; do
        for tool in "search --items-field items --total-field total" "lookup --items-field items" "slow" "expired"; do
            set -- $tool
            name="$1"; shift
            "$bin/candor" probe "http://127.0.0.1:8181/$name" "$@" --timeout-ms 500 --max-attempts 2 \
                --otlp-endpoint http://127.0.0.1:4317 >/dev/null 2>"$data/probe-$name.log" || true
        done
        sleep 1
    done
else
    wait
fi
