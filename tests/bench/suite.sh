#!/usr/bin/env bash
# Runs every benchmark, each beside its peer, several times, and reports medians:
#   adapter    the adapter's cost per call beside the bare call and a bare SDK span (criterion);
#   collector  OTLP → Kafka beside a raw rdkafka producer and Rotel (collector.sh);
#   compactor  Kafka → Delta beside pyarrow's Parquet writer (compactor.sh);
#   query      `candor` as a fresh process and as a warm library beside DuckDB (query.sh);
#   latency    an adapter's failure until `candor incident` shows it, with --live and from the
#              table only (query/cli/examples/latency.rs), against the goals: p95 under 2 s and 30 s;
#   operations `candor operations` as a fresh process beside DuckDB in one process (operations.sh);
#   dashboards the dashboards' model on its own, their reading of a preloaded stream (beside the
#              collector's accepted events/s of the same repetition) and a start from the tables
#              (dashboards.sh).
# Each repetition runs the parts in an order rotated by one, so that no part always runs first on a
# cold machine; the peers inside each script keep their order. The query data is loaded once and
# reused by the following repetitions (loaded again once it is 40 minutes old, since its questions
# ask about the last 26 hours); so are the operations data (never loaded again: the window of
# operations.sh follows its data, not the clock). Every raw output, the machine's description
# (machine.txt), the parameters and exit statuses (run.txt) and the report
# (tests/bench/suite_report.py: report.md, report.json) are kept in
# ${CANDOR_BENCH_RESULTS:-~/.cache/candor-bench}/<UTC time>/.
#
#   bash tests/bench/suite.sh [repetitions]    (default 3; a repetition of collector, compactor,
#                                               query, operations and dashboards takes 5–6
#                                               minutes on 2 cores, after the first data loads)
#
# Sizes, by environment variable [default]:
#   CANDOR_BENCH_COLLECTOR_SECONDS [10]          seconds of load per collector run
#   CANDOR_BENCH_COMPACTOR_RECORDS [1000000]     records preloaded for the compactor's throughput
#   CANDOR_BENCH_COMPACTOR_STREAM_SECONDS [60]   seconds of stream for its production-to-visibility
#   CANDOR_BENCH_QUERY_EVENTS [2000000]          events behind the query benchmark
#   CANDOR_BENCH_LATENCY_SAMPLES [20]            failures per latency mode
#   CANDOR_BENCH_MAX_AGE [15s]                   the latency pipeline's compactor files.max_age
#   CANDOR_BENCH_OPERATIONS_EVENTS [1000000]     operation events behind `candor operations`
#   CANDOR_BENCH_DASHBOARDS_RECORDS [1000000]    event records preloaded for the dashboards
#   CANDOR_BENCH_DASHBOARDS_TARGETS [1000]       targets of the dashboards' model on its own
#   CANDOR_BENCH_DASHBOARDS_DAYS [1]             days of that model's history
#   CANDOR_BENCH_DASHBOARDS_HOURS [1]            hours the preloaded records are spread over
#   CANDOR_BENCH_PARTS ["adapter collector compactor query latency operations dashboards"]
#                                                the parts to run
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=tests/bench/lib.sh
source tests/bench/lib.sh
trap 'exit 130' INT TERM

repetitions="${1:-3}"
collector_seconds="${CANDOR_BENCH_COLLECTOR_SECONDS:-10}"
compactor_records="${CANDOR_BENCH_COMPACTOR_RECORDS:-1000000}"
compactor_stream_seconds="${CANDOR_BENCH_COMPACTOR_STREAM_SECONDS:-60}"
query_events="${CANDOR_BENCH_QUERY_EVENTS:-2000000}"
latency_samples="${CANDOR_BENCH_LATENCY_SAMPLES:-20}"
max_age="${CANDOR_BENCH_MAX_AGE:-15s}"
operations_events="${CANDOR_BENCH_OPERATIONS_EVENTS:-1000000}"
dashboards_records="${CANDOR_BENCH_DASHBOARDS_RECORDS:-1000000}"
dashboards_targets="${CANDOR_BENCH_DASHBOARDS_TARGETS:-1000}"
dashboards_days="${CANDOR_BENCH_DASHBOARDS_DAYS:-1}"
dashboards_hours="${CANDOR_BENCH_DASHBOARDS_HOURS:-1}"
all_parts="adapter collector compactor query latency operations dashboards"
read -r -a parts <<<"${CANDOR_BENCH_PARTS:-$all_parts}"

