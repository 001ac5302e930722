//! The dashboards' own state on disk: the alert instances, so that a restart (or a kill -9)
//! neither forgets what was firing nor fires it again, and the counters `/metrics` serves with
//! the offsets they hold ([`crate::model::StoredTotals`]), so that they continue across it.
//!
//! Both are kept in an embedded store (redb, as the collector's spool) at
//! `<state_dir>/state.redb`. Each alert instance is kept with its state (pending with the time
//! its `for` began, firing, resolved), when it fired and resolved, when its newest notification
//! was handed to a receiver and what became of it. The alert loop writes the whole set after
//! each evaluation and each delivery, in one transaction, durably ([`StateStore::save`]); the
//! start reads it back ([`restore`]). The counters are written every few seconds once the
//! history is read ([`StateStore::save_totals`]).
//!
//! Read back:
//!
//! - a firing instance whose condition still holds stays firing, and is sent again only when
//!   `alerts.resend` has passed since its newest notification: no second notification for the
//!   restart itself;
//! - one whose condition ended while the dashboards were down resolves at the first evaluation,
//!   and its resolve is sent;
//! - a pending one keeps the time its `for` began;
//! - a notification that was on its way when the process stopped is taken as undelivered, and
//!   is sent again (at least once: a receiver such as Alertmanager recognises the repeat);
//! - an instance whose rule is no longer in the rules file is dropped, and the count said.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use candor_query::window::Micros;
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use crate::alerts::{Acknowledgement, Alert, Delivery, Escalation, Labels, State};
use crate::model::StoredTotals;
use crate::rules::Rule;
use crate::state::Shared;
use crate::sync::lock;

/// Alert instances by key (`[name, labels]` as JSON), each as JSON ([`Stored`]).
const ALERTS: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("alerts");
/// The model's counters under one key, [`TOTALS_KEY`], as JSON ([`StoredTotals`]).
const TOTALS: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("totals");
const TOTALS_KEY: &str = "model";
/// The store's file under the state directory.
const FILE: &str = "state.redb";
/// Its name when it held only the alert instances: taken over at start.
const OLD_FILE: &str = "alerts.redb";

/// The store could not be opened, read or written.
#[derive(Debug, thiserror::Error)]
#[error("the dashboards' state store {path}: {reason}")]
pub struct StoreError {
    /// The store's file.
    pub path: String,
    /// What went wrong.
    pub reason: String,
}

/// The dashboards' state store.
#[derive(Debug)]
pub struct StateStore {
    db: Database,
    path: PathBuf,
}

impl StateStore {
    /// Opens (or creates) `<dir>/state.redb`, creating `dir`; a store under its old name
    /// (`alerts.redb`) is renamed first.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let path = dir.join(FILE);
        let error = |reason: String| StoreError {
            path: path.display().to_string(),
            reason,
        };
        std::fs::create_dir_all(dir).map_err(|err| error(err.to_string()))?;
        let old = dir.join(OLD_FILE);
        if old.exists() && !path.exists() {
            std::fs::rename(&old, &path)
                .map_err(|err| error(format!("renaming {OLD_FILE}: {err}")))?;
        }
        let db = Database::create(&path).map_err(|err| error(err.to_string()))?;
        Ok(Self { db, path })
    }

    fn error(&self, reason: impl ToString) -> StoreError {
        StoreError {
            path: self.path.display().to_string(),
            reason: reason.to_string(),
        }
    }

    /// Every instance stored; entries that cannot be read are counted, not returned.
    pub fn load(&self) -> Result<(Vec<Stored>, usize), StoreError> {
        let read = || -> Result<(Vec<Stored>, usize), redb::Error> {
            let txn = self.db.begin_read()?;
            let table = match txn.open_table(ALERTS) {
                Ok(table) => table,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok((Vec::new(), 0)),
                Err(err) => return Err(err.into()),
            };
            let (mut stored, mut unreadable) = (Vec::new(), 0);
            for entry in table.iter()? {
                let (_, value) = entry?;
                match serde_json::from_slice(value.value()) {
                    Ok(alert) => stored.push(alert),
                    Err(_) => unreadable += 1,
                }
            }
            Ok((stored, unreadable))
        };
        read().map_err(|err| self.error(err))
    }

    /// Replaces what is stored with `alerts`, durably.
    pub fn save(&self, alerts: &[Stored]) -> Result<(), StoreError> {
        let write = || -> Result<(), redb::Error> {
            let mut txn = self.db.begin_write()?;
            txn.set_durability(Durability::Immediate)?;
            {
                let mut table = txn.open_table(ALERTS)?;
                table.retain(|_, _| false)?;
                for alert in alerts {
                    let key = serde_json::to_string(&(&alert.name, &alert.labels))
                        .map_err(|err| redb::Error::Corrupted(err.to_string()))?;
                    let value = serde_json::to_vec(alert)
                        .map_err(|err| redb::Error::Corrupted(err.to_string()))?;
                    table.insert(key.as_str(), value.as_slice())?;
                }
            }
            txn.commit()?;
            Ok(())
        };
        write().map_err(|err| self.error(err))
    }
}

