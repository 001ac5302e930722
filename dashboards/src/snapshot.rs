//! What presentation reads: an immutable [`Snapshot`] of everything the pages, the JSON API and
//! `/metrics` show, taken from the shared state at one instant and published ([`Published`]).
//!
//! The alert loop publishes one right after every rule evaluation, so that an alert's page and
//! its notification's acknowledgement link agree; between evaluations one is published every
//! [`PUBLISH_EVERY`] ([`crate::engine::publish`]), and an acknowledgement publishes one after it
//! changed an alert. A request reads the newest snapshot and takes none of the model's, the
//! alerts' or the pipeline's locks: a slow page or scrape never holds up the stream or the
//! rules, and every figure of one answer is of the same instant, the snapshot's [`Snapshot::at`].
//!
//! Taking one is cheap: the model's counts are shared, not copied ([`Tallies`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use candor_query::rates::SpikeRule;
use candor_query::window::Micros;

use crate::access::Refusal;
use crate::alerts::Alert;
use crate::health::Hop;
use crate::instances::{InstanceSeen, silent_after};
use crate::model::{Applied, CollectorSeen, Counters, ModelSettings, Tallies};
use crate::operations::{Judgement, newest_judgement};
use crate::reconcile::ReconcileState;
use crate::rules::RuleKind;
use crate::state::{PipelineInputs, Shared};
use crate::sync::lock;

/// How often a snapshot is published between rule evaluations: how old, at most, what a page
/// shows is.
pub const PUBLISH_EVERY: Duration = Duration::from_secs(1);

/// The spike rule the overview shows spikes by: the first `access_failure_spike` rule's, or
/// the defaults of one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpikeView {
    /// The recent window.
    pub window: Micros,
    /// The baseline before it.
    pub baseline: Micros,
    /// The factor and minimum.
    pub rule: SpikeRule,
}

/// A successful and a failed count of one of the dashboards' own actions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcomes {
    /// Done.
    pub done: u64,
    /// Failed.
    pub failed: u64,
}

impl Outcomes {
    fn of(done: &AtomicU64, failed: &AtomicU64) -> Self {
        Self {
            done: done.load(Ordering::Relaxed),
            failed: failed.load(Ordering::Relaxed),
        }
    }
}

/// The dashboards' own counts at the snapshot's instant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnCounts {
    /// Notifications delivered and failed.
    pub notifications: Outcomes,
    /// Writes of the alert instances to the state store.
    pub state_saves: Outcomes,
    /// Writes of the counters to the state store.
    pub counter_saves: Outcomes,
    /// Reads of the Alertmanager receivers' silences.
    pub silence_reads: Outcomes,
    /// Requests refused, by why.
    pub refusals: Vec<(Refusal, u64)>,
}

/// Everything presentation shows, at one instant.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// When it was taken: the "now" of every answer built from it.
    pub at: Micros,
    /// When the dashboards started.
    pub started: Micros,
    /// The model's history and step.
    pub settings: ModelSettings,
    /// Whether the model holds its whole history ([`Shared::history_ready`]).
    pub history_ready: bool,
    /// From when the model holds every record ([`crate::model::Model::holds_from`]).
    pub holds_from: Option<Micros>,
    /// Every hop's freshness.
    pub hops: Vec<Hop>,
    /// What the consumer and the table watcher saw.
    pub pipeline: PipelineInputs,
    /// The counts per bucket.
    pub tallies: Tallies,
    /// The counters `/metrics` serves.
    pub counters: Counters,
    /// Every adapter instance seen.
    pub instances: Vec<InstanceSeen>,
    /// Every collector seen.
    pub collectors: Vec<CollectorSeen>,
    /// What the model did with the records.
    pub applied: Applied,
    /// The operations as the newest rule evaluation judged them (judged at [`Snapshot::at`]
    /// before the first evaluation).
    pub operations: Judgement,
    /// Operations evicted from the model since start.
    pub operations_evicted: u64,
    /// The alert instances, firing first.
    pub alerts: Vec<Alert>,
    /// What reconciliation found.
    pub reconcile: ReconcileState,
    /// The spike rule the overview shows.
    pub spike: SpikeView,
    /// After how long without a point an adapter instance is silent.
    pub silent_after: Micros,
    /// Whether any webhook is configured.
    pub has_receivers: bool,
    /// The dashboards' own counts.
    pub own: OwnCounts,
}

