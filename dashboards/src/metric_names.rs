//! The dashboards' metric names with their help texts: what `/metrics` serves
//! ([`crate::metrics`]) and what the Prometheus rules read ([`crate::rules::prometheus`]).

candor_service::metric_names! {
    TOOL_OUTCOMES_TOTAL = "candor_tool_outcomes_total",
        "Tool calls per outcome class and source, continuous across the dashboards' restarts (absent while a start reads the history): source adapter from the adapters' tool.outcomes counters (success, empty, partial, access_failure); genai, mcp or http derived by the collector from standard spans (access_failure, unverified, cancelled), whose silent-failure rate is a lower bound.";
    OPERATIONS_ACCEPTED_TOTAL = "candor_tool_operations_accepted_total",
        "Calls whose answer accepted an operation that had not ended, from tool.outcomes: work accepted, not done, and so in no class of candor_tool_outcomes_total.";
    FAILURE_EVENTS_TOTAL = "candor_failure_events_total",
        "Failure events by kind, retry action and source, continuous across the dashboards' restarts (absent while a start reads the history; a derived failure's action is empty).";
    ADAPTER_LAST_SEEN = "candor_adapter_last_seen_timestamp_seconds",
        "Time of the newest counter point from each adapter instance.";
    DUPLICATES_TOTAL = "candor_dashboards_duplicates_total",
        "Retried copies of records recognised by id and not counted twice.";
    POINTS_SET_ASIDE_TOTAL = "candor_dashboards_points_set_aside_total",
        "Counter points whose increase no bucket holds, by why: baseline (the first point seen of a series whose counter started before the model holds data) or stale (older than its series' newest point, which already counted it).";
    OUTSIDE_HISTORY_TOTAL = "candor_dashboards_outside_history_total",
        "Records whose time fell before the history or in the future, kept out of the panels' buckets.";
    REJECTED_RECORDS_TOTAL = "candor_dashboards_rejected_records_total",
        "Records the decoder refused, by reason, continuous across restarts (absent while a start reads the history).";
    HISTORY_READY = "candor_dashboards_history_ready",
        "1 once the model holds its history (the tables' part read and the stream caught up with what the brokers held at the start), else 0; the outcome counters are absent until then.";
    HISTORY_LOST_TOTAL = "candor_dashboards_history_lost_records_total",
        "Records neither the tables nor the brokers held at the start, per topic: Kafka deleted them before the compactor stored them.";
    HOP_LAST_SEEN = "candor_hop_last_seen_timestamp_seconds",
        "Time of the newest evidence from each pipeline hop; absent when there never was any.";
    HOP_FRESHNESS = "candor_hop_freshness_seconds",
        "Seconds since the newest evidence from each pipeline hop; absent when there never was any.";
    COMPACTOR_LAG = "candor_compactor_lag_records",
        "Records read from Kafka that the tables do not hold yet.";
    RECORDS_TOTAL = "candor_dashboards_records_total",
        "Records the dashboards' consumer read, per topic.";
    STATE_SAVES_TOTAL = "candor_dashboards_state_saves_total",
        "Writes of the alert instances to the dashboards' state store, by result: saved (durably) or failed (logged; the alerts then live in memory only until a write succeeds).";
    SILENCE_READS_TOTAL = "candor_dashboards_silence_reads_total",
        "Reads of an Alertmanager receiver's silences (its silences acknowledge the alerts they cover), by result: read, or failed (logged; the alerts stay unacknowledged and escalate).";
    COUNTER_SAVES_TOTAL = "candor_dashboards_counter_saves_total",
        "Writes of the outcome counters with the offsets they hold to the dashboards' state store, by result: saved (durably) or failed (logged; a restart then counts from the previous write, which stays exact).";
    HTTP_REFUSED_TOTAL = "candor_dashboards_http_refused_total",
        "Requests the dashboards refused, by reason: no_credentials and wrong_credentials (401), forbidden (403, a role that does not reach the path).";
    RECONCILE_RUNS_TOTAL = "candor_reconcile_runs_total",
        "Reconciliation runs by result: ok (an answer, covering its window or part of it) or failed (the run could not read or did not finish).";
    RECONCILE_LAST_RUN = "candor_reconcile_last_run_timestamp_seconds",
        "Time the newest reconciliation run ran; absent before the first one ended.";
    RECONCILE_COVERED = "candor_reconcile_covered",
        "1 when the newest reconciliation run covered its whole window, else 0 (partial, failed, or not run yet).";
    RECONCILE_UNCOVERED = "candor_reconcile_uncovered_seconds",
        "Seconds since the newest reconciliation run that covered its whole window (since the dashboards started when none did).";
    RECONCILE_LAST_COVERED = "candor_reconcile_last_covered_timestamp_seconds",
        "Time of the newest reconciliation run that covered its whole window; absent until one did.";
    RECONCILE_WINDOWS = "candor_reconcile_windows",
        "Counter windows the newest covered reconciliation checked, by result: matched (events and counter agree at the window's end) or mismatched; absent until a run covered its window.";
    RECONCILE_EVENTS = "candor_reconcile_events",
        "Events the newest covered reconciliation found out of line, by gap: missing (counted failed calls without their terminal event stored), extra (events of calls not counted) or without_counter (events of series with no counter point); absent until a run covered its window.";
    ALERTS = "candor_alerts",
        "Alert instances pending or firing in the built-in rule engine.";
    NOTIFICATIONS_TOTAL = "candor_notifications_total",
        "Alert notifications by result: delivered (every webhook acknowledged) or failed.";
    OPERATIONS_OPEN = "candor_operations_open",
        "Asynchronous operations accepted and not ended (their latest tool.lifecycle state is accepted, queued or running), by whether the adapter instance that reported the latest state still reports (adapter reporting) or went silent (adapter silent: whether the operation ended is unknown).";
    OPERATION_OLDEST_OPEN = "candor_operation_oldest_open_timestamp_seconds",
        "Time the oldest open operation whose adapter instance still reports was first seen; absent when there is none. time() minus it is how long the oldest such operation has been open.";
    OPERATIONS_EVICTED_TOTAL = "candor_dashboards_operations_evicted_total",
        "Operations the dashboards let go to stay within their limit, the oldest ended ones first; the operation figures do not count them.";
    UP = "candor_dashboards_up",
        "1 while the dashboards serve.";
}
