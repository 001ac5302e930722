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

# What the stack serves, listed once. The port check, the readiness checks and the summary
# printed at the end all read these lists, so nothing here is started unprinted or printed
# unchecked; the tables are printed as the compactor made them under DATA/tables.
# tests/e2e/stack.rs holds the printed summary to the running stack: its tables are those under
# DATA/tables, its tools answer and are those the demo calls, its scenarios are those the demo
# accepts, and its commands run.
#
# Each program's default address (the example configs', `candor demo`'s flags'). The programs
# are not told them: up.sh checks each is free before the start and answers after it.
kafka_addr=127.0.0.1:9092 # Tansu, unless --kafka names a cluster
otlp_grpc_addr=127.0.0.1:4317
otlp_http_addr=127.0.0.1:4318
collector_addr=127.0.0.1:8888
compactor_addr=127.0.0.1:8889
dashboards_addr=127.0.0.1:3000
demo_tools_addr=127.0.0.1:8181
demo_control_addr=127.0.0.1:8182
# `candor demo`'s tools (its `tools` router, query/cli/src/demo.rs), as "METHOD /path|what it
# does". Once the demo is up, up.sh stops unless it serves every one.
demo_tools=(
    "GET /search|results, confirmed empty lists, truncated pages"
    "GET /lookup|rate limits (429 + Retry-After), 5xx bursts"
    "GET /catalog|healthy, but for the spike scenario"
    "GET /slow|answers after 10 s, past the 500 ms timeout"
    "GET /expired|an expired credential (401)"
    "POST /export|202, then a status to follow at /export/{id}"
)
# Its scenarios (`POST /scenario/NAME` on the control address), as "NAME|what it does".
demo_scenarios=(
    "spike|the catalog fails"
    "collector-outage|the collector pauses 6 min"
    "exports-stuck|3 exports in 4 never end"
    "normal|the mix the demo starts with"
)
# The questions the summary suggests, each asked as `candor --data-dir DATA --kafka K ...`; the
# demo's only with the demo, whose tool it names.
questions=("rates --since 15m" "spikes")
demo_questions=("incident --target http://$demo_tools_addr/lookup --since 15m")
# The topic the summary shows how to read.
read_topic=candor.outcome-events.v1
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

addrs=("$otlp_grpc_addr" "$otlp_http_addr" "$collector_addr" "$compactor_addr" "$dashboards_addr")
[[ -z "$kafka" ]] && addrs+=("$kafka_addr")
[[ "$demo" == 1 ]] && addrs+=("$demo_tools_addr" "$demo_control_addr")
for addr in "${addrs[@]}"; do
    if (exec 3<>"/dev/tcp/${addr%:*}/${addr##*:}") 2>/dev/null; then
        echo "port ${addr##*:} is taken; stop what uses it and run again" >&2
        exit 1
    fi
done

