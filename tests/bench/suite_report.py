"""The report of tests/bench/suite.sh, from the raw outputs it keeps: each figure's median over the
repetitions beside its peer measured in the same repetition.

  suite_report.py RESULTS_DIR    prints the report; writes RESULTS_DIR/report.md and report.json

For each figure: the median over repetitions, min–max, and n (the repetitions that have it, of
all); beside it its peer (a raw rdkafka producer and Rotel for the collector, pyarrow for the
Parquet writer, DuckDB for the queries and `candor operations`, the bare call for the adapter, the
collector's accepted events/s of the same repetition for the dashboards' reading) and the ratio
candor/peer, the median of the per-repetition ratios, with the direction that is better. A peer
from a part that did not run is shown as not run. The end-to-end
latency of each mode is set against its goal (p95 under 2 s with --live, under 30 s from the
table): PASS or MISS. A figure missing from a repetition is listed as missing, and every line
the parser expects and does not find is listed under "Not found".

The lines read (stdlib only, Python 3.11):
  collector.sh, under its "== full speed", "== half ...", "== ceiling ...", "== rotel ..." headers,
  from candor-loadgen (tests/bench/loadgen.rs):
    accepted_events N refused_events N / accepted_events_per_s N / latency_ms p50 X p99 X max X ...
    collector_cpu_s X events_per_cpu_s N cpu_us_per_event X / collector_peak_rss_mib X
    stored_events N / raw_kafka_records_per_s N
  compactor.sh and compactor_report.py, under "== 1. ..." (then "after optimize:") and "== 3. ...":
    rows N wall_s X events_per_s N cpu_s X events_per_cpu_s N commits N write_and_commit_s X
        peak_rss_mib X
    rows N files N bytes N bytes_per_row X
    pyarrow_rows N pyarrow_seconds X pyarrow_bytes_per_row X
    latency_rows N p50_s X p95_s X max_s X
  query.sh, query/examples/hot.rs and query_duckdb.py:
    fresh NAME: rows N best_wall_ms N peak_rss_mib N / open: X ms / hot NAME: rows N min_ms X
    median_ms X / hot peak memory: N kB / duckdb NAME: rows N cold_ms X hot_min_ms X /
    duckdb-cli NAME: rows N best_wall_ms X peak_rss_mib N
  cargo bench -p candor-adapter --bench overhead (criterion): GROUP/NAME, then
    "time:   [LOW UNIT MID UNIT HIGH UNIT]" (the middle value, the estimate, is the figure)
  query/examples/latency.rs: {"summary": MODE, "samples", "seen", "missing", "p50_ms", "p95_ms",
    "max_ms", "polls", "poll_p50_ms"}
  operations.sh and operations_duckdb.py:
    candor operations: open N (pending N stuck N unknown N) best_wall_ms N peak_rss_mib N
    duckdb operations: open N seen N completed N partial N cancelled N failed N first_ms X
        best_wall_ms X peak_rss_mib N
    open operations: candor and DuckDB both found N (generated: ...)
  dashboards.sh, under "== 1. the model", "== 2. keeping up" and "== 3. the history from the
  tables", from dashboards/examples/bench.rs and the script's own lines:
    apply: N records (decode + apply) in X s = N records/s on one thread; ...
    events N records_all_topics N wall_s X records_per_s N cpu_s X records_per_cpu_s N
        peak_rss_mib N
    GET PATH median X ms (PATH: /?range=1h, /?range=6h, /api/overview?range=1h, /metrics)
    rows_from_tables N read_s X records_from_kafka N start_to_ready_s X rows_per_s N cpu_s X
        peak_rss_mib N
  suite.sh: "latency: compactor max age D ...", run.txt, machine.txt
"""

import json
import math
import re
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

PARTS = ("adapter", "collector", "compactor", "query", "latency", "operations", "dashboards")
GOALS_MS = {"live": 2_000, "table": 30_000}
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

# One repetition's figures, by key ("co.full.events_per_s", ...).
Values = dict[str, float]
# A part's parser: its lines, the figures it found, the lines it did not find, notes.
Parser = Callable[[list[str], Values, list[str], list[str]], None]


class Stats(TypedDict):
    """One figure over the repetitions: every repetition's value (None: missing), and their
    median, min and max."""

    values: list[float | None]
    median: float | None
    min: float | None
    max: float | None
    n: int
    of: int


class PeerStats(Stats):
    """A peer's figure, with the peer's name."""

    name: str | None


class FigureEntry(TypedDict):
    """A figure of report.json."""

    part: str
    figure: str
    unit: str
    better: str
    candor: Stats
    peer: PeerStats | None
    ratio: Stats | None


class Status(TypedDict):
    """A part's exit status and duration in one repetition (run.txt)."""

    exit: int
    seconds: int


class RunEntry(Status):
    """A run of report.json: one part in one repetition."""

    rep: int
    part: str


class Run(TypedDict):
    """What run.txt holds."""

    params: dict[str, str]
    orders: dict[int, list[str]]
    exits: dict[tuple[int, str], Status]


class Report(TypedDict):
    """report.json."""

    results: str
    machine: dict[str, str]
    params: dict[str, str]
    orders: dict[str, list[str]]
    runs: list[RunEntry]
    repetitions: int
    figures: list[FigureEntry]
    latency: list[dict[str, object]]
    missing: list[str]
    notes: list[str]
    not_found: list[str]


@dataclass(frozen=True)
class Expect:
    """A line a part's output should hold: in `section` (None: anywhere), matching `pattern` at
    its start; each named group is stored under the figure key `keys[group]`."""

    section: str | None
    pattern: str
    keys: dict[str, str]
    shows: str


@dataclass(frozen=True)
class Figure:
    """One row of the report: candor's figure `key`, and its peer's `peer_key` if it has one,
    measured by the part `peer_part` (None: this row's part). `better` is "lower", "higher" or
    "same" (as the peer's)."""

    part: str
    name: str
    unit: str
    better: str
    key: str
    peer: str | None = None
    peer_key: str | None = None
    peer_part: str | None = None


