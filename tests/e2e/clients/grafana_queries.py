"""Checks every query of the Grafana dashboards against the metrics `/metrics` actually serves.

Reads a JSON spec on stdin:

    {"dashboards": [paths of Grafana dashboard JSON files],
     "rules": [paths of Prometheus rule files (YAML)],
     "metrics": ["<the text of one /metrics>", ...]}

Every panel target's `expr` (panels nested in rows included) and every query variable of the
templating is read, after the Grafana variables are substituted: the built-in intervals
(`$__rate_interval`, `$__interval`, `$__range`) become `5m`, their `_s`/`_ms` forms and
`$__from`/`$__to` numbers, and the dashboard's own variables a regex that matches anything inside
a string, or their current value outside one. A variable the dashboard does not define is a
problem. Each query is parsed as PromQL (Grafana's `label_values(...)` and `query_result(...)`
for variables) and checked:

- every series name it reads is a series an exposition serves, or the `record` of a recording
  rule. A family is declared by its `# TYPE` line (a `# HELP` or a sample without one makes it
  untyped) and serves the names its type gives: a counter `x_total` (whether the TYPE line says
  `x` or `x_total`) and `x_created`, a histogram `x_bucket`, `x_count`, `x_sum` and `x_created`,
  a summary `x`, `x_count`, `x_sum` and `x_created`, anything else `x`;
- every label it uses, in a matcher `{label=...}`, in `by`/`without`, `on`/`ignoring`,
  `group_left`/`group_right`, as a `label_replace`/`label_join` source, in `label_values` and
  in the target's `legendFormat` (`{{label}}`), is one the series it applies to can carry.
  Labels are inferred through the expression the way Prometheus computes them: a selector
  carries the labels of its series' samples (a bucket's `le` only on `_bucket`) plus `job` and
  `instance`, which every scrape attaches (and `exported_job`/`exported_instance` where the
  exposition has its own: which name an exposed `instance` is stored under depends on the
  scrape's honor_labels, so both are accepted); functions keep their argument's labels
  (`histogram_quantile` drops `le`, `label_replace` adds its destination, `absent` keeps only
  its equality matchers);
  `sum by (L)` keeps L, `without (L)` drops L, `topk` keeps everything; a one-to-one binary
  operation with `on (L)` keeps L, with `ignoring (L)` the left side's labels but L, with
  `group_left (I)`/`group_right (I)` the many side's plus I; `and`/`unless` keep the left side's,
  `or` either side's. `on (L)` needs L on both sides, `by`/`without` on the operand, the
  `group_*` labels on the one side;
- a recording rule's series carry the labels its expression keeps, inferred by the same rules
  from the series it reads (so `sum by (target, source) (...)` carries exactly target and
  source, and `a / on (target) b` only target), plus the rule's static `labels`. Recording
  rules are checked the same way, and their problems reported with the rule's name;
- declared and derived calls stay apart: an aggregation that combines values (sum, avg, min,
  max, stddev, stdvar, quantile) over series carrying `source` must keep `source` (in `by`, or
  not in `without`) unless an equality matcher fixed it to one value (`source="adapter"`), and
  a vector matching (`on`/`ignoring`) between two sides that carry `source` must match on it.
  Counting series (`count`, `group`) and picking them (`topk`) are not combining.

A family with a TYPE or HELP line but no sample in any text is served, but which labels its
series carry is unknown: a label used with it is listed under "unchecked", not as a problem.

Prints {"queries": N, "problems": ["panel title [file]: expr: what is wrong", ...],
"unchecked": [...]}, the expressions as the dashboards write them (variables and all).
Problems do not make it fail; unreadable input (a spec, file, dashboard, rules file or
exposition that cannot be read or parsed) exits 2 with the reason on stderr.
"""

from __future__ import annotations

import difflib
import json
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml

# ---------------------------------------------------------------------------------------------
# The expositions


class InputError(Exception):
    """Input that cannot be read: the script exits 2."""


# The series names a family of each type serves, as suffixes of the family name.
TYPE_SUFFIXES: dict[str, tuple[str, ...]] = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "gaugehistogram": ("_bucket", "_gcount", "_gsum"),
    "summary": ("", "_count", "_sum", "_created"),
    "info": ("_info",),
}
# Labels only some series of a family carry.
SERIES_ONLY_LABELS = {"_bucket": "le", "": "quantile"}
# Labels every scraped series carries, set by Prometheus from the scrape target.
TARGET_LABELS = ("job", "instance")

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
LABEL_PAIR = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,?)')
LABELS_END = re.compile(r"\s*\}")
SAMPLE_VALUE = re.compile(
    r"[+-]?(?:Inf|inf|NaN|nan|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|0[xX][0-9a-fA-F]+)"
)


