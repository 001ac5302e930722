//! The demo's asynchronous export tool: the server side (`POST /export` answers 202 with
//! `Operation-Location` and `Retry-After`; `GET /export/{id}` says `running` for a couple of reads,
//! then the export's fate, decided at its acceptance by the scenario; an export that ended with
//! rows names the file it wrote by `resourceLocation`) and the caller that follows
//! its exports through the status URL, or starts one without waiting and resumes it later.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use candor_adapter::classify::http::OPERATION_LOCATION;
use candor_adapter::clock::TokioClock;
use candor_adapter::follow::http::StatusUrl;
use candor_adapter::http_client::HttpClient;
use candor_adapter::otlp::OtlpGuard;
use candor_adapter::{Adapter, AttemptContext, HttpClassifier, NotFound};
use candor_schema::Operation;

use super::{EXPORTER, Scenario, Shared, Tally, count, json, service_settings};

/// What becomes of an export, decided when it is accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fate {
    /// It ends, after a couple of status reads that say `running`.
    Ends(Ending),
    /// Its status says `running` for ever.
    NeverFinishes,
}

/// How an export that ends, ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending {
    /// `succeeded`, with the export's result.
    Succeeded,
    /// `failed`, with an error.
    Failed,
    /// `partiallySucceeded`, saying what was covered.
    Partial,
}

impl Fate {
    /// The fate of an export accepted under `scenario`, from a roll in 0..100.
    pub(super) fn choose(scenario: Scenario, roll: u64) -> Self {
        // Out of 100: how many succeed, fail and end partial; the rest never finish. Outside
        // `exports-stuck` every export ends, so that the stuck-operations alert stays quiet.
        let (succeeded, failed, partial) = match scenario {
            Scenario::ExportsStuck => (15, 5, 5),
            Scenario::Normal | Scenario::Spike | Scenario::CollectorOutage => (85, 8, 7),
        };
        if roll < succeeded {
            Self::Ends(Ending::Succeeded)
        } else if roll < succeeded + failed {
            Self::Ends(Ending::Failed)
        } else if roll < succeeded + failed + partial {
            Self::Ends(Ending::Partial)
        } else {
            Self::NeverFinishes
        }
    }
}

/// How many status reads of an export say `running` before it ends.
pub(super) const RUNNING_READS: u8 = 2;

/// How many exports the tool server remembers; past it, the oldest is forgotten.
pub(super) const EXPORTS_KEPT: usize = 10_000;

/// What one status read of an export says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ExportRead {
    /// Still running, this much done in percent.
    Running { percent: u8 },
    /// Ended.
    Ended(Ending),
}

/// One export the tool server accepted.
#[derive(Debug)]
pub(super) struct Export {
    fate: Fate,
    /// Status reads so far (saturating: only the first few matter).
    reads: u8,
}

/// The exports the tool server accepted, by number, the oldest first.
#[derive(Debug)]
pub(super) struct Exports {
    /// Starts every export id, so that a later run of the demo never hands out the same id
    /// (`candor operations` tells operations apart by their id).
    run: String,
    next: u64,
    known: BTreeMap<u64, Export>,
}

impl Exports {
    pub(super) fn new(run: String) -> Self {
        Self {
            run,
            next: 0,
            known: BTreeMap::new(),
        }
    }

    /// Accepts an export with its fate; returns its id.
    pub(super) fn accept(&mut self, fate: Fate) -> String {
        let number = self.next;
        self.next += 1;
        self.known.insert(number, Export { fate, reads: 0 });
        // Forgetting the oldest is safe: `reporting` follows an export for at most the start's
        // deadline plus EXPORT_DEADLINE (25 s), so unless exports are started at more than
        // EXPORTS_KEPT / 25 s = 400 a second, none of the forgotten ones is still followed. And
        // nothing is lost without a word: a status read of a forgotten export answers 404, which
        // the follower reports as an AccessFailure.
        while self.known.len() > EXPORTS_KEPT {
            self.known.pop_first();
        }
        format!("{}-{number}", self.run)
    }

    /// One status read of the export `id`: `None` when no such export is known.
    pub(super) fn read(&mut self, id: &str) -> Option<ExportRead> {
        let number: u64 = id
            .strip_prefix(self.run.as_str())?
            .strip_prefix('-')?
            .parse()
            .ok()?;
        let export = self.known.get_mut(&number)?;
        export.reads = export.reads.saturating_add(1);
        match export.fate {
            Fate::Ends(ending) if export.reads > RUNNING_READS => Some(ExportRead::Ended(ending)),
            // 30 % a read, never 100 %: an export that never finishes stalls at 90 %.
            _ => Some(ExportRead::Running {
                percent: export.reads.saturating_mul(30).min(90),
            }),
        }
    }
}

