//! The registry of the contract's telemetry: every attribute of the `tool.outcome` event, the
//! `tool.call` span, the `tool.outcomes` counter and the resource, with its type, requirement
//! level and allowed values; every closed vocabulary with what its members mean; the limits a
//! receiver holds values to.
//!
//! `spec/v1/registry.md` is [`render_markdown`]'s output. A test keeps the committed file equal
//! to it, so the written spec cannot drift from [`crate::names`] and [`crate::vocab`].

use std::fmt::Write as _;

use crate::names::{self, attr, resource};
use crate::vocab::{
    AccessFailureKind, EvidenceKind, FailureKind, LifecycleState, NextAction, OutcomeClass,
    PartialKind, RetryAction,
};

/// The longest attribute value, in bytes, that a receiver must accept (the collector's
/// `limits.max_value_bytes` default).
pub const MAX_VALUE_BYTES: usize = 4096;

/// The most attributes one event or data point may carry that a receiver must accept (the
/// collector's `limits.max_attributes_per_event` default).
pub const MAX_ATTRIBUTES: usize = 128;

/// An attribute's value type on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    /// A string value.
    String,
    /// A 64-bit signed integer value.
    Int,
}

impl ValueType {
    const fn as_str(self) -> &'static str {
        match self {
            ValueType::String => "string",
            ValueType::Int => "int",
        }
    }
}

/// How strongly an attribute is required, in the terms of the OpenTelemetry semantic
/// conventions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requirement {
    /// Always present.
    Required,
    /// Present exactly when the condition holds.
    ConditionallyRequired(&'static str),
    /// Present when the condition holds and the value is known.
    Recommended(&'static str),
}

impl Requirement {
    fn describe(self) -> String {
        match self {
            Requirement::Required => "Required".into(),
            Requirement::ConditionallyRequired(when) => format!("Conditionally Required: {when}"),
            Requirement::Recommended(when) => format!("Recommended: {when}"),
        }
    }
}

/// One attribute of a signal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribute {
    /// Its wire name, from [`crate::names`].
    pub name: &'static str,
    /// Its value type.
    pub value_type: ValueType,
    /// When it is present.
    pub requirement: Requirement,
    /// The values it may take.
    pub values: String,
    /// What it says.
    pub brief: &'static str,
}

/// A span, span event, counter or resource and its attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signal {
    /// The heading: what kind of signal and its name.
    pub title: String,
    /// When it is emitted and what it stands for.
    pub brief: &'static str,
    /// Its attributes.
    pub attributes: Vec<Attribute>,
}

/// One closed vocabulary: its name, the attribute or field that carries it, and its members with
/// their meanings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vocabulary {
    /// The vocabulary's name.
    pub name: &'static str,
    /// Where it appears.
    pub carried_by: &'static str,
    /// Each member's wire spelling and meaning.
    pub members: Vec<(&'static str, &'static str)>,
}

/// Declares how to list a vocabulary's spellings and members from its `ALL`.
macro_rules! vocabulary_of {
    ($vocab:ty, $carried_by:expr) => {
        Vocabulary {
            name: <$vocab>::NAME,
            carried_by: $carried_by,
            members: <$vocab>::ALL
                .iter()
                .map(|member| (member.as_str(), member.meaning()))
                .collect(),
        }
    };
}

