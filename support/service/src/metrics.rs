//! The services' own metrics, through `prometheus-client`: one registry per service
//! ([`Metrics`]), bounded labelled families ([`Family`]), values gathered at scrape time
//! ([`Snapshot`]) and the Prometheus text exposition 0.0.4 that `/metrics` serves.
//!
//! Each service declares its names once with [`metric_names!`](crate::metric_names), which also
//! keeps their help texts; [`Metrics`] looks the help up by name, so a family cannot be registered
//! without one.
//!
//! ```
//! use candor_service::metrics::{Counter, Metrics};
//!
//! mod names {
//!     candor_service::metric_names! {
//!         REQUESTS_TOTAL = "demo_requests_total", "Requests, by route.";
//!         OVERFLOW_TOTAL = "demo_metric_series_overflow_total", "Lookups folded into \"other\".";
//!     }
//! }
//! let mut metrics = Metrics::new(names::help, names::OVERFLOW_TOTAL);
//! let requests = metrics.counters(names::REQUESTS_TOTAL, &["route"]);
//! requests.with(&["/v1/traces"]).inc();
//! let text = metrics.encode();
//! assert!(text.contains("demo_requests_total{route=\"/v1/traces\"} 1\n"));
//! assert!(text.contains("# TYPE demo_metric_series_overflow_total counter\n"));
//! ```

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prometheus_client::encoding::prometheus_text;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::family::Family as ClientFamily;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::{Metric, Registry};

pub use prometheus_client::metrics::counter::Counter;
pub use prometheus_client::metrics::gauge::Gauge;
pub use prometheus_client::metrics::histogram::Histogram;

/// A gauge of fractional values (seconds, timestamps).
pub type FloatGauge = Gauge<f64, AtomicU64>;

/// The content type of `/metrics`: the Prometheus text exposition format, version 0.0.4.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// How many label sets a family holds before it folds new ones into its `other` series.
pub const MAX_SERIES_PER_FAMILY: usize = 1000;

/// The value of every label of the series a full family folds new label sets into.
pub const OVERFLOW_VALUE: &str = "other";

/// The bucket bounds of every latency histogram, in seconds (`+Inf` is implied).
pub const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Declares each metric's name and help text together; the help is also the constant's rustdoc.
/// It defines the constants, `ALL` (every name) and `help(name)` (the help text, `""` for a
/// name not declared here).
#[macro_export]
macro_rules! metric_names {
    ($($name:ident = $value:literal, $help:literal;)*) => {
        $(#[doc = $help] pub const $name: &str = $value;)*
        /// Every metric family above.
        pub const ALL: &[&str] = &[$($name),*];
        /// The `# HELP` text of a family named above; `""` for any other name.
        pub fn help(name: &str) -> &'static str {
            match name { $($value => $help,)* _ => "" }
        }
    };
}

/// A family's label set: label names with their values, in the family's label order.
type LabelSet = Vec<(&'static str, String)>;

/// The labelled series of one family, at most [`MAX_SERIES_PER_FAMILY`] of them plus `other`.
///
/// A lookup past the limit (or with the wrong number of values, a bug that panics in debug
/// builds) lands on the series whose every label is [`OVERFLOW_VALUE`]; each such fold is counted
/// on the registry's overflow counter and the first is logged. Cloning shares the series.
#[derive(Debug)]
pub struct Family<M> {
    inner: Arc<FamilyInner<M>>,
}

impl<M> Clone for Family<M> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

#[derive(Debug)]
struct FamilyInner<M> {
    name: &'static str,
    label_names: &'static [&'static str],
    max_series: AtomicUsize,
    series: ClientFamily<LabelSet, M, fn() -> M>,
    /// Label sets created other than `other`; a mutex, so that two racing lookups of new label
    /// sets cannot both take the last place.
    created: Mutex<usize>,
    overflow: Counter,
    overflow_logged: AtomicBool,
}

