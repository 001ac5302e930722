//! The records of the pipeline's Kafka topics, each declared once ([`crate::record`]).
//!
//! Every record carries `schema_version`; [`RECORD_SCHEMA_VERSION`] is the version written here.
//! Strings that belong to a closed vocabulary (class, kind, action) carry the wire spellings of
//! candor-schema; the collector validates them before producing and readers validate them again.
//! Times are Unix nanoseconds in UTC. Trace and span ids are lower-case hex.
//!
//! `proto/candor/v1/records.proto` is these declarations as protobuf source, for readers of the
//! topics in other languages: [`render_proto`] writes it, and a test keeps the committed file
//! equal to it.

use crate::record::{Declaration, record};

/// The `schema_version` of records written by this build.
pub const RECORD_SCHEMA_VERSION: u32 = 1;

record! {
    /// One `tool.outcome` span event: an AccessFailure attempt or a Partial.
    /// Topic `candor.outcome-events.v1`, keyed by `tool_target`.
    row OutcomeEvent, view EventFields, columns EventColumns {
        /// Deterministic from the OTLP content: a client's retry of the same export gives the
        /// same id.
        event_id: string = 2 => EVENT_ID as Text,
        /// The span's trace id.
        trace_id: string = 3 => TRACE_ID as Text,
        /// The span's id.
        span_id: string = 4 => SPAN_ID as Text,
        /// When the event happened.
        event_time_unix_nano: fixed64 = 5 => EVENT_TIME as Time,
        /// The sender's `service.name`.
        service_name: string = 6 => SERVICE_NAME as Text,
        /// The sender's `service.instance.id`; empty when it has none.
        service_instance_id: string = 7 => SERVICE_INSTANCE_ID as Text,
        /// `access_failure` or `partial`.
        outcome_class: string = 8 => OUTCOME_CLASS as Text,
        /// `tool.name`.
        tool_name: string = 9 => TOOL_NAME as Text,
        /// `tool.target`, credentials removed.
        #[redact(Url)]
        tool_target: string = 10 => TOOL_TARGET as Text,
        /// `tool.failure.kind`.
        failure_kind: string = 11 => FAILURE_KIND as Text,
        /// `tool.retry.action`.
        retry_action: string = 12 => RETRY_ACTION as Text,
        /// `tool.retry.attempt`, from 1.
        retry_attempt: uint32 = 13 => RETRY_ATTEMPT as Long,
        /// `tool.retry.max_attempts`.
        retry_max_attempts: uint32 = 14 => RETRY_MAX_ATTEMPTS as Long,
        /// `tool.retry.backoff_ms`, when another attempt follows.
        retry_backoff_ms: uint64 optional = 15 => RETRY_BACKOFF_MS as OptLong,
        /// `http.response.status_code`, when there was a response.
        http_status_code: uint32 optional = 16 => HTTP_STATUS_CODE as OptInt,
        /// `error.type`, credentials removed.
        #[redact(Text)]
        error_type: string optional = 17 => ERROR_TYPE as OptText,
        /// `tool.partial.returned`.
        partial_returned: uint64 optional = 18 => PARTIAL_RETURNED as OptLong,
        /// `tool.partial.expected`.
        partial_expected: uint64 optional = 19 => PARTIAL_EXPECTED as OptLong,
        /// `tool.coverage`, credentials removed.
        #[redact(Text)]
        coverage: string optional = 20 => COVERAGE as OptText,
        /// `tool.dropped`, credentials removed.
        #[redact(Text)]
        dropped: string optional = 21 => DROPPED as OptText,
        /// `tool.authority`, credentials removed.
        #[redact(Text)]
        authority: string optional = 22 => AUTHORITY as OptText,
        /// When the collector received the request.
        received_time_unix_nano: fixed64 = 23 => RECEIVED_TIME as Time,
        /// The collector that received it.
        collector_id: string = 24 => COLLECTOR_ID as Text,
        /// Where the outcome came from ([`OutcomeSource`]): `adapter` for an adapter's
        /// own event; absent in records written before sources were told apart, all of which
        /// are an adapter's.
        source: string optional = 25 => SOURCE as OptText,
        /// What the failure said, credentials removed and bounded: the status description of
        /// the span of an adapter's call, on the event that ends it; a derived call's span
        /// status, else its `exception.message`.
        #[redact(Text)]
        error_message: string optional = 26 => ERROR_MESSAGE as OptText,
        /// `exception.type` of a derived call's `exception` event.
        #[redact(Text)]
        exception_type: string optional = 27 => EXCEPTION_TYPE as OptText,
        /// `rpc.response.status_code` of a derived call's span (a JSON-RPC error code for MCP),
        /// as sent.
        #[redact(Text)]
        rpc_status_code: string optional = 28 => RPC_STATUS_CODE as OptText,
        /// The tool call's `gen_ai.tool.call.id`: a derived call's own, or, for an adapter's
        /// call, that of the GenAI or MCP call it ran in.
        #[redact(Text)]
        tool_call_id: string optional = 29 => TOOL_CALL_ID as OptText,
        /// The kind of the evidence of the call's outcome (`tool.evidence.kind`; `request_id`
        /// for an HTTP span's captured `X-Request-Id`).
        evidence_kind: string optional = 30 => EVIDENCE_KIND as OptText,
        /// The evidence itself, credentials removed: e.g. the request id to quote to the
        /// tool's owner.
        #[redact(Text)]
        evidence_value: string optional = 31 => EVIDENCE_VALUE as OptText,
        /// The convention a derived call was recognised by (e.g. `openinference`,
        /// `otel-genai`, or a name the collector's configuration declared); absent for an
        /// adapter's own event and in records written before conventions were named.
        convention: string optional = 32 => CONVENTION as OptText,
        /// `tool.provenance.source_system` of an adapter's event: the system that answered.
        #[redact(Text)]
        source_system: string optional = 33 => SOURCE_SYSTEM as OptText,
        /// `tool.provenance.actor` of an adapter's event, credentials removed: who the call
        /// acted for, when the adapter was told.
        #[redact(Text)]
        actor: string optional = 34 => ACTOR as OptText,
        /// `tool.provenance.adapter` of an adapter's event: the implementation and its version.
        adapter: string optional = 35 => ADAPTER as OptText,
    }
}

