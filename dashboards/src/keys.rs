//! The label sets the dashboards count calls and failure events by, and the groups a panel
//! shows them in.

use std::sync::Arc;

use candor_records::proto::OutcomeSource;
use candor_schema::OutcomeClass;
use serde::Serialize;

/// The labels calls are grouped by.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct CallKey {
    /// `service.name` of the calling process.
    pub service: Arc<str>,
    /// The tool called.
    pub tool: Arc<str>,
    /// The target it was called on.
    pub target: Arc<str>,
    /// Where the calls were recorded: `adapter` (declared), or the derived source (`genai`,
    /// `mcp`, `http`) whose standard spans the collector counted (the contract's section 10.7).
    pub source: Arc<str>,
}

impl CallKey {
    /// Whether the calls were derived from standard spans: their rate is a lower bound.
    pub fn derived(&self) -> bool {
        &*self.source != OutcomeSource::Adapter.as_str()
    }
}

/// The labels failure events are grouped by.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct FailureKey {
    /// Service, tool and target.
    #[serde(flatten)]
    pub call: CallKey,
    /// `partial` or `access_failure`.
    pub class: OutcomeClass,
    /// The failure kind.
    pub kind: Arc<str>,
    /// The retry action taken: `retry`, `exhausted`, `permanent` or `accept_partial`.
    pub action: Arc<str>,
}

/// Which label a panel groups calls by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// The target called.
    Target,
    /// The tool.
    Tool,
    /// The calling service.
    Service,
}

impl GroupBy {
    /// The group `key` belongs to: its label's value, and for derived calls their source in
    /// brackets, so that derived and declared calls are never one group.
    pub fn of(self, key: &CallKey) -> String {
        let value = match self {
            Self::Target => &key.target,
            Self::Tool => &key.tool,
            Self::Service => &key.service,
        };
        if key.derived() {
            format!("{value} [{}]", key.source)
        } else {
            value.to_string()
        }
    }
}

/// The label value a group name ([`GroupBy::of`]) stands for: a derived group's name without its
/// ` [source]`.
pub fn group_value(group: &str) -> &str {
    OutcomeSource::ALL
        .iter()
        .filter(|source| source.is_derived())
        .find_map(|source| {
            group
                .strip_suffix(']')
                .and_then(|rest| rest.strip_suffix(source.as_str()))
                .and_then(|rest| rest.strip_suffix(" ["))
        })
        .unwrap_or(group)
}
