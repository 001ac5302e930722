//! The Delta tables, opened read-only: where they are, their positions and their newest rows.
//!
//! Nothing here writes: a table is loaded from its log and handed to DataFusion as a table
//! provider. A table root that does not exist is an error that names the fix, not an empty
//! answer.

use std::path::Path;
use std::sync::Arc;

use candor_records::tables::Table;
use deltalake::DeltaTable;
use deltalake::datafusion::catalog::TableProvider;
use deltalake::datafusion::prelude::SessionContext;
use deltalake::kernel::LogicalFileView;

use crate::files::{ListedFile, TableFiles};
use crate::window::Micros;

/// Why a table could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The root is a local directory that does not exist.
    #[error(
        "the table root {0} does not exist; start the local stack (./deploy/local/up.sh) or the \
         compactor, or point --data-dir / --tables (CANDOR_DATA_DIR / CANDOR_TABLES) at the \
         tables"
    )]
    RootMissing(String),
    /// The root or a table location is not a usable URL.
    #[error("the table root {root:?} is not a directory or URL: {reason}")]
    BadRoot {
        /// As given.
        root: String,
        /// What was wrong.
        reason: String,
    },
    /// No Delta table at the location.
    #[error("no {table} table under {root}: the compactor has not created it yet")]
    NoTable {
        /// The table.
        table: &'static str,
        /// The root.
        root: String,
    },
    /// The Delta library failed.
    #[error("reading the {table} table: {source}")]
    Delta {
        /// The table.
        table: &'static str,
        /// The cause.
        source: deltalake::DeltaTableError,
    },
}

/// Where the tables are: a local directory or an object store URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRoot(String);

impl TableRoot {
    /// A root as given (a path or a URL).
    pub fn new(root: impl Into<String>) -> Self {
        Self(root.into())
    }

    /// As given.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Fails when the root is a local directory that does not exist.
    pub fn check(&self) -> Result<(), StoreError> {
        let local = !self.0.contains("://") || self.0.starts_with("file://");
        let path = self.0.strip_prefix("file://").unwrap_or(&self.0);
        if local && !Path::new(path).is_dir() {
            return Err(StoreError::RootMissing(self.0.clone()));
        }
        Ok(())
    }

    fn table_url(&self, table: Table) -> Result<url::Url, StoreError> {
        candor_records::stores::register();
        let location = format!("{}/{}", self.0.trim_end_matches('/'), table.name());
        deltalake::ensure_table_uri(location).map_err(|err| StoreError::BadRoot {
            root: self.0.clone(),
            reason: err.to_string(),
        })
    }
}

/// One table as loaded: the Delta table at one version.
#[derive(Debug, Clone)]
pub struct OpenTable {
    /// Which table.
    pub table: Table,
    /// The loaded table.
    pub delta: DeltaTable,
}

impl OpenTable {
    /// Loads the newest version of `table` under `root`, read-only.
    pub async fn open(root: &TableRoot, table: Table) -> Result<Self, StoreError> {
        let delta_err = |source| StoreError::Delta {
            table: table.name(),
            source,
        };
        let url = root.table_url(table)?;
        let mut delta = deltalake::DeltaTableBuilder::from_url(url)
            .and_then(deltalake::DeltaTableBuilder::build)
            .map_err(delta_err)?;
        if !delta
            .log_store()
            .is_delta_table_location()
            .await
            .map_err(delta_err)?
        {
            return Err(StoreError::NoTable {
                table: table.name(),
                root: root.as_str().to_owned(),
            });
        }
        delta.load().await.map_err(delta_err)?;
        Ok(Self { table, delta })
    }

    /// The table version read.
    pub fn version(&self) -> Option<u64> {
        self.delta.version()
    }

    /// The newest value of a time column from the Delta log's statistics, as
    /// [`OpenTable::span_from_log`] gives it.
    pub fn newest_from_log(&self, column: &str) -> Option<Option<Micros>> {
        self.span_from_log(column)
            .map(|span| span.map(|(_, newest)| newest))
    }

    /// The oldest and newest values of a time column from the Delta log's statistics, without
    /// reading a file, as [`spanning`] gives them for [`OpenTable::file_spans`].
    pub fn span_from_log(&self, column: &str) -> Option<Option<(Micros, Micros)>> {
        spanning(&self.file_spans(column)?)
    }

    /// Every file of the table with its span of `column` from the Delta log's statistics; `None`
    /// when the table's file list cannot be read. The bounds are outward: Delta cuts a
    /// timestamp minimum down and rounds a maximum up to the millisecond, so every row lies
    /// within them (and the newest may be up to 1 ms late).
    pub fn file_spans(&self, column: &str) -> Option<Vec<FileSpan>> {
        let snapshot = self.delta.snapshot().ok()?;
        Some(
            snapshot
                .log_data()
                .iter()
                .map(|file| FileSpan {
                    path: file.object_store_path().to_string(),
                    span: file_span(&file, column),
                })
                .collect(),
        )
    }