impl<M: Clone> Family<M> {
    fn new(
        name: &'static str,
        label_names: &'static [&'static str],
        make: fn() -> M,
        overflow: Counter,
    ) -> Self {
        Self {
            inner: Arc::new(FamilyInner {
                name,
                label_names,
                max_series: AtomicUsize::new(MAX_SERIES_PER_FAMILY),
                series: ClientFamily::new_with_constructor(make),
                created: Mutex::new(0),
                overflow,
                overflow_logged: AtomicBool::new(false),
            }),
        }
    }

    /// The same family with another series limit.
    #[must_use]
    pub fn with_max_series(self, max_series: usize) -> Self {
        self.inner.max_series.store(max_series, Relaxed);
        self
    }

    /// The series for these label values, given in the order of the family's label names.
    pub fn with(&self, values: &[&str]) -> M {
        let inner = &*self.inner;
        let arity_ok = values.len() == inner.label_names.len();
        debug_assert!(arity_ok, "wrong number of label values for {}", inner.name);
        if arity_ok {
            let key: LabelSet = inner
                .label_names
                .iter()
                .zip(values)
                .map(|(name, value)| (*name, (*value).to_owned()))
                .collect();
            if let Some(found) = inner.series.get(&key) {
                return found.clone();
            }
            // The count is a plain number: a panic elsewhere cannot leave it half-written.
            let mut created = inner.created.lock().unwrap_or_else(PoisonError::into_inner);
            let max_series = inner.max_series.load(Relaxed);
            if inner.series.get(&key).is_none() && *created < max_series {
                *created += 1;
                return inner.series.get_or_create_owned(&key);
            }
            if let Some(found) = inner.series.get(&key) {
                return found.clone();
            }
        }
        inner.overflow.inc();
        if !inner.overflow_logged.swap(true, Relaxed) {
            let (metric, max_series) = (inner.name, inner.max_series.load(Relaxed));
            tracing::warn!(metric, max_series, "metric series overflow");
        }
        let other = inner
            .label_names
            .iter()
            .map(|name| (*name, OVERFLOW_VALUE.to_owned()))
            .collect();
        inner.series.get_or_create_owned(&other)
    }
}

/// The family is written with its `# HELP` and `# TYPE` lines even while it has no series, so
/// that a reader can tell "nothing happened yet" from "not exported".
impl<M> EncodeMetric for Family<M>
where
    M: EncodeMetric + TypedMetric,
{
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.inner.series.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        M::TYPE
    }
}

/// A histogram over [`LATENCY_BUCKETS`].
fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS.iter().copied())
}

/// Records a duration in seconds on a histogram.
pub fn observe(histogram: &Histogram, elapsed: Duration) {
    histogram.observe(elapsed.as_secs_f64());
}

/// One service's metrics: a registry whose every family takes its help text from the service's
/// [`metric_names!`](crate::metric_names) and whose labelled families share one overflow counter.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    help: fn(&str) -> &'static str,
    overflow: Counter,
}

impl Metrics {
    /// An empty registry with the overflow counter `overflow_name` registered.
    pub fn new(help: fn(&str) -> &'static str, overflow_name: &'static str) -> Self {
        let mut metrics = Self {
            registry: Registry::default(),
            help,
            overflow: Counter::default(),
        };
        let overflow = metrics.overflow.clone();
        metrics.register(overflow_name, overflow);
        metrics
    }

    fn register(&mut self, name: &'static str, metric: impl Metric) {
        register(&mut self.registry, self.help, name, metric);
    }

    /// An unlabelled counter.
    pub fn counter(&mut self, name: &'static str) -> Counter {
        let counter = Counter::default();
        self.register(name, counter.clone());
        counter
    }

    /// An unlabelled gauge.
    pub fn gauge(&mut self, name: &'static str) -> Gauge {
        let gauge = Gauge::default();
        self.register(name, gauge.clone());
        gauge
    }

    /// A family of counters.
    pub fn counters(
        &mut self,
        name: &'static str,
        labels: &'static [&'static str],
    ) -> Family<Counter> {
        self.family(name, labels, Counter::default)
    }

    /// A family of gauges.
    pub fn gauges(&mut self, name: &'static str, labels: &'static [&'static str]) -> Family<Gauge> {
        self.family(name, labels, Gauge::default)
    }

    /// A family of latency histograms over [`LATENCY_BUCKETS`].
    pub fn histograms(
        &mut self,
        name: &'static str,
        labels: &'static [&'static str],
    ) -> Family<Histogram> {
        self.family(name, labels, latency_histogram)
    }

    fn family<M>(
        &mut self,
        name: &'static str,
        labels: &'static [&'static str],
        make: fn() -> M,
    ) -> Family<M>
    where
        M: Clone + EncodeMetric + TypedMetric + std::fmt::Debug + Send + Sync + 'static,
    {
        let family = Family::new(name, labels, make, self.overflow.clone());
        self.register(name, family.clone());
        family
    }

    /// Every family in the Prometheus text exposition format 0.0.4.
    pub fn encode(&self) -> String {
        encode(&self.registry)
    }
}

