//! An answer: rows, what they covered, and how they are shown.
//!
//! The rows are named columns of JSON values ([`Rows`]): a question's typed rows under their
//! columns ([`Row`], [`Rows::of`]), or what a SQL statement returned ([`Rows::from_batches`]).
//!
//! - `table`: aligned columns on stdout; the coverage and the class on stderr. By default
//!   ([`Layout::Fit`]) the table is laid out for a person at a terminal of 120 columns: a rate
//!   is a percentage, columns of zeros or of nothing are named on a line instead of shown, times
//!   that fall on one date drop it, and the widest text is cut to fit; [`Layout::Wide`]
//!   (`--wide`) shows every column and every value whole.
//! - `csv`: RFC 4180 on stdout; the coverage on stderr.
//! - `json`: one object on stdout, `{"envelope": …, "coverage": …}`, where the envelope is the
//!   contract's result envelope (`candor-schema`) with the rows as its payload, so a program reads
//!   the answer's class exactly as it reads any tool's.
//!
//! "No failures" is written only for a confirmed empty answer: one whose every source was read
//! across the whole window.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::SystemTime;

use candor_schema::{
    AccessFailureKind, Envelope, EnvelopeParts, Extent, Failure, Outcome, OutcomeClass,
    PartialKind, Provenance, Timestamp, Truncation,
};
use deltalake::arrow::array::{Array, AsArray as _, RecordBatch};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{
    ArrowPrimitiveType, DataType, Float64Type, Int64Type, UInt64Type,
};
use deltalake::arrow::error::ArrowError;
use deltalake::arrow::util::display::{ArrayFormatter, FormatOptions};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::coverage::Coverage;

mod columns;
mod text;

pub use columns::Row;
use columns::or_null;
pub use text::sanitize;
use text::{csv, fitted_table, table};

/// Rows with named columns.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Rows {
    /// Column names, in order.
    pub columns: Vec<String>,
    /// One object per row, keyed by column.
    pub rows: Vec<Map<String, Value>>,
}

