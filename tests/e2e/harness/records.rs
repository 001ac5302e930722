//! Realistic Kafka records as the collector writes them, for the load generator's `--preload`
//! and the `rows` bench: events shaped as the adapter emits them, and counter points of the
//! same targets.

/// A cheap mix (splitmix64's finalizer) so that ids look random, like the collector's SHA-256
/// prefixes, and so that what is drawn from it does not follow the target.
pub fn mix(x: u64) -> u64 {
    let x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// One realistic record, distinct for every `n`, shaped as the adapter emits them: one
/// `tool.outcome` event per failed attempt of a call, all on the call's span, so that they share
/// its trace, span, target, tool and service. Record `n` is attempt `n % 3 + 1` of call `n / 3`:
/// two failures that were retried, then one that exhausted the retries or a partial answer that
/// was accepted. Two calls (to different targets) make a trace. The outcome is drawn from a hash
/// of the call, so every target sees every outcome in random order.
///
/// `slot_nanos` and `step` place the record: its event time lies at a random point of
/// `slot_nanos..slot_nanos + step`, and it was received 1 to 50 ms later, as a collector
/// receives batches; a sorted column of exactly evenly spaced times would compress as no real
/// one does.
pub fn realistic_event(n: u64, slot_nanos: u64, step: u64) -> (String, Vec<u8>) {
    use candor_records::proto::OutcomeEvent;
    use candor_records::proto::OutcomeSource;
    use prost::Message as _;
    let (call, attempt) = (n / 3, n % 3);
    let target = format!("https://api-{}.internal/v1/search", call % 50);
    let draw = mix(call ^ 0xa5a5) % 10;
    let last = attempt == 2;
    // One call in ten ends in a partial answer; it failed on its first attempts like the rest.
    let partial = draw == 9 && last;
    let (kind, status) = match draw {
        6 | 7 => ("timeout", None),
        8 => ("rate_limited", Some(429)),
        9 if partial => ("declared_total", None),
        _ => ("server_error", Some(503)),
    };
    let (class, action) = match (partial, last) {
        (true, _) => ("partial", "accept_partial"),
        (false, true) => ("access_failure", "exhausted"),
        (false, false) => ("access_failure", "retry"),
    };
    let event_nanos = slot_nanos + mix(n ^ 0x3c3c) % step.max(1);
    let trace = call / 2;
    let event = OutcomeEvent {
        schema_version: 1,
        event_id: format!("{:016x}{:016x}", mix(n), mix(n ^ 0x5555)),
        trace_id: format!("{:016x}{:016x}", mix(trace), mix(trace + 7)),
        span_id: format!("{:016x}", mix(call + 11)),
        event_time_unix_nano: event_nanos,
        service_name: format!("service-{}", trace % 8),
        service_instance_id: format!("service-{}-{}", trace % 8, trace % 3),
        outcome_class: class.into(),
        tool_name: ["search", "lookup", "fetch", "geocode"][(call % 4) as usize].into(),
        tool_target: target.clone(),
        failure_kind: kind.into(),
        retry_action: action.into(),
        retry_attempt: 1 + attempt as u32,
        retry_max_attempts: 3,
        retry_backoff_ms: (action == "retry").then_some(100 << attempt),
        http_status_code: status,
        error_type: (!partial).then(|| kind.to_owned()),
        partial_returned: partial.then_some(20),
        partial_expected: partial.then_some(100),
        coverage: partial.then(|| "first page".to_owned()),
        dropped: partial.then(|| "pages 2-5".to_owned()),
        authority: None,
        received_time_unix_nano: event_nanos + 1_000_000 + mix(n ^ 0x7e7e) % 49_000_000,
        collector_id: "collector-1".into(),
        source: Some(OutcomeSource::Adapter.as_str().into()),
        // The event that ends a failed call has its message and the response's request id;
        // half the calls ran in an agent's tool call.
        error_message: (last && !partial).then(|| match status {
            Some(code) => format!("HTTP {code} from {target}: upstream unavailable"),
            None => "timed out after 2000 ms".to_owned(),
        }),
        evidence_kind: (last && status.is_some()).then(|| "request_id".to_owned()),
        evidence_value: (last && status.is_some())
            .then(|| format!("req-{:012x}", mix(n ^ 0x1111) >> 16)),
        tool_call_id: (call % 2 == 0).then(|| format!("call_{:016x}", mix(call ^ 0x2222))),
        ..OutcomeEvent::default()
    };
    (target, event.encode_to_vec())
}

/// The counter points of `--counts`: for each of the 50 targets and each class, one cumulative
/// point a minute from `first` to `last` (nanoseconds), the counter started at `first`.
pub fn realistic_counts(first: u64, last: u64) -> Vec<(String, Vec<u8>)> {
    use candor_records::proto::OutcomeSource;
    use candor_records::proto::{OutcomeCount, Temporality};
    use prost::Message as _;
    let minute = 60_000_000_000u64;
    let mut points = Vec::new();
    for target_index in 0..50u64 {
        let target = format!("https://api-{target_index}.internal/v1/search");
        let mut at = first;
        let mut minutes = 0u64;
        while at <= last {
            for (class_index, (class, per_minute)) in [
                ("success", 400),
                ("empty", 50),
                ("partial", 10),
                ("access_failure", 40 + target_index),
            ]
            .into_iter()
            .enumerate()
            {
                // Distinct for every point: the series (target and class) and the minute.
                let unique = ((target_index * 4 + class_index as u64) << 32) | minutes;
                let count = OutcomeCount {
                    schema_version: 1,
                    // 32 hex digits, as the collector's content ids are.
                    point_id: format!("{:016x}{:016x}", mix(unique), mix(unique ^ 0x5555)),
                    service_name: format!("service-{}", target_index % 8),
                    service_instance_id: format!("service-{}-0", target_index % 8),
                    tool_name: ["search", "lookup", "fetch", "geocode"]
                        [(target_index % 4) as usize]
                        .into(),
                    tool_target: target.clone(),
                    outcome_class: class.into(),
                    start_time_unix_nano: first,
                    time_unix_nano: at,
                    value: per_minute * minutes,
                    temporality: Temporality::Cumulative as i32,
                    received_time_unix_nano: at + 2_000_000,
                    collector_id: "collector-1".into(),
                    export_interval_ms: Some(60_000),
                    source: Some(OutcomeSource::Adapter.as_str().into()),
                    convention: None,
                    sampling: None,
                };
                points.push((target.clone(), count.encode_to_vec()));
            }
            at += minute;
            minutes += 1;
        }
    }
    points
}
