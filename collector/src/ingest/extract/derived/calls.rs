//! The join across requests: the GenAI and MCP calls counted in recent requests, so that a span
//! of the same call that arrives in a later request (the server's span of a client's call, from
//! another process; a span of a later batch) is not counted again.
//!
//! A counted call is remembered by keys of its spans, each a 64-bit hash of the trace id and:
//! - each span's id (a later span whose parent is one of them, or a copy of one, is the call);
//! - each span's parent's id (a later span that is that parent is the call);
//! - each tool call id its spans carry (a later span with the same id in the trace is the call).
//!
//! A key is kept between `join_window` and twice that after the request that last remembered it
//! (generations: a new one starts every window, and the keys not remembered in the one before are
//! forgotten), and only once Kafka holds that request: a request that was refused leaves nothing to join. Past
//! `max_join_keys`, the older generation is forgotten early and then new keys are not kept; both
//! are counted. A key not kept can only make a later span count its call again, never lose one.
//! Two keys of distinct spans sharing a hash would join two calls: at a million keys, about one
//! chance in 10^13 per lookup, with a seed chosen when the collector starts.

use std::hash::BuildHasher as _;

use opentelemetry_proto::tonic::trace::v1::Span;

use super::HashMap;

/// What a call was counted as, ordered: a later span of a call remembered as counted at a lower
/// rank counts it again at its own (a failure seen only in the later request is never lost).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Rank {
    /// Only contact: `unverified`.
    Contact,
    /// `cancelled`.
    Cancelled,
    /// `access_failure`.
    Failed,
}

/// What a key stands for.
#[derive(Hash)]
enum Kind {
    Span,
    Parent,
    CallId,
}

/// The keys of one call, or those a span looks up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Key(u64);

/// The calls counted in recent requests, by their keys: one table, each key stamped with the
/// generation that last remembered it, so that a lookup is one probe.
#[derive(Debug, Default)]
pub(super) struct CallBook {
    keys: HashMap<Key, Kept>,
    /// The current generation.
    generation: u32,
    /// How many keys the current generation remembered (the others are older).
    current: usize,
    /// When it started (Unix nanoseconds).
    started: u64,
    seed: foldhash::fast::RandomState,
}

/// A remembered key: the highest rank its calls were counted at, and the last generation that
/// remembered it.
#[derive(Debug, Clone, Copy)]
struct Kept {
    rank: Rank,
    generation: u32,
}

/// The keys of a call to remember once its request is stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Remember {
    keys: Vec<(Key, Rank)>,
}

impl Remember {
    /// Whether there is nothing to remember.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// What remembering a request's calls came to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Remembered {
    /// Keys forgotten before their window ended, or not kept, to stay under `max_join_keys`.
    pub dropped: u64,
    /// Keys the book holds.
    pub held: u64,
}

impl CallBook {
    /// The key of a span's id in its trace.
    pub(super) fn span(&self, trace: &[u8], span: &[u8]) -> Key {
        Key(self.seed.hash_one((Kind::Span, trace, span)))
    }

    /// The key of a span's parent's id in its trace.
    pub(super) fn parent(&self, trace: &[u8], parent: &[u8]) -> Key {
        Key(self.seed.hash_one((Kind::Parent, trace, parent)))
    }

    /// The key of a tool call id in a trace.
    pub(super) fn call_id(&self, trace: &[u8], id: &str) -> Key {
        Key(self.seed.hash_one((Kind::CallId, trace, id)))
    }

    /// The highest rank a remembered call of `keys` was counted at, if any is remembered.
    pub(super) fn counted(&self, keys: impl IntoIterator<Item = Key>) -> Option<Rank> {
        keys.into_iter()
            .filter_map(|key| self.keys.get(&key))
            .map(|kept| kept.rank)
            .max()
    }

    /// Moves the book to `now` (Unix nanoseconds; an earlier time leaves it where it is): past
    /// a window since the current generation started, a new one starts and the keys no longer
    /// remembered in the one before are forgotten; past two, all are. The table keeps its
    /// allocation.
    pub(super) fn advance(&mut self, now: u64, window: std::time::Duration) {
        let window = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX).max(1);
        let elapsed = now.saturating_sub(self.started);
        if elapsed < window {
            return;
        }
        if elapsed < window.saturating_mul(2) {
            let previous = self.generation;
            self.keys.retain(|_, kept| kept.generation == previous);
        } else {
            self.keys.clear();
        }
        self.generation = self.generation.wrapping_add(1);
        self.current = 0;
        self.started = now;
    }

    /// Remembers `calls`' keys, keeping at most `max_keys` in all.
    pub(super) fn remember(&mut self, calls: Remember, max_keys: usize) -> Remembered {
        let mut dropped = 0u64;
        let generation = self.generation;
        for (key, rank) in calls.keys {
            if let Some(kept) = self.keys.get_mut(&key) {
                kept.rank = kept.rank.max(rank);
                if kept.generation != generation {
                    kept.generation = generation;
                    self.current += 1;
                }
                continue;
            }
            if self.keys.len() >= max_keys && self.keys.len() > self.current {
                // The older generation goes first, at once.
                let before = self.keys.len();
                self.keys.retain(|_, kept| kept.generation == generation);
                dropped += (before - self.keys.len()) as u64;
            }
            if self.keys.len() >= max_keys {
                dropped += 1;
                continue;
            }
            self.keys.insert(key, Kept { rank, generation });
            self.current += 1;
        }
        Remembered {
            dropped,
            held: self.keys.len() as u64,
        }
    }
}