/// Registers `metric` under `name` as exposed, with the help text `help` gives for it. A counter's
/// name ends in `_total`, which the client appends itself, so it is taken off here; the client
/// also ends every help text with a full stop, so that is taken off too.
fn register(
    registry: &mut Registry,
    help: fn(&str) -> &'static str,
    name: &'static str,
    metric: impl Metric,
) {
    let help = help(name);
    debug_assert!(!help.is_empty(), "no help text for {name}");
    let base = match metric.metric_type() {
        MetricType::Counter => name.strip_suffix("_total").unwrap_or(name),
        _ => name,
    };
    registry.register(base, help.strip_suffix('.').unwrap_or(help), metric);
}

fn encode(registry: &Registry) -> String {
    let mut text = String::with_capacity(16 * 1024);
    // Writing to a String cannot fail.
    let _ = prometheus_text::encode(&mut text, registry);
    text
}

/// The value of one sample line of an exposition, named as it is written there, e.g.
/// `candor_collector_rejected_total{reason="x"}`; for tests and diagnostics.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    let value = |line: &str| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok();
    text.lines().find_map(value)
}

/// Families whose values are read at scrape time from a service's state, written once and
/// dropped: each call adds one series (or one family with its series) and [`encode`](Self::encode)
/// renders them all. Families are written even with no series, headers only.
#[derive(Debug)]
pub struct Snapshot {
    registry: Registry,
    help: fn(&str) -> &'static str,
}

/// A label set of a snapshot's series, as `(name, value)` pairs.
pub type Labels = Vec<(String, String)>;

/// `(name, value)` pairs as a snapshot's label set.
pub fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect()
}

/// A family of a snapshot, written with its headers even when it has no series.
#[derive(Debug)]
struct Shown<M>(ClientFamily<Labels, M>);

impl<M> EncodeMetric for Shown<M>
where
    M: EncodeMetric + TypedMetric,
{
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        M::TYPE
    }
}

impl Snapshot {
    /// An empty snapshot whose families take their help texts from `help`.
    pub fn new(help: fn(&str) -> &'static str) -> Self {
        Self {
            registry: Registry::default(),
            help,
        }
    }

    /// A family of `M` with these series, each set by `set`.
    fn family<M, V>(
        &mut self,
        name: &'static str,
        series: impl IntoIterator<Item = (Labels, V)>,
        set: impl Fn(&M, V),
    ) where
        M: EncodeMetric + TypedMetric + Default + std::fmt::Debug + Send + Sync + 'static,
    {
        let family = ClientFamily::<Labels, M>::default();
        for (labels, value) in series {
            set(&family.get_or_create(&labels), value);
        }
        register(&mut self.registry, self.help, name, Shown(family));
    }

    /// A counter family (`name` ends in `_total`) with these series.
    pub fn counters(
        &mut self,
        name: &'static str,
        series: impl IntoIterator<Item = (Labels, u64)>,
    ) {
        self.family(name, series, |counter: &Counter, value| {
            counter.inc_by(value);
        });
    }

    /// A gauge family of whole numbers with these series.
    pub fn gauges(&mut self, name: &'static str, series: impl IntoIterator<Item = (Labels, i64)>) {
        self.family(name, series, |gauge: &Gauge, value| {
            gauge.set(value);
        });
    }

    /// A gauge family of fractional numbers (seconds, timestamps) with these series.
    pub fn float_gauges(
        &mut self,
        name: &'static str,
        series: impl IntoIterator<Item = (Labels, f64)>,
    ) {
        self.family(name, series, |gauge: &FloatGauge, value| {
            gauge.set(value);
        });
    }

    /// Every family added, in the Prometheus text exposition format 0.0.4.
    pub fn encode(&self) -> String {
        encode(&self.registry)
    }
}

#[cfg(test)]
mod tests;
