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
//!
//! Each rule evaluation judges the kept operations once ([`Judged::of`]): its `stuck_operations`
//! rules read that judgement, and it keeps a [`Judgement`] of it in the model for the overview's
//! panel and `/metrics` ([`newest_judgement`]), which so show the operations as the newest
//! evaluation judged them.

use std::borrow::Cow;
use std::collections::BTreeMap;

use candor_query::commands::{
    Folded, OpenStatus, Operation, OperationEventRow, OperationTotals, status, totals,
};
use candor_query::coverage::InstanceSilence;
use candor_query::window::{Micros, serialize_micros};
use candor_records::proto::OperationEvent;
use candor_schema::LifecycleState;
use serde::Serialize;

use crate::instances::{InstanceRow, InstanceSeen, instance_rows, silent_after};
use crate::rules::{Rule, RuleKind};

/// Rows of a top-N table: the overview's tables and the operations panel's open rows.
pub const TOP_ROWS: usize = 20;

/// The most operations kept.
pub const MAX_OPERATIONS: usize = 100_000;

/// How long an operation stays `pending` before it is `stuck` when no `stuck_operations` rule
/// says: `candor operations`' default.
pub const DEFAULT_STUCK_AFTER: Micros = candor_schema::time::STUCK_AFTER_MINUTES * 60 * 1_000_000;

/// The operations the stream has shown, and the newest rule evaluation's judgement of them.
#[derive(Debug, Default)]
pub struct Operations {
    by_key: Folded,
    evicted: u64,
    unknown_states: u64,
    judgement: Option<Judgement>,
}

impl Operations {
    /// Takes in one `tool.lifecycle` record. A state this build does not know is counted and
    /// left out (the decoder refuses such records before they get here).
    pub fn apply(&mut self, record: &OperationEvent) {
        let Ok(state) = record.lifecycle_state.parse::<LifecycleState>() else {
            self.unknown_states += 1;
            return;
        };
        self.by_key.fold(&OperationEventRow {
            service: &record.service_name,
            tool: &record.tool_name,
            target: &record.tool_target,
            operation_id: &record.operation_id,
            instance: &record.service_instance_id,
            state,
            at: i64::try_from(record.event_time_unix_nano / 1000).unwrap_or(i64::MAX),
            actor: record.actor.as_deref(),
            source_system: &record.source_system,
        });
    }

    /// Lets go of the ended operations whose latest event is before `start`, then of the
    /// oldest past [`MAX_OPERATIONS`], ended ones first.
    pub fn prune(&mut self, start: Micros) {
        self.by_key
            .retain(|operation| operation.is_open() || operation.last_seen >= start);
        let excess = self.by_key.len().saturating_sub(MAX_OPERATIONS);
        if excess == 0 {
            return;
        }
        // The `excess` first in this order go; keys are unique, so the order is total and the
        // last of them bounds exactly those.
        let rank = |operation: &Operation| {
            (
                operation.is_open(),
                operation.last_seen,
                operation.key.clone(),
            )
        };
        let mut ranked: Vec<_> = self.by_key.iter().map(rank).collect();
        let (_, last_gone, _) = ranked.select_nth_unstable(excess - 1);
        let last_gone = last_gone.clone();
        // The ranking's copies of the keys go first, so that the texts of the operations let go
        // are let go too.
        drop(ranked);
        self.by_key.retain(|operation| rank(operation) > last_gone);
        self.evicted += u64::try_from(excess).unwrap_or(u64::MAX);
    }

    /// Every operation kept, in no order.
    pub fn iter(&self) -> impl Iterator<Item = &Operation> {
        self.by_key.iter()
    }

    /// Operations let go past [`MAX_OPERATIONS`].
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Records left out for a state this build does not know.
    pub fn unknown_states(&self) -> u64 {
        self.unknown_states
    }

    /// The judgement the newest rule evaluation kept; `None` before the first one.
    pub fn judgement(&self) -> Option<&Judgement> {
        self.judgement.as_ref()
    }

    /// Keeps `judgement` in place of the one before.
    pub fn keep_judgement(&mut self, judgement: Judgement) {
        self.judgement = Some(judgement);
    }
}

/// How long an open operation is pending before the operations panel calls it stuck: the first
/// `stuck_operations` rule's `after`, else [`DEFAULT_STUCK_AFTER`].
pub fn stuck_after(rules: &[Rule]) -> Micros {
    rules
        .iter()
        .find_map(|rule| match rule.kind {
            RuleKind::StuckOperations { after } => Some(after),
            _ => None,
        })
        .unwrap_or(DEFAULT_STUCK_AFTER)
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
            seen_by: row.seen.seen_by,
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
            service: operation.key.service.to_string(),
            instance: operation.instance.to_string(),
            tool: operation.key.tool.to_string(),
            target: operation.key.target.to_string(),
            operation_id: operation.key.operation_id.to_string(),
            state: operation.state.as_str(),
            first_seen: operation.first_seen,
            last_seen: operation.last_seen,
            actor: operation.actor.as_deref().map(str::to_owned),
            source_system: operation.source_system.to_string(),
            status,
        }
    }
}

