//! The rows as text: aligned columns for a person ([`table`] as it always was, `--wide`;
//! [`fitted_table`] to a terminal's width) and RFC 4180 CSV ([`csv`]).

use std::borrow::Cow;
use std::fmt::Write as _;

use serde_json::Value;

use super::Rows;

/// A value as text; `rounded` shows fractions to four places (for a person).
pub(super) fn cell(value: &Value, rounded: bool) -> String {
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

/// Aligned columns for a person, every value whole ([`Layout::Wide`]); control characters in
/// names and values are shown escaped. A column that holds the same value in every row of an
/// answer of several rows (a one-bucket answer's bucket bounds, say) is said once above the
/// table, `name: value`, instead of in every row; an answer of one row is one `name  value` line
/// per column. JSON and CSV keep every column in every row.
pub(super) fn table(rows: &Rows) -> String {
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
        one_row(&names, only, &mut out);
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
    let widths = column_widths(&kept, &names, &body);
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

/// The narrowest a cut column gets, its `…` included.
const MIN_CUT: usize = 8;

/// A table fitted to a width, and the columns whose values it cut.
#[derive(Debug)]
pub(super) struct Fitted {
    /// The lines above the table, and the table.
    pub(super) text: String,
    /// The names of the columns cut to fit.
    pub(super) shortened: Vec<String>,
}

/// Where a column of an answer of several rows goes in a fitted table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fold {
    /// No value in any row: named on the `empty:` line.
    Empty,
    /// 0 or no value in every row, and 0 in one: named on the `zero:` line.
    Zero,
    /// One value in every row: said once, `name: value`.
    Shared,
    /// A column of the table.
    Kept,
}

/// A missing value, as a `null`.
static NULL: Value = Value::Null;

/// [`table`] for a person at a terminal `width` characters wide: [`Layout::Fit`].
pub(super) fn fitted_table(rows: &Rows, width: usize) -> Fitted {
    let mut out = String::new();
    if rows.columns.is_empty() {
        return Fitted {
            text: out,
            shortened: Vec::new(),
        };
    }
    let names: Vec<String> = rows.columns.iter().map(|name| sanitize(name)).collect();
    let values: Vec<Vec<&Value>> = rows
        .rows
        .iter()
        .map(|row| {
            rows.columns
                .iter()
                .map(|c| row.get(c).unwrap_or(&NULL))
                .collect()
        })
        .collect();
    let rated: Vec<bool> = rows
        .columns
        .iter()
        .enumerate()
        .map(|(i, name)| is_rate(name) && values.iter().all(|row| is_fraction(row[i])))
        .collect();
    let mut body: Vec<Vec<String>> = values
        .iter()
        .map(|row| {
            row.iter()
                .zip(&rated)
                .map(|(&value, &as_rate)| {
                    let text = match value.as_f64() {
                        Some(rate) if as_rate => percent(rate),
                        _ => cell(value, true),
                    };
                    sanitize(&text)
                })
                .collect()
        })
        .collect();
    if let [only] = &body[..] {
        one_row(&names, only, &mut out);
        return Fitted {
            text: out,
            shortened: Vec::new(),
        };
    }
    let folds: Vec<Fold> = (0..names.len())
        .map(|i| {
            if body.len() < 2 {
                Fold::Kept
            } else if values.iter().all(|row| is_blank(row[i])) {
                Fold::Empty
            } else if values.iter().all(|row| is_blank(row[i]) || is_zero(row[i])) {
                Fold::Zero
            } else if body.iter().all(|row| row[i] == body[0][i]) {
                Fold::Shared
            } else {
                Fold::Kept
            }
        })
        .collect();
    for (i, name) in names.iter().enumerate() {
        if folds[i] == Fold::Shared {
            let _ = writeln!(out, "{}", format!("{name}: {}", body[0][i]).trim_end());
        }
    }
    let folded = |fold: Fold| {
        names
            .iter()
            .zip(&folds)
            .filter(|&(_, &f)| f == fold)
            .map(|(name, _)| name.as_str())
            .collect::<Vec<&str>>()
    };
    write_list(&mut out, "zero", &folded(Fold::Zero), width);
    write_list(&mut out, "empty", &folded(Fold::Empty), width);
    let kept: Vec<usize> = (0..names.len())
        .filter(|&i| folds[i] == Fold::Kept)
        .collect();
    if kept.is_empty() {
        return Fitted {
            text: out,
            shortened: Vec::new(),
        };
    }

    // Times: never cut; those of a column on one date without it.
    let mut timed = vec![false; names.len()];
    let mut dates: Vec<(String, Vec<&str>)> = Vec::new();
    for &i in &kept {
        let times: Option<Vec<(&str, &str)>> = body
            .iter()
            .filter(|row| !row[i].is_empty())
            .map(|row| utc_time(&row[i]))
            .collect();
        let Some(times) = times else {
            continue;
        };
        let Some(&(date, _)) = times.first() else {
            continue;
        };
        timed[i] = true;
        if times.iter().any(|&(day, _)| day != date) {
            continue;
        }
        let whole_seconds = times.iter().all(|&(_, time)| {
            time.split_once('.')
                .is_none_or(|(_, fraction)| fraction.bytes().all(|b| b == b'0'))
        });
        let date = date.to_owned();
        for row in &mut body {
            let short = utc_time(&row[i]).map(|(_, time)| {
                let shown = if whole_seconds {
                    time.split_once('.').map_or(time, |(clock, _)| clock)
                } else {
                    time
                };
                shown.to_owned()
            });
            if let Some(short) = short {
                row[i] = short;
            }
        }
        match dates.iter_mut().find(|(day, _)| *day == date) {
            Some((_, columns)) => columns.push(names[i].as_str()),
            None => dates.push((date, vec![names[i].as_str()])),
        }
    }
    match &dates[..] {
        [] => {}
        [(date, _)] => {
            let _ = writeln!(out, "date: {date} (UTC)");
        }
        _ => {
            let each: Vec<String> = dates
                .iter()
                .map(|(date, columns)| format!("{date} in {}", columns.join(", ")))
                .collect();
            let _ = writeln!(out, "date: {} (UTC)", each.join("; "));
        }
    }

    // Cut the widest text columns, a character at a time, until the table fits.
    let natural = column_widths(&kept, &names, &body);
    let cuttable: Vec<bool> = kept
        .iter()
        .map(|&i| {
            !timed[i]
                && values
                    .iter()
                    .all(|row| matches!(row[i], Value::Null | Value::String(_)))
        })
        .collect();
    let mut widths = natural.clone();
    let mut total = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
    while total > width {
        let widest = widths
            .iter()
            .enumerate()
            .filter(|&(k, &w)| cuttable[k] && w > MIN_CUT)
            .max_by_key(|&(_, &w)| w)
            .map(|(k, _)| k);
        let Some(k) = widest else {
            break;
        };
        widths[k] -= 1;
        total -= 1;
    }
    let shortened: Vec<String> = kept
        .iter()
        .zip(widths.iter().zip(&natural))
        .filter(|&(_, (w, n))| w < n)
        .map(|(&i, _)| names[i].clone())
        .collect();
    let line = |texts: Vec<&String>, out: &mut String| {
        let padded: Vec<String> = texts
            .into_iter()
            .zip(&widths)
            .map(|(text, &width)| {
                let text = cut(text, width);
                format!("{text:<width$}")
            })
            .collect();
        let _ = writeln!(out, "{}", padded.join("  ").trim_end());
    };
    line(kept.iter().map(|&i| &names[i]).collect(), &mut out);
    for row in &body {
        line(kept.iter().map(|&i| &row[i]).collect(), &mut out);
    }
    Fitted {
        text: out,
        shortened,
    }
}

/// Whether a column holds a rate: named `rate` or `…_rate` (`silent_failure_rate`,
/// `window_rate`). `rate_bound` is not: it says what kind of rate a row has.
pub(super) fn is_rate(name: &str) -> bool {
    name == "rate" || name.ends_with("_rate")
}

/// Whether a value can be a rate: a float in 0..=1, or missing.
fn is_fraction(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Number(number) => {
            number.is_f64() && number.as_f64().is_some_and(|f| (0.0..=1.0).contains(&f))
        }
        _ => false,
    }
}