impl Rows {
    /// Rows with these columns and no rows yet.
    pub fn new(columns: &[&str]) -> Self {
        Self {
            columns: columns.iter().map(|c| (*c).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row; `values` follow the columns.
    pub fn push(&mut self, values: Vec<Value>) {
        let row = self.columns.iter().cloned().zip(values).collect();
        self.rows.push(row);
    }

    /// Converts DataFusion's record batches: integers, floats and booleans stay numbers and
    /// booleans; everything else (times, strings, binary) is its display text.
    pub fn from_batches(batches: &[RecordBatch]) -> Result<Self, ArrowError> {
        let Some(first) = batches.first() else {
            return Ok(Self::default());
        };
        let schema = first.schema();
        let mut rows = Self {
            columns: schema.fields().iter().map(|f| f.name().clone()).collect(),
            rows: Vec::new(),
        };
        let options = FormatOptions::default().with_null("");
        for batch in batches {
            let columns: Vec<Vec<Value>> = batch
                .columns()
                .iter()
                .map(|array| json_values(array.as_ref(), &options))
                .collect::<Result<_, _>>()?;
            for row in 0..batch.num_rows() {
                rows.push(columns.iter().map(|column| column[row].clone()).collect());
            }
        }
        Ok(rows)
    }
}

/// A column's values as JSON: integers, floats and booleans as themselves, anything else as its
/// display text; null as `null`.
fn json_values(array: &dyn Array, options: &FormatOptions<'_>) -> Result<Vec<Value>, ArrowError> {
    match array.data_type() {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32 => numbers::<Int64Type>(array),
        DataType::UInt64 => numbers::<UInt64Type>(array),
        DataType::Float16 | DataType::Float32 | DataType::Float64 => numbers::<Float64Type>(array),
        DataType::Boolean => {
            let bools = array
                .as_boolean_opt()
                .ok_or_else(|| ArrowError::CastError("not a Boolean array".into()))?;
            Ok(bools.iter().map(or_null).collect())
        }
        _ => {
            let formatter = ArrayFormatter::try_new(array, options)?;
            Ok((0..array.len())
                .map(|i| {
                    if array.is_null(i) {
                        Value::Null
                    } else {
                        Value::from(formatter.value(i).to_string())
                    }
                })
                .collect())
        }
    }
}

/// A numeric column as JSON numbers, cast to `T` first (no copy when it already is `T`).
fn numbers<T: ArrowPrimitiveType>(array: &dyn Array) -> Result<Vec<Value>, ArrowError>
where
    T::Native: Into<Value>,
{
    let numbers = cast(array, &T::DATA_TYPE)?;
    let numbers = numbers
        .as_primitive_opt::<T>()
        .ok_or_else(|| ArrowError::CastError(format!("not a {} array", T::DATA_TYPE)))?;
    Ok(numbers.iter().map(or_null).collect())
}

/// The object `json` writes: the envelope with the rows, the coverage beside it, and the summary.
#[derive(Serialize)]
struct JsonAnswer<'a> {
    coverage: &'a Coverage,
    envelope: Envelope<&'a Rows>,
    summary: &'a [String],
}

/// How to show an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned columns for a person.
    Table,
    /// The contract envelope with the rows, plus the coverage.
    Json,
    /// Comma-separated values with a header.
    Csv,
}

/// The width of text a table fits by default: [`Layout::default`] is `Fit(DEFAULT_WIDTH)`.
pub const DEFAULT_WIDTH: usize = 120;

/// How [`Format::Table`] lays the rows out; CSV and JSON are the same whatever the layout.
///
/// Both say once above the table, `name: value`, what a column holds in every row of an answer
/// of several rows, and show an answer of one row as one `name  value` line per column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// For a person at a terminal this many characters wide (character counts, not display
    /// cells):
    ///
    /// - a float column named `rate` or `…_rate` whose every value lies in 0..=1
    ///   (`silent_failure_rate`, `window_rate`, `baseline_rate`) is a percentage with one
    ///   decimal, `12.5%` (`<0.1%` for a rate above 0 that would read `0.0%`, `>99.9%` below 1
    ///   that would read `100.0%`); `rate_bound` is a word and stays one;
    /// - in an answer of several rows, columns whose every value is 0 or missing are named on
    ///   a `zero: …` line and columns with no value at all on an `empty: …` line, above the
    ///   table, instead of being shown;
    /// - a column of RFC 3339 times in UTC that all fall on one date shows the time of day only
    ///   (`10:05:00`, with the fraction unless every fraction is zero), the date said once above
    ///   the table, `date: 2026-12-07 (UTC)`;
    /// - if the table is still wider than the width, the widest text columns (never numbers
    ///   nor times) are cut, a cut value ending in `…`, until it fits or each is down to 8
    ///   characters; [`Report::render_with`] names them on stderr, with `--wide` to see them
    ///   whole.
    ///
    /// The lines above the table and an answer of one row are not cut.
    Fit(usize),
    /// Every column and every value whole, as wide as they are (`--wide`); numbers as in the
    /// rows, fractions to four places.
    Wide,
}

impl Default for Layout {
    /// `Fit(DEFAULT_WIDTH)`.
    fn default() -> Self {
        Self::Fit(DEFAULT_WIDTH)
    }
}

/// An answer with its coverage, ready to show.
#[derive(Debug, Clone)]
pub struct Report {
    /// The command, as the envelope's tool name (`candor rates`).
    pub command: String,
    /// Where it read (the table root), as the envelope's target.
    pub target: String,
    /// The rows.
    pub rows: Rows,
    /// What was covered.
    pub coverage: Coverage,
    /// Lines a person reads under the rows (summaries of retry outcomes, services, …).
    pub summary: Vec<String>,
    /// What a confirmed empty answer found none of, as a headline: `No failures`, `No spikes`.
    pub nothing: String,
    /// When the question was asked.
    pub started: SystemTime,
}

impl Report {
    /// The class of the answer.
    pub fn class(&self) -> OutcomeClass {
        self.coverage.class(self.rows.rows.len())
    }

    /// The process exit code: 0 rows found, 1 confirmed empty, 3 partial, 4 access failure.
    pub fn exit_code(&self) -> u8 {
        crate::exit_code(self.class())
    }

