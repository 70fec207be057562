//! The web endpoints: metrics, health, readiness, a landing page and the snapshot as JSON, and
//! the server that serves them.

use std::future::Future;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use flate2::write::GzEncoder;
use tokio::sync::mpsc;

use super::webconfig::{self, WebSecurity, HANDSHAKE_TIMEOUT};
use super::{encode, families};
use crate::config::WEB_ROUTES;
use crate::connections::{serve_connection, Budget, Listener};
use crate::engine::{current, Engine};
use crate::runtime::telemetry::Counters;
use crate::snapshot::Snapshot;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Clone)]
pub struct WebState {
    pub engine: Arc<Mutex<Engine>>,
    pub counters: Arc<Counters>,
    pub ready: Arc<AtomicBool>,
    pub telemetry_path: String,
    /// Scrapes being encoded at once (`MAX_CONCURRENT_SCRAPES`).
    pub encoders: Arc<tokio::sync::Semaphore>,
    /// Series one scrape may hold (`web.max_series`).
    pub max_series: usize,
    /// When the series budget last said in the log that it left series out.
    pub budget_logged: Arc<Mutex<Option<Instant>>>,
}

/// How often at most the series budget says in the log that it leaves series out.
const BUDGET_LOG_INTERVAL: Duration = Duration::from_secs(60);

/// Count the series the budget left out of a scrape, and say so at most once per interval.
fn count_dropped(st: &WebState, dropped: u64, served: usize) {
    st.counters
        .series_dropped
        .fetch_add(dropped, Ordering::Relaxed);
    let mut last = st.budget_logged.lock().unwrap_or_else(|e| e.into_inner());
    if last.is_none_or(|t| t.elapsed() >= BUDGET_LOG_INTERVAL) {
        *last = Some(Instant::now());
        tracing::warn!(
            dropped,
            processes_served = served,
            max_series = st.max_series,
            "series left out of /metrics (or /api/v1/snapshot) to stay within web.max_series (the GPUs' series are all served; processes NVML does not list go first)"
        );
    }
}

/// `snap` within `web.max_series`, the series it leaves out counted and logged.
fn within_budget(st: &WebState, snap: Arc<Snapshot>) -> Arc<Snapshot> {
    let (snap, dropped) = families::within_budget(snap, &st.counters, VERSION, st.max_series);
    if dropped > 0 {
        count_dropped(st, dropped, snap.processes.len());
    }
    snap
}

/// Scrapes encoded at once; more wait for their turn without holding a thread. Each one in
/// progress holds a blocking thread and about two chunks.
pub const MAX_CONCURRENT_SCRAPES: usize = 8;
/// A scraper that takes no chunk for this long is dropped, so that slow or stalled clients
/// cannot keep the encoders busy.
const CHUNK_SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// Hands the body to the connection in chunks while it is encoded, so a scrape holds about
/// one chunk of it, not the whole (1.8 MB at 8 GPUs × 64 processes) per connection; gzipped
/// chunk by chunk where the scraper asked for it.
struct ChunkWriter {
    buf: String,
    gzip: Option<GzEncoder<Vec<u8>>>,
    tx: mpsc::Sender<Bytes>,
    runtime: tokio::runtime::Handle,
}

impl ChunkWriter {
    const CHUNK: usize = 64 * 1024;

    fn new(gzip: bool, tx: mpsc::Sender<Bytes>, runtime: tokio::runtime::Handle) -> Self {
        ChunkWriter {
            buf: String::with_capacity(Self::CHUNK + 4096),
            // The fastest level: exposition text shrinks about tenfold at it, and a scrape
            // should cost the node as little CPU as the sample it shows.
            gzip: gzip.then(|| GzEncoder::new(Vec::new(), flate2::Compression::fast())),
            tx,
            runtime,
        }
    }

