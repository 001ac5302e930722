//! A Delta table read as the Parquet files its log lists, with their partition values.
//!
//! The Delta provider replays the table's log and parses every file's statistics again on each
//! question, then passes every batch through a stream of its own. A table whose protocol asks a
//! reader for nothing beyond reader version 1 (no deletion vectors, no column mapping) is
//! exactly its listed Parquet files with their partition values; [`TableFiles`] reads those
//! files through DataFusion's own Parquet scan, with the list, the partition values and the
//! time spans worked out once when the table is opened. A table that asks more is read through
//! the Delta provider ([`crate::store::OpenTable::provider`] decides).
//!
//! Before any file is opened, a question's filters rule out the files whose partition values or
//! time span cannot match; within a file, DataFusion's row-group statistics, bloom filters and
//! page index do the rest, as they do under the Delta provider.

use std::sync::Arc;

use deltalake::arrow::datatypes::{FieldRef, Schema, SchemaRef};
use deltalake::datafusion::catalog::{Session, TableProvider};
use deltalake::datafusion::common::pruning::PrunableStatistics;
use deltalake::datafusion::common::stats::Precision;
use deltalake::datafusion::common::{
    ColumnStatistics, Result, ScalarValue, Statistics, ToDFSchema,
};
use deltalake::datafusion::datasource::listing::PartitionedFile;
use deltalake::datafusion::datasource::physical_plan::parquet::CachedParquetFileReaderFactory;
use deltalake::datafusion::datasource::physical_plan::{
    FileGroup, FileScanConfigBuilder, ParquetFileReaderFactory, ParquetSource,
};
use deltalake::datafusion::datasource::source::DataSourceExec;
use deltalake::datafusion::datasource::table_schema::TableSchema;
use deltalake::datafusion::execution::object_store::ObjectStoreUrl;
use deltalake::datafusion::logical_expr::utils::conjunction;
use deltalake::datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use deltalake::datafusion::physical_optimizer::pruning::PruningPredicateBuilder;
use deltalake::datafusion::physical_plan::ExecutionPlan;
use deltalake::datafusion::physical_plan::empty::EmptyExec;
use deltalake::datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use deltalake::parquet::arrow::arrow_reader::ArrowReaderOptions;
use deltalake::parquet::arrow::async_reader::AsyncFileReader;
use deltalake::parquet::file::metadata::{PageIndexPolicy, ParquetMetaData};
use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;

/// One listed file: where it is, its size and what the log says of it.
#[derive(Debug, Clone)]
pub struct ListedFile {
    /// Relative to the table root, in the percent-encoded form of an object store path.
    pub path: String,
    /// Its size in bytes, as the log records it.
    pub size: u64,
    /// Its row count, when the log records one.
    pub rows: Option<usize>,
    /// The value of each partition column (in the order of [`TableFiles::new`]'s
    /// `partition_columns`), as the log writes it; `None` for a null value.
    pub partition_values: Vec<Option<String>>,
    /// The oldest and newest value of the table's time column, when the log's statistics have
    /// them (bounded outward, as [`crate::store::FileSpan`] says).
    pub span: Option<(i64, i64)>,
}

/// A table's files as a DataFusion provider: a Parquet scan of the listed files, with their
/// partition values as columns.
#[derive(Debug)]
pub struct TableFiles {
    /// What a question sees: the table's columns in the table's order.
    schema: SchemaRef,
    /// What the scan reads: the file columns, then the partition columns (DataFusion's order),
    /// which the statistics follow.
    scan_schema: SchemaRef,
    /// For each column of `schema`, its position in `scan_schema`.
    order: Vec<usize>,
    /// The columns the files hold.
    file_schema: SchemaRef,
    /// The columns the log's partition values give.
    partition_fields: Vec<FieldRef>,
    /// The store the files are in, as registered in the session.
    store: ObjectStoreUrl,
    /// Each file as DataFusion reads it.
    files: Vec<PartitionedFile>,
    /// Each file's row count, partition values and time span, for ruling files out before they
    /// are opened.
    statistics: Vec<Arc<Statistics>>,
    /// Each file's time span, as [`ListedFile::span`].
    spans: Vec<Option<(i64, i64)>>,
}

