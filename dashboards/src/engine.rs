//! The alert loop: evaluates the rules on a schedule and hands due notifications to the
//! notifier, recording what became of each.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use candor_query::window::{Micros, now};

use crate::alerts::{Delivery, Observation, conditions};
use crate::notify::Notifier;
use crate::operations::Judged;
use crate::state::{Shared, lock};

/// Evaluates the rules every `every`; re-sends firing alerts every `resend`.
pub async fn run(shared: Arc<Shared>, notifier: Arc<Notifier>, every: Duration, resend: Micros) {
    let mut ticker = tokio::time::interval(every);
    loop {
        ticker.tick().await;
        let due = evaluate(&shared, now(), resend);
        for alert in due {
            let shared = Arc::clone(&shared);
            let notifier = Arc::clone(&notifier);
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
                lock(&shared.alerts).delivered(&alert.key(), delivery);
            });
        }
    }
}

/// One evaluation at `now`: the alerts' new states, and the notifications now due.
///
/// The operations are judged once here: the `stuck_operations` rules read that judgement, and
/// the model keeps it for the overview's operations panel and `/metrics` until the next
/// evaluation ([`crate::operations::Judgement`]).
pub fn evaluate(shared: &Shared, now: Micros, resend: Micros) -> Vec<crate::alerts::Alert> {
    let hops = shared.hops(now);
    let mut model = lock(&shared.model);
    let reconcile = lock(&shared.reconcile);
    let judged = Judged::of(&model, &shared.rules, now);
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