@dataclass
class Served:
    """What the /metrics texts serve: series names, their families and their samples' labels."""

    # Series name -> family name.
    family_of: dict[str, str] = field(default_factory=dict)
    # Family name -> its type.
    types: dict[str, str] = field(default_factory=dict)
    # Series name -> the labels its samples carry (only names with samples).
    labels: dict[str, set[str]] = field(default_factory=dict)

    def declare(self, family: str, kind: str) -> None:
        """Declares `family` of type `kind` and the series names it serves."""
        self.types[family] = kind
        if kind == "counter" and family.endswith("_total"):
            names = [family, family.removesuffix("_total") + "_created"]
        else:
            names = [family + suffix for suffix in TYPE_SUFFIXES.get(kind, ("",))]
        for name in names:
            self.family_of.setdefault(name, family)

    def sample(self, name: str, labels: set[str]) -> None:
        """Records a sample of the series `name` with these label names."""
        if name not in self.family_of:
            # A sample of a family with no TYPE line: an untyped family of its own.
            self.declare(name, "untyped")
        self.labels.setdefault(name, set()).update(labels)

    def series_labels(self, name: str) -> set[str] | None:
        """The labels the series `name` carries, None when no sample of its family shows them."""
        if name in self.labels:
            return self.labels[name]
        family = self.family_of[name]
        siblings = [
            labels for series, labels in self.labels.items() if self.family_of[series] == family
        ]
        if not siblings:
            return None
        suffix = name.removeprefix(family)
        only = {label for key, label in SERIES_ONLY_LABELS.items() if key != suffix}
        return set().union(*siblings) - only


def parse_exposition(text: str, served: Served, which: str) -> None:
    """Adds one exposition in the Prometheus text format (0.0.4 or OpenMetrics) to `served`."""
    # Families with a HELP line and no TYPE line: untyped, once every TYPE line is read.
    helped: set[str] = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        where = f"{which}, line {number}"
        if not line:
            continue
        if line.startswith("#"):
            parts = line[1:].split(None, 3)
            if len(parts) >= 2 and parts[0] in ("TYPE", "HELP", "UNIT"):
                if not METRIC_NAME.fullmatch(parts[1]):
                    raise InputError(f"{where}: bad metric name {parts[1]!r}")
                if parts[0] == "TYPE":
                    if len(parts) < 3:
                        raise InputError(f"{where}: TYPE without a type")
                    served.declare(parts[1], parts[2].lower())
                else:
                    helped.add(parts[1])
            continue
        name, labels, rest = split_sample(line, where)
        value = rest.split("#", 1)[0].split()
        if not 1 <= len(value) <= 2 or not SAMPLE_VALUE.fullmatch(value[0]):
            raise InputError(f"{where}: no value in {raw!r}")
        served.sample(name, labels)
    for family in sorted(helped):
        if family not in served.types and family not in served.family_of:
            served.declare(family, "untyped")


def split_sample(line: str, where: str) -> tuple[str, set[str], str]:
    """A sample line's series name, its label names, and what follows them."""
    name_match = METRIC_NAME.match(line)
    if not name_match:
        raise InputError(f"{where}: no metric name in {line!r}")
    name, rest = name_match.group(), line[name_match.end() :]
    labels: set[str] = set()
    if not rest.startswith("{"):
        return name, labels, rest
    pos = 1
    while True:
        close = LABELS_END.match(rest, pos)
        if close:
            return name, labels, rest[close.end() :]
        found = LABEL_PAIR.match(rest, pos)
        if not found:
            raise InputError(f"{where}: bad labels in {line!r}")
        labels.add(found.group(1))
        pos = found.end()
        if not found.group(3) and not LABELS_END.match(rest, pos):
            raise InputError(f"{where}: bad labels in {line!r}")


# ---------------------------------------------------------------------------------------------
# PromQL: tokens


class ParseError(Exception):
    """A query that is not PromQL: a problem of the query, not unreadable input."""


TokenKind = Literal["number", "duration", "string", "ident", "op", "end"]


@dataclass(frozen=True)
class Token:
    kind: TokenKind
    text: str
    pos: int