def number(text: str) -> float | None:
    """A finite number from a printed value ("1,234", "5.6"), or None."""
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def split(lines: list[str], markers: list[tuple[str, str]]) -> dict[str | None, list[str]]:
    """Lines by section: a line matching a marker starts that section (and belongs to it);
    None holds every line."""
    sections: dict[str | None, list[str]] = {None: lines}
    current: str | None = None
    for line in lines:
        for pattern, name in markers:
            if re.match(pattern, line):
                current = name
                sections.setdefault(name, [])
                break
        if current is not None:
            sections[current].append(line)
    return sections


def apply(
    lines: list[str],
    markers: list[tuple[str, str]],
    expects: list[Expect],
    values: Values,
    missing: list[str],
) -> None:
    sections = split(lines, markers)
    for expect in expects:
        where = f" under '{expect.section}'" if expect.section else ""
        match = next(
            (
                m
                for line in sections.get(expect.section, [])
                if (m := re.match(expect.pattern, line))
            ),
            None,
        )
        if match is None:
            missing.append(f"`{expect.shows}`{where}")
            continue
        for group, key in expect.keys.items():
            value = number(match.group(group))
            if value is None:
                missing.append(f"`{expect.shows}`{where}: {match.group(group)!r} is not a number")
            else:
                values[key] = value


# --- collector.sh ---------------------------------------------------------------------------

COLLECTOR_MARKERS = [
    (r"== full speed", "full speed"),
    (r"== half of the measured maximum", "half"),
    (r"== 100,000 events/s", "100k"),
    (r"== ceiling", "ceiling"),
    (r"== rotel", "rotel"),
]


def loadgen(section: str, prefix: str, collector_lines: bool = True) -> list[Expect]:
    expects = [
        Expect(
            section,
            r"accepted_events (?P<a>\S+) refused_events (?P<r>\S+)",
            {"a": f"co.{prefix}.accepted", "r": f"co.{prefix}.refused"},
            "accepted_events N refused_events N",
        ),
        Expect(
            section,
            r"accepted_events_per_s (?P<v>\S+)",
            {"v": f"co.{prefix}.events_per_s"},
            "accepted_events_per_s N",
        ),
        Expect(
            section,
            r"latency_ms p50 (?P<p50>\S+) p99 (?P<p99>\S+) max (?P<max>\S+)",
            {"p50": f"co.{prefix}.p50_ms", "p99": f"co.{prefix}.p99_ms"},
            "latency_ms p50 X p99 X max X",
        ),
    ]
    if collector_lines:
        expects += [
            Expect(
                section,
                r"collector_cpu_s \S+ events_per_cpu_s \S+ cpu_us_per_event (?P<v>\S+)",
                {"v": f"co.{prefix}.cpu_us_per_event"},
                "collector_cpu_s X events_per_cpu_s N cpu_us_per_event X",
            ),
            Expect(
                section,
                r"collector_peak_rss_mib (?P<v>\S+)",
                {"v": f"co.{prefix}.rss_mib"},
                "collector_peak_rss_mib X",
            ),
        ]
    return expects


COLLECTOR = [
    *loadgen("full speed", "full"),
    Expect("full speed", r"stored_events (?P<v>\S+)", {"v": "co.full.stored"}, "stored_events N"),
    Expect(
        "half",
        r"== half of the measured maximum: (?P<v>\S+) events/s",
        {"v": "co.half.target"},
        "== half of the measured maximum: N events/s",
    ),
    *loadgen("half", "half"),
    *loadgen("100k", "100k"),
    Expect("half", r"stored_events (?P<v>\S+)", {"v": "co.half.stored"}, "stored_events N"),
    Expect("100k", r"stored_events (?P<v>\S+)", {"v": "co.100k.stored"}, "stored_events N"),
    Expect(
        "ceiling",
        r"raw_kafka_records_per_s (?P<v>\S+)",
        {"v": "co.raw.records_per_s"},
        "raw_kafka_records_per_s N",
    ),
    Expect(
        "ceiling",
        r"raw_kafka_failed (?P<f>\S+) queue_refused (?P<q>\S+)",
        {"f": "co.raw.failed", "q": "co.raw.queue_refused"},
        "raw_kafka_failed N queue_refused N",
    ),
    *loadgen("rotel", "rotel"),
]


def parse_collector(lines: list[str], values: Values, missing: list[str], notes: list[str]) -> None:
    apply(lines, COLLECTOR_MARKERS, COLLECTOR, values, missing)
    for prefix, who in (
        ("full", "candor, full speed"),
        ("half", "candor, half rate"),
        ("100k", "candor, 100,000 events/s"),
        ("rotel", "Rotel"),
    ):
        refused = values.get(f"co.{prefix}.refused")
        if refused:
            notes.append(f"{who}: {refused:,.0f} events refused")
        stored, accepted = values.get(f"co.{prefix}.stored"), values.get(f"co.{prefix}.accepted")
        if stored is not None and accepted is not None and stored < accepted:
            notes.append(
                f"{who}: the topic holds {stored:,.0f} of {accepted:,.0f} acknowledged events"
            )
    for key, what in (
        ("co.raw.failed", "not acknowledged"),
        ("co.raw.queue_refused", "refused by its queue"),
    ):
        if values.get(key):
            notes.append(f"raw producer: {values[key]:,.0f} records {what}")
    # The 100,000 events/s step stands for its rate only if the collector kept up with it.
    reached = values.get("co.100k.events_per_s")
    if reached is not None and reached < 95_000:
        notes.append(f"the 100,000 events/s step reached only {reached:,.0f} events/s")


# --- compactor.sh ---------------------------------------------------------------------------

