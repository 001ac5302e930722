//! The columns of the typed answers: where a row of [`crate::commands`] becomes the column names
//! and JSON values of [`Rows`], which the table, CSV and JSON show.
//!
//! A time is RFC 3339 in UTC with microseconds ([`rfc3339`]), unless stored as text; a count, a
//! rate or a factor is a number; a word of a closed vocabulary is its spelling; a missing value
//! is `null`.

use serde_json::Value;

use crate::commands::{
    EVENT_COLUMNS, EventRow, GroupBy, OPERATIONS_COLUMNS, OperationRow, RECONCILE_COLUMNS,
    RatesRow, ReconcileRow, SpikeRow,
};
use crate::rates::ClassCounts;
use crate::window::rfc3339;

use super::Rows;

/// A kind of row an answer is made of: its column names, and each row's values in their order.
pub trait Row {
    /// What the column names depend on besides the kind of row: `()` when nothing, the
    /// grouping for [`RatesRow`].
    type Heading;

    /// The column names, in order.
    fn columns(heading: Self::Heading) -> Vec<&'static str>;

    /// The row's values, one per column, in the columns' order.
    fn into_values(self) -> Vec<Value>;
}

impl Rows {
    /// Typed rows of a kind whose columns are fixed, under those columns.
    pub fn of<R: Row<Heading = ()>>(rows: impl IntoIterator<Item = R>) -> Self {
        Self::headed((), rows)
    }

    /// Typed rows under the columns `heading` gives their kind.
    pub fn headed<R: Row>(heading: R::Heading, rows: impl IntoIterator<Item = R>) -> Self {
        let mut out = Self::new(&R::columns(heading));
        for row in rows {
            out.push(row.into_values());
        }
        out
    }
}

/// An optional value, `null` when missing.
pub(super) fn or_null<T: Into<Value>>(value: Option<T>) -> Value {
    value.map_or(Value::Null, Into::into)
}

/// The columns of `rates` after the group's, which [`GroupBy`] names.
const RATES_COLUMNS: [&str; 16] = [
    "source",
    "bucket_start",
    "bucket_end",
    "calls",
    "success",
    "empty",
    "partial",
    "access_failure",
    "unverified",
    "cancelled",
    "accepted",
    "silent_failure_rate",
    "rate_bound",
    "sampling",
    "denominator",
    "failure_events",
];

impl Row for RatesRow {
    type Heading = GroupBy;

    fn columns(by: GroupBy) -> Vec<&'static str> {
        let mut columns = Vec::with_capacity(1 + RATES_COLUMNS.len());
        columns.push(by.label());
        columns.extend(RATES_COLUMNS);
        columns
    }

    fn into_values(self) -> Vec<Value> {
        let RatesRow {
            group,
            source,
            bucket_start,
            bucket_end,
            counts,
            silent_failure_rate,
            rate_bound,
            sampling,
            denominator,
            failure_events,
        } = self;
        let count = |pick: fn(&ClassCounts) -> u64| or_null(counts.as_ref().map(pick));
        vec![
            Value::from(group),
            Value::from(source),
            Value::from(rfc3339(bucket_start)),
            Value::from(rfc3339(bucket_end)),
            count(ClassCounts::calls),
            count(|c| c.success),
            count(|c| c.empty),
            count(|c| c.partial),
            count(|c| c.access_failure),
            count(|c| c.unverified),
            count(|c| c.cancelled),
            count(|c| c.accepted),
            or_null(silent_failure_rate),
            or_null(rate_bound.map(|bound| bound.as_str())),
            or_null(sampling.map(|state| state.as_str())),
            serde_json::to_value(denominator).unwrap_or(Value::Null),
            Value::from(failure_events),
        ]
    }
}

/// The columns of `spikes`.
const SPIKES_COLUMNS: [&str; 9] = [
    "target",
    "source",
    "window_access_failures",
    "window_calls",
    "window_rate",
    "baseline_access_failures",
    "baseline_calls",
    "baseline_rate",
    "factor",
];

impl Row for SpikeRow {
    type Heading = ();

    fn columns(_: ()) -> Vec<&'static str> {
        SPIKES_COLUMNS.to_vec()
    }

    fn into_values(self) -> Vec<Value> {
        let SpikeRow {
            target,
            source,
            window_access_failures,
            rates,
        } = self;
        let mut values = vec![
            Value::from(target),
            Value::from(source),
            Value::from(window_access_failures),
        ];
        match rates {
            Some(rates) => values.extend([
                Value::from(rates.window_calls),
                Value::from(rates.window_rate),
                Value::from(rates.baseline_access_failures),
                Value::from(rates.baseline_calls),
                or_null(rates.baseline_rate),
                // No factor with calls counted: the baseline rate was zero or unknown.
                rates.factor.map_or_else(|| Value::from("new"), Value::from),
            ]),
            None => values.extend([
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::from("unknown: no call counts"),
            ]),
        }
        values
    }
}

impl Row for EventRow {
    type Heading = ();