/// A rate in 0..=1 as a percentage with one decimal; never `0.0%` above 0 nor `100.0%` below 1.
pub(super) fn percent(rate: f64) -> String {
    let shown = format!("{:.1}%", rate * 100.0);
    if rate > 0.0 && shown == "0.0%" {
        "<0.1%".to_owned()
    } else if rate < 1.0 && shown == "100.0%" {
        ">99.9%".to_owned()
    } else {
        shown
    }
}

/// Whether a value is missing: `null` or empty text.
fn is_blank(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(text) => text.is_empty(),
        _ => false,
    }
}

/// Whether a value is the number 0.
fn is_zero(value: &Value) -> bool {
    value.as_f64().is_some_and(|number| number == 0.0)
}

/// `text` as an RFC 3339 time in UTC, `2026-12-07T10:05:00.250Z` (or `+00:00`): its date and
/// its time of day, `10:05:00.250`.
fn utc_time(text: &str) -> Option<(&str, &str)> {
    let rest = text
        .strip_suffix('Z')
        .or_else(|| text.strip_suffix("+00:00"))?;
    let (date, time) = rest.split_once('T')?;
    let (clock, fraction) = time.split_once('.').unwrap_or((time, "0"));
    let shaped = |text: &str, pattern: &str| {
        text.len() == pattern.len()
            && text.bytes().zip(pattern.bytes()).all(|(b, p)| match p {
                b'9' => b.is_ascii_digit(),
                other => b == other,
            })
    };
    let digits = !fraction.is_empty() && fraction.bytes().all(|b| b.is_ascii_digit());
    (shaped(date, "9999-99-99") && shaped(clock, "99:99:99") && digits).then_some((date, time))
}

