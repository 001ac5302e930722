//! The bound on the distinct targets and tools each service's derived calls may name.

use super::{DerivedConfig, HashMap};

/// The targets and tools each service keeps under the cap. Time is cut into periods of
/// `forget_targets_after`; an entry remembers the last period a call named it, and when a new
/// period starts, the entries not named in the one before are forgotten. A target named at
/// least once a period keeps its place; one that stops being named frees it within two periods.
#[derive(Debug, Default)]
pub(super) struct TargetBook {
    /// Per service (by hash), the hashes of the targets and tools it keeps, with the last period
    /// that named each.
    by_service: HashMap<u64, HashMap<u64, u64>>,
    total: usize,
    /// The period of the latest call seen.
    period: u64,
}

/// What the cap counts: a service's targets and its tools apart.
#[derive(Hash)]
pub(super) enum Kept {
    Target,
    Tool,
}

impl TargetBook {
    /// The key a service's entries are kept under.
    pub(super) fn service_key(name: &str) -> u64 {
        use std::hash::BuildHasher as _;
        foldhash::fast::FixedState::default().hash_one(name)
    }

    /// Whether the service may keep `value` as a target or tool: it has it already, or is under
    /// its cap and the book under its total. Values are kept as 64-bit hashes; two values
    /// sharing one would only let the second in without counting it.
    pub(super) fn admit(
        &mut self,
        service: u64,
        kind: Kept,
        value: &str,
        config: &DerivedConfig,
    ) -> bool {
        use std::hash::BuildHasher as _;
        let value = foldhash::fast::FixedState::default().hash_one((kind, value));
        if let Some(last) = self
            .by_service
            .get_mut(&service)
            .and_then(|known| known.get_mut(&value))
        {
            *last = self.period;
            return true;
        }
        let seen = self.by_service.get(&service).map_or(0, HashMap::len);
        if seen >= config.max_targets_per_service || self.total >= config.max_targets {
            return false;
        }
        self.total += 1;
        self.by_service
            .entry(service)
            .or_default()
            .insert(value, self.period);
        true
    }

    /// Moves the book to the period of `now` (Unix nanoseconds; an earlier time leaves it
    /// where it is): when a new period starts, the entries no call named in the period before
    /// it are forgotten.
    pub(super) fn advance(&mut self, now: u64, config: &DerivedConfig) {
        let length = u64::try_from(config.forget_targets_after.as_nanos())
            .unwrap_or(u64::MAX)
            .max(1);
        let period = now / length;
        if period <= self.period {
            return;
        }
        let keep_from = period - 1;
        self.by_service.retain(|_, known| {
            known.retain(|_, last| *last >= keep_from);
            !known.is_empty()
        });
        self.total = self.by_service.values().map(HashMap::len).sum();
        self.period = period;
    }
}
