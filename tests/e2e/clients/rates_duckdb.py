"""The independent reference for `candor rates`: DuckDB over the Parquet files that the Delta logs
of <root>/outcome_counts and <root>/outcome_events list (the live file list comes from the Python
deltalake package). The end-to-end golden tests compare the Rust CLI's answer with this one.

Semantics: counts points are deduplicated by point_id; events are counted as stored (the
compactor removed retried copies within its dedupe window); the window is
[since, until). A 'delta' point in the window adds its value. A 'cumulative' point in the window
adds the difference to the point before it in its series (service, instance, tool, target, class,
temporality; ordered by time, start_time) among the points of [since - lookback, until), or its own
value after a reset (start_time changed or value fell); with no point before it, its value if its
start_time >= since, else it is only a baseline (no increase, and no bucket of its own) and the
series counts once in series_without_baseline. 'unspecified'
points in the window are only counted. failure_events counts the terminal events (retry_action
other than 'retry'). rate = (access_failure + partial) / calls; denominator says why it is null.

Usage: rates_duckdb.py --root DIR --since RFC3339 --until RFC3339 [--step SECONDS]
                       [--by target|tool|service] [--lookback SECONDS] [--service S] [--tool T]
                       [--target X]
Prints one JSON object: {"rows": [...], "unspecified_points": N, "series_without_baseline": N}.
"""

import argparse
import datetime
import json
import os
import sys

import duckdb
from deltalake import DeltaTable

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

GROUP_COLUMNS = {"target": "tool_target", "tool": "tool_name", "service": "service_name"}

# The columns read from the files, with the types they have in the tables.
COUNTS_COLUMNS = {
    "point_id": "VARCHAR",
    "service_name": "VARCHAR",
    "service_instance_id": "VARCHAR",
    "tool_name": "VARCHAR",
    "tool_target": "VARCHAR",
    "outcome_class": "VARCHAR",
    "start_time": "TIMESTAMPTZ",
    "time": "TIMESTAMPTZ",
    "value": "BIGINT",
    "temporality": "VARCHAR",
}
EVENTS_COLUMNS = {
    "event_id": "VARCHAR",
    "event_time": "TIMESTAMPTZ",
    "service_name": "VARCHAR",
    "tool_name": "VARCHAR",
    "tool_target": "VARCHAR",
    "outcome_class": "VARCHAR",
    "retry_action": "VARCHAR",
}

# All times below are integer microseconds since the epoch (UTC), so that no time zone setting and
# no interval arithmetic can change a bucket. $step is the bucket width in microseconds; without
# --step it is the whole window, which makes one bucket starting at $since.
# The counter points, one per point_id, with times in microseconds.
COUNTS_DEDUPED = """
counts_deduped AS (
    SELECT DISTINCT ON (point_id)
        point_id, service_name, service_instance_id, tool_name, tool_target, outcome_class,
        epoch_us(start_time) AS start_us, epoch_us(time) AS time_us, value, temporality
    FROM counts
    WHERE {counts_filter}
    ORDER BY point_id, time, start_time, value
)
"""

RATES_SQL = """
WITH
{counts_deduped},
considered AS (
    SELECT
        *,
        row_number() OVER series > 1 AS has_prev,
        lag(start_us) OVER series AS prev_start_us,
        lag(value) OVER series AS prev_value
    FROM counts_deduped
    WHERE temporality IN ('delta', 'cumulative')
      AND time_us >= $since - $lookback AND time_us < $until
    WINDOW series AS (
        PARTITION BY service_name, service_instance_id, tool_name, tool_target, outcome_class,
                     temporality
        ORDER BY time_us, start_us, point_id
    )
),
increases AS (
    SELECT
        {group_column} AS grp,
        (time_us - $since) // $step AS bucket,
        outcome_class,
        CASE
            WHEN temporality = 'delta' THEN value
            WHEN has_prev AND start_us = prev_start_us AND value >= prev_value
                THEN value - prev_value
            WHEN has_prev THEN value
            WHEN start_us >= $since THEN value
            ELSE 0
        END AS increase
    FROM considered
    -- A cumulative series' first point that only serves as a baseline makes no bucket.
    WHERE time_us >= $since
      AND NOT (temporality = 'cumulative' AND NOT has_prev AND start_us < $since)
),
point_buckets AS (
    SELECT
        grp,
        bucket,
        coalesce(sum(increase) FILTER (WHERE outcome_class = 'success'), 0) AS success,
        coalesce(sum(increase) FILTER (WHERE outcome_class = 'empty'), 0) AS empty,
        coalesce(sum(increase) FILTER (WHERE outcome_class = 'partial'), 0) AS partial,
        coalesce(sum(increase) FILTER (WHERE outcome_class = 'access_failure'), 0)
            AS access_failure
    FROM increases
    GROUP BY grp, bucket
),
event_buckets AS (
    SELECT {group_column} AS grp, (event_time_us - $since) // $step AS bucket,
           count(*) AS failure_events
    FROM (
        SELECT *, epoch_us(event_time) AS event_time_us
        FROM events
        WHERE {events_filter}
    )
    WHERE event_time_us >= $since AND event_time_us < $until AND retry_action <> 'retry'
    GROUP BY grp, bucket
)
SELECT
    coalesce(p.grp, e.grp) AS grp,
    $since + coalesce(p.bucket, e.bucket) * $step AS bucket_start_us,
    p.success + p.empty + p.partial + p.access_failure AS calls,
    p.success,
    p.empty,
    p.partial,
    p.access_failure,
    coalesce(e.failure_events, 0) AS failure_events
FROM point_buckets p
FULL OUTER JOIN event_buckets e ON p.grp = e.grp AND p.bucket = e.bucket
ORDER BY grp, bucket_start_us
"""

