//! One call that installs OTLP/gRPC tracer and meter providers for an application.
//!
//! ```no_run
//! # #[tokio::main] async fn main() -> Result<(), candor_adapter::otlp::OtlpError> {
//! let telemetry = candor_adapter::otlp::init(
//!     candor_adapter::otlp::OtlpConfig::new("http://127.0.0.1:4317", "orders-api"),
//! )?;
//! // ... build adapters and make calls; they use the global providers ...
//! telemetry.shutdown()?;
//! # Ok(()) }
//! ```
//!
//! Spans go through a batch processor and counters through a periodic reader, both off the call
//! path: when the collector is down a call never blocks on telemetry. Exports that fail are
//! counted ([`OtlpGuard::failed_span_exports`]) and reported through the SDK's own logs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use candor_schema::names::resource;
use opentelemetry::KeyValue;
use opentelemetry_otlp::{MetricExporter, SpanExporter, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracerProvider, SpanData,
};

use crate::KeepToolFailures;

/// Where and as whom to export.
#[derive(Debug, Clone)]
pub struct OtlpConfig {
    /// The collector's OTLP/gRPC endpoint, e.g. `http://127.0.0.1:4317`.
    pub endpoint: String,
    /// `service.name`.
    pub service_name: String,
    /// `service.instance.id` (default: host name and process id).
    pub service_instance_id: Option<String>,
    /// How often counters are exported (default 10 s).
    pub metric_interval: Duration,
    /// The longest a finished span waits in the batch before it is exported (default 500 ms,
    /// not the SDK's 5 s: an AccessFailure should reach `candor incident --live` within 2 s).
    pub span_interval: Duration,
    /// The application's sampler, wrapped in [`KeepToolFailures`] (default: parent-based, on).
    pub sampler: Sampler,
}

impl OtlpConfig {
    /// Defaults for everything but the endpoint and the service name.
    pub fn new(endpoint: impl Into<String>, service_name: impl Into<String>) -> Self {
        Self {
            endpoint: endpoint.into(),
            service_name: service_name.into(),
            service_instance_id: None,
            metric_interval: Duration::from_secs(10),
            span_interval: Duration::from_millis(500),
            sampler: Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
        }
    }
}

/// Why telemetry could not be set up or shut down.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    /// An exporter could not be built.
    #[error("building the OTLP exporter for {endpoint}: {source}")]
    Exporter {
        /// The endpoint.
        endpoint: String,
        /// The cause.
        source: opentelemetry_otlp::ExporterBuildError,
    },
    /// Flushing or shutting down failed; telemetry still queued may be lost.
    #[error("shutting down telemetry: {0}")]
    Shutdown(String),
}

/// Keeps the providers alive; [`OtlpGuard::shutdown`] flushes what is queued.
#[derive(Debug)]
pub struct OtlpGuard {
    tracer_provider: SdkTracerProvider,
    meter_provider: SdkMeterProvider,
    failed_spans: Arc<AtomicU64>,
}

impl OtlpGuard {
    /// The tracer provider (installed globally by [`init`]).
    pub fn tracer_provider(&self) -> &SdkTracerProvider {
        &self.tracer_provider
    }

    /// The meter provider (installed globally by [`init`]).
    pub fn meter_provider(&self) -> &SdkMeterProvider {
        &self.meter_provider
    }

    /// Spans in batches the collector did not accept.
    pub fn failed_span_exports(&self) -> u64 {
        self.failed_spans.load(Ordering::Relaxed)
    }

    /// Flushes and shuts both providers down.
    pub fn shutdown(self) -> Result<(), OtlpError> {
        let traces = self.tracer_provider.shutdown();
        let metrics = self.meter_provider.shutdown();
        match (traces, metrics) {
            (Ok(()), Ok(())) => Ok(()),
            (traces, metrics) => Err(OtlpError::Shutdown(format!(
                "traces: {traces:?}; metrics: {metrics:?}; spans lost in failed exports: {}",
                self.failed_spans.load(Ordering::Relaxed)
            ))),
        }
    }
}

/// Installs global tracer and meter providers that export OTLP over gRPC.
///
/// Must be called inside a Tokio runtime (the gRPC channel runs on it).
pub fn init(config: OtlpConfig) -> Result<OtlpGuard, OtlpError> {
    let guard = providers(config)?;
    opentelemetry::global::set_tracer_provider(guard.tracer_provider.clone());
    opentelemetry::global::set_meter_provider(guard.meter_provider.clone());
    Ok(guard)
}

/// Tracer and meter providers that export OTLP over gRPC, without installing them globally:
/// for a process that reports as several services, each adapter is given its service's
/// providers ([`crate::AdapterBuilder::tracer_provider`], [`crate::AdapterBuilder::meter_provider`]).
///
/// Must be called inside a Tokio runtime (the gRPC channel runs on it).
pub fn providers(config: OtlpConfig) -> Result<OtlpGuard, OtlpError> {
    let exporter_error = |source| OtlpError::Exporter {
        endpoint: config.endpoint.clone(),
        source,
    };
    let instance = config
        .service_instance_id
        .clone()
        .unwrap_or_else(default_instance_id);
    let resource = Resource::builder_empty()
        .with_attributes([
            KeyValue::new(resource::SERVICE_NAME, config.service_name.clone()),
            KeyValue::new(resource::SERVICE_INSTANCE_ID, instance),
        ])
        .build();
    let span_exporter = SpanExporter::builder()
        .with_tonic()
        .with_endpoint(config.endpoint.clone())
        .build()
        .map_err(exporter_error)?;
    let failed_spans = Arc::new(AtomicU64::new(0));
    let tracer_provider = SdkTracerProvider::builder()
        .with_resource(resource.clone())
        .with_sampler(KeepToolFailures::new(config.sampler.clone()))
        .with_span_processor(
            BatchSpanProcessor::builder(CountingSpanExporter {
                inner: span_exporter,
                failed: failed_spans.clone(),
            })
            .with_batch_config(
                BatchConfigBuilder::default()
                    .with_scheduled_delay(config.span_interval)
                    .build(),
            )
            .build(),
        )
        .build();
    let metric_exporter = MetricExporter::builder()
        .with_tonic()
        .with_endpoint(config.endpoint.clone())
        .build()
        .map_err(exporter_error)?;
    let meter_provider = SdkMeterProvider::builder()
        .with_resource(resource)
        .with_reader(
            PeriodicReader::builder(metric_exporter)
                .with_interval(config.metric_interval)
                .build(),
        )
        .build();
    Ok(OtlpGuard {
        tracer_provider,
        meter_provider,
        failed_spans,
    })
}

fn default_instance_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_else(|_| "unknown-host".into());
    format!("{host}-{}", std::process::id())
}

/// Counts the spans of every batch the collector did not take.
#[derive(Debug)]
struct CountingSpanExporter<E> {
    inner: E,
    failed: Arc<AtomicU64>,
}

impl<E: opentelemetry_sdk::trace::SpanExporter> opentelemetry_sdk::trace::SpanExporter
    for CountingSpanExporter<E>
{
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len() as u64;
        let result = self.inner.export(batch).await;
        if result.is_err() {
            self.failed.fetch_add(spans, Ordering::Relaxed);
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}
