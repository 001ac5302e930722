//! The events, silences and folded operations the tests of `operations` are built on.

use candor_schema::LifecycleState;

use crate::coverage::InstanceSilence;
use crate::window::Micros;

use super::lifecycle::{Folded, Operation, OperationEventRow, OperationKey, fold};

pub(super) const SECOND: Micros = 1_000_000;
pub(super) const MINUTE: Micros = 60 * SECOND;
pub(super) const STUCK_AFTER: Micros = 15 * MINUTE;

pub(super) fn event(
    operation_id: &str,
    instance: &str,
    state: LifecycleState,
    at: Micros,
) -> OperationEventRow {
    OperationEventRow {
        key: OperationKey {
            service: "shop".into(),
            tool: "export".into(),
            target: "https://reports.internal/v1/exports".into(),
            operation_id: operation_id.into(),
        },
        instance: instance.into(),
        state,
        at,
        actor: None,
        source_system: "reports".into(),
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

/// Every operation of `events` ([`fold`]), in key order.
pub(super) fn latest_states(events: impl IntoIterator<Item = OperationEventRow>) -> Vec<Operation> {
    let mut operations = Folded::default();
    for event in events {
        fold(&mut operations, event);
    }
    in_key_order(operations)
}

fn in_key_order(operations: Folded) -> Vec<Operation> {
    let mut operations: Vec<Operation> = operations.into_values().collect();
    operations.sort_unstable_by(|a, b| a.key.cmp(&b.key));
    operations
}

pub(super) fn only(events: Vec<OperationEventRow>) -> Operation {
    only_of(latest_states(events))
}

pub(super) fn only_of(operations: impl IntoIterator<Item = Operation>) -> Operation {
    let mut operations: Vec<Operation> = operations.into_iter().collect();
    assert_eq!(operations.len(), 1, "{operations:?}");
    operations.remove(0)
}