/// Why a table's files could not be read as plain Parquet.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// A partition column the log names is not in the table's schema.
    #[error("the partition column {0} is not in the table's schema")]
    PartitionColumnMissing(String),
    /// A partition value does not parse as its column's type.
    #[error("the partition value {value:?} of {column} in {path}: {reason}")]
    PartitionValue {
        /// The column.
        column: String,
        /// As the log wrote it.
        value: String,
        /// The file.
        path: String,
        /// What the parse said.
        reason: String,
    },
    /// The table root is not a URL a store can be named from.
    #[error("the table location {0} does not name an object store")]
    Location(String),
}

impl TableFiles {
    /// The files of a table at `table_url`, whose whole schema is `schema` and whose partition
    /// columns are `partition_columns` (anywhere in it: the provider's schema puts them last);
    /// `time_column` is the column [`ListedFile::span`] gives.
    pub fn new(
        table_url: &url::Url,
        schema: SchemaRef,
        partition_columns: &[String],
        time_column: &str,
        listed: Vec<ListedFile>,
    ) -> Result<Self, FilesError> {
        // A column added to a table after its first version follows its partition columns in
        // the table's schema, while the scan reads the partition columns last; a question sees
        // the table's order.
        let table_schema = Arc::clone(&schema);
        let partition_fields = partition_columns
            .iter()
            .map(|name| {
                schema
                    .field_with_name(name)
                    .map(|field| Arc::new(field.clone()))
                    .map_err(|_| FilesError::PartitionColumnMissing(name.clone()))
            })
            .collect::<Result<Vec<FieldRef>, _>>()?;
        let file_fields: Vec<FieldRef> = schema
            .fields()
            .iter()
            .filter(|field| !partition_columns.contains(field.name()))
            .cloned()
            .collect();
        let split = file_fields.len();
        let file_schema = Arc::new(Schema::new(file_fields.clone()));
        let schema = Arc::new(Schema::new(
            file_fields
                .into_iter()
                .chain(partition_fields.iter().cloned())
                .collect::<Vec<_>>(),
        ));
        let order = table_schema
            .fields()
            .iter()
            .map(|field| {
                // `schema` holds every column of the table: the partition columns, and the rest
                // as the files hold them.
                schema
                    .index_of(field.name())
                    .expect("every table column is in the scan's schema")
            })
            .collect();
        let store = ObjectStoreUrl::parse(format!(
            "{}://{}",
            table_url.scheme(),
            &table_url[url::Position::BeforeHost..url::Position::AfterPort]
        ))
        .map_err(|_| FilesError::Location(table_url.to_string()))?;
        let root = object_store::path::Path::from_url_path(table_url.path())
            .map_err(|_| FilesError::Location(table_url.to_string()))?;
        let time_index = schema.index_of(time_column).ok();
        let mut files = Vec::with_capacity(listed.len());
        let mut statistics = Vec::with_capacity(listed.len());
        let mut spans = Vec::with_capacity(listed.len());
        for file in listed {
            spans.push(file.span);
            let mut partition_values = Vec::with_capacity(partition_fields.len());
            for (field, value) in partition_fields.iter().zip(&file.partition_values) {
                let scalar = match value {
                    Some(text) => ScalarValue::try_from_string(text.clone(), field.data_type())
                        .map_err(|err| FilesError::PartitionValue {
                            column: field.name().clone(),
                            value: text.clone(),
                            path: file.path.clone(),
                            reason: err.to_string(),
                        })?,
                    None => ScalarValue::try_from(field.data_type()).map_err(|err| {
                        FilesError::PartitionValue {
                            column: field.name().clone(),
                            value: String::new(),
                            path: file.path.clone(),
                            reason: err.to_string(),
                        }
                    })?,
                };
                partition_values.push(scalar);
            }
            // These statistics only rule files out and never reach the scan, where they could
            // answer an aggregate. The time bounds are outward, not the exact oldest and newest
            // values, but DataFusion's pruning reads only exact ones; an outward bound rules out
            // no file that holds a matching row.
            let mut columns = vec![ColumnStatistics::new_unknown(); schema.fields().len()];
            if let (Some(index), Some((oldest, newest))) = (time_index, file.span) {
                let at = |micros| match schema.field(index).data_type() {
                    deltalake::arrow::datatypes::DataType::Timestamp(
                        deltalake::arrow::datatypes::TimeUnit::Microsecond,
                        zone,
                    ) => Precision::Exact(ScalarValue::TimestampMicrosecond(
                        Some(micros),
                        zone.clone(),
                    )),
                    _ => Precision::Absent,
                };
                columns[index].min_value = at(oldest);
                columns[index].max_value = at(newest);
            }
            for (offset, value) in partition_values.iter().enumerate() {
                let column = &mut columns[split + offset];
                column.min_value = Precision::Exact(value.clone());
                column.max_value = Precision::Exact(value.clone());
                column.null_count = Precision::Exact(if value.is_null() {
                    file.rows.unwrap_or(0)
                } else {
                    0
                });
            }
            let stats = Arc::new(Statistics {
                num_rows: file.rows.map_or(Precision::Absent, Precision::Exact),
                total_byte_size: Precision::Absent,
                column_statistics: columns,
            });
            statistics.push(stats);
            let location = object_store::path::Path::from_iter(
                root.parts()
                    .chain(object_store::path::Path::from(file.path.as_str()).parts()),
            );
            let mut partitioned = PartitionedFile::from(object_store::ObjectMeta {
                location,
                // Fixed, so that DataFusion's cache of file footers stays valid between questions.
                last_modified: chrono::DateTime::<chrono::Utc>::UNIX_EPOCH,
                size: file.size,
                e_tag: None,
                version: None,
            });
            partitioned.partition_values = partition_values;
            files.push(partitioned);
        }
        Ok(Self {
            schema: table_schema,
            scan_schema: schema,
            order,
            file_schema,
            partition_fields,
            store,
            files,
            statistics,
            spans,
        })
    }

