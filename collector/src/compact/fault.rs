//! Crash points for the compactor's crash tests.
//!
//! Built with the `fault-injection` feature, `CANDOR_COMPACT_CRASH_AT=POINT[@TABLE]:N` aborts the
//! process (like `kill -9`: no destructor, no flush) the N-th time it reaches POINT (for TABLE,
//! when given). Without the feature, [`reach`] does nothing and the variable is not read.
//!
//! In-process tests (the compactor's model test) use [`arm`] instead: the armed point unwinds the
//! current thread with a [`Crashed`] payload, so the test can drop the engine as a crash would
//! and go on.

/// A step of the compactor's loop where a crash is interesting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// Records were read into memory; nothing written yet.
    Read,
    /// A table's Parquet files are written; its Delta commit is not.
    FilesWritten,
    /// A table's Delta commit landed; other tables' commits and Kafka's offsets are not.
    TableCommitted,
    /// Every table's commit landed; Kafka's consumer offsets are not committed yet.
    BeforeOffsetCommit,
}

impl Point {
    /// The spelling in `CANDOR_COMPACT_CRASH_AT`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::FilesWritten => "files_written",
            Self::TableCommitted => "table_committed",
            Self::BeforeOffsetCommit => "before_offset_commit",
        }
    }
}

/// Aborts the process when the configured crash point is reached for the configured time.
/// `table` names the table the step is about, when it is about one.
#[cfg(feature = "fault-injection")]
pub fn reach(point: Point, table: Option<&str>) {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    static PLAN: OnceLock<Option<(String, u64)>> = OnceLock::new();
    static SEEN: AtomicU64 = AtomicU64::new(0);
    let plan = PLAN.get_or_init(|| {
        let value = std::env::var("CANDOR_COMPACT_CRASH_AT").ok()?;
        // A plan that cannot be read must not pass as "no crash": the test would prove nothing.
        let parsed = value
            .split_once(':')
            .and_then(|(name, n)| Some((name.to_owned(), n.parse::<u64>().ok()?)));
        match parsed {
            Some(plan) => Some(plan),
            None => panic!("CANDOR_COMPACT_CRASH_AT={value:?}: expected POINT[@TABLE]:N"),
        }
    });
    let here = match table {
        Some(table) => format!("{}@{table}", point.as_str()),
        None => point.as_str().to_owned(),
    };
    let armed = ARMED.with(|armed| {
        let (name, n) = armed.borrow().clone()?;
        if name != here && name != point.as_str() {
            return None;
        }
        if n > 1 {
            *armed.borrow_mut() = Some((name, n - 1));
            return None;
        }
        *armed.borrow_mut() = None;
        Some(here.clone())
    });
    if let Some(at) = armed {
        std::panic::panic_any(Crashed(at));
    }
    if let Some((name, n)) = plan
        && (*name == here || name == point.as_str())
        && SEEN.fetch_add(1, Ordering::SeqCst) + 1 == *n
    {
        eprintln!("fault injection: aborting at {name} #{n}");
        std::process::abort();
    }
}

#[cfg(feature = "fault-injection")]
thread_local! {
    /// The in-process crash plan of this thread: `POINT[@TABLE]` and how many more times to pass
    /// it before crashing.
    static ARMED: std::cell::RefCell<Option<(String, u64)>> = const { std::cell::RefCell::new(None) };
}

/// The panic payload of an in-process crash: where it happened (`POINT[@TABLE]`).
#[cfg(feature = "fault-injection")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crashed(pub String);

/// Arms an in-process crash on this thread: the `nth` time [`reach`] passes `point` (for
/// `table`, when given) it unwinds with [`Crashed`]. Replaces any earlier plan of this thread.
#[cfg(feature = "fault-injection")]
pub fn arm(point: Point, table: Option<&str>, nth: u64) {
    let name = match table {
        Some(table) => format!("{}@{table}", point.as_str()),
        None => point.as_str().to_owned(),
    };
    ARMED.with(|armed| *armed.borrow_mut() = Some((name, nth.max(1))));
}

/// Removes this thread's in-process crash plan, if it was not reached.
#[cfg(feature = "fault-injection")]
pub fn disarm() {
    ARMED.with(|armed| *armed.borrow_mut() = None);
}

/// Does nothing: built without the `fault-injection` feature.
#[cfg(not(feature = "fault-injection"))]
pub fn reach(_point: Point, _table: Option<&str>) {}
