//! Asynchronous operations, from the `tool.lifecycle` records: which were accepted and have not
//! ended, and of those which are stuck and which are unknown.
//!
//! The fold of an operation's events and the judgement of an open one are those of
//! `candor operations` ([`Operation`], [`status`], [`totals`]), so that the panel, the alert and
//! the CLI agree: an open operation is `unknown` when the adapter instance that sent its latest
//! event is silent now (nobody is left to report its end), else `stuck` once it has been open for
//! the rule's `after`, else `pending`.
//!
//! Ended operations are kept while their latest event is inside the history; open ones are kept
//! past it, as an operation that never ends stays stuck however old it is. At most
//! [`MAX_OPERATIONS`] are kept: past that the oldest are let go, ended ones first, and counted.

use std::collections::{BTreeMap, HashMap};

use candor_query::commands::{
    OpenStatus, Operation, OperationEventRow, OperationKey, OperationTotals, status, totals,
};
use candor_query::coverage::InstanceSilence;
use candor_query::window::{Micros, serialize_micros};
use candor_records::proto::OperationEvent;
use candor_schema::LifecycleState;
use serde::Serialize;

use crate::view::InstanceRow;

/// The most operations kept.
pub const MAX_OPERATIONS: usize = 100_000;

/// How long an operation stays `pending` before it is `stuck` when no `stuck_operations` rule
/// says: `candor operations`' default.
pub const DEFAULT_STUCK_AFTER: Micros = 15 * 60 * 1_000_000;

/// The operations the stream has shown.
#[derive(Debug, Default)]
pub struct Operations {
    by_key: HashMap<OperationKey, Operation>,
    evicted: u64,
    unknown_states: u64,
}

impl Operations {
    /// Takes in one `tool.lifecycle` record. A state this build does not know is counted and
    /// left out (the decoder refuses such records before they get here).
    pub fn apply(&mut self, record: &OperationEvent) {
        let Ok(state) = record.lifecycle_state.parse::<LifecycleState>() else {
            self.unknown_states += 1;
            return;
        };
        let event = OperationEventRow {
            service: record.service_name.clone(),
            instance: record.service_instance_id.clone(),
            tool: record.tool_name.clone(),
            target: record.tool_target.clone(),
            operation_id: record.operation_id.clone(),
            state,
            at: i64::try_from(record.event_time_unix_nano / 1000).unwrap_or(i64::MAX),
            actor: record.actor.clone(),
            source_system: record.source_system.clone(),
        };
        let key = OperationKey {
            service: event.service.clone(),
            tool: event.tool.clone(),
            target: event.target.clone(),
            operation_id: event.operation_id.clone(),
        };
        match self.by_key.get_mut(&key) {
            Some(operation) => operation.add(event),
            None => {
                self.by_key.insert(key, Operation::of(event));
            }
        }
    }

    /// Lets go of the ended operations whose latest event is before `start`, then of the
    /// oldest past [`MAX_OPERATIONS`], ended ones first.
    pub fn prune(&mut self, start: Micros) {
        self.by_key
            .retain(|_, operation| operation.is_open() || operation.last_seen >= start);
        let excess = self.by_key.len().saturating_sub(MAX_OPERATIONS);
        if excess == 0 {
            return;
        }
        let mut order: Vec<(bool, Micros, OperationKey)> = self
            .by_key
            .iter()
            .map(|(key, operation)| (operation.is_open(), operation.last_seen, key.clone()))
            .collect();
        order.sort_unstable();
        for (_, _, key) in order.into_iter().take(excess) {
            self.by_key.remove(&key);
        }
        self.evicted += u64::try_from(excess).unwrap_or(u64::MAX);
    }

    /// Every operation kept, in no order.
    pub fn iter(&self) -> impl Iterator<Item = &Operation> {
        self.by_key.values()
    }

    /// Operations let go past [`MAX_OPERATIONS`].
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Records left out for a state this build does not know.
    pub fn unknown_states(&self) -> u64 {
        self.unknown_states
    }
}

/// The silences of the adapter instances that are silent now, as `candor operations` reads
/// them: each runs from the instance's newest counter point to `now`.
pub fn silences(instances: &[InstanceRow], now: Micros) -> Vec<InstanceSilence> {
    instances
        .iter()
        .filter(|row| row.silent)
        .map(|row| InstanceSilence {
            service: row.seen.service.to_string(),
            instance: row.seen.instance.to_string(),
            from: row.seen.last,
            to: now,
            every: row.seen.interval_micros.unwrap_or(0),
        })
        .collect()
}