    fn columns(_: ()) -> Vec<&'static str> {
        EVENT_COLUMNS.to_vec()
    }

    fn into_values(self) -> Vec<Value> {
        // In the order of `EVENT_COLUMNS`.
        let EventRow {
            event_time,
            service_name,
            service_instance_id,
            tool_name,
            tool_target,
            source_system,
            source,
            convention,
            adapter,
            actor,
            outcome_class,
            failure_kind,
            retry_action,
            retry_attempt,
            retry_max_attempts,
            http_status_code,
            error_type,
            error_message,
            exception_type,
            rpc_status_code,
            coverage,
            dropped,
            evidence_kind,
            evidence_value,
            tool_call_id,
            trace_id,
            span_id,
            event_id,
        } = self;
        vec![
            Value::from(event_time),
            Value::from(service_name),
            Value::from(service_instance_id),
            Value::from(tool_name),
            Value::from(tool_target),
            or_null(source_system),
            or_null(source),
            or_null(convention),
            or_null(adapter),
            or_null(actor),
            Value::from(outcome_class),
            Value::from(failure_kind),
            Value::from(retry_action),
            Value::from(retry_attempt),
            Value::from(retry_max_attempts),
            or_null(http_status_code),
            or_null(error_type),
            or_null(error_message),
            or_null(exception_type),
            or_null(rpc_status_code),
            or_null(coverage),
            or_null(dropped),
            or_null(evidence_kind),
            or_null(evidence_value),
            or_null(tool_call_id),
            Value::from(trace_id),
            Value::from(span_id),
            Value::from(event_id),
        ]
    }
}

impl Row for OperationRow {
    type Heading = ();

    fn columns(_: ()) -> Vec<&'static str> {
        OPERATIONS_COLUMNS.to_vec()
    }

    fn into_values(self) -> Vec<Value> {
        let OperationRow {
            service,
            instance,
            tool,
            target,
            operation_id,
            state,
            first_seen,
            last_seen,
            age,
            actor,
            source_system,
            status,
        } = self;
        vec![
            Value::from(service),
            Value::from(instance),
            Value::from(tool),
            Value::from(target),
            Value::from(operation_id),
            Value::from(state.as_str()),
            Value::from(rfc3339(first_seen)),
            Value::from(rfc3339(last_seen)),
            Value::from(humantime::format_duration(age).to_string()),
            or_null(actor),
            Value::from(source_system),
            Value::from(status.as_str()),
        ]
    }
}

impl Row for ReconcileRow {
    type Heading = ();