/// The stuck-operations panel.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OperationsPanel {
    /// How long an open operation is pending before it is stuck.
    pub stuck_after_micros: Micros,
    /// Operations kept, by their latest state and, when open, their status. Serialized without
    /// `silent_failure_rate` and `counted_calls`, which the panel does not compute (they stay
    /// `None` and 0 here): over the operations kept there is no window of counter points to
    /// compute them over, and a `null` rate would read as "no call was counted".
    #[serde(serialize_with = "serialize_operation_figures")]
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

/// Serializes the operation figures of `totals` only: `seen`, the four ended states, `pending`,
/// `stuck` and `unknown`.
///
/// `silent_failure_rate` and `counted_calls` are left out. `candor operations` fills them from
/// the adapters' counter points over the window it reads; the panel counts every operation kept,
/// over no such window, and does not compute them, so that a `null` rate there would be read as
/// "no call was counted" when it means "not computed".
fn serialize_operation_figures<S: serde::Serializer>(
    totals: &OperationTotals,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    /// The fields serialized, in the order of [`OperationTotals`].
    #[derive(Serialize)]
    struct Figures {
        seen: u64,
        completed: u64,
        partial: u64,
        cancelled: u64,
        failed: u64,
        pending: u64,
        stuck: u64,
        unknown: u64,
    }
    // Every field named, so that one added to the totals is decided on here.
    let OperationTotals {
        seen,
        completed,
        partial,
        cancelled,
        failed,
        pending,
        stuck,
        unknown,
        silent_failure_rate: _,
        counted_calls: _,
    } = *totals;
    Figures {
        seen,
        completed,
        partial,
        cancelled,
        failed,
        pending,
        stuck,
        unknown,
    }
    .serialize(serializer)
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

/// The operations of `judged` (judged at `now`) that are stuck at `now` for `stuck_after`, by
/// target: how many, and the oldest.
///
/// An open operation whose adapter instance still reports (its status is not
/// [`OpenStatus::Unknown`]) is stuck once `now` is `stuck_after` or more after it was first seen:
/// [`status`]' judgement with that `stuck_after`, whatever `after` `judged` was judged by. So
/// operations judged once serve every `stuck_operations` rule.
pub fn stuck_by_target<'a>(
    judged: &[(&'a Operation, Option<OpenStatus>)],
    now: Micros,
    stuck_after: Micros,
) -> BTreeMap<&'a str, (u64, &'a Operation)> {
    let mut by_target: BTreeMap<&str, (u64, &Operation)> = BTreeMap::new();
    for (operation, status) in judged {
        let open_and_reported = matches!(status, Some(OpenStatus::Pending | OpenStatus::Stuck));
        if !open_and_reported || now.saturating_sub(operation.first_seen) < stuck_after {
            continue;
        }
        let entry = by_target
            .entry(&*operation.key.target)
            .or_insert((0, operation));
        entry.0 += 1;
        if operation.first_seen < entry.1.first_seen {
            entry.1 = operation;
        }
    }
    by_target
}

/// The kept operations of a model judged at one instant, borrowed from it: what one rule
/// evaluation judges once, for its `stuck_operations` rules and for the [`Judgement`] it keeps.
#[derive(Debug)]
pub struct Judged<'a> {
    /// When they were judged.
    pub now: Micros,
    /// How long an open operation was pending before it was judged stuck ([`stuck_after`]).
    pub stuck_after: Micros,
    /// Every operation kept, with its status (`None` once ended).
    pub statuses: Vec<(&'a Operation, Option<OpenStatus>)>,
}

impl<'a> Judged<'a> {
    /// The `operations` kept, judged at `now` by `rules`: the silences are those of the
    /// adapter `instances` silent at `now` (by the first `adapter_silent` rule's `after`, as the
    /// overview's instances), and an open operation is stuck after [`stuck_after`].
    pub fn of(
        operations: &'a Operations,
        instances: Vec<InstanceSeen>,
        rules: &[Rule],
        now: Micros,
    ) -> Self {
        let instances = instance_rows(instances, now, silent_after(rules));
        let silences = silences(&instances, now);
        let stuck_after = stuck_after(rules);
        Self {
            now,
            stuck_after,
            statuses: judge(operations, &silences, now, stuck_after),
        }
    }

    /// What the overview and `/metrics` read of these statuses, owned: the operations panel (at
    /// most [`TOP_ROWS`] open rows, `evicted` operations let go) and the open operations per
    /// series.
    pub fn judgement(&self, evicted: u64) -> Judgement {
        let mut open: BTreeMap<(&str, &str, &str), OpenFigures> = BTreeMap::new();
        for (operation, status) in &self.statuses {
            let Some(status) = status else { continue };
            let key = &operation.key;
            let figures = open
                .entry((&key.service, &key.tool, &key.target))
                .or_default();
            if *status == OpenStatus::Unknown {
                figures.silent += 1;
            } else {
                figures.reporting += 1;
                let first = figures.oldest_reporting.get_or_insert(operation.first_seen);
                *first = (*first).min(operation.first_seen);
            }
        }
        Judgement {
            at: self.now,
            panel: panel(&self.statuses, self.stuck_after, TOP_ROWS, evicted),
            open: open
                .into_iter()
                .map(|((service, tool, target), figures)| {
                    (
                        (service.to_owned(), tool.to_owned(), target.to_owned()),
                        figures,
                    )
                })
                .collect(),
        }
    }
}

/// The open operations of one service, tool and target.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenFigures {
    /// Open, and the adapter instance that sent their latest event still reports.
    pub reporting: i64,
    /// Open, and that instance went silent: whether they ended is unknown.
    pub silent: i64,
    /// When the oldest of the `reporting` ones was first seen; `None` without any.
    pub oldest_reporting: Option<Micros>,
}