    /// The contract envelope of this answer, with the rows as payload.
    pub fn envelope(&self) -> Envelope<Rows> {
        self.envelope_with(|| self.rows.clone())
    }

    /// [`Report::envelope`] with the payload `payload` makes, when the class carries one: the
    /// JSON rendering borrows the rows instead of copying them.
    fn envelope_with<P>(&self, payload: impl FnOnce() -> P) -> Envelope<P> {
        let items = u64::try_from(self.rows.rows.len()).unwrap_or(u64::MAX);
        let scope = self.scope();
        let gaps = self.coverage.gaps().join("; ");
        let outcome = match self.class() {
            OutcomeClass::Success => Outcome::Success {
                payload: payload(),
                extent: Extent {
                    items: Some(items),
                    declared_total: None,
                    scope: Some(scope),
                },
            },
            OutcomeClass::Empty => Outcome::Empty {
                extent: Extent {
                    items: Some(0),
                    declared_total: None,
                    scope: Some(scope),
                },
            },
            OutcomeClass::Partial => Outcome::Partial {
                payload: payload(),
                truncation: Truncation {
                    // The answer marks itself as cut off: it says what it did not cover.
                    kind: PartialKind::TruncationMarker,
                    covered: scope,
                    dropped: gaps,
                    returned: Some(items),
                    expected: None,
                },
            },
            OutcomeClass::AccessFailure => Outcome::AccessFailure {
                failure: Failure {
                    kind: AccessFailureKind::Connect,
                    retryable: true,
                    message: gaps,
                    status: None,
                    error_type: None,
                    retry_after_ms: None,
                },
            },
        };
        Envelope::new(EnvelopeParts {
            tool: Arc::from(self.command.as_str()),
            target: Arc::from(self.target.as_str()),
            outcome,
            authority: None,
            provenance: Provenance {
                source_system: Arc::from(self.target.as_str()),
                actor: None,
                adapter: Cow::Borrowed("candor-query"),
                started_at: Timestamp::new(self.started),
                finished_at: Timestamp::new(SystemTime::now()),
            },
            evidence: None,
            attempts: Vec::new(),
            lifecycle: None,
        })
    }

    /// What was read, in one line.
    fn scope(&self) -> String {
        let sources: Vec<String> = self
            .coverage
            .sources
            .iter()
            .filter(|source| source.was_read())
            .map(|source| source.name.clone())
            .collect();
        match self.coverage.window {
            Some(window) => format!(
                "{} to {} in {}",
                crate::window::rfc3339(window.since),
                crate::window::rfc3339(window.until),
                sources.join(", ")
            ),
            None => sources.join(", "),
        }
    }

    /// Renders the rows for stdout, and the coverage lines for stderr (empty for JSON, which
    /// carries the coverage inside); a table in the default [`Layout`], fitted to
    /// [`DEFAULT_WIDTH`].
    pub fn render(&self, format: Format) -> (String, String) {
        self.render_with(format, Layout::default())
    }

    /// [`Report::render`] with a table laid out as `layout` says. A fitted table whose values
    /// were cut says which columns on the first line of stderr.
    pub fn render_with(&self, format: Format, layout: Layout) -> (String, String) {
        match format {
            Format::Json => {
                let body = JsonAnswer {
                    coverage: &self.coverage,
                    envelope: self.envelope_with(|| &self.rows),
                    summary: &self.summary,
                };
                // Written straight from the borrowed rows: no tree of values in between.
                let text = serde_json::to_string_pretty(&body)
                    .unwrap_or_else(|err| format!("{{\"error\": \"{err}\"}}"));
                (text + "\n", String::new())
            }
            Format::Csv => (csv(&self.rows), self.footer()),
            Format::Table => match layout {
                Layout::Wide => (table(&self.rows), self.footer()),
                Layout::Fit(width) => {
                    let fitted = fitted_table(&self.rows, width);
                    let mut err = String::new();
                    if !fitted.shortened.is_empty() {
                        let _ = writeln!(
                            err,
                            "shortened to fit {width} columns: {}; --wide shows every value whole",
                            fitted.shortened.join(", ")
                        );
                    }
                    (fitted.text, err + &self.footer())
                }
            },
        }
    }