COMPACTOR_MARKERS = [
    (r"== 1\. throughput", "== 1. throughput"),
    (r"after optimize:", "after optimize:"),
    (r"== 3\. production to visibility", "== 3. production to visibility"),
]
SIZE = r"rows (?P<rows>\d+) files (?P<files>\d+) bytes (?P<bytes>\d+) bytes_per_row (?P<bpr>\S+)"
COMPACTOR = [
    Expect(
        "== 1. throughput",
        r"rows (?P<rows>\d+) wall_s (?P<wall>\S+) events_per_s (?P<eps>\S+) cpu_s (?P<cpu>\S+) "
        r"events_per_cpu_s (?P<epc>\S+) commits (?P<commits>\S+) write_and_commit_s (?P<write>\S+) "
        r"peak_rss_mib (?P<rss>\S+)",
        {
            "rows": "cp.rows",
            "eps": "cp.rows_per_s",
            "epc": "cp.rows_per_cpu_s",
            "commits": "cp.commits",
            "write": "cp.write_s",
            "rss": "cp.rss_mib",
        },
        "rows N wall_s X events_per_s N cpu_s X events_per_cpu_s N commits N write_and_commit_s X "
        "peak_rss_mib X",
    ),
    Expect(
        "== 1. throughput",
        SIZE,
        {"bpr": "cp.written.bytes_per_row", "files": "cp.written.files"},
        "rows N files N bytes N bytes_per_row X",
    ),
    Expect(
        "after optimize:",
        SIZE,
        {"rows": "cp.optimized.rows", "bpr": "cp.optimized.bytes_per_row"},
        "rows N files N bytes N bytes_per_row X",
    ),
    Expect(
        "after optimize:",
        r"pyarrow_rows (?P<rows>\d+) pyarrow_seconds (?P<s>\S+) pyarrow_bytes_per_row (?P<bpr>\S+)",
        {"rows": "cp.pyarrow_rows", "s": "cp.pyarrow_s", "bpr": "cp.pyarrow_bytes_per_row"},
        "pyarrow_rows N pyarrow_seconds X pyarrow_bytes_per_row X",
    ),
    Expect(
        "== 3. production to visibility",
        r"latency_rows (?P<rows>\d+) p50_s (?P<p50>\S+) p95_s (?P<p95>\S+) max_s (?P<max>\S+)",
        {"p50": "cp.stream.p50_s", "p95": "cp.stream.p95_s", "max": "cp.stream.max_s"},
        "latency_rows N p50_s X p95_s X max_s X",
    ),
]


def parse_compactor(lines: list[str], values: Values, missing: list[str], notes: list[str]) -> None:
    apply(lines, COMPACTOR_MARKERS, COMPACTOR, values, missing)
    rows, write_s = values.get("cp.rows"), values.get("cp.write_s")
    if rows is not None and write_s:
        values["cp.writer_rows_per_s"] = rows / write_s
    pyarrow_rows, pyarrow_s = values.get("cp.pyarrow_rows"), values.get("cp.pyarrow_s")
    if pyarrow_rows is not None and pyarrow_s:
        values["cp.pyarrow_rows_per_s"] = pyarrow_rows / pyarrow_s
    for other, what in (
        ("cp.optimized.rows", "the optimized table"),
        ("cp.pyarrow_rows", "pyarrow"),
    ):
        if rows is not None and values.get(other) is not None and values[other] != rows:
            notes.append(
                f"the compactor committed {rows:,.0f} rows, {what} holds {values[other]:,.0f}"
            )


# --- query.sh -------------------------------------------------------------------------------

# (figure key, fresh name, hot name, DuckDB name): the names each program prints.
QUESTIONS = [
    ("rates", "rates --by target", "rates --by target", "rates --by target (same semantics)"),
    ("groupby", None, "sql group-by count per target", "group-by count per target"),
    ("trace", "trace", "trace", "trace"),
    (
        "incident",
        "incident (one target, one hour)",
        "incident (one target, one hour)",
        "incident (one target, one hour)",
    ),
]


# The questions query_duckdb.py also asks of the DuckDB command-line tool as a fresh process.
CLI_QUESTIONS = ("groupby", "trace", "incident")


def query_expects() -> list[Expect]:
    expects = [
        Expect(None, r"open: (?P<v>\S+) ms", {"v": "q.open_ms"}, "open: X ms"),
        Expect(
            None, r"hot peak memory: (?P<v>\d+) kB", {"v": "q.hot.rss_kib"}, "hot peak memory: N kB"
        ),
    ]
    for key, fresh, hot, duckdb in QUESTIONS:
        if fresh:
            expects.append(
                Expect(
                    None,
                    rf"fresh {re.escape(fresh)}: rows (?P<rows>\S+) best_wall_ms (?P<ms>\S+) "
                    r"peak_rss_mib (?P<rss>\S+)",
                    {
                        "rows": f"q.{key}.fresh.rows",
                        "ms": f"q.{key}.fresh.ms",
                        "rss": f"q.{key}.fresh.rss_mib",
                    },
                    f"fresh {fresh}: rows N best_wall_ms N peak_rss_mib N",
                )
            )
        expects.append(
            Expect(
                None,
                rf"hot {re.escape(hot)}: rows (?P<rows>\S+) min_ms (?P<min>\S+) "
                r"median_ms (?P<median>\S+)",
                {"rows": f"q.{key}.hot.rows", "min": f"q.{key}.hot.min_ms"},
                f"hot {hot}: rows N min_ms X median_ms X",
            )
        )
        if key in CLI_QUESTIONS:
            expects.append(
                Expect(
                    None,
                    rf"duckdb-cli {re.escape(duckdb)}: rows (?P<rows>\S+) best_wall_ms (?P<ms>\S+) "
                    r"peak_rss_mib (?P<rss>\S+)",
                    {
                        "rows": f"q.{key}.cli.rows",
                        "ms": f"q.{key}.cli.ms",
                        "rss": f"q.{key}.cli.rss_mib",
                    },
                    f"duckdb-cli {duckdb}: rows N best_wall_ms X peak_rss_mib N",
                )
            )
        expects.append(
            Expect(
                None,
                rf"duckdb {re.escape(duckdb)}: rows (?P<rows>\S+) cold_ms (?P<cold>\S+) "
                r"hot_min_ms (?P<hot>\S+)",
                {
                    "rows": f"q.{key}.duckdb.rows",
                    "cold": f"q.{key}.duckdb.cold_ms",
                    "hot": f"q.{key}.duckdb.hot_ms",
                },
                f"duckdb {duckdb}: rows N cold_ms X hot_min_ms X",
            )
        )
    return expects


def parse_query(lines: list[str], values: Values, missing: list[str], notes: list[str]) -> None:
    apply(lines, [], query_expects(), values, missing)
    if "q.hot.rss_kib" in values:
        values["q.hot.rss_mib"] = values.pop("q.hot.rss_kib") / 1024
    for key, _, hot, _ in QUESTIONS:
        duckdb = values.get(f"q.{key}.duckdb.rows")
        for side in ("fresh", "hot"):
            rows = values.get(f"q.{key}.{side}.rows")
            if rows is not None and duckdb is not None and rows != duckdb:
                notes.append(
                    f"{hot} ({side}): candor answered {rows:,.0f} rows, DuckDB {duckdb:,.0f}"
                )