TOKEN_PATTERNS: list[tuple[TokenKind, re.Pattern[str]]] = [
    ("duration", re.compile(r"(?:\d+(?:ms|s|m|h|d|w|y))+(?![a-zA-Z0-9_])")),
    ("number", re.compile(r"0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")),
    ("string", re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')),
    # A name may start with ':', but not ':' and a digit: `[5m:1m]` is a subquery.
    ("ident", re.compile(r"[a-zA-Z_][a-zA-Z0-9_:]*|:[a-zA-Z_][a-zA-Z0-9_:]*")),
    ("op", re.compile(r"==|!=|=~|!~|<=|>=|[<>=+\-*/%^(){}\[\],:@]")),
]


def tokenize(text: str) -> list[Token]:
    """The tokens of a PromQL expression; comments (`# ...`) and whitespace are left out."""
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
            continue
        if text[pos] == "#":
            end = text.find("\n", pos)
            pos = len(text) if end < 0 else end
            continue
        for kind, pattern in TOKEN_PATTERNS:
            found = pattern.match(text, pos)
            if found:
                tokens.append(Token(kind, found.group(), pos))
                pos = found.end()
                break
        else:
            raise ParseError(f"unexpected {text[pos]!r} at {pos}")
    tokens.append(Token("end", "", len(text)))
    return tokens


def unquote(token: Token) -> str:
    """The value of a string token."""
    body = token.text[1:-1]
    if token.text[0] == "`":
        return body
    return re.sub(r"\\(.)", r"\1", body)


# ---------------------------------------------------------------------------------------------
# PromQL: syntax


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str
    value: str


@dataclass(frozen=True)
class Constant:
    """A number or a string; a string's text is kept for the functions that read it."""

    kind: Literal["scalar", "string"]
    text: str = ""


@dataclass(frozen=True)
class Selector:
    name: str | None
    matchers: tuple[Matcher, ...]
    ranged: bool = False


@dataclass(frozen=True)
class Call:
    func: str
    args: tuple[Node, ...]


@dataclass(frozen=True)
class Aggregate:
    op: str
    expr: Node
    param: Node | None
    grouping: tuple[str, ...] | None
    without: bool


@dataclass(frozen=True)
class Binary:
    op: str
    lhs: Node
    rhs: Node
    # on (True), ignoring (False) or neither (None), with its labels.
    on: bool | None
    matching: tuple[str, ...]
    # group_left, group_right or one-to-one (None), with the labels copied from the one side.
    group: Literal["left", "right"] | None
    include: tuple[str, ...]


@dataclass(frozen=True)
class Subquery:
    expr: Node


@dataclass(frozen=True)
class Unary:
    expr: Node


Node = Constant | Selector | Call | Aggregate | Binary | Subquery | Unary


def words(text: str) -> set[str]:
    """The words of `text`, for the long sets of names below."""
    return set(text.split())


AGGREGATIONS = words(
    """
    sum min max avg group stddev stdvar count count_values bottomk topk quantile limitk
    limit_ratio
    """
)
# Aggregations whose first argument is a parameter.
WITH_PARAM = {"count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio"}
# Aggregations whose result keeps each series' labels (by/without only groups).
KEEP_LABELS = {"bottomk", "topk", "limitk", "limit_ratio"}

BINARY_PRECEDENCE = {
    "or": 1,
    "and": 2,
    "unless": 2,
    "==": 3,
    "!=": 3,
    "<=": 3,
    "<": 3,
    ">=": 3,
    ">": 3,
    "+": 4,
    "-": 4,
    "*": 5,
    "/": 5,
    "%": 5,
    "atan2": 5,
    "^": 6,
}
SET_OPERATORS = {"and", "or", "unless"}

# Functions taking a range vector.
RANGE_FUNCTIONS = words(
    """
    rate irate increase delta idelta deriv predict_linear changes resets holt_winters
    double_exponential_smoothing absent_over_time present_over_time avg_over_time
    min_over_time max_over_time sum_over_time count_over_time quantile_over_time
    stddev_over_time stdvar_over_time last_over_time mad_over_time ts_of_max_over_time
    ts_of_min_over_time ts_of_last_over_time
    """
)
# Functions whose result carries the labels of their (first) vector argument.
LABEL_KEEPING_FUNCTIONS = (RANGE_FUNCTIONS - {"absent_over_time"}) | words(
    """
    abs acos acosh asin asinh atan atanh ceil clamp clamp_max clamp_min cos cosh
    day_of_month day_of_week day_of_year days_in_month deg exp floor histogram_avg
    histogram_count histogram_fraction histogram_stddev histogram_stdvar histogram_sum
    hour info ln log10 log2 minute month rad round sgn sin sinh sort sort_desc sqrt tan
    tanh timestamp year
    """
)
# Functions of the time whose vector argument may be left out (it is then vector(time())).
TIME_FUNCTIONS = words(
    """
    day_of_month day_of_week day_of_year days_in_month hour minute month year
    """
)


class Parser:
    """A recursive-descent PromQL parser, enough to see every name and label a query uses."""

    def __init__(self, text: str) -> None:
        self.tokens = tokenize(text)
        self.at = 0

    def parse(self) -> Node:
        node = self.expression(1)
        if self.peek().kind != "end":
            raise ParseError(f"unexpected {self.peek().text!r} at {self.peek().pos}")
        return node

    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.at + ahead, len(self.tokens) - 1)]

    def take(self) -> Token:
        token = self.peek()
        self.at += 1
        return token

    def expect(self, text: str) -> Token:
        token = self.take()
        if token.text != text or token.kind == "string":
            raise ParseError(f"expected {text!r} at {token.pos}, found {token.text!r}")
        return token

    def is_op(self, text: str) -> bool:
        token = self.peek()
        return token.kind in ("op", "ident") and token.text == text

    def binary_op(self) -> str | None:
        token = self.peek()
        if token.kind == "op" and token.text in BINARY_PRECEDENCE:
            return token.text
        if token.kind == "ident" and token.text.lower() in SET_OPERATORS | {"atan2"}:
            return token.text.lower()
        return None

    def expression(self, min_precedence: int) -> Node:
        lhs = self.unary()
        while (op := self.binary_op()) is not None:
            precedence = BINARY_PRECEDENCE[op]
            if precedence < min_precedence:
                break
            self.take()
            if self.is_op("bool"):
                self.take()
            on: bool | None = None
            matching: tuple[str, ...] = ()
            if self.peek().text.lower() in ("on", "ignoring"):
                on = self.take().text.lower() == "on"
                matching = self.label_list()
            group: Literal["left", "right"] | None = None
            include: tuple[str, ...] = ()
            if self.peek().text.lower() in ("group_left", "group_right"):
                group = "left" if self.take().text.lower() == "group_left" else "right"
                if self.is_op("("):
                    include = self.label_list()
            # `^` is right-associative, every other operator left-associative.
            rhs = self.expression(precedence if op == "^" else precedence + 1)
            lhs = Binary(op, lhs, rhs, on, matching, group, include)
        return lhs

    def unary(self) -> Node:
        if self.peek().kind == "op" and self.peek().text in ("-", "+"):
            self.take()
            return Unary(self.unary())
        return self.postfix(self.primary())

    def postfix(self, node: Node) -> Node:
        while True:
            if self.is_op("["):
                self.take()
                self.duration()
                if self.is_op(":"):
                    self.take()
                    if not self.is_op("]"):
                        self.duration()
                    self.expect("]")
                    node = Subquery(node)
                    continue
                self.expect("]")
                if not isinstance(node, Selector) or node.ranged:
                    raise ParseError("a range [..] applies only to a vector selector")
                node = Selector(node.name, node.matchers, ranged=True)
            elif self.peek().kind == "ident" and self.peek().text.lower() == "offset":
                self.take()
                if self.peek().text in ("-", "+"):
                    self.take()
                self.duration()
            elif self.is_op("@"):
                self.take()
                token = self.take()
                if token.text in ("start", "end"):
                    self.expect("(")
                    self.expect(")")
                elif token.kind != "number":
                    raise ParseError(f"expected a time after @ at {token.pos}")
            else:
                return node

    def duration(self) -> None:
        token = self.take()
        if token.kind != "duration":
            raise ParseError(f"expected a duration at {token.pos}, found {token.text!r}")

    def label_list(self) -> tuple[str, ...]:
        self.expect("(")
        labels: list[str] = []
        while not self.is_op(")"):
            token = self.take()
            if token.kind == "ident" and LABEL_NAME.fullmatch(token.text):
                labels.append(token.text)
            elif token.kind == "string":
                labels.append(unquote(token))
            else:
                raise ParseError(f"expected a label name at {token.pos}, found {token.text!r}")
            if not self.is_op(")"):
                self.expect(",")
        self.expect(")")
        return tuple(labels)

    def primary(self) -> Node:
        token = self.peek()
        if token.kind in ("number", "duration"):
            self.take()
            return Constant("scalar")
        if token.kind == "string":
            self.take()
            return Constant("string", unquote(token))
        if token.kind == "op" and token.text == "(":
            self.take()
            node = self.expression(1)
            self.expect(")")
            return node
        if token.kind == "op" and token.text == "{":
            return self.selector(None)
        if token.kind != "ident":
            raise ParseError(f"unexpected {token.text!r} at {token.pos}")
        name = token.text
        following = self.peek(1)
        if name.lower() in AGGREGATIONS and (
            following.text == "(" or following.text.lower() in ("by", "without")
        ):
            return self.aggregate()
        if following.kind == "op" and following.text == "(":
            return self.call()
        if name.lower() in ("inf", "nan"):
            self.take()
            return Constant("scalar")
        self.take()
        return self.selector(name)

    def selector(self, name: str | None) -> Selector:
        matchers: list[Matcher] = []
        if self.is_op("{"):
            self.take()
            while not self.is_op("}"):
                token = self.take()
                if token.kind == "string" and (self.is_op(",") or self.is_op("}")):
                    name = unquote(token)
                else:
                    if token.kind == "string":
                        label = unquote(token)
                    elif token.kind == "ident" and LABEL_NAME.fullmatch(token.text):
                        label = token.text
                    else:
                        raise ParseError(f"expected a label name at {token.pos}")
                    op = self.take()
                    if op.text not in ("=", "!=", "=~", "!~") or op.kind != "op":
                        raise ParseError(f"expected a label matcher at {op.pos}")
                    value = self.take()
                    if value.kind != "string":
                        raise ParseError(f"expected a quoted label value at {value.pos}")
                    matchers.append(Matcher(label, op.text, unquote(value)))
                if not self.is_op("}"):
                    self.expect(",")
            self.expect("}")
        if name is None:
            name = next((m.value for m in matchers if m.label == "__name__" and m.op == "="), None)
        if name is None and not matchers:
            raise ParseError("a selector needs a metric name or a matcher")
        return Selector(name, tuple(matchers))

    def call(self) -> Call:
        func = self.take().text
        self.expect("(")
        args: list[Node] = []
        while not self.is_op(")"):
            args.append(self.expression(1))
            if not self.is_op(")"):
                self.expect(",")
        self.expect(")")
        return Call(func, tuple(args))

    def aggregate(self) -> Aggregate:
        op = self.take().text.lower()
        grouping: tuple[str, ...] | None = None
        without = False
        if self.peek().text.lower() in ("by", "without"):
            without = self.take().text.lower() == "without"
            grouping = self.label_list()
        self.expect("(")
        param: Node | None = None
        if op in WITH_PARAM:
            param = self.expression(1)
            self.expect(",")
        expr = self.expression(1)
        self.expect(")")
        if grouping is None and self.peek().text.lower() in ("by", "without"):
            without = self.take().text.lower() == "without"
            grouping = self.label_list()
        return Aggregate(op, expr, param, grouping, without)


