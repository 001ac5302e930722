//! The alert engine. Pure: [`conditions`] says which alert instances hold now, and
//! [`Alerts::step`] moves each instance through pending → firing → resolved with its rule's `for`
//! duration, returning the changes to notify.
//!
//! Each instance also keeps what became of its notification ([`Delivery`]): an alert is shown as
//! sent only once a receiver acknowledged it.

use std::collections::BTreeMap;

use candor_query::window::{Micros, serialize_micros, serialize_opt_micros};
use serde::Serialize;

use crate::rules::{Rule, RuleKind};

mod conditions;

pub use conditions::{Condition, Observation, conditions};

/// How long a resolved alert stays listed.
pub const KEEP_RESOLVED: Micros = 60 * 60 * 1_000_000;

/// An alert instance's labels (besides `alertname` and `severity`).
pub type Labels = BTreeMap<String, String>;

/// A duration as `5m`, `1h`, `90s`.
pub fn humanize(micros: Micros) -> String {
    let seconds = micros / 1_000_000;
    if micros % 1_000_000 != 0 {
        format!("{}ms", micros / 1000)
    } else if seconds % 3600 == 0 {
        format!("{}h", seconds / 3600)
    } else if seconds % 60 == 0 {
        format!("{}m", seconds / 60)
    } else {
        format!("{seconds}s")
    }
}

/// Where an alert instance is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// The condition holds, for less than the rule's `for`.
    Pending,
    /// The condition has held for the rule's `for`.
    Firing,
    /// It fired, and the condition no longer holds.
    Resolved,
}

/// What became of an alert instance's newest notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "delivery", rename_all = "snake_case")]
pub enum Delivery {
    /// Nothing to send yet (pending), or no receiver configured.
    NotSent {
        /// Why.
        reason: String,
    },
    /// Handed to the notifier; no answer yet.
    Sending,
    /// Every receiver acknowledged it.
    Delivered {
        /// When.
        #[serde(serialize_with = "serialize_micros")]
        at: Micros,
        /// The state that was sent.
        sent: State,
    },
    /// At least one receiver did not acknowledge it after every retry.
    Undelivered {
        /// When the last attempt ended.
        #[serde(serialize_with = "serialize_micros")]
        at: Micros,
        /// The state that could not be sent.
        sent: State,
        /// What went wrong (the adapter's summary).
        reason: String,
    },
}

/// One alert instance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alert {
    /// The rule's name.
    pub name: String,
    /// The rule's severity.
    pub severity: &'static str,
    /// The instance's labels.
    pub labels: Labels,
    /// What was measured at the newest evaluation that held.
    pub description: String,
    /// The rule's summary.
    pub summary: String,
    /// Where it is.
    pub state: State,
    /// When the condition began to hold.
    #[serde(serialize_with = "serialize_micros")]
    pub active_since: Micros,
    /// When it fired.
    #[serde(serialize_with = "serialize_opt_micros")]
    pub fired_at: Option<Micros>,
    /// When it resolved.
    #[serde(serialize_with = "serialize_opt_micros")]
    pub resolved_at: Option<Micros>,
    /// Its newest notification.
    #[serde(flatten)]
    pub delivery: Delivery,
    /// When its newest notification was handed to the notifier.
    #[serde(skip)]
    pub last_sent: Option<Micros>,
    /// Who acknowledged this episode (while it fires), and when; `None` when nobody has.
    pub acknowledged: Option<Acknowledgement>,
    /// When this episode was escalated to the escalation receivers (nobody acknowledged it in
    /// time), and what became of that notification; `None` while it was not.
    pub escalated: Option<Escalation>,
}

/// An episode handed to the escalation receivers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Escalation {
    /// When.
    #[serde(rename = "escalated_at", serialize_with = "serialize_micros")]
    pub at: Micros,
    /// What became of the escalation receivers' newest notification.
    #[serde(flatten)]
    pub delivery: Delivery,
}

/// Someone took an alert on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Acknowledgement {
    /// The user or token that acknowledged it (`anonymous` when the dashboards let anyone in).
    pub by: String,
    /// When.
    #[serde(serialize_with = "serialize_micros")]
    pub at: Micros,
}

/// Why an acknowledgement was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AckError {
    /// No instance of that name and labels.
    #[error("no alert instance {0} with those labels")]
    Unknown(String),
    /// The instance is not firing: there is nothing to take on.
    #[error("alert {0} is {1}, not firing: only a firing alert can be acknowledged")]
    NotFiring(String, &'static str),
}

impl Alert {
    /// The key notifications are matched back by.
    pub fn key(&self) -> (String, Labels) {
        (self.name.clone(), self.labels.clone())
    }
}

