//! Freshness of every hop of the pipeline, and what it means for a panel. Pure.
//!
//! A hop is LIVE while its newest evidence is younger than its threshold, STALE once it is older
//! (since the moment of that evidence: nothing is known after it), and UNKNOWN when there never
//! was any. A panel built on the stream is only as fresh as the hops it depends on: the worst of
//! them decides its state, so a stalled collector or an unreachable Kafka turns the panel STALE
//! instead of letting it show a green zero.

use candor_query::window::{Micros, serialize_opt_micros};
use serde::Serialize;

/// A time for a person: UTC to the second (the JSON fields keep the microseconds).
pub fn when(at: Micros) -> String {
    chrono::DateTime::from_timestamp_micros(at).map_or_else(
        || format!("{at}µs"),
        |at| at.format("%Y-%m-%d %H:%M:%SZ").to_string(),
    )
}

/// The state of a hop or a panel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Freshness {
    /// Evidence within its threshold.
    Live,
    /// No evidence since `since`.
    Stale {
        /// The newest evidence: nothing is known after it.
        #[serde(serialize_with = "candor_query::window::serialize_micros")]
        since: Micros,
    },
    /// Never any evidence.
    Unknown,
}

impl Freshness {
    /// Of two states, the one a dependent panel must show: UNKNOWN over STALE over LIVE; of
    /// two STALE, the earlier.
    pub fn worst(self, other: Self) -> Self {
        match (self, other) {
            (Self::Unknown, _) | (_, Self::Unknown) => Self::Unknown,
            (Self::Stale { since: a }, Self::Stale { since: b }) => Self::Stale { since: a.min(b) },
            (stale @ Self::Stale { .. }, Self::Live) | (Self::Live, stale @ Self::Stale { .. }) => {
                stale
            }
            (Self::Live, Self::Live) => Self::Live,
        }
    }

    /// `LIVE`, `STALE` or `UNKNOWN`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Live => "LIVE",
            Self::Stale { .. } => "STALE",
            Self::Unknown => "UNKNOWN",
        }
    }

    /// Whether the data can be taken as complete up to now.
    pub fn is_live(self) -> bool {
        self == Self::Live
    }
}

/// The hops, in the order records pass them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HopName {
    /// The collectors, by their newest heartbeat.
    Collector,
    /// Kafka, by the dashboards' own consumer's newest contact with it.
    Kafka,
    /// The Delta tables, by their committed watermark.
    Table,
}

impl HopName {
    /// Every hop.
    pub const ALL: [Self; 3] = [Self::Collector, Self::Kafka, Self::Table];

    /// The name in metrics and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Collector => "collector",
            Self::Kafka => "kafka",
            Self::Table => "table",
        }
    }
}

/// One hop's freshness.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hop {
    /// Which hop.
    pub hop: HopName,
    /// Its state.
    pub freshness: Freshness,
    /// Its newest evidence.
    #[serde(serialize_with = "serialize_opt_micros")]
    pub last_seen: Option<Micros>,
    /// How old the evidence may get before the hop is STALE.
    pub stale_after_micros: Micros,
    /// What the evidence is, and any problem seen.
    pub detail: String,
}

impl Hop {
    /// Judges a hop from its newest evidence at `now`.
    pub fn judge(
        hop: HopName,
        last_seen: Option<Micros>,
        stale_after: Micros,
        now: Micros,
        detail: String,
    ) -> Self {
        let freshness = match last_seen {
            None => Freshness::Unknown,
            Some(at) if now.saturating_sub(at) > stale_after => Freshness::Stale { since: at },
            Some(_) => Freshness::Live,
        };
        Self {
            hop,
            freshness,
            last_seen,
            stale_after_micros: stale_after,
            detail,
        }
    }

    /// Seconds since the newest evidence, when there is any.
    pub fn age_seconds(&self, now: Micros) -> Option<f64> {
        self.last_seen
            .map(|at| now.saturating_sub(at).max(0) as f64 / 1e6)
    }
}

/// What a panel's numbers cover.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PanelCoverage {
    /// LIVE, STALE or UNKNOWN.
    pub freshness: Freshness,
    /// The panel's window start.
    #[serde(serialize_with = "serialize_opt_micros")]
    pub from: Option<Micros>,
    /// How far its data reaches: the window end when LIVE, else the newest evidence.
    #[serde(serialize_with = "serialize_opt_micros")]
    pub until: Option<Micros>,
    /// What is not covered, in words; empty when everything is.
    pub gaps: Vec<String>,
}