impl StateStore {
    /// The stored counters; `None` when none were stored (a first start) or they cannot be read
    /// (the error says which).
    pub fn load_totals(&self) -> Result<Option<StoredTotals>, StoreError> {
        let read = || -> Result<Option<Vec<u8>>, redb::Error> {
            let txn = self.db.begin_read()?;
            let table = match txn.open_table(TOTALS) {
                Ok(table) => table,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
                Err(err) => return Err(err.into()),
            };
            Ok(table.get(TOTALS_KEY)?.map(|value| value.value().to_vec()))
        };
        match read().map_err(|err| self.error(err))? {
            None => Ok(None),
            Some(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|err| self.error(format!("the stored counters: {err}"))),
        }
    }

    /// Replaces the stored counters with `totals`, durably.
    pub fn save_totals(&self, totals: &StoredTotals) -> Result<(), StoreError> {
        let value = serde_json::to_vec(totals).map_err(|err| self.error(err))?;
        let write = || -> Result<(), redb::Error> {
            let mut txn = self.db.begin_write()?;
            txn.set_durability(Durability::Immediate)?;
            txn.open_table(TOTALS)?
                .insert(TOTALS_KEY, value.as_slice())?;
            txn.commit()?;
            Ok(())
        };
        write().map_err(|err| self.error(err))
    }
}

/// How often the counters are saved, when records were applied since the last save.
pub const TOTALS_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Saves the model's counters every [`TOTALS_EVERY`] once the tables' part of the history is
/// read (before it, the offsets applied do not yet say which records the totals hold), counting
/// each write ([`crate::state::Shared::counter_saves`]).
pub async fn save_totals(store: Arc<StateStore>, shared: Arc<Shared>) {
    let mut ticker = tokio::time::interval(TOTALS_EVERY);
    let mut saved_records = None;
    loop {
        ticker.tick().await;
        if lock(&shared.pipeline).history_read.is_none() {
            continue;
        }
        let stored = {
            let model = lock(&shared.model);
            let records = model.applied().records;
            if saved_records == Some(records) {
                continue;
            }
            saved_records = Some(records);
            StoredTotals {
                saved_at: Some(candor_query::window::now()),
                ..model.stored_totals()
            }
        };
        let store = Arc::clone(&store);
        let written = tokio::task::spawn_blocking(move || store.save_totals(&stored)).await;
        let counts = &shared.counter_saves;
        match written {
            Ok(Ok(())) => {
                counts.saved.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Err(err)) => {
                counts.failed.fetch_add(1, Ordering::Relaxed);
                saved_records = None;
                tracing::error!(error = %err, "counters not saved");
            }
            Err(err) => {
                counts.failed.fetch_add(1, Ordering::Relaxed);
                saved_records = None;
                tracing::error!(error = %err, "the counters' writer panicked");
            }
        }
    }
}

/// An alert instance as stored: the alert's own fields, with times in microseconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stored {
    /// The rule's name.
    pub name: String,
    /// The instance's labels.
    pub labels: Labels,
    /// What was measured at the newest evaluation that held.
    pub description: String,
    /// The rule's summary.
    pub summary: String,
    /// `pending`, `firing` or `resolved`.
    pub state: StoredState,
    /// When the condition began to hold.
    pub active_since: Micros,
    /// When it fired.
    pub fired_at: Option<Micros>,
    /// When it resolved.
    pub resolved_at: Option<Micros>,
    /// When its newest notification was handed to the notifier.
    pub last_sent: Option<Micros>,
    /// What became of it.
    pub delivery: StoredDelivery,
    /// Who acknowledged it, and when (microseconds).
    #[serde(default)]
    pub acknowledged: Option<(String, Micros)>,
    /// When it was escalated, and what became of that notification.
    #[serde(default)]
    pub escalated: Option<(Micros, StoredDelivery)>,
}