    /// The position (next offset to read) the table holds for a partition of its own topic:
    /// everything before it is in the table, nothing after it is.
    pub async fn position(&self, partition: i32) -> Result<Option<i64>, StoreError> {
        let err = |source| StoreError::Delta {
            table: self.table.name(),
            source,
        };
        self.delta
            .snapshot()
            .map_err(err)?
            .transaction_version(
                self.delta.log_store().as_ref(),
                self.table.position_app_id(partition),
            )
            .await
            .map_err(err)
    }

    /// The table restricted to `files` (paths as [`FileSpan::path`] gives them) as a
    /// DataFusion provider. The object store is the one [`OpenTable::provider`] registered.
    pub async fn provider_over(
        &self,
        files: Vec<String>,
    ) -> Result<Arc<dyn TableProvider>, StoreError> {
        self.delta
            .table_provider()
            .with_file_paths(files)
            .await
            .map_err(|e| StoreError::Delta {
                table: self.table.name(),
                source: deltalake::DeltaTableError::Generic(format!("as a query source: {e}")),
            })
    }

    /// The table as a DataFusion provider, with its object store registered in `context`: its
    /// listed Parquet files ([`TableFiles`]) when its protocol asks a reader for nothing more,
    /// else the Delta provider.
    pub async fn provider(&self, context: &SessionContext) -> Result<Provider, StoreError> {
        let err = |source| StoreError::Delta {
            table: self.table.name(),
            source,
        };
        self.delta
            .update_datafusion_session(&context.state())
            .map_err(err)?;
        let delta = self.delta.table_provider().await.map_err(|e| {
            err(deltalake::DeltaTableError::Generic(format!(
                "as a query source: {e}"
            )))
        })?;
        let snapshot = self.delta.snapshot().map_err(err)?;
        if snapshot.protocol().min_reader_version() != 1 {
            return Ok(Provider::Delta(delta));
        }
        let time_column = self.table.time_column();
        let listed = snapshot
            .log_data()
            .iter()
            .map(|file| ListedFile {
                path: file.object_store_path().to_string(),
                size: u64::try_from(file.size()).unwrap_or(0),
                rows: file.num_records(),
                partition_values: {
                    let values = file.partition_values_map();
                    snapshot
                        .metadata()
                        .partition_columns()
                        .iter()
                        .map(|column| values.get(column).cloned().flatten())
                        .collect()
                },
                span: file_span(&file, time_column),
            })
            .collect();
        let files = TableFiles::new(
            self.delta.table_url(),
            delta.schema(),
            snapshot.metadata().partition_columns(),
            time_column,
            listed,
        )
        .map_err(|e| {
            err(deltalake::DeltaTableError::Generic(format!(
                "its files as a query source: {e}"
            )))
        })?;
        Ok(Provider::Files(Arc::new(files)))
    }
}

/// A table as a question reads it.
#[derive(Debug, Clone)]
pub enum Provider {
    /// The listed Parquet files, read directly.
    Files(Arc<TableFiles>),
    /// Through the Delta provider, for a table whose protocol asks a reader for more.
    Delta(Arc<dyn TableProvider>),
}

impl Provider {
    /// As DataFusion takes it.
    pub fn table(&self) -> Arc<dyn TableProvider> {
        match self {
            Self::Files(files) => files.clone(),
            Self::Delta(delta) => delta.clone(),
        }
    }
}

/// One file of a table and the span of a time column in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSpan {
    /// Relative to the table root, in the percent-encoded form of an object store path.
    pub path: String,
    /// The oldest and newest values; `None` when the file has no statistics for the column.
    pub span: Option<(Micros, Micros)>,
}

impl FileSpan {
    /// Whether the file may hold rows in [`since`, `until`): its span overlaps the window, or
    /// it has none, which cannot rule anything out.
    pub fn may_overlap(&self, since: Micros, until: Micros) -> bool {
        may_overlap(self.span, since, until)
    }
}

/// Whether a file with `span` (`None` when unknown) may hold rows in [`since`, `until`).
pub fn may_overlap(span: Option<(Micros, Micros)>, since: Micros, until: Micros) -> bool {
    span.is_none_or(|(oldest, newest)| oldest < until && newest >= since)
}

/// The span of a table's files together: `Some(None)` for a table without files, `None` when a
/// file has no statistics for the column.
pub fn spanning(files: &[FileSpan]) -> Option<Option<(Micros, Micros)>> {
    let mut span: Option<(Micros, Micros)> = None;
    for file in files {
        let (oldest, newest) = file.span?;
        span = Some(span.map_or((oldest, newest), |(low, high)| {
            (low.min(oldest), high.max(newest))
        }));
    }
    Some(span)
}

/// The oldest and newest values of a time column in one file's statistics, bounded outward as
/// [`OpenTable::file_spans`] says; `None` when the file has none for it.
fn file_span(file: &LogicalFileView, column: &str) -> Option<(Micros, Micros)> {
    use deltalake::kernel::scalars::ScalarExt as _;
    let parse = |stats: serde_json::Value| -> Option<Micros> {
        let text = stats.get(column)?.as_str()?.to_owned();
        chrono::NaiveDateTime::parse_from_str(&text, "%Y-%m-%d %H:%M:%S%.f")
            .ok()
            .map(|at| at.and_utc().timestamp_micros())
    };
    let oldest = parse(file.min_values()?.to_json())?;
    let newest = parse(file.max_values()?.to_json())?;
    Some((oldest, newest))
}
