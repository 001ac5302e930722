//! The conventions a span can be a tool call of: one table, as data.
//!
//! Each [`Convention`] says how its spans are recognised (an attribute, equal to a value or
//! merely present; a span-name pattern; the span's kind; its instrumentation scope), which
//! attributes name the tool and identify the call (the first present winning), which signals
//! mark a failure or a cancellation beyond the ones every convention shares (status ERROR and
//! `error.type`), and which attributes hold the captured result, with the markers that make a
//! result a failure. The built-in table is `conventions.toml` beside this file; a team declares
//! its own entries in the collector's configuration ([`RawConvention`], validated by
//! [`RawConvention::validate`]), and [`Conventions::new`] puts the two in order.
//!
//! Recognition is on the hot path: it runs for every span that carries no `tool.outcome`
//! event. [`Conventions::recognise`] reads a span's attributes once, looking up only the keys
//! whose length some convention's key has, then tries the conventions in order.

use std::fmt;

use candor_records::proto::OutcomeSource;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::{Span, span};
use serde::Deserialize;

pub use super::declared::{
    ConventionError, MarkerValue, RawAttributeTest, RawConvention, RawRecognition, RawResultMarker,
};
use super::read::integer_value;

type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// The built-in table, in the form a declared entry takes.
pub(super) const BUILT_IN: &str = include_str!("conventions.toml");

/// The most distinct attribute keys the conventions' recognitions may name together: the span's
/// values of them are gathered on the stack.
pub const MAX_RECOGNITION_KEYS: usize = 64;

/// How one convention's spans are recognised and read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Convention {
    /// Its name, stored with every call it recognised (e.g. `openinference`).
    pub name: String,
    /// The layer its calls are counted under: the records' `source` (`genai`, `mcp` or `http`).
    pub layer: OutcomeSource,
    /// A span is a call of this convention when one of these holds.
    pub recognise: Vec<Recognition>,
    /// Span-name patterns whose `{tool}` names the tool when no attribute does.
    pub span_names: Vec<NamePattern>,
    /// The attributes that name the tool, the first present winning.
    pub tool_name: Vec<String>,
    /// The attributes that identify the call, the first present winning.
    pub call_id: Vec<String>,
    /// Attributes that mark a failed call, beside status ERROR and `error.type`.
    pub failure: Vec<AttributeTest>,
    /// Whether an `exception` event alone marks a failed call.
    pub exception_fails: bool,
    /// Error identifiers (matched on their last dotted segment, case-insensitively) that mark a
    /// call its caller cancelled, beside the ones every convention shares.
    pub cancel_types: Vec<String>,
    /// Beginnings of a status description or an exception message that mark a cancelled call.
    pub cancel_messages: Vec<String>,
    /// Attributes that mark a cancelled (or deferred, never run) call.
    pub cancel: Vec<AttributeTest>,
    /// The attributes that hold the call's captured result, the first present read.
    pub result: Vec<String>,
    /// What makes a captured result a failure.
    pub result_markers: Vec<ResultMarker>,
}

/// One way of recognising a convention's span: every condition it states holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recognition {
    /// An attribute the span carries.
    pub attribute: Option<AttributeTest>,
    /// A pattern the span's name matches.
    pub span_name: Option<NamePattern>,
    /// The span's kind.
    pub span_kind: Option<SpanKind>,
    /// The name of the span's instrumentation scope.
    pub scope: Option<String>,
}

/// A test of one attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttributeTest {
    /// The attribute's key.
    pub key: String,
    /// What its value must be.
    pub test: ValueTest,
}

/// What an attribute's value must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueTest {
    /// Present, and not an empty string.
    Present,
    /// This string.
    Equals(String),
    /// An integer (or an integer written as a string) of at least this.
    AtLeast(i64),
}

impl ValueTest {
    fn holds(&self, value: Option<&AnyValue>) -> bool {
        let Some(value) = value.and_then(|v| v.value.as_ref()) else {
            return false;
        };
        match self {
            ValueTest::Present => {
                !matches!(value, any_value::Value::StringValue(text) if text.is_empty())
            }
            ValueTest::Equals(expected) => {
                matches!(value, any_value::Value::StringValue(text) if text == expected)
            }
            ValueTest::AtLeast(floor) => integer_value(value).is_some_and(|n| n >= *floor),
        }
    }
}

impl AttributeTest {
    /// Whether `attributes` hold it.
    pub fn holds(&self, attributes: &[KeyValue]) -> bool {
        attributes
            .iter()
            .find(|kv| kv.key == self.key)
            .is_some_and(|kv| self.test.holds(kv.value.as_ref()))
    }
}

/// A span kind, as a convention names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpanKind {
    /// `INTERNAL`.
    Internal,
    /// `SERVER`.
    Server,
    /// `CLIENT`.
    Client,
    /// `PRODUCER`.
    Producer,
    /// `CONSUMER`.
    Consumer,
}

impl SpanKind {
    fn of(kind: i32) -> Option<Self> {
        Some(match span::SpanKind::try_from(kind).ok()? {
            span::SpanKind::Internal => SpanKind::Internal,
            span::SpanKind::Server => SpanKind::Server,
            span::SpanKind::Client => SpanKind::Client,
            span::SpanKind::Producer => SpanKind::Producer,
            span::SpanKind::Consumer => SpanKind::Consumer,
            span::SpanKind::Unspecified => return None,
        })
    }
}