/// `text` cut to `width` characters, ending in `…` when it was longer.
fn cut(text: &str, width: usize) -> Cow<'_, str> {
    if text.chars().count() <= width {
        Cow::Borrowed(text)
    } else {
        let mut short: String = text.chars().take(width.saturating_sub(1)).collect();
        short.push('…');
        Cow::Owned(short)
    }
}

/// `label: a, b, c` lines naming `names`, each line at most `width` characters unless one name
/// is longer; nothing without names.
fn write_list(out: &mut String, label: &str, names: &[&str], width: usize) {
    let mut line = String::new();
    for name in names {
        if line.is_empty() {
            line = format!("{label}: {name}");
        } else if line.chars().count() + 2 + name.chars().count() <= width {
            line.push_str(", ");
            line.push_str(name);
        } else {
            let _ = writeln!(out, "{line}");
            line = format!("{label}: {name}");
        }
    }
    if !line.is_empty() {
        let _ = writeln!(out, "{line}");
    }
}

/// The width of each of the `kept` columns: its widest value, or its name when that is wider.
fn column_widths(kept: &[usize], names: &[String], body: &[Vec<String>]) -> Vec<usize> {
    kept.iter()
        .map(|&i| {
            body.iter()
                .map(|row| row[i].chars().count())
                .chain([names[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect()
}

/// An answer of one row: one `name  value` line per column, the values aligned.
fn one_row(names: &[String], values: &[String], out: &mut String) {
    let width = names
        .iter()
        .map(|name| name.chars().count())
        .max()
        .unwrap_or(0);
    for (name, value) in names.iter().zip(values) {
        let _ = writeln!(out, "{}", format!("{name:<width$}  {value}").trim_end());
    }
}

pub(super) fn csv(rows: &Rows) -> String {
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
