"""Times a command as a fresh process: the best wall time of N runs and the largest peak RSS,
measured the same way for `candor` and for the DuckDB command-line tool beside it (query.sh).

The wall time is taken around the process from its start to its end (`perf_counter_ns`), and the
peak RSS from the kernel's accounting of the child (`wait4`). The command's output goes to
`--out` (the last run's) or nowhere.

Usage: fresh.py NAME [--label L] [--runs N] [--ok CODES] [--out FILE] [--rows-json] -- COMMAND...

Prints ``fresh NAME: rows N best_wall_ms X peak_rss_mib N`` (`--label` replaces ``fresh``), where
rows is the number of lines of the last run's output less a header (`--rows-json`: the rows of a
`candor` JSON answer). Run it as a process of its own: a child's peak RSS starts at its
parent's, so a parent that holds much memory (a DuckDB session) would be counted in it.
Exits 1 when a run exits with a code not in `--ok` (default 0).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def run_once(command: list[str], out: str) -> tuple[float, int, int]:
    """One run: wall milliseconds, peak RSS in KiB, exit code."""
    with open(out, "wb") as sink:
        started = time.perf_counter_ns()
        child = subprocess.Popen(command, stdout=sink, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        wall_ms = (time.perf_counter_ns() - started) / 1e6
    return wall_ms, usage.ru_maxrss, os.waitstatus_to_exitcode(status)


def rows_of(path: str, candor_json: bool) -> int:
    """The rows of the answer in `path`."""
    with open(path, encoding="utf-8") as answer:
        if candor_json:
            outcome = json.load(answer)["envelope"]["outcome"]
            return len(outcome.get("payload", {}).get("rows", []))
        return max(sum(1 for _ in answer) - 1, 0)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("--label", default="fresh")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--ok", default="0", help="exit codes that count as an answer, e.g. 0,1,3")
    parser.add_argument("--out")
    parser.add_argument("--rows-json", action="store_true")
    argv = sys.argv[1:]
    if "--" not in argv:
        parser.error("the command follows --")
    split = argv.index("--")
    args = parser.parse_args(argv[:split])
    command = argv[split + 1 :]
    ok = {int(code) for code in args.ok.split(",")}
    out = args.out or os.path.join(tempfile.gettempdir(), f"candor-fresh-{os.getpid()}.out")
    best: float | None = None
    peak_kib = 0
    for _ in range(args.runs):
        wall_ms, rss_kib, code = run_once(command, out)
        if code not in ok:
            print(f"{args.label} {args.name}: exited {code}", file=sys.stderr)
            return 1
        best = wall_ms if best is None else min(best, wall_ms)
        peak_kib = max(peak_kib, rss_kib)
    rows = rows_of(out, args.rows_json)
    if not args.out:
        os.remove(out)
    print(
        f"{args.label} {args.name}: rows {rows} best_wall_ms {best:.1f} "
        f"peak_rss_mib {peak_kib // 1024}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
