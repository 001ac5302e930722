//! What the adapter adds to a call, against the raw operation and against emitting the same
//! event through `tracing` + `tracing-opentelemetry`; and what following an accepted operation
//! costs per status read (time here, allocations printed before the group runs).
//!
//! Every provider exports to a no-op exporter, so the figures are the adapter's own cost (plus
//! the SDK's span and counter bookkeeping), not the network's.
//!
//! `cargo bench -p candor-adapter --bench overhead`

#![allow(clippy::unwrap_used)] // a panic in a test or a benchmark set-up is its failure report

use std::alloc::System;
use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant, SystemTime};

use candor_adapter::classify::Classification;
use candor_adapter::clock::Clock;
use candor_adapter::follow::{FnStatus, OperationStatus, StatusRead};
use candor_adapter::{Adapter, FnClassifier, KeepToolFailures, RetryPolicy};
use candor_schema::{
    AccessFailureKind, Evidence, EvidenceKind, Extent, Failure, Lifecycle, Operation, Outcome,
};
use criterion::{Criterion, criterion_group, criterion_main};
use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider, SpanData, SpanExporter};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use tracing_subscriber::layer::SubscriberExt as _;

/// Counts allocations, so that the following's cost per status read can be printed.
#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Real time, and waits that end at once: a status read's cost without the wait between reads.
#[derive(Debug, Clone, Copy)]
struct NoWaitClock;

impl Clock for NoWaitClock {
    type Sleep = std::future::Ready<()>;

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn wall(&self) -> SystemTime {
        SystemTime::now()
    }

    fn sleep(&self, _: Duration) -> Self::Sleep {
        std::future::ready(())
    }
}

/// Drops every log record.
#[derive(Debug)]
struct NoopLogExporter;

impl opentelemetry_sdk::logs::LogExporter for NoopLogExporter {
    async fn export(&self, batch: opentelemetry_sdk::logs::LogBatch<'_>) -> OTelSdkResult {
        black_box(batch.iter().count());
        Ok(())
    }
}

/// Drops every span.
#[derive(Debug)]
struct NoopExporter;

impl SpanExporter for NoopExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        black_box(batch);
        Ok(())
    }
}

fn providers() -> (SdkTracerProvider, SdkMeterProvider) {
    let tracer = SdkTracerProvider::builder()
        .with_simple_exporter(NoopExporter)
        .with_sampler(KeepToolFailures::new(Sampler::AlwaysOn))
        .build();
    let meter = SdkMeterProvider::builder()
        // Aggregates like any SDK meter; exports once an hour, i.e. never during a run.
        .with_reader(
            PeriodicReader::builder(InMemoryMetricExporter::default())
                .with_interval(Duration::from_secs(3600))
                .build(),
        )
        .build();
    (tracer, meter)
}

/// Polls a future that is ready at once (every operation here is).
fn now<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => unreachable!("benchmark operations complete on the first poll"),
    }
}

fn failure() -> Outcome<u64> {
    Outcome::AccessFailure {
        failure: Failure {
            kind: AccessFailureKind::ServerError,
            retryable: false,
            message: "HTTP 500 Internal Server Error".into(),
            status: Some(500),
            error_type: Some("500".into()),
            retry_after_ms: None,
        },
    }
}

fn benches(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _entered = runtime.enter();
    let (tracer_provider, meter_provider) = providers();
    let adapter = |fail: bool| {
        Adapter::builder("search", "http://search.internal/v1/items")
            .classifier(FnClassifier::new(move |value: u64| {
                if fail {
                    failure()
                } else {
                    Outcome::Success {
                        payload: value,
                        extent: Extent::default(),
                    }
                }
            }))
            .retry(RetryPolicy::no_retry())
            .attempt_timeout(Duration::from_secs(5))
            .tracer_provider(&tracer_provider)
            .meter_provider(&meter_provider)
            .build()
            .unwrap()
    };
    let succeeding = adapter(false);
    let without_sdk = Adapter::builder("search", "http://search.internal/v1/items")
        .classifier(FnClassifier::new(|value: u64| Outcome::Success {
            payload: value,
            extent: Extent::default(),
        }))
        .retry(RetryPolicy::no_retry())
        .tracer_provider(&opentelemetry::trace::noop::NoopTracerProvider::new())
        .meter_provider(&opentelemetry::metrics::noop::NoopMeterProvider::new())
        .build()
        .unwrap();
    let failing = adapter(true);

    let mut group = c.benchmark_group("success_path");
    group.bench_function("raw_operation", |b| {
        b.iter(|| now(async { black_box(7u64) }))
    });
    group.bench_function("adapter_call", |b| {
        b.iter(|| black_box(now(succeeding.call(|_| async { black_box(7u64) }))))
    });
    // The same call with no-op OpenTelemetry providers: what the SDK's counter costs.
    group.bench_function("adapter_call_noop_providers", |b| {
        b.iter(|| black_box(now(without_sdk.call(|_| async { black_box(7u64) }))))
    });
    group.finish();

    let mut group = c.benchmark_group("failure_attempt");
    group.bench_function("adapter_call_with_span_event", |b| {
        b.iter(|| black_box(now(failing.call(|_| async { black_box(7u64) }))))
    });
    group.bench_function("sdk_span_with_one_event", |b| {
        use opentelemetry::trace::{Span as _, Tracer as _};
        let tracer = tracer_provider.tracer("bench");
        b.iter(|| {
            let mut span = tracer.start("tool.call.reference");
            span.add_event(
                "reference.event",
                vec![
                    KeyValue::new("kind", "server_error"),
                    KeyValue::new("attempt", 1),
                    KeyValue::new("status", 500),
                ],
            );
            span.end();
        })
    });
    group.bench_function("tracing_opentelemetry_event", |b| {
        let layer =
            tracing_opentelemetry::layer().with_tracer(tracer_provider.tracer("tracing-bench"));
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            b.iter(|| {
                let span = tracing::info_span!("tool_call", tool = "search");
                let _entered = span.enter();
                tracing::warn!(
                    tool = "search",
                    target_url = "http://search.internal/v1/items",
                    class = "access_failure",
                    kind = "server_error",
                    action = "permanent",
                    attempt = 1,
                    max_attempts = 1,
                    status = 500,
                    error_type = "500",
                    "tool outcome"
                );
            })
        });
    });
    group.finish();

    retried(c, &tracer_provider, &meter_provider);
    following(c, &tracer_provider, &meter_provider);
}