/// What the book says of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Earlier {
    /// An earlier request counted it at its rank or higher: it is not counted again.
    Joined,
    /// An earlier request counted it without the failure or cancellation it shows: it is
    /// counted again, at its own class.
    Revised,
    /// No earlier request counted it.
    New,
}

/// The key buffers one request reuses for its calls.
#[derive(Debug, Default)]
pub(super) struct Lookup {
    /// What an earlier request's call would have left.
    lookups: Vec<Key>,
    /// What this call leaves.
    keys: Vec<Key>,
}

impl Lookup {
    /// Looks up the call of `spans` (each with its tool call id, when it has one) in `trace`:
    /// a span that is, or is the child or the parent of, a remembered span, or a call id
    /// remembered in the trace. Unless it is joined, its keys go to `remember` at `rank`.
    pub(super) fn call<'s>(
        &mut self,
        book: &CallBook,
        trace: &[u8],
        spans: impl IntoIterator<Item = (&'s Span, Option<&'s str>)>,
        rank: Rank,
        remember: &mut Remember,
    ) -> Earlier {
        self.lookups.clear();
        self.keys.clear();
        for (span, call_id) in spans {
            let own = book.span(trace, &span.span_id);
            self.lookups
                .extend([own, book.parent(trace, &span.span_id)]);
            self.keys.push(own);
            if !span.parent_span_id.is_empty() {
                self.lookups.push(book.span(trace, &span.parent_span_id));
                self.keys.push(book.parent(trace, &span.parent_span_id));
            }
            if let Some(id) = call_id {
                let id = book.call_id(trace, id);
                self.lookups.push(id);
                self.keys.push(id);
            }
        }
        let earlier = match book.counted(self.lookups.iter().copied()) {
            Some(counted) if counted >= rank => return Earlier::Joined,
            Some(_) => Earlier::Revised,
            None => Earlier::New,
        };
        remember.call(self.keys.iter().copied(), rank);
        earlier
    }
}

impl Remember {
    /// Adds one counted call's keys at its rank.
    pub(super) fn call(&mut self, keys: impl IntoIterator<Item = Key>, rank: Rank) {
        self.keys.extend(keys.into_iter().map(|key| (key, rank)));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const WINDOW: Duration = Duration::from_secs(30);
    const SECOND: u64 = 1_000_000_000;

    fn remembered(book: &mut CallBook, keys: &[Key], rank: Rank, max: usize) -> Remembered {
        let mut calls = Remember::default();
        calls.call(keys.iter().copied(), rank);
        book.remember(calls, max)
    }

    #[test]
    fn a_call_is_found_by_any_of_its_keys_at_its_highest_rank_within_the_window() {
        let mut book = CallBook::default();
        book.advance(100 * SECOND, WINDOW);
        let span = book.span(b"trace-1", b"span-1");
        let parent = book.parent(b"trace-1", b"agent-1");
        let id = book.call_id(b"trace-1", "call_1");
        remembered(&mut book, &[span, parent, id], Rank::Contact, 100);
        assert_eq!(book.counted([id]), Some(Rank::Contact));
        remembered(&mut book, &[id], Rank::Failed, 100);
        assert_eq!(book.counted([span, id]), Some(Rank::Failed));
        // Another trace, or the same ids as another kind of key, is another call.
        assert_eq!(book.counted([book.call_id(b"trace-2", "call_1")]), None);
        assert_eq!(book.counted([book.parent(b"trace-1", b"span-1")]), None);

        // Kept for a window at least, forgotten after two.
        book.advance(131 * SECOND, WINDOW);
        assert_eq!(book.counted([span]), Some(Rank::Contact));
        book.advance(162 * SECOND, WINDOW);
        assert_eq!(book.counted([span, parent, id]), None);
    }

    #[test]
    fn past_the_bound_the_older_generation_goes_first_then_new_keys_and_both_are_counted() {
        let mut book = CallBook::default();
        book.advance(100 * SECOND, WINDOW);
        let keys: Vec<Key> = (0..6u8).map(|n| book.span(b"trace", &[n; 8])).collect();
        assert_eq!(
            remembered(&mut book, &keys[..3], Rank::Contact, 4).dropped,
            0
        );
        book.advance(131 * SECOND, WINDOW);
        // Three older keys and two new ones would pass four: the older three go.
        let second = remembered(&mut book, &keys[3..5], Rank::Contact, 4);
        assert_eq!(
            second,
            Remembered {
                dropped: 3,
                held: 2
            }
        );
        assert_eq!(book.counted([keys[0]]), None);
        // Four in the newer generation, and no older one to forget: the fifth is not kept.
        let third = remembered(&mut book, &keys[1..6], Rank::Contact, 4);
        assert_eq!(
            third,
            Remembered {
                dropped: 1,
                held: 4
            }
        );
        assert_eq!(book.counted([keys[5]]), None);
    }
}
