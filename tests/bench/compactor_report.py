"""Figures for the compactor benchmark, read from a Delta table with the Python deltalake package.

compactor_report.py size TABLE_DIR            rows, bytes of the current files, bytes per row
compactor_report.py pyarrow TABLE_DIR OUT     the same rows written by pyarrow's Parquet writer
                                              (zstd level 3, 131,072-row groups, dictionaries
                                              and deltas as the compactor sets them): seconds,
                                              bytes/row
compactor_report.py latency TABLE_DIR         p50/p95/max from a record's Kafka timestamp to the
                                              commit that made it visible
"""

import json
import os
import sys
import time
from collections.abc import Callable

import pyarrow
import pyarrow.parquet as pq
from deltalake import DeltaTable

PLAIN = {"event_id", "trace_id", "span_id"}
# Written as deltas, without a dictionary (candor_schema's `Table::delta_columns`).
DELTA = {"event_time", "received_time", "kafka_offset", "kafka_timestamp"}


def size(path: str) -> None:
    table = DeltaTable(path)
    rows = table.to_pyarrow_dataset().count_rows()
    files = [uri.removeprefix("file://") for uri in table.file_uris()]
    total = sum(os.path.getsize(f) for f in files)
    print(f"rows {rows} files {len(files)} bytes {total} bytes_per_row {total / max(rows, 1):.1f}")


def with_pyarrow(path: str, out: str) -> None:
    data = DeltaTable(path).to_pyarrow_dataset().to_table()
    data = data.drop_columns(["date"]) if "date" in data.column_names else data
    data = data.sort_by([("tool_target", "ascending"), ("event_time", "ascending")])
    dictionary = [name for name in data.column_names if name not in PLAIN | DELTA]
    started = time.perf_counter()
    pq.write_table(
        data,
        out,
        compression="zstd",
        compression_level=3,
        # The compactor's `files.row_group_rows`.
        row_group_size=131_072,
        # pyarrow takes a list of columns here too; its stubs allow only a bool.
        use_dictionary=dictionary,  # type: ignore[arg-type]
        column_encoding=dict.fromkeys(DELTA, "DELTA_BINARY_PACKED"),
        write_statistics=True,
    )
    seconds = time.perf_counter() - started
    total = os.path.getsize(out)
    print(
        f"pyarrow_rows {data.num_rows} pyarrow_seconds {seconds:.2f} "
        f"pyarrow_bytes_per_row {total / max(data.num_rows, 1):.1f}"
    )


def latency(path: str) -> None:
    log = os.path.join(path, "_delta_log")
    committed_at: dict[str, int | None] = {}
    for name in sorted(os.listdir(log)):
        if not name.endswith(".json"):
            continue
        commit_ms: int | None = None
        adds: list[str] = []
        with open(os.path.join(log, name)) as f:
            for line in f:
                action = json.loads(line)
                if "commitInfo" in action:
                    commit_ms = action["commitInfo"].get("timestamp")
                if "add" in action:
                    adds.append(action["add"]["path"])
        for add in adds:
            committed_at[add] = commit_ms
    delays: list[float] = []
    for add, commit_ms in committed_at.items():
        kafka = pq.read_table(os.path.join(path, add), columns=["kafka_timestamp"]).column(0)
        for ts in kafka.cast(pyarrow.int64()).to_pylist():
            if commit_ms is None or ts is None:
                raise ValueError(f"{add}: a commit timestamp or a Kafka timestamp is missing")
            delays.append(commit_ms / 1000 - ts / 1_000_000)
    delays.sort()
    if not delays:
        print("latency no rows")
        return

    def pick(q: float) -> float:
        return delays[min(len(delays) - 1, int(q * len(delays)))]

    print(
        f"latency_rows {len(delays)} p50_s {pick(0.5):.1f} p95_s {pick(0.95):.1f} "
        f"max_s {delays[-1]:.1f}"
    )


if __name__ == "__main__":
    commands: dict[str, Callable[..., None]] = {
        "size": size,
        "pyarrow": with_pyarrow,
        "latency": latency,
    }
    commands[sys.argv[1]](*sys.argv[2:])
    sys.stdout.flush()
    os._exit(0)