# --- cargo bench -p candor-adapter --bench overhead -------------------------------------------

BENCHES = [
    "success_path/raw_operation",
    "success_path/adapter_call",
    "success_path/adapter_call_noop_providers",
    "failure_attempt/adapter_call_with_span_event",
    "failure_attempt/sdk_span_with_one_event",
    "failure_attempt/tracing_opentelemetry_event",
]
UNIT_NS = {"ps": 1e-3, "ns": 1.0, "µs": 1e3, "μs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9}
UNIT = "|".join(UNIT_NS)
CRITERION_TIME = re.compile(
    rf"(?:(?P<id>\S+)\s+)?time:\s+\[\s*(?P<lo>\S+)\s*(?:{UNIT})\s+(?P<mid>\S+)\s*(?P<unit>{UNIT})\s+"
    rf"(?P<hi>\S+)\s*(?:{UNIT})\s*\]"
)


def parse_adapter(lines: list[str], values: Values, missing: list[str], notes: list[str]) -> None:
    current: str | None = None
    for line in lines:
        if line in BENCHES:
            current = line
            continue
        match = CRITERION_TIME.match(line)
        if match is None:
            continue
        name = match.group("id") or current
        current = None
        mid = number(match.group("mid"))
        if name in BENCHES and f"a.{name}" not in values and mid is not None:
            values[f"a.{name}"] = mid * UNIT_NS[match.group("unit")]
    for name in BENCHES:
        if f"a.{name}" not in values:
            missing.append(f"`{name}` then `time:   [LOW UNIT MID UNIT HIGH UNIT]`")
    pairs = [
        ("a.added.success", "success_path/adapter_call", "success_path/raw_operation"),
        (
            "a.added.failure",
            "failure_attempt/adapter_call_with_span_event",
            "failure_attempt/sdk_span_with_one_event",
        ),
    ]
    for key, call, bare in pairs:
        if f"a.{call}" in values and f"a.{bare}" in values:
            values[key] = values[f"a.{call}"] - values[f"a.{bare}"]


# --- the suite's latency part (query/examples/latency.rs) -----------------------------------

SUMMARY_KEYS = ("samples", "seen", "missing", "p50_ms", "p95_ms", "max_ms", "polls", "poll_p50_ms")


def parse_latency(
    lines: list[str], values: Values, missing: list[str], notes: list[str], texts: dict[str, str]
) -> None:
    summaries: dict[str, dict[str, object]] = {}
    for line in lines:
        if match := re.match(r"latency: compactor max age (\S+)", line):
            texts["max_age"] = match.group(1)
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and "summary" in record:
            summaries[record["summary"]] = record
    if "max_age" not in texts:
        missing.append("`latency: compactor max age D ...`")
    for mode in GOALS_MS:
        summary = summaries.get(mode)
        if summary is None:
            missing.append(f'`{{"summary": "{mode}", ...}}` (latency --mode {mode})')
            continue
        for key in SUMMARY_KEYS:
            value = summary.get(key)
            if (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and math.isfinite(value)
            ):
                values[f"l.{mode}.{key}"] = float(value)
            else:
                missing.append(f"`{key}` of the {mode} summary is {json.dumps(value)}")
        if summary.get("missing"):
            notes.append(
                f"{mode}: {summary['missing']} of {summary.get('samples')} samples never seen"
            )


# --- operations.sh and operations_duckdb.py ------------------------------------------------

OPERATIONS = [
    Expect(
        None,
        r"candor operations: open (?P<open>\S+) \([^)]*\) best_wall_ms (?P<ms>\S+) "
        r"peak_rss_mib (?P<rss>\S+)",
        {"open": "op.candor.open", "ms": "op.candor.ms", "rss": "op.candor.rss_mib"},
        "candor operations: open N (pending N stuck N unknown N) best_wall_ms N peak_rss_mib N",
    ),
    Expect(
        None,
        r"duckdb operations: open (?P<open>\S+) seen (?P<seen>\S+) completed \S+ partial \S+ "
        r"cancelled \S+ failed \S+ first_ms (?P<first>\S+) best_wall_ms (?P<ms>\S+) "
        r"peak_rss_mib (?P<rss>\S+)",
        {
            "open": "op.duckdb.open",
            "seen": "op.duckdb.seen",
            "first": "op.duckdb.first_ms",
            "ms": "op.duckdb.ms",
            "rss": "op.duckdb.rss_mib",
        },
        "duckdb operations: open N seen N completed N partial N cancelled N failed N first_ms X "
        "best_wall_ms X peak_rss_mib N",
    ),
    # Printed only once the open operations of candor, DuckDB and the generator agree.
    Expect(
        None,
        r"open operations: candor and DuckDB both found \S+",
        {},
        "open operations: candor and DuckDB both found N (generated: ...)",
    ),
]


def parse_operations(
    lines: list[str], values: Values, missing: list[str], notes: list[str]
) -> None:
    apply(lines, [], OPERATIONS, values, missing)
    # operations.sh's own checks, which fail the part: kept as they were printed.
    notes += [line for line in lines if line.startswith("the open operations differ")]


# --- dashboards.sh and dashboards/examples/bench.rs ------------------------------------------

DASHBOARDS_MARKERS = [
    (r"== 1\. the model", "== 1. the model"),
    (r"== 2\. keeping up", "== 2. keeping up"),
    (r"== 3\. the history from the tables", "== 3. the history from the tables"),
]
# (figure key, path): the pages dashboards.sh times while the preloaded stream's model is loaded.
PAGES = [
    ("overview_1h", "/?range=1h"),
    ("overview_6h", "/?range=6h"),
    ("api_1h", "/api/overview?range=1h"),
    ("metrics", "/metrics"),
]
DASHBOARDS = [
    Expect(
        "== 1. the model",
        r"apply: (?P<records>\d+) records \(decode \+ apply\) in (?P<s>\S+) s = (?P<rps>\S+) "
        r"records/s",
        {"rps": "d.model.records_per_s"},
        "apply: N records (decode + apply) in X s = N records/s on one thread; ...",
    ),
    Expect(
        "== 2. keeping up",
        r"events (?P<events>\d+) records_all_topics (?P<all>\d+) wall_s (?P<wall>\S+) "
        r"records_per_s (?P<rps>\S+) cpu_s (?P<cpu>\S+) records_per_cpu_s (?P<rpc>\S+) "
        r"peak_rss_mib (?P<rss>\S+)",
        {
            "events": "d.stream.events",
            "all": "d.stream.records",
            "wall": "d.stream.wall_s",
            "rps": "d.stream.records_per_s",
            "rpc": "d.stream.records_per_cpu_s",
            "rss": "d.stream.rss_mib",
        },
        "events N records_all_topics N wall_s X records_per_s N cpu_s X records_per_cpu_s N "
        "peak_rss_mib N",
    ),
    *(
        Expect(
            "== 2. keeping up",
            rf"GET {re.escape(path)} median (?P<v>\S+) ms",
            {"v": f"d.page.{key}_ms"},
            f"GET {path} median X ms",
        )
        for key, path in PAGES
    ),
    Expect(
        "== 3. the history from the tables",
        r"rows_from_tables (?P<rows>\d+) read_s (?P<read>\S+) records_from_kafka (?P<kafka>\S+) "
        r"start_to_ready_s (?P<ready>\S+) rows_per_s (?P<rps>\S+) cpu_s (?P<cpu>\S+) "
        r"peak_rss_mib (?P<rss>\S+)",
        {
            "rows": "d.tables.rows",
            "kafka": "d.tables.from_kafka",
            "ready": "d.tables.ready_s",
            "rps": "d.tables.rows_per_s",
            "rss": "d.tables.rss_mib",
        },
        "rows_from_tables N read_s X records_from_kafka N start_to_ready_s X rows_per_s N cpu_s X "
        "peak_rss_mib N",
    ),
]


def parse_dashboards(
    lines: list[str], values: Values, missing: list[str], notes: list[str]
) -> None:
    apply(lines, DASHBOARDS_MARKERS, DASHBOARDS, values, missing)
    # The event records alone, read over the same wall time as every topic's records.
    events, records = values.get("d.stream.events"), values.get("d.stream.records")
    per_s = values.get("d.stream.records_per_s")
    if events is not None and records and per_s is not None:
        values["d.stream.events_per_s"] = per_s * events / records
    rows = values.get("d.tables.rows")
    if rows is not None and events is not None and rows < events:
        notes.append(
            f"the start read {rows:,.0f} rows from the tables, fewer than the {events:,.0f} "
            "event records preloaded"
        )
    if values.get("d.tables.from_kafka"):
        notes.append(
            f"after the start from the tables, {values['d.tables.from_kafka']:,.0f} records were "
            "still read from Kafka"
        )


# --- figures --------------------------------------------------------------------------------

BARE = "bare call (raw_operation)"
ROTEL = "Rotel"
DUCK_FIRST = "DuckDB, first run"
DUCK_CLI = "DuckDB CLI, fresh process"
DUCK_BEST = "DuckDB, fastest of runs 2–10"
DUCK_OPS_BEST = "DuckDB in process, fastest of 5"
DUCK_OPS_FIRST = "DuckDB in process, first run"
DUCK_OPS = "DuckDB in process"
COLLECTOR_ACCEPTED = "collector accepted events/s, full speed"


def figures() -> list[Figure]:
    rows = [
        Figure(
            "adapter",
            "success: adapter call",
            "ns",
            "lower",
            "a.success_path/adapter_call",
            BARE,
            "a.success_path/raw_operation",
        ),
        Figure(
            "adapter", "success: added per call (adapter − bare)", "ns", "lower", "a.added.success"
        ),
        Figure(
            "adapter",
            "success: adapter call, no-op OTel providers",
            "ns",
            "lower",
            "a.success_path/adapter_call_noop_providers",
            BARE,
            "a.success_path/raw_operation",
        ),
        Figure(
            "adapter",
            "failure: adapter call with its span event",
            "ns",
            "lower",
            "a.failure_attempt/adapter_call_with_span_event",
            "bare SDK span with one event",
            "a.failure_attempt/sdk_span_with_one_event",
        ),
        Figure(
            "adapter",
            "failure: adapter call with its span event",
            "ns",
            "lower",
            "a.failure_attempt/adapter_call_with_span_event",
            "tracing-opentelemetry event",
            "a.failure_attempt/tracing_opentelemetry_event",
        ),
        Figure("adapter", "failure: added over a bare SDK span", "ns", "lower", "a.added.failure"),
        Figure(
            "collector",
            "OTLP → Kafka, full speed",
            "events/s",
            "higher",
            "co.full.events_per_s",
            "raw rdkafka producer",
            "co.raw.records_per_s",
        ),
        Figure(
            "collector",
            "OTLP → Kafka, full speed",
            "events/s",
            "higher",
            "co.full.events_per_s",
            ROTEL,
            "co.rotel.events_per_s",
        ),
        Figure(
            "collector",
            "request latency p50, full speed",
            "ms",
            "lower",
            "co.full.p50_ms",
            ROTEL,
            "co.rotel.p50_ms",
        ),
        Figure(
            "collector",
            "request latency p99, full speed",
            "ms",
            "lower",
            "co.full.p99_ms",
            ROTEL,
            "co.rotel.p99_ms",
        ),
        Figure(
            "collector",
            "CPU per event, full speed",
            "µs",
            "lower",
            "co.full.cpu_us_per_event",
            ROTEL,
            "co.rotel.cpu_us_per_event",
        ),
        Figure(
            "collector",
            "peak RSS, full speed",
            "MiB",
            "lower",
            "co.full.rss_mib",
            ROTEL,
            "co.rotel.rss_mib",
        ),
        Figure(
            "collector",
            "request latency p50, half the maximum rate",
            "ms",
            "lower",
            "co.half.p50_ms",
        ),
        Figure(
            "collector",
            "request latency p99, half the maximum rate",
            "ms",
            "lower",
            "co.half.p99_ms",
        ),
        Figure("collector", "peak RSS at 100,000 events/s", "MiB", "lower", "co.100k.rss_mib"),
        Figure(
            "compactor", "Kafka → Delta, preloaded records", "rows/s", "higher", "cp.rows_per_s"
        ),
        Figure("compactor", "rows per CPU-second", "rows/CPU-s", "higher", "cp.rows_per_cpu_s"),
        Figure(
            "compactor",
            "writing files and committing",
            "s",
            "lower",
            "cp.write_s",
            "pyarrow write_table",
            "cp.pyarrow_s",
        ),
        Figure(
            "compactor",
            "writer rows/s (rows ÷ write time)",
            "rows/s",
            "higher",
            "cp.writer_rows_per_s",
            "pyarrow write_table",
            "cp.pyarrow_rows_per_s",
        ),
        Figure(
            "compactor",
            "bytes per row after optimize",
            "B",
            "lower",
            "cp.optimized.bytes_per_row",
            "pyarrow write_table",
            "cp.pyarrow_bytes_per_row",
        ),
        Figure("compactor", "bytes per row as written", "B", "lower", "cp.written.bytes_per_row"),
        Figure("compactor", "peak RSS", "MiB", "lower", "cp.rss_mib"),
        Figure(
            "compactor",
            "production → visibility p50 (files every 60 s)",
            "s",
            "lower",
            "cp.stream.p50_s",
        ),
        Figure(
            "compactor",
            "production → visibility p95 (files every 60 s)",
            "s",
            "lower",
            "cp.stream.p95_s",
        ),
        Figure(
            "compactor",
            "production → visibility max (files every 60 s)",
            "s",
            "lower",
            "cp.stream.max_s",
        ),
    ]
    for key, fresh, hot, _ in QUESTIONS:
        if fresh:
            rows.append(
                Figure(
                    "query",
                    f"{hot}: fresh process, best of 5",
                    "ms",
                    "lower",
                    f"q.{key}.fresh.ms",
                    DUCK_FIRST,
                    f"q.{key}.duckdb.cold_ms",
                )
            )
        rows.append(
            Figure(
                "query",
                f"{hot}: warm library, fastest of 10",
                "ms",
                "lower",
                f"q.{key}.hot.min_ms",
                DUCK_BEST,
                f"q.{key}.duckdb.hot_ms",
            )
        )
    for key, fresh, hot, _ in QUESTIONS:
        if fresh and key in CLI_QUESTIONS:
            rows.append(
                Figure(
                    "query",
                    f"{hot}: fresh process, best of 5, beside the DuckDB CLI",
                    "ms",
                    "lower",
                    f"q.{key}.fresh.ms",
                    DUCK_CLI,
                    f"q.{key}.cli.ms",
                )
            )
    for key, fresh, hot, _ in QUESTIONS:
        if fresh:
            rows.append(
                Figure(
                    "query",
                    f"{hot}: fresh process peak RSS",
                    "MiB",
                    "lower",
                    f"q.{key}.fresh.rss_mib",
                    *((DUCK_CLI, f"q.{key}.cli.rss_mib") if key in CLI_QUESTIONS else ()),
                )
            )
    rows.append(Figure("query", "warm library: opening the tables", "ms", "lower", "q.open_ms"))
    rows.append(Figure("query", "warm library: peak RSS", "MiB", "lower", "q.hot.rss_mib"))
    rows += [
        Figure(
            "operations",
            "open operations: fresh process, best of 5",
            "ms",
            "lower",
            "op.candor.ms",
            DUCK_OPS_BEST,
            "op.duckdb.ms",
        ),
        Figure(
            "operations",
            "open operations: fresh process, best of 5",
            "ms",
            "lower",
            "op.candor.ms",
            DUCK_OPS_FIRST,
            "op.duckdb.first_ms",
        ),
        Figure(
            "operations",
            "peak RSS",
            "MiB",
            "lower",
            "op.candor.rss_mib",
            DUCK_OPS,
            "op.duckdb.rss_mib",
        ),
        Figure(
            "operations",
            "open operations found",
            "operations",
            "same",
            "op.candor.open",
            DUCK_OPS,
            "op.duckdb.open",
        ),
        Figure(
            "dashboards",
            "keeping up: event records/s read (preloaded stream)",
            "records/s",
            "higher",
            "d.stream.events_per_s",
            COLLECTOR_ACCEPTED,
            "co.full.events_per_s",
            "collector",
        ),
        Figure(
            "dashboards",
            "keeping up: records/s read, all topics (preloaded stream)",
            "records/s",
            "higher",
            "d.stream.records_per_s",
            COLLECTOR_ACCEPTED,
            "co.full.events_per_s",
            "collector",
        ),
        Figure(
            "dashboards",
            "keeping up: records per CPU-second, all topics",
            "records/CPU-s",
            "higher",
            "d.stream.records_per_cpu_s",
        ),
        Figure("dashboards", "keeping up: reading every record", "s", "lower", "d.stream.wall_s"),
        Figure("dashboards", "keeping up: peak RSS", "MiB", "lower", "d.stream.rss_mib"),
        *(
            Figure("dashboards", f"GET {path}, median of 5", "ms", "lower", f"d.page.{key}_ms")
            for key, path in PAGES
        ),
        Figure(
            "dashboards",
            "start from the tables: rows/s read",
            "rows/s",
            "higher",
            "d.tables.rows_per_s",
        ),
        Figure(
            "dashboards",
            "start from the tables: start to history ready",
            "s",
            "lower",
            "d.tables.ready_s",
        ),
        Figure("dashboards", "start from the tables: peak RSS", "MiB", "lower", "d.tables.rss_mib"),
        Figure(
            "dashboards",
            "the model alone: records/s decoded and applied, one thread",
            "records/s",
            "higher",
            "d.model.records_per_s",
        ),
    ]
    return rows


CAVEATS = {
    "adapter": "Criterion's estimate of one call; every provider exports to a no-op exporter.",
    "collector": "The raw producer is the ceiling (the same records, no OTLP). Rotel answers "
    "before Kafka delivery and writes one Kafka message per batch, so it does less per event.",
    "compactor": "rows/s is end to end (Kafka → Delta, files every 2 s). pyarrow only writes the "
    "same rows, sorted and in memory, as one file with the compactor's codec and row groups.",
    "query": "Fresh: a new `candor` process (start and table open included), beside a new DuckDB "
    "CLI process given the table's file list. DuckDB's first run: its first query on a session "
    "whose views already list the files. Warm: the library on an open session.",
    "operations": "`candor operations` as a new process (start, table open and the adapter "
    "instances' silences from outcome_counts included; its RSS is the last run's) beside the same "
    "question in one DuckDB process over operation_events' live files (that process's peak RSS, "
    "Python and the file listing included). The data is loaded once and kept by the repetitions.",
    "dashboards": "Keeping up: a fresh `candor-dashboards` reading a stream preloaded into Tansu "
    "(memory engine), from its start until every event record is read; its peer is the "
    "collector's accepted events/s at full speed in the same repetition (candor/peer ≥ 1: the "
    "dashboards read faster than the collector accepts). All topics: the event records and their "
    "counter points and heartbeats. Pages: while that model is loaded. Start from the tables: the "
    "same records compacted, then a fresh process until its history is ready. The model alone: "
    "dashboards/examples/bench.rs, in process.",
}


def better_text(better: str) -> str:
    """The last column: which way is better, or that the figure should equal its peer's."""
    return "same as the peer" if better == "same" else f"{better} is better"


# --- summary --------------------------------------------------------------------------------


def stats(per_rep: list[float | None], reps: int) -> Stats:
    present = [v for v in per_rep if v is not None]
    return {
        "values": per_rep,
        "median": statistics.median(present) if present else None,
        "min": min(present) if present else None,
        "max": max(present) if present else None,
        "n": len(present),
        "of": reps,
    }


def show(value: float | None) -> str:
    if value is None:
        return "missing"
    size = abs(value)
    if size >= 1000:
        return f"{value:,.0f}"
    if size >= 100:
        return f"{value:.0f}"
    if size >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def cell(s: Stats) -> str:
    if s["n"] == 0:
        return f"missing (0/{s['of']})"
    if s["n"] == 1 or s["min"] == s["max"]:
        return f"{show(s['median'])} ({s['n']}/{s['of']})"
    return f"{show(s['median'])} ({show(s['min'])}–{show(s['max'])}, {s['n']}/{s['of']})"


def show_ratio(value: float) -> str:
    size = abs(value)
    return f"{value:.0f}" if size >= 100 else f"{value:.1f}" if size >= 10 else f"{value:.2f}"


def ratio_cell(s: Stats) -> str:
    median, low, high = s["median"], s["min"], s["max"]
    # All three are missing exactly when no repetition has the ratio.
    if median is None or low is None or high is None:
        return "—"
    spread = "" if low == high else f" ({show_ratio(low)}–{show_ratio(high)})"
    return f"{show_ratio(median)}{spread}"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(r: list[str]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) + " |"

    return [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)]