/// A span-name pattern: a name, or a name with one `{tool}` placeholder that stands for the
/// tool's name (non-empty); a leading `*` lets anything come before the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamePattern {
    anywhere: bool,
    prefix: String,
    /// The text after `{tool}`; `None` for a pattern without the placeholder (the whole name).
    suffix: Option<String>,
}

/// The placeholder of a span-name pattern.
const TOOL_PLACEHOLDER: &str = "{tool}";

impl NamePattern {
    /// Parses `pattern`; `None` when it is empty or has more than one placeholder.
    pub fn parse(pattern: &str) -> Option<Self> {
        let (anywhere, rest) = match pattern.strip_prefix('*') {
            Some(rest) => (true, rest),
            None => (false, pattern),
        };
        if rest.is_empty() || rest.contains('*') {
            return None;
        }
        match rest.split_once(TOOL_PLACEHOLDER) {
            None => Some(Self {
                anywhere,
                prefix: rest.to_owned(),
                suffix: None,
            }),
            Some((_, after)) if after.contains(TOOL_PLACEHOLDER) => None,
            Some((before, after)) => Some(Self {
                anywhere,
                prefix: before.to_owned(),
                suffix: Some(after.to_owned()),
            }),
        }
    }

    /// What `name` says of the pattern: `None` when it does not match, else the tool it names
    /// (`None` inside for a pattern without the placeholder).
    pub fn matches<'n>(&self, name: &'n str) -> Option<Option<&'n str>> {
        let rest = if self.anywhere {
            let at = name.find(self.prefix.as_str())?;
            &name[at + self.prefix.len()..]
        } else {
            name.strip_prefix(self.prefix.as_str())?
        };
        match &self.suffix {
            None => (self.anywhere || rest.is_empty()).then_some(None),
            Some(suffix) => {
                let tool = rest.strip_suffix(suffix.as_str())?.trim();
                (!tool.is_empty()).then_some(Some(tool))
            }
        }
    }
}

impl fmt::Display for NamePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.anywhere {
            f.write_str("*")?;
        }
        f.write_str(&self.prefix)?;
        if let Some(suffix) = &self.suffix {
            f.write_str(TOOL_PLACEHOLDER)?;
            f.write_str(suffix)?;
        }
        Ok(())
    }
}

/// What makes a captured result a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultMarker {
    /// The result is JSON whose value at this pointer (RFC 6901) equals `equals`, e.g. an MCP
    /// `CallToolResult`'s `/isError` = `true`.
    Pointer {
        /// The pointer, e.g. `/isError`.
        pointer: String,
        /// The value that marks a failure.
        equals: serde_json::Value,
    },
    /// The whole result is this text, each `{}` standing for a non-empty text: a failure an
    /// emitter writes in a fixed form of its own (e.g. the OpenAI Agents SDK's
    /// `Tool '{}' timed out after {} seconds.`).
    Template(String),
}

impl ResultMarker {
    /// Whether `value` (a parsed result) holds this marker.
    fn holds_in_json(&self, value: &serde_json::Value) -> bool {
        match self {
            ResultMarker::Pointer { pointer, equals } => value.pointer(pointer) == Some(equals),
            ResultMarker::Template(template) => value
                .as_str()
                .is_some_and(|text| template_matches(template, text)),
        }
    }

    /// Whether the text `result` holds this marker (a template only).
    fn holds_in_text(&self, result: &str) -> bool {
        match self {
            ResultMarker::Pointer { .. } => false,
            ResultMarker::Template(template) => template_matches(template, result),
        }
    }
}

impl fmt::Display for ResultMarker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResultMarker::Pointer { pointer, equals } => write!(f, "{pointer} = {equals}"),
            ResultMarker::Template(template) => write!(f, "the form {template:?}"),
        }
    }
}

/// Whether `text` is `template` with each `{}` replaced by a non-empty text (the leftmost
/// place where the next literal part fits).
fn template_matches(template: &str, text: &str) -> bool {
    let mut parts = template.split("{}");
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let mut part = match parts.next() {
        Some(part) => part,
        None => return rest.is_empty(),
    };
    loop {
        // The hole takes at least one character.
        let Some(skip) = rest.chars().next().map(char::len_utf8) else {
            return false;
        };
        match parts.next() {
            None => return rest.len() > part.len() && rest.ends_with(part),
            Some(next) => {
                let Some(at) = rest[skip..].find(part) else {
                    return false;
                };
                rest = &rest[skip + at + part.len()..];
                part = next;
            }
        }
    }
}

/// What reading a captured result found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultCheck<'a> {
    /// The convention reads no result, or the span carries none.
    NotCaptured,
    /// A result longer than the bound: not read.
    TooLarge,
    /// A result without a marker.
    Clean,
    /// The result in `attribute` holds `marker`.
    Failure {
        /// The attribute it was read from.
        attribute: &'a str,
        /// The marker it holds.
        marker: &'a ResultMarker,
    },
}