def parse_promql(text: str) -> Node:
    """The syntax tree of a PromQL expression, or ParseError."""
    return Parser(text).parse()


# ---------------------------------------------------------------------------------------------
# Labels through an expression

# The label that tells calls adapters declared (`adapter`) from calls derived from spans
# (`genai`, `mcp`, `http`, whose rates are lower bounds): no aggregation may sum over it unless
# an equality matcher fixes it to one value.
APART = "source"
# Aggregations that combine the values of the series they group.
COMBINING = {"sum", "avg", "min", "max", "stddev", "stdvar", "quantile"}


@dataclass(frozen=True)
class Value:
    """What an expression yields: its kind and the labels its series can carry.

    `unknown` names the series whose labels no exposition shows (a family without samples): a
    label outside `labels` may still be one of theirs. `names` are the series it reads, and
    `fixed` the labels an equality matcher fixed to one value, with that value.
    """

    kind: Literal["scalar", "string", "vector", "matrix"]
    labels: frozenset[str] = frozenset()
    unknown: frozenset[str] = frozenset()
    names: frozenset[str] = frozenset()
    fixed: frozenset[tuple[str, str]] = frozenset()

    def vector(self) -> bool:
        return self.kind in ("vector", "matrix")

    def has(self, label: str) -> bool:
        return label in self.labels or label == "__name__"

    def describe(self) -> str:
        names = ", ".join(sorted(self.names)) or "a literal"
        carried = ", ".join(sorted(self.labels)) or "none"
        return f"{names} (labels: {carried})"

    def fixes(self, label: str) -> bool:
        return any(name == label for name, _ in self.fixed)

    def derive(
        self,
        labels: frozenset[str] | set[str],
        names: frozenset[str] | None = None,
        fixed: frozenset[tuple[str, str]] | None = None,
    ) -> Value:
        """An instant vector of these labels, as unknown as this one."""
        kept = frozenset(labels)
        fixed = self.fixed if fixed is None else fixed
        return Value(
            "vector",
            kept,
            self.unknown,
            self.names if names is None else names,
            frozenset(pair for pair in fixed if pair[0] in kept),
        )


