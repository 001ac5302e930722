//! The counters `/metrics` serves (`candor_tool_outcomes_total`, `candor_failure_events_total`,
//! `candor_rejected_records_total`), kept continuous across restarts.
//!
//! A counter Prometheus sees fall reads as a reset: every increase after it is added to what
//! came before. So a restart must not serve less than the process before it served. The totals
//! are stored with the offsets they hold ([`StoredTotals`]: every record of a partition before
//! its offset is counted in them). A start restores them, replays the history as always, and
//! adds a record to the totals only when it lies at or past its partition's stored offset, so
//! that after the replay the totals hold every record once: those counted before the restart
//! and those after. While the replay runs, `/metrics` leaves these counters out
//! ([`crate::state::Shared::history_ready`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use candor_records::proto::CountClass;
use candor_records::proto::OutcomeSource;
use candor_records::rows::Meta;
use candor_records::tables::Table;
use candor_schema::OutcomeClass;
use serde::{Deserialize, Serialize};

use super::{CallKey, FailureKey, Model, Tallies};

/// The next offset of each topic's partitions.
pub type Positions = BTreeMap<(Table, i32), i64>;

/// The totals, by the model's interned ids, and the offsets they hold.
#[derive(Debug, Default)]
pub(super) struct Totals {
    /// Calls per call id and class.
    pub outcomes: HashMap<(u32, CountClass), u64>,
    /// Failure events per failure id.
    pub failures: HashMap<u32, u64>,
    /// Records refused, by reason.
    pub rejected: BTreeMap<String, u64>,
    /// Restored: every record before these offsets is in the totals already.
    counted_before: Positions,
    /// The offset after the newest record applied, per partition (at least `counted_before`).
    applied: Positions,
}

impl Totals {
    /// Notes a record read from `origin` at `meta` as applied; whether it adds to the totals
    /// (it was not counted before the restart).
    pub fn admit(&mut self, origin: Table, meta: &Meta) -> bool {
        let key = (origin, meta.partition);
        let next = self.applied.entry(key).or_insert(0);
        *next = (*next).max(meta.offset.saturating_add(1));
        meta.offset >= self.counted_before.get(&key).copied().unwrap_or(0)
    }

    /// The offsets the totals hold.
    pub fn applied(&self) -> &Positions {
        &self.applied
    }

    /// The totals as they stand, with the label sets of their ids from `tallies`.
    pub fn counters(&self, tallies: &Tallies) -> Counters {
        Counters {
            outcomes: self.outcomes.clone(),
            failures: self.failures.clone(),
            rejected: self.rejected.clone(),
            calls: Arc::clone(&tallies.calls),
            failure_keys: Arc::clone(&tallies.failure_keys),
        }
    }

    /// Takes restored totals' offsets.
    pub fn restore_positions(&mut self, positions: Positions) {
        self.applied.clone_from(&positions);
        self.counted_before = positions;
    }
}

/// The totals at one instant, as a value: what `/metrics` serves.
#[derive(Debug, Clone, Default)]
pub struct Counters {
    outcomes: HashMap<(u32, CountClass), u64>,
    failures: HashMap<u32, u64>,
    rejected: BTreeMap<String, u64>,
    calls: Arc<Vec<CallKey>>,
    failure_keys: Arc<Vec<FailureKey>>,
}

impl Counters {
    /// Calls per service, tool, target and class, all told (restored totals included): the
    /// `candor_tool_outcomes_total` counters.
    pub fn outcomes(&self) -> impl Iterator<Item = (&CallKey, CountClass, u64)> {
        // Every id in the totals was interned, which pushed its key.
        self.outcomes
            .iter()
            .map(|((call, class), total)| (&self.calls[*call as usize], *class, *total))
    }

    /// Failure events per label set, all told.
    pub fn failures(&self) -> impl Iterator<Item = (&FailureKey, u64)> {
        // As for the calls.
        self.failures
            .iter()
            .map(|(key, total)| (&self.failure_keys[*key as usize], *total))
    }

    /// Records the decoder refused, by reason, all told.
    pub fn rejected(&self) -> &BTreeMap<String, u64> {
        &self.rejected
    }
}

/// The totals as stored: label values rather than ids, and the offsets they hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredTotals {
    /// When they were saved, in microseconds: a start reads the tables from then on too, so
    /// that records past the offsets are counted even once they left the history window.
    #[serde(default)]
    pub saved_at: Option<i64>,
    /// Topic, partition and the offset after the newest record counted.
    pub positions: Vec<(String, i32, i64)>,
    /// Calls: service, tool, target, source, class and the total.
    pub outcomes: Vec<(String, String, String, String, String, u64)>,
    /// Failure events: service, tool, target, source, class, kind, action and the total.
    pub failures: Vec<StoredFailure>,
    /// Records refused, by reason.
    pub rejected: BTreeMap<String, u64>,
}