impl PanelCoverage {
    /// The coverage of a panel over `[since, now)` built on the stream, given the hops it
    /// depends on and from when the model holds data.
    pub fn of(hops: &[&Hop], holds_from: Option<Micros>, since: Micros, now: Micros) -> Self {
        let freshness = hops
            .iter()
            .fold(Freshness::Live, |worst, hop| worst.worst(hop.freshness));
        let mut gaps = Vec::new();
        for hop in hops {
            match hop.freshness {
                Freshness::Live => {}
                Freshness::Stale { since } => gaps.push(format!(
                    "{} STALE: nothing after {}, so what happened since is unknown (not zero)",
                    hop.hop.as_str(),
                    when(since)
                )),
                Freshness::Unknown => gaps.push(format!(
                    "{} UNKNOWN: no evidence from it yet ({})",
                    hop.hop.as_str(),
                    hop.detail
                )),
            }
        }
        let until = match freshness {
            Freshness::Live => Some(now),
            Freshness::Stale { since } => Some(since),
            Freshness::Unknown => None,
        };
        match holds_from {
            None => gaps.push(
                "the history is being read (the tables, then the stream): no data is held yet"
                    .into(),
            ),
            Some(from) if from > since => gaps.push(format!(
                "data is held only from {} (the dashboards started or the history ends there); \
                 before it is unknown",
                when(from)
            )),
            Some(_) => {}
        }
        let freshness = if holds_from.is_none() {
            Freshness::Unknown
        } else {
            freshness
        };
        Self {
            freshness,
            from: Some(since),
            until,
            gaps,
        }
    }

    /// Whether a zero on this panel is a confirmed zero: LIVE over the whole window.
    pub fn zero_is_confirmed(&self) -> bool {
        self.freshness.is_live() && self.gaps.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Micros = 1_000_000;

    #[test]
    fn a_hop_turns_stale_after_its_threshold_and_unknown_without_evidence() {
        let now = 1000 * S;
        let live = Hop::judge(
            HopName::Collector,
            Some(now - 10 * S),
            30 * S,
            now,
            String::new(),
        );
        assert_eq!(live.freshness, Freshness::Live);
        let stale = Hop::judge(
            HopName::Collector,
            Some(now - 31 * S),
            30 * S,
            now,
            String::new(),
        );
        assert_eq!(
            stale.freshness,
            Freshness::Stale {
                since: now - 31 * S
            }
        );
        let unknown = Hop::judge(HopName::Table, None, 30 * S, now, String::new());
        assert_eq!(unknown.freshness, Freshness::Unknown);
    }

    #[test]
    fn the_worst_hop_decides_and_the_earliest_stale_wins() {
        let a = Freshness::Stale { since: 5 };
        let b = Freshness::Stale { since: 3 };
        assert_eq!(a.worst(b), Freshness::Stale { since: 3 });
        assert_eq!(Freshness::Live.worst(a), a);
        assert_eq!(a.worst(Freshness::Unknown), Freshness::Unknown);
    }

    #[test]
    fn a_panel_on_a_stale_hop_is_covered_only_until_the_evidence() {
        let now = 1000 * S;
        let collector = Hop::judge(
            HopName::Collector,
            Some(now - 100 * S),
            30 * S,
            now,
            String::new(),
        );
        let kafka = Hop::judge(HopName::Kafka, Some(now), 30 * S, now, String::new());
        let panel = PanelCoverage::of(&[&collector, &kafka], Some(0), now - 300 * S, now);
        assert_eq!(
            panel.freshness,
            Freshness::Stale {
                since: now - 100 * S
            }
        );
        assert_eq!(panel.until, Some(now - 100 * S));
        assert!(!panel.zero_is_confirmed());
        assert!(
            panel.gaps[0].contains("unknown (not zero)"),
            "{:?}",
            panel.gaps
        );
    }

    #[test]
    fn a_panel_before_the_model_holds_data_says_so() {
        let now = 1000 * S;
        let hop = Hop::judge(HopName::Collector, Some(now), 30 * S, now, String::new());
        let short = PanelCoverage::of(&[&hop], Some(now - 10 * S), now - 300 * S, now);
        assert_eq!(short.freshness, Freshness::Live);
        assert!(!short.zero_is_confirmed());
        let none = PanelCoverage::of(&[&hop], None, now - 300 * S, now);
        assert_eq!(none.freshness, Freshness::Unknown);
        let whole = PanelCoverage::of(&[&hop], Some(0), now - 300 * S, now);
        assert!(whole.zero_is_confirmed());
    }
}