# A recording rule: its expression, where it is defined, and its static labels.
Rule = tuple[str, str, dict[str, str]]


@dataclass
class Findings:
    problems: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)


class Checker:
    """Checks queries against the served series and the recording rules."""

    def __init__(self, served: Served, rules: dict[str, list[Rule]]) -> None:
        self.served = served
        self.rules = rules
        self.rule_values: dict[str, Value] = {}
        self.resolving: set[str] = set()
        # Names reported as neither served nor recorded: their labels are not checked again.
        self.missing: set[str] = set()
        self.findings = Findings()
        self.where = ""

    # Reporting ------------------------------------------------------------------------------

    def problem(self, what: str) -> None:
        self.findings.problems.append(f"{self.where}: {what}")

    def need(self, value: Value, label: str, what: str, of: str = "") -> None:
        """Reports `label` (used as `what`) unless the series of `value` (`of`) can carry it."""
        if value.has(label):
            return
        if value.unknown:
            if value.unknown <= self.missing:
                return
            series = ", ".join(sorted(value.unknown - self.missing))
            self.findings.unchecked.append(
                f"{self.where}: {what} `{label}`: no sample of {series} is served, so its labels "
                "are unknown"
            )
            return
        self.problem(f"{what} `{label}`, which is not a label of {of or value.describe()}")

    # Queries --------------------------------------------------------------------------------

    def check(self, where: str, expr: str, legend: str = "", shown: str = "") -> None:
        """Checks one query, its variables substituted; `legend` is its legendFormat and
        `shown` the query as the dashboard writes it."""
        self.where = f"{where}: {shown or expr}"
        try:
            node = parse_promql(expr)
        except ParseError as err:
            self.problem(f"does not parse: {err}")
            return
        value = self.value(node)
        carried = ", ".join(sorted(value.labels)) or "none"
        for label in re.findall(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}", legend):
            self.need(value, label, "legendFormat shows", f"the query's result (labels: {carried})")

    def check_variable(self, where: str, query: str, shown: str = "") -> bool:
        """Checks a Grafana variable query; False when it is none that reads series."""
        self.where = f"{where}: {shown or query}"
        found = re.fullmatch(r"\s*label_values\((.*),\s*([a-zA-Z_]\w*)\s*\)\s*", query, re.S)
        if found:
            try:
                node = parse_promql(found.group(1))
            except ParseError as err:
                self.problem(f"does not parse: {err}")
                return True
            self.need(self.value(node), found.group(2), "label_values reads")
            return True
        found = re.fullmatch(r"\s*label_values\(\s*([a-zA-Z_]\w*)\s*\)\s*", query)
        if found:
            label = found.group(1)
            carried = any(label in labels for labels in self.served.labels.values())
            if not carried and label not in TARGET_LABELS:
                self.problem(f"label_values reads `{label}`, which no served sample carries")
            return True
        found = re.fullmatch(r"\s*query_result\((.*)\)\s*", query, re.S)
        if found:
            self.check(where, found.group(1), shown=shown)
            return True
        return False

    # Inference ------------------------------------------------------------------------------

    def value(self, node: Node) -> Value:
        if isinstance(node, Constant):
            return Value(node.kind)
        if isinstance(node, Selector):
            return self.selector(node)
        if isinstance(node, Unary):
            return self.value(node.expr)
        if isinstance(node, Subquery):
            inner = self.value(node.expr)
            if inner.kind != "vector":
                self.problem("a subquery [..:..] needs an instant vector")
            return Value("matrix", inner.labels, inner.unknown, inner.names, inner.fixed)
        if isinstance(node, Call):
            return self.call(node)
        if isinstance(node, Aggregate):
            return self.aggregate(node)
        return self.binary(node)

    def selector(self, node: Selector) -> Value:
        kind: Literal["vector", "matrix"] = "matrix" if node.ranged else "vector"
        if node.name is None:
            # Chosen by a regex on __name__: which series, and so which labels, is not known.
            unknown = frozenset({"the series matching __name__"})
            return Value(kind, frozenset(TARGET_LABELS), unknown, unknown)
        value = self.series(node.name)
        fixed = frozenset(
            (m.label, m.value) for m in node.matchers if m.op == "=" and m.value != ""
        )
        value = Value(kind, value.labels, value.unknown, value.names, fixed)
        for matcher in node.matchers:
            self.need(value, matcher.label, "matches on")
        return value

    def series(self, name: str) -> Value:
        """The labels the series `name` carries, served or recorded."""
        names = frozenset({name})
        if name in self.served.family_of:
            labels = self.served.series_labels(name)
            own = set() if labels is None else labels
            carried = own | set(TARGET_LABELS)
            # A label the scrape target sets too is kept as exported_<label> (honor_labels off).
            carried |= {f"exported_{label}" for label in TARGET_LABELS if label in own}
            unknown = names if labels is None else frozenset()
            return Value("vector", frozenset(carried), unknown, names)
        if name in self.rules:
            return self.rule(name)
        hint = ""
        if name in self.served.types:
            served_as = ", ".join(sorted(s for s, f in self.served.family_of.items() if f == name))
            hint = f" (its {self.served.types[name]} family is served as {served_as})"
        else:
            close = difflib.get_close_matches(name, [*self.served.family_of, *self.rules], n=1)
            hint = f" (did you mean `{close[0]}`?)" if close else ""
        self.problem(f"`{name}` is served by no /metrics text and recorded by no rule{hint}")
        self.missing.add(name)
        return Value("vector", frozenset(TARGET_LABELS), names, names)

    def rule(self, record: str) -> Value:
        """The labels of the series a recording rule writes: those its expression keeps."""
        if record in self.rule_values:
            return self.rule_values[record]
        names = frozenset({record})
        if record in self.resolving:
            self.problem(f"recording rule `{record}` reads itself")
            return Value("vector", unknown=names, names=names)
        self.resolving.add(record)
        saved = self.where
        labels: set[str] = set()
        unknown = False
        for expr, where, static in self.rules[record]:
            self.where = f"{where}: {' '.join(expr.split())}"
            try:
                inner = self.value(parse_promql(expr))
            except ParseError as err:
                self.problem(f"does not parse: {err}")
                inner = Value("vector", unknown=names)
            if not inner.vector():
                self.problem("a recording rule must yield an instant vector")
            labels |= inner.labels | set(static)
            unknown = unknown or bool(inner.unknown)
        self.where = saved
        self.resolving.discard(record)
        value = Value("vector", frozenset(labels), names if unknown else frozenset(), names)
        self.rule_values[record] = value
        return value

    def call(self, node: Call) -> Value:
        func = node.func
        args = [self.value(arg) for arg in node.args]
        vectors = [arg for arg in args if arg.vector()]
        first = vectors[0] if vectors else Value("vector")
        if func in RANGE_FUNCTIONS and not any(arg.kind == "matrix" for arg in args):
            self.problem(f"{func}() needs a range vector, such as x[5m]")
        if func in ("time", "pi", "scalar"):
            return Value("scalar")
        if func == "vector":
            return Value("vector", names=first.names)
        if func in ("absent", "absent_over_time"):
            equal: set[str] = set()
            if node.args and isinstance(node.args[0], Selector):
                equal = {m.label for m in node.args[0].matchers if m.op == "="}
            return Value("vector", frozenset(equal - {"__name__"}), frozenset(), first.names)
        if func == "histogram_quantile":
            self.need(first, "le", "histogram_quantile needs")
            return first.derive(first.labels - {"le"})
        if func in ("label_replace", "label_join"):
            texts = [arg.text if isinstance(arg, Constant) else None for arg in node.args[1:]]
            strings = [text for text in texts if text is not None]
            if not vectors or len(strings) != len(texts) or len(strings) < 2:
                self.problem(f"{func}() takes a vector and string literals")
                return first
            # label_replace(v, dst, replacement, src, regex); label_join(v, dst, sep, src...)
            sources = strings[2:3] if func == "label_replace" else strings[2:]
            for source in sources:
                self.need(first, source, f"{func} reads")
            unfixed = frozenset(pair for pair in first.fixed if pair[0] != strings[0])
            return first.derive(first.labels | {strings[0]}, fixed=unfixed)
        if func in ("sort_by_label", "sort_by_label_desc"):
            for arg in node.args[1:]:
                if isinstance(arg, Constant) and arg.kind == "string":
                    self.need(first, arg.text, f"{func} sorts by")
            return first.derive(first.labels)
        if func not in LABEL_KEEPING_FUNCTIONS:
            self.problem(f"unknown function {func}()")
        elif not vectors and func not in TIME_FUNCTIONS:
            self.problem(f"{func}() needs a vector argument")
        return first.derive(first.labels)

    def aggregate(self, node: Aggregate) -> Value:
        if node.param is not None:
            self.value(node.param)
        inner = self.value(node.expr)
        if inner.kind != "vector":
            self.problem(f"{node.op}() needs an instant vector")
        clause = "without" if node.without else "by"
        grouping = set(node.grouping or ())
        for label in sorted(grouping):
            self.need(inner, label, f"{node.op} {clause} (...) groups by")
        extra: set[str] = set()
        if node.op == "count_values" and isinstance(node.param, Constant):
            extra.add(node.param.text)
        if node.op in KEEP_LABELS:
            return inner.derive(inner.labels)
        kept = inner.labels - grouping if node.without else grouping
        if (
            node.op in COMBINING
            and inner.has(APART)
            and APART not in kept
            and not inner.fixes(APART)
        ):
            self.problem(
                f"{node.op} combines the series of every `{APART}`: declared (adapter) and "
                f"derived calls are never summed together; keep `{APART}` in by (...) or match "
                f'{APART}="adapter"'
            )
        if node.without:
            return inner.derive(kept | extra)
        if not inner.unknown:
            kept &= inner.labels
        fixed = frozenset(pair for pair in inner.fixed if pair[0] in kept)
        return Value("vector", frozenset(kept | extra), frozenset(), inner.names, fixed)

    def binary(self, node: Binary) -> Value:
        lhs, rhs = self.value(node.lhs), self.value(node.rhs)
        if not lhs.vector() or not rhs.vector():
            if node.op in SET_OPERATORS:
                self.problem(f"`{node.op}` needs a vector on both sides")
            elif node.on is not None or node.group is not None:
                self.problem("on/ignoring/group_left/group_right need a vector on both sides")
            return lhs if lhs.vector() else rhs
        names = lhs.names | rhs.names
        for label in node.matching:
            if node.on:
                self.need(lhs, label, "`on` matches the left-hand side by")
                self.need(rhs, label, "`on` matches the right-hand side by")
            else:
                either = Value("vector", lhs.labels | rhs.labels, lhs.unknown | rhs.unknown, names)
                self.need(either, label, "`ignoring` leaves out")
        unknown = lhs.unknown | rhs.unknown
        matched_apart = APART in node.matching if node.on else APART not in node.matching
        if (
            node.on is not None
            and lhs.has(APART)
            and rhs.has(APART)
            and not matched_apart
            and not (lhs.fixes(APART) and rhs.fixes(APART))
        ):
            self.problem(
                f"`{node.op}` matches series of different `{APART}`s: declared (adapter) and "
                f"derived calls are never compared or combined; match on ({APART}, ...) too"
            )
        if node.group is not None:
            many, one = (lhs, rhs) if node.group == "left" else (rhs, lhs)
            for label in node.include:
                self.need(one, label, f"group_{node.group} copies")
            copied = frozenset(pair for pair in one.fixed if pair[0] in node.include)
            return many.derive(many.labels | set(node.include), names, many.fixed | copied)
        if node.op == "or":
            both = lhs.fixed & rhs.fixed
            return Value("vector", lhs.labels | rhs.labels, unknown, names, both)
        if node.op in ("and", "unless"):
            return lhs.derive(lhs.labels, names)
        # One-to-one: a result series matched one series of each side.
        fixed = lhs.fixed | rhs.fixed
        if node.on:
            # Prometheus keeps only the `on` labels.
            on = frozenset(node.matching)
            kept = frozenset(pair for pair in fixed if pair[0] in on)
            return Value("vector", on, frozenset(), names, kept)
        if node.on is False:
            return Value("vector", lhs.labels - set(node.matching), lhs.unknown, names, fixed)
        # Every label must match: a result series carries only labels both sides can carry.
        if unknown:
            return Value("vector", lhs.labels | rhs.labels, unknown, names, fixed)
        return Value("vector", lhs.labels & rhs.labels, frozenset(), names, fixed)