/// How long the exporter follows an export from its acceptance: short, so that an export that
/// never finishes ends its call as a `deadline` AccessFailure while the demo is watched.
pub(super) const EXPORT_DEADLINE: Duration = Duration::from_secs(20);

/// One export in this many is started by a caller that does not wait for it: the call returns
/// the acceptance, and the caller resumes following it [`RESUME_AFTER`] later.
const UNWAITED_EXPORT_EVERY: u64 = 10;

/// How long a caller that did not wait lets an export run before it follows it again.
const RESUME_AFTER: Duration = Duration::from_secs(5);

/// A tag for this run of the demo: the seconds since the epoch at its start, in hex.
pub(super) fn run_tag() -> String {
    let since_epoch = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    format!("{:x}", since_epoch.as_secs())
}

/// Accepts an export: 202, with where to read its status and when.
pub(super) async fn export_start(State(shared): State<Arc<Shared>>) -> Response {
    let fate = Fate::choose(shared.scenario(), shared.roll());
    let id = shared
        .exports
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .accept(fate);
    let location = format!("{}/export/{id}", shared.tools_url);
    let Ok(location) = HeaderValue::try_from(location) else {
        // Not reached: the URL is a socket address, a hex number and a number.
        return json(
            StatusCode::INTERNAL_SERVER_ERROR,
            r#"{"error":"no status URL for the export"}"#,
        );
    };
    let body = serde_json::json!({ "id": id, "status": "accepted" });
    let mut response = json(StatusCode::ACCEPTED, &body.to_string());
    let headers = response.headers_mut();
    headers.insert(OPERATION_LOCATION, location);
    headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// Reads an export's status document.
pub(super) async fn export_status(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> Response {
    let read = shared
        .exports
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .read(&id);
    let body = match read {
        None => return json(StatusCode::NOT_FOUND, r#"{"error":"no such export"}"#),
        Some(ExportRead::Running { percent }) => {
            let body =
                serde_json::json!({ "id": id, "status": "running", "percentComplete": percent });
            let mut response = json(StatusCode::OK, &body.to_string());
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            return response;
        }
        Some(ExportRead::Ended(Ending::Succeeded)) => serde_json::json!({
            "id": id,
            "status": "succeeded",
            "rows": 1200,
            "resourceLocation": format!("{}/exports/{id}.csv", shared.tools_url),
        }),
        Some(ExportRead::Ended(Ending::Failed)) => serde_json::json!({
            "id": id,
            "status": "failed",
            "error": { "code": "ExportFailed", "message": "the export ran out of scratch space" },
        }),
        Some(ExportRead::Ended(Ending::Partial)) => serde_json::json!({
            "id": id,
            "status": "partiallySucceeded",
            "covered": "2 of 3 regions",
            "rows": 800,
            "resourceLocation": format!("{}/exports/{id}.csv", shared.tools_url),
        }),
    };
    json(StatusCode::OK, &body.to_string())
}

/// The exporter's adapter: it follows an accepted export through its status URL.
pub(super) type ExportAdapter = Adapter<HttpClassifier, TokioClock, StatusUrl>;

/// The adapter `service` starts exports at `url` with: the settings of its other adapters, and
/// it follows each accepted export through its status URL for at most `EXPORT_DEADLINE`.
pub(super) fn export_adapter(
    url: &str,
    service: &str,
    telemetry: &OtlpGuard,
) -> anyhow::Result<ExportAdapter> {
    // Starting an export is a POST: each call carries an idempotency key, so that a start that
    // may have been applied can be sent again without starting a second export.
    let builder = Adapter::builder("export", url)
        .method(http::Method::POST)
        .idempotency_key(true)
        .classifier(HttpClassifier::new(NotFound::Unreachable).operation_id_at("/id"))
        .follow(StatusUrl::default())
        .operation_deadline(EXPORT_DEADLINE);
    let adapter = service_settings(builder, service, telemetry)?.build()?;
    Ok(adapter)
}

/// Starts an export every `period`, from `offset` on. Each export runs in its own task, so that
/// one followed to its deadline never holds back the next; there are at most about
/// (5 s + EXPORT_DEADLINE) / `period` of them at once. One in [`UNWAITED_EXPORT_EVERY`] is not
/// waited for.
pub(super) async fn start_exports(
    adapter: Arc<ExportAdapter>,
    client: HttpClient,
    url: Arc<str>,
    period: Duration,
    offset: Duration,
    tally: Tally,
) {
    tokio::time::sleep(offset).await;
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut started: u64 = 0;
    loop {
        ticker.tick().await;
        let waits = !started.is_multiple_of(UNWAITED_EXPORT_EVERY);
        started = started.wrapping_add(1);
        let (adapter, client, url, tally) = (
            Arc::clone(&adapter),
            client.clone(),
            Arc::clone(&url),
            Arc::clone(&tally),
        );
        tokio::spawn(async move {
            let headers = HeaderMap::new();
            // The client sends the call's idempotency key on every attempt.
            let start = |context: AttemptContext| {
                let (client, url, headers) = (&client, &url, &headers);
                async move { client.post(context, url, headers, Bytes::new()).await }
            };
            let read_status = |operation: &Operation, context: AttemptContext| {
                // The reader refuses an operation without a status URL before any read, so
                // the empty default is never requested.
                let status_url = operation.status_url.clone().unwrap_or_default();
                let (client, headers) = (&client, &headers);
                async move { client.get(context, &status_url, headers).await }
            };
            if waits {
                let envelope = adapter.call_and_follow(start, read_status).await;
                count(&tally, EXPORTER, &envelope);
                return;
            }
            let accepted = adapter.call(start).await;
            count(&tally, EXPORTER, &accepted);
            let Some(operation) = accepted
                .lifecycle()
                .filter(|lifecycle| !lifecycle.state().is_terminal())
                .map(|lifecycle| lifecycle.operation().clone())
            else {
                return;
            };
            tokio::time::sleep(RESUME_AFTER).await;
            let envelope = adapter.resume(operation, read_status).await;
            count(&tally, EXPORTER, &envelope);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::super::Scenario;
    use super::{EXPORTS_KEPT, Ending, ExportRead, Exports, Fate, RUNNING_READS};

    /// How many of the 100 rolls give `fate` under `scenario`.
    fn share(scenario: Scenario, fate: Fate) -> usize {
        (0..100)
            .filter(|&roll| Fate::choose(scenario, roll) == fate)
            .count()
    }

    #[test]
    fn the_scenario_sets_the_share_of_each_fate() {
        let fates = [
            Fate::Ends(Ending::Succeeded),
            Fate::Ends(Ending::Failed),
            Fate::Ends(Ending::Partial),
            Fate::NeverFinishes,
        ];
        for scenario in [Scenario::Normal, Scenario::Spike, Scenario::CollectorOutage] {
            let shares = fates.map(|fate| share(scenario, fate));
            assert_eq!(shares, [85, 8, 7, 0], "{}", scenario.name());
        }
        let stuck = fates.map(|fate| share(Scenario::ExportsStuck, fate));
        assert_eq!(stuck, [15, 5, 5, 75]);
    }

    #[test]
    fn an_export_runs_for_a_couple_of_reads_then_meets_its_fate() {
        let mut exports = Exports::new("run".into());
        let failing = exports.accept(Fate::Ends(Ending::Failed));
        let stuck = exports.accept(Fate::NeverFinishes);
        for _ in 0..RUNNING_READS {
            assert!(matches!(
                exports.read(&failing),
                Some(ExportRead::Running { .. })
            ));
        }
        assert_eq!(
            exports.read(&failing),
            Some(ExportRead::Ended(Ending::Failed))
        );
        for _ in 0..300 {
            assert!(matches!(
                exports.read(&stuck),
                Some(ExportRead::Running { percent }) if percent < 100
            ));
        }
        assert_eq!(exports.read("run-99"), None);
        assert_eq!(exports.read("other-0"), None);
    }

    #[test]
    fn the_oldest_export_is_forgotten_past_the_bound() {
        let mut exports = Exports::new("run".into());
        let first = exports.accept(Fate::NeverFinishes);
        let second = exports.accept(Fate::NeverFinishes);
        for _ in 2..=EXPORTS_KEPT {
            exports.accept(Fate::NeverFinishes);
        }
        assert_eq!(exports.known.len(), EXPORTS_KEPT);
        assert_eq!(exports.read(&first), None);
        assert!(exports.read(&second).is_some());
    }
}