def read_keyed(path: Path, separator: str) -> dict[str, str]:
    out: dict[str, str] = {}
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            key, _, value = line.partition(separator)
            if value:
                out[key.strip()] = value.strip()
    return out


def read_run(path: Path, results: Path) -> tuple[Run, int, list[str]]:
    run: Run = {"params": {}, "orders": {}, "exits": {}}
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            words = line.split()
            if len(words) >= 4 and words[0] == "rep" and words[2] == "order":
                run["orders"][int(words[1])] = words[3:]
            elif len(words) >= 8 and words[0] == "rep" and words[2] == "part":
                run["exits"][(int(words[1]), words[3])] = {
                    "exit": int(words[5]),
                    "seconds": int(words[7]),
                }
            elif len(words) >= 2:
                run["params"][words[0]] = " ".join(words[1:])
    names = [re.fullmatch(r"rep(\d+)-(\w+)\.txt", p.name) for p in results.iterdir()]
    found = [(int(m.group(1)), m.group(2)) for m in names if m and m.group(2) in PARTS]
    reps = int(run["params"].get("repetitions", 0)) or max((r for r, _ in found), default=0)
    parts = [p for p in run["params"].get("parts", "").split() if p in PARTS]
    parts = parts or sorted({p for _, p in found}, key=PARTS.index)
    return run, reps, parts


