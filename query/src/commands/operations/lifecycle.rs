//! An operation folded from its events, and the rules that judge it pending, stuck or unknown.

use std::hash::BuildHasher as _;
use std::sync::Arc;

use candor_schema::LifecycleState;
use foldhash::fast::FixedState;
use hashbrown::HashTable;
use serde::Serialize;

use crate::coverage::InstanceSilence;
use crate::window::Micros;

/// One row of `operation_events`, as the judgement needs it, its texts borrowed from the row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperationEventRow<'a> {
    /// `service_name`.
    pub service: &'a str,
    /// `tool_name`.
    pub tool: &'a str,
    /// `tool_target`.
    pub target: &'a str,
    /// `operation_id`.
    pub operation_id: &'a str,
    /// `service_instance_id`.
    pub instance: &'a str,
    /// `lifecycle_state`.
    pub state: LifecycleState,
    /// `event_time`.
    pub at: Micros,
    /// `actor`, when the event has one.
    pub actor: Option<&'a str>,
    /// `source_system`.
    pub source_system: &'a str,
}

impl OperationEventRow<'_> {
    /// The texts that identify its operation, as [`OperationKey::parts`] gives them.
    fn key_parts(&self) -> (&str, &str, &str, &str) {
        (self.service, self.tool, self.target, self.operation_id)
    }
}

/// What identifies an operation. The texts are shared with every other operation of the same
/// service, tool and target ([`Folded`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OperationKey {
    /// `service_name`.
    pub service: Arc<str>,
    /// `tool_name`.
    pub tool: Arc<str>,
    /// `tool_target`.
    pub target: Arc<str>,
    /// `operation_id`.
    pub operation_id: Arc<str>,
}

impl OperationKey {
    /// Its texts, in the order they are hashed and compared.
    fn parts(&self) -> (&str, &str, &str, &str) {
        (&self.service, &self.tool, &self.target, &self.operation_id)
    }
}

/// One operation, folded from its events in the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    /// Which operation.
    pub key: OperationKey,
    /// The state of its latest event.
    pub state: LifecycleState,
    /// The state of its first event in the window.
    pub first_state: LifecycleState,
    /// The time of its first event in the window.
    pub first_seen: Micros,
    /// The time of its latest event.
    pub last_seen: Micros,
    /// The adapter instance that sent its latest event.
    pub instance: Arc<str>,
    /// The actor of its latest event that names one.
    pub actor: Option<Arc<str>>,
    /// The source system of its latest event.
    pub source_system: Arc<str>,
    /// The time of the event `actor` came from.
    actor_at: Micros,
}

impl Operation {
    /// Whether it has not ended: its latest state is not terminal.
    pub fn is_open(&self) -> bool {
        !self.state.is_terminal()
    }
}

/// Operations folded from their events ([`Folded::fold`]), each once, by key.
///
/// Every text is kept once however many operations share it: a service, tool, target, instance,
/// source system or actor is the same few values over thousands of operations, so the texts are
/// interned, and an event of an operation already known is folded without copying a text. The
/// keys are strings written by the collector, so a fast hasher suffices.
#[derive(Debug, Default)]
pub struct Folded {
    operations: HashTable<Operation>,
    texts: HashTable<Arc<str>>,
    hasher: FixedState,
}