/// The operations as one rule evaluation judged them ([`Judged::judgement`]), kept in the model
/// for the readers that come after it: the overview's operations panel and the open-operation
/// figures of `/metrics`.
///
/// Those readers show the operations as the newest evaluation (every `alerts.evaluate_every`)
/// judged them, not as they stand when read: an operation that ended, turned stuck, or whose
/// adapter instance went silent since then shows so from the next evaluation on.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    /// When the operations were judged.
    pub at: Micros,
    /// The operations panel, stuck by [`stuck_after`] of the rules.
    pub panel: OperationsPanel,
    /// The open operations by service, tool and target (only those with an open one).
    pub open: BTreeMap<(String, String, String), OpenFigures>,
}

/// The judgement of the `operations` kept that the newest rule evaluation kept; before the
/// first evaluation, the operations judged at `now` by `rules` with the adapter `instances`
/// (asked only then).
pub fn newest_judgement<'a>(
    operations: &'a Operations,
    instances: impl FnOnce() -> Vec<InstanceSeen>,
    rules: &[Rule],
    now: Micros,
) -> Cow<'a, Judgement> {
    match operations.judgement() {
        Some(kept) => Cow::Borrowed(kept),
        None => Cow::Owned(
            Judged::of(operations, instances(), rules, now).judgement(operations.evicted()),
        ),
    }
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
                seen_by: candor_query::coverage::SeenBy::Adapter,
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
                .map(|(operation, status)| (operation.key.operation_id.to_string(), status))
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
        let stuck = stuck_by_target(&judged, NOW, 15 * MINUTE);
        assert_eq!(stuck.len(), 1);
        assert_eq!(stuck["exports.example"].0, 1);
        assert_eq!(&*stuck["exports.example"].1.key.operation_id, "old");
        // Judged once, the operations serve a rule of another `after`: the young one is stuck
        // after 5 minutes, and the orphan, whose instance went silent, never is.
        let sooner = stuck_by_target(&judged, NOW, 5 * MINUTE);
        assert_eq!(sooner["exports.example"].0, 2);
        assert_eq!(&*sooner["exports.example"].1.key.operation_id, "old");
        assert!(stuck_by_target(&judged, NOW, 60 * MINUTE).is_empty());
        // What the overview and `/metrics` read: the panel, and the open ones per series.
        let expected = super::panel(&judged, 15 * MINUTE, TOP_ROWS, operations.evicted());
        let judgement = Judged {
            now: NOW,
            stuck_after: 15 * MINUTE,
            statuses: judged,
        }
        .judgement(operations.evicted());
        assert_eq!(judgement.at, NOW);
        assert_eq!(judgement.panel, expected);
        let series = (
            "reporting".to_owned(),
            "export".to_owned(),
            "exports.example".to_owned(),
        );
        assert_eq!(
            judgement.open.get(&series),
            Some(&OpenFigures {
                reporting: 2,
                silent: 1,
                oldest_reporting: Some(NOW - 40 * MINUTE),
            })
        );
        assert_eq!(judgement.open.len(), 1);
    }

    #[test]
    fn the_panel_serializes_the_operation_figures_without_a_rate_it_did_not_compute() {
        let json = serde_json::to_value(panel(&[], 15 * MINUTE, 10, 0)).expect("serializable");
        let totals = json["totals"]
            .as_object()
            .expect("the totals are an object");
        assert!(
            !totals.contains_key("silent_failure_rate") && !totals.contains_key("counted_calls"),
            "{json}"
        );
        assert_eq!(totals.len(), 8, "{json}");
        assert_eq!(json["totals"]["stuck"], 0, "{json}");
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
            .map(|operation| &*operation.key.operation_id)
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
