//! The `tool.outcomes` data points of a metrics export request, and its declared export interval.

use candor_records::proto::Temporality;
use candor_records::rejection::{Refusal, RejectReason, refuse};
use candor_schema::names;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Metric, NumberDataPoint, ResourceMetrics, metric, number_data_point,
};

use super::outcome::outcome_count;
use super::redaction::redact_count;
use super::rejections::{Rejecting as _, Signal};
use super::{MetricsExtract, Received, Service, service_of};

/// Extracts the `tool.outcomes` data points of a metrics export request.
pub fn extract_metrics(
    request: &ExportMetricsServiceRequest,
    received: &Received<'_>,
) -> MetricsExtract {
    let limits = received.limits;
    let mut out = MetricsExtract::default();
    let mut overflow: Option<(Service<'_>, &NumberDataPoint)> = None;
    let mut overflowed = 0u64;
    for resource_metrics in &request.resource_metrics {
        let service = service_of(resource_metrics.resource.as_ref());
        let export_interval_ms = match export_interval(resource_metrics) {
            Ok(interval) => interval,
            Err((refusal, metric)) => {
                out.reject(refusal, Signal::Metrics, &service, metric, limits);
                None
            }
        };
        let first_count = out.counts.len();
        for scope_metrics in &resource_metrics.scope_metrics {
            for metric in &scope_metrics.metrics {
                if metric.name == names::EXPORT_INTERVAL_GAUGE {
                    continue;
                }
                if metric.name != names::OUTCOMES_COUNTER {
                    out.ignored_metrics += 1;
                    continue;
                }
                let sum = match &metric.data {
                    Some(metric::Data::Sum(sum)) if sum.is_monotonic => sum,
                    other => {
                        out.points_seen += 1;
                        let detail = format!(
                            "{} must be a monotonic sum, got {}",
                            names::OUTCOMES_COUNTER,
                            metric_type(other.as_ref())
                        );
                        let refusal = refuse(RejectReason::WrongMetricType, detail);
                        out.reject(refusal, Signal::Metrics, &service, metric, limits);
                        continue;
                    }
                };
                let temporality =
                    match AggregationTemporality::try_from(sum.aggregation_temporality) {
                        Ok(AggregationTemporality::Delta) => Some(Temporality::Delta),
                        Ok(AggregationTemporality::Cumulative) => Some(Temporality::Cumulative),
                        _ => None,
                    };
                for point in &sum.data_points {
                    out.points_seen += 1;
                    if out.points_seen > limits.max_events_per_request as u64 {
                        if overflow.is_none() {
                            overflow = Some((service.clone(), point));
                        }
                        overflowed += 1;
                        continue;
                    }
                    let result = match temporality {
                        Some(temporality) => outcome_count(point, temporality, &service, received),
                        None => Err(refuse(
                            RejectReason::UnspecifiedTemporality,
                            format!("aggregation_temporality {}", sum.aggregation_temporality),
                        )),
                    };
                    match result {
                        Ok(mut record) => {
                            out.redacted += redact_count(&mut record);
                            out.counts.push(record);
                        }
                        Err(refusal) => {
                            out.reject(refusal, Signal::Metrics, &service, point, limits);
                        }
                    }
                }
            }
        }
        for count in &mut out.counts[first_count..] {
            count.export_interval_ms = export_interval_ms;
        }
    }
    if let Some((service, point)) = overflow {
        let detail = format!(
            "{overflowed} {} data point(s) past the limit of {} per request",
            names::OUTCOMES_COUNTER,
            limits.max_events_per_request
        );
        let refusal = refuse(RejectReason::TooManyEvents, detail);
        out.reject(refusal, Signal::Metrics, &service, point, limits)
            .count = overflowed;
    }
    out
}

/// The longest export interval the gauge may declare, in seconds: a day.
const MAX_EXPORT_INTERVAL_SECONDS: f64 = 86_400.0;

/// The value of a resource's `candor.adapter.export_interval` gauge in milliseconds (its newest
/// point, when it has several); `None` when the resource has none. A gauge of another type, or a
/// value that is not a number of seconds from 0 to a day, is refused with the metric it came in;
/// the counter points of the same export are still kept, without an interval.
fn export_interval(resource_metrics: &ResourceMetrics) -> Result<Option<u64>, (Refusal, &Metric)> {
    let Some(metric) = resource_metrics
        .scope_metrics
        .iter()
        .flat_map(|scope| &scope.metrics)
        .rfind(|metric| metric.name == names::EXPORT_INTERVAL_GAUGE)
    else {
        return Ok(None);
    };
    let Some(metric::Data::Gauge(gauge)) = &metric.data else {
        let detail = format!(
            "{} must be a gauge, got {}",
            names::EXPORT_INTERVAL_GAUGE,
            metric_type(metric.data.as_ref())
        );
        return Err((refuse(RejectReason::WrongMetricType, detail), metric));
    };
    let Some(point) = gauge
        .data_points
        .iter()
        .max_by_key(|point| point.time_unix_nano)
    else {
        return Ok(None);
    };
    let seconds = match point.value {
        Some(number_data_point::Value::AsDouble(value)) => value,
        // Exact for every value in range; a larger one is refused below either way.
        Some(number_data_point::Value::AsInt(value)) => value as f64,
        None => {
            let detail = format!("{} has no value", names::EXPORT_INTERVAL_GAUGE);
            return Err((refuse(RejectReason::MissingAttribute, detail), metric));
        }
    };
    if !(0.0..=MAX_EXPORT_INTERVAL_SECONDS).contains(&seconds) {
        let detail = format!(
            "{} = {seconds} s: must be from 0 to {MAX_EXPORT_INTERVAL_SECONDS} seconds",
            names::EXPORT_INTERVAL_GAUGE
        );
        return Err((refuse(RejectReason::OutOfRange, detail), metric));
    }
    // In range (NaN is not), so the product fits a u64.
    Ok(Some((seconds * 1000.0).round() as u64))
}

fn metric_type(data: Option<&metric::Data>) -> &'static str {
    match data {
        None => "no data",
        Some(metric::Data::Gauge(_)) => "a gauge",
        Some(metric::Data::Sum(_)) => "a non-monotonic sum",
        Some(metric::Data::Histogram(_)) => "a histogram",
        Some(metric::Data::ExponentialHistogram(_)) => "an exponential histogram",
        Some(metric::Data::Summary(_)) => "a summary",
    }
}
