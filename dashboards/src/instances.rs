//! Adapter instances and their silence: an instance that sent no counter point for three of its
//! intervals (at most the `adapter_silent` rule's `after`), and neither said it stopped nor was
//! replaced, is silent, and its calls since are unknown. The overview, the operations' judgement
//! and `/metrics` read the same rows.

use std::sync::Arc;

use candor_query::coverage::SeenBy;
use candor_query::window::Micros;
use serde::Serialize;

use crate::rules::{Rule, RuleKind};

/// An instance that reports: an adapter's, as its counter points show it, or one whose calls
/// are derived from its spans, as the collectors' senders' heartbeats show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstanceSeen {
    /// Its service.
    pub service: Arc<str>,
    /// Its `service.instance.id`.
    pub instance: Arc<str>,
    /// What shows its exports.
    pub seen_by: SeenBy,
    /// Its first point's time.
    #[serde(serialize_with = "candor_query::window::serialize_micros")]
    pub first: Micros,
    /// Its newest point's time.
    #[serde(serialize_with = "candor_query::window::serialize_micros")]
    pub last: Micros,
    /// Its export interval: the one its newest export declared (`candor.adapter.export_interval`),
    /// else the smallest gap seen between two of its export times, once known.
    pub interval_micros: Option<Micros>,
    /// Its newest export said that it was its last (an export interval of 0): it shut down.
    pub stopped: bool,
    /// A new instance of its service started after its newest export: it was replaced.
    pub replaced: bool,
}

/// An adapter instance and whether it went silent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InstanceRow {
    /// What was seen.
    #[serde(flatten)]
    pub seen: InstanceSeen,
    /// No counter point for three of its intervals (or the silence threshold), and it neither
    /// said it stopped nor was replaced: its calls since are unknown.
    pub silent: bool,
}

/// The first `adapter_silent` rule's `after`, else 10 minutes: how long an instance may send no
/// counter point before it is silent.
pub fn silent_after(rules: &[Rule]) -> Micros {
    rules
        .iter()
        .find_map(|rule| match rule.kind {
            RuleKind::AdapterSilent { after } => Some(after),
            _ => None,
        })
        .unwrap_or(10 * 60_000_000)
}

/// Each instance, silent when it sent no counter point for three of its intervals (at most
/// `silent_after`) and neither said it stopped nor was replaced.
pub fn instance_rows(
    seen: Vec<InstanceSeen>,
    now: Micros,
    silent_after: Micros,
) -> Vec<InstanceRow> {
    seen.into_iter()
        .map(|seen| {
            let threshold = seen.interval_micros.map_or(silent_after, |interval| {
                candor_schema::time::silent_after(interval).min(silent_after)
            });
            InstanceRow {
                silent: !seen.stopped
                    && !seen.replaced
                    && now.saturating_sub(seen.last) > threshold,
                seen,
            }
        })
        .collect()
}
