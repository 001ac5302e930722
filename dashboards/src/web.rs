//! The HTTP server: the pages, the JSON API behind them, `/metrics` and the probes.
//!
//! | path | answer |
//! |---|---|
//! | `/` `?range=1h` | the overview page |
//! | `/events` `?target=&class=&service=&tool=&since=&until=&trace=` | the forensic page |
//! | `/api/overview` `?range=1h` | the overview as JSON |
//! | `/api/events` (as `/events`) | the events as `candor incident --format json` prints them |
//! | `/api/alerts` | the alert instances |
//! | `POST /api/alerts/ack` `{"name", "labels"}` | acknowledges a firing alert instance, as the request's user or token; the instance |
//! | `POST /alerts/ack` (form: `name`, `labels` as JSON) | the same from the page's button; back to `/` |
//! | `GET /alerts/ack?name&labels&fired&sig` | a notification's signed link ([`crate::ack_link`]): what it acknowledges, and a button that POSTs it back |
//! | `/api/health` | every hop's freshness |
//! | `/metrics` | Prometheus text format |
//! | `/healthz`, `/readyz` | alive; ready once the stream has started |
//!
//! With credentials configured, every path but the probes needs one ([`crate::access`]).
//!
//! Every answer is read from the newest published snapshot ([`crate::snapshot`]); only an
//! acknowledgement, a command, changes the shared state, and then publishes a snapshot that
//! shows it.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Extension, RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;
use candor_query::window::{Micros, now};
use candor_service::ops::{self, Readiness};

use crate::access::Admitted;
use crate::ack_link::{Link, LinkKey};
use crate::alerts::AckError;
use crate::forensic::{self, EventsQuery, ForensicSettings};
use crate::page;
use crate::snapshot::{Published, Snapshot};
use crate::state::Shared;
use crate::sync::lock;
use crate::view;

/// What the handlers share.
#[derive(Debug)]
pub struct App {
    /// The state, which acknowledgements change.
    pub shared: Arc<Shared>,
    /// The snapshots every answer reads.
    pub published: Published,
    /// Where the forensic view reads.
    pub forensic: ForensicSettings,
    /// The key acknowledgement links are signed with.
    pub links: Arc<LinkKey>,
}

/// The default range of the overview.
const DEFAULT_RANGE: Micros = 60 * 60 * 1_000_000;

/// The router: the pages and the API, with `/metrics`, `/healthz` and `/readyz` from
/// [`candor_service::ops`], as every Candor service answers them.
pub fn router(app: Arc<App>) -> Router {
    let probes = ops::router(
        {
            let published = app.published.clone();
            move || crate::metrics::render(&published.newest())
        },
        {
            let published = app.published.clone();
            move || readiness(&published.newest())
        },
    );
    Router::new()
        .route("/", get(overview_page))
        .route("/events", get(events_page))
        .route("/api/overview", get(overview_json))
        .route("/api/events", get(events_json))
        .route("/api/alerts", get(alerts_json))
        .route("/api/alerts/ack", axum::routing::post(acknowledge_json))
        .route(
            "/alerts/ack",
            axum::routing::post(acknowledge_form).get(acknowledge_link_page),
        )
        .route("/api/health", get(health_json))
        .with_state(Arc::clone(&app))
        .merge(probes)
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&app.shared.access),
            crate::access::guard,
        ))
}

// The pages run no script and load nothing from elsewhere; the policy says so to the browser,
// so that even a value that escaped escaping could not run.
const CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'";

fn html(body: String) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

fn json(status: StatusCode, body: String) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

fn json_value<T: serde::Serialize>(value: &T) -> Response {
    match serde_json::to_string(value) {
        Ok(body) => json(StatusCode::OK, body),
        Err(err) => json(
            StatusCode::INTERNAL_SERVER_ERROR,
            serde_json::json!({ "error": err.to_string() }).to_string(),
        ),
    }
}

fn bad_request(problem: &str) -> Response {
    json(
        StatusCode::BAD_REQUEST,
        serde_json::json!({ "error": problem }).to_string(),
    )
}