/// Every alert instance, by rule name and labels.
#[derive(Debug, Default)]
pub struct Alerts {
    alerts: BTreeMap<(String, Labels), Alert>,
}

impl Alerts {
    /// The instances read back from the store ([`crate::persist::restore`]).
    pub fn restored(alerts: Vec<Alert>) -> Self {
        Self {
            alerts: alerts
                .into_iter()
                .map(|alert| (alert.key(), alert))
                .collect(),
        }
    }

    /// Applies one evaluation's conditions at `now`. Returns the instances that fired or
    /// resolved, which are to be notified.
    pub fn step(&mut self, rules: &[Rule], holding: Vec<Condition>, now: Micros) -> Vec<Alert> {
        let mut changed = Vec::new();
        let mut held = std::collections::BTreeSet::new();
        for condition in holding {
            let Some(rule) = rules.get(condition.rule) else {
                continue;
            };
            let key = (rule.name.clone(), condition.labels.clone());
            held.insert(key.clone());
            let alert = self.alerts.entry(key).or_insert_with(|| Alert {
                name: rule.name.clone(),
                severity: rule.severity.as_str(),
                labels: condition.labels.clone(),
                description: String::new(),
                summary: rule
                    .summary
                    .clone()
                    .unwrap_or_else(|| default_summary(rule, &condition.labels)),
                state: State::Pending,
                active_since: now,
                fired_at: None,
                resolved_at: None,
                delivery: Delivery::NotSent {
                    reason: "pending: not sent before it fires".into(),
                },
                last_sent: None,
                acknowledged: None,
                escalated: None,
            });
            alert.description = condition.description;
            if alert.state == State::Resolved {
                // Holding again after it resolved: a new episode.
                alert.state = State::Pending;
                alert.active_since = now;
                alert.fired_at = None;
                alert.resolved_at = None;
                alert.last_sent = None;
                alert.acknowledged = None;
                alert.escalated = None;
                alert.delivery = Delivery::NotSent {
                    reason: "pending: not sent before it fires".into(),
                };
            }
            if alert.state == State::Pending && now - alert.active_since >= rule.for_micros {
                alert.state = State::Firing;
                alert.fired_at = Some(now);
                alert.delivery = Delivery::NotSent {
                    reason: "fired; no notification handed to a receiver yet".into(),
                };
                changed.push(alert.clone());
            }
        }
        self.alerts.retain(|key, alert| {
            if held.contains(key) {
                return true;
            }
            match alert.state {
                // Never fired: it goes without a word.
                State::Pending => false,
                State::Firing => {
                    alert.state = State::Resolved;
                    alert.resolved_at = Some(now);
                    changed.push(alert.clone());
                    true
                }
                State::Resolved => alert
                    .resolved_at
                    .is_some_and(|at| now.saturating_sub(at) < KEEP_RESOLVED),
            }
        });
        changed
    }

    /// The alerts whose notification is due at `now`, marked as being sent: a firing alert not
    /// sent yet or last sent `resend` ago (receivers such as Alertmanager expect a firing alert
    /// to be repeated, and an undelivered one is tried again), and a resolved alert whose
    /// resolution was not sent yet, or was sent `resend` ago and not delivered.
    pub fn due(&mut self, now: Micros, resend: Micros) -> Vec<Alert> {
        let mut due = Vec::new();
        for alert in self.alerts.values_mut() {
            if alert.delivery == Delivery::Sending {
                continue;
            }
            let send = match alert.state {
                State::Pending => false,
                State::Firing => alert
                    .last_sent
                    .is_none_or(|sent| now.saturating_sub(sent) >= resend),
                State::Resolved => match (alert.last_sent, alert.resolved_at) {
                    // Fired and resolved before it was ever sent: nothing to take back.
                    (None, _) => false,
                    (Some(sent), Some(resolved)) => {
                        sent < resolved
                            || (matches!(alert.delivery, Delivery::Undelivered { .. })
                                && now.saturating_sub(sent) >= resend)
                    }
                    (Some(_), None) => false,
                },
            };
            if send {
                alert.last_sent = Some(now);
                alert.delivery = Delivery::Sending;
                due.push(alert.clone());
            }
        }
        due
    }