    /// The class, what was not covered, the sources and the summary, for a person.
    pub fn footer(&self) -> String {
        let mut out = String::new();
        for line in &self.summary {
            let _ = writeln!(out, "{line}");
        }
        let class = self.class();
        let headline = match class {
            OutcomeClass::Success => format!(
                "{} row(s); every source was read across the whole window.",
                self.rows.rows.len()
            ),
            OutcomeClass::Empty => format!(
                "{}: nothing matched, and every source was read across the whole window.",
                self.nothing
            ),
            OutcomeClass::Partial if self.rows.rows.is_empty() => "PARTIAL: nothing matched in \
                what could be read, but not everything could be; this is NOT a confirmed \
                absence."
                .to_owned(),
            OutcomeClass::Partial => format!(
                "PARTIAL: {} row(s) from what could be read; there may be more.",
                self.rows.rows.len()
            ),
            OutcomeClass::AccessFailure => {
                "ACCESS FAILURE: no source could be read; nothing can be concluded.".to_owned()
            }
        };
        let _ = writeln!(out, "{headline}");
        for gap in self.coverage.gaps() {
            let _ = writeln!(out, "  missing: {gap}");
        }
        for note in &self.coverage.notes {
            let _ = writeln!(out, "  note: {note}");
        }
        for source in &self.coverage.sources {
            let state = match &source.state {
                crate::coverage::SourceState::Read => "read".to_owned(),
                crate::coverage::SourceState::Incomplete { .. } => "read in part".to_owned(),
                crate::coverage::SourceState::Unreachable { .. } => "unreachable".to_owned(),
                crate::coverage::SourceState::Skipped { reason } => format!("skipped ({reason})"),
            };
            let newest = source.newest.map_or_else(String::new, |at| {
                format!(", newest {}", crate::window::rfc3339(at))
            });
            let detail = if source.detail.is_empty() {
                String::new()
            } else {
                format!(", {}", source.detail)
            };
            let _ = writeln!(out, "  source: {} {state}{newest}{detail}", source.name);
        }
        if let Some(until) = self.coverage.covered_until {
            let _ = writeln!(out, "  covered until: {}", crate::window::rfc3339(until));
        }
        // Service names, reasons and notes carry input from senders and brokers.
        out.lines().map(|line| sanitize(line) + "\n").collect()
    }
}

#[cfg(test)]
mod tests {
    use super::text::{is_rate, percent};
    use super::*;
    use crate::commands::{GroupBy, RatesRow};
    use crate::coverage::{Heartbeat, SourceReport};
    use crate::window::Window;

    #[test]
    fn sql_columns_become_json_numbers_booleans_texts_and_nulls() {
        use deltalake::arrow::array::{
            ArrayRef, BooleanArray, Float32Array, Int32Array, StringArray, UInt64Array,
        };
        let batch = RecordBatch::try_from_iter([
            (
                "int",
                Arc::new(Int32Array::from(vec![Some(-3), None])) as ArrayRef,
            ),
            (
                "big",
                Arc::new(UInt64Array::from(vec![Some(u64::MAX), None])) as ArrayRef,
            ),
            (
                "float",
                Arc::new(Float32Array::from(vec![Some(0.5), None])) as ArrayRef,
            ),
            (
                "flag",
                Arc::new(BooleanArray::from(vec![Some(true), None])) as ArrayRef,
            ),
            (
                "text",
                Arc::new(StringArray::from(vec![Some("a"), None])) as ArrayRef,
            ),
        ])
        .unwrap();
        let rows = Rows::from_batches(&[batch]).unwrap();
        assert_eq!(rows.columns, ["int", "big", "float", "flag", "text"]);
        let values = |row: usize| -> Vec<Value> {
            rows.columns
                .iter()
                .map(|column| rows.rows[row][column].clone())
                .collect()
        };
        assert_eq!(
            values(0),
            [
                Value::from(-3),
                Value::from(u64::MAX),
                Value::from(0.5),
                Value::from(true),
                Value::from("a"),
            ]
        );
        assert_eq!(values(1), vec![Value::Null; 5]);
    }