# Waits up to 30 s for URL to answer with a success; otherwise stops, naming WHAT and its LOG.
wait_ready() {
    local url="$1" what="$2" log="$3"
    for _ in $(seq 150); do
        if curl -sf "$url" >/dev/null; then
            return 0
        fi
        sleep 0.2
    done
    echo "the $what did not become ready; see $log" >&2
    exit 1
}

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
    kafka="$kafka_addr"
    (cd "$data" && exec "$tansu" broker --listener-url "tcp://$kafka" \
        --advertised-listener-url "tcp://$kafka" --storage-engine sqlite://tansu.db) \
        >"$data/tansu.log" 2>&1 &
    pids+=($!)
    kafka_label="Kafka (Tansu)"
    kafka_text="$kafka   (SQLite storage $data/tansu.db)"
else
    kafka_label="Kafka"
    kafka_text="$kafka   (an existing cluster)"
fi
"$bin/candor-collector" ingest --config "$root/deploy/collector.example.toml" --kafka "$kafka" \
    --spool-dir "$data/spool" \
    >"$data/collector.log" 2>&1 &
collector=$!
pids+=("$collector")
wait_ready "http://$collector_addr/readyz" collector "$data/collector.log"
# Files every 15 s rather than the default 60 s: a failure is in the table (and in `candor
# incident --no-live`) within about 20 s. The hourly optimize merges the small files.
"$bin/candor-collector" compact --config "$root/deploy/compactor.example.toml" --kafka "$kafka" \
    --table-root "$data/tables" --max-age 15s >"$data/compactor.log" 2>&1 &
pids+=($!)
# Ready once it has opened or made every table under DATA/tables: the summary lists them from there.
wait_ready "http://$compactor_addr/readyz" compactor "$data/compactor.log"
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
wait_ready "http://$dashboards_addr/readyz" dashboards "$data/dashboards.log"

if [[ "$canary" == 1 ]]; then
    "$bin/candor" canary --otlp-endpoint "http://$otlp_grpc_addr" >"$data/canary.log" 2>&1 &
    pids+=($!)
fi
if [[ "$demo" == 1 ]]; then
    "$bin/candor" demo --otlp-endpoint "http://$otlp_grpc_addr" --collector-pid "$collector" \
        >"$data/demo.log" 2>&1 &
    pids+=($!)
    wait_ready "http://$demo_control_addr/scenario" "demo's scenario control" "$data/demo.log"
    # Every tool listed is served. OPTIONS reaches a tool's route without calling it (405 where
    # the path is served, 404 where it is not), so /slow answers at once and /export starts nothing.
    for tool in "${demo_tools[@]}"; do
        read -r method path <<<"${tool%%|*}"
        code="$(curl -s -o /dev/null -w '%{http_code}' -X OPTIONS "http://$demo_tools_addr$path" || true)"
        if [[ "$code" == 000 || "$code" == 404 ]]; then
            echo "the demo does not serve $method $path, which up.sh lists; see $data/demo.log" >&2
            exit 1
        fi
    done
fi

# The summary. tests/e2e/stack.rs reads it by its labels: each section's first line starts with
# its label in a column of its own, its further lines leave that column blank.
summary() { printf '  %-16s %s\n' "$1" "$2"; }
# The tables as the compactor made them (it is ready only once every table exists).
tables=()
for log in "$data/tables"/*/_delta_log; do
    if [[ -d "$log" ]]; then
        tables+=("$(basename "$(dirname "$log")")")
    fi
done
if ((${#tables[@]} == 0)); then
    echo "no table under $data/tables; see $data/compactor.log" >&2
    exit 1
fi
printf -v table_list '%s, ' "${tables[@]}"
ask=("${questions[@]}")
[[ "$demo" == 1 ]] && ask+=("${demo_questions[@]}")

echo "Candor is running."
summary dashboards "http://$dashboards_addr/   (forensics /events, JSON /api/overview, /metrics)"
summary "" "user candor, password: cat $data/dashboards.password"
summary "" "scripts: curl -H \"Authorization: Bearer \$(cat $data/dashboards.token)\" ..."
summary OTLP "grpc $otlp_grpc_addr   http $otlp_http_addr"
summary collector "http://$collector_addr/metrics   /readyz"
summary compactor "http://$compactor_addr/metrics   /readyz   (files every 15 s)"
summary tables "$data/tables  (${table_list%, })"
summary "$kafka_label" "$kafka_text"
summary "data and logs" "$data"
label=ask
for question in "${ask[@]}"; do
    summary "$label" "$bin/candor --data-dir $data --kafka $kafka $question"
    label=""
done
summary "read a topic" "$bin/candor-collector read --topic $read_topic --limit 20 --kafka $kafka"
if [[ "$demo" == 1 ]]; then
    label="demo tools"
    for tool in "${demo_tools[@]}"; do
        read -r method path <<<"${tool%%|*}"
        summary "$label" "$(printf '%-4s %-30s %s' "$method" "http://$demo_tools_addr$path" "${tool#*|}")"
        label=""
    done
    label=scenarios
    for scenario in "${demo_scenarios[@]}"; do
        summary "$label" "$(printf '%-62s (%s)' "curl -X POST http://$demo_control_addr/scenario/${scenario%%|*}" "${scenario#*|}")"
        label=""
    done
fi
[[ "$canary" == 1 ]] && summary canary "one call of each class a minute to candor://canary"
echo "Ctrl-C stops everything."
wait
