"""How many row groups a trace lookup reads, and how many of them hold none of the trace.

For a sample of trace ids from a table written by the compactor, prints the row groups that
hold each trace (found by reading every row group's `trace_id` with pyarrow, an independent
reader), the row groups that `candor`'s Parquet scan kept after its bloom filters (the
`row_groups_pruned_bloom_filter` metric of EXPLAIN ANALYZE), and the difference: the false
positives, each a whole `trace_id` column chunk decompressed and compared for nothing.

    python tests/bench/trace_row_groups.py CANDOR_BINARY TABLE_ROOT [samples]

`tests/bench/query.sh` keeps a 10 M-event table in `$CANDOR_BENCH_DIR/tables`.
"""

import random
import re
import subprocess
import sys
from typing import cast

import pyarrow.parquet as pq
from deltalake import DeltaTable


def row_groups_by_trace(files: list[str], wanted: list[str]) -> tuple[dict[str, int], int]:
    """The number of row groups, over all files, in which each wanted trace id occurs."""
    holding = dict.fromkeys(wanted, 0)
    total = 0
    for path in files:
        parquet = pq.ParquetFile(path)
        for index in range(parquet.num_row_groups):
            total += 1
            ids = set(parquet.read_row_group(index, columns=["trace_id"]).column(0).to_pylist())
            for trace in wanted:
                if trace in ids:
                    holding[trace] += 1
    return holding, total


def kept_by_bloom_filters(candor: str, root: str, trace: str) -> int:
    """Row groups the scan kept after its bloom filters, summed over the scan's partitions."""
    run = subprocess.run(
        [
            candor,
            "--tables",
            root,
            "--no-live",
            "--format",
            "csv",
            "sql",
            f"EXPLAIN ANALYZE SELECT count(*) FROM outcome_events WHERE trace_id = '{trace}'",
        ],
        check=False,
        capture_output=True,
        text=True,
    )
    kept = [
        int(m)
        for m in re.findall(
            r"row_groups_pruned_bloom_filter=\d+ total \u2192 (\d+) matched", run.stdout
        )
    ]
    if not kept:
        sys.exit(
            f"no bloom filter metric in the plan (candor exited {run.returncode}):\n"
            f"{run.stdout}\n{run.stderr}"
        )
    return sum(kept)


def main() -> None:
    candor, root = sys.argv[1], sys.argv[2]
    samples = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    table = DeltaTable(f"{root}/outcome_events")
    files = table.file_uris()
    rng = random.Random(7)
    first = pq.ParquetFile(files[0])
    # `trace_id` is a string column.
    pool = cast("list[str]", first.read_row_group(0, columns=["trace_id"]).column(0).to_pylist())
    wanted = sorted(set(rng.sample(pool, samples)))
    holding, total = row_groups_by_trace(files, wanted)
    false_positives = 0
    for trace in wanted:
        kept = kept_by_bloom_filters(candor, root, trace)
        extra = kept - holding[trace]
        if extra < 0:
            # A bloom filter has no false negatives: the two readers disagree about the table.
            sys.exit(
                f"trace {trace}: the scan kept {kept} row groups, but {holding[trace]} hold it"
            )
        false_positives += extra
        print(
            f"trace {trace}: holds {holding[trace]} of {total} row groups, scan kept {kept}, "
            f"false positives {extra}"
        )
    print(
        f"{len(wanted)} traces, {total} row groups: {false_positives} false positives in all, "
        f"{false_positives / len(wanted):.2f} per lookup, "
        f"{false_positives / (len(wanted) * total):.4f} per row group checked"
    )


if __name__ == "__main__":
    main()
