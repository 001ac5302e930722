//! Crash points for the compactor's crash tests.
//!
//! Built with the `fault-injection` feature, `CANDOR_COMPACT_CRASH_AT=POINT[@TABLE]:N` aborts the
//! process (like `kill -9`: no destructor, no flush) the N-th time it reaches POINT (for TABLE,
//! when given). Without the feature, [`reach`] does nothing and the variable is not read.

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
    if let Some((name, n)) = plan
        && (*name == here || name == point.as_str())
        && SEEN.fetch_add(1, Ordering::SeqCst) + 1 == *n
    {
        eprintln!("fault injection: aborting at {name} #{n}");
        std::process::abort();
    }
}

/// Does nothing: built without the `fault-injection` feature.
#[cfg(not(feature = "fault-injection"))]
pub fn reach(_point: Point, _table: Option<&str>) {}