/// A call whose first attempt fails (503) and is retried, its event logged at the moment it
/// happens (contract rule `TELEMETRY-MOMENT`), the second succeeds; beside the same SDK work
/// done by hand: a span with one event and one log record.
fn retried(
    c: &mut Criterion,
    tracer_provider: &SdkTracerProvider,
    meter_provider: &SdkMeterProvider,
) {
    use opentelemetry::logs::{LogRecord as _, Logger as _, LoggerProvider as _};
    let logger_provider = opentelemetry_sdk::logs::SdkLoggerProvider::builder()
        .with_simple_exporter(NoopLogExporter)
        .build();
    let adapter = Adapter::builder("search", "http://search.internal/v1/items")
        .classifier(FnClassifier::new(|attempt: u32| {
            if attempt == 1 {
                Outcome::AccessFailure {
                    failure: Failure {
                        kind: AccessFailureKind::ServerError,
                        retryable: true,
                        message: "HTTP 503 Service Unavailable".into(),
                        status: Some(503),
                        error_type: Some("503".into()),
                        retry_after_ms: None,
                    },
                }
            } else {
                Outcome::Success {
                    payload: 7u64,
                    extent: Extent::default(),
                }
            }
        }))
        .clock(NoWaitClock)
        .tracer_provider(tracer_provider)
        .meter_provider(meter_provider)
        .logger_provider(&logger_provider)
        .build()
        .unwrap();
    let mut group = c.benchmark_group("retried_attempt");
    group.bench_function("adapter_call_retried_once_with_log_record", |b| {
        b.iter(|| {
            black_box(now(
                adapter.call(|context| async move { black_box(context.number) })
            ))
        })
    });
    group.bench_function("sdk_span_event_and_log_record", |b| {
        use opentelemetry::trace::{Span as _, Tracer as _};
        let tracer = tracer_provider.tracer("bench");
        let logger = logger_provider.logger("bench");
        b.iter(|| {
            let mut span = tracer.start("tool.call.reference");
            let attributes = vec![
                KeyValue::new("kind", "server_error"),
                KeyValue::new("attempt", 1),
                KeyValue::new("status", 503),
            ];
            let context = span.span_context().clone();
            let mut record = logger.create_log_record();
            record.set_event_name("reference.event");
            record.set_trace_context(context.trace_id(), context.span_id(), None);
            record.add_attributes(
                attributes
                    .iter()
                    .map(|kv| (kv.key.clone(), kv.value.as_str().into_owned())),
            );
            logger.emit(record);
            span.add_event("reference.event", attributes);
            span.end();
        })
    });
    group.finish();
}

/// A call that is accepted, then followed through `reads` status reads: running until the last,
/// which completes.
fn following(
    c: &mut Criterion,
    tracer_provider: &SdkTracerProvider,
    meter_provider: &SdkMeterProvider,
) {
    let adapter = Adapter::builder("export", "http://exports.internal/v1/exports")
        .classifier(FnClassifier::new(|_: ()| Classification {
            lifecycle: Some(Lifecycle::Accepted {
                operation: Operation {
                    id: "op-1".into(),
                    status_url: Some("http://exports.internal/v1/operations/op-1".into()),
                    generated: false,
                },
            }),
            ..Classification::new(Outcome::Success {
                payload: 0u64,
                extent: Extent::default(),
            })
        }))
        .follow(FnStatus::new(|_: &Operation, left: u32| {
            StatusRead::status(if left > 1 {
                OperationStatus::Running {
                    percent_complete: None,
                }
            } else {
                OperationStatus::Completed {
                    result: 7u64,
                    verified_by: Evidence {
                        kind: EvidenceKind::Query,
                        value: "GET /v1/operations/op-1".into(),
                    },
                    resource: None,
                }
            })
        }))
        .clock(NoWaitClock)
        .tracer_provider(tracer_provider)
        .meter_provider(meter_provider)
        .build()
        .unwrap();
    let follow = |reads: u32| {
        let mut left = reads;
        now(adapter.call_and_follow(
            |_| async {},
            move |_, _| {
                let this = left;
                left -= 1;
                async move { this }
            },
        ))
    };
    let allocations = |reads: u32| {
        let region = Region::new(GLOBAL);
        black_box(follow(reads));
        region.change().allocations
    };
    let (one, ten) = (allocations(1), allocations(10));
    println!(
        "following: {one} allocations for an operation read once, {ten} for one read ten times: \
         {:.1} per further read",
        (ten - one) as f64 / 9.0
    );
    let mut group = c.benchmark_group("following");
    for reads in [1, 10] {
        group.bench_function(format!("accepted_then_{reads}_status_reads"), |b| {
            b.iter(|| black_box(follow(reads)))
        });
    }
    group.finish();
}

criterion_group!(overhead, benches);
criterion_main!(overhead);
