#!/usr/bin/env bash
# Runs Candor's local stack with demo traffic: Tansu (SQLite storage under the data directory),
# the collector, the compactor (Delta tables under DATA/tables), the dashboards (web UI on 3000),
# `candor demo` (three services calling six flaky local tools through the adapter, scenarios
# switched at run time) and `candor canary` (one call of each class a minute). Ctrl-C stops
# everything. A second run reuses the data.
#
#   ./deploy/local/up.sh [--data-dir DIR] [--release] [--no-demo] [--no-canary] [--kafka HOST:PORT]
#                                              (env CANDOR_DATA_DIR, default ./data)
#
# --kafka uses an existing Kafka cluster instead of starting Tansu. --release runs optimised
# binaries (CANDOR_BUILD=release): a longer first build, for load beyond the demo's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root="$(pwd)"
data="${CANDOR_DATA_DIR:-$root/data}"
demo=1
canary=1
kafka=""
build="${CANDOR_BUILD:-debug}"
usage="usage: $0 [--data-dir DIR] [--release] [--no-demo] [--no-canary] [--kafka HOST:PORT]"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --data-dir) [[ $# -ge 2 ]] || { echo "$usage" >&2; exit 2; }; data="$2"; shift 2 ;;
        --kafka) [[ $# -ge 2 ]] || { echo "$usage" >&2; exit 2; }; kafka="$2"; shift 2 ;;
        --release) build=release; shift ;;
        --no-demo) demo=0; shift ;;
        --no-canary) canary=0; shift ;;
        *) echo "$usage" >&2; exit 2 ;;
    esac
done
[[ "$build" == debug || "$build" == release ]] || { echo "CANDOR_BUILD is debug or release" >&2; exit 2; }
mkdir -p "$data"
data="$(cd "$data" && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/candor-target}"

# What the build needs beyond a Rust toolchain, and Tansu unless --kafka names a cluster; Tansu
# builds beside the stack's own build, and an interrupted start stops it.
# shellcheck source=deploy/local/install.sh
source deploy/local/install.sh
install_debian_packages "${CANDOR_BUILD_PACKAGES[@]}"
trap stop_tansu_install EXIT
[[ -n "$kafka" ]] || start_tansu_install "$data/tansu-install.log"
# The default is the debug build of every binary, the one the test suite (tests/run.sh) makes,
# so that the first run on a machine compiles the workspace once for both and soonest; the
# demo's traffic is far below what a debug build serves. --release is the build the
# benchmarks (tests/bench/) make, with the same package set: cargo unifies features per build,
# and a different set would compile DataFusion again.
if [[ "$build" == debug ]]; then
    cargo build --locked --workspace --bins --all-features
else
    cargo build --release --locked -p candor-collector -p candor-e2e -p candor-query -p candor-cli -p candor-dashboards \
        --bin candor-collector --bin candor-loadgen --bin candor --bin candor-dashboards
fi
bin="$CARGO_TARGET_DIR/$build"
[[ -n "$kafka" ]] || wait_for_tansu

ports=(4317 4318 8888 8889 3000)
[[ -z "$kafka" ]] && ports+=(9092)
[[ "$demo" == 1 ]] && ports+=(8181 8182)
for port in "${ports[@]}"; do
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
        # A collector paused by the demo's outage scenario must run again to hear the TERM.
        kill -CONT "${pids[$i]}" 2>/dev/null || true
        kill "${pids[$i]}" 2>/dev/null || true
        wait "${pids[$i]}" 2>/dev/null || true
    done
}
trap stop EXIT
# Ctrl-C or SIGTERM ends the script; leaving runs `stop`.
trap 'exit 130' INT TERM

