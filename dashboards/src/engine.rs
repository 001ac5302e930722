//! The alert loop: evaluates the rules on a schedule, publishes a snapshot of what it found
//! for the pages and `/metrics` ([`crate::snapshot`]), hands due notifications to the notifier,
//! recording what became of each, and keeps the alert instances in the state store
//! ([`crate::persist`]) after every change. Between evaluations [`publish`] keeps the snapshot
//! fresh.
//!
//! After a start the rules wait until the model holds its history
//! ([`crate::state::Shared::history_ready`]): evaluated on a half-read history, a restored alert
//! would resolve, or a silence rule fire, because of the restart alone. When the brokers have
//! not been reached for the Kafka hop's staleness threshold the stream cannot catch up, and the
//! rules are evaluated anyway, so that the pipeline's staleness still alerts.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use candor_query::window::{Micros, now};
use tokio::sync::watch;

use crate::alerts::{Delivery, Observation, conditions};
use crate::notify::Notifier;
use crate::operations::Judged;
use crate::persist::{StateStore, Stored};
use crate::snapshot::{PUBLISH_EVERY, Published};
use crate::state::Shared;
use crate::sync::lock;

/// Who is told: the receivers of every notification, and those a firing alert goes to as well
/// once nobody acknowledged it within `escalate_after` of firing.
#[derive(Debug, Clone)]
pub struct Receivers {
    /// `alerts.webhooks`.
    pub first: Arc<Notifier>,
    /// `alerts.escalation_webhooks`: once an episode is escalated, its repeats and its resolve
    /// reach them too.
    pub escalation: Arc<Notifier>,
    /// `alerts.escalate_after`.
    pub escalate_after: Micros,
}

/// Which receivers a notification is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tier {
    First,
    Escalation,
}

/// Publishes a snapshot of `shared` every [`PUBLISH_EVERY`], whether the rules are evaluated
/// yet or not: the pages say what the model holds while the history is read.
pub async fn publish(shared: Arc<Shared>, published: Published) {
    let mut ticker = tokio::time::interval(PUBLISH_EVERY);
    loop {
        ticker.tick().await;
        published.publish(&shared, now());
    }
}

/// Evaluates the rules every `every` and publishes a snapshot after each evaluation; re-sends
/// firing alerts every `resend`; escalates the ones nobody acknowledged in time; with a
/// `store`, keeps the alert instances there.
pub async fn run(
    shared: Arc<Shared>,
    published: Published,
    receivers: Receivers,
    every: Duration,
    resend: Micros,
    store: Option<Arc<StateStore>>,
) {
    let saves = store.map(|store| saver(store, Arc::clone(&shared)));
    let mut ticker = tokio::time::interval(every);
    let mut waited = false;
    loop {
        ticker.tick().await;
        if !shared.history_ready(now()) {
            if !waited {
                waited = true;
                tracing::info!("alert evaluation waits until the stream has caught up");
            }
            continue;
        }
        if std::mem::take(&mut waited) {
            tracing::info!(
                "alert evaluation starts: the stream has caught up, or cannot reach Kafka"
            );
        }
        let at = now();
        let due = evaluate(&shared, at, resend);
        let escalations = if receivers.escalation.has_receivers() {
            lock(&shared.alerts).escalations_due(at, receivers.escalate_after)
        } else {
            Vec::new()
        };
        save(&shared, saves.as_ref());
        // Before the notifications go out, so that their acknowledgement links find the
        // episode they name.
        published.publish(&shared, now());
        for alert in due {
            let escalated = alert.escalated.is_some();
            notify(
                &shared,
                &receivers,
                Tier::First,
                alert.clone(),
                saves.clone(),
            );
            if escalated {
                notify(&shared, &receivers, Tier::Escalation, alert, saves.clone());
            }
        }
        for alert in escalations {
            tracing::warn!(alert = %alert.name, "nobody acknowledged the alert in time: escalated");
            notify(&shared, &receivers, Tier::Escalation, alert, saves.clone());
        }
    }
}

