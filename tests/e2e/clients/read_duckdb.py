"""Reads a Delta table with DuckDB, a reader independent of the Delta libraries, and prints every
row as one JSON object per line.

The Python deltalake package gives only the list of the data files of the table's current
version; DuckDB reads those Parquet files itself, by column name, so that a column some files
lack (one added to the table after they were written) reads as null in their rows.

Timestamps are printed as microseconds since the epoch (UTC), dates as YYYY-MM-DD, binary as hex,
as read_delta.py prints them. The partition column (`date`) is not in the files but in their
paths, which are not read as Hive partitions here: it is not printed.

Usage: read_duckdb.py TABLE_DIR
"""

import datetime
import json
import os
import sys

import duckdb
from deltalake import DeltaTable


def plain(value: object) -> object:
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return value


def live_files(table_dir: str) -> list[str]:
    """The data files of the table's current version, as local paths."""
    files = DeltaTable(table_dir).file_uris()
    return [path.removeprefix("file://") for path in files]


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def selected(name: str, type_name: str) -> str:
    """The column as printed: a timestamp as microseconds since the epoch."""
    if type_name.startswith("TIMESTAMP"):
        return f"epoch_us({quoted(name)}) AS {quoted(name)}"
    return quoted(name)


def main() -> None:
    files = live_files(sys.argv[1])
    if not files:
        return
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE rows AS SELECT * "
        "FROM read_parquet(?, union_by_name = true, hive_partitioning = false)",
        [files],
    )
    columns: list[tuple[str, str]] = [
        (str(name), str(type_name))
        for name, type_name, *_ in con.execute("DESCRIBE rows").fetchall()
    ]
    names = [name for name, _ in columns]
    select = ", ".join(selected(name, type_name) for name, type_name in columns)
    for values in con.execute(f"SELECT {select} FROM rows").fetchall():
        print(json.dumps({name: plain(value) for name, value in zip(names, values, strict=True)}))


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    # Leave without interpreter teardown: the deltalake package's native thread pools sometimes
    # abort while being torn down (see read_delta.py).
    os._exit(0)