# ---------------------------------------------------------------------------------------------
# Grafana

# What the built-in variables become: an interval, or a number.
BUILTIN_VARIABLES = {
    "__rate_interval": "5m",
    "__interval": "5m",
    "__range": "5m",
    "__range_s": "300",
    "__range_ms": "300000",
    "__interval_ms": "300000",
    "__rate_interval_ms": "300000",
    "__from": "1700000000000",
    "__to": "1700000300000",
}
VARIABLE = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\[\[(\w+)(?::[^\]]*)?\]\]|\$(\w+)")
# What a dashboard variable becomes inside a string: a regex that matches anything.
ANY_VALUE = ".*"


def substitute(text: str, variables: dict[str, str | None]) -> tuple[str | None, list[str]]:
    """`text` with its Grafana variables replaced, and what could not be replaced.

    `variables` maps the dashboard's variables to their single current value (None if none):
    inside a string literal a variable becomes `.*`, outside one its current value. `$1` and
    the like (a regex's group in label_replace) are left as they are. The text is None when a
    variable outside a string could not be replaced: the query cannot be read.
    """
    out: list[str] = []
    errors: list[str] = []
    readable = True
    quote = ""
    pos = 0
    while pos < len(text):
        char = text[pos]
        found = VARIABLE.match(text, pos) if char in "$[" else None
        name = next((group for group in found.groups() if group), "") if found else ""
        if found is None or name[0].isdigit():
            if quote and char == "\\" and quote != "`":
                out.append(text[pos : pos + 2])
                pos += 2
                continue
            if char in "\"'`" and (not quote or char == quote):
                quote = "" if quote else char
            out.append(char)
            pos += 1
            continue
        pos = found.end()
        if name in BUILTIN_VARIABLES:
            out.append(BUILTIN_VARIABLES[name])
        elif name not in variables:
            errors.append(f"`{found.group()}` is no variable of the dashboard")
            out.append(ANY_VALUE)
            readable = readable and bool(quote)
        elif quote:
            out.append(ANY_VALUE)
        elif (current := variables[name]) is not None:
            out.append(current)
        else:
            errors.append(f"`{found.group()}` has no single value to put outside a string")
            readable = False
    return ("".join(out) if readable else None), errors