    fn report(rows: Rows, sources: Vec<SourceReport>) -> Report {
        Report {
            command: "candor test".into(),
            target: "/data/tables".into(),
            rows,
            coverage: Coverage::new(
                Some(Window {
                    since: 0,
                    until: 1_000,
                }),
                sources,
                Some(Heartbeat {
                    at: 1_500,
                    interval: 10,
                    from_tail: false,
                }),
                2_000,
            ),
            summary: Vec::new(),
            nothing: "No failures".into(),
            started: SystemTime::now(),
        }
    }

    fn one_row() -> Rows {
        let mut rows = Rows::new(&["target", "rate"]);
        rows.push(vec![Value::from("a,\"b\""), Value::from(0.25)]);
        rows
    }

    #[test]
    fn a_confirmed_empty_answer_says_no_failures_and_a_partial_never_does() {
        let full = report(
            Rows::new(&["target"]),
            vec![SourceReport::read(
                "table t",
                Some(5_000),
                Some(0),
                String::new(),
            )],
        );
        assert_eq!(full.exit_code(), 1);
        assert!(full.footer().contains("No failures"));

        let partial = report(
            Rows::new(&["target"]),
            vec![
                SourceReport::read("table t", Some(5_000), Some(0), String::new()),
                SourceReport::unreachable("kafka t", "connection refused"),
            ],
        );
        assert_eq!(partial.exit_code(), 3);
        let footer = partial.footer();
        assert!(!footer.contains("No failures"), "{footer}");
        assert!(footer.contains("NOT a confirmed absence"), "{footer}");
        assert!(footer.contains("connection refused"), "{footer}");

        let none = report(
            Rows::new(&["target"]),
            vec![SourceReport::unreachable("table t", "missing")],
        );
        assert_eq!(none.exit_code(), 4);
    }

    #[test]
    fn json_is_the_contract_envelope_with_the_coverage_beside_it() {
        let answer = report(
            one_row(),
            vec![SourceReport::read(
                "table t",
                Some(5_000),
                Some(1),
                String::new(),
            )],
        );
        let (out, err) = answer.render(Format::Json);
        assert!(err.is_empty());
        let value: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(value["envelope"]["outcome"]["class"], "success");
        assert_eq!(
            value["envelope"]["outcome"]["payload"]["rows"][0]["rate"],
            0.25
        );
        assert_eq!(value["coverage"]["sources"][0]["state"], "read");
        // The envelope reads back through the contract's own checks.
        let back: Envelope<Value> = serde_json::from_value(value["envelope"].clone()).unwrap();
        assert_eq!(back.class(), OutcomeClass::Success);
    }

    #[test]
    fn a_table_says_once_what_every_row_shares_and_shows_one_row_as_lines() {
        let mut rows = Rows::new(&["bucket_start", "target", "calls", "note"]);
        rows.push(vec![
            Value::from("2026-12-07T00:00:00Z"),
            Value::from("a"),
            Value::from(3),
            Value::Null,
        ]);
        rows.push(vec![
            Value::from("2026-12-07T00:00:00Z"),
            Value::from("bb"),
            Value::from(10),
            Value::Null,
        ]);
        assert_eq!(
            table(&rows),
            "bucket_start: 2026-12-07T00:00:00Z\nnote:\ntarget  calls\na       3\nbb      10\n"
        );
        let mut one = Rows::new(&["target", "calls"]);
        one.push(vec![Value::from("a"), Value::from(3)]);
        assert_eq!(table(&one), "target  a\ncalls   3\n");
        assert_eq!(table(&Rows::new(&["target"])), "target\n");
    }

