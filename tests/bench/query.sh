#!/usr/bin/env bash
# Measures `candor` on N generated events written through the real compactor, and prints figures:
#   - the same three questions as a fresh `candor` process (wall time, peak memory), as a library
#     on a warm session (`query/examples/hot.rs`), and in DuckDB over the same Parquet files
#     (in one process, and as a fresh process of its command-line tool, each answering in CSV):
#     `rates --by target` over all of it, `trace <id>` for one trace, `incident` for one target
#     and one hour.
# The events are spread over 24 hours ending an hour ago, with the counter points of their 50
# targets (one a minute per class); the compactor writes them with its default file settings
# (max age 2 s here, so the run does not wait), then the closed day is optimized as the schedule
# would.
#
#   bash tests/bench/query.sh [events]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=tests/bench/lib.sh
source tests/bench/lib.sh
events="${1:-10000000}"
build_release --example hot

wait_rows() {
    local table="$1" want="$2" rows
    while true; do
        rows=$(metric "$metrics" "candor_compactor_rows_written_total{table=\"$table\"}" || true)
        [[ -n "$rows" && "${rows%.*}" -ge "$want" ]] && return 0
        kill -0 "$compactor" || { echo "the compactor died; see $work/compactor.log"; exit 1; }
        sleep 0.5
    done
}

if [[ ! -d "$work/tables/outcome_events" ]]; then
    kafka=$(free_port)
    "$tansu" broker --listener-url "tcp://127.0.0.1:$kafka" --advertised-listener-url "tcp://127.0.0.1:$kafka" \
        --storage-engine memory://tansu/ >"$work/tansu.log" 2>&1 &
    pids+=($!)
    wait_port "$kafka"
    echo "== loading $events events and their counter points"
    "$bin/candor-loadgen" --raw-kafka "127.0.0.1:$kafka" --preload "$events" --age-s 3600 \
        --spread-s 86400 --counts | tee "$work/loadgen.log"
    points=$(awk '/counter points/ { print $2 }' "$work/loadgen.log")
    metrics=$(free_port)
    started=$(date +%s)
    "$bin/candor-collector" compact --table-root "$work/tables" --kafka "127.0.0.1:$kafka" \
        --metrics-addr "127.0.0.1:$metrics" --max-age 2s --group-id bench >"$work/compactor.log" 2>&1 &
    compactor=$!
    pids+=("$compactor")
    wait_rows outcome_events "$events"
    wait_rows outcome_counts "$points"
    echo "compacted in $(( $(date +%s) - started )) s"
    kill "$compactor"; wait "$compactor" 2>/dev/null || true
    "$bin/candor-collector" maintain --table-root "$work/tables" --optimize | grep -E "outcome_(events|counts)" || true
fi
du -sh "$work/tables/outcome_events" "$work/tables/outcome_counts"

candor() { "$bin/candor" --tables "$work/tables" --no-live "$@"; }
# The windows follow the data, not the clock, so that a kept dataset is asked the same
# questions later: rates over all of it (the hour its first event falls in, to an hour past its
# last), the incident hour in its middle.
IFS=, read -r first last < <(candor sql "SELECT min(event_time) AS first, max(event_time) AS last FROM outcome_events" --format csv 2>/dev/null | sed -n 2p)
since=$(date -u -d "$first" +%Y-%m-%dT%H:00:00Z)
until=$(date -u -d "$last + 1 hour" +%Y-%m-%dT%H:%M:%SZ)
incident_from=$(date -u -d "$first + 12 hours" +%Y-%m-%dT%H:00:00Z)
# The same trace on every run over the same data, so that runs compare.
trace_id=$(candor sql "SELECT min(trace_id) AS trace_id FROM outcome_events WHERE tool_target = 'https://api-7.internal/v1/search'" --format csv 2>/dev/null | sed -n 2p || true)
target='https://api-7.internal/v1/search'
echo "trace $trace_id, target $target, rates $since to $until, incident hour from $incident_from"

# As CSV, as the DuckDB command-line tool answers beside it (query_duckdb.py --cli).
fresh() {
    local name="$1"; shift
    # 1 ("No failures") and 3 (partial) are answers too.
    "$python" tests/bench/fresh.py "$name" --runs 5 --ok 0,1,3 -- \
        "$bin/candor" --tables "$work/tables" --no-live "$@" --format csv
}
echo "== fresh process (best of 5)"
fresh "rates --by target" rates --by target --since "$since" --until "$until"
fresh "trace" trace "$trace_id"
fresh "incident (one target, one hour)" incident --target "$target" --since "$incident_from" \
    --until "$(date -u -d "$incident_from + 1 hour" +%Y-%m-%dT%H:%M:%SZ)"
echo "== library, warm session"
"$bin/examples/hot" --tables "$work/tables" --since "$since" --until "$until" --trace-id "$trace_id" \
    --target "$target" --incident-from "$incident_from"
echo "== DuckDB over the same files"
ensure_duckdb_cli
"$python" tests/bench/query_duckdb.py "$work/tables" "$since" "$until" "$trace_id" "$target" "$incident_from" \
    --cli "$duckdb_cli"
echo "data kept in $work (CANDOR_BENCH_DIR=$work reuses it)"