impl Folded {
    /// Takes `event` into the operations folded so far: it starts its operation when it is the
    /// first of it, else it is added to it.
    ///
    /// Folded in any order, every operation ends with its latest state: that of its event with
    /// the greatest time. Of two events at the same time a terminal state wins, and of two
    /// terminal ones the later in the vocabulary's order (failed over cancelled over completed
    /// over partial), so that a completion contradicted by a failure at the same instant is not
    /// taken for one; of two open ones the further along (running over queued over accepted).
    /// Copies of an event count once, as any event does: they agree.
    pub fn fold(&mut self, event: &OperationEventRow<'_>) {
        let hash = self.hasher.hash_one(event.key_parts());
        if let Some(operation) = self
            .operations
            .find_mut(hash, |known| known.key.parts() == event.key_parts())
        {
            add(operation, event, &mut self.texts, &self.hasher);
            return;
        }
        let mut shared = |text: &str| intern(&mut self.texts, &self.hasher, text);
        let operation = Operation {
            key: OperationKey {
                service: shared(event.service),
                tool: shared(event.tool),
                target: shared(event.target),
                // Nearly every operation has an id of its own: not interned.
                operation_id: Arc::from(event.operation_id),
            },
            state: event.state,
            first_state: event.state,
            first_seen: event.at,
            last_seen: event.at,
            instance: shared(event.instance),
            actor_at: event.at,
            actor: event.actor.map(&mut shared),
            source_system: shared(event.source_system),
        };
        let hasher = &self.hasher;
        self.operations
            .insert_unique(hash, operation, |known| hasher.hash_one(known.key.parts()));
    }

    /// How many operations are kept.
    pub fn len(&self) -> usize {
        self.operations.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.operations.is_empty()
    }

    /// Every operation, in no order.
    pub fn iter(&self) -> impl Iterator<Item = &Operation> {
        self.operations.iter()
    }

    /// Every operation, in no order, owned.
    pub fn into_values(self) -> impl Iterator<Item = Operation> {
        self.operations.into_iter()
    }

    /// Keeps the operations `keep` says to keep, and lets go of the texts only the others
    /// held.
    pub fn retain(&mut self, mut keep: impl FnMut(&Operation) -> bool) {
        self.operations.retain(|operation| keep(operation));
        self.texts.retain(|text| Arc::strong_count(text) > 1);
    }
}

/// Takes one more of its events into `operation`; of two, the state that wins is the one
/// [`Folded::fold`] describes.
fn add(
    operation: &mut Operation,
    event: &OperationEventRow<'_>,
    texts: &mut HashTable<Arc<str>>,
    hasher: &FixedState,
) {
    if (event.at, event.state) < (operation.first_seen, operation.first_state) {
        operation.first_seen = event.at;
        operation.first_state = event.state;
    }
    if let Some(actor) = event.actor {
        let later = match &operation.actor {
            Some(known) => (event.at, actor) > (operation.actor_at, &**known),
            None => true,
        };
        if later {
            operation.actor_at = event.at;
            operation.actor = Some(intern(texts, hasher, actor));
        }
    }
    let newer = (
        event.at,
        event.state.is_terminal(),
        event.state,
        event.instance,
        event.source_system,
    ) > (
        operation.last_seen,
        operation.state.is_terminal(),
        operation.state,
        &*operation.instance,
        &*operation.source_system,
    );
    if newer {
        operation.last_seen = event.at;
        operation.state = event.state;
        if *operation.instance != *event.instance {
            operation.instance = intern(texts, hasher, event.instance);
        }
        if *operation.source_system != *event.source_system {
            operation.source_system = intern(texts, hasher, event.source_system);
        }
    }
}

/// The one shared copy of `text` in `texts`, made when it is the first.
fn intern(texts: &mut HashTable<Arc<str>>, hasher: &FixedState, text: &str) -> Arc<str> {
    let hash = hasher.hash_one(text);
    if let Some(known) = texts.find(hash, |known| **known == *text) {
        return Arc::clone(known);
    }
    let shared: Arc<str> = Arc::from(text);
    texts.insert_unique(hash, Arc::clone(&shared), |known| hasher.hash_one(&**known));
    shared
}

/// What is known of an open operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OpenStatus {
    /// Open for less than `--stuck-after`.
    Pending,
    /// Open for `--stuck-after` or longer, while its adapter instance was reporting.
    Stuck,
    /// Its adapter instance went silent after its latest event: nobody was left to report its
    /// end, so whether it ended is unknown (it is not called stuck).
    Unknown,
}

impl OpenStatus {
    /// The spelling in answers.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Stuck => "stuck",
            Self::Unknown => "unknown",
        }
    }
}