    #[test]
    fn csv_quotes_and_tables_escape() {
        let answer = report(
            one_row(),
            vec![SourceReport::read(
                "table t",
                Some(5_000),
                Some(1),
                String::new(),
            )],
        );
        let (out, _) = answer.render(Format::Csv);
        assert_eq!(out, "target,rate\n\"a,\"\"b\"\"\",0.25\n");
        let mut hostile = Rows::new(&["target"]);
        hostile.push(vec![Value::from("x\n\u{1b}[2Jfake row")]);
        let shown = table(&hostile);
        assert_eq!(shown.lines().count(), 1, "{shown}");
        assert!(shown.contains("\\n"));
        assert!(!shown.contains('\u{1b}'));
        let fitted = fitted_table(&hostile, 120).text;
        assert_eq!(fitted.lines().count(), 1, "{fitted}");
        assert!(
            fitted.contains("\\n") && !fitted.contains('\u{1b}'),
            "{fitted}"
        );
        let mut hostile_report = answer.clone();
        hostile_report.summary = vec!["services involved: \u{1b}]0;pwned\u{7}x".into()];
        let footer = hostile_report.footer();
        assert!(
            !footer.contains('\u{1b}') && footer.contains("\\u{1b}"),
            "{footer}"
        );
    }

    /// Rows as `candor rates --step 5m` gives them: three buckets of one hour on one date.
    fn rates_rows() -> Rows {
        let mut rows = Rows::new(&RatesRow::columns(GroupBy::Target));
        let row = |target: &str, start: &str, end: &str, counts: [u64; 8], rate: f64| {
            let mut values = vec![
                Value::from(target),
                Value::from("adapter"),
                Value::from(start),
                Value::from(end),
            ];
            values.extend(counts.iter().map(|&count| Value::from(count)));
            values.extend([
                Value::from(rate),
                Value::from("exact"),
                Value::Null,
                Value::from("counter"),
                Value::from(counts[4]),
            ]);
            values
        };
        rows.push(row(
            "https://search.internal.example.com/v1/search?q=a-long-query-string",
            "2026-12-07T10:00:00.000000Z",
            "2026-12-07T10:05:00.000000Z",
            [200, 150, 40, 0, 10, 0, 0, 0],
            0.05,
        ));
        rows.push(row(
            "https://lookup.internal.example.com/v2/customers/by-email",
            "2026-12-07T10:05:00.000000Z",
            "2026-12-07T10:10:00.000000Z",
            [8, 7, 0, 0, 1, 0, 0, 0],
            0.125,
        ));
        rows.push(row(
            "catalog",
            "2026-12-07T10:10:00.000000Z",
            "2026-12-07T10:15:00.000000Z",
            [3000, 3000, 0, 0, 0, 0, 0, 0],
            0.0,
        ));
        rows
    }

    /// `finished_at` is when the answer was rendered: the one field two renders differ in.
    fn without_finish(mut value: Value) -> Value {
        fn strip(value: &mut Value) {
            match value {
                Value::Object(map) => {
                    map.remove("finished_at");
                    map.values_mut().for_each(strip);
                }
                Value::Array(items) => items.iter_mut().for_each(strip),
                _ => {}
            }
        }
        strip(&mut value);
        value
    }

    #[test]
    fn a_rates_table_fits_120_columns_with_rates_as_percentages_and_zero_columns_named() {
        let answer = report(
            rates_rows(),
            vec![SourceReport::read(
                "table t",
                Some(5_000),
                Some(3),
                String::new(),
            )],
        );
        let (out, err) = answer.render(Format::Table);
        assert!(
            out.lines()
                .all(|line| line.chars().count() <= DEFAULT_WIDTH),
            "{out}"
        );
        // What every row shares, the folded columns and the date, each once above the table,
        // every one as `name: …` (the shape tests/e2e reads past to count the rows).
        let above: Vec<&str> = out
            .lines()
            .take_while(|line| !line.starts_with("target"))
            .collect();
        assert_eq!(
            above,
            [
                "source: adapter",
                "rate_bound: exact",
                "denominator: counter",
                "zero: partial, unverified, cancelled, accepted",
                "empty: sampling",
                "date: 2026-12-07 (UTC)",
            ],
            "{out}"
        );
        let table: Vec<Vec<&str>> = out
            .lines()
            .skip(above.len())
            .map(|line| line.split_whitespace().collect())
            .collect();
        assert_eq!(
            table[0],
            [
                "target",
                "bucket_start",
                "bucket_end",
                "calls",
                "success",
                "empty",
                "access_failure",
                "silent_failure_rate",
                "failure_events",
            ],
            "{out}"
        );
        assert_eq!(
            table[1..],
            [
                [
                    "https://search.in…",
                    "10:00:00",
                    "10:05:00",
                    "200",
                    "150",
                    "40",
                    "10",
                    "5.0%",
                    "10"
                ],
                [
                    "https://lookup.in…",
                    "10:05:00",
                    "10:10:00",
                    "8",
                    "7",
                    "0",
                    "1",
                    "12.5%",
                    "1"
                ],
                [
                    "catalog", "10:10:00", "10:15:00", "3000", "3000", "0", "0", "0.0%", "0"
                ],
            ],
            "{out}"
        );
        assert!(
            err.starts_with(
                "shortened to fit 120 columns: target; --wide shows every value whole\n"
            ),
            "{err}"
        );
        // The same answer, wide: every column and every value whole.
        let (wide, wide_err) = answer.render_with(Format::Table, Layout::Wide);
        assert!(
            wide.contains("https://search.internal.example.com/v1/search?q=a-long-query-string")
                && wide.contains("2026-12-07T10:05:00.000000Z")
                && wide.contains("0.1250")
                && wide.contains("partial: 0\n"),
            "{wide}"
        );
        assert!(!wide_err.contains("shortened"), "{wide_err}");
    }

