//! A convention as written, in the built-in table or in `[[derived.conventions]]`, and its
//! validation into a [`Convention`]: pure, each refusal naming the key relative to the entry.

use candor_records::proto::OutcomeSource;
use serde::Deserialize;

use super::conventions::{
    AttributeTest, BUILT_IN, Convention, NamePattern, Recognition, ResultMarker, SpanKind,
    ValueTest,
};
/// A convention as written: an entry of the built-in table or of `[[derived.conventions]]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConvention {
    /// `name`.
    pub name: String,
    /// `layer`: `genai`, `mcp` or `http`.
    pub layer: String,
    /// `recognise`.
    pub recognise: Vec<RawRecognition>,
    /// `span_names`.
    #[serde(default)]
    pub span_names: Vec<String>,
    /// `tool_name`.
    #[serde(default)]
    pub tool_name: Vec<String>,
    /// `call_id`.
    #[serde(default)]
    pub call_id: Vec<String>,
    /// `failure`.
    #[serde(default)]
    pub failure: Vec<RawAttributeTest>,
    /// `exception_fails`.
    #[serde(default)]
    pub exception_fails: bool,
    /// `cancel_types`.
    #[serde(default)]
    pub cancel_types: Vec<String>,
    /// `cancel_messages`.
    #[serde(default)]
    pub cancel_messages: Vec<String>,
    /// `cancel`.
    #[serde(default)]
    pub cancel: Vec<RawAttributeTest>,
    /// `result`.
    #[serde(default)]
    pub result: Vec<String>,
    /// `result_markers`.
    #[serde(default)]
    pub result_markers: Vec<RawResultMarker>,
}

/// One entry of `recognise` as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRecognition {
    /// `attribute`.
    pub attribute: Option<String>,
    /// `equals`.
    pub equals: Option<String>,
    /// `at_least`.
    pub at_least: Option<i64>,
    /// `span_name`.
    pub span_name: Option<String>,
    /// `span_kind`.
    pub span_kind: Option<SpanKind>,
    /// `scope`.
    pub scope: Option<String>,
}

/// An attribute test as written (`failure` and `cancel`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAttributeTest {
    /// `attribute`.
    pub attribute: String,
    /// `equals`.
    pub equals: Option<String>,
    /// `at_least`.
    pub at_least: Option<i64>,
}

/// A result marker as written: `pointer` with `equals`, or `template`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawResultMarker {
    /// `pointer`.
    pub pointer: Option<String>,
    /// `equals`.
    pub equals: Option<MarkerValue>,
    /// `template`.
    pub template: Option<String>,
}

/// The value a result marker compares with.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum MarkerValue {
    /// `true` or `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A string.
    Text(String),
}

/// Why a convention was refused: the key (relative to the entry, e.g. `recognise[0].equals`),
/// the value and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key} = {value:?}: {reason}")]
pub struct ConventionError {
    /// The key, relative to the convention.
    pub key: String,
    /// The value given.
    pub value: String,
    /// What is wrong with it.
    pub reason: String,
}

