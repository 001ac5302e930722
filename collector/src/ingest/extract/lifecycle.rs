//! One `tool.lifecycle` event into an [`OperationEvent`]: the contract's checks (rule
//! `TELEMETRY-LIFECYCLE`), the deterministic id.

use candor_records::proto::{OperationEvent, RECORD_SCHEMA_VERSION};
use candor_schema::LifecycleState;
use candor_schema::names::attr;

use super::attributes::Key;
use super::outcome::{EventInput, event_id, evidence};
use super::{Received, Refusal, RejectReason, Service, refuse};
use crate::ingest::event::hex;

/// Checks one `tool.lifecycle` event and builds its record.
pub(super) fn lifecycle_event(
    event: EventInput<'_>,
    service: &Service<'_>,
    received: &Received<'_>,
    scratch: &mut Vec<u8>,
) -> Result<OperationEvent, Refusal> {
    let (trace, span, attributes) = event.checked(received.limits)?;
    let state: LifecycleState =
        attributes.required_member(Key::LifecycleState, RejectReason::UnknownKind)?;
    let operation_id = attributes.required_string(Key::OperationId)?;
    if operation_id.is_empty() {
        return Err(refuse(
            RejectReason::MissingAttribute,
            format!("{} is empty", attr::OPERATION_ID),
        ));
    }
    let reason = attributes.string(Key::LifecycleReason)?;
    if state == LifecycleState::Failed && reason.is_none() {
        return Err(refuse(
            RejectReason::MissingAttribute,
            format!("{} is missing for state failed", attr::LIFECYCLE_REASON),
        ));
    }
    let (evidence_kind, evidence_value) = evidence(&attributes)?;
    // Completion is written by evidence (the contract's section 3.4): a completed state
    // without it is no completion.
    if state == LifecycleState::Completed && evidence_kind.is_none() {
        return Err(refuse(
            RejectReason::MissingAttribute,
            format!(
                "{} is missing for state completed: completion needs evidence",
                attr::EVIDENCE_KIND
            ),
        ));
    }
    let owned = |key| attributes.string(key).map(|value| value.map(str::to_owned));
    let resource_id = owned(Key::ResourceId)?;
    let resource_version = owned(Key::ResourceVersion)?;
    // A version says which state of a resource the operation left; without the resource it
    // says nothing.
    if resource_version.is_some() && resource_id.is_none() {
        return Err(refuse(
            RejectReason::MissingAttribute,
            format!(
                "{} is missing: {} names no resource without it",
                attr::RESOURCE_ID,
                attr::RESOURCE_VERSION
            ),
        ));
    }
    Ok(OperationEvent {
        schema_version: RECORD_SCHEMA_VERSION,
        event_id: hex(&event_id(service, event, scratch)),
        trace_id: hex(&trace),
        span_id: hex(&span),
        event_time_unix_nano: event.time_unix_nano,
        service_name: service.name.clone().into_owned(),
        service_instance_id: service.instance.clone().into_owned(),
        tool_name: attributes.required_string(Key::ToolName)?.to_owned(),
        tool_target: attributes.required_string(Key::ToolTarget)?.to_owned(),
        operation_id: operation_id.to_owned(),
        lifecycle_state: state.as_str().to_owned(),
        reason: reason.map(str::to_owned),
        coverage: owned(Key::Coverage)?,
        evidence_kind: evidence_kind.map(|kind| kind.as_str().to_owned()),
        evidence_value: evidence_value.map(str::to_owned),
        resource_id,
        resource_version,
        source_system: attributes
            .required_string(Key::ProvenanceSourceSystem)?
            .to_owned(),
        actor: owned(Key::ProvenanceActor)?,
        adapter: attributes
            .required_string(Key::ProvenanceAdapter)?
            .to_owned(),
        authority: owned(Key::Authority)?,
        received_time_unix_nano: received.time_unix_nano,
        collector_id: received.collector_id.to_owned(),
    })
}