impl Convention {
    /// Reads the span's captured result (the first of [`Convention::result`] present, as a
    /// string of at most `max_bytes`) for the convention's failure markers.
    pub fn check_result<'c>(&'c self, span: &Span, max_bytes: usize) -> ResultCheck<'c> {
        if self.result_markers.is_empty() {
            return ResultCheck::NotCaptured;
        }
        let found = self.result.iter().find_map(|key| {
            let kv = span.attributes.iter().find(|kv| kv.key == *key)?;
            match kv.value.as_ref()?.value.as_ref()? {
                any_value::Value::StringValue(text) if !text.is_empty() => {
                    Some((key.as_str(), text.as_str()))
                }
                _ => None,
            }
        });
        let Some((attribute, text)) = found else {
            return ResultCheck::NotCaptured;
        };
        if text.len() > max_bytes {
            return ResultCheck::TooLarge;
        }
        // Parsed once, for every marker that reads the JSON.
        let parsed = parse_result(text);
        let marker = self.result_markers.iter().find(|marker| {
            marker.holds_in_text(text)
                || parsed
                    .as_ref()
                    .is_some_and(|value| marker.holds_in_json(value))
        });
        match marker {
            Some(marker) => ResultCheck::Failure { attribute, marker },
            None => ResultCheck::Clean,
        }
    }
}

/// A captured result as JSON: parsed when it looks like an object, an array or a string, and a
/// string that itself holds an object (a result serialised twice) parsed again.
fn parse_result(text: &str) -> Option<serde_json::Value> {
    let trimmed = text.trim_start();
    if !trimmed.starts_with(['{', '[', '"']) {
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(trimmed).ok()?;
    match &value {
        serde_json::Value::String(inner) if inner.trim_start().starts_with(['{', '[']) => {
            serde_json::from_str(inner.trim_start())
                .ok()
                .or(Some(value))
        }
        _ => Some(value),
    }
}

/// The conventions in force, in the order they are tried, with what recognition looks up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conventions {
    table: Vec<Convention>,
    /// The attribute keys the recognitions name, by their index in the span's gathered values.
    keys: Vec<String>,
    /// Per key, its index in `keys`.
    key_index: HashMap<String, usize>,
    /// Which attribute keys may be among `keys`, without hashing them.
    key_filter: KeyFilter,
    /// Per convention and recognition, the index of its attribute's key.
    recognition_keys: Vec<Vec<Option<usize>>>,
    /// The conventions (their indexes, in order) with a recognition that tests no attribute:
    /// the only ones a span without any recognition key can be a call of.
    without_attribute: Vec<usize>,
}

/// A filter over attribute keys that passes every recognition key and, without hashing, most
/// others: by the key's length, first byte and last byte. Most attributes of most spans are
/// passed over on it alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct KeyFilter {
    /// Bit `n` set when some key is `n` bytes long (keys of 128 bytes or more set none).
    lengths: u128,
    /// Whether some key is 128 bytes or longer (such attributes are always looked up).
    long: bool,
    /// Bit `b` set when some key begins with the byte `b`.
    first: [u64; 4],
    /// Bit `b` set when some key ends with the byte `b`.
    last: [u64; 4],
}

impl KeyFilter {
    fn of(keys: &[String]) -> Self {
        let mut filter = Self::default();
        for key in keys {
            let (Some(&first), Some(&last)) = (key.as_bytes().first(), key.as_bytes().last())
            else {
                continue;
            };
            if key.len() < 128 {
                filter.lengths |= 1 << key.len();
            } else {
                filter.long = true;
            }
            filter.first[usize::from(first >> 6)] |= 1 << (first & 63);
            filter.last[usize::from(last >> 6)] |= 1 << (last & 63);
        }
        filter
    }

    /// Whether `key` may be one of the keys: false only when it is none of them.
    fn may_hold(&self, key: &str) -> bool {
        let bytes = key.as_bytes();
        let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else {
            return false;
        };
        let length = if bytes.len() < 128 {
            self.lengths & (1 << bytes.len()) != 0
        } else {
            self.long
        };
        length
            && self.first[usize::from(first >> 6)] & (1 << (first & 63)) != 0
            && self.last[usize::from(last >> 6)] & (1 << (last & 63)) != 0
    }
}

impl Default for Conventions {
    fn default() -> Self {
        // The built-in table is valid (`the_built_in_table_is_valid`) and within the bound
        // on keys, so building it cannot fail.
        #[allow(clippy::expect_used)]
        Self::new(Vec::new(), &[], |_| true).expect("the built-in conventions are valid")
    }
}

/// Why the table of conventions could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConventionsError {
    /// A declared entry is invalid.
    #[error("derived.conventions[{index}].{error}")]
    Invalid {
        /// Its index among the declared entries.
        index: usize,
        /// What is wrong.
        error: ConventionError,
    },
    /// Two declared entries share a name.
    #[error("derived.conventions[{index}].name = {name:?}: an earlier entry has this name")]
    Duplicate {
        /// The later entry's index.
        index: usize,
        /// The name.
        name: String,
    },
    /// `derived.disable` names no built-in convention.
    #[error("derived.disable = {name:?}: no built-in convention has this name")]
    UnknownDisabled {
        /// The name.
        name: String,
    },
    /// The recognitions name too many attribute keys.
    #[error(
        "derived.conventions: the conventions recognise spans by {count} attribute keys; at most \
         {MAX_RECOGNITION_KEYS} are supported"
    )]
    TooManyKeys {
        /// How many they name.
        count: usize,
    },
}