/// [`State`], stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoredState {
    /// [`State::Pending`].
    Pending,
    /// [`State::Firing`].
    Firing,
    /// [`State::Resolved`].
    Resolved,
}

/// [`Delivery`], stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "delivery", rename_all = "snake_case")]
pub enum StoredDelivery {
    /// [`Delivery::NotSent`].
    NotSent {
        /// Why.
        reason: String,
    },
    /// [`Delivery::Sending`].
    Sending,
    /// [`Delivery::Delivered`].
    Delivered {
        /// When.
        at: Micros,
        /// The state that was sent.
        sent: StoredState,
    },
    /// [`Delivery::Undelivered`].
    Undelivered {
        /// When the last attempt ended.
        at: Micros,
        /// The state that could not be sent.
        sent: StoredState,
        /// What went wrong.
        reason: String,
    },
}

/// Why a notification handed to the notifier before the process stopped counts as undelivered.
pub const STOPPED_WHILE_SENDING: &str =
    "the dashboards stopped before a receiver answered; sent again";

impl StoredState {
    fn of(state: State) -> Self {
        match state {
            State::Pending => Self::Pending,
            State::Firing => Self::Firing,
            State::Resolved => Self::Resolved,
        }
    }

    fn state(self) -> State {
        match self {
            Self::Pending => State::Pending,
            Self::Firing => State::Firing,
            Self::Resolved => State::Resolved,
        }
    }
}

impl StoredDelivery {
    fn of(delivery: &Delivery) -> Self {
        match delivery {
            Delivery::NotSent { reason } => Self::NotSent {
                reason: reason.clone(),
            },
            Delivery::Sending => Self::Sending,
            Delivery::Delivered { at, sent } => Self::Delivered {
                at: *at,
                sent: StoredState::of(*sent),
            },
            Delivery::Undelivered { at, sent, reason } => Self::Undelivered {
                at: *at,
                sent: StoredState::of(*sent),
                reason: reason.clone(),
            },
        }
    }

    /// The delivery read back: one that was being sent (`sent` the state, at `since`) is
    /// undelivered.
    fn delivery(self, sent: State, since: Micros) -> Delivery {
        match self {
            Self::NotSent { reason } => Delivery::NotSent { reason },
            Self::Sending => Delivery::Undelivered {
                at: since,
                sent,
                reason: STOPPED_WHILE_SENDING.into(),
            },
            Self::Delivered { at, sent } => Delivery::Delivered {
                at,
                sent: sent.state(),
            },
            Self::Undelivered { at, sent, reason } => Delivery::Undelivered {
                at,
                sent: sent.state(),
                reason,
            },
        }
    }
}

impl Stored {
    /// An instance as stored.
    pub fn of(alert: &Alert) -> Self {
        let delivery = StoredDelivery::of(&alert.delivery);
        Self {
            name: alert.name.clone(),
            labels: alert.labels.clone(),
            description: alert.description.clone(),
            summary: alert.summary.clone(),
            state: StoredState::of(alert.state),
            active_since: alert.active_since,
            fired_at: alert.fired_at,
            resolved_at: alert.resolved_at,
            last_sent: alert.last_sent,
            delivery,
            acknowledged: alert
                .acknowledged
                .as_ref()
                .map(|ack| (ack.by.clone(), ack.at)),
            escalated: alert
                .escalated
                .as_ref()
                .map(|escalation| (escalation.at, StoredDelivery::of(&escalation.delivery))),
        }
    }
}