record! {
    /// One data point of the `tool.outcomes` counter.
    /// Topic `candor.outcome-counts.v1`, keyed by `tool_target`.
    row OutcomeCount, view CountFields, columns CountColumns {
        /// Deterministic from the OTLP content, like `OutcomeEvent.event_id`.
        point_id: string = 2 => POINT_ID as Text,
        /// The sender's `service.name`.
        service_name: string = 3 => SERVICE_NAME as Text,
        /// The sender's `service.instance.id`; empty when it has none.
        service_instance_id: string = 4 => SERVICE_INSTANCE_ID as Text,
        /// `tool.name`.
        tool_name: string = 5 => TOOL_NAME as Text,
        /// `tool.target`, credentials removed.
        #[redact(Url)]
        tool_target: string = 6 => TOOL_TARGET as Text,
        /// The outcome class counted.
        outcome_class: string = 7 => OUTCOME_CLASS as Text,
        /// The start of the point's interval.
        start_time_unix_nano: fixed64 = 8 => START_TIME as Time,
        /// The point's time.
        time_unix_nano: fixed64 = 9 => TIME as Time,
        /// The count, as sent.
        value: uint64 = 10 => VALUE as Long,
        /// How the count aggregates over time, as sent.
        temporality: int32(Temporality) = 11 => TEMPORALITY as TemporalityText,
        /// When the collector received the request.
        received_time_unix_nano: fixed64 = 12 => RECEIVED_TIME as Time,
        /// The collector that received it.
        collector_id: string = 13 => COLLECTOR_ID as Text,
        /// The sender's `candor.adapter.export_interval` in the same export, in milliseconds:
        /// the time until its next export, 0 when this was its final export at shutdown;
        /// absent when the sender does not send the gauge.
        export_interval_ms: uint64 optional = 14 => EXPORT_INTERVAL_MS as OptLong,
        /// Where the count came from ([`OutcomeSource`]), as on `OutcomeEvent.source`.
        source: string optional = 15 => SOURCE as OptText,
        /// The convention a derived count's calls were recognised by, as on
        /// `OutcomeEvent.convention`.
        convention: string optional = 16 => CONVENTION as OptText,
        /// What a derived count knows of how its spans were sampled ([`Sampling`]):
        /// `weighted` (each span carried a sampling threshold, and `value` is the calls they
        /// stand for) or `unknown` (no threshold: `value` counts the spans kept); absent on an
        /// adapter's count, which no sampler thins.
        sampling: string optional = 17 => SAMPLING as OptText,
    }
}

