//! An answer: rows, what they covered, and how they are shown.
//!
//! - `table`: aligned columns on stdout; the coverage and the class on stderr.
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
use deltalake::arrow::array::{Array, RecordBatch};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::DataType;
use deltalake::arrow::error::ArrowError;
use deltalake::arrow::util::display::{ArrayFormatter, FormatOptions};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::coverage::Coverage;

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

fn json_values(array: &dyn Array, options: &FormatOptions<'_>) -> Result<Vec<Value>, ArrowError> {
    let len = array.len();
    let nulls = |values: Vec<Value>| -> Vec<Value> {
        values
            .into_iter()
            .enumerate()
            .map(|(i, v)| if array.is_null(i) { Value::Null } else { v })
            .collect()
    };
    match array.data_type() {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32 => {
            let ints = cast(array, &DataType::Int64)?;
            let ints = ints
                .as_any()
                .downcast_ref::<deltalake::arrow::array::Int64Array>()
                .ok_or_else(|| ArrowError::CastError("not an Int64 array".into()))?;
            Ok(nulls(
                (0..len).map(|i| Value::from(ints.value(i))).collect(),
            ))
        }
        DataType::UInt64 => {
            let ints = array
                .as_any()
                .downcast_ref::<deltalake::arrow::array::UInt64Array>()
                .ok_or_else(|| ArrowError::CastError("not a UInt64 array".into()))?;
            Ok(nulls(
                (0..len).map(|i| Value::from(ints.value(i))).collect(),
            ))
        }
        DataType::Float16 | DataType::Float32 | DataType::Float64 => {
            let floats = cast(array, &DataType::Float64)?;
            let floats = floats
                .as_any()
                .downcast_ref::<deltalake::arrow::array::Float64Array>()
                .ok_or_else(|| ArrowError::CastError("not a Float64 array".into()))?;
            Ok(nulls(
                (0..len).map(|i| Value::from(floats.value(i))).collect(),
            ))
        }
        DataType::Boolean => {
            let bools = array
                .as_any()
                .downcast_ref::<deltalake::arrow::array::BooleanArray>()
                .ok_or_else(|| ArrowError::CastError("not a Boolean array".into()))?;
            Ok(nulls(
                (0..len).map(|i| Value::from(bools.value(i))).collect(),
            ))
        }
        _ => {
            let formatter = ArrayFormatter::try_new(array, options)?;
            Ok(nulls(
                (0..len)
                    .map(|i| Value::from(formatter.value(i).to_string()))
                    .collect(),
            ))
        }
    }
}

/// How to show an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns for a person.
    Table,
    /// The contract envelope with the rows, plus the coverage.
    Json,
    /// Comma-separated values with a header.
    Csv,
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
        let items = u64::try_from(self.rows.rows.len()).unwrap_or(u64::MAX);
        let scope = self.scope();
        let gaps = self.coverage.gaps().join("; ");
        let outcome = match self.class() {
            OutcomeClass::Success => Outcome::Success {
                payload: self.rows.clone(),
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
                payload: self.rows.clone(),
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
    /// carries the coverage inside).
    pub fn render(&self, format: Format) -> (String, String) {
        match format {
            Format::Json => {
                let body = serde_json::json!({
                    "envelope": self.envelope(),
                    "coverage": self.coverage,
                    "summary": self.summary,
                });
                let text = serde_json::to_string_pretty(&body)
                    .unwrap_or_else(|err| format!("{{\"error\": \"{err}\"}}"));
                (text + "\n", String::new())
            }
            Format::Csv => (csv(&self.rows), self.footer()),
            Format::Table => (table(&self.rows), self.footer()),
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

/// A value as text; `rounded` shows fractions to four places (for a person).
fn cell(value: &Value, rounded: bool) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        Value::Number(number) => match number.as_f64() {
            Some(float) if rounded && number.is_f64() => format!("{float:.4}"),
            _ => number.to_string(),
        },
        other => other.to_string(),
    }
}

/// `text` with control characters escaped, so that a value from a sender cannot move the
/// terminal's cursor, change its colours or fake a line.
pub fn sanitize(text: &str) -> String {
    if text.chars().any(char::is_control) {
        text.chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect()
    } else {
        text.to_owned()
    }
}

/// Aligned columns for a person at a terminal; control characters in names and values are shown
/// escaped. A column that holds the same value in every row of an answer of several rows (a
/// one-bucket answer's bucket bounds, say) is said once above the table, `name: value`, instead
/// of in every row; an answer of one row is one `name  value` line per column. JSON and CSV keep
/// every column in every row.
fn table(rows: &Rows) -> String {
    let mut out = String::new();
    if rows.columns.is_empty() {
        return out;
    }
    let names: Vec<String> = rows.columns.iter().map(|name| sanitize(name)).collect();
    let body: Vec<Vec<String>> = rows
        .rows
        .iter()
        .map(|row| {
            rows.columns
                .iter()
                .map(|c| sanitize(&row.get(c).map(|v| cell(v, true)).unwrap_or_default()))
                .collect()
        })
        .collect();
    if let [only] = &body[..] {
        let width = names
            .iter()
            .map(|name| name.chars().count())
            .max()
            .unwrap_or(0);
        for (name, value) in names.iter().zip(only) {
            let _ = writeln!(out, "{}", format!("{name:<width$}  {value}").trim_end());
        }
        return out;
    }
    let shared: Vec<bool> = (0..names.len())
        .map(|i| body.len() >= 2 && body.iter().all(|row| row[i] == body[0][i]))
        .collect();
    for (i, name) in names.iter().enumerate().filter(|(i, _)| shared[*i]) {
        let _ = writeln!(out, "{}", format!("{name}: {}", body[0][i]).trim_end());
    }
    let kept: Vec<usize> = (0..names.len()).filter(|i| !shared[*i]).collect();
    if kept.is_empty() {
        return out;
    }
    let widths: Vec<usize> = kept
        .iter()
        .map(|&i| {
            body.iter()
                .map(|row| row[i].chars().count())
                .chain([names[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<&String>, out: &mut String| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(text, width)| format!("{text:<width$}"))
            .collect();
        let _ = writeln!(out, "{}", padded.join("  ").trim_end());
    };
    line(kept.iter().map(|&i| &names[i]).collect(), &mut out);
    for row in &body {
        line(kept.iter().map(|&i| &row[i]).collect(), &mut out);
    }
    out
}

fn csv(rows: &Rows) -> String {
    let quote = |text: String| -> String {
        if text.contains([',', '"', '\n', '\r']) {
            format!("\"{}\"", text.replace('"', "\"\""))
        } else {
            text
        }
    };
    let mut out = String::new();
    let header: Vec<String> = rows.columns.iter().cloned().map(quote).collect();
    let _ = writeln!(out, "{}", header.join(","));
    for row in &rows.rows {
        let cells: Vec<String> = rows
            .columns
            .iter()
            .map(|c| quote(row.get(c).map(|v| cell(v, false)).unwrap_or_default()))
            .collect();
        let _ = writeln!(out, "{}", cells.join(","));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coverage::{Heartbeat, SourceReport};
    use crate::window::Window;

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
        let mut hostile_report = answer.clone();
        hostile_report.summary = vec!["services involved: \u{1b}]0;pwned\u{7}x".into()];
        let footer = hostile_report.footer();
        assert!(
            !footer.contains('\u{1b}') && footer.contains("\\u{1b}"),
            "{footer}"
        );
    }
}
