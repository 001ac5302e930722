//! One call that installs OTLP/gRPC tracer, logger and meter providers for an application.
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
//! Every metric export also carries the export heartbeat, `candor.adapter.export_interval`: the
//! reader's interval, and 0 in the last export at [`OtlpGuard::shutdown`], so that readers tell
//! an instance that shut down from one that went silent.
//!
//! Spans go through a batch processor, the events recorded at the moment they happen (contract
//! rule `TELEMETRY-MOMENT`) through a batch log processor, and counters through a periodic
//! reader, all off the call path: when the collector is down a call never blocks on telemetry. A batch the collector
//! cannot take yet (it is restarting, or its broker is away) is kept and sent again, within a
//! bounded age and size ([`ResendConfig`]); what is dropped is counted ([`OtlpGuard::stats`])
//! and logged.

mod export;
mod resend;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use candor_schema::names::{self, resource};
use opentelemetry::KeyValue;
use opentelemetry::metrics::{MeterProvider as _, ObservableGauge};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::logs::{BatchLogProcessor, SdkLoggerProvider};
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracerProvider,
};

pub use resend::{ExportStats, ResendConfig};

use crate::KeepToolFailures;
use export::{Grpc, QueueingLogExporter, QueueingMetricExporter, QueueingSpanExporter};
use resend::{Resender, StartError};

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
    /// The longest a finished span, or an event recorded as a log record, waits in its batch
    /// before it is exported (default 500 ms, not the SDK's 5 s and 1 s: an AccessFailure should
    /// reach `candor incident --live` within 2 s).
    pub span_interval: Duration,
    /// The application's sampler, wrapped in [`KeepToolFailures`] (default: parent-based, on).
    pub sampler: Sampler,
    /// How batches the collector cannot take yet are kept and sent again.
    pub resend: ResendConfig,
    /// How long [`OtlpGuard::shutdown`] sends what is queued before it drops the rest
    /// (default 5 s).
    pub shutdown_timeout: Duration,
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
            resend: ResendConfig::default(),
            shutdown_timeout: Duration::from_secs(5),
        }
    }
}

/// Why telemetry could not be set up or shut down.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    /// The endpoint is not a valid URI.
    #[error("the OTLP endpoint {endpoint}: {source}")]
    Endpoint {
        /// The endpoint.
        endpoint: String,
        /// The cause.
        source: tonic::transport::Error,
    },
    /// The exporters' sender thread could not start.
    #[error("starting the OTLP sender thread: {0}")]
    Thread(std::io::Error),
    /// Flushing or shutting down did not send everything: what was dropped is in `stats`.
    #[error("shutting down telemetry: {detail}")]
    Shutdown {
        /// What failed.
        detail: String,
        /// The exporters' final counts.
        stats: ExportStats,
    },
}

impl OtlpError {
    /// The exporters' final counts, when shutting down did not send everything.
    pub fn stats(&self) -> Option<ExportStats> {
        match self {
            Self::Shutdown { stats, .. } => Some(*stats),
            Self::Endpoint { .. } | Self::Thread(_) => None,
        }
    }
}

/// Keeps the providers alive; [`OtlpGuard::shutdown`] flushes what is queued.
#[derive(Debug)]
pub struct OtlpGuard {
    tracer_provider: SdkTracerProvider,
    logger_provider: SdkLoggerProvider,
    meter_provider: SdkMeterProvider,
    resender: Arc<Resender>,
    shutdown_timeout: Duration,
    /// Set by [`OtlpGuard::shutdown`]: the export heartbeat says 0 from then on.
    final_export: Arc<AtomicBool>,
    /// Kept so that the export heartbeat stays registered as long as the providers.
    _export_interval: ObservableGauge<f64>,
}

impl OtlpGuard {
    /// The tracer provider (installed globally by [`init`]).
    pub fn tracer_provider(&self) -> &SdkTracerProvider {
        &self.tracer_provider
    }

    /// The logger provider the adapter emits the events of calls that have not ended through
    /// (set for every adapter by [`init`]; give it to an adapter with
    /// [`crate::AdapterBuilder::logger_provider`] otherwise).
    pub fn logger_provider(&self) -> &SdkLoggerProvider {
        &self.logger_provider
    }

    /// The meter provider (installed globally by [`init`]).
    pub fn meter_provider(&self) -> &SdkMeterProvider {
        &self.meter_provider
    }

    /// Spans lost before the collector: in batches dropped unsent or rejected for good.
    pub fn failed_span_exports(&self) -> u64 {
        self.resender.stats().lost_spans
    }

    /// Span batches dropped unsent (queue full, too old, or shutdown's deadline).
    pub fn dropped_span_batches(&self) -> u64 {
        self.resender.stats().dropped_span_batches
    }

    /// Everything the exporters counted so far, and what is queued now.
    pub fn stats(&self) -> ExportStats {
        self.resender.stats()
    }