fn params(query: Option<&str>) -> Vec<(String, String)> {
    url::form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .map(|(name, value)| (name.into_owned(), value.into_owned()))
        .collect()
}

fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a String> {
    params
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value)
}

/// The `range` parameter: a duration up to the model's history.
fn range(snapshot: &Snapshot, query: Option<&str>) -> Result<Micros, String> {
    let params = params(query);
    let Some(raw) = param(&params, "range").filter(|raw| !raw.is_empty()) else {
        return Ok(DEFAULT_RANGE);
    };
    let parsed = candor_schema::duration::parse(raw).map_err(|err| format!("range={err}"))?;
    let micros = Micros::try_from(parsed.as_micros()).unwrap_or(Micros::MAX);
    let history = snapshot.settings.history;
    if micros <= 0 || micros > history {
        return Err(format!(
            "range={raw:?} must be above zero and within the history of {} s",
            history / 1_000_000
        ));
    }
    Ok(micros)
}

async fn overview_page(State(app): State<Arc<App>>, RawQuery(query): RawQuery) -> Response {
    let snapshot = app.published.newest();
    match range(&snapshot, query.as_deref()) {
        Ok(range) => html(page::overview(&view::overview(&snapshot, range))),
        Err(problem) => (StatusCode::BAD_REQUEST, problem).into_response(),
    }
}

async fn overview_json(State(app): State<Arc<App>>, RawQuery(query): RawQuery) -> Response {
    let snapshot = app.published.newest();
    match range(&snapshot, query.as_deref()) {
        Ok(range) => json_value(&view::overview(&snapshot, range)),
        Err(problem) => bad_request(&problem),
    }
}

fn events_query(query: Option<&str>) -> EventsQuery {
    let params = params(query);
    let get = |name: &str| param(&params, name).cloned();
    EventsQuery {
        target: get("target"),
        class: get("class"),
        service: get("service"),
        tool: get("tool"),
        since: get("since"),
        until: get("until"),
        trace: get("trace"),
    }
}

async fn events_page(State(app): State<Arc<App>>, RawQuery(query): RawQuery) -> Response {
    let asked = events_query(query.as_deref());
    let asked_anything = asked != EventsQuery::default();
    if !asked_anything {
        return html(page::events(
            &asked,
            Err("Fill in a target, a trace id or a time range."),
        ));
    }
    let answer = forensic::events(&app.forensic, &asked, now()).await;
    match &answer {
        Ok(view) => html(page::events(&asked, Ok(view))),
        Err(problem) => {
            let body = page::events(&asked, Err(problem));
            (StatusCode::BAD_REQUEST, html(body)).into_response()
        }
    }
}

async fn events_json(State(app): State<Arc<App>>, RawQuery(query): RawQuery) -> Response {
    let asked = events_query(query.as_deref());
    match forensic::events(&app.forensic, &asked, now()).await {
        Ok(view) => json(StatusCode::OK, view.json),
        Err(problem) => bad_request(&problem),
    }
}

async fn alerts_json(State(app): State<Arc<App>>) -> Response {
    json_value(&app.published.newest().alerts)
}

/// Acknowledges the firing instance `name` with `labels` as `who`.
fn acknowledge(
    app: &App,
    name: String,
    labels: crate::alerts::Labels,
    who: &Admitted,
) -> Result<crate::alerts::Alert, (StatusCode, String)> {
    let key = (name, labels);
    let acknowledged = {
        let mut alerts = lock(&app.shared.alerts);
        alerts.acknowledge(&key, who.name(), now())
    };
    match acknowledged {
        Ok(alert) => {
            tracing::info!(alert = %alert.name, by = who.name(), "alert acknowledged");
            app.published.publish(&app.shared, now());
            Ok(alert)
        }
        Err(err @ AckError::Unknown(_)) => Err((StatusCode::NOT_FOUND, err.to_string())),
        Err(err @ AckError::NotFiring(..)) => Err((StatusCode::CONFLICT, err.to_string())),
    }
}