/// The spellings of `members`, each in backticks, comma separated.
fn spelled(members: impl IntoIterator<Item = &'static str>) -> String {
    members
        .into_iter()
        .map(|member| format!("`{member}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A text attribute.
fn string(
    name: &'static str,
    requirement: Requirement,
    values: impl Into<String>,
    brief: &'static str,
) -> Attribute {
    Attribute {
        name,
        value_type: ValueType::String,
        requirement,
        values: values.into(),
        brief,
    }
}

/// An integer attribute, declared as [`string`] declares a text one.
fn int(
    name: &'static str,
    requirement: Requirement,
    values: impl Into<String>,
    brief: &'static str,
) -> Attribute {
    Attribute {
        value_type: ValueType::Int,
        ..string(name, requirement, values, brief)
    }
}

/// The attributes that name the call: tool, target and, when known, authority.
fn identity() -> [Attribute; 3] {
    [
        string(
            attr::TOOL_NAME,
            Requirement::Required,
            "not empty",
            "The logical tool name the adapter was built for.",
        ),
        string(
            attr::TOOL_TARGET,
            Requirement::Required,
            "not empty; credentials redacted",
            "The endpoint or resource reached for.",
        ),
        string(
            attr::AUTHORITY,
            Requirement::Recommended("when the adapter was given an authority"),
            "`principal`, `scope=scope` or `principal scope=scope`; never a secret",
            "The principal or scope the call ran under.",
        ),
    ]
}

/// Every signal of the contract with its attributes.
pub fn signals() -> Vec<Signal> {
    let [tool_name, tool_target, authority] = identity();
    let classes = spelled(OutcomeClass::ALL.iter().map(|class| class.as_str()));
    let event = Signal {
        title: format!("Span event `{}`", names::OUTCOME_EVENT),
        brief: "One per attempt that ended as an AccessFailure and one per Partial, on the \
                call's span. Success and Empty attempts emit none.",
        attributes: vec![
            string(
                attr::OUTCOME_CLASS,
                Requirement::Required,
                spelled([
                    OutcomeClass::AccessFailure.as_str(),
                    OutcomeClass::Partial.as_str(),
                ]),
                "The attempt's class.",
            ),
            tool_name.clone(),
            tool_target.clone(),
            string(
                attr::FAILURE_KIND,
                Requirement::Required,
                format!(
                    "for `access_failure`: {}; for `partial`: {}",
                    spelled(AccessFailureKind::ALL.iter().map(|kind| kind.as_str())),
                    spelled(PartialKind::ALL.iter().map(|kind| kind.as_str())),
                ),
                "Why the attempt was not a complete answer.",
            ),
            string(
                attr::RETRY_ACTION,
                Requirement::Required,
                format!(
                    "for `access_failure`: {}; for `partial`: `{}`",
                    spelled([
                        RetryAction::Retry.as_str(),
                        RetryAction::Exhausted.as_str(),
                        RetryAction::Permanent.as_str(),
                    ]),
                    RetryAction::AcceptPartial.as_str()
                ),
                "What the retry policy did after the attempt.",
            ),
            int(
                attr::RETRY_ATTEMPT,
                Requirement::Required,
                "1 to `tool.retry.max_attempts`",
                "The attempt's number, from 1.",
            ),
            int(
                attr::RETRY_MAX_ATTEMPTS,
                Requirement::Required,
                "1 to 4294967295",
                "The most attempts the retry policy allows.",
            ),
            int(
                attr::RETRY_BACKOFF_MS,
                Requirement::ConditionallyRequired("when `tool.retry.action` is `retry`"),
                "0 or more",
                "The wait before the next attempt, in milliseconds.",
            ),
            int(
                attr::HTTP_STATUS_CODE,
                Requirement::ConditionallyRequired("when the attempt received an HTTP status"),
                "an HTTP status code, at most 65535",
                "The response's status.",
            ),
            string(
                attr::ERROR_TYPE,
                Requirement::Recommended("when the attempt ended in an identified error"),
                "low cardinality: a status code as text, or an identifier such as `timeout`",
                "A short, stable error identifier.",
            ),
            int(
                attr::PARTIAL_RETURNED,
                Requirement::Recommended("on a Partial, when the count is known"),
                "0 or more",
                "How many items the Partial returned.",
            ),
            int(
                attr::PARTIAL_EXPECTED,
                Requirement::Recommended("on a Partial, when the source declared it"),
                "0 or more",
                "How many items the source had.",
            ),
            string(
                attr::COVERAGE,
                Requirement::ConditionallyRequired("on a Partial"),
                "human text; credentials redacted",
                "What the answer covered.",
            ),
            string(
                attr::DROPPED,
                Requirement::ConditionallyRequired("on a Partial"),
                "human text; credentials redacted",
                "What the answer dropped.",
            ),
            authority.clone(),
            string(
                attr::EVIDENCE_KIND,
                Requirement::ConditionallyRequired(
                    "on the event that ends a call, when the envelope has evidence",
                ),
                spelled(EvidenceKind::ALL.iter().map(|kind| kind.as_str())),
                "The kind of the evidence that verifies the outcome.",
            ),
            string(
                attr::EVIDENCE_VALUE,
                Requirement::ConditionallyRequired("with `tool.evidence.kind`"),
                "the evidence as the envelope holds it; credentials redacted by the receiver",
                "The evidence itself: a request id, a receipt, a job id or a query.",
            ),
            string(
                attr::PROVENANCE_SOURCE_SYSTEM,
                Requirement::Recommended("always; a receiver accepts an event without it"),
                "not empty; credentials redacted by the receiver",
                "The envelope's `provenance.source_system`: the system that answered.",
            ),
            string(
                attr::PROVENANCE_ACTOR,
                Requirement::Recommended("when the envelope's provenance has an actor"),
                "not empty; credentials redacted by the receiver",
                "The envelope's `provenance.actor`: who made the call.",
            ),
            string(
                attr::PROVENANCE_ADAPTER,
                Requirement::Recommended("always; a receiver accepts an event without it"),
                "`{name}/{version}`",
                "The envelope's `provenance.adapter`: the implementation and its version.",
            ),
        ],
    };
    let states = spelled(LifecycleState::ALL.iter().map(|state| state.as_str()));
    let lifecycle = Signal {
        title: format!("Span event `{}`", names::LIFECYCLE_EVENT),
        brief: "One per state of an asynchronous operation that the call saw, on the call's \
                span, at the moment it was seen: the acceptance, each change of state read while \
                following the operation, and its end.",
        attributes: vec![
            tool_name.clone(),
            tool_target.clone(),
            authority.clone(),
            string(
                attr::OPERATION_ID,
                Requirement::Required,
                "not empty; the envelope's `lifecycle.operation.id`",
                "The operation's stable id.",
            ),
            string(
                attr::LIFECYCLE_STATE,
                Requirement::Required,
                states.clone(),
                "The state the operation was seen in.",
            ),
            string(
                attr::LIFECYCLE_REASON,
                Requirement::ConditionallyRequired("when the state is `failed`"),
                "human text; credentials redacted",
                "Why the operation failed, as its source said.",
            ),
            string(
                attr::COVERAGE,
                Requirement::ConditionallyRequired("when the state is `partial`"),
                "human text; credentials redacted",
                "What the operation did.",
            ),
            string(
                attr::EVIDENCE_KIND,
                Requirement::ConditionallyRequired(
                    "when the state is `accepted` and the acceptance has evidence, or `completed`",
                ),
                spelled(EvidenceKind::ALL.iter().map(|kind| kind.as_str())),
                "The kind of the acceptance's evidence, or of the evidence that verified the \
                 completion.",
            ),
            string(
                attr::EVIDENCE_VALUE,
                Requirement::ConditionallyRequired("with `tool.evidence.kind`"),
                "the evidence as the envelope holds it; credentials redacted by the receiver",
                "The evidence itself: the operation's id, or the read that verified completion.",
            ),
            string(
                attr::RESOURCE_ID,
                Requirement::ConditionallyRequired(
                    "when the state is `completed` or `partial` and names its resource",
                ),
                "the lifecycle's `resource.id`; credentials redacted by the receiver",
                "The resource the operation produced or changed: its id or URL.",
            ),
            string(
                attr::RESOURCE_VERSION,
                Requirement::ConditionallyRequired(
                    "with `tool.resource.id`, when the resource has a version; refused without it",
                ),
                "the lifecycle's `resource.version`",
                "The resource's version as its source said: an `ETag`, a version number.",
            ),
            string(
                attr::PROVENANCE_SOURCE_SYSTEM,
                Requirement::Required,
                "not empty",
                "The envelope's `provenance.source_system`: the system that runs the operation.",
            ),
            string(
                attr::PROVENANCE_ACTOR,
                Requirement::ConditionallyRequired("when the envelope's provenance has an actor"),
                "not empty",
                "The envelope's `provenance.actor`: who made the call.",
            ),
            string(
                attr::PROVENANCE_ADAPTER,
                Requirement::Required,
                "`{name}/{version}`",
                "The envelope's `provenance.adapter`: the implementation and its version.",
            ),
        ],
    };
    let span = Signal {
        title: format!("Span `{}` (kind CLIENT)", names::TOOL_CALL_SPAN),
        brief: "One per call that had an AccessFailure or a Partial attempt, or that accepted \
                or followed an asynchronous operation (every call when the author asked for \
                every call to be traced), with the call's real start and end times and its \
                events.",
        attributes: vec![
            tool_name.clone(),
            tool_target.clone(),
            string(
                attr::OUTCOME_CLASS,
                Requirement::Required,
                classes.clone(),
                "The call's final class.",
            ),
            string(
                attr::FAILURE_KIND,
                Requirement::ConditionallyRequired("when any attempt was not a complete answer"),
                spelled(FailureKind::ALL.iter().map(|kind| kind.as_str())),
                "The kind of the last such attempt; it marks the span for samplers that keep \
                 failures.",
            ),
            string(
                attr::LIFECYCLE_STATE,
                Requirement::ConditionallyRequired("when the envelope has a lifecycle"),
                states,
                "The operation's last state; it marks the span for samplers that keep \
                 operations.",
            ),
            authority,
        ],
    };
    let counter = Signal {
        title: format!(
            "Counter `{}` (monotonic sum, unit `{}`)",
            names::OUTCOMES_COUNTER,
            names::OUTCOMES_COUNTER_UNIT
        ),
        brief: "Every call adds 1 with its final class, but a call whose answer accepted an \
                operation that has not ended, which adds 1 as `accepted` without a class. All four \
                classes are reported from the start, zeros included, so that rates have a \
                denominator.",
        attributes: vec![
            tool_name,
            tool_target,
            string(
                attr::OUTCOME_CLASS,
                Requirement::ConditionallyRequired("unless `tool.lifecycle.state` is present"),
                classes,
                "The call's final class.",
            ),
            string(
                attr::LIFECYCLE_STATE,
                Requirement::ConditionallyRequired(
                    "when the call's answer accepted an operation that has not ended",
                ),
                spelled([LifecycleState::Accepted.as_str()]),
                "The operation's state: counted apart from the classes, never as a success.",
            ),
        ],
    };
    let resource = Signal {
        title: "Resource".into(),
        brief: "The process that hosts the adapter, on every span and data point it exports.",
        attributes: vec![
            string(
                resource::SERVICE_NAME,
                Requirement::Required,
                "not empty",
                "The service that hosts the adapter.",
            ),
            string(
                resource::SERVICE_INSTANCE_ID,
                Requirement::Recommended("always, unique per process"),
                "not empty",
                "The instance of that service; counter series are kept apart by it.",
            ),
        ],
    };
    let export_interval = Signal {
        title: format!(
            "Gauge `{}` (unit `{}`)",
            names::EXPORT_INTERVAL_GAUGE,
            names::EXPORT_INTERVAL_GAUGE_UNIT
        ),
        brief: "Sent in every metric export of an adapter instance, beside `tool.outcomes`, with \
                no attributes: the seconds until the instance's next export, and 0 in its final \
                export at shutdown. A reader tells an instance that stopped exporting (its calls \
                since are unknown) from one that shut down by it (the contract's \
                section 10.6).",
        attributes: Vec::new(),
    };
    vec![event, lifecycle, span, counter, export_interval, resource]
}

/// Every closed vocabulary of the contract.
pub fn vocabularies() -> Vec<Vocabulary> {
    vec![
        vocabulary_of!(
            OutcomeClass,
            "`tool.outcome.class`; the envelope's `outcome.class`"
        ),
        vocabulary_of!(
            FailureKind,
            "`tool.failure.kind`; an attempt's `failure_kind`"
        ),
        vocabulary_of!(AccessFailureKind, "the envelope's `outcome.failure.kind`"),
        vocabulary_of!(PartialKind, "the envelope's `outcome.truncation.kind`"),
        vocabulary_of!(
            RetryAction,
            "`tool.retry.action`; an attempt's `retry_action`"
        ),
        vocabulary_of!(
            LifecycleState,
            "`tool.lifecycle.state`; the envelope's `lifecycle.state`"
        ),
        vocabulary_of!(NextAction, "the envelope's `next_actions`"),
        vocabulary_of!(EvidenceKind, "the envelope's `evidence.kind`"),
    ]
}

/// `spec/v1/registry.md`: the signals, the vocabularies and the limits as Markdown tables.
pub fn render_markdown() -> String {
    let mut out = String::from(
        "# Registry, v1\n\
         \n\
         The attributes and closed vocabularies of the contract ([contract.md](contract.md)).\n\
         This file is generated from `schema/src/registry.rs`, which takes every name from\n\
         `schema/src/names.rs` and every value from `schema/src/vocab.rs`; a test keeps it\n\
         equal to them. Write it again with\n\
         `cargo test -p candor-schema --lib -- --ignored write_registry`.\n",
    );
    for signal in signals() {
        let _ = write!(out, "\n## {}\n\n{}\n", signal.title, signal.brief);
        if signal.attributes.is_empty() {
            continue;
        }
        out.push_str(
            "\n| Attribute | Type | Requirement level | Values | Description |\n\
             |---|---|---|---|---|\n",
        );
        for attribute in signal.attributes {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {} |",
                attribute.name,
                attribute.value_type.as_str(),
                attribute.requirement.describe(),
                attribute.values,
                attribute.brief
            );
        }
    }
    out.push_str("\n## Vocabularies\n\nEvery vocabulary is closed: a value not listed is an error, never a default. Spellings are exact and case-sensitive.\n");
    for vocabulary in vocabularies() {
        let _ = write!(
            out,
            "\n### {} ({})\n\n| Value | Meaning |\n|---|---|\n",
            vocabulary.name, vocabulary.carried_by
        );
        for (spelling, meaning) in vocabulary.members {
            let _ = writeln!(out, "| `{spelling}` | {meaning} |");
        }
    }
    let _ = write!(
        out,
        "\n## Limits\n\n\
         A receiver MUST accept attribute values of up to {MAX_VALUE_BYTES} bytes and up to \
         {MAX_ATTRIBUTES} attributes on one event or data point, and MAY refuse larger ones \
         (with a stated reason, never silently).\n"
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_registry_is_the_declarations() {
        let committed = include_str!("../../spec/v1/registry.md");
        assert!(
            committed == render_markdown(),
            "spec/v1/registry.md differs from schema/src/registry.rs; write it again with \
             `cargo test -p candor-schema --lib -- --ignored write_registry`"
        );
    }

    /// Writes `spec/v1/registry.md` from the declarations.
    #[test]
    #[ignore = "writes spec/v1/registry.md"]
    #[allow(clippy::disallowed_methods)] // a developer's command, not the contract
    fn write_registry() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/v1/registry.md");
        std::fs::write(path, render_markdown()).unwrap_or_else(|err| panic!("{path}: {err}"));
    }

    #[test]
    fn every_attribute_name_is_in_the_registry() {
        let registered: Vec<&str> = signals()
            .iter()
            .flat_map(|signal| signal.attributes.iter().map(|a| a.name))
            .collect();
        let not_attributes = [
            names::TOOL_CALL_SPAN,
            names::OUTCOME_EVENT,
            names::LIFECYCLE_EVENT,
            names::OUTCOMES_COUNTER,
            names::EXPORT_INTERVAL_GAUGE,
            names::topic::OUTCOME_EVENTS,
            names::topic::OUTCOME_COUNTS,
            names::topic::REJECTED,
            names::topic::HEARTBEATS,
            names::topic::OPERATION_EVENTS,
        ];
        for name in names::ALL
            .iter()
            .filter(|name| !not_attributes.contains(name))
        {
            assert!(registered.contains(name), "{name} is not in the registry");
        }
    }

    #[test]
    fn every_member_has_a_meaning() {
        for vocabulary in vocabularies() {
            for (spelling, meaning) in vocabulary.members {
                assert!(
                    meaning.len() > 10 && !meaning.starts_with(' '),
                    "{}: {spelling}: {meaning:?}",
                    vocabulary.name
                );
            }
        }
    }
}