# 'unspecified' points in the window, and the cumulative series whose first considered point is in
# the window, started before it, and so has nothing to take a difference from.
TOTALS_SQL = """
WITH {counts_deduped},
first_cumulative AS (
    SELECT DISTINCT ON (service_name, service_instance_id, tool_name, tool_target, outcome_class)
        time_us, start_us
    FROM counts_deduped
    WHERE temporality = 'cumulative' AND time_us >= $since - $lookback AND time_us < $until
    ORDER BY service_name, service_instance_id, tool_name, tool_target, outcome_class,
             time_us, start_us, point_id
)
SELECT
    (SELECT count(*) FROM counts_deduped
     WHERE temporality = 'unspecified' AND time_us >= $since AND time_us < $until),
    (SELECT count(*) FROM first_cumulative WHERE time_us >= $since AND start_us < $since)
"""


def build_rates_sql(counts_filter: str, events_filter: str, group_column: str) -> str:
    """RATES_SQL with its filters and grouping column filled in."""
    return RATES_SQL.format(
        counts_deduped=COUNTS_DEDUPED.format(counts_filter=counts_filter),
        events_filter=events_filter,
        group_column=group_column,
    )


def parse_time(text: str) -> int:
    """RFC 3339 with 'Z' or an offset, as microseconds since the epoch."""
    moment = datetime.datetime.fromisoformat(text.replace("z", "Z"))
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no time zone ('Z' or '+00:00')")
    delta = moment - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def format_time(micros: int) -> str:
    moment = EPOCH + datetime.timedelta(microseconds=micros)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def live_files(table_dir: str) -> list[str]:
    """The data files of the table's current version; none for a table with no Delta log."""
    if not DeltaTable.is_deltatable(table_dir):
        return []
    files = DeltaTable(table_dir).file_uris()
    return [path[len("file://") :] if path.startswith("file://") else path for path in files]


def load(
    con: duckdb.DuckDBPyConnection, name: str, columns: dict[str, str], files: list[str]
) -> None:
    """Creates the table `name` with `columns` and fills it from the Parquet `files`."""
    con.execute(f"CREATE TABLE {name} ({', '.join(f'{c} {t}' for c, t in columns.items())})")
    if files:
        con.execute(
            f"INSERT INTO {name} SELECT {', '.join(columns)} "
            "FROM read_parquet(?, hive_partitioning = false, union_by_name = true)",
            [files],
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--since", required=True, type=parse_time)
    parser.add_argument("--until", required=True, type=parse_time)
    parser.add_argument("--step", type=int)
    parser.add_argument("--by", choices=sorted(GROUP_COLUMNS), default="target")
    parser.add_argument("--lookback", type=int, default=900)
    parser.add_argument("--service")
    parser.add_argument("--tool")
    parser.add_argument("--target")
    args = parser.parse_args()
    if args.since >= args.until:
        parser.error("--since must be before --until")
    if args.step is not None and args.step <= 0:
        parser.error("--step must be positive")
    if args.lookback < 0:
        parser.error("--lookback must not be negative")

    con = duckdb.connect()
    load(con, "counts", COUNTS_COLUMNS, live_files(os.path.join(args.root, "outcome_counts")))
    load(con, "events", EVENTS_COLUMNS, live_files(os.path.join(args.root, "outcome_events")))

    params: dict[str, int | str] = {
        "since": args.since,
        "until": args.until,
        "lookback": args.lookback * 1_000_000,
        "step": args.step * 1_000_000 if args.step else args.until - args.since,
    }
    conditions = ["true"]
    filters = (("service_name", "service"), ("tool_name", "tool"), ("tool_target", "target"))
    for column, option in filters:
        if getattr(args, option) is not None:
            conditions.append(f"{column} = ${option}")
            params[option] = getattr(args, option)
    where = " AND ".join(conditions)

    rates_sql = build_rates_sql(where, where, GROUP_COLUMNS[args.by])
    totals_sql = TOTALS_SQL.format(counts_deduped=COUNTS_DEDUPED.format(counts_filter=where))
    # DuckDB refuses named parameters that a statement does not use: the totals have no buckets.
    totals_params = {key: value for key, value in params.items() if key != "step"}

    rows: list[dict[str, object]] = []
    for (
        group,
        bucket_start,
        calls,
        success,
        empty,
        partial,
        access_failure,
        failure_events,
    ) in con.execute(rates_sql, params).fetchall():
        rate: float | None
        if calls is None:
            denominator, rate = "missing", None
        elif calls == 0:
            denominator, rate = "no_calls", None
        else:
            denominator, rate = "counted", (access_failure + partial) / calls
        rows.append(
            {
                "group": group,
                "bucket_start": format_time(bucket_start),
                "calls": calls,
                "success": success,
                "empty": empty,
                "partial": partial,
                "access_failure": access_failure,
                "rate": rate,
                "denominator": denominator,
                "failure_events": failure_events,
            }
        )
    [(unspecified, without_baseline)] = con.execute(totals_sql, totals_params).fetchall()
    print(
        json.dumps(
            {
                "rows": rows,
                "unspecified_points": unspecified,
                "series_without_baseline": without_baseline,
            }
        )
    )


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    # Leave without interpreter teardown: the deltalake package's native thread pools sometimes
    # abort while being torn down (see read_delta.py).
    os._exit(0)
