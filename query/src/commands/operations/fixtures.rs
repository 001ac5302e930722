//! The events, silences and folded operations the tests of `operations` are built on.

use candor_schema::LifecycleState;

use crate::coverage::InstanceSilence;
use crate::window::Micros;

use super::lifecycle::{Folded, Operation, OperationEventRow};

pub(super) const SECOND: Micros = 1_000_000;
pub(super) const MINUTE: Micros = 60 * SECOND;
pub(super) const STUCK_AFTER: Micros = 15 * MINUTE;

pub(super) fn event<'a>(
    operation_id: &'a str,
    instance: &'a str,
    state: LifecycleState,
    at: Micros,
) -> OperationEventRow<'a> {
    OperationEventRow {
        service: "shop",
        tool: "export",
        target: "https://reports.internal/v1/exports",
        operation_id,
        instance,
        state,
        at,
        actor: None,
        source_system: "reports",
    }
}

pub(super) fn silence(instance: &str, from: Micros, to: Micros) -> InstanceSilence {
    InstanceSilence {
        service: "shop".into(),
        instance: instance.into(),
        seen_by: crate::coverage::SeenBy::Adapter,
        from,
        to,
        every: 10 * SECOND,
    }
}

/// Every operation of `events` ([`Folded::fold`]), in key order.
pub(super) fn latest_states<'a>(
    events: impl IntoIterator<Item = OperationEventRow<'a>>,
) -> Vec<Operation> {
    let mut operations = Folded::default();
    for event in events {
        operations.fold(&event);
    }
    in_key_order(operations)
}

fn in_key_order(operations: Folded) -> Vec<Operation> {
    let mut operations: Vec<Operation> = operations.into_values().collect();
    operations.sort_unstable_by(|a, b| a.key.cmp(&b.key));
    operations
}

pub(super) fn only(events: Vec<OperationEventRow<'_>>) -> Operation {
    only_of(latest_states(events))
}

pub(super) fn only_of(operations: impl IntoIterator<Item = Operation>) -> Operation {
    let mut operations: Vec<Operation> = operations.into_iter().collect();
    assert_eq!(operations.len(), 1, "{operations:?}");
    operations.remove(0)
}