impl ConventionsError {
    /// The configuration key at fault, the value given and the reason.
    pub fn parts(&self) -> (String, String, String) {
        match self {
            ConventionsError::Invalid { index, error } => (
                format!("derived.conventions[{index}].{}", error.key),
                error.value.clone(),
                error.reason.clone(),
            ),
            ConventionsError::Duplicate { index, name } => (
                format!("derived.conventions[{index}].name"),
                name.clone(),
                "an earlier entry has this name".to_owned(),
            ),
            ConventionsError::UnknownDisabled { name } => (
                "derived.disable".to_owned(),
                name.clone(),
                "no built-in convention has this name".to_owned(),
            ),
            ConventionsError::TooManyKeys { count } => (
                "derived.conventions".to_owned(),
                count.to_string(),
                format!(
                    "the conventions recognise spans by this many attribute keys; at most \
                     {MAX_RECOGNITION_KEYS} are supported"
                ),
            ),
        }
    }
}

impl Conventions {
    /// The table: `declared` entries first (one named like a built-in entry takes its place),
    /// then the built-in ones, less those named in `disabled` and those of a layer `layer_on`
    /// turns off.
    pub fn new(
        declared: Vec<RawConvention>,
        disabled: &[String],
        layer_on: impl Fn(OutcomeSource) -> bool,
    ) -> Result<Self, ConventionsError> {
        let built_in: Vec<Convention> = RawConvention::built_in()
            .into_iter()
            .enumerate()
            .map(|(index, raw)| {
                raw.validate()
                    .map_err(|error| ConventionsError::Invalid { index, error })
            })
            .collect::<Result<_, _>>()?;
        if let Some(name) = disabled
            .iter()
            .find(|name| !built_in.iter().any(|c| c.name == **name))
        {
            return Err(ConventionsError::UnknownDisabled { name: name.clone() });
        }
        let mut replacing: HashMap<String, Convention> = HashMap::default();
        let mut first: Vec<Convention> = Vec::new();
        for (index, raw) in declared.into_iter().enumerate() {
            let convention = raw
                .validate()
                .map_err(|error| ConventionsError::Invalid { index, error })?;
            let name = convention.name.clone();
            if replacing.contains_key(&name) || first.iter().any(|c| c.name == name) {
                return Err(ConventionsError::Duplicate { index, name });
            }
            if built_in.iter().any(|c| c.name == name) {
                replacing.insert(name, convention);
            } else {
                first.push(convention);
            }
        }
        let table: Vec<Convention> = first
            .into_iter()
            .chain(built_in.into_iter().filter_map(|c| {
                if disabled.contains(&c.name) {
                    return None;
                }
                Some(replacing.remove(&c.name).unwrap_or(c))
            }))
            .filter(|c| layer_on(c.layer))
            .collect();
        Self::index(table)
    }

    fn index(table: Vec<Convention>) -> Result<Self, ConventionsError> {
        let mut keys: Vec<String> = Vec::new();
        let mut key_index: HashMap<String, usize> = HashMap::default();
        let recognition_keys = table
            .iter()
            .map(|convention| {
                convention
                    .recognise
                    .iter()
                    .map(|recognition| {
                        let key = &recognition.attribute.as_ref()?.key;
                        Some(*key_index.entry(key.clone()).or_insert_with(|| {
                            keys.push(key.clone());
                            keys.len() - 1
                        }))
                    })
                    .collect()
            })
            .collect();
        if keys.len() > MAX_RECOGNITION_KEYS {
            return Err(ConventionsError::TooManyKeys { count: keys.len() });
        }
        let without_attribute = table
            .iter()
            .enumerate()
            .filter(|(_, c)| c.recognise.iter().any(|r| r.attribute.is_none()))
            .map(|(index, _)| index)
            .collect();
        Ok(Self {
            table,
            key_filter: KeyFilter::of(&keys),
            keys,
            key_index,
            recognition_keys,
            without_attribute,
        })
    }

    /// The conventions, in the order they are tried.
    pub fn table(&self) -> &[Convention] {
        &self.table
    }

    /// The convention at `index` of [`Conventions::table`].
    pub fn get(&self, index: usize) -> &Convention {
        &self.table[index]
    }

    /// The first convention (its index in the table) that `span`, of the instrumentation scope
    /// `scope`, is a call of.
    pub fn recognise(&self, span: &Span, scope: &str) -> Option<usize> {
        if self.table.is_empty() {
            return None;
        }
        let mut values: [Option<&AnyValue>; MAX_RECOGNITION_KEYS] = [None; MAX_RECOGNITION_KEYS];
        let mut any = false;
        for kv in &span.attributes {
            if !self.key_filter.may_hold(&kv.key) {
                continue;
            }
            if let Some(&index) = self.key_index.get(kv.key.as_str()) {
                values[index] = kv.value.as_ref();
                any = true;
            }
        }
        let kind = SpanKind::of(span.kind);
        let rest_holds = |recognition: &Recognition| {
            recognition.span_kind.is_none_or(|k| Some(k) == kind)
                && recognition.scope.as_deref().is_none_or(|s| s == scope)
                && recognition
                    .span_name
                    .as_ref()
                    .is_none_or(|pattern| pattern.matches(&span.name).is_some())
        };
        if !any {
            // No attribute test can hold: only recognitions without one, in table order.
            return self.without_attribute.iter().copied().find(|&index| {
                self.table[index]
                    .recognise
                    .iter()
                    .any(|recognition| recognition.attribute.is_none() && rest_holds(recognition))
            });
        }
        self.table
            .iter()
            .enumerate()
            .position(|(index, convention)| {
                convention
                    .recognise
                    .iter()
                    .zip(&self.recognition_keys[index])
                    .any(|(recognition, key)| {
                        let attribute_holds = match (&recognition.attribute, key) {
                            (Some(test), Some(key)) => test.test.holds(values[*key]),
                            _ => true,
                        };
                        attribute_holds && rest_holds(recognition)
                    })
            })
    }

