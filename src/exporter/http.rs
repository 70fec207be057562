//! The web endpoints: metrics, health, readiness, a landing page and the snapshot as JSON.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

use super::encode;
use super::families::{families, Counters};
use crate::snapshot::Snapshot;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Clone)]
pub struct WebState {
    pub snapshot: Arc<ArcSwap<Snapshot>>,
    pub counters: Arc<Counters>,
    pub ready: Arc<AtomicBool>,
    pub telemetry_path: String,
}

async fn metrics(State(st): State<WebState>, headers: HeaderMap) -> Response {
    let snap = st.snapshot.load_full();
    let fams = families(&snap, &st.counters, VERSION);
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let (body, ct) = if encode::wants_openmetrics(accept) {
        (encode::openmetrics(fams), encode::OPENMETRICS_CONTENT_TYPE)
    } else {
        (encode::text(&fams), encode::TEXT_CONTENT_TYPE)
    };
    ([(header::CONTENT_TYPE, ct)], body).into_response()
}

async fn healthy() -> &'static str {
    "OK\n"
}

async fn ready(State(st): State<WebState>) -> Response {
    if st.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "no sample taken yet\n").into_response()
    }
}

async fn snapshot_json(State(st): State<WebState>) -> Json<Arc<Snapshot>> {
    Json(st.snapshot.load_full())
}

async fn landing(State(st): State<WebState>) -> Html<String> {
    let snap = st.snapshot.load_full();
    let mut rows = String::new();
    for g in &snap.gpus {
        let used = g
            .memory
            .map(|m| {
                format!(
                    "{:.1} / {:.1} GiB",
                    m.used as f64 / 1073741824.0,
                    m.total as f64 / 1073741824.0
                )
            })
            .unwrap_or_else(|| "down".into());
        let eta = g
            .eta_seconds
            .map(|e| format!("{e:.0} s"))
            .unwrap_or_else(|| "–".into());
        rows.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            g.id.index,
            html_escape(&g.id.name),
            used,
            eta,
            g.risk.as_str()
        ));
    }
    Html(format!(
        "<!doctype html><html><head><title>gpumem-exporter</title></head><body>\
         <h1>gpumem-exporter {VERSION}</h1>\
         <p>Source: {}. <a href=\"{}\">Metrics</a> · <a href=\"/api/v1/snapshot\">Snapshot (JSON)</a> · \
         <a href=\"/-/healthy\">healthy</a> · <a href=\"/-/ready\">ready</a></p>\
         <table border=\"1\" cellpadding=\"4\"><tr><th>GPU</th><th>Name</th><th>Used</th><th>OOM ETA</th><th>Risk</th></tr>{rows}</table>\
         </body></html>",
        html_escape(&snap.source),
        html_escape(&st.telemetry_path),
    ))
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

pub fn router(state: WebState) -> Router {
    Router::new()
        .route(&state.telemetry_path.clone(), get(metrics))
        .route("/-/healthy", get(healthy))
        .route("/-/ready", get(ready))
        .route("/api/v1/snapshot", get(snapshot_json))
        .route("/", get(landing))
        .with_state(state)
}