def current_value(variable: dict[str, object]) -> str | None:
    """A variable's current value, when it is one plain word."""
    current = variable.get("current")
    value = current.get("value") if isinstance(current, dict) else None
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, str) and re.fullmatch(r"[\w:.]+", value):
        return value
    return None


def objects(items: object) -> list[dict[str, object]]:
    """The JSON objects of a JSON list (anything else: none)."""
    if not isinstance(items, list):
        return []
    return [item for item in items if isinstance(item, dict)]


def panels_of(items: object) -> Iterator[dict[str, object]]:
    """Every panel, those inside rows included."""
    for panel in objects(items):
        yield panel
        yield from panels_of(panel.get("panels"))


def is_prometheus(query: dict[str, object], default: bool) -> bool:
    """Whether a target, annotation or variable queries Prometheus (as far as it says)."""
    source = query.get("datasource")
    if isinstance(source, dict) and isinstance(source.get("type"), str):
        return source.get("type") == "prometheus"
    return default


def check_dashboard(checker: Checker, path: str, dashboard: dict[str, object]) -> int:
    """Checks every query of one dashboard; returns how many it checked."""
    name = Path(path).name
    templating = dashboard.get("templating")
    variables = objects(templating.get("list")) if isinstance(templating, dict) else []
    values = {str(v.get("name")): current_value(v) for v in variables}
    queries = 0

    def check(where: str, raw: str, legend: str, variable: bool) -> None:
        nonlocal queries
        expr, errors = substitute(raw, values)
        checker.where = f"{where}: {raw}"
        for error in errors:
            checker.problem(error)
        if expr is None:
            queries += 1
            return
        if variable:
            queries += checker.check_variable(where, expr, raw)
        else:
            checker.check(where, expr, legend, raw)
            queries += 1

    for panel in panels_of(dashboard.get("panels")):
        title = panel.get("title") or f"panel {panel.get('id')}"
        panel_prometheus = is_prometheus(panel, True)
        for target in objects(panel.get("targets")):
            expr, legend = target.get("expr"), target.get("legendFormat")
            if isinstance(expr, str) and expr.strip() and is_prometheus(target, panel_prometheus):
                legend_text = legend if isinstance(legend, str) else ""
                check(f"{title} [{name}]", expr, legend_text, False)
    for variable in variables:
        query = variable.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if (
            variable.get("type") == "query"
            and isinstance(query, str)
            and is_prometheus(variable, True)
        ):
            check(f"variable {variable.get('name')} [{name}]", query, "", True)
    annotations = dashboard.get("annotations")
    for annotation in objects(annotations.get("list") if isinstance(annotations, dict) else None):
        expr = annotation.get("expr")
        if isinstance(expr, str) and expr.strip() and is_prometheus(annotation, False):
            check(f"annotation {annotation.get('name')} [{name}]", expr, "", False)
    return queries


