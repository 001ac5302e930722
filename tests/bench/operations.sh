#!/usr/bin/env bash
# Measures `candor operations` on N generated `tool.lifecycle` events written through the real
# compactor, beside the same question in DuckDB over the same Parquet files, and prints both and
# their ratio: each operation's latest state over all of the events, the open ones the oldest
# first (`--stuck-after 15m`), and how many ended in each terminal state.
# The events are those of operations of 2 to 4 states (accepted, perhaps queued and running, then
# an end; one in ten never ends, left with 1 to 3), accepted over 24 hours ending an hour ago
# across the 50 targets of tests/bench/query.sh, with the counter points of those targets (one a
# minute per class), which `candor operations` reads as it does in a deployment (which adapter
# instances went silent, the calls they counted). DuckDB reads only operation_events, so the
# ratio includes that reading on `candor`'s side.
# The compactor writes them with its default file settings (max age 2 s here, so the run does not
# wait), then the closed days are optimized as the schedule would. `candor` runs as a fresh
# process (best of 5: wall time, and the peak RSS of the last run); DuckDB in one Python process
# (the first and the fastest of 5, and that process's peak RSS). The open operations each found
# are counted, and the script fails unless the two counts and the generator's agree.
# The data lives under $work/operations, apart from query.sh's tables, so that one
# CANDOR_BENCH_DIR keeps both.
#
#   bash tests/bench/operations.sh [events]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=tests/bench/lib.sh
source tests/bench/lib.sh
events="${1:-1000000}"
build_release

data="$work/operations"
tables="$data/tables"
mkdir -p "$data"

wait_rows() {
    local table="$1" want="$2" rows
    while true; do
        rows=$(metric "$metrics" "candor_compactor_rows_written_total{table=\"$table\"}" || true)
        [[ -n "$rows" && "${rows%.*}" -ge "$want" ]] && return 0
        kill -0 "$compactor" || { echo "the compactor died; see $data/compactor.log"; exit 1; }
        sleep 0.5
    done
}

if [[ ! -d "$tables/operation_events" ]]; then
    kafka=$(free_port)
    tansu_memory "$kafka" "$data/tansu.log" &
    pids+=($!)
    wait_port "$kafka"
    echo "== loading $events operation events and the counter points of their targets"
    "$bin/candor-loadgen" --raw-kafka "127.0.0.1:$kafka" --preload "$events" --operations \
        --age-s 3600 --spread-s 86400 --counts | tee "$data/loadgen.log"
    points=$(awk '/counter points/ { print $2 }' "$data/loadgen.log")
    metrics=$(free_port)
    started=$(date +%s)
    "$bin/candor-collector" compact --table-root "$tables" --kafka "127.0.0.1:$kafka" \
        --metrics-addr "127.0.0.1:$metrics" --max-age 2s --group-id bench >"$data/compactor.log" 2>&1 &
    compactor=$!
    pids+=("$compactor")
    wait_rows operation_events "$events"
    wait_rows outcome_counts "$points"
    echo "compacted in $(( $(date +%s) - started )) s"
    kill "$compactor"; wait "$compactor" 2>/dev/null || true
    "$bin/candor-collector" maintain --table-root "$tables" --optimize \
        | grep -E "operation_events|outcome_counts" || true
fi
du -sh "$tables/operation_events" "$tables/outcome_counts"
# The operations the generator left open, from the log kept with the data.
generated=$(awk '/never ending/ { print $4 }' "$data/loadgen.log" 2>/dev/null || true)

candor() { "$bin/candor" --tables "$tables" --no-live "$@"; }
# The window follows the data, not the clock, so that a kept dataset is asked the same question
# later: from the hour its first event falls in to five minutes past its last, so that the open
# operations accepted in its last ten minutes or so are pending and the older ones stuck, or
# unknown where `candor` finds their adapter instance went silent.
IFS=, read -r first last < <(candor sql "SELECT min(event_time) AS first, max(event_time) AS last FROM operation_events" --format csv 2>/dev/null | sed -n 2p)
since=$(date -u -d "$first" +%Y-%m-%dT%H:00:00Z)
until=$(date -u -d "$last + 5 minutes" +%Y-%m-%dT%H:%M:%SZ)
echo "operations $since to $until"

echo "== candor operations, fresh process (best of 5)"
best="" rss=""
for _ in 1 2 3 4 5; do
    /usr/bin/time -f "%e %M" -o "$data/time" "$bin/candor" --tables "$tables" --no-live operations \
        --since "$since" --until "$until" --stuck-after 15m --format json >"$data/out.json" 2>/dev/null \
        || [[ $? -le 3 ]]
    read -r wall kib < <(tail -1 "$data/time")
    if [[ -z "$best" ]] || awk -v a="$wall" -v b="$best" 'BEGIN { exit !(a < b) }'; then best="$wall"; fi
    rss="$kib"
done
read -r candor_open statuses < <("$python" -c '
import collections, json, sys
answer = json.load(open(sys.argv[1]))
rows = answer["envelope"]["outcome"].get("payload", {}).get("rows", [])
by = collections.Counter(row["status"] for row in rows)
print(len(rows), " ".join(f"{status} {by[status]}" for status in ("pending", "stuck", "unknown")))
' "$data/out.json")
candor_ms=$(awk -v w="$best" 'BEGIN { printf "%.0f", w * 1000 }')
echo "candor operations: open $candor_open ($statuses) best_wall_ms $candor_ms peak_rss_mib $((rss / 1024))"
"$python" -c 'import json, sys; print("\n".join(json.load(open(sys.argv[1]))["summary"]))' \
    "$data/out.json" | sed 's/^/  /'

echo "== DuckDB over the same files (in one process)"
duckdb_line=$("$python" tests/bench/operations_duckdb.py "$tables" "$since" "$until")
echo "$duckdb_line"
field() { awk -v name="$1" '{ for (i = 1; i < NF; i++) if ($i == name) { print $(i + 1); exit } }' <<<"$2"; }
duckdb_open=$(field open "$duckdb_line")
duckdb_ms=$(field best_wall_ms "$duckdb_line")
echo "candor (fresh process) ÷ DuckDB (in process), best wall time: $(awk -v c="$candor_ms" -v d="$duckdb_ms" 'BEGIN { printf "%.2f", c / d }')"

if [[ "$candor_open" != "$duckdb_open" ]]; then
    echo "the open operations differ: candor $candor_open, DuckDB $duckdb_open" >&2
    exit 1
fi
if [[ -n "$generated" && "$generated" != "$candor_open" ]]; then
    echo "the open operations differ from the generator's: $candor_open found, $generated generated" >&2
    exit 1
fi
echo "open operations: candor and DuckDB both found $candor_open (generated: ${generated:-not logged})"
echo "data kept in $work (CANDOR_BENCH_DIR=$work reuses it)"