    /// Records that `by` acknowledged the firing instance `key` at `now`; returns it. A second
    /// acknowledgement keeps the first one's name and time.
    pub fn acknowledge(
        &mut self,
        key: &(String, Labels),
        by: &str,
        now: Micros,
    ) -> Result<Alert, AckError> {
        let alert = self
            .alerts
            .get_mut(key)
            .ok_or_else(|| AckError::Unknown(key.0.clone()))?;
        if alert.state != State::Firing {
            let state = match alert.state {
                State::Pending => "pending",
                State::Resolved => "resolved",
                State::Firing => "firing",
            };
            return Err(AckError::NotFiring(key.0.clone(), state));
        }
        alert.acknowledged.get_or_insert_with(|| Acknowledgement {
            by: by.to_owned(),
            at: now,
        });
        Ok(alert.clone())
    }

    /// The firing alerts nobody acknowledged within `after` of firing and not escalated yet,
    /// marked as escalated at `now` (their notification being sent).
    pub fn escalations_due(&mut self, now: Micros, after: Micros) -> Vec<Alert> {
        let mut due = Vec::new();
        for alert in self.alerts.values_mut() {
            let overdue = alert.state == State::Firing
                && alert.acknowledged.is_none()
                && alert.escalated.is_none()
                && alert
                    .fired_at
                    .is_some_and(|fired| now.saturating_sub(fired) >= after);
            if overdue {
                alert.escalated = Some(Escalation {
                    at: now,
                    delivery: Delivery::Sending,
                });
                due.push(alert.clone());
            }
        }
        due
    }

    /// Records what became of the escalation receivers' notification of the instance `key`.
    pub fn escalation_delivered(&mut self, key: &(String, Labels), delivery: Delivery) {
        if let Some(escalated) = self
            .alerts
            .get_mut(key)
            .and_then(|alert| alert.escalated.as_mut())
        {
            escalated.delivery = delivery;
        }
    }

    /// Records what became of a notification of the instance `key`.
    pub fn delivered(&mut self, key: &(String, Labels), delivery: Delivery) {
        if let Some(alert) = self.alerts.get_mut(key) {
            alert.delivery = delivery;
        }
    }

    /// Every instance: firing first, then pending, then resolved; by name and labels within.
    pub fn list(&self) -> Vec<Alert> {
        let mut all: Vec<Alert> = self.alerts.values().cloned().collect();
        all.sort_by_key(|alert| match alert.state {
            State::Firing => 0,
            State::Pending => 1,
            State::Resolved => 2,
        });
        all
    }

    /// Instances that are firing now.
    pub fn firing(&self) -> impl Iterator<Item = &Alert> {
        self.alerts
            .values()
            .filter(|alert| alert.state == State::Firing)
    }
}