    /// The attribute keys recognition looks up.
    pub fn recognition_keys(&self) -> &[String] {
        &self.keys
    }
}

impl Convention {
    /// The tool a span's name gives, by the first of the convention's patterns (those it is
    /// recognised by, then [`Convention::span_names`]) that names one.
    pub fn tool_in_span_name<'n>(&self, name: &'n str) -> Option<&'n str> {
        self.recognise
            .iter()
            .filter_map(|r| r.span_name.as_ref())
            .chain(&self.span_names)
            .find_map(|pattern| pattern.matches(name).flatten())
    }

    /// Whether `identifier` (an error type) marks a call its caller cancelled, by this
    /// convention's own cancellation types.
    pub fn cancels_by_type(&self, identifier: &str) -> bool {
        if self.cancel_types.is_empty() {
            return false;
        }
        let name = super::super::failure_type::last_segment(identifier);
        self.cancel_types
            .iter()
            .any(|t| t.eq_ignore_ascii_case(name))
    }

    /// The first of this convention's cancellation messages `message` begins with.
    pub fn cancels_by_message(&self, message: &str) -> Option<&str> {
        self.cancel_messages
            .iter()
            .find(|m| message.starts_with(m.as_str()))
            .map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
    use opentelemetry_proto::tonic::trace::v1::{Span, span};

    use candor_schema::names::{attr, semconv};

    use super::*;

    fn text(key: &str, value: &str) -> KeyValue {
        KeyValue {
            key: key.to_owned(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(value.to_owned())),
            }),
            ..Default::default()
        }
    }

    fn span_of(name: &str, kind: span::SpanKind, attributes: Vec<KeyValue>) -> Span {
        Span {
            name: name.to_owned(),
            kind: kind as i32,
            attributes,
            ..Default::default()
        }
    }

    /// The name of the convention `span` (of `scope`) is recognised by.
    fn recognised(conventions: &Conventions, span: &Span, scope: &str) -> Option<String> {
        conventions
            .recognise(span, scope)
            .map(|index| conventions.get(index).name.clone())
    }

    #[test]
    fn the_key_filter_passes_every_recognition_key_and_few_others() {
        let conventions = Conventions::default();
        let filter = &conventions.key_filter;
        for key in conventions.recognition_keys() {
            assert!(filter.may_hold(key), "{key}");
        }
        // Ordinary spans' attributes, most of them passed over without a lookup.
        let ordinary = [
            "db.system.name",
            "db.query.text",
            "server.address",
            "server.port",
            "user_agent.original",
            "code.function.name",
            "url.path",
        ];
        let passed: Vec<&str> = ordinary
            .into_iter()
            .filter(|key| filter.may_hold(key))
            .collect();
        assert_eq!(passed, [] as [&str; 0]);
        assert!(!filter.may_hold(""));
        // A long key is looked up only when some recognition key is long.
        assert!(!filter.may_hold(&"g".repeat(200)));
    }

    #[test]
    fn the_built_in_table_is_valid() {
        let raw = RawConvention::built_in();
        let mut names: Vec<String> = raw.iter().map(|c| c.name.clone()).collect();
        for convention in raw {
            let name = convention.name.clone();
            convention
                .validate()
                .unwrap_or_else(|err| panic!("{name}: {err}"));
        }
        let count = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), count, "names are unique: {names:?}");
        let conventions = Conventions::default();
        assert_eq!(conventions.table().len(), count);
        assert!(conventions.recognition_keys().len() <= MAX_RECOGNITION_KEYS);
    }

    #[test]
    fn each_emitter_is_recognised_by_its_own_convention() {
        let conventions = Conventions::default();
        let internal = span::SpanKind::Internal;
        let cases: Vec<(&str, Span, &str)> = vec![
            (
                "openinference",
                span_of(
                    "lookup",
                    internal,
                    vec![
                        text("openinference.span.kind", "TOOL"),
                        text(attr::TOOL_NAME, "lookup"),
                    ],
                ),
                "openinference.instrumentation.langchain",
            ),
            (
                // OpenLLMetry's LangChain spans carry the GenAI operation too: the emitter's own
                // marker comes first.
                "openllmetry",
                span_of(
                    "execute_tool lookup",
                    internal,
                    vec![
                        text("traceloop.span.kind", "tool"),
                        text(semconv::GEN_AI_OPERATION_NAME, "execute_tool"),
                        text(semconv::GEN_AI_TOOL_NAME, "lookup"),
                    ],
                ),
                "opentelemetry.instrumentation.langchain",
            ),
            (
                "vercel-ai",
                span_of(
                    "ai.toolCall",
                    internal,
                    vec![
                        text("ai.operationId", "ai.toolCall"),
                        text("ai.toolCall.name", "weather"),
                    ],
                ),
                "ai",
            ),
            (
                "spring-ai",
                span_of(
                    "execute_tool weather",
                    internal,
                    vec![
                        text("spring.ai.kind", "tool_call"),
                        text(semconv::GEN_AI_OPERATION_NAME, "execute_tool"),
                        text("spring.ai.tool.definition.name", "weather"),
                    ],
                ),
                "org.springframework.ai",
            ),
            (
                "pydantic-ai",
                span_of(
                    "execute_tool lookup",
                    internal,
                    vec![
                        text(semconv::GEN_AI_OPERATION_NAME, "execute_tool"),
                        text(semconv::GEN_AI_TOOL_NAME, "lookup"),
                    ],
                ),
                "pydantic-ai",
            ),
            (
                // The same span from another scope is the standard's.
                "otel-genai",
                span_of(
                    "execute_tool lookup",
                    internal,
                    vec![
                        text(semconv::GEN_AI_OPERATION_NAME, "execute_tool"),
                        text(semconv::GEN_AI_TOOL_NAME, "lookup"),
                    ],
                ),
                "Microsoft.Extensions.AI",
            ),
            (
                // A span with both the GenAI and the MCP attributes of one call.
                "otel-mcp",
                span_of(
                    "tools/call search",
                    span::SpanKind::Client,
                    vec![
                        text(semconv::GEN_AI_OPERATION_NAME, "execute_tool"),
                        text(semconv::MCP_METHOD_NAME, "tools/call"),
                    ],
                ),
                "mcp",
            ),
            (
                "logfire-mcp",
                span_of(
                    "MCP request: tools/call search",
                    span::SpanKind::Client,
                    vec![text("rpc.method", "tools/call")],
                ),
                "logfire",
            ),
            (
                "otel-http",
                span_of(
                    "GET",
                    span::SpanKind::Client,
                    vec![text(semconv::HTTP_REQUEST_METHOD, "GET")],
                ),
                "io.opentelemetry.http",
            ),
        ];
        for (expected, span, scope) in cases {
            assert_eq!(
                recognised(&conventions, &span, scope).as_deref(),
                Some(expected),
                "{span:?}"
            );
        }
        for (span, scope) in [
            // An HTTP server span is not a call the service made.
            (
                span_of(
                    "GET",
                    span::SpanKind::Server,
                    vec![text(semconv::HTTP_REQUEST_METHOD, "GET")],
                ),
                "",
            ),
            // Another OpenInference kind.
            (
                span_of(
                    "chat",
                    internal,
                    vec![text("openinference.span.kind", "LLM")],
                ),
                "",
            ),
            (span_of("execute_toolbox", internal, vec![]), ""),
            (span_of("ai.toolCalls", internal, vec![]), ""),
        ] {
            assert_eq!(recognised(&conventions, &span, scope), None, "{span:?}");
        }
    }

    #[test]
    fn span_name_patterns_match_whole_names_and_name_the_tool() {
        let pattern = |text: &str| NamePattern::parse(text).unwrap();
        assert_eq!(
            pattern("execute_tool {tool}").matches("execute_tool lookup"),
            Some(Some("lookup"))
        );
        assert_eq!(
            pattern("execute_tool {tool}").matches("execute_tool "),
            None
        );
        assert_eq!(
            pattern("{tool}.tool").matches("search.tool"),
            Some(Some("search"))
        );
        assert_eq!(pattern("{tool}.tool").matches("search.tools"), None);
        assert_eq!(
            pattern("*tools/call {tool}").matches("MCP send tools/call add"),
            Some(Some("add"))
        );
        assert_eq!(pattern("ai.toolCall").matches("ai.toolCall"), Some(None));
        assert_eq!(pattern("ai.toolCall").matches("ai.toolCall.x"), None);
        for bad in ["", "*", "a{tool}b{tool}", "a*b"] {
            assert_eq!(NamePattern::parse(bad), None, "{bad:?}");
        }
        assert_eq!(
            pattern("*tools/call {tool}").to_string(),
            "*tools/call {tool}"
        );
    }

    #[test]
    fn a_template_matches_only_its_fixed_form_with_every_hole_filled() {
        let template = "Tool '{}' timed out after {} seconds.";
        assert!(template_matches(
            template,
            "Tool 'search' timed out after 30 seconds."
        ));
        assert!(template_matches(
            template,
            "Tool 'a b' timed out after 1.5 seconds."
        ));
        assert!(!template_matches(
            template,
            "Tool '' timed out after 30 seconds."
        ));
        assert!(!template_matches(
            template,
            "Tool 'search' timed out after  seconds"
        ));
        assert!(!template_matches(
            template,
            "The tool 'search' timed out after 30 seconds."
        ));
        assert!(!template_matches(template, "Tool 'search' finished."));
        assert!(template_matches("done", "done"));
        assert!(!template_matches("done", "done!"));
    }

    fn raw(toml_text: &str) -> RawConvention {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn a_declared_convention_is_refused_with_the_key_and_the_reason() {
        let cases = [
            (
                "name = \"Bad Name\"\nlayer = \"genai\"\nrecognise = [{ span_name = \"x {tool}\" }]",
                "name",
            ),
            (
                "name = \"a\"\nlayer = \"adapter\"\nrecognise = [{ span_name = \"x {tool}\" }]",
                "layer",
            ),
            (
                "name = \"a\"\nlayer = \"genai\"\nrecognise = []",
                "recognise",
            ),
            (
                "name = \"a\"\nlayer = \"genai\"\nrecognise = [{ span_kind = \"client\" }]",
                "recognise[0]",
            ),
            (
                "name = \"a\"\nlayer = \"genai\"\nrecognise = [{ span_name = \"x\", equals = \"y\" }]",
                "recognise[0].equals",
            ),
            (
                "name = \"a\"\nlayer = \"genai\"\nrecognise = [{ attribute = \"k\", equals = \"y\", at_least = 1 }]",
                "recognise[0].equals",
            ),
            (
                "name = \"a\"\nlayer = \"genai\"\nrecognise = [{ span_name = \"a{tool}{tool}\" }]",
                "recognise[0].span_name",
            ),
            (
                "name = \"a\"\nlayer = \"http\"\nrecognise = [{ attribute = \"k\" }]\ntool_name = [\"t\"]",
                "tool_name",
            ),
            (
                "name = \"a\"\nlayer = \"genai\"\nrecognise = [{ attribute = \"k\" }]\n\
                 result_markers = [{ pointer = \"/isError\", equals = true }]",
                "result",
            ),
            (
                "name = \"a\"\nlayer = \"genai\"\nrecognise = [{ attribute = \"k\" }]\n\
                 result = [\"r\"]\nresult_markers = [{ pointer = \"isError\", equals = true }]",
                "result_markers[0].pointer",
            ),
            (
                "name = \"a\"\nlayer = \"genai\"\nrecognise = [{ attribute = \"k\" }]\n\
                 result = [\"r\"]\nresult_markers = [{ pointer = \"/isError\" }]",
                "result_markers[0]",
            ),
            (
                "name = \"a\"\nlayer = \"genai\"\nrecognise = [{ attribute = \"has space\" }]",
                "recognise[0].attribute",
            ),
        ];
        for (text, key) in cases {
            let err = raw(text).validate().unwrap_err();
            assert_eq!(err.key, key, "{text}: {err}");
            assert!(!err.reason.is_empty());
        }
    }

    #[test]
    fn declared_conventions_come_first_and_one_under_a_built_in_name_takes_its_place() {
        let acme = raw("name = \"acme-agent\"\nlayer = \"genai\"\n\
             recognise = [{ attribute = \"acme.kind\", equals = \"tool\" }]\n\
             tool_name = [\"acme.tool\"]");
        let mut http = raw("name = \"otel-http\"\nlayer = \"http\"\n\
             recognise = [{ attribute = \"http.request.method\", span_kind = \"client\" }]");
        http.name = "otel-http".to_owned();
        let conventions =
            Conventions::new(vec![acme, http], &["openllmetry".to_owned()], |_| true).unwrap();
        let names: Vec<&str> = conventions
            .table()
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(names[0], "acme-agent");
        assert!(!names.contains(&"openllmetry"), "{names:?}");
        assert_eq!(names.last(), Some(&"otel-http"));
        assert_eq!(names.iter().filter(|n| **n == "otel-http").count(), 1);
        let old_http = span_of(
            "GET",
            span::SpanKind::Client,
            vec![text(semconv::HTTP_METHOD, "GET")],
        );
        assert_eq!(
            recognised(&conventions, &old_http, ""),
            None,
            "the declared entry replaced the built-in one, which also knew `http.method`"
        );

        let dup = raw("name = \"x\"\nlayer = \"genai\"\nrecognise = [{ attribute = \"k\" }]");
        let err = Conventions::new(vec![dup.clone(), dup], &[], |_| true).unwrap_err();
        assert_eq!(err.parts().0, "derived.conventions[1].name");
        let err = Conventions::new(Vec::new(), &["nope".to_owned()], |_| true).unwrap_err();
        assert_eq!(err.parts().0, "derived.disable");
        let layers =
            Conventions::new(Vec::new(), &[], |layer| layer == OutcomeSource::Http).unwrap();
        assert_eq!(layers.table().len(), 1);
    }

    #[test]
    fn a_result_is_a_failure_only_by_a_marker_of_its_convention() {
        let conventions = Conventions::default();
        let by_name = |name: &str| {
            conventions
                .table()
                .iter()
                .find(|c| c.name == name)
                .unwrap()
                .clone()
        };
        let vercel = by_name("vercel-ai");
        let with_result = |key: &str, result: &str| {
            span_of(
                "ai.toolCall",
                span::SpanKind::Internal,
                vec![text(key, result)],
            )
        };
        let mcp_error =
            r#"{"content":[{"type":"text","text":"upstream index unavailable"}],"isError":true}"#;
        match vercel.check_result(&with_result("ai.toolCall.result", mcp_error), 65_536) {
            ResultCheck::Failure { attribute, marker } => {
                assert_eq!(attribute, "ai.toolCall.result");
                assert_eq!(marker.to_string(), "/isError = true");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            vercel.check_result(&with_result("ai.toolCall.result", mcp_error), 10),
            ResultCheck::TooLarge
        );
        for clean in [
            r#"{"content":[],"isError":false}"#,
            r#"{"city":"Oslo","temperature_c":7}"#,
            "the word isError in plain text",
            "{not json",
        ] {
            assert_eq!(
                vercel.check_result(&with_result("ai.toolCall.result", clean), 65_536),
                ResultCheck::Clean,
                "{clean}"
            );
        }
        assert_eq!(
            vercel.check_result(&with_result("other", mcp_error), 65_536),
            ResultCheck::NotCaptured
        );
        // A result serialised twice, as a JSON string holding the object.
        let twice = serde_json::to_string(mcp_error).unwrap();
        assert!(matches!(
            vercel.check_result(&with_result("ai.toolCall.result", &twice), 65_536),
            ResultCheck::Failure { .. }
        ));
        let openinference = by_name("openinference");
        let handled = r#"{"type": "tool", "data": {"content": "quota exceeded for q1", "tool_call_id": "c-1", "status": "error"}}"#;
        assert!(matches!(
            openinference.check_result(&with_result("output.value", handled), 65_536),
            ResultCheck::Failure { .. }
        ));
        let timed_out = "Tool 'search' timed out after 30 seconds.";
        assert!(matches!(
            openinference.check_result(&with_result("output.value", timed_out), 65_536),
            ResultCheck::Failure { .. }
        ));
        // Spring AI's default processor returns a failure as text: not a marker.
        let spring = by_name("spring-ai");
        assert_eq!(
            spring.check_result(
                &with_result(
                    "spring.ai.tool.call.result",
                    "java.lang.IllegalStateException: down"
                ),
                65_536
            ),
            ResultCheck::Clean
        );
    }

    /// The built-in table as CONFIGURATION.md shows it.
    fn markdown_table(conventions: &Conventions) -> String {
        fn cell(items: Vec<String>) -> String {
            if items.is_empty() {
                "–".to_owned()
            } else {
                items.join(", ").replace('|', "\\|")
            }
        }
        fn code(text: impl fmt::Display) -> String {
            format!("`{text}`")
        }
        fn test(test: &AttributeTest) -> String {
            match &test.test {
                ValueTest::Present => code(&test.key),
                ValueTest::Equals(value) => format!("{} = {}", code(&test.key), code(value)),
                ValueTest::AtLeast(floor) => format!("{} ≥ {floor}", code(&test.key)),
            }
        }
        fn marker(marker: &ResultMarker) -> String {
            match marker {
                ResultMarker::Pointer { pointer, equals } => {
                    format!("{} = {}", code(pointer), code(equals))
                }
                ResultMarker::Template(template) => format!("the form {}", code(template)),
            }
        }
        let mut out = String::from(
            "| convention | layer | recognised by | tool | call id | failure, beside status ERROR \
             and `error.type` | cancellation, beside the shared types | captured result: a failure \
             when |\n|---|---|---|---|---|---|---|---|\n",
        );
        for c in conventions.table() {
            let recognise = c
                .recognise
                .iter()
                .map(|r| {
                    let mut parts: Vec<String> = Vec::new();
                    parts.extend(r.attribute.as_ref().map(test));
                    parts.extend(
                        r.span_name
                            .as_ref()
                            .map(|name| format!("name {}", code(name))),
                    );
                    parts.extend(
                        r.span_kind
                            .map(|kind| format!("kind {kind:?}").to_lowercase()),
                    );
                    parts.extend(
                        r.scope
                            .as_ref()
                            .map(|scope| format!("scope {}", code(scope))),
                    );
                    parts.join(" and ")
                })
                .collect();
            let tool = c
                .tool_name
                .iter()
                .map(code)
                .chain(c.span_names.iter().map(|p| format!("name {}", code(p))))
                .collect();
            let mut failure: Vec<String> = c.failure.iter().map(test).collect();
            if c.exception_fails {
                failure.push("an `exception` event".to_owned());
            }
            let cancel = c
                .cancel
                .iter()
                .map(test)
                .chain(c.cancel_types.iter().map(code))
                .chain(
                    c.cancel_messages
                        .iter()
                        .map(|m| format!("message {}", code(format!("{m}…")))),
                )
                .collect();
            let result = if c.result.is_empty() {
                "–".to_owned()
            } else {
                format!(
                    "{} holds {}",
                    cell(c.result.iter().map(code).collect()),
                    cell(c.result_markers.iter().map(marker).collect())
                )
            };
            let layer = if c.layer == OutcomeSource::Http {
                "http (tool: the method)"
            } else {
                c.layer.as_str()
            };
            out.push_str(&format!(
                "| `{}` | {layer} | {} | {} | {} | {} | {} | {result} |\n",
                c.name,
                cell(recognise),
                cell(tool),
                cell(c.call_id.iter().map(code).collect()),
                cell(failure),
                cell(cancel),
            ));
        }
        out
    }

    /// CONFIGURATION.md shows the built-in table as it is. After a deliberate change:
    /// `CANDOR_BLESS=1 cargo test -p candor-collector --lib configuration_md`.
    #[test]
    fn configuration_md_shows_the_built_in_table() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../CONFIGURATION.md");
        let text = std::fs::read_to_string(&path).unwrap();
        let (begin, end) = ("<!-- conventions:begin -->\n", "<!-- conventions:end -->");
        let start = text.find(begin).unwrap() + begin.len();
        let stop = text.find(end).unwrap();
        let table = markdown_table(&Conventions::default());
        if std::env::var_os("CANDOR_BLESS").is_some() {
            let updated = format!("{}{table}{}", &text[..start], &text[stop..]);
            std::fs::write(&path, updated).unwrap();
            return;
        }
        assert_eq!(
            text[start..stop],
            table,
            "CONFIGURATION.md's table of conventions differs from conventions.toml; bless it"
        );
    }
}