    /// Flushes both providers, sends what is queued within the shutdown timeout, and drops
    /// (counting them) the batches still queued after it. Returns the exporters' final counts, or
    /// an error carrying them when shutting down dropped or lost a batch.
    pub fn shutdown(self) -> Result<ExportStats, OtlpError> {
        let deadline = Instant::now() + self.shutdown_timeout;
        let left = || deadline.saturating_duration_since(Instant::now());
        let before = self.resender.stats();
        // The providers hand their last batches to the queue; an error from them while the
        // collector is away only says a batch is still queued, which `close` sends or counts.
        let logs = self.logger_provider.shutdown_with_timeout(left());
        let traces = self.tracer_provider.shutdown_with_timeout(left());
        // The meter provider collects once more when it shuts down: that export says no other
        // follows.
        self.final_export.store(true, Ordering::Release);
        let metrics = self.meter_provider.shutdown_with_timeout(left());
        let sent = self.resender.close(left());
        let stats = self.resender.stats();
        let lost = stats.lost_spans > before.lost_spans
            || stats.lost_log_records > before.lost_log_records
            || stats.dropped_metric_batches > before.dropped_metric_batches
            || stats.rejected_batches > before.rejected_batches;
        if sent && !lost {
            return Ok(stats);
        }
        Err(OtlpError::Shutdown {
            detail: format!(
                "logs: {logs:?}; traces: {traces:?}; metrics: {metrics:?}; telemetry: {stats}"
            ),
            stats,
        })
    }
}

/// Installs global tracer and meter providers that export OTLP over gRPC, and the logger
/// provider adapters built from now on emit through ([`crate::telemetry::set_logger_provider`]).
///
/// The exporters send from a thread of their own, so this may be called inside a Tokio runtime or
/// outside one.
pub fn init(config: OtlpConfig) -> Result<OtlpGuard, OtlpError> {
    let guard = providers(config)?;
    opentelemetry::global::set_tracer_provider(guard.tracer_provider.clone());
    opentelemetry::global::set_meter_provider(guard.meter_provider.clone());
    crate::telemetry::set_logger_provider(&guard.logger_provider);
    Ok(guard)
}

/// Tracer, logger and meter providers that export OTLP over gRPC, without installing them
/// globally: for a process that reports as several services, each adapter is given its
/// service's providers ([`crate::AdapterBuilder::tracer_provider`],
/// [`crate::AdapterBuilder::logger_provider`], [`crate::AdapterBuilder::meter_provider`]).
///
/// The exporters send from a thread of their own, so this may be called inside a Tokio runtime or
/// outside one.
pub fn providers(config: OtlpConfig) -> Result<OtlpGuard, OtlpError> {
    let attempt_timeout = config.resend.attempt_timeout;
    let resender = Resender::start(config.resend.clone(), || {
        Grpc::connect_lazy(&config.endpoint, attempt_timeout)
    })
    .map_err(|err| match err {
        StartError::Thread(err) => OtlpError::Thread(err),
        StartError::Transport(source) => OtlpError::Endpoint {
            endpoint: config.endpoint.clone(),
            source,
        },
    })?;
    let resender = Arc::new(resender);
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
    let tracer_provider = SdkTracerProvider::builder()
        .with_resource(resource.clone())
        .with_sampler(KeepToolFailures::new(config.sampler.clone()))
        .with_span_processor(
            BatchSpanProcessor::builder(QueueingSpanExporter::new(resender.clone()))
                .with_batch_config(
                    BatchConfigBuilder::default()
                        .with_scheduled_delay(config.span_interval)
                        .build(),
                )
                .build(),
        )
        .build();
    let logger_provider = SdkLoggerProvider::builder()
        .with_resource(resource.clone())
        .with_log_processor(
            BatchLogProcessor::builder(QueueingLogExporter::new(resender.clone()))
                .with_batch_config(
                    opentelemetry_sdk::logs::BatchConfigBuilder::default()
                        .with_scheduled_delay(config.span_interval)
                        .build(),
                )
                .build(),
        )
        .build();
    let meter_provider = SdkMeterProvider::builder()
        .with_resource(resource)
        .with_reader(
            PeriodicReader::builder(QueueingMetricExporter::new(resender.clone()))
                .with_interval(config.metric_interval)
                .build(),
        )
        .build();
    let final_export = Arc::new(AtomicBool::new(false));
    let export_interval = export_interval_gauge(
        &meter_provider,
        config.metric_interval,
        final_export.clone(),
    );
    Ok(OtlpGuard {
        tracer_provider,
        logger_provider,
        meter_provider,
        resender,
        shutdown_timeout: config.shutdown_timeout,
        final_export,
        _export_interval: export_interval,
    })
}

/// The export heartbeat (the contract's section 10.6): `candor.adapter.export_interval`, the
/// reader's interval in seconds in every export, and 0 once `final_export` is set, which
/// [`OtlpGuard::shutdown`] does right before the meter provider's last collection.
fn export_interval_gauge(
    meter_provider: &SdkMeterProvider,
    interval: Duration,
    final_export: Arc<AtomicBool>,
) -> ObservableGauge<f64> {
    let seconds = interval.as_secs_f64();
    meter_provider
        .meter_with_scope(crate::telemetry::scope())
        .f64_observable_gauge(names::EXPORT_INTERVAL_GAUGE)
        .with_unit(names::EXPORT_INTERVAL_GAUGE_UNIT)
        .with_description("Seconds until this instance's next metric export; 0 in its last")
        .with_callback(move |observer| {
            let value = if final_export.load(Ordering::Acquire) {
                0.0
            } else {
                seconds
            };
            observer.observe(value, &[]);
        })
        .build()
}

fn default_instance_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_else(|_| "unknown-host".into());
    format!("{host}-{}", std::process::id())
}