/// The status of `operation`, `None` when it has ended.
///
/// It is [`OpenStatus::Unknown`] when one of `silences` is of the service and instance that sent
/// its latest event and starts at or after that event, or runs to `known_until` (the end of what
/// is known: the silence's end when the instance never came back). Otherwise it is
/// [`OpenStatus::Stuck`] when `end` (the window's end, or now) is at least `stuck_after` after it
/// was first seen, else [`OpenStatus::Pending`].
pub fn status(
    operation: &Operation,
    silences: &[InstanceSilence],
    known_until: Micros,
    end: Micros,
    stuck_after: Micros,
) -> Option<OpenStatus> {
    if !operation.is_open() {
        return None;
    }
    let silent_after = silences.iter().any(|silence| {
        *silence.service == *operation.key.service
            && *silence.instance == *operation.instance
            && (silence.from >= operation.last_seen || silence.to >= known_until)
    });
    Some(if silent_after {
        OpenStatus::Unknown
    } else if end.saturating_sub(operation.first_seen) >= stuck_after {
        OpenStatus::Stuck
    } else {
        OpenStatus::Pending
    })
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{
        MINUTE, SECOND, STUCK_AFTER, event, latest_states, only, silence,
    };
    use super::*;

    #[test]
    fn the_latest_event_gives_the_state_and_the_first_gives_the_age() {
        use candor_schema::LifecycleState::{Accepted, Completed, Queued, Running};
        // Read out of order, from two instances: the latest event wins, whatever the order.
        let operation = only(vec![
            event("op-1", "b", Running, 30 * SECOND),
            event("op-1", "a", Accepted, 10 * SECOND),
            event("op-1", "a", Queued, 20 * SECOND),
        ]);
        assert_eq!(operation.state, Running);
        assert_eq!(&*operation.instance, "b");
        assert_eq!(
            (operation.first_seen, operation.last_seen),
            (10 * SECOND, 30 * SECOND)
        );
        assert_eq!(operation.first_state, Accepted);
        assert!(operation.is_open());
        // Operations are told apart by their id (and service, tool, target).
        let both = latest_states(vec![
            event("op-1", "a", Accepted, 10 * SECOND),
            event("op-2", "a", Completed, 10 * SECOND),
        ]);
        assert_eq!(both.len(), 2);
        assert_eq!(
            both.iter()
                .map(|op| (&*op.key.operation_id, op.state))
                .collect::<Vec<_>>(),
            [("op-1", Accepted), ("op-2", Completed)]
        );
    }

    #[test]
    fn on_a_tie_a_terminal_state_wins_in_any_order() {
        use candor_schema::LifecycleState::{Accepted, Completed, Failed, Queued, Running};
        for events in [
            vec![
                event("op", "a", Running, 5 * SECOND),
                event("op", "a", Completed, 5 * SECOND),
            ],
            vec![
                event("op", "a", Completed, 5 * SECOND),
                event("op", "a", Running, 5 * SECOND),
            ],
        ] {
            let operation = only(events);
            assert_eq!(operation.state, Completed);
            assert!(!operation.is_open());
        }
        // Of two terminal states at one instant, the failure is believed over the completion.
        for events in [
            vec![
                event("op", "a", Completed, 5 * SECOND),
                event("op", "a", Failed, 5 * SECOND),
            ],
            vec![
                event("op", "a", Failed, 5 * SECOND),
                event("op", "a", Completed, 5 * SECOND),
            ],
        ] {
            assert_eq!(only(events).state, Failed);
        }
        // Of two open states, the further along; the first state is the earliest one.
        let operation = only(vec![
            event("op", "a", Queued, 5 * SECOND),
            event("op", "a", Accepted, 5 * SECOND),
        ]);
        assert_eq!((operation.state, operation.first_state), (Queued, Accepted));
        // A copy of an event changes nothing.
        let twice = only(vec![
            event("op", "a", Accepted, 5 * SECOND),
            event("op", "a", Accepted, 5 * SECOND),
        ]);
        assert_eq!(twice, only(vec![event("op", "a", Accepted, 5 * SECOND)]));
    }

    #[test]
    fn the_latest_actor_named_is_kept() {
        use candor_schema::LifecycleState::{Accepted, Running};
        let mut first = event("op", "a", Accepted, SECOND);
        first.actor = Some("alice");
        let later = event("op", "a", Running, 2 * SECOND);
        assert_eq!(only(vec![later, first]).actor.as_deref(), Some("alice"));
        let mut newer = later;
        newer.actor = Some("bob");
        assert_eq!(only(vec![newer, first]).actor.as_deref(), Some("bob"));
    }

    #[test]
    fn an_open_operation_is_pending_then_stuck_and_an_ended_one_has_no_status() {
        use candor_schema::LifecycleState::{Accepted, Completed, Running};
        let end = 60 * MINUTE;
        let known = end;
        let young = only(vec![event("young", "a", Accepted, end - 5 * MINUTE)]);
        assert_eq!(
            status(&young, &[], known, end, STUCK_AFTER),
            Some(OpenStatus::Pending)
        );
        // Its age runs from when it was first seen, not from its latest event.
        let old = only(vec![
            event("old", "a", Accepted, end - 20 * MINUTE),
            event("old", "a", Running, end - MINUTE),
        ]);
        assert_eq!(
            status(&old, &[], known, end, STUCK_AFTER),
            Some(OpenStatus::Stuck)
        );
        // Exactly at the threshold it is stuck.
        let edge = only(vec![event("edge", "a", Accepted, end - STUCK_AFTER)]);
        assert_eq!(
            status(&edge, &[], known, end, STUCK_AFTER),
            Some(OpenStatus::Stuck)
        );
        let done = only(vec![
            event("done", "a", Accepted, end - 50 * MINUTE),
            event("done", "a", Completed, end - 40 * MINUTE),
        ]);
        assert_eq!(status(&done, &[], known, end, STUCK_AFTER), None);
    }

    #[test]
    fn an_operation_whose_instance_went_silent_after_it_is_unknown_not_stuck() {
        use candor_schema::LifecycleState::Accepted;
        let end = 60 * MINUTE;
        let known = end - MINUTE;
        let operation = only(vec![event("op", "a", Accepted, 10 * MINUTE)]);
        // Silent from after its event, and back later: its end may have gone unreported.
        let after = [silence("a", 12 * MINUTE, 30 * MINUTE)];
        assert_eq!(
            status(&operation, &after, known, end, STUCK_AFTER),
            Some(OpenStatus::Unknown)
        );
        // Silent since before its event and never back: nobody is left to report its end.
        let to_the_end = [silence("a", 5 * MINUTE, known)];
        assert_eq!(
            status(&operation, &to_the_end, known, end, STUCK_AFTER),
            Some(OpenStatus::Unknown)
        );
        // A silence that ended before it was reported, or before it and back, changes nothing.
        let before = [
            silence("a", MINUTE, 8 * MINUTE),
            silence("a", 5 * MINUTE, 20 * MINUTE),
        ];
        assert_eq!(
            status(&operation, &before, known, end, STUCK_AFTER),
            Some(OpenStatus::Stuck)
        );
        // Nor does another instance's silence, or another service's instance of the same id.
        let mut elsewhere = silence("a", 12 * MINUTE, known);
        elsewhere.service = "billing".into();
        let others = [silence("b", 12 * MINUTE, known), elsewhere];
        assert_eq!(
            status(&operation, &others, known, end, STUCK_AFTER),
            Some(OpenStatus::Stuck)
        );
        // An ended operation has no status, whatever its instance did.
        let done = only(vec![
            event("done", "a", Accepted, 10 * MINUTE),
            event("done", "a", LifecycleState::Cancelled, 11 * MINUTE),
        ]);
        assert_eq!(status(&done, &after, known, end, STUCK_AFTER), None);
    }
}