record! {
    /// Input the collector refused. Topic `candor.rejected.v1`.
    message Rejected {
        /// A member of the collector's closed set of rejection reasons, e.g. `unknown_class`.
        reason: string = 2,
        /// What exactly was wrong, e.g. the attribute and (a bounded copy of) its value.
        detail: string = 3,
        /// `traces`, `metrics` or `logs`.
        signal: string = 4,
        /// The sender's `service.name`, when known.
        service_name: string = 5,
        /// A bounded copy of the offending event or data point, JSON-encoded.
        input: bytes = 6,
        /// Whether `input` was cut to the bound.
        input_truncated: bool = 7,
        /// When the collector received the request.
        received_time_unix_nano: fixed64 = 8,
        /// The collector that refused it.
        collector_id: string = 9,
        /// How many events or data points this record stands for: 1, or the number past
        /// `limits.max_events_per_request` in one request (one record for all of them).
        count: uint64 = 10,
    }
}

record! {
    /// A liveness record. Topic `candor.heartbeats.v1`, keyed by `collector_id`.
    ///
    /// A collector's own heartbeat says it was alive at `time_unix_nano`. Beside it, a
    /// sender's heartbeat (`service_name` set) says that the collector heard from that sender,
    /// since its previous heartbeat, about the interval from `time_unix_nano` for
    /// `interval_ms`: what judges a sender seen only through its standard spans for silence.
    row Heartbeat, view HeartbeatFields, columns HeartbeatColumns {
        /// The collector's id.
        collector_id: string = 2 => COLLECTOR_ID as Text,
        /// When the heartbeat was sent; on a sender's heartbeat, the start of the interval its
        /// data fell in.
        time_unix_nano: fixed64 = 3 => TIME as Time,
        /// When the collector started.
        started_time_unix_nano: fixed64 = 4 => STARTED_TIME as Time,
        /// The heartbeat interval; on a sender's heartbeat, the length of its interval (the
        /// collector's heartbeat interval).
        interval_ms: uint64 = 5 => INTERVAL_MS as Long,
        /// Events accepted since the previous heartbeat; 0 on a sender's heartbeat.
        accepted_events: uint64 = 6 => ACCEPTED_EVENTS as Long,
        /// Counter points accepted since the previous heartbeat; 0 on a sender's heartbeat.
        accepted_counts: uint64 = 7 => ACCEPTED_COUNTS as Long,
        /// Events and points refused since the previous heartbeat; 0 on a sender's heartbeat.
        rejected: uint64 = 8 => REJECTED_RECORDS as Long,
        /// On a sender's heartbeat, the sender's `service.name`; absent on a collector's own.
        service_name: string optional = 9 => SERVICE_NAME as OptText,
        /// On a sender's heartbeat, its instance, as on `OutcomeCount.service_instance_id`.
        service_instance_id: string optional = 10 => SERVICE_INSTANCE_ID as OptText,
        /// On a sender's heartbeat, how many spans, log records and metrics it sent whose time
        /// fell in the interval (a span's end, a log record's time, a metrics export's arrival).
        sender_items: uint64 optional = 11 => SENDER_ITEMS as OptLong,
    }
}

impl Heartbeat {
    /// Whether this is a sender's heartbeat, written by a collector beside its own.
    pub fn is_senders(&self) -> bool {
        self.service_name.is_some()
    }
}