impl Snapshot {
    /// Takes one from `shared` at `now`, one lock at a time: the pipeline's inputs once, then
    /// the model once, so the hops, the readiness and the figures come from one reading of each.
    pub fn take(shared: &Shared, now: Micros) -> Self {
        let pipeline = lock(&shared.pipeline).clone();
        let history_ready = shared.history_ready_in(&pipeline, now);
        let model = lock(&shared.model);
        let hops = shared.hops_in(&pipeline, model.newest_heartbeat(), now);
        let instances = model.instances();
        let operations =
            newest_judgement(model.operations(), || instances.clone(), &shared.rules, now)
                .into_owned();
        let settings = model.settings();
        let holds_from = model.holds_from(now);
        let tallies = model.tallies().clone();
        let counters = model.counters();
        let collectors = model.collectors().cloned().collect();
        let applied = model.applied();
        let operations_evicted = model.operations().evicted();
        drop(model);
        let alerts = lock(&shared.alerts).list();
        let reconcile = lock(&shared.reconcile).clone();
        let own = OwnCounts {
            notifications: Outcomes::of(
                &shared.notifications.delivered,
                &shared.notifications.failed,
            ),
            state_saves: Outcomes::of(&shared.state_saves.saved, &shared.state_saves.failed),
            counter_saves: Outcomes::of(&shared.counter_saves.saved, &shared.counter_saves.failed),
            silence_reads: Outcomes::of(&shared.silence_reads.read, &shared.silence_reads.failed),
            refusals: shared.access.refusals().to_vec(),
        };
        Self {
            at: now,
            started: shared.started,
            settings,
            history_ready,
            holds_from,
            hops,
            pipeline,
            tallies,
            counters,
            instances,
            collectors,
            applied,
            operations,
            operations_evicted,
            alerts,
            reconcile,
            spike: spike_view(shared),
            silent_after: silent_after(&shared.rules),
            has_receivers: shared.has_receivers,
            own,
        }
    }

    /// The rejected records by reason, all told.
    pub fn rejected(&self) -> &BTreeMap<String, u64> {
        self.counters.rejected()
    }
}

/// The first spike rule's window, baseline, factor and minimum; a 5-minute window over an
/// hour's baseline, 3× and 10 events without one.
fn spike_view(shared: &Shared) -> SpikeView {
    shared
        .rules
        .iter()
        .find_map(|rule| match rule.kind {
            RuleKind::Spike {
                window,
                baseline,
                factor,
                min_events,
            } => Some(SpikeView {
                window,
                baseline,
                rule: SpikeRule { factor, min_events },
            }),
            _ => None,
        })
        .unwrap_or(SpikeView {
            window: 5 * 60_000_000,
            baseline: 60 * 60_000_000,
            rule: SpikeRule {
                factor: 3.0,
                min_events: 10,
            },
        })
}

/// Where the newest snapshot is kept: cloned into each publisher and into the web server.
#[derive(Debug, Clone)]
pub struct Published {
    newest: Arc<Mutex<Arc<Snapshot>>>,
}

impl Published {
    /// Starts with `first`.
    pub fn new(first: Snapshot) -> Self {
        Self {
            newest: Arc::new(Mutex::new(Arc::new(first))),
        }
    }

    /// The newest snapshot. The lock is held only to clone a pointer.
    pub fn newest(&self) -> Arc<Snapshot> {
        Arc::clone(&lock(&self.newest))
    }

    /// Takes a snapshot of `shared` at `now` and publishes it, unless a snapshot taken later
    /// was published meanwhile.
    pub fn publish(&self, shared: &Shared, now: Micros) {
        let taken = Arc::new(Snapshot::take(shared, now));
        let mut newest = lock(&self.newest);
        if taken.at >= newest.at {
            *newest = taken;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{MINUTE, Model};

    fn shared() -> Shared {
        Shared::new(
            Model::new(ModelSettings::default()),
            Default::default(),
            Vec::new(),
            Arc::new(crate::access::Access::open()),
            0,
        )
    }

    #[test]
    fn a_snapshot_taken_earlier_never_replaces_a_later_one() {
        let shared = shared();
        let published = Published::new(Snapshot::take(&shared, 0));
        published.publish(&shared, 10 * MINUTE);
        published.publish(&shared, 5 * MINUTE);
        assert_eq!(published.newest().at, 10 * MINUTE);
        published.publish(&shared, 11 * MINUTE);
        assert_eq!(published.newest().at, 11 * MINUTE);
    }

    #[test]
    fn a_snapshot_keeps_its_instant_while_the_state_moves_on() {
        let shared = shared();
        let taken = Snapshot::take(&shared, MINUTE);
        assert!(!taken.history_ready);
        shared
            .notifications
            .delivered
            .fetch_add(1, Ordering::Relaxed);
        {
            let mut pipeline = lock(&shared.pipeline);
            pipeline.history_read = Some(MINUTE);
            pipeline.caught_up = true;
        }
        assert_eq!(taken.own.notifications, Outcomes::default());
        assert!(!taken.history_ready);
        let later = Snapshot::take(&shared, 2 * MINUTE);
        assert!(later.history_ready);
        assert_eq!(later.own.notifications.done, 1);
    }
}