positive() {
    [[ "$2" =~ ^[1-9][0-9]*$ ]] || { echo "$1 must be a positive integer, not '$2'" >&2; exit 2; }
}
positive repetitions "$repetitions"
positive CANDOR_BENCH_COLLECTOR_SECONDS "$collector_seconds"
positive CANDOR_BENCH_COMPACTOR_RECORDS "$compactor_records"
positive CANDOR_BENCH_COMPACTOR_STREAM_SECONDS "$compactor_stream_seconds"
positive CANDOR_BENCH_QUERY_EVENTS "$query_events"
positive CANDOR_BENCH_LATENCY_SAMPLES "$latency_samples"
positive CANDOR_BENCH_OPERATIONS_EVENTS "$operations_events"
positive CANDOR_BENCH_DASHBOARDS_RECORDS "$dashboards_records"
positive CANDOR_BENCH_DASHBOARDS_TARGETS "$dashboards_targets"
positive CANDOR_BENCH_DASHBOARDS_DAYS "$dashboards_days"
positive CANDOR_BENCH_DASHBOARDS_HOURS "$dashboards_hours"
((${#parts[@]} > 0)) || { echo "CANDOR_BENCH_PARTS names no part" >&2; exit 2; }
for part in "${parts[@]}"; do
    case "$part" in
        adapter | collector | compactor | query | latency | operations | dashboards) ;;
        *) echo "CANDOR_BENCH_PARTS: unknown part '$part' ($all_parts)" >&2; exit 2 ;;
    esac
done

results="${CANDOR_BENCH_RESULTS:-$HOME/.cache/candor-bench}/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$results"
echo "results in $results"

describe_machine() {
    local cpu
    cpu=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
    [[ -n "$cpu" ]] || cpu=$(lscpu 2>/dev/null | awk -F': *' '/^Model name/ { print $2; exit }')
    echo "cores: $(nproc)"
    echo "cpu: ${cpu:-unknown}"
    echo "memory: $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
    echo "kernel: $(uname -srm)"
    echo "git: $(git rev-parse HEAD 2>/dev/null || echo unknown) ($(git status --porcelain 2>/dev/null | wc -l) uncommitted changes)"
    echo "rustc: $(rustc --version 2>/dev/null || echo unknown)"
    echo "tansu: $("$tansu" --version 2>/dev/null || echo unknown)"
    echo "peers: $(grep -o 'rotel==[^ ]*' tests/bench/collector.sh | head -n 1 | sed 's/==/ /'), $("$python" -c '
import deltalake, duckdb, pyarrow
print(f"duckdb {duckdb.__version__}, pyarrow {pyarrow.__version__}, deltalake {deltalake.__version__}")
' 2>/dev/null || echo "python packages unknown")"
}
describe_machine | tee "$results/machine.txt"
{
    echo "repetitions $repetitions"
    echo "parts ${parts[*]}"
    echo "collector_seconds $collector_seconds"
    echo "compactor_records $compactor_records"
    echo "compactor_stream_seconds $compactor_stream_seconds"
    echo "query_events $query_events"
    echo "latency_samples $latency_samples"
    echo "max_age $max_age"
    echo "operations_events $operations_events"
    echo "dashboards_records $dashboards_records"
    echo "dashboards_targets $dashboards_targets"
    echo "dashboards_days $dashboards_days"
    echo "dashboards_hours $dashboards_hours"
    echo "started $(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$results/run.txt"

# One release build for the scripts (which then skip theirs) and the three examples (the
# dashboards' bench is dashboards.sh's); the adapter's criterion bench is its own package set, built
# here so that no repetition includes its build.
build_release --example hot --example latency --example bench
export CANDOR_BENCH_BUILT=1
if [[ " ${parts[*]} " == *" adapter "* ]]; then
    cargo bench -p candor-adapter --bench overhead --no-run
fi

part_adapter() { cargo bench -p candor-adapter --bench overhead; }
part_collector() { env -u CANDOR_BENCH_DIR bash tests/bench/collector.sh "$collector_seconds"; }
part_compactor() {
    env -u CANDOR_BENCH_DIR bash tests/bench/compactor.sh "$compactor_records" "$compactor_stream_seconds"
}

# The query data lives in the suite's work directory, shared by the repetitions.
part_query() {
    local dir="$work/query" stamp="$work/query/.loaded-at" loading=0
    if [[ -f "$stamp" ]] && (($(date +%s) - $(cat "$stamp") > 2400)); then
        echo "== the query data is over 40 minutes old: loading it again"
        rm -rf "$dir"
    fi
    mkdir -p "$dir"
    if [[ ! -d "$dir/tables/outcome_events" ]]; then
        loading=1
        date +%s >"$stamp"
    fi
    CANDOR_BENCH_DIR="$dir" bash tests/bench/query.sh "$query_events" || {
        local status=$?
        # A load cut short must not be reused as if complete.
        ((loading == 0)) || rm -rf "$dir"
        return "$status"
    }
}

# The operations data lives in the suite's work directory too (operations.sh keeps it under
# $CANDOR_BENCH_DIR/operations and reuses it); its window follows the data, so it never ages.
part_operations() {
    local dir="$work/operations" loading=0
    mkdir -p "$dir"
    [[ -d "$dir/operations/tables/operation_events" ]] || loading=1
    CANDOR_BENCH_DIR="$dir" bash tests/bench/operations.sh "$operations_events" || {
        local status=$?
        # A load cut short must not be reused as if complete.
        ((loading == 0)) || rm -rf "$dir"
        return "$status"
    }
}

# A fresh work directory each time: the dashboards read a stream preloaded into a new broker.
part_dashboards() {
    env -u CANDOR_BENCH_DIR bash tests/bench/dashboards.sh "$dashboards_records" "$dashboards_targets" \
        "$dashboards_days" "$dashboards_hours"
}

wait_ready() {
    local port="$1" name="$2" log="$3"
    for _ in $(seq 300); do
        curl -sf "127.0.0.1:$port/readyz" >/dev/null && return 0
        sleep 0.1
    done
    echo "the $name did not become ready; the end of its log:" >&2
    tail -20 "$log" >&2
    return 1
}

# Its own pipeline: Tansu (memory engine), the collector, and a compactor writing files every
# CANDOR_BENCH_MAX_AGE; then query/cli/examples/latency with --live and with the table only.
part_latency() (
    procs=()
    # Newest first, each awaited: the compactor and the collector stop while the broker is up.
    stop() {
        for ((i = ${#procs[@]} - 1; i >= 0; i--)); do
            kill "${procs[$i]}" 2>/dev/null || true
            wait "${procs[$i]}" 2>/dev/null || true
        done
    }
    trap stop EXIT
    # The compactor keeps its Kafka positions in the table, and every repetition starts a new broker.
    rm -rf "$work/latency-tables"
    kafka=$(free_port); grpc=$(free_port); http=$(free_port); metrics=$(free_port); compactor_metrics=$(free_port)
    tansu_memory "$kafka" "$work/latency-tansu.log" &
    procs+=($!)
    wait_port "$kafka"
    ingest "$kafka" "$grpc" "$http" "$metrics" "$work/latency-collector.log" &
    procs+=($!)
    wait_ready "$metrics" collector "$work/latency-collector.log"
    "$bin/candor-collector" compact --table-root "$work/latency-tables" --kafka "127.0.0.1:$kafka" \
        --metrics-addr "127.0.0.1:$compactor_metrics" --max-age "$max_age" --group-id bench-latency \
        >"$work/latency-compactor.log" 2>&1 &
    procs+=($!)
    wait_ready "$compactor_metrics" compactor "$work/latency-compactor.log"
    echo "latency: compactor max age $max_age (files.max_age; at the compactor's default, 60s, table latency is about a minute)"
    measure() {
        echo "== latency --mode $1: $latency_samples failures, one every $2"
        "$bin/examples/latency" --candor "$bin/candor" --otlp-endpoint "http://127.0.0.1:$grpc" \
            --tables "$work/latency-tables" --kafka "127.0.0.1:$kafka" --mode "$1" \
            --samples "$latency_samples" --every "$2"
    }
    failed=0
    measure live 1s || failed=$?
    measure table 2s || failed=$?
    exit "$failed"
)

run_part() {
    local rep="$1" part="$2" started status
    started=$(date +%s)
    echo
    echo "==== repetition $rep of $repetitions: $part ($(date -u +%H:%M:%S) UTC)"
    set +e
    (
        set -e
        "part_$part"
    ) 2>&1 | tee "$results/rep$rep-$part.txt"
    status=${PIPESTATUS[0]}
    set -e
    echo "rep $rep part $part exit $status seconds $(($(date +%s) - started))" >>"$results/run.txt"
    ((status == 0)) || echo "==== $part exited with $status; the suite goes on ($results/rep$rep-$part.txt)"
}

for ((rep = 1; rep <= repetitions; rep++)); do
    first=$(((rep - 1) % ${#parts[@]}))
    order=("${parts[@]:first}" "${parts[@]:0:first}")
    echo "rep $rep order ${order[*]}" >>"$results/run.txt"
    for part in "${order[@]}"; do
        run_part "$rep" "$part"
    done
done
echo "finished $(date -u +%Y-%m-%dT%H:%M:%SZ)" >>"$results/run.txt"

echo
python3 tests/bench/suite_report.py "$results" || echo "suite_report.py failed; the raw outputs are kept" >&2
echo
echo "results in $results (report.md, report.json, machine.txt, run.txt, rep<N>-<part>.txt)"