# ---------------------------------------------------------------------------------------------
# Input


@dataclass(frozen=True)
class Spec:
    dashboards: list[str]
    rules: list[str]
    metrics: list[str]


def strings(spec: dict[str, object], key: str, required: bool) -> list[str]:
    value = spec.get(key, None if required else [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InputError(f"spec: {key!r} must be a list of strings")
    return [str(item) for item in value]


def read_spec(text: str) -> Spec:
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"spec on stdin is not JSON: {err}") from err
    if not isinstance(spec, dict):
        raise InputError("spec on stdin must be a JSON object")
    return Spec(
        strings(spec, "dashboards", True),
        strings(spec, "rules", False),
        strings(spec, "metrics", True),
    )


def read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"cannot read {path}: {err}") from err


def load_dashboard(path: str) -> dict[str, object]:
    try:
        dashboard = json.loads(read(path))
    except json.JSONDecodeError as err:
        raise InputError(f"{path} is not JSON: {err}") from err
    if not isinstance(dashboard, dict) or not isinstance(dashboard.get("panels"), list):
        raise InputError(f"{path} is no Grafana dashboard (no panels)")
    return dashboard


def load_rules(paths: Sequence[str]) -> dict[str, list[Rule]]:
    """The recording rules of Prometheus rule files (or of PrometheusRule objects), by record."""
    rules: dict[str, list[Rule]] = {}
    for path in paths:
        try:
            document = yaml.safe_load(read(path))
        except yaml.YAMLError as err:
            raise InputError(f"{path} is not YAML: {err}") from err
        if isinstance(document, dict) and isinstance(document.get("spec"), dict):
            document = document["spec"]
        groups = document.get("groups") if isinstance(document, dict) else None
        if not isinstance(groups, list):
            raise InputError(f"{path} has no rule groups")
        for group in groups:
            rule_list = group.get("rules") if isinstance(group, dict) else None
            if not isinstance(rule_list, list):
                raise InputError(f"{path}: a group without rules")
            for rule in rule_list:
                if not isinstance(rule, dict) or "expr" not in rule:
                    raise InputError(f"{path}: a rule without expr")
                record = rule.get("record")
                if record is None:
                    continue
                labels = rule.get("labels") or {}
                if not isinstance(record, str) or not isinstance(labels, dict):
                    raise InputError(f"{path}: bad recording rule {record!r}")
                static = {str(key): str(value) for key, value in labels.items()}
                where = f"rule {record} [{Path(path).name}]"
                rules.setdefault(record, []).append((str(rule["expr"]), where, static))
    return rules


def unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def main() -> int:
    try:
        spec = read_spec(sys.stdin.read())
        served = Served()
        for index, text in enumerate(spec.metrics):
            parse_exposition(text, served, f"metrics[{index}]")
        rules = load_rules(spec.rules)
        dashboards = [(path, load_dashboard(path)) for path in spec.dashboards]
    except InputError as err:
        print(f"grafana_queries: {err}", file=sys.stderr)
        return 2
    checker = Checker(served, rules)
    for record in rules:
        checker.rule(record)
    queries = sum(check_dashboard(checker, path, dashboard) for path, dashboard in dashboards)
    findings = checker.findings
    answer = {
        "queries": queries,
        "problems": unique(findings.problems),
        "unchecked": unique(findings.unchecked),
    }
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