    fn columns(_: ()) -> Vec<&'static str> {
        RECONCILE_COLUMNS.to_vec()
    }

    fn into_values(self) -> Vec<Value> {
        let ReconcileRow {
            series,
            window_start,
            window_end,
            counted,
            events,
            missing,
            extra,
        } = self;
        vec![
            Value::from(series.service),
            Value::from(series.instance),
            Value::from(series.tool),
            Value::from(series.target),
            Value::from(series.class.as_str()),
            Value::from(rfc3339(window_start)),
            Value::from(rfc3339(window_end)),
            or_null(counted),
            Value::from(events),
            Value::from(missing),
            Value::from(extra),
        ]
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use candor_records::proto::Sampling;
    use candor_schema::{LifecycleState, OutcomeClass};
    use serde_json::json;

    use super::*;
    use crate::commands::{OpenStatus, RateBound, SpikeRates};
    use crate::rates::Denominator;
    use crate::reconcile::SeriesKey;

    /// 2026-12-07T10:00:00Z.
    const AT: i64 = 1_796_637_600_000_000;

    /// The values of `rows`' first row, in column order.
    fn first(rows: &Rows) -> Vec<Value> {
        rows.columns
            .iter()
            .map(|column| rows.rows[0][column.as_str()].clone())
            .collect()
    }

    #[test]
    fn a_rates_row_is_named_by_its_grouping_and_counts_are_null_without_a_denominator() {
        let counted = RatesRow {
            group: "search".into(),
            source: "genai".into(),
            bucket_start: AT,
            bucket_end: AT + 300_000_000,
            counts: Some(ClassCounts {
                success: 6,
                unverified: 2,
                access_failure: 2,
                accepted: 1,
                ..ClassCounts::default()
            }),
            silent_failure_rate: Some(0.2),
            rate_bound: Some(RateBound::LowerBound),
            sampling: Some(Sampling::Weighted),
            denominator: Denominator::Counted,
            failure_events: 2,
        };
        let uncounted = RatesRow {
            counts: None,
            silent_failure_rate: None,
            rate_bound: None,
            sampling: None,
            denominator: Denominator::Missing,
            ..counted.clone()
        };
        let rows = Rows::headed(GroupBy::Tool, [counted, uncounted]);
        assert_eq!(rows.columns[..2], ["tool", "source"]);
        assert_eq!(rows.columns.len(), 17);
        assert_eq!(
            first(&rows),
            [
                json!("search"),
                json!("genai"),
                json!("2026-12-07T10:00:00.000000Z"),
                json!("2026-12-07T10:05:00.000000Z"),
                json!(10),
                json!(6),
                json!(0),
                json!(0),
                json!(2),
                json!(2),
                json!(0),
                json!(1),
                json!(0.2),
                json!("lower_bound"),
                json!("weighted"),
                json!("counted"),
                json!(2),
            ]
        );
        let second = &rows.rows[1];
        for column in [
            "calls",
            "accepted",
            "silent_failure_rate",
            "rate_bound",
            "sampling",
        ] {
            assert_eq!(second[column], Value::Null, "{column}");
        }
        assert_eq!(second["denominator"], "missing");
    }

    #[test]
    fn a_spike_without_call_counts_says_its_rate_is_unknown() {
        let rates = SpikeRates {
            window_calls: 20,
            window_rate: 0.5,
            baseline_access_failures: 0,
            baseline_calls: 100,
            baseline_rate: Some(0.0),
            factor: None,
        };
        let rows = Rows::of([
            SpikeRow {
                target: "a".into(),
                source: "adapter".into(),
                window_access_failures: 10,
                rates: Some(rates),
            },
            SpikeRow {
                target: "b".into(),
                source: "all".into(),
                window_access_failures: 12,
                rates: None,
            },
        ]);
        assert_eq!(rows.columns, SPIKES_COLUMNS);
        assert_eq!(
            first(&rows),
            [
                json!("a"),
                json!("adapter"),
                json!(10),
                json!(20),
                json!(0.5),
                json!(0),
                json!(100),
                json!(0.0),
                json!("new"),
            ]
        );
        let uncounted = &rows.rows[1];
        assert_eq!(uncounted["window_access_failures"], 12);
        assert_eq!(uncounted["window_calls"], Value::Null);
        assert_eq!(uncounted["factor"], "unknown: no call counts");
    }

    #[test]
    fn every_kind_gives_a_value_per_column() {
        let event = EventRow {
            event_time: "2026-12-07T10:00:00.250Z".into(),
            service_name: "svc".into(),
            service_instance_id: "i-1".into(),
            tool_name: "search".into(),
            tool_target: "https://api".into(),
            source_system: None,
            source: Some("adapter".into()),
            convention: None,
            adapter: Some("candor-adapter 1".into()),
            actor: None,
            outcome_class: "access_failure".into(),
            failure_kind: "timeout".into(),
            retry_action: "exhausted".into(),
            retry_attempt: 3,
            retry_max_attempts: 3,
            http_status_code: Some(503),
            error_type: None,
            error_message: Some("unavailable".into()),
            exception_type: None,
            rpc_status_code: None,
            coverage: None,
            dropped: None,
            evidence_kind: None,
            evidence_value: None,
            tool_call_id: None,
            trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
            span_id: "b7ad6b7169203331".into(),
            event_id: "e-1".into(),
        };
        let events = Rows::of([event]);
        assert_eq!(events.columns, EVENT_COLUMNS);
        assert_eq!(events.rows[0].len(), EVENT_COLUMNS.len());
        assert_eq!(events.rows[0]["retry_attempt"], 3);
        assert_eq!(events.rows[0]["http_status_code"], 503);
        assert_eq!(events.rows[0]["actor"], Value::Null);

        let operations = Rows::of([OperationRow {
            service: "svc".into(),
            instance: "i-1".into(),
            tool: "export".into(),
            target: "https://api".into(),
            operation_id: "op-1".into(),
            state: LifecycleState::Running,
            first_seen: AT,
            last_seen: AT + 60_000_000,
            age: Duration::from_secs(3_723),
            actor: None,
            source_system: "api".into(),
            status: OpenStatus::Stuck,
        }]);
        assert_eq!(operations.columns, OPERATIONS_COLUMNS);
        assert_eq!(operations.rows[0].len(), OPERATIONS_COLUMNS.len());
        assert_eq!(operations.rows[0]["age"], "1h 2m 3s");
        assert_eq!(operations.rows[0]["state"], "running");
        assert_eq!(operations.rows[0]["status"], "stuck");

        let reconciled = Rows::of([ReconcileRow {
            series: SeriesKey {
                service: "svc".into(),
                instance: "i-1".into(),
                tool: "search".into(),
                target: "https://api".into(),
                class: OutcomeClass::Partial,
            },
            window_start: AT,
            window_end: AT + 60_000_000,
            counted: None,
            events: 2,
            missing: 0,
            extra: 2,
        }]);
        assert_eq!(reconciled.columns, RECONCILE_COLUMNS);
        assert_eq!(reconciled.rows[0].len(), RECONCILE_COLUMNS.len());
        assert_eq!(reconciled.rows[0]["class"], "partial");
        assert_eq!(reconciled.rows[0]["counted"], Value::Null);
        assert_eq!(
            reconciled.rows[0]["window_end"],
            "2026-12-07T10:01:00.000000Z"
        );
    }
}