    /// Hand on what is encoded so far (compressed, where it is).
    fn flush(&mut self) -> std::fmt::Result {
        let chunk = match self.gzip.as_mut() {
            Some(z) => {
                z.write_all(self.buf.as_bytes())
                    .map_err(|_| std::fmt::Error)?;
                self.buf.clear();
                Bytes::from(std::mem::take(z.get_mut()))
            }
            None => Bytes::from(std::mem::replace(
                &mut self.buf,
                String::with_capacity(Self::CHUNK + 4096),
            )),
        };
        if chunk.is_empty() {
            return Ok(());
        }
        // Fails when the client has gone or stopped reading: stop encoding.
        let send = tokio::time::timeout(CHUNK_SEND_TIMEOUT, self.tx.send(chunk));
        match self.runtime.block_on(send) {
            Ok(Ok(())) => Ok(()),
            _ => Err(std::fmt::Error),
        }
    }

    /// The last chunk, and the gzip trailer after it.
    fn finish(mut self) -> std::fmt::Result {
        self.flush()?;
        if let Some(z) = self.gzip.as_mut() {
            z.try_finish().map_err(|_| std::fmt::Error)?;
            self.flush()?;
        }
        Ok(())
    }
}

impl std::fmt::Write for ChunkWriter {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.buf.push_str(s);
        if self.buf.len() >= Self::CHUNK {
            self.flush()?;
        }
        Ok(())
    }
}

/// The current snapshot, built off the runtime when the engine has changed.
async fn snapshot(st: &WebState) -> Arc<Snapshot> {
    let engine = Arc::clone(&st.engine);
    match tokio::task::spawn_blocking(move || current(&engine)).await {
        Ok(snap) => snap,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

async fn metrics(State(st): State<WebState>, headers: HeaderMap) -> Response {
    let engine = Arc::clone(&st.engine);
    let counters = st.counters.clone();
    let state = st.clone();
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let openmetrics = encode::wants_openmetrics(accept);
    let gzip = encode::wants_gzip(
        headers
            .get(header::ACCEPT_ENCODING)
            .and_then(|v| v.to_str().ok()),
    );
    let (tx, rx) = mpsc::channel(2);
    let Ok(permit) = Arc::clone(&st.encoders).acquire_owned().await else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    let runtime = tokio::runtime::Handle::current();
    // True once the last chunk is handed over.
    let encoder = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let snap = within_budget(&state, current(&engine));
        let mut w = ChunkWriter::new(gzip, tx, runtime);
        if openmetrics {
            encode::openmetrics(snap, counters, VERSION, &mut w)
        } else {
            encode::text(&snap, &counters, VERSION, &mut w)
        }
        .and_then(|()| w.finish())
        .is_ok()
    });
    // A body whose encoder did not finish (it failed, or gave up on a client that stopped
    // reading) ends in an error: the chunked body is cut off without its terminating chunk,
    // so the scraper sees a failed scrape, never a short one.
    let chunks = futures_util::stream::unfold(Some((rx, encoder)), |state| async move {
        let (mut rx, encoder) = state?;
        match rx.recv().await {
            Some(chunk) => Some((Ok(chunk), Some((rx, encoder)))),
            None if encoder.await.unwrap_or(false) => None,
            None => Some((
                Err(std::io::Error::other("encoding the scrape failed")),
                None,
            )),
        }
    });
    let ct = if openmetrics {
        encode::OPENMETRICS_CONTENT_TYPE
    } else {
        encode::TEXT_CONTENT_TYPE
    };
    let mut r = ([(header::CONTENT_TYPE, ct)], Body::from_stream(chunks)).into_response();
    let h = r.headers_mut();
    h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    if gzip {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    r
}

async fn healthy() -> &'static str {
    "OK\n"
}

/// Ready once a sample is taken, and while every ingest listener configured explicitly
/// listens: a socket path someone chose that no client can reach is not a working exporter.
async fn ready(State(st): State<WebState>) -> Response {
    if !st.ready.load(Ordering::Acquire) {
        return (StatusCode::SERVICE_UNAVAILABLE, "no sample taken yet\n").into_response();
    }
    for l in [Listener::IngestSocket, Listener::IngestTcp] {
        if let Some(why) = st.counters.connections.of(l).required_but_down() {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("{} is down: {why}\n", l.as_str()),
            )
                .into_response();
        }
    }
    (StatusCode::OK, "ready\n").into_response()
}