record! {
    /// One `tool.lifecycle` event: a state of an asynchronous operation that an adapter's call
    /// saw. Topic `candor.operation-events.v1`, keyed by `operation_id`.
    row OperationEvent, view OperationFields, columns OperationColumns {
        /// Deterministic from the OTLP content, like `OutcomeEvent.event_id`.
        event_id: string = 2 => EVENT_ID as Text,
        /// The span's trace id.
        trace_id: string = 3 => TRACE_ID as Text,
        /// The span's id.
        span_id: string = 4 => SPAN_ID as Text,
        /// When the state was seen.
        event_time_unix_nano: fixed64 = 5 => EVENT_TIME as Time,
        /// The sender's `service.name`.
        service_name: string = 6 => SERVICE_NAME as Text,
        /// The sender's `service.instance.id`; empty when it has none.
        service_instance_id: string = 7 => SERVICE_INSTANCE_ID as Text,
        /// `tool.name`.
        tool_name: string = 8 => TOOL_NAME as Text,
        /// `tool.target`, credentials removed.
        #[redact(Url)]
        tool_target: string = 9 => TOOL_TARGET as Text,
        /// `tool.operation.id`, credentials removed.
        #[redact(Text)]
        operation_id: string = 10 => OPERATION_ID as Text,
        /// `tool.lifecycle.state`.
        lifecycle_state: string = 11 => LIFECYCLE_STATE as Text,
        /// `tool.lifecycle.reason`, credentials removed: why a failed operation failed.
        #[redact(Text)]
        reason: string optional = 12 => LIFECYCLE_REASON as OptText,
        /// `tool.coverage`, credentials removed: what a partial operation did.
        #[redact(Text)]
        coverage: string optional = 13 => COVERAGE as OptText,
        /// `tool.evidence.kind`.
        evidence_kind: string optional = 14 => EVIDENCE_KIND as OptText,
        /// `tool.evidence.value`, credentials removed.
        #[redact(Text)]
        evidence_value: string optional = 15 => EVIDENCE_VALUE as OptText,
        /// `tool.provenance.source_system`.
        source_system: string = 16 => SOURCE_SYSTEM as Text,
        /// `tool.provenance.actor`, credentials removed.
        #[redact(Text)]
        actor: string optional = 17 => ACTOR as OptText,
        /// `tool.provenance.adapter`.
        adapter: string = 18 => ADAPTER as Text,
        /// `tool.authority`, credentials removed.
        #[redact(Text)]
        authority: string optional = 19 => AUTHORITY as OptText,
        /// When the collector received the request.
        received_time_unix_nano: fixed64 = 20 => RECEIVED_TIME as Time,
        /// The collector that received it.
        collector_id: string = 21 => COLLECTOR_ID as Text,
        /// `tool.resource.id`, credentials removed: the resource a completed or partial
        /// operation produced or changed.
        #[redact(Text)]
        resource_id: string optional = 22 => RESOURCE_ID as OptText,
        /// `tool.resource.version`: that resource's version, when its source said.
        resource_version: string optional = 23 => RESOURCE_VERSION as OptText,
    }
}

/// Where an outcome came from: an adapter's own declaration, or a call derived from the
/// telemetry a fleet already emits (issue-level detail in ARCHITECTURE.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OutcomeSource {
    /// A `tool.outcome` event or a `tool.outcomes` point an adapter sent.
    Adapter,
    /// A GenAI `execute_tool` span.
    Genai,
    /// An MCP `tools/call` span.
    Mcp,
    /// An HTTP client span.
    Http,
}

impl OutcomeSource {
    /// Every source.
    pub const ALL: &'static [OutcomeSource] = &[Self::Adapter, Self::Genai, Self::Mcp, Self::Http];

    /// The stored spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Adapter => "adapter",
            Self::Genai => "genai",
            Self::Mcp => "mcp",
            Self::Http => "http",
        }
    }

    /// The source spelled by `bytes`, if any.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|source| source.as_str().as_bytes() == bytes)
    }
}

impl OutcomeSource {
    /// Whether the source is derived from standard telemetry rather than declared by an adapter.
    pub const fn is_derived(self) -> bool {
        !matches!(self, Self::Adapter)
    }
}

/// What a point of `outcome_counts` counts: one of the contract's four classes, or, for a
/// derived source, a call whose class its span cannot tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CountClass {
    /// One of the contract's classes. A derived source counts only `access_failure` this way.
    Outcome(candor_schema::OutcomeClass),
    /// A derived call without error: contact was made, and whether the answer was whole, empty
    /// or cut off, its span cannot say. Never a success.
    Unverified,
    /// A derived call its caller cancelled: not a failure of the tool.
    Cancelled,
    /// An adapter's call whose answer accepted an operation that has not ended (`tool.lifecycle.state`
    /// `accepted`): work accepted, not done, so none of the four classes.
    Accepted,
}