fn default_summary(rule: &Rule, labels: &Labels) -> String {
    match &rule.kind {
        RuleKind::Spike {
            window,
            baseline,
            factor,
            ..
        } => format!(
            "AccessFailure rate over {} is at least {factor}x the {} before it",
            humanize(*window),
            humanize(*baseline)
        ),
        RuleKind::BurnRate { objective, .. } => format!(
            "silent failures burn the error budget of a {:.2} % objective too fast",
            objective * 100.0
        ),
        RuleKind::PipelineStale { after } => format!(
            "a pipeline hop showed no evidence for {}: new failures would go unseen",
            humanize(*after)
        ),
        RuleKind::AdapterSilent { after } => format!(
            "an adapter instance sent no counters for {}",
            humanize(*after)
        ),
        RuleKind::ReconcileMismatch { after } => {
            if labels.get("gap").is_some_and(|gap| gap == "unknown") {
                format!(
                    "reconciliation has not covered its window for {}: whether events are lost \
                     between adapter and table is unknown",
                    humanize(*after)
                )
            } else {
                "events lost between adapter and table".into()
            }
        }
        RuleKind::StuckOperations { after } => format!(
            "asynchronous operations accepted {} ago or longer have not ended",
            humanize(*after)
        ),
        RuleKind::Watchdog => "the dashboards' alerting is alive".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::conditions::label;
    use super::*;
    use crate::health::{Hop, HopName};
    use crate::model::Model;
    use crate::model::{MINUTE, ModelSettings, SECOND};
    use crate::operations::Judged;
    use crate::reconcile::tests::{answer, coverage, lost, window};
    use crate::reconcile::{ReconcileState, Run};
    use crate::rules::{Limits, parse};
    use candor_records::proto::{OperationEvent, OutcomeCount, Temporality};
    use candor_records::rows::{Meta, Row};
    use candor_records::tables::Arrival;

    // A whole minute, so that buckets start at T0.
    const T0: Micros = 1_700_000_040 * SECOND;

    /// No operation judged: the operations of conditions whose rules read none.
    fn none() -> Judged<'static> {
        Judged {
            now: T0,
            stuck_after: 0,
            statuses: Vec::new(),
        }
    }

    fn rules(text: &str) -> Vec<Rule> {
        parse(
            text,
            Limits {
                step: MINUTE,
                history: 6 * 60 * MINUTE,
            },
        )
        .expect("valid rules")
    }

    fn delta(model: &mut Model, target: &str, class: &str, at: Micros, value: u64) {
        let row = Row::Count(Box::new(OutcomeCount {
            point_id: format!("{target}/{class}/{at}"),
            service_name: "svc".into(),
            service_instance_id: "i-1".into(),
            tool_name: "search".into(),
            tool_target: target.into(),
            outcome_class: class.into(),
            start_time_unix_nano: u64::try_from(at - MINUTE).expect("positive") * 1000,
            time_unix_nano: u64::try_from(at).expect("positive") * 1000,
            value,
            temporality: Temporality::Delta as i32,
            ..OutcomeCount::default()
        }));
        apply_at(model, &row, at);
    }

    /// Applies `row` as a record read at `at`.
    fn apply_at(model: &mut Model, row: &Row, at: Micros) {
        let meta = Meta {
            partition: 0,
            offset: 0,
            kafka_micros: at,
            arrival: Arrival::OnTime,
        };
        model.apply(&meta, row, at);
    }

    #[test]
    fn only_a_firing_alert_is_acknowledged_and_a_new_episode_forgets_it() {
        let rules = rules("[[rule]]\nname = \"Dog\"\nkind = \"watchdog\"\nfor = \"1m\"\n");
        let holding = || {
            vec![Condition {
                rule: 0,
                labels: Labels::new(),
                description: "always".into(),
            }]
        };
        let key = ("Dog".to_owned(), Labels::new());
        let mut alerts = Alerts::default();
        assert_eq!(
            alerts.acknowledge(&key, "sre", T0),
            Err(AckError::Unknown("Dog".into()))
        );
        alerts.step(&rules, holding(), T0);
        assert_eq!(
            alerts.acknowledge(&key, "sre", T0),
            Err(AckError::NotFiring("Dog".into(), "pending"))
        );
        alerts.step(&rules, holding(), T0 + MINUTE);
        let acked = alerts.acknowledge(&key, "sre", T0 + MINUTE).unwrap();
        assert_eq!(
            acked.acknowledged,
            Some(Acknowledgement {
                by: "sre".into(),
                at: T0 + MINUTE
            })
        );
        // A second acknowledgement keeps the first.
        let again = alerts.acknowledge(&key, "ops", T0 + 2 * MINUTE).unwrap();
        assert_eq!(again.acknowledged.unwrap().by, "sre");
        // Resolved, then holding again: a new episode nobody has taken on yet.
        alerts.step(&rules, Vec::new(), T0 + 3 * MINUTE);
        alerts.step(&rules, holding(), T0 + 4 * MINUTE);
        assert_eq!(alerts.list()[0].acknowledged, None);
    }

    #[test]
    fn an_alert_nobody_acknowledged_in_time_is_escalated_once() {
        let rules = rules(
            "[[rule]]\nname = \"A\"\nkind = \"watchdog\"\n[[rule]]\nname = \"B\"\nkind = \"watchdog\"\n",
        );
        let holding = || {
            (0..2)
                .map(|rule| Condition {
                    rule,
                    labels: Labels::new(),
                    description: "always".into(),
                })
                .collect()
        };
        let mut alerts = Alerts::default();
        alerts.step(&rules, holding(), T0);
        alerts
            .acknowledge(&("B".to_owned(), Labels::new()), "sre", T0 + SECOND)
            .unwrap();
        assert!(
            alerts
                .escalations_due(T0 + 4 * MINUTE, 5 * MINUTE)
                .is_empty()
        );
        let due = alerts.escalations_due(T0 + 5 * MINUTE, 5 * MINUTE);
        let names: Vec<&str> = due.iter().map(|alert| alert.name.as_str()).collect();
        assert_eq!(names, ["A"], "B was acknowledged");
        assert!(
            alerts
                .escalations_due(T0 + 6 * MINUTE, 5 * MINUTE)
                .is_empty()
        );
        let key = ("A".to_owned(), Labels::new());
        alerts.escalation_delivered(&key, Delivery::NotSent { reason: "x".into() });
        let a = alerts.list().into_iter().find(|a| a.name == "A").unwrap();
        assert_eq!(
            a.escalated,
            Some(Escalation {
                at: T0 + 5 * MINUTE,
                delivery: Delivery::NotSent { reason: "x".into() }
            })
        );
    }

    #[test]
    fn a_spike_is_pending_then_firing_after_for_then_resolved() {
        let rules = rules(
            "[[rule]]\nname = \"Spike\"\nkind = \"spike\"\nfor = \"2m\"\nwindow = \"5m\"\nbaseline = \"1h\"\nfactor = 3.0\nmin_events = 10\n",
        );
        let mut model = Model::new(ModelSettings::default());
        model.hold_from(T0);
        // An hour of 100 calls a minute with 1 AccessFailure, then 20 a minute.
        for minute in 0..60 {
            let at = T0 + minute * MINUTE + SECOND;
            delta(&mut model, "t", "success", at, 99);
            delta(&mut model, "t", "access_failure", at, 1);
        }
        let mut alerts = Alerts::default();
        let evaluate = |model: &Model, alerts: &mut Alerts, now: Micros| {
            let seen = Observation {
                model,
                hops: &[],
                reconcile: &ReconcileState::default(),
                operations: &none(),
                started: T0,
                now,
            };
            alerts.step(&rules, conditions(&rules, seen), now)
        };
        let quiet = T0 + 60 * MINUTE + 30 * SECOND;
        assert!(evaluate(&model, &mut alerts, quiet).is_empty());
        assert!(alerts.list().is_empty());
        delta(&mut model, "t", "success", T0 + 60 * MINUTE + SECOND, 80);
        delta(
            &mut model,
            "t",
            "access_failure",
            T0 + 60 * MINUTE + SECOND,
            20,
        );
        assert!(evaluate(&model, &mut alerts, quiet).is_empty());
        assert_eq!(alerts.list()[0].state, State::Pending);
        let fired = evaluate(&model, &mut alerts, quiet + 2 * MINUTE);
        assert_eq!(fired.len(), 1);
        assert_eq!(fired[0].state, State::Firing);
        assert_eq!(fired[0].labels["target"], "t");
        assert!(
            // Minutes 58 to 62: one AccessFailure in each of 58 and 59, then the 20.
            fired[0]
                .description
                .contains("22 AccessFailures of 300 calls"),
            "{}",
            fired[0].description
        );
        // Once the spike has left the window, it resolves.
        let resolved = evaluate(&model, &mut alerts, quiet + 10 * MINUTE);
        assert_eq!(resolved.len(), 1);
        assert_eq!(resolved[0].state, State::Resolved);
    }

    #[test]
    fn below_the_minimum_volume_no_spike_holds() {
        let rules = rules("[[rule]]\nname = \"Spike\"\nkind = \"spike\"\nmin_events = 10\n");
        let mut model = Model::new(ModelSettings::default());
        model.hold_from(T0);
        delta(&mut model, "t", "success", T0 + 60 * MINUTE, 1);
        delta(&mut model, "t", "access_failure", T0 + 60 * MINUTE, 9);
        let seen = Observation {
            model: &model,
            hops: &[],
            reconcile: &ReconcileState::default(),
            operations: &none(),
            started: T0,
            now: T0 + 60 * MINUTE,
        };
        assert!(conditions(&rules, seen).is_empty());
    }

    #[test]
    fn a_pending_alert_that_stops_holding_goes_without_a_notification() {
        let rules = rules(
            "[[rule]]\nname = \"Stale\"\nkind = \"pipeline_stale\"\nafter = \"1m\"\nfor = \"5m\"\n",
        );
        let model = Model::new(ModelSettings::default());
        let stale = [Hop::judge(
            HopName::Table,
            Some(T0),
            30 * SECOND,
            T0 + 2 * MINUTE,
            "x".into(),
        )];
        let seen = Observation {
            model: &model,
            hops: &stale,
            reconcile: &ReconcileState::default(),
            operations: &none(),
            started: T0,
            now: T0 + 2 * MINUTE,
        };
        let mut alerts = Alerts::default();
        let holding = conditions(&rules, seen);
        assert_eq!(holding.len(), 1);
        assert!(alerts.step(&rules, holding, T0 + 2 * MINUTE).is_empty());
        assert!(alerts.step(&rules, Vec::new(), T0 + 3 * MINUTE).is_empty());
        assert!(alerts.list().is_empty());
    }

    #[test]
    fn a_hop_never_seen_is_stale_counted_from_the_start_and_the_watchdog_always_fires() {
        let rules = rules(
            "[[rule]]\nname = \"Stale\"\nkind = \"pipeline_stale\"\nafter = \"1m\"\n[[rule]]\nname = \"Dog\"\nkind = \"watchdog\"\n",
        );
        let model = Model::new(ModelSettings::default());
        let hops = [Hop::judge(
            HopName::Collector,
            None,
            30 * SECOND,
            T0,
            "none".into(),
        )];
        let early = Observation {
            model: &model,
            hops: &hops,
            reconcile: &ReconcileState::default(),
            operations: &none(),
            started: T0,
            now: T0 + 30 * SECOND,
        };
        let names: Vec<usize> = conditions(&rules, early).iter().map(|c| c.rule).collect();
        assert_eq!(names, vec![1]);
        let late = Observation {
            now: T0 + 2 * MINUTE,
            ..early
        };
        let holding = conditions(&rules, late);
        assert_eq!(holding.len(), 2);
        assert!(
            holding[0]
                .description
                .contains("since the dashboards started")
        );
        let mut alerts = Alerts::default();
        assert_eq!(alerts.step(&rules, holding, T0 + 2 * MINUTE).len(), 2);
    }

    #[test]
    fn an_instance_silent_past_after_holds_and_one_that_said_it_stopped_does_not() {
        let rules =
            rules("[[rule]]\nname = \"Silent\"\nkind = \"adapter_silent\"\nafter = \"1m\"\n");
        let mut model = Model::new(ModelSettings::default());
        model.hold_from(T0);
        for (instance, final_interval) in [("cut", 10_000), ("done", 0)] {
            for (n, interval) in [10_000, 10_000, final_interval].into_iter().enumerate() {
                let at = T0 + i64::try_from(n).expect("small") * 10 * SECOND;
                let row = Row::Count(Box::new(OutcomeCount {
                    point_id: format!("{instance}/{at}"),
                    service_name: "svc".into(),
                    service_instance_id: instance.into(),
                    tool_name: "search".into(),
                    tool_target: "t".into(),
                    outcome_class: "success".into(),
                    start_time_unix_nano: u64::try_from(T0).expect("positive") * 1000,
                    time_unix_nano: u64::try_from(at).expect("positive") * 1000,
                    value: 1,
                    temporality: Temporality::Cumulative as i32,
                    export_interval_ms: Some(interval),
                    ..OutcomeCount::default()
                }));
                apply_at(&mut model, &row, at);
            }
        }
        let seen = Observation {
            model: &model,
            hops: &[],
            reconcile: &ReconcileState::default(),
            operations: &none(),
            started: T0,
            now: T0 + 5 * MINUTE,
        };
        let holding = conditions(&rules, seen);
        let descriptions: Vec<&str> = holding.iter().map(|c| c.description.as_str()).collect();
        assert_eq!(descriptions.len(), 1, "{descriptions:?}");
        assert!(descriptions[0].contains("svc / cut"), "{descriptions:?}");
    }

    /// Applies a `tool.lifecycle` record of operation `id` of `target`, sent by `instance`.
    fn lifecycle(
        model: &mut Model,
        target: &str,
        id: &str,
        instance: &str,
        state: &str,
        at: Micros,
    ) {
        let row = Row::Operation(Box::new(OperationEvent {
            event_id: format!("{id}/{state}"),
            event_time_unix_nano: u64::try_from(at).expect("positive") * 1000,
            service_name: "svc".into(),
            service_instance_id: instance.into(),
            tool_name: "export".into(),
            tool_target: target.into(),
            operation_id: id.into(),
            lifecycle_state: state.into(),
            source_system: "exports".into(),
            adapter: "candor-rust".into(),
            ..OperationEvent::default()
        }));
        apply_at(model, &row, at);
    }

    /// A counter point of `instance`, so that it reports at `at`.
    fn reports(model: &mut Model, instance: &str, at: Micros) {
        let row = Row::Count(Box::new(OutcomeCount {
            point_id: format!("{instance}/{at}"),
            service_name: "svc".into(),
            service_instance_id: instance.into(),
            tool_name: "export".into(),
            tool_target: "t".into(),
            outcome_class: "success".into(),
            start_time_unix_nano: u64::try_from(T0).expect("positive") * 1000,
            time_unix_nano: u64::try_from(at).expect("positive") * 1000,
            value: 1,
            temporality: Temporality::Cumulative as i32,
            export_interval_ms: Some(60_000),
            ..OutcomeCount::default()
        }));
        apply_at(model, &row, at);
    }

    #[test]
    fn an_operation_open_past_after_holds_per_target_unless_its_adapter_went_silent() {
        let rules = rules(
            "[[rule]]\nname = \"Stale\"\nkind = \"pipeline_stale\"\nafter = \"5m\"\n\
             [[rule]]\nname = \"Stuck\"\nkind = \"stuck_operations\"\nafter = \"15m\"\n",
        );
        let mut model = Model::new(ModelSettings::default());
        model.hold_from(T0);
        lifecycle(&mut model, "exports", "never", "alive", "accepted", T0);
        lifecycle(
            &mut model,
            "exports",
            "never",
            "alive",
            "running",
            T0 + MINUTE,
        );
        lifecycle(&mut model, "exports", "done", "alive", "accepted", T0);
        lifecycle(
            &mut model,
            "exports",
            "done",
            "alive",
            "completed",
            T0 + 2 * MINUTE,
        );
        lifecycle(&mut model, "reports", "orphan", "dead", "accepted", T0);
        lifecycle(
            &mut model,
            "young",
            "fresh",
            "alive",
            "accepted",
            T0 + 10 * MINUTE,
        );
        for minute in 0..=20 {
            reports(&mut model, "alive", T0 + minute * MINUTE);
        }
        reports(&mut model, "dead", T0);
        let now = T0 + 20 * MINUTE;
        let kafka = |last: Micros| {
            [Hop::judge(
                HopName::Kafka,
                Some(last),
                5 * MINUTE,
                T0,
                "kafka".into(),
            )]
        };
        let fresh = kafka(now - 10 * SECOND);
        let judged = Judged::of(model.operations(), model.instances(), &rules, now);
        let seen = Observation {
            model: &model,
            hops: &fresh,
            reconcile: &ReconcileState::default(),
            operations: &judged,
            started: T0,
            now,
        };
        let holding: Vec<Condition> = conditions(&rules, seen)
            .into_iter()
            .filter(|c| c.rule == 1)
            .collect();
        assert_eq!(holding.len(), 1, "{holding:?}");
        assert_eq!(holding[0].labels, label("target", "exports"));
        assert!(
            holding[0]
                .description
                .starts_with("1 operation open for 15m or longer"),
            "{holding:?}"
        );
        assert!(holding[0].description.contains("never"), "{holding:?}");
        // While the stream is stale nothing can be seen to end: the pipeline rule says so.
        let stale = kafka(now - 6 * MINUTE);
        let blind = Observation {
            hops: &stale,
            ..seen
        };
        assert!(
            conditions(&rules, blind).iter().all(|c| c.rule != 1),
            "no stuck operation is judged on a stale stream"
        );
    }

    #[test]
    fn burn_rate_needs_both_windows() {
        let rules = rules(
            "[[rule]]\nname = \"Burn\"\nkind = \"burn_rate\"\nobjective = 0.99\nmin_calls = 10\nwindows = [{ long = \"1h\", short = \"5m\", factor = 14.4 }]\n",
        );
        let mut model = Model::new(ModelSettings::default());
        model.hold_from(T0);
        // 20 % silent failures over the hour, but none in the last 5 minutes.
        for minute in 0..50 {
            let at = T0 + minute * MINUTE + SECOND;
            delta(&mut model, "t", "success", at, 8);
            delta(&mut model, "t", "partial", at, 2);
        }
        let now = T0 + 59 * MINUTE + 30 * SECOND;
        for minute in 50..60 {
            delta(
                &mut model,
                "t",
                "success",
                T0 + minute * MINUTE + SECOND,
                10,
            );
        }
        let seen = Observation {
            model: &model,
            hops: &[],
            reconcile: &ReconcileState::default(),
            operations: &none(),
            started: T0,
            now,
        };
        assert!(conditions(&rules, seen).is_empty());
        delta(&mut model, "t", "access_failure", now - SECOND, 10);
        let seen = Observation {
            model: &model,
            hops: &[],
            reconcile: &ReconcileState::default(),
            operations: &none(),
            started: T0,
            now,
        };
        let holding = conditions(&rules, seen);
        assert_eq!(holding.len(), 1);
        assert_eq!(holding[0].labels["target"], "t");
    }

    fn reconciled(state: &ReconcileState, rules: &[Rule], now: Micros) -> Vec<Condition> {
        let model = Model::new(ModelSettings::default());
        conditions(
            rules,
            Observation {
                model: &model,
                hops: &[],
                reconcile: state,
                operations: &none(),
                started: T0 - 5 * MINUTE,
                now,
            },
        )
    }

    const LOST: &str =
        "[[rule]]\nname = \"Lost\"\nkind = \"reconcile_mismatch\"\nfor = \"2m\"\nafter = \"15m\"\n";

    #[test]
    fn events_lost_hold_per_gap_and_fire_after_for() {
        let rules = rules(LOST);
        let mut state = ReconcileState::default();
        state.record(Run::new(
            T0,
            window(),
            coverage(T0),
            Ok(answer(lost(3), 3)),
            50,
        ));
        let mut alerts = Alerts::default();
        let holding = reconciled(&state, &rules, T0);
        assert_eq!(holding.len(), 1, "{holding:?}");
        assert_eq!(holding[0].labels["gap"], "missing");
        assert!(
            holding[0]
                .description
                .starts_with("3 counted failed call(s) whose terminal event is not stored"),
            "{}",
            holding[0].description
        );
        assert!(alerts.step(&rules, holding, T0).is_empty());
        assert_eq!(alerts.list()[0].state, State::Pending);
        assert_eq!(
            alerts.list()[0].summary,
            "events lost between adapter and table"
        );
        let fired = alerts.step(
            &rules,
            reconciled(&state, &rules, T0 + 2 * MINUTE),
            T0 + 2 * MINUTE,
        );
        assert_eq!(fired.len(), 1);
        assert_eq!(fired[0].state, State::Firing);
        // A later run that covers its window and matches resolves it.
        state.record(Run::new(
            T0 + 3 * MINUTE,
            window(),
            coverage(T0),
            Ok(answer(lost(0), 0)),
            50,
        ));
        assert!(reconciled(&state, &rules, T0 + 3 * MINUTE).is_empty());
        let resolved = alerts.step(&rules, Vec::new(), T0 + 3 * MINUTE);
        assert_eq!(resolved[0].state, State::Resolved);
    }

    #[test]
    fn a_matching_reconciliation_holds_nothing_and_extra_events_hold_too() {
        let rules = rules(LOST);
        let mut state = ReconcileState::default();
        state.record(Run::new(
            T0,
            window(),
            coverage(T0),
            Ok(answer(lost(0), 0)),
            50,
        ));
        assert!(reconciled(&state, &rules, T0 + MINUTE).is_empty());
        let odd = candor_query::reconcile::Totals {
            extra: 2,
            events_without_counter: 1,
            ..lost(0)
        };
        state.record(Run::new(T0, window(), coverage(T0), Ok(answer(odd, 1)), 50));
        let gaps: Vec<String> = reconciled(&state, &rules, T0 + MINUTE)
            .iter()
            .map(|condition| condition.labels["gap"].clone())
            .collect();
        assert_eq!(gaps, ["extra", "without_counter"]);
    }

    #[test]
    fn a_reconciliation_that_cannot_read_holds_unknown_never_passes() {
        let rules = rules(LOST);
        let mut state = ReconcileState::default();
        // Never run: unknown once `after` has passed since the start.
        assert!(reconciled(&state, &rules, T0).is_empty());
        let never = reconciled(&state, &rules, T0 + 10 * MINUTE);
        assert_eq!(never.len(), 1);
        assert_eq!(never[0].labels["gap"], "unknown");
        assert!(
            never[0]
                .description
                .contains("since the dashboards started")
                && never[0].description.contains("not finished a run yet"),
            "{}",
            never[0].description
        );
        // Only failed and partial runs, whose figures say 0 missing: still unknown, not a pass.
        state.record(Run::new(
            T0,
            window(),
            coverage(T0),
            Err("reading the tables failed: gone".into()),
            50,
        ));
        state.record(Run::new(
            T0 + MINUTE,
            window(),
            coverage(T0 - 30 * MINUTE),
            Ok(answer(lost(0), 0)),
            50,
        ));
        let holding = reconciled(&state, &rules, T0 + 10 * MINUTE);
        assert_eq!(holding.len(), 1, "{holding:?}");
        assert_eq!(holding[0].labels["gap"], "unknown");
        assert!(
            holding[0].description.contains("is partial"),
            "{}",
            holding[0].description
        );
        let mut alerts = Alerts::default();
        alerts.step(&rules, holding, T0 + 10 * MINUTE);
        assert!(
            alerts.list()[0].summary.contains("is unknown"),
            "{}",
            alerts.list()[0].summary
        );
        // A covered run at T0 + 11m: unknown stops holding, and only comes back `after` later.
        state.record(Run::new(
            T0 + 11 * MINUTE,
            window(),
            coverage(T0),
            Ok(answer(lost(0), 0)),
            50,
        ));
        assert!(reconciled(&state, &rules, T0 + 20 * MINUTE).is_empty());
        state.record(Run::failed(T0 + 12 * MINUTE, window(), "timeout".into()));
        assert!(reconciled(&state, &rules, T0 + 25 * MINUTE).is_empty());
        let again = reconciled(&state, &rules, T0 + 26 * MINUTE);
        assert_eq!(again.len(), 1);
        assert!(
            again[0].description.contains("timeout"),
            "{}",
            again[0].description
        );
    }
}
