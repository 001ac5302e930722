//! The model's two id structures: label sets interned as dense ids, and the record ids seen
//! lately, by which a retried copy is recognised.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use candor_query::window::Micros;

/// Interns keys as dense ids: the index from a key to its id. The keys themselves, in id order,
/// are kept where readers share them ([`super::Tallies`]).
#[derive(Debug)]
pub(super) struct Ids<K> {
    ids: HashMap<K, u32>,
}

impl<K> Default for Ids<K> {
    fn default() -> Self {
        Self {
            ids: HashMap::new(),
        }
    }
}

impl<K: std::hash::Hash + Eq + Clone> Ids<K> {
    /// The id of `key`, pushed onto `keys` when it is new.
    pub(super) fn id(&mut self, key: K, keys: &mut Arc<Vec<K>>) -> u32 {
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        // More than 2^32 label sets would exhaust memory long before the ids.
        let id = u32::try_from(keys.len()).unwrap_or(u32::MAX);
        Arc::make_mut(keys).push(key.clone());
        self.ids.insert(key, id);
        id
    }
}

/// Remembers ids for a while, in arrival order, to recognise retried copies.
#[derive(Debug, Default)]
pub(super) struct RecentIds {
    seen: HashSet<u128>,
    order: VecDeque<(Micros, u128)>,
}

impl RecentIds {
    /// Records `id` at `at`; false when it was already seen within the window.
    pub(super) fn insert(&mut self, id: u128, at: Micros, window: Micros) -> bool {
        while let Some(&(oldest, old)) = self.order.front() {
            if oldest >= at.saturating_sub(window) {
                break;
            }
            self.order.pop_front();
            self.seen.remove(&old);
        }
        if !self.seen.insert(id) {
            return false;
        }
        self.order.push_back((at, id));
        true
    }
}
