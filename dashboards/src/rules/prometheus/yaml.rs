//! A writer for the one shape of YAML a Prometheus rules file has: comments, keys with plain,
//! double-quoted, literal (`|`) and folded (`>-`) values, and prose wrapped at [`WIDTH`] columns.
//! Also the numbers and durations the rules are written with.

use std::fmt::Write as _;

use candor_query::window::Micros;

/// Where comments and folded text wrap.
const WIDTH: usize = 96;

/// The text written so far.
#[derive(Debug, Default)]
pub(super) struct Yaml {
    out: String,
}

impl Yaml {
    /// The document.
    pub(super) fn finish(self) -> String {
        self.out
    }

    /// One line, `indent` spaces in.
    pub(super) fn line(&mut self, indent: usize, text: &str) {
        let _ = writeln!(self.out, "{:indent$}{text}", "");
    }

    /// An empty line.
    pub(super) fn blank(&mut self) {
        self.out.push('\n');
    }

    /// A comment. Each line of `text` is a paragraph wrapped at [`WIDTH`]; an empty line (or an
    /// empty `text`) is an empty comment line, a line that starts with `- ` a list item (wrapped with a hanging
    /// indent), and a line that starts with a space is kept as it is (a table).
    pub(super) fn comment(&mut self, indent: usize, text: &str) {
        let width = WIDTH.saturating_sub(indent + 2);
        if text.is_empty() {
            self.line(indent, "#");
        }
        for paragraph in text.lines() {
            if paragraph.is_empty() {
                self.line(indent, "#");
            } else if paragraph.starts_with(' ') {
                self.line(indent, &format!("#{paragraph}"));
            } else if let Some(item) = paragraph.strip_prefix("- ") {
                for (index, line) in wrap(item, width.saturating_sub(2)).iter().enumerate() {
                    let bullet = if index == 0 { "-" } else { " " };
                    self.line(indent, &format!("# {bullet} {line}"));
                }
            } else {
                for line in wrap(paragraph, width) {
                    self.line(indent, &format!("# {line}"));
                }
            }
        }
    }

    /// `key: value`, the value plain when YAML reads it back unchanged, else a literal block.
    pub(super) fn value(&mut self, indent: usize, key: &str, value: &str) {
        if is_plain(value) {
            self.line(indent, &format!("{key}: {value}"));
        } else {
            self.block(indent, key, value);
        }
    }

    /// `key: |` and `body` below it, two spaces further in (its own indentation kept).
    pub(super) fn block(&mut self, indent: usize, key: &str, body: &str) {
        self.line(indent, &format!("{key}: |"));
        for line in body.lines() {
            if line.is_empty() {
                self.blank();
            } else {
                self.line(indent + 2, line);
            }
        }
    }

    /// `key: >-` and `text` folded below it: the line breaks read back as spaces.
    pub(super) fn folded(&mut self, indent: usize, key: &str, text: &str) {
        self.line(indent, &format!("{key}: >-"));
        for line in wrap(text, WIDTH.saturating_sub(indent + 2)) {
            self.line(indent + 2, &line);
        }
    }
}

/// Whether `value` can be written as a plain scalar on one line: nothing YAML would read as
/// structure, a comment, another type or surrounding space.
fn is_plain(value: &str) -> bool {
    let starts_plain = value
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '(');
    starts_plain
        && value == value.trim()
        && !value.contains('\n')
        && !value.contains(": ")
        && !value.contains(" #")
}

/// `text` as a YAML double-quoted scalar.
pub(super) fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The words of `text`, at its single spaces; a Go template action (`{{ ... }}`) is never
/// split. Consecutive spaces are read as one.
fn words(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut words = Vec::new();
    let (mut start, mut at, mut in_action) = (0, 0, false);
    while at < bytes.len() {
        let rest = &bytes[at..];
        if rest.starts_with(b"{{") || rest.starts_with(b"}}") {
            in_action = rest.starts_with(b"{{");
            at += 2;
            continue;
        }
        if bytes[at] == b' ' && !in_action {
            if at > start {
                words.push(&text[start..at]);
            }
            start = at + 1;
        }
        at += 1;
    }
    if start < text.len() {
        words.push(&text[start..]);
    }
    words
}

