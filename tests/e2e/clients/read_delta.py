"""Reads a Delta table with the Python deltalake package (an independent reader of the files the
Delta log lists) and prints every row as one JSON object per line.

Timestamps are printed as microseconds since the epoch (UTC), dates as YYYY-MM-DD, binary as hex.
A table may also be an s3:// URL: the store is reached with the AWS_* variables of the
environment (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...), passed as the reader's storage options.

Usage: read_delta.py TABLE_DIR              every row, as JSON lines
       read_delta.py --files TABLE_DIR      the data files of the current version, one per line
       read_delta.py --loop SECONDS TABLE_DIR
                                            read the whole table again and again for SECONDS;
                                            print "version rows distinct_event_ids" per read
"""

import datetime
import json
import os
import sys
import time

import pyarrow
from deltalake import DeltaTable


def plain(value: object) -> object:
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        delta = value - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return value


def open_table(uri: str) -> DeltaTable:
    if uri.startswith("s3://"):
        options = {key: value for key, value in os.environ.items() if key.startswith("AWS_")}
        return DeltaTable(uri, storage_options=options)
    return DeltaTable(uri)


def main() -> None:
    if sys.argv[1] == "--files":
        for path in open_table(sys.argv[2]).file_uris():
            print(path)
        return
    if sys.argv[1] == "--loop":
        deadline = time.monotonic() + float(sys.argv[2])
        while time.monotonic() < deadline:
            table = open_table(sys.argv[3])
            ids = table.to_pyarrow_dataset().to_table(columns=["event_id"]).column(0)
            print(table.version(), len(ids), len(set(ids.to_pylist())), flush=True)
        return
    table = open_table(sys.argv[1])
    data = pyarrow.table(table.to_pyarrow_dataset().to_table())
    for row in data.to_pylist():
        print(json.dumps({key: plain(value) for key, value in row.items()}))


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    # Leave without interpreter teardown: seen here, the native thread pools of the reader
    # sometimes abort while being torn down ("terminate called without an active exception")
    # after every row was printed.
    os._exit(0)