/// Every operation with its status at `now` (`None` once ended).
pub fn judge<'a>(
    operations: &'a Operations,
    silences: &[InstanceSilence],
    now: Micros,
    stuck_after: Micros,
) -> Vec<(&'a Operation, Option<OpenStatus>)> {
    operations
        .iter()
        .map(|operation| {
            let judged = status(operation, silences, now, now, stuck_after);
            (operation, judged)
        })
        .collect()
}

/// An open operation, as the panel shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpenOperation {
    /// The calling service.
    pub service: String,
    /// The adapter instance that sent its latest event.
    pub instance: String,
    /// The tool.
    pub tool: String,
    /// The target.
    pub target: String,
    /// The operation id.
    pub operation_id: String,
    /// Its latest state.
    pub state: &'static str,
    /// Its first event's time.
    #[serde(serialize_with = "serialize_micros")]
    pub first_seen: Micros,
    /// Its latest event's time.
    #[serde(serialize_with = "serialize_micros")]
    pub last_seen: Micros,
    /// The actor, when an event named one.
    pub actor: Option<String>,
    /// The source system.
    pub source_system: String,
    /// Pending, stuck or unknown.
    pub status: OpenStatus,
}

impl OpenOperation {
    fn of(operation: &Operation, status: OpenStatus) -> Self {
        Self {
            service: operation.key.service.clone(),
            instance: operation.instance.clone(),
            tool: operation.key.tool.clone(),
            target: operation.key.target.clone(),
            operation_id: operation.key.operation_id.clone(),
            state: operation.state.as_str(),
            first_seen: operation.first_seen,
            last_seen: operation.last_seen,
            actor: operation.actor.clone(),
            source_system: operation.source_system.clone(),
            status,
        }
    }
}

/// The stuck-operations panel.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OperationsPanel {
    /// How long an open operation is pending before it is stuck.
    pub stuck_after_micros: Micros,
    /// Operations kept, by their latest state and, when open, their status.
    pub totals: OperationTotals,
    /// The share of them that has not completed (ended otherwise, or still open).
    pub never_completed_rate: Option<f64>,
    /// The open operations, stuck ones first, then the oldest first; at most `limit`.
    pub open: Vec<OpenOperation>,
    /// How many rows `open` may hold.
    pub limit: usize,
    /// Operations let go past [`MAX_OPERATIONS`]: the figures do not count them.
    pub evicted: u64,
}

/// The panel of `judged`.
pub fn panel(
    judged: &[(&Operation, Option<OpenStatus>)],
    stuck_after: Micros,
    limit: usize,
    evicted: u64,
) -> OperationsPanel {
    let totals = totals(judged.iter().copied());
    let mut open: Vec<OpenOperation> = judged
        .iter()
        .filter_map(|(operation, status)| status.map(|status| OpenOperation::of(operation, status)))
        .collect();
    open.sort_by(|a, b| {
        (a.status != OpenStatus::Stuck, a.first_seen, &a.operation_id).cmp(&(
            b.status != OpenStatus::Stuck,
            b.first_seen,
            &b.operation_id,
        ))
    });
    open.truncate(limit);
    OperationsPanel {
        stuck_after_micros: stuck_after,
        never_completed_rate: totals.never_completed_rate(),
        totals,
        open,
        limit,
        evicted,
    }
}

