"""The `candor` benchmark's questions asked of DuckDB over the same Parquet files (the live file
list from the Python deltalake package): the rates computation with the CLI's semantics
(tests/e2e/clients/rates_duckdb.py), a plain group-by count per target, a trace lookup and one
target's events in one hour. Prints the first (cold) run, and the fastest and the median of the
following runs. With `--cli DUCKDB`, the group-by, the trace and the incident are then asked of the
DuckDB command-line tool too, each as a fresh process over the same file list (fresh.py's
timing, best of 5), as `candor` is asked in query.sh.

Usage: query_duckdb.py ROOT SINCE UNTIL TRACE_ID TARGET INCIDENT_FROM [RUNS] [--cli DUCKDB]
"""

import importlib.util
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sized

import duckdb

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = importlib.util.spec_from_file_location(
    "rates_duckdb", os.path.join(HERE, "..", "e2e", "clients", "rates_duckdb.py")
)
if SPEC is None or SPEC.loader is None:
    raise ImportError("rates_duckdb.py not found")
rates = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(rates)


def timed(name: str, runs: int, run: Callable[[], Sized]) -> None:
    times: list[float] = []
    rows = 0
    for _ in range(runs):
        started = time.perf_counter()
        rows = len(run())
        times.append((time.perf_counter() - started) * 1000)
    hot = times[1:] or times
    print(
        f"duckdb {name}: rows {rows} cold_ms {times[0]:.1f} hot_min_ms {min(hot):.1f} "
        f"hot_median_ms {statistics.median(hot):.1f}"
    )


def text(value: str) -> str:
    """`value` as an SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def fresh_cli(cli: str, name: str, sql: str) -> None:
    """`sql` asked of the DuckDB command-line tool as a fresh process, timed by fresh.py in a
    process of its own (this one holds a DuckDB session, whose memory a child would inherit in
    its peak RSS)."""
    fresh = os.path.join(HERE, "fresh.py")
    command = [cli, "-csv", "-c", sql]
    subprocess.run(
        [sys.executable, fresh, name, "--label", "duckdb-cli", "--runs", "5", "--", *command],
        check=True,
    )


def main() -> None:
    argv = sys.argv[1:]
    cli = None
    if "--cli" in argv:
        at = argv.index("--cli")
        cli = argv[at + 1]
        del argv[at : at + 2]
    root, since, until, trace_id, target, incident_from = argv[:6]
    runs = int(argv[6]) if len(argv) > 6 else 10
    since_us, until_us = rates.parse_time(since), rates.parse_time(until)
    from_us = rates.parse_time(incident_from)
    con = duckdb.connect()
    for name, table in (("counts", "outcome_counts"), ("events", "outcome_events")):
        files = rates.live_files(os.path.join(root, table))
        con.execute(
            f"CREATE VIEW {name} AS SELECT * FROM read_parquet({files!r}, "
            "hive_partitioning = false)"
        )
    sql = rates.build_rates_sql("true", "true", "tool_target")
    params = {
        "since": since_us,
        "until": until_us,
        "lookback": 900_000_000,
        "step": until_us - since_us,
    }
    timed("rates --by target (same semantics)", runs, lambda: con.execute(sql, params).fetchall())
    timed(
        "group-by count per target",
        runs,
        lambda: con.execute("SELECT tool_target, count(*) FROM events GROUP BY 1").fetchall(),
    )
    timed(
        "trace",
        runs,
        lambda: con.execute(
            "SELECT * FROM events WHERE trace_id = ? ORDER BY event_time", [trace_id]
        ).fetchall(),
    )
    timed(
        "incident (one target, one hour)",
        runs,
        lambda: con.execute(
            "SELECT * FROM events WHERE tool_target = ? AND epoch_us(event_time) >= ? "
            "AND epoch_us(event_time) < ? ORDER BY event_time",
            [target, from_us, from_us + 3_600_000_000],
        ).fetchall(),
    )
    if cli is None:
        return
    files = rates.live_files(os.path.join(root, "outcome_events"))
    events = f"read_parquet({files!r}, hive_partitioning = false)"
    fresh_cli(
        cli, "group-by count per target", f"SELECT tool_target, count(*) FROM {events} GROUP BY 1"
    )
    fresh_cli(
        cli,
        "trace",
        f"SELECT * FROM {events} WHERE trace_id = {text(trace_id)} ORDER BY event_time",
    )
    fresh_cli(
        cli,
        "incident (one target, one hour)",
        f"SELECT * FROM {events} WHERE tool_target = {text(target)} "
        f"AND epoch_us(event_time) >= {from_us} AND epoch_us(event_time) < "
        f"{from_us + 3_600_000_000} ORDER BY event_time",
    )


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)