    #[test]
    fn wide_is_the_layout_of_before_and_fitted_folds_zeros_times_and_rates() {
        let mut rows = Rows::new(&["target", "bucket_start", "partial", "rate"]);
        rows.push(vec![
            Value::from("a"),
            Value::from("2026-12-07T10:00:00.000000Z"),
            Value::from(0),
            Value::from(0.25),
        ]);
        rows.push(vec![
            Value::from("bb"),
            Value::from("2026-12-07T10:05:00.000000Z"),
            Value::from(0),
            Value::from(0.5),
        ]);
        let answer = report(
            rows,
            vec![SourceReport::read(
                "table t",
                Some(5_000),
                Some(2),
                String::new(),
            )],
        );
        assert_eq!(
            answer.render_with(Format::Table, Layout::Wide).0,
            "partial: 0\n\
             target  bucket_start                 rate\n\
             a       2026-12-07T10:00:00.000000Z  0.2500\n\
             bb      2026-12-07T10:05:00.000000Z  0.5000\n"
        );
        assert_eq!(
            answer.render(Format::Table).0,
            "zero: partial\n\
             date: 2026-12-07 (UTC)\n\
             target  bucket_start  rate\n\
             a       10:00:00      25.0%\n\
             bb      10:05:00      50.0%\n"
        );
        assert_eq!(
            answer.render(Format::Table),
            answer.render_with(Format::Table, Layout::Fit(DEFAULT_WIDTH))
        );
        // One row: one line per column, the rate a percentage.
        let mut one = Rows::new(&["target", "rate"]);
        one.push(vec![Value::from("a"), Value::from(0.25)]);
        assert_eq!(fitted_table(&one, 120).text, "target  a\nrate    25.0%\n");
        assert_eq!(table(&one), "target  a\nrate    0.2500\n");
    }

    #[test]
    fn csv_and_json_are_the_same_in_every_layout() {
        let answer = report(
            rates_rows(),
            vec![SourceReport::read(
                "table t",
                Some(5_000),
                Some(3),
                String::new(),
            )],
        );
        let (csv_out, csv_err) = answer.render_with(Format::Csv, Layout::Wide);
        assert_eq!(
            (csv_out.clone(), csv_err.clone()),
            answer.render_with(Format::Csv, Layout::Fit(20))
        );
        assert_eq!((csv_out.clone(), csv_err), answer.render(Format::Csv));
        assert!(
            csv_out.starts_with(
                "target,source,bucket_start,bucket_end,calls,success,empty,partial,\
                 access_failure,unverified,cancelled,accepted,silent_failure_rate,rate_bound,\
                 sampling,denominator,failure_events\n\
                 https://search.internal.example.com/v1/search?q=a-long-query-string,adapter,\
                 2026-12-07T10:00:00.000000Z,2026-12-07T10:05:00.000000Z,200,150,40,0,10,0,0,0,\
                 0.05,exact,,counter,10\n"
            ),
            "{csv_out}"
        );
        let json = |layout: Layout| {
            let (out, err) = answer.render_with(Format::Json, layout);
            assert!(err.is_empty());
            without_finish(serde_json::from_str(&out).unwrap())
        };
        let wide = json(Layout::Wide);
        assert_eq!(wide, json(Layout::Fit(20)));
        assert_eq!(
            wide["envelope"]["outcome"]["payload"]["rows"][1]["silent_failure_rate"],
            0.125
        );
        assert_eq!(
            wide["envelope"]["outcome"]["payload"]["rows"][0]["target"],
            "https://search.internal.example.com/v1/search?q=a-long-query-string"
        );
    }

