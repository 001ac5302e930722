//! The OTLP metrics requests the seeds are made of: good ones, and ones with something to refuse.

use candor_schema::OutcomeClass;
use candor_schema::names::{self, attr};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Gauge, Histogram, Metric, metric, number_data_point,
};

use crate::PATCHED_TOOL;
use crate::otlp::{
    count, count_point, four_classes, metrics, metrics_of, outcomes, service, sum, with_text,
};

pub(crate) fn cumulative() -> ExportMetricsServiceRequest {
    metrics(vec![outcomes(
        AggregationTemporality::Cumulative,
        four_classes(5),
    )])
}

pub(crate) fn delta() -> ExportMetricsServiceRequest {
    metrics(vec![outcomes(
        AggregationTemporality::Delta,
        four_classes(0),
    )])
}

/// Points refused one by one next to a good one.
pub(crate) fn bad_points() -> ExportMetricsServiceRequest {
    let mut timeless = count(OutcomeClass::Success, 1);
    timeless.time_unix_nano = 0;
    let mut classless = count(OutcomeClass::Success, 1);
    classless
        .attributes
        .retain(|kv| kv.key != attr::OUTCOME_CLASS);
    metrics(vec![outcomes(
        AggregationTemporality::Cumulative,
        vec![
            count(OutcomeClass::Empty, 3),
            count_point("maybe", Some(number_data_point::Value::AsInt(1))),
            count(OutcomeClass::Success, -1),
            count_point(
                OutcomeClass::Success.as_str(),
                Some(number_data_point::Value::AsDouble(1.5)),
            ),
            count_point(OutcomeClass::Success.as_str(), None),
            timeless,
            classless,
        ],
    )])
}

/// The counter as a gauge, a non-monotonic sum, a histogram and a sum without temporality, and a
/// metric that is not the counter.
pub(crate) fn wrong_metric_types() -> ExportMetricsServiceRequest {
    let gauge = Metric {
        name: names::OUTCOMES_COUNTER.to_owned(),
        data: Some(metric::Data::Gauge(Gauge {
            data_points: four_classes(1),
        })),
        ..Default::default()
    };
    let histogram = Metric {
        name: names::OUTCOMES_COUNTER.to_owned(),
        data: Some(metric::Data::Histogram(Histogram::default())),
        ..Default::default()
    };
    let cumulative = AggregationTemporality::Cumulative as i32;
    metrics(vec![
        gauge,
        sum(names::OUTCOMES_COUNTER, cumulative, false, four_classes(1)),
        histogram,
        sum(names::OUTCOMES_COUNTER, 0, true, four_classes(1)),
        sum("http.server.requests", cumulative, true, four_classes(1)),
        Metric {
            name: names::OUTCOMES_COUNTER.to_owned(),
            ..Default::default()
        },
    ])
}

pub(crate) fn oversized_points() -> ExportMetricsServiceRequest {
    let mut long = count(OutcomeClass::AccessFailure, 2);
    long.attributes = with_text(long.attributes, attr::TOOL_TARGET, &"x".repeat(5000));
    metrics(vec![outcomes(
        AggregationTemporality::Cumulative,
        vec![long, count(OutcomeClass::Success, 9)],
    )])
}

pub(crate) fn many_points() -> ExportMetricsServiceRequest {
    metrics_of(
        ["checkout", "billing", "search"]
            .into_iter()
            .zip(0..)
            .map(|(name, i)| {
                (
                    Some(service(name)),
                    vec![outcomes(
                        AggregationTemporality::Cumulative,
                        four_classes(i),
                    )],
                )
            })
            .collect(),
    )
}

pub(crate) fn points_to_patch() -> ExportMetricsServiceRequest {
    let mut point = count(OutcomeClass::Partial, 4);
    point.attributes = with_text(point.attributes, attr::TOOL_NAME, PATCHED_TOOL);
    metrics(vec![outcomes(AggregationTemporality::Delta, vec![point])])
}