if [[ -z "$kafka" ]]; then
    kafka=127.0.0.1:9092
    (cd "$data" && exec "$tansu" broker --listener-url tcp://127.0.0.1:9092 \
        --advertised-listener-url tcp://127.0.0.1:9092 --storage-engine sqlite://tansu.db) \
        >"$data/tansu.log" 2>&1 &
    pids+=($!)
    kafka_line="Kafka (Tansu)    $kafka   (SQLite storage $data/tansu.db)"
else
    kafka_line="Kafka            $kafka   (an existing cluster)"
fi
"$bin/candor-collector" ingest --config "$root/deploy/collector.example.toml" --kafka "$kafka" \
    --spool-dir "$data/spool" \
    >"$data/collector.log" 2>&1 &
collector=$!
pids+=("$collector")
for _ in $(seq 150); do
    curl -sf 127.0.0.1:8888/readyz >/dev/null && break
    sleep 0.2
done
curl -sf 127.0.0.1:8888/readyz >/dev/null || { echo "the collector did not become ready; see $data/collector.log" >&2; exit 1; }
# Files every 15 s rather than the default 60 s: a failure is in the table (and in `candor
# incident --no-live`) within about 20 s. The hourly optimize merges the small files.
"$bin/candor-collector" compact --config "$root/deploy/compactor.example.toml" --kafka "$kafka" \
    --table-root "$data/tables" --max-age 15s >"$data/compactor.log" 2>&1 &
pids+=($!)
for _ in $(seq 150); do
    curl -sf 127.0.0.1:8889/readyz >/dev/null && break
    sleep 0.2
done
curl -sf 127.0.0.1:8889/readyz >/dev/null || { echo "the compactor did not become ready; see $data/compactor.log" >&2; exit 1; }
# The dashboards: their own consumer group, the tables read-only, no dependency on the collector.
# Locked as in production ([web]): the user `candor` with a password made for this data directory
# and a token with the same role for scripts, each kept in a file only the owner reads; the
# configuration is the example's with that section added.
(
    umask 077
    for secret in dashboards.password dashboards.token; do
        [[ -s "$data/$secret" ]] || head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$data/$secret"
    done
    "$bin/candor-dashboards" hash-password <"$data/dashboards.password" >"$data/dashboards.hash"
)
{
    cat "$root/deploy/dashboards.example.toml"
    cat <<WEB

[[web.users]]
name = "candor"
role = "read"
password_hash_file = "$data/dashboards.hash"

[[web.tokens]]
name = "local"
role = "read"
token_file = "$data/dashboards.token"
WEB
} >"$data/dashboards.toml"
"$bin/candor-dashboards" --config "$data/dashboards.toml" --kafka "$kafka" \
    --tables "$data/tables" --state-dir "$data/dashboards" >"$data/dashboards.log" 2>&1 &
pids+=($!)
for _ in $(seq 150); do
    curl -sf 127.0.0.1:3000/readyz >/dev/null && break
    sleep 0.2
done
curl -sf 127.0.0.1:3000/readyz >/dev/null || { echo "the dashboards did not become ready; see $data/dashboards.log" >&2; exit 1; }

if [[ "$canary" == 1 ]]; then
    "$bin/candor" canary --otlp-endpoint http://127.0.0.1:4317 >"$data/canary.log" 2>&1 &
    pids+=($!)
fi
if [[ "$demo" == 1 ]]; then
    "$bin/candor" demo --otlp-endpoint http://127.0.0.1:4317 --collector-pid "$collector" \
        >"$data/demo.log" 2>&1 &
    pids+=($!)
fi

cat <<INFO
Candor is running.
  dashboards       http://127.0.0.1:3000/   (forensics /events, JSON /api/overview, /metrics)
                   user candor, password: cat $data/dashboards.password
                   scripts: curl -H "Authorization: Bearer \$(cat $data/dashboards.token)" ...
  OTLP             grpc 127.0.0.1:4317   http 127.0.0.1:4318
  collector        http://127.0.0.1:8888/metrics   /readyz
  compactor        http://127.0.0.1:8889/metrics   /readyz   (files every 15 s)
  tables           $data/tables  (outcome_events, outcome_counts, rejected, heartbeats, operation_events)
  $kafka_line
  data and logs    $data
  ask              $bin/candor --data-dir $data --kafka $kafka rates --since 15m
                   $bin/candor --data-dir $data --kafka $kafka spikes
                   $bin/candor --data-dir $data --kafka $kafka incident --target http://127.0.0.1:8181/lookup --since 15m
  read a topic     $bin/candor-collector read --topic candor.outcome-events.v1 --kafka $kafka
INFO
if [[ "$demo" == 1 ]]; then
    cat <<INFO
  demo             three services call http://127.0.0.1:8181/{search,lookup,catalog,slow,expired}
  scenarios        curl -X POST http://127.0.0.1:8182/scenario/spike              (the catalog fails)
                   curl -X POST http://127.0.0.1:8182/scenario/collector-outage   (the collector pauses 6 min)
                   curl -X POST http://127.0.0.1:8182/scenario/exports-stuck      (3 exports in 4 never end)
                   curl -X POST http://127.0.0.1:8182/scenario/normal
INFO
fi
[[ "$canary" == 1 ]] && echo "  canary           one call of each class a minute to candor://canary"
echo "Ctrl-C stops everything."
wait