/// Sends `alert` to the `tier`'s receivers on a task of its own, and records what became of it.
fn notify(
    shared: &Arc<Shared>,
    receivers: &Receivers,
    tier: Tier,
    alert: crate::alerts::Alert,
    saves: Option<watch::Sender<Vec<Stored>>>,
) {
    let shared = Arc::clone(shared);
    let notifier = match tier {
        Tier::First => Arc::clone(&receivers.first),
        Tier::Escalation => Arc::clone(&receivers.escalation),
    };
    tokio::spawn(async move {
        let delivery = notifier.send(&alert).await;
        match &delivery {
            Delivery::Delivered { .. } => {
                shared
                    .notifications
                    .delivered
                    .fetch_add(1, Ordering::Relaxed);
            }
            Delivery::Undelivered { .. } => {
                shared.notifications.failed.fetch_add(1, Ordering::Relaxed);
            }
            Delivery::NotSent { .. } | Delivery::Sending => {}
        }
        {
            let mut alerts = lock(&shared.alerts);
            match tier {
                Tier::First => alerts.delivered(&alert.key(), delivery),
                Tier::Escalation => alerts.escalation_delivered(&alert.key(), delivery),
            }
        }
        save(&shared, saves.as_ref());
    });
}

/// Hands the alert instances as they are now to the saver.
fn save(shared: &Shared, saves: Option<&watch::Sender<Vec<Stored>>>) {
    if let Some(saves) = saves {
        // Taken and handed over under the lock, so that the saver never gets an older set after
        // a newer one.
        let alerts = lock(&shared.alerts);
        let stored = alerts.list().iter().map(Stored::of).collect();
        saves.send_replace(stored);
    }
}

/// A task that writes the newest set of alert instances it was handed, one write at a time; each
/// write's result is counted.
fn saver(store: Arc<StateStore>, shared: Arc<Shared>) -> watch::Sender<Vec<Stored>> {
    let (saves, mut latest) = watch::channel(Vec::new());
    tokio::spawn(async move {
        while latest.changed().await.is_ok() {
            let stored = latest.borrow_and_update().clone();
            let store = Arc::clone(&store);
            let written = tokio::task::spawn_blocking(move || store.save(&stored)).await;
            match written {
                Ok(Ok(())) => {
                    shared.state_saves.saved.fetch_add(1, Ordering::Relaxed);
                }
                Ok(Err(err)) => {
                    shared.state_saves.failed.fetch_add(1, Ordering::Relaxed);
                    tracing::error!(error = %err, "alert state not saved");
                }
                Err(err) => {
                    shared.state_saves.failed.fetch_add(1, Ordering::Relaxed);
                    tracing::error!(error = %err, "the alert state's writer panicked");
                }
            }
        }
    });
    saves
}

/// One evaluation at `now`: the alerts' new states, and the notifications now due.
///
/// The operations are judged once here: the `stuck_operations` rules read that judgement, and
/// the model keeps it for the snapshots until the next evaluation
/// ([`crate::operations::Judgement`]).
pub fn evaluate(shared: &Shared, now: Micros, resend: Micros) -> Vec<crate::alerts::Alert> {
    let hops = shared.hops(now);
    let mut model = lock(&shared.model);
    let reconcile = lock(&shared.reconcile);
    let judged = Judged::of(model.operations(), model.instances(), &shared.rules, now);
    let holding = conditions(
        &shared.rules,
        Observation {
            model: &model,
            hops: &hops,
            reconcile: &reconcile,
            operations: &judged,
            started: shared.started,
            now,
        },
    );
    drop(reconcile);
    let judgement = judged.judgement(model.operations().evicted());
    drop(judged);
    model.keep_operations_judgement(judgement);
    drop(model);
    let mut alerts = lock(&shared.alerts);
    alerts.step(&shared.rules, holding, now);
    if shared.has_receivers {
        alerts.due(now, resend)
    } else {
        Vec::new()
    }
}