/// The stored instances as alerts of `rules`: those whose rule is gone are dropped (their
/// number is returned), and a notification that was being sent is undelivered.
pub fn restore(stored: Vec<Stored>, rules: &[Rule]) -> (Vec<Alert>, usize) {
    let mut dropped = 0;
    let mut alerts = Vec::with_capacity(stored.len());
    for alert in stored {
        let Some(rule) = rules.iter().find(|rule| rule.name == alert.name) else {
            dropped += 1;
            continue;
        };
        let state = alert.state.state();
        let delivery = alert
            .delivery
            .delivery(state, alert.last_sent.unwrap_or(alert.active_since));
        let escalated = alert.escalated.map(|(at, delivery)| Escalation {
            at,
            delivery: delivery.delivery(state, at),
        });
        alerts.push(Alert {
            name: alert.name,
            severity: rule.severity.as_str(),
            labels: alert.labels,
            description: alert.description,
            summary: alert.summary,
            state,
            active_since: alert.active_since,
            fired_at: alert.fired_at,
            resolved_at: alert.resolved_at,
            delivery,
            last_sent: alert.last_sent,
            acknowledged: alert
                .acknowledged
                .map(|(by, at)| Acknowledgement { by, at }),
            escalated,
        });
    }
    (alerts, dropped)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn rules() -> Vec<Rule> {
        crate::rules::parse(
            "[[rule]]\nname = \"Stale\"\nkind = \"pipeline_stale\"\nafter = \"1m\"\n",
            crate::rules::Limits {
                step: 60_000_000,
                history: 6 * 3_600_000_000,
            },
        )
        .unwrap()
    }

    /// A firing or other instance of a rule `name`, labelled `hop="collector"`.
    pub(crate) fn alert(name: &str, state: State, delivery: Delivery) -> Alert {
        Alert {
            name: name.into(),
            severity: "page",
            labels: Labels::from([("hop".to_owned(), "collector".to_owned())]),
            description: "collector: no evidence".into(),
            summary: "stale".into(),
            state,
            active_since: 1_000,
            fired_at: Some(2_000),
            resolved_at: None,
            delivery,
            last_sent: Some(2_500),
            acknowledged: None,
            escalated: None,
        }
    }

    #[test]
    fn what_is_saved_is_read_back_as_it_was() {
        let dir = std::env::temp_dir().join(format!(
            "candor-dashboards-store-{}-{}",
            std::process::id(),
            line!()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let store = StateStore::open(&dir).unwrap();
        assert_eq!(store.load().unwrap(), (Vec::new(), 0));
        let firing = alert(
            "Stale",
            State::Firing,
            Delivery::Delivered {
                at: 2_600,
                sent: State::Firing,
            },
        );
        let mut firing = firing;
        firing.acknowledged = Some(Acknowledgement {
            by: "sre".into(),
            at: 2_700,
        });
        firing.escalated = Some(Escalation {
            at: 2_650,
            delivery: Delivery::Delivered {
                at: 2_660,
                sent: State::Firing,
            },
        });
        store.save(&[Stored::of(&firing)]).unwrap();
        drop(store);
        let store = StateStore::open(&dir).unwrap();
        let (stored, unreadable) = store.load().unwrap();
        assert_eq!(unreadable, 0);
        let (restored, dropped) = restore(stored, &rules());
        assert_eq!(dropped, 0);
        assert_eq!(restored, vec![firing]);
        // A save replaces: nothing of the earlier set stays.
        store.save(&[]).unwrap();
        assert_eq!(store.load().unwrap(), (Vec::new(), 0));
        // The counters beside them: none before the first save, then the newest saved.
        assert_eq!(store.load_totals().unwrap(), None);
        let mut totals = StoredTotals {
            positions: vec![("candor.outcomes.v1".into(), 0, 12)],
            ..StoredTotals::default()
        };
        totals.rejected.insert("unknown_class".into(), 3);
        store.save_totals(&totals).unwrap();
        totals.rejected.insert("unknown_class".into(), 4);
        store.save_totals(&totals).unwrap();
        drop(store);
        // A store under its old name is taken over.
        std::fs::rename(dir.join(FILE), dir.join(OLD_FILE)).unwrap();
        let store = StateStore::open(&dir).unwrap();
        assert!(!dir.join(OLD_FILE).exists());
        assert_eq!(store.load_totals().unwrap(), Some(totals));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_notification_on_its_way_is_undelivered_and_a_rule_that_is_gone_drops_its_alerts() {
        let stored = vec![
            Stored::of(&alert("Stale", State::Firing, Delivery::Sending)),
            Stored::of(&alert("Removed", State::Firing, Delivery::Sending)),
        ];
        let (restored, dropped) = restore(stored, &rules());
        assert_eq!(dropped, 1);
        assert_eq!(restored.len(), 1);
        assert_eq!(
            restored[0].delivery,
            Delivery::Undelivered {
                at: 2_500,
                sent: State::Firing,
                reason: STOPPED_WHILE_SENDING.into(),
            }
        );
        assert_eq!(restored[0].severity, "page");
    }
}