impl CountClass {
    /// The stored spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Outcome(class) => class.as_str(),
            Self::Unverified => "unverified",
            Self::Cancelled => "cancelled",
            Self::Accepted => "accepted",
        }
    }

    /// The class spelled `text` on a point of `source` (`None`: a point written before sources
    /// were told apart, an adapter's), or why it cannot be one.
    pub fn parse(text: &str, source: Option<OutcomeSource>) -> Result<Self, String> {
        let derived = source.is_some_and(OutcomeSource::is_derived);
        let source_name = source.unwrap_or(OutcomeSource::Adapter).as_str();
        let class = match text {
            "unverified" => Self::Unverified,
            "cancelled" => Self::Cancelled,
            "accepted" => Self::Accepted,
            _ => Self::Outcome(text.parse().map_err(|err| format!("{err}"))?),
        };
        let allowed = match class {
            Self::Outcome(candor_schema::OutcomeClass::AccessFailure) => true,
            Self::Outcome(_) | Self::Accepted => !derived,
            Self::Unverified | Self::Cancelled => derived,
        };
        if allowed {
            Ok(class)
        } else {
            Err(format!(
                "class {text:?} is not counted for source {source_name}"
            ))
        }
    }
}

/// What a derived count knows of how its spans were sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Sampling {
    /// Every span counted carried OpenTelemetry's consistent sampling threshold (`th` in the
    /// `ot` entry of its trace state): the count is the calls they stand for, each span weighted
    /// by its adjusted count (the inverse of its sampling probability), rounded.
    Weighted,
    /// The spans carried no threshold: the count is of the spans the sender kept; how many
    /// calls a head sampler left out, or how many a tail sampler's choice added, is unknown.
    Unknown,
}

impl Sampling {
    /// Every state.
    pub const ALL: &'static [Sampling] = &[Self::Weighted, Self::Unknown];

    /// The stored spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Weighted => "weighted",
            Self::Unknown => "unknown",
        }
    }

    /// The state spelled `text`, if any.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|s| s.as_str() == text)
    }
}

/// How a count data point aggregates over time, as sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum Temporality {
    /// Not stated by the sender.
    Unspecified = 0,
    /// Each point counts its own interval.
    Delta = 1,
    /// Each point counts from the start time.
    Cumulative = 2,
}