    /// How many files are listed.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether no file is listed.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The same table restricted to the files whose time span overlaps [`since`, `until`), and
    /// those without one, which cannot be ruled out.
    pub fn overlapping(&self, since: i64, until: i64) -> Self {
        let kept: Vec<usize> = (0..self.files.len())
            .filter(|&index| crate::store::may_overlap(self.spans[index], since, until))
            .collect();
        Self {
            schema: Arc::clone(&self.schema),
            scan_schema: Arc::clone(&self.scan_schema),
            order: self.order.clone(),
            file_schema: Arc::clone(&self.file_schema),
            partition_fields: self.partition_fields.clone(),
            store: self.store.clone(),
            files: kept
                .iter()
                .map(|&index| self.files[index].clone())
                .collect(),
            statistics: kept
                .iter()
                .map(|&index| Arc::clone(&self.statistics[index]))
                .collect(),
            spans: kept.iter().map(|&index| self.spans[index]).collect(),
        }
    }

    /// Which files `filters` leave: every file when there are none, or when they cannot be
    /// turned into a pruning predicate (then the scan's own filters still apply).
    fn kept(&self, state: &dyn Session, filters: &[Expr]) -> Result<Vec<bool>> {
        let all = vec![true; self.files.len()];
        let Some(filter) = conjunction(filters.iter().cloned()) else {
            return Ok(all);
        };
        let schema = Arc::clone(&self.scan_schema).to_dfschema()?;
        let physical = state.create_physical_expr(filter, &schema)?;
        match PruningPredicateBuilder::new()
            .with_file_schema(Arc::clone(&self.scan_schema))
            .build(physical)
        {
            Some(predicate) => predicate.prune(&PrunableStatistics::new(
                self.statistics.clone(),
                Arc::clone(&self.scan_schema),
            )),
            None => Ok(all),
        }
    }
}