    #[test]
    fn only_rates_are_percentages_and_only_times_of_one_utc_date_are_shortened() {
        assert_eq!(percent(0.125), "12.5%");
        assert_eq!(percent(0.0), "0.0%");
        assert_eq!(percent(1.0), "100.0%");
        assert_eq!(percent(0.000_4), "<0.1%");
        assert_eq!(percent(0.999_6), ">99.9%");
        assert!(is_rate("rate") && is_rate("window_rate") && is_rate("silent_failure_rate"));
        assert!(!is_rate("rate_bound") && !is_rate("ratelimit") && !is_rate("separate"));

        let mut rows = Rows::new(&["event_time", "at", "factor", "rate", "rate_bound"]);
        rows.push(vec![
            Value::from("2026-12-07T23:59:59.5Z"),
            Value::from("2026-12-07T10:00:00+01:00"),
            Value::from(3.5),
            Value::from(2.0),
            Value::from("exact"),
        ]);
        rows.push(vec![
            Value::from("2026-12-08T00:00:00Z"),
            Value::from("2026-12-07T11:00:00+01:00"),
            Value::from(0.5),
            Value::from(0.5),
            Value::from("lower_bound"),
        ]);
        let shown = fitted_table(&rows, 120).text;
        // Two dates: whole times; not UTC: whole; a factor: four places; a "rate" of 2: not a
        // fraction, so not a percentage.
        assert_eq!(
            shown,
            "event_time              at                         factor  rate    rate_bound\n\
             2026-12-07T23:59:59.5Z  2026-12-07T10:00:00+01:00  3.5000  2.0000  exact\n\
             2026-12-08T00:00:00Z    2026-12-07T11:00:00+01:00  0.5000  0.5000  lower_bound\n"
        );

        let mut same_day = Rows::new(&["event_time", "n"]);
        same_day.push(vec![
            Value::from("2026-12-07T10:00:00.250Z"),
            Value::from(1),
        ]);
        same_day.push(vec![Value::from("2026-12-07T10:00:01Z"), Value::from(2)]);
        same_day.push(vec![Value::Null, Value::from(3)]);
        assert_eq!(
            fitted_table(&same_day, 120).text,
            "date: 2026-12-07 (UTC)\n\
             event_time    n\n\
             10:00:00.250  1\n\
             10:00:01      2\n\
             \x20             3\n"
        );
    }

    #[test]
    fn cut_columns_stop_at_eight_characters_and_numbers_and_times_are_never_cut() {
        let mut rows = Rows::new(&["message", "event_time", "calls"]);
        rows.push(vec![
            Value::from("x".repeat(50)),
            Value::from("2026-12-07T10:00:00Z"),
            Value::from(123_456_789_u64),
        ]);
        rows.push(vec![
            Value::from("short"),
            Value::from("2026-12-07T10:00:01Z"),
            Value::from(1),
        ]);
        let fitted = fitted_table(&rows, 10);
        assert_eq!(fitted.shortened, ["message"]);
        assert_eq!(
            fitted.text,
            "date: 2026-12-07 (UTC)\n\
             message   event_time  calls\n\
             xxxxxxx…  10:00:00    123456789\n\
             short     10:00:01    1\n"
        );
        // Wide enough: nothing cut, nothing said.
        assert!(fitted_table(&rows, 200).shortened.is_empty());
    }
}