/// The stuck operations of `judged` by target: how many, and the oldest.
pub fn stuck_by_target<'a>(
    judged: &[(&'a Operation, Option<OpenStatus>)],
) -> BTreeMap<&'a str, (u64, &'a Operation)> {
    let mut by_target: BTreeMap<&str, (u64, &Operation)> = BTreeMap::new();
    for (operation, status) in judged {
        if *status != Some(OpenStatus::Stuck) {
            continue;
        }
        let entry = by_target
            .entry(operation.key.target.as_str())
            .or_insert((0, operation));
        entry.0 += 1;
        if operation.first_seen < entry.1.first_seen {
            entry.1 = operation;
        }
    }
    by_target
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::{InstanceSeen, MINUTE, SECOND};

    const NOW: Micros = 1_700_000_000 * SECOND;

    fn record(id: &str, instance: &str, state: &str, at: Micros) -> OperationEvent {
        OperationEvent {
            event_id: format!("{id}-{state}"),
            event_time_unix_nano: u64::try_from(at).unwrap() * 1000,
            service_name: "reporting".into(),
            service_instance_id: instance.into(),
            tool_name: "export".into(),
            tool_target: "exports.example".into(),
            operation_id: id.into(),
            lifecycle_state: state.into(),
            source_system: "exports".into(),
            adapter: "candor-rust/0.1.0".into(),
            ..OperationEvent::default()
        }
    }

    fn instance(name: &str, silent: bool) -> InstanceRow {
        InstanceRow {
            seen: InstanceSeen {
                service: Arc::from("reporting"),
                instance: Arc::from(name),
                first: NOW - 60 * MINUTE,
                last: NOW - 30 * MINUTE,
                interval_micros: Some(10 * SECOND),
                stopped: false,
                replaced: false,
            },
            silent,
        }
    }

    fn statuses(
        operations: &Operations,
        instances: &[InstanceRow],
    ) -> Vec<(String, Option<OpenStatus>)> {
        let silences = silences(instances, NOW);
        let mut out: Vec<(String, Option<OpenStatus>)> =
            judge(operations, &silences, NOW, 15 * MINUTE)
                .into_iter()
                .map(|(operation, status)| (operation.key.operation_id.clone(), status))
                .collect();
        out.sort();
        out
    }

    #[test]
    fn open_operations_are_pending_then_stuck_and_unknown_when_their_instance_is_silent() {
        let mut operations = Operations::default();
        for event in [
            record("done", "a", "accepted", NOW - 40 * MINUTE),
            record("done", "a", "completed", NOW - 35 * MINUTE),
            record("young", "a", "accepted", NOW - 5 * MINUTE),
            record("old", "a", "accepted", NOW - 40 * MINUTE),
            record("old", "a", "running", NOW - 20 * MINUTE),
            record("orphan", "gone", "accepted", NOW - 40 * MINUTE),
        ] {
            operations.apply(&event);
        }
        let instances = [instance("a", false), instance("gone", true)];
        assert_eq!(
            statuses(&operations, &instances),
            [
                ("done".to_owned(), None),
                ("old".to_owned(), Some(OpenStatus::Stuck)),
                ("orphan".to_owned(), Some(OpenStatus::Unknown)),
                ("young".to_owned(), Some(OpenStatus::Pending)),
            ]
        );
        let silences = silences(&instances, NOW);
        let judged = judge(&operations, &silences, NOW, 15 * MINUTE);
        let panel = panel(&judged, 15 * MINUTE, 10, operations.evicted());
        assert_eq!(
            (
                panel.totals.completed,
                panel.totals.pending,
                panel.totals.stuck,
                panel.totals.unknown
            ),
            (1, 1, 1, 1)
        );
        assert_eq!(panel.never_completed_rate, Some(0.75));
        let order: Vec<&str> = panel
            .open
            .iter()
            .map(|row| row.operation_id.as_str())
            .collect();
        assert_eq!(
            order,
            ["old", "orphan", "young"],
            "stuck first, then the oldest"
        );
        let stuck = stuck_by_target(&judged);
        assert_eq!(stuck.len(), 1);
        assert_eq!(stuck["exports.example"].0, 1);
        assert_eq!(stuck["exports.example"].1.key.operation_id, "old");
    }

    #[test]
    fn ended_operations_leave_with_the_history_and_open_ones_stay() {
        let mut operations = Operations::default();
        operations.apply(&record("ended", "a", "accepted", NOW - 8 * 60 * MINUTE));
        operations.apply(&record("ended", "a", "failed", NOW - 7 * 60 * MINUTE));
        operations.apply(&record("open", "a", "accepted", NOW - 8 * 60 * MINUTE));
        operations.apply(&record("strange", "a", "paused", NOW));
        operations.prune(NOW - 6 * 60 * MINUTE);
        let kept: Vec<&str> = operations
            .iter()
            .map(|operation| operation.key.operation_id.as_str())
            .collect();
        assert_eq!(kept, ["open"]);
        assert_eq!(operations.unknown_states(), 1);
        assert_eq!(operations.evicted(), 0);
    }

    #[test]
    fn past_the_limit_the_oldest_ended_operations_go_first_and_are_counted() {
        let mut operations = Operations::default();
        let over = 3;
        for n in 0..MAX_OPERATIONS + over {
            let id = format!("op-{n}");
            let at = NOW - MINUTE + i64::try_from(n).unwrap();
            operations.apply(&record(&id, "a", "accepted", at));
            if n < 10 {
                operations.apply(&record(&id, "a", "completed", at));
            }
        }
        operations.prune(NOW - 60 * MINUTE);
        assert_eq!(operations.evicted(), 3);
        assert_eq!(operations.iter().count(), MAX_OPERATIONS);
        let ended = operations
            .iter()
            .filter(|operation| !operation.is_open())
            .count();
        assert_eq!(ended, 7, "the three oldest ended operations went first");
    }
}
