"""`candor operations` asked of DuckDB over the same Parquet files of `operation_events` (the live
file list from the Python deltalake package): each operation's (service, tool, target, operation
id) latest state among its events in [SINCE, UNTIL), the open ones listed the oldest first, and
how many ended in each terminal state. The statuses of open operations (pending, stuck, unknown)
are not judged here: they need the adapter instances' silences, which only `candor` derives.

Prints one line for tests/bench/operations.sh: the figures, the first run's wall time and the
fastest of RUNS (default 5), in this process, and this process's peak RSS.

Usage: operations_duckdb.py ROOT SINCE UNTIL [RUNS]
"""

import importlib.util
import os
import resource
import sys
import time
from dataclasses import dataclass
from typing import Any

import duckdb

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = importlib.util.spec_from_file_location(
    "rates_duckdb", os.path.join(HERE, "..", "e2e", "clients", "rates_duckdb.py")
)
if SPEC is None or SPEC.loader is None:
    raise ImportError("rates_duckdb.py not found")
rates = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(rates)

OPEN = ("accepted", "queued", "running")
TERMINAL = ("completed", "partial", "cancelled", "failed")

# The lifecycle states in the vocabulary's order. An operation's state is that of its event with
# the greatest (time, rank): of two events at one time a terminal state wins, of two terminal ones
# the later here (failed over cancelled over completed over partial), of two open ones the
# further along, as `candor operations` decides. A state outside the vocabulary has no rank and
# its event is left out, as `candor` leaves it out.
RANK = (
    "CASE lifecycle_state WHEN 'accepted' THEN 0 WHEN 'queued' THEN 1 WHEN 'running' THEN 2 "
    "WHEN 'partial' THEN 3 WHEN 'completed' THEN 4 WHEN 'cancelled' THEN 5 WHEN 'failed' THEN 6 "
    "END"
)

# One row per operation seen in the window. The rank takes the low three bits of the key, so
# that arg_max orders by time first.
OPERATIONS_SQL = """
CREATE OR REPLACE TEMP TABLE operations AS
SELECT
    service_name, tool_name, tool_target, operation_id,
    arg_max(lifecycle_state, key) AS state,
    arg_max(service_instance_id, key) AS instance,
    min(event_time) AS first_seen,
    max(event_time) AS last_seen
FROM (
    SELECT
        service_name, service_instance_id, tool_name, tool_target, operation_id,
        lifecycle_state, event_time, epoch_us(event_time) * 8 + {rank} AS key
    FROM events
    WHERE epoch_us(event_time) >= {since} AND epoch_us(event_time) < {until}
)
WHERE key IS NOT NULL
GROUP BY service_name, tool_name, tool_target, operation_id
"""

OPEN_SQL = f"""
SELECT service_name, instance, tool_name, tool_target, operation_id, state, first_seen, last_seen
FROM operations
WHERE state IN {OPEN!r}
ORDER BY first_seen, service_name, tool_name, tool_target, operation_id
"""

COUNTS_SQL = "SELECT state, count(*) FROM operations GROUP BY state"


@dataclass(frozen=True)
class Answer:
    """The open operations, oldest first, and how many operations were seen in each state."""

    open_rows: list[tuple[Any, ...]]
    by_state: dict[str, int]


def ask(con: duckdb.DuckDBPyConnection, since_us: int, until_us: int) -> Answer:
    con.execute(OPERATIONS_SQL.format(rank=RANK, since=since_us, until=until_us))
    open_rows = con.execute(OPEN_SQL).fetchall()
    by_state = {str(state): int(count) for state, count in con.execute(COUNTS_SQL).fetchall()}
    return Answer(open_rows, by_state)


def main() -> None:
    root, since, until = sys.argv[1:4]
    runs = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    since_us: int = rates.parse_time(since)
    until_us: int = rates.parse_time(until)
    files: list[str] = rates.live_files(os.path.join(root, "operation_events"))
    if not files:
        sys.exit(f"no live files in {root}/operation_events")
    con = duckdb.connect()
    con.execute(
        f"CREATE VIEW events AS SELECT * FROM read_parquet({files!r}, hive_partitioning = false)"
    )
    times: list[float] = []
    answer = Answer([], {})
    for _ in range(runs):
        started = time.perf_counter()
        answer = ask(con, since_us, until_us)
        times.append((time.perf_counter() - started) * 1000)
    # Linux gives ru_maxrss in KiB.
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    ended = " ".join(f"{state} {answer.by_state.get(state, 0)}" for state in TERMINAL)
    print(
        f"duckdb operations: open {len(answer.open_rows)} seen {sum(answer.by_state.values())} "
        f"{ended} first_ms {times[0]:.1f} best_wall_ms {min(times):.1f} "
        f"peak_rss_mib {peak_kib // 1024}"
    )


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)