impl Temporality {
    /// Every value with its protobuf name, for the `.proto` source.
    const VALUES: [(&'static str, Temporality); 3] = [
        ("TEMPORALITY_UNSPECIFIED", Temporality::Unspecified),
        ("TEMPORALITY_DELTA", Temporality::Delta),
        ("TEMPORALITY_CUMULATIVE", Temporality::Cumulative),
    ];
}

/// Every record, in the order of the `.proto` source.
pub const RECORDS: [Declaration; 5] = [
    OutcomeEvent::DECLARATION,
    OutcomeCount::DECLARATION,
    Rejected::DECLARATION,
    Heartbeat::DECLARATION,
    OperationEvent::DECLARATION,
];

/// The records as protobuf source: `proto/candor/v1/records.proto`.
pub fn render_proto() -> String {
    let mut out = String::from(
        "// Records that Candor's pipeline writes to Kafka. Version 1.\n\
         // Generated from schema/records/src/proto.rs, where each record is declared once;\n\
         // a test keeps this file equal to it.\n\
         //\n\
         // Strings that belong to a closed vocabulary (class, kind, action) carry the wire\n\
         // spellings of candor-schema; the collector validates them before producing and readers\n\
         // validate them again. Times are Unix nanoseconds in UTC. Trace and span ids are\n\
         // lower-case hex.\n\
         \n\
         syntax = \"proto3\";\n\
         \n\
         package candor.v1;\n",
    );
    let comment = |out: &mut String, indent: &str, lines: &[&str]| {
        for line in lines {
            out.push_str(&format!("{indent}//{line}\n"));
        }
    };
    for record in RECORDS {
        out.push('\n');
        comment(&mut out, "", record.doc);
        out.push_str(&format!("message {} {{\n", record.name));
        for field in record.fields {
            comment(&mut out, "  ", field.doc);
            let optional = if field.optional { "optional " } else { "" };
            out.push_str(&format!(
                "  {optional}{} {} = {};\n",
                field.proto_type, field.name, field.tag
            ));
        }
        out.push_str("}\n");
    }
    out.push_str(
        "\n// How a count data point aggregates over time, as sent.\nenum Temporality {\n",
    );
    for (name, value) in Temporality::VALUES {
        out.push_str(&format!("  {name} = {};\n", value as i32));
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use prost::Message as _;

    use super::*;
    use crate::record::Redaction;

    #[test]
    fn the_committed_proto_file_is_the_declarations() {
        let committed = include_str!("../proto/candor/v1/records.proto");
        let rendered = render_proto();
        assert!(
            committed == rendered,
            "schema/records/proto/candor/v1/records.proto differs from the declarations; \
             write it again with `cargo test -p candor-records --lib -- --ignored write_proto`:\n{rendered}"
        );
    }

    /// Writes the `.proto` file from the declarations.
    #[test]
    #[ignore = "writes schema/records/proto/candor/v1/records.proto"]
    #[allow(clippy::disallowed_methods)] // a developer's command, not the contract
    fn write_proto() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/proto/candor/v1/records.proto");
        std::fs::write(path, render_proto()).unwrap();
    }

    #[test]
    fn tags_are_distinct_and_rise() {
        for record in RECORDS {
            let tags: Vec<u32> = record.fields.iter().map(|field| field.tag).collect();
            assert!(
                tags.windows(2).all(|w| w[0] < w[1]),
                "{}: {tags:?}",
                record.name
            );
            assert_eq!(tags[0], 1, "{}", record.name);
        }
    }

    /// A field whose documentation promises its credentials are removed is declared
    /// `#[redact(..)]`, which is what the collector acts on; a field declared so is a text.
    #[test]
    fn every_field_promised_redacted_is_declared_redacted() {
        for record in RECORDS {
            for field in record.fields {
                let promised = field.doc.join(" ").contains("credentials removed");
                assert!(
                    !promised || field.redaction.is_some(),
                    "{}.{} says its credentials are removed but is not declared #[redact(..)]",
                    record.name,
                    field.name
                );
                assert!(
                    field.redaction.is_none() || field.proto_type == "string",
                    "{}.{}",
                    record.name,
                    field.name
                );
            }
        }
        let declared = |record: &Declaration| -> Vec<(&str, Redaction)> {
            record
                .fields
                .iter()
                .filter_map(|field| Some((field.name, field.redaction?)))
                .collect()
        };
        assert_eq!(
            declared(&OutcomeCount::DECLARATION),
            [("tool_target", Redaction::Url)]
        );
        let mut count = OutcomeCount {
            tool_target: "t".into(),
            collector_id: "c".into(),
            ..Default::default()
        };
        let mut visited = Vec::new();
        count.for_each_redacted(|how, value| visited.push((how, value.clone())));
        assert_eq!(visited, [(Redaction::Url, "t".to_owned())]);
        // An optional text is passed only when present.
        let mut operation = OperationEvent {
            reason: Some("r".into()),
            ..Default::default()
        };
        let mut visited = Vec::new();
        operation.for_each_redacted(|_, value| visited.push(value.clone()));
        assert_eq!(visited, ["", "", "r"], "tool_target, operation_id, reason");
    }

    #[test]
    fn counts_and_heartbeats_are_written_and_read_as_prost_does() {
        let count = OutcomeCount {
            schema_version: 1,
            point_id: "p".into(),
            tool_target: "é/../x".into(),
            start_time_unix_nano: 7,
            value: u64::MAX,
            temporality: -3,
            collector_id: "c".into(),
            ..Default::default()
        };
        let bytes = CountFields::of(&count).encode();
        assert_eq!(bytes, count.encode_to_vec());
        let view = CountFields::<&str>::parse(&bytes).expect("parses");
        assert_eq!(view.to_record(), count);
        let beat = Heartbeat {
            schema_version: 1,
            collector_id: "c".into(),
            time_unix_nano: 1,
            accepted_events: 300,
            ..Default::default()
        };
        let bytes = HeartbeatFields::of(&beat).encode();
        assert_eq!(bytes, beat.encode_to_vec());
        assert_eq!(
            HeartbeatFields::<&[u8]>::parse(&bytes).map(|view| view.accepted_events),
            Some(300)
        );
    }

    #[test]
    fn records_print_as_json_with_bytes_as_text() {
        let rejected = Rejected {
            reason: "unknown_class".into(),
            input: b"{\"a\":\xff}".to_vec(),
            count: 2,
            ..Default::default()
        };
        let json = serde_json::to_value(&rejected).unwrap();
        assert_eq!(json["input"], "{\"a\":\u{fffd}}");
        assert_eq!(json["count"], 2);
        assert_eq!(json["schema_version"], 0);
    }
}
