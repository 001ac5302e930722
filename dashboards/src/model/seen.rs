//! What the model keeps of who reports: each adapter instance by its counter points (or, for
//! derived calls, by its senders' heartbeats), and each collector by its heartbeats.

use std::sync::Arc;

use candor_query::coverage::SeenBy;
use candor_query::window::Micros;
use candor_records::proto::{Heartbeat, OutcomeCount};

use super::{CollectorSeen, InstanceSeen, Model};

impl Model {
    pub(super) fn see_instance(&mut self, count: &OutcomeCount, time: Micros) {
        let declared = count
            .export_interval_ms
            .map(|ms| i64::try_from(ms).unwrap_or(i64::MAX).saturating_mul(1000));
        self.see_export(
            SeenBy::Adapter,
            &count.service_name,
            &count.service_instance_id,
            time,
            declared,
        );
    }

    /// Applies one export of an instance at `time`, declaring `declared` as its interval.
    fn see_export(
        &mut self,
        seen_by: SeenBy,
        service: &str,
        instance: &str,
        time: Micros,
        declared: Option<Micros>,
    ) {
        let service = self.name(service);
        let instance = self.name(instance);
        let fresh = InstanceSeen {
            service: Arc::clone(&service),
            instance: Arc::clone(&instance),
            seen_by,
            first: time,
            last: time,
            interval_micros: None,
            stopped: false,
            replaced: false,
        };
        let seen = self
            .instances
            .entry((service, instance))
            .or_insert_with(|| fresh.clone());
        // An adapter's exports say more than a sender's heartbeats: once it has them, an
        // instance is judged by them alone.
        match (seen.seen_by, seen_by) {
            (SeenBy::Spans, SeenBy::Adapter) => *seen = fresh,
            (SeenBy::Adapter, SeenBy::Spans) => return,
            _ => {}
        }
        if time > seen.last {
            // An instance that declares its interval is believed; a final export comes early.
            if declared.is_none() {
                let gap = time - seen.last;
                seen.interval_micros =
                    Some(seen.interval_micros.map_or(gap, |known| known.min(gap)));
            }
            seen.last = time;
            seen.stopped = false;
        }
        if time == seen.last {
            // Several points share an export's time; any of them saying 0 says it for all.
            seen.stopped |= declared == Some(0);
            if let Some(interval) = declared.filter(|&interval| interval > 0) {
                seen.interval_micros = Some(interval);
            }
        }
        seen.first = seen.first.min(time);
    }

    pub(super) fn apply_heartbeat(&mut self, beat: &Heartbeat) {
        let time = i64::try_from(beat.time_unix_nano / 1000).unwrap_or(i64::MAX);
        if let (Some(service), Some(instance)) = (&beat.service_name, &beat.service_instance_id) {
            self.see_export(SeenBy::Spans, service, instance, time, None);
            return;
        }
        let interval = i64::try_from(beat.interval_ms)
            .unwrap_or(i64::MAX)
            .saturating_mul(1000);
        let started = i64::try_from(beat.started_time_unix_nano / 1000).unwrap_or(0);
        let seen = self
            .collectors
            .entry(beat.collector_id.clone())
            .or_insert(CollectorSeen {
                id: beat.collector_id.clone(),
                time,
                interval_micros: interval,
                started,
            });
        if time >= seen.time {
            seen.time = time;
            seen.interval_micros = interval;
            seen.started = started;
        }
    }
}