/// `text` in lines of at most `width` characters, broken at spaces (a longer word stands on
/// its own line).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in words(text) {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// A duration in Prometheus' syntax: `30s`, `5m`, `1h`, `1h30m`, `1d`; below a millisecond it
/// is rounded up to one.
pub(super) fn duration(micros: Micros) -> String {
    let mut millis = micros.max(0).saturating_add(999) / 1000;
    if millis == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
        ("ms", 1),
    ] {
        if millis >= size {
            let _ = write!(out, "{}{unit}", millis / size);
            millis %= size;
        }
    }
    out
}

/// A duration as the seconds PromQL compares a gauge with: `300`.
pub(super) fn seconds(micros: Micros) -> String {
    number(micros as f64 / 1e6)
}

/// A number with no more digits than it needs: `3`, `14.4`, `0.01` (rounded to 12 decimals,
/// so that `1 - 0.99` reads `0.01`).
pub(super) fn number(value: f64) -> String {
    let text = format!("{value:.12}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".into()
    } else {
        text.into()
    }
}

/// `value` rounded to `decimals` decimals, for prose: `rounded(0.0104166, 3)` is `0.01`.
pub(super) fn rounded(value: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (value * scale).round() / scale
}

/// A share as a percentage: `1%`, `99%`, `2.5%`.
pub(super) fn percent(share: f64) -> String {
    format!("{}%", number(share * 100.0))
}

/// `a`, `a or b`, `a, b or c`.
pub(super) fn either(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Micros = 1_000_000;

    #[test]
    fn durations_read_as_prometheus_writes_them() {
        assert_eq!(duration(5 * 60 * SECOND), "5m");
        assert_eq!(duration(3600 * SECOND), "1h");
        assert_eq!(duration(5400 * SECOND), "1h30m");
        assert_eq!(duration(86_400 * SECOND), "1d");
        assert_eq!(duration(65 * 60 * SECOND), "1h5m");
        assert_eq!(duration(1500), "2ms");
        assert_eq!(duration(0), "0s");
        assert_eq!(seconds(5 * 60 * SECOND), "300");
        assert_eq!(seconds(1_500_000), "1.5");
    }

    #[test]
    fn numbers_carry_no_float_noise() {
        assert_eq!(number(1.0 - 0.99), "0.01");
        assert_eq!(number(14.4), "14.4");
        assert_eq!(number(6.0), "6");
        assert_eq!(number(0.0), "0");
        assert_eq!(percent(0.99), "99%");
        assert_eq!(percent(0.025), "2.5%");
        assert_eq!(percent(rounded(0.0104166, 3)), "1%");
        assert_eq!(percent(rounded(0.0166666, 3)), "1.7%");
    }

    #[test]
    fn prose_wraps_at_spaces_and_never_inside_a_template_action() {
        let text = "aaa {{ with printf \"x %q\" $labels.target }}bbb ccc";
        assert_eq!(
            words(text),
            ["aaa", "{{ with printf \"x %q\" $labels.target }}bbb", "ccc"]
        );
        assert_eq!(wrap("one two three four", 9), ["one two", "three", "four"]);
        assert_eq!(wrap("averyverylongword x", 4), ["averyverylongword", "x"]);
    }

    #[test]
    fn values_are_plain_only_when_yaml_reads_them_back_unchanged() {
        assert!(is_plain("candor_hop_freshness_seconds > 300"));
        assert!(is_plain("vector(1)"));
        assert!(!is_plain("a: b"));
        assert!(!is_plain("a #b"));
        assert!(!is_plain("*alias"));
        assert!(!is_plain("line\nline"));
        assert_eq!(quoted("a \"b\" \\ c\n"), "\"a \\\"b\\\" \\\\ c\\n\"");
        assert_eq!(either(&["a".into(), "b".into(), "c".into()]), "a, b or c");
    }
}