/// The snapshot under the same series budget as a scrape: whoever can read one can read the
/// other, and a snapshot of every forged process would be the large answer the budget refuses.
async fn snapshot_json(State(st): State<WebState>) -> Json<Arc<Snapshot>> {
    let snap = tokio::task::spawn_blocking(move || within_budget(&st, current(&st.engine)));
    match snap.await {
        Ok(snap) => Json(snap),
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

async fn landing(State(st): State<WebState>) -> Html<String> {
    let snap = snapshot(&st).await;
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

/// The endpoints. The telemetry path is one the configuration accepted: it takes none of the
/// other routes and holds nothing the router reads as a parameter (either would panic here).
pub fn router(state: WebState) -> Router {
    let [landing_path, healthy_path, ready_path, snapshot_path] = WEB_ROUTES;
    Router::new()
        .route(&state.telemetry_path.clone(), get(metrics))
        .route(healthy_path, get(healthy))
        .route(ready_path, get(ready))
        .route(snapshot_path, get(snapshot_json))
        .route(landing_path, get(landing))
        .with_state(state)
}

/// Serve the web endpoints on `listener`, with the web config's TLS and basic authentication
/// where `security` has them, until `shutdown` completes. Connections stay within `budget`
/// (the longest idle one makes room for a newcomer); the request headers must arrive within
/// `idle_timeout` (`web.idle_timeout`), the TLS handshake within `HANDSHAKE_TIMEOUT`. On
/// shutdown no new connection is taken, requests in flight finish (a scrape gets its whole
/// answer or none) and idle keep-alive connections are closed.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    security: WebSecurity,
    budget: Arc<Budget>,
    idle_timeout: Duration,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let app = webconfig::protect(app, &security);
    let acceptor = security.tls.clone().map(tokio_rustls::TlsAcceptor::from);
    let security = Arc::new(security);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // Out of file descriptors and the like: wait a little, as axum::serve does.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let Ok(mut ticket) = budget.admit(None) else {
            continue;
        };
        // A scrape is written in chunks as it is encoded: without TCP_NODELAY, Nagle's
        // algorithm holds the last small segment back for the client's delayed ACK (about
        // 40 ms a scrape).
        let _ = tcp.set_nodelay(true);
        // Subscribed now, so that shutdown also waits for a handshake in progress.
        let watcher = graceful.watcher();
        let app = app.clone();
        let acceptor = acceptor.clone();
        let security = Arc::clone(&security);
        tokio::spawn(async move {
            let Some(a) = acceptor else {
                return serve_connection(tcp, app, ticket, idle_timeout, watcher).await;
            };
            // A handshake is idle time too: closed when its place is needed, or the stalled
            // handshakes of a flood would hold descriptors past the budget.
            let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, a.accept(tcp));
            let tls = tokio::select! {
                r = handshake => r,
                () = ticket.closed() => return,
            };
            match tls {
                // client_allowed_sans: a verified certificate that names none of them is
                // closed before any request, as the format's servers do.
                Ok(Ok(tls)) if !security.client_allowed(tls.get_ref().1.peer_certificates()) => {
                    tracing::debug!(%peer, "client certificate names none of client_allowed_sans");
                }
                Ok(Ok(tls)) => serve_connection(tls, app, ticket, idle_timeout, watcher).await,
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn state(telemetry_path: &str) -> WebState {
        let cfg = Config::default();
        WebState {
            engine: Arc::new(Mutex::new(Engine::new(&cfg, "test"))),
            counters: Arc::default(),
            ready: Arc::default(),
            telemetry_path: telemetry_path.into(),
            encoders: Arc::new(tokio::sync::Semaphore::new(1)),
            max_series: cfg.web.max_series,
            budget_logged: Arc::default(),
        }
    }

    #[test]
    fn a_telemetry_path_the_configuration_accepts_makes_a_router_and_a_clash_is_refused() {
        let accepted = |p: &str| {
            let mut c = Config::default();
            c.web.telemetry_path = p.into();
            c.validate().is_ok()
        };
        for p in [
            "/metrics",
            "/gpu-metrics",
            "/-/metrics",
            "/a/b_c.d~e/",
            "/metrics/",
        ] {
            assert!(accepted(p), "{p}");
            let _ = router(state(p));
        }
        for p in WEB_ROUTES
            .into_iter()
            .chain(["/:id", "/{id}", "/*rest", "/api/{v}", "metrics"])
        {
            assert!(!accepted(p), "{p} would clash with a route or panic");
        }
    }
}