fn refuse(
    key: impl Into<String>,
    value: impl ToString,
    reason: impl Into<String>,
) -> ConventionError {
    ConventionError {
        key: key.into(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// The longest name of a convention.
const MAX_NAME_BYTES: usize = 64;

fn attribute_key(key: &str, value: &str) -> Result<String, ConventionError> {
    if value.is_empty() || value.chars().any(char::is_whitespace) {
        return Err(refuse(
            key,
            value,
            "an attribute key is non-empty, without white space",
        ));
    }
    Ok(value.to_owned())
}

fn attribute_keys(key: &str, values: Vec<String>) -> Result<Vec<String>, ConventionError> {
    values
        .into_iter()
        .enumerate()
        .map(|(i, value)| attribute_key(&format!("{key}[{i}]"), &value))
        .collect()
}

fn value_test(
    key: &str,
    equals: Option<String>,
    at_least: Option<i64>,
) -> Result<ValueTest, ConventionError> {
    match (equals, at_least) {
        (None, None) => Ok(ValueTest::Present),
        (Some(text), None) => Ok(ValueTest::Equals(text)),
        (None, Some(floor)) => Ok(ValueTest::AtLeast(floor)),
        (Some(text), Some(_)) => Err(refuse(
            format!("{key}.equals"),
            text,
            "give `equals` or `at_least`, not both",
        )),
    }
}

fn pattern(key: &str, value: &str) -> Result<NamePattern, ConventionError> {
    NamePattern::parse(value).ok_or_else(|| {
        refuse(
            key,
            value,
            "a span-name pattern is a non-empty name with at most one `{tool}`, and a `*` only \
             at its start",
        )
    })
}

impl RawAttributeTest {
    fn validate(self, key: &str) -> Result<AttributeTest, ConventionError> {
        Ok(AttributeTest {
            key: attribute_key(&format!("{key}.attribute"), &self.attribute)?,
            test: value_test(key, self.equals, self.at_least)?,
        })
    }
}

impl RawConvention {
    /// The built-in table, in order.
    pub fn built_in() -> Vec<RawConvention> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Table {
            convention: Vec<RawConvention>,
        }
        // The file is part of the build, and `the_built_in_table_is_valid` parses and validates
        // every entry of it: parsing cannot fail at run time.
        #[allow(clippy::expect_used)]
        let table: Table = toml::from_str(BUILT_IN).expect("the built-in conventions parse");
        table.convention
    }

    /// Checks the entry; errors name the key relative to it.
    pub fn validate(self) -> Result<Convention, ConventionError> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= MAX_NAME_BYTES
            && self.name.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.')
            });
        if !name_ok {
            return Err(refuse(
                "name",
                &self.name,
                format!(
                    "a convention's name is 1 to {MAX_NAME_BYTES} lower-case letters, digits, `-`, \
                     `_` or `.`"
                ),
            ));
        }
        let layer = match self.layer.as_str() {
            "genai" => OutcomeSource::Genai,
            "mcp" => OutcomeSource::Mcp,
            "http" => OutcomeSource::Http,
            other => {
                return Err(refuse(
                    "layer",
                    other,
                    "the layer is `genai`, `mcp` or `http`",
                ));
            }
        };
        if self.recognise.is_empty() {
            return Err(refuse(
                "recognise",
                "[]",
                "a convention recognises its spans somehow",
            ));
        }
        let mut recognise = Vec::with_capacity(self.recognise.len());
        for (i, raw) in self.recognise.into_iter().enumerate() {
            let key = format!("recognise[{i}]");
            if raw.attribute.is_none() && raw.span_name.is_none() {
                return Err(refuse(
                    key,
                    "{}",
                    "each way of recognising names an `attribute` or a `span_name` (a kind or a \
                     scope alone would take every span of it)",
                ));
            }
            let attribute = match raw.attribute {
                Some(attribute) => Some(AttributeTest {
                    key: attribute_key(&format!("{key}.attribute"), &attribute)?,
                    test: value_test(&key, raw.equals, raw.at_least)?,
                }),
                None if raw.equals.is_some() || raw.at_least.is_some() => {
                    return Err(refuse(
                        format!("{key}.equals"),
                        raw.equals.unwrap_or_default(),
                        "`equals` and `at_least` test an `attribute`",
                    ));
                }
                None => None,
            };
            let span_name = raw
                .span_name
                .map(|name| pattern(&format!("{key}.span_name"), &name))
                .transpose()?;
            recognise.push(Recognition {
                attribute,
                span_name,
                span_kind: raw.span_kind,
                scope: raw.scope,
            });
        }
        let span_names = self
            .span_names
            .iter()
            .enumerate()
            .map(|(i, name)| pattern(&format!("span_names[{i}]"), name))
            .collect::<Result<Vec<_>, _>>()?;
        let tool_name = attribute_keys("tool_name", self.tool_name)?;
        if layer == OutcomeSource::Http && !tool_name.is_empty() {
            return Err(refuse(
                "tool_name",
                tool_name.join(", "),
                "an `http` call's tool is its method",
            ));
        }
        let tests = |key: &str, raw: Vec<RawAttributeTest>| {
            raw.into_iter()
                .enumerate()
                .map(|(i, test)| test.validate(&format!("{key}[{i}]")))
                .collect::<Result<Vec<_>, _>>()
        };
        let result_markers = self
            .result_markers
            .into_iter()
            .enumerate()
            .map(|(i, raw)| raw.validate(&format!("result_markers[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        let result = attribute_keys("result", self.result)?;
        if result.is_empty() && !result_markers.is_empty() {
            return Err(refuse(
                "result",
                "[]",
                "result markers need the attributes that hold the result",
            ));
        }
        for (key, texts) in [
            ("cancel_types", &self.cancel_types),
            ("cancel_messages", &self.cancel_messages),
        ] {
            if let Some(blank) = texts.iter().find(|text| text.trim().is_empty()) {
                return Err(refuse(key, blank, "a cancellation marker is not blank"));
            }
        }
        Ok(Convention {
            name: self.name,
            layer,
            recognise,
            span_names,
            tool_name,
            call_id: attribute_keys("call_id", self.call_id)?,
            failure: tests("failure", self.failure)?,
            exception_fails: self.exception_fails,
            cancel_types: self.cancel_types,
            cancel_messages: self.cancel_messages,
            cancel: tests("cancel", self.cancel)?,
            result,
            result_markers,
        })
    }
}

impl RawResultMarker {
    fn validate(self, key: &str) -> Result<ResultMarker, ConventionError> {
        match (self.pointer, self.equals, self.template) {
            (Some(pointer), Some(equals), None) => {
                if !(pointer.is_empty() || pointer.starts_with('/')) {
                    return Err(refuse(
                        format!("{key}.pointer"),
                        pointer,
                        "a JSON pointer is empty or starts with `/`",
                    ));
                }
                let equals = match equals {
                    MarkerValue::Bool(b) => serde_json::Value::Bool(b),
                    MarkerValue::Int(n) => serde_json::Value::from(n),
                    MarkerValue::Text(text) => serde_json::Value::String(text),
                };
                Ok(ResultMarker::Pointer { pointer, equals })
            }
            (None, None, Some(template)) if !template.trim().is_empty() && template != "{}" => {
                Ok(ResultMarker::Template(template))
            }
            (None, None, Some(template)) => Err(refuse(
                format!("{key}.template"),
                template,
                "a template holds text beside its `{}` holes",
            )),
            _ => Err(refuse(
                key,
                "{}",
                "a result marker is a `pointer` with `equals`, or a `template`",
            )),
        }
    }
}