/// One failure series' total, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredFailure {
    /// `service.name`.
    pub service: String,
    /// The tool.
    pub tool: String,
    /// The target.
    pub target: String,
    /// Where the calls were recorded.
    pub source: String,
    /// `partial` or `access_failure`.
    pub class: String,
    /// The failure kind.
    pub kind: String,
    /// The retry action.
    pub action: String,
    /// Events counted.
    pub total: u64,
}

impl StoredTotals {
    /// The stored offsets, by topic; entries of a topic this build does not know are left out.
    pub fn positions(&self) -> Positions {
        self.positions
            .iter()
            .filter_map(|(topic, partition, next)| {
                Some(((Table::from_topic(topic)?, *partition), *next))
            })
            .collect()
    }
}

impl Model {
    /// The totals with the offsets they hold, to be stored.
    pub fn stored_totals(&self) -> StoredTotals {
        let counters = self.counters();
        let outcomes = counters
            .outcomes()
            .map(|(call, class, total)| {
                (
                    call.service.to_string(),
                    call.tool.to_string(),
                    call.target.to_string(),
                    call.source.to_string(),
                    class.as_str().to_owned(),
                    total,
                )
            })
            .collect();
        let failures = counters
            .failures()
            .map(|(key, total)| StoredFailure {
                service: key.call.service.to_string(),
                tool: key.call.tool.to_string(),
                target: key.call.target.to_string(),
                source: key.call.source.to_string(),
                class: key.class.as_str().to_owned(),
                kind: key.kind.to_string(),
                action: key.action.to_string(),
                total,
            })
            .collect();
        StoredTotals {
            saved_at: None,
            positions: self
                .totals
                .applied()
                .iter()
                .map(|(&(table, partition), &next)| (table.topic().to_owned(), partition, next))
                .collect(),
            outcomes,
            failures,
            rejected: self.totals.rejected.clone(),
        }
    }

    /// Starts from stored totals: records before their offsets add nothing more to them. Call
    /// before the first record is applied. Returns the series left out (a class, source or
    /// kind this build does not know).
    pub fn restore_totals(&mut self, stored: StoredTotals) -> usize {
        let mut unknown = 0;
        self.totals.restore_positions(stored.positions());
        for (service, tool, target, source, class, total) in stored.outcomes {
            let parsed = OutcomeSource::from_bytes(source.as_bytes())
                .and_then(|parsed| CountClass::parse(&class, Some(parsed)).ok());
            let Some(class) = parsed else {
                unknown += 1;
                continue;
            };
            let call = self.call_key(&service, &tool, &target, &source);
            let call = self.call_id(call);
            *self.totals.outcomes.entry((call, class)).or_default() += total;
        }
        for stored in stored.failures {
            let Ok(class) = stored.class.parse::<OutcomeClass>() else {
                unknown += 1;
                continue;
            };
            let failure = FailureKey {
                call: self.call_key(
                    &stored.service,
                    &stored.tool,
                    &stored.target,
                    &stored.source,
                ),
                class,
                kind: self.name(&stored.kind),
                action: self.name(&stored.action),
            };
            let failure = self.failure_id(failure);
            *self.totals.failures.entry(failure).or_default() += stored.total;
        }
        for (reason, total) in stored.rejected {
            *self.totals.rejected.entry(reason).or_default() += total;
        }
        unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candor_records::tables::Arrival;

    fn at(partition: i32, offset: i64) -> Meta {
        Meta {
            partition,
            offset,
            kafka_micros: 0,
            arrival: Arrival::OnTime,
        }
    }

    #[test]
    fn records_before_the_restored_offsets_are_not_counted_again() {
        let mut totals = Totals::default();
        totals.restore_positions(Positions::from([((Table::OutcomeCounts, 0), 10)]));
        assert!(!totals.admit(Table::OutcomeCounts, &at(0, 9)));
        assert!(totals.admit(Table::OutcomeCounts, &at(0, 10)));
        // Another partition and another topic start from nothing counted.
        assert!(totals.admit(Table::OutcomeCounts, &at(1, 0)));
        assert!(totals.admit(Table::OutcomeEvents, &at(0, 3)));
        assert_eq!(
            totals.applied(),
            &Positions::from([
                ((Table::OutcomeEvents, 0), 4),
                ((Table::OutcomeCounts, 0), 11),
                ((Table::OutcomeCounts, 1), 1),
            ])
        );
    }
}