def main(results: Path) -> None:
    machine = read_keyed(results / "machine.txt", ":")
    run, reps, parts = read_run(results / "run.txt", results)
    parsers: dict[str, Parser] = {
        "adapter": parse_adapter,
        "collector": parse_collector,
        "compactor": parse_compactor,
        "query": parse_query,
        "operations": parse_operations,
        "dashboards": parse_dashboards,
    }
    values: dict[int, Values] = {rep: {} for rep in range(1, reps + 1)}
    texts: dict[int, dict[str, str]] = {rep: {} for rep in range(1, reps + 1)}
    not_found: list[str] = []
    notes: list[str] = []
    for rep in range(1, reps + 1):
        for part in parts:
            path = results / f"rep{rep}-{part}.txt"
            status = run["exits"].get((rep, part))
            about = f"rep{rep} {part}" + (
                f" (exit {status['exit']})" if status else " (no exit status recorded)"
            )
            if not path.exists():
                not_found.append(f"{about}: no raw output {path.name}")
                continue
            lines = [
                ANSI.sub("", line).strip() for line in path.read_text(errors="replace").splitlines()
            ]
            missing: list[str] = []
            found_notes: list[str] = []
            if part == "latency":
                parse_latency(lines, values[rep], missing, found_notes, texts[rep])
            else:
                parsers[part](lines, values[rep], missing, found_notes)
            not_found += [f"{about}: {m}" for m in missing]
            notes += [f"rep{rep} {part}: {n}" for n in found_notes]

    def per_rep(key: str) -> list[float | None]:
        return [values[rep].get(key) for rep in range(1, reps + 1)]

    report: Report = {
        "results": str(results),
        "machine": machine,
        "params": run["params"],
        "orders": {str(rep): order for rep, order in run["orders"].items()},
        "runs": [
            {"rep": rep, "part": part, **status}
            for (rep, part), status in sorted(run["exits"].items())
        ],
        "repetitions": reps,
        "figures": [],
        "latency": [],
        "missing": [],
        "notes": notes,
        "not_found": not_found,
    }
    out = [f"# Candor benchmark suite, {results.resolve().name}", ""]
    out.append(
        f"**{machine.get('cores', '?')} cores** · {machine.get('cpu', 'cpu unknown')} · "
        f"{machine.get('memory', 'memory unknown')} · {machine.get('kernel', 'kernel unknown')} · "
        f"git {machine.get('git', 'unknown')} · {machine.get('rustc', 'rustc unknown')} · "
        f"{machine.get('tansu', 'tansu unknown')}"
    )
    if "peers" in machine:
        out.append(f"peers: {machine['peers']}")
    p = run["params"]
    out.append("")
    out.append(
        f"{reps} repetitions; sizes: collector {p.get('collector_seconds', '?')} s a run, "
        f"compactor {p.get('compactor_records', '?')} records and a "
        f"{p.get('compactor_stream_seconds', '?')} s stream, query {p.get('query_events', '?')} "
        f"events, latency {p.get('latency_samples', '?')} samples a mode, operations "
        f"{p.get('operations_events', '?')} events, dashboards "
        f"{p.get('dashboards_records', '?')} records over {p.get('dashboards_hours', '?')} h (the "
        f"model alone: {p.get('dashboards_targets', '?')} targets, "
        f"{p.get('dashboards_days', '?')} day(s))."
    )
    out.append(
        "Each cell: median (min–max, n/repetitions). Ratio: candor ÷ peer, the median of the "
        "per-repetition ratios (both sides measured in the same repetition); the last column says "
        "which way is better."
    )

    for part in [p for p in PARTS if p != "latency"]:
        out += ["", f"## {part}", ""]
        if part not in parts:
            out.append("not run (CANDOR_BENCH_PARTS)")
            continue
        out += [CAVEATS[part], ""]
        rows: list[list[str]] = []
        for fig in (f for f in figures() if f.part == part):
            mine = stats(per_rep(fig.key), reps)
            entry: FigureEntry = {
                "part": part,
                "figure": fig.name,
                "unit": fig.unit,
                "better": better_text(fig.better),
                "candor": mine,
                "peer": None,
                "ratio": None,
            }
            peer_cell = ratio = "—"
            if fig.peer_key and fig.peer_part and fig.peer_part not in parts:
                peer_cell = f"{fig.peer}: not run ({fig.peer_part})"
            elif fig.peer_key:
                theirs = stats(per_rep(fig.peer_key), reps)
                ratios = [
                    a / b if a is not None and b else None
                    for a, b in zip(mine["values"], theirs["values"], strict=True)
                ]
                ratio_stats = stats(ratios, reps)
                entry["peer"] = {"name": fig.peer, **theirs}
                entry["ratio"] = ratio_stats
                peer_cell, ratio = f"{fig.peer}: {cell(theirs)}", ratio_cell(ratio_stats)
            report["figures"].append(entry)
            rows.append([fig.name, fig.unit, cell(mine), peer_cell, ratio, better_text(fig.better)])
            for side, s in (("candor", mine), (fig.peer, entry["peer"])):
                if s is not None and s["n"] < reps:
                    gone = [f"rep{r}" for r, v in enumerate(s["values"], 1) if v is None]
                    item = f"{part} · {fig.name} ({side}): missing in {', '.join(gone)}"
                    if item not in report["missing"]:
                        report["missing"].append(item)
        out += table(["figure", "unit", "candor", "peer", "candor/peer", "better"], rows)

    out += ["", "## end-to-end latency: an adapter's failure until `candor incident` shows it", ""]
    if "latency" not in parts:
        out.append("not run (CANDOR_BENCH_PARTS)")
    else:
        ages = sorted({t["max_age"] for t in texts.values() if "max_age" in t}) or [
            p.get("max_age", "?")
        ]
        out.append(
            f"Compactor max age {', '.join(ages)} (files.max_age); at the compactor's default, "
            "60 s, table latency is about a minute. Verdict: the median p95 against the goal, and "
            "no sample left unseen."
        )
        out.append("")
        rows = []
        for mode, goal in GOALS_MS.items():
            summary = {k: stats(per_rep(f"l.{mode}.{k}"), reps) for k in SUMMARY_KEYS}
            unseen = sum(v for v in summary["missing"]["values"] if v is not None)
            p95 = summary["p95_ms"]["median"]
            # No median exactly when no repetition has the figure.
            if p95 is None:
                verdict = "NO DATA"
            elif unseen:
                samples = sum(v for v in summary["samples"]["values"] if v is not None)
                verdict = f"MISS ({unseen:.0f} of {samples:.0f} samples never seen)"
            else:
                verdict = "PASS" if p95 < goal else "MISS"
            if 0 < summary["p95_ms"]["n"] < reps:
                verdict += f", {summary['p95_ms']['n']} of {reps} repetitions"
            report["latency"].append(
                {"mode": mode, "goal_p95_ms": goal, "verdict": verdict, **summary}
            )
            rows.append(
                [
                    "--live" if mode == "live" else "--no-live (table)",
                    cell(summary["p50_ms"]),
                    cell(summary["p95_ms"]),
                    cell(summary["max_ms"]),
                    f"{unseen:.0f}",
                    cell(summary["poll_p50_ms"]),
                    f"p95 < {goal:,} ms",
                    verdict,
                ]
            )
            for key in ("p50_ms", "p95_ms", "max_ms"):
                if summary[key]["n"] < reps:
                    gone = [f"rep{r}" for r, v in enumerate(summary[key]["values"], 1) if v is None]
                    report["missing"].append(
                        f"latency · {mode} {key}: missing in {', '.join(gone)}"
                    )
        out += table(
            [
                "mode",
                "p50 ms",
                "p95 ms",
                "max ms",
                "unseen",
                "one `candor` run p50 ms",
                "goal",
                "verdict",
            ],
            rows,
        )

    out += ["", "## runs", ""]
    for rep in range(1, reps + 1):
        order = run["orders"].get(rep, [])
        done = [(part, run["exits"][(rep, part)]) for part in order if (rep, part) in run["exits"]]
        total = sum(status["seconds"] for _, status in done)
        steps = ", ".join(f"{part} exit {s['exit']} in {s['seconds']} s" for part, s in done)
        out.append(f"- rep{rep} ({total} s): {steps or 'no part recorded'}")
    failed = [
        f"rep{r['rep']} {r['part']} (exit {r['exit']})" for r in report["runs"] if r["exit"] != 0
    ]
    if failed:
        out.append(f"- failed: {', '.join(failed)}")
    for title, items in (
        ("missing figures", report["missing"]),
        ("notes", notes),
        ("not found", not_found),
    ):
        out += ["", f"## {title}", ""]
        out += [f"- {item}" for item in items] or ["none"]

    text = "\n".join(out) + "\n"
    (results / "report.md").write_text(text)
    (results / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(text, end="")


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        sys.exit("usage: suite_report.py RESULTS_DIR")
    main(Path(sys.argv[1]))