#[async_trait::async_trait]
impl TableProvider for TableFiles {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        // The scan prunes with the filters and may filter rows with them, but DataFusion keeps
        // its own filter above it.
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let kept = self.kept(state, filters)?;
        let files: Vec<PartitionedFile> = self
            .files
            .iter()
            .zip(&kept)
            .filter(|(_, keep)| **keep)
            .map(|(file, _)| file.clone())
            .collect();
        if files.is_empty() {
            let schema = deltalake::datafusion::common::project_schema(&self.schema, projection)?;
            return Ok(Arc::new(EmptyExec::new(schema)));
        }
        let store = state.runtime_env().object_store(&self.store)?;
        let metadata_cache = state.runtime_env().cache_manager.get_file_metadata_cache();
        let cached = CachedParquetFileReaderFactory::new(store, metadata_cache);
        // A question that filters may prune pages, so its files' page indexes are loaded with
        // their footers and kept in the session's cache; DataFusion otherwise caches the footer
        // alone and reads and parses the index again on every question.
        let readers: Arc<dyn ParquetFileReaderFactory> = if filters.is_empty() {
            Arc::new(cached)
        } else {
            Arc::new(WithPageIndex(cached))
        };
        let table_schema = TableSchema::builder(Arc::clone(&self.file_schema))
            .with_table_partition_cols(self.partition_fields.clone())
            .build();
        let source = ParquetSource::new(table_schema)
            .with_table_parquet_options(state.table_options().parquet.clone())
            .with_parquet_file_reader_factory(readers);
        // The files are spread over the session's partitions, largest first, so that each
        // partition reads about as many bytes.
        let partitions = state.config().target_partitions().max(1);
        let mut by_size = files;
        by_size.sort_by_key(|file| std::cmp::Reverse(file.object_meta.size));
        let mut groups: Vec<(u64, Vec<PartitionedFile>)> = vec![(0, Vec::new()); partitions];
        for file in by_size {
            if let Some(lightest) = groups.iter_mut().min_by_key(|(bytes, _)| *bytes) {
                lightest.0 += file.object_meta.size;
                lightest.1.push(file);
            }
        }
        let groups: Vec<FileGroup> = groups
            .into_iter()
            .filter(|(_, files)| !files.is_empty())
            .map(|(_, files)| FileGroup::new(files))
            .collect();
        let config = FileScanConfigBuilder::new(self.store.clone(), Arc::new(source))
            .with_file_groups(groups)
            // The table's columns, as asked for, from the scan's order.
            .with_projection_indices(Some(projection.map_or_else(
                || self.order.clone(),
                |asked| asked.iter().map(|&index| self.order[index]).collect(),
            )))?
            .with_limit(limit)
            .build();
        Ok(DataSourceExec::from_data_source(config))
    }
}

/// Readers that load a file's page index with its footer, so that the cache behind them keeps
/// both.
#[derive(Debug)]
struct WithPageIndex(CachedParquetFileReaderFactory);

impl ParquetFileReaderFactory for WithPageIndex {
    fn create_reader(
        &self,
        partition_index: usize,
        file: PartitionedFile,
        metadata_size_hint: Option<usize>,
        metrics: &ExecutionPlanMetricsSet,
    ) -> Result<Box<dyn AsyncFileReader + Send>> {
        let reader = self
            .0
            .create_reader(partition_index, file, metadata_size_hint, metrics)?;
        Ok(Box::new(PageIndexReader(reader)))
    }
}

/// A reader whose metadata always includes the page index, where the file has one.
struct PageIndexReader(Box<dyn AsyncFileReader + Send>);

impl AsyncFileReader for PageIndexReader {
    fn get_bytes(
        &mut self,
        range: std::ops::Range<u64>,
    ) -> BoxFuture<'_, deltalake::parquet::errors::Result<bytes::Bytes>> {
        self.0.get_bytes(range)
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<std::ops::Range<u64>>,
    ) -> BoxFuture<'_, deltalake::parquet::errors::Result<Vec<bytes::Bytes>>> {
        self.0.get_byte_ranges(ranges)
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, deltalake::parquet::errors::Result<Arc<ParquetMetaData>>> {
        let options = options
            .cloned()
            .unwrap_or_default()
            .with_page_index_policy(PageIndexPolicy::Optional);
        async move { self.0.get_metadata(Some(&options)).await }.boxed()
    }
}