/// The body of `POST /api/alerts/ack`.
#[derive(Debug, serde::Deserialize)]
struct AckRequest {
    name: String,
    #[serde(default)]
    labels: crate::alerts::Labels,
}

async fn acknowledge_json(
    State(app): State<Arc<App>>,
    Extension(who): Extension<Admitted>,
    body: Bytes,
) -> Response {
    let asked: AckRequest = match serde_json::from_slice(&body) {
        Ok(asked) => asked,
        Err(err) => return bad_request(&format!("expected {{\"name\", \"labels\"}}: {err}")),
    };
    match acknowledge(&app, asked.name, asked.labels, &who) {
        Ok(alert) => json_value(&alert),
        Err((status, problem)) => json(status, serde_json::json!({ "error": problem }).to_string()),
    }
}

/// Why a link was refused: its status and the text said.
type Refused = (StatusCode, &'static str);

/// A signed link's episode, when its signature verifies and the episode is among `alerts`.
fn linked(
    app: &App,
    alerts: &[crate::alerts::Alert],
    query: Option<&str>,
) -> Result<(Link, crate::alerts::Alert), Refused> {
    let Some(link) = Link::verified(query.unwrap_or(""), &app.links) else {
        return Err((
            StatusCode::FORBIDDEN,
            "403 this link's signature does not verify\n",
        ));
    };
    let key = (link.name.clone(), link.labels.clone());
    let current = alerts
        .iter()
        .find(|alert| alert.key() == key && alert.fired_at == Some(link.fired_at));
    match current {
        Some(alert) => Ok((link, alert.clone())),
        None => Err((
            StatusCode::GONE,
            "410 the episode this link acknowledges is over\n",
        )),
    }
}

async fn acknowledge_link_page(State(app): State<Arc<App>>, RawQuery(query): RawQuery) -> Response {
    match linked(&app, &app.published.newest().alerts, query.as_deref()) {
        Ok((_, alert)) => html(page::acknowledge_link(
            &alert,
            query.as_deref().unwrap_or(""),
        )),
        Err(refused) => refused.into_response(),
    }
}

async fn acknowledge_form(
    State(app): State<Arc<App>>,
    Extension(who): Extension<Admitted>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Response {
    if who == Admitted::Link || crate::ack_link::is_signed(query.as_deref()) {
        // A command: checked against the alerts as they are, not as last published.
        let alerts = lock(&app.shared.alerts).list();
        return match linked(&app, &alerts, query.as_deref()) {
            Ok((link, _)) => match acknowledge(&app, link.name, link.labels, &Admitted::Link) {
                Ok(_) => (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response(),
                Err((status, problem)) => (status, format!("{problem}\n")).into_response(),
            },
            Err(refused) => refused.into_response(),
        };
    }
    let fields = params(std::str::from_utf8(&body).ok());
    let name = param(&fields, "name").cloned().unwrap_or_default();
    let labels = param(&fields, "labels")
        .map(|text| serde_json::from_str(text))
        .transpose();
    let Ok(labels) = labels else {
        return (StatusCode::BAD_REQUEST, "labels: expected a JSON object\n").into_response();
    };
    match acknowledge(&app, name, labels.unwrap_or_default(), &who) {
        Ok(_) => (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response(),
        Err((status, problem)) => (status, format!("{problem}\n")).into_response(),
    }
}

async fn health_json(State(app): State<Arc<App>>) -> Response {
    json_value(&serde_json::json!({ "hops": app.published.newest().hops }))
}

/// Ready once the model holds data, that is once the stream has read Kafka; else why not.
fn readiness(snapshot: &Snapshot) -> Readiness {
    if snapshot.holds_from.is_some() {
        Readiness::Ready
    } else {
        let reason = snapshot
            .pipeline
            .kafka_error
            .clone()
            .unwrap_or_else(|| "the stream has not read Kafka yet".into());
        Readiness::NotReady(reason.into())
    }
}
