//! The ingest endpoint: HTTP/1.1 on a Unix socket (pid from SO_PEERCRED) and, optionally,
//! on a loopback TCP address (pid from a header, see docs/ingest.md for what that trusts).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::json;
use tower::ServiceExt;

use super::admission::{Admission, Outcome, Refusal, Sender, TableCounters};
use super::report;
use crate::config::IngestConfig;
use crate::connections::{serve_connection, Budget};
use crate::engine::{Applied, Engine};
use crate::model::Time;
use crate::model::{RejectReason, Rejection, Report};

pub const REPORT_PATH: &str = "/api/v1/report";
pub const PID_HEADER: &str = "x-gpumem-pid";

/// Who sent a request, as far as the transport can tell.
#[derive(Debug, Clone, Copy)]
pub enum Peer {
    /// From the kernel (SO_PEERCRED): trusted.
    Unix { pid: Option<u32> },
    /// TCP: the pid comes from a header anyone can write; the source address is what the
    /// process table limits.
    Tcp { addr: IpAddr },
}

/// A connection's stream, and who is at its other end.
pub trait PeerStream:
    tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static
{
    fn peer(&self) -> Peer;
}

impl PeerStream for tokio::net::UnixStream {
    fn peer(&self) -> Peer {
        let pid = self
            .peer_cred()
            .ok()
            .and_then(|c| c.pid())
            .and_then(|p| u32::try_from(p).ok())
            .filter(|&p| p > 0);
        Peer::Unix { pid }
    }
}

impl PeerStream for tokio::net::TcpStream {
    fn peer(&self) -> Peer {
        let addr = self
            .peer_addr()
            .map(|a| a.ip())
            .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
        Peer::Tcp { addr }
    }
}

/// A token bucket per sending process: `rate` reports a second, bursts of twice that.
struct Rates {
    rate: f64,
    buckets: HashMap<u32, (f64, Instant)>,
}

/// Buckets kept before full ones are forgotten (a full bucket is the same as none).
const MAX_BUCKETS: usize = 4096;

impl Rates {
    fn burst(&self) -> f64 {
        2.0 * self.rate
    }

    /// Take one report's token for `pid`, or say how long until there is one.
    fn take(&mut self, pid: u32, now: Instant) -> Result<(), Duration> {
        let (rate, burst) = (self.rate, self.burst());
        let refill = |(tokens, at): (f64, Instant)| {
            (tokens + rate * now.saturating_duration_since(at).as_secs_f64()).min(burst)
        };
        if self.buckets.len() >= MAX_BUCKETS && !self.buckets.contains_key(&pid) {
            self.buckets.retain(|_, b| refill(*b) < burst);
        }
        let b = self.buckets.entry(pid).or_insert((burst, now));
        let tokens = refill(*b);
        if tokens >= 1.0 {
            *b = (tokens - 1.0, now);
            Ok(())
        } else {
            *b = (tokens, now);
            Err(Duration::from_secs_f64((1.0 - tokens) / rate))
        }
    }
}

/// What the ingest endpoints count: accepted reports, the device entries and OOM events that
/// counted only for their process, and refusals by reason.
#[derive(Debug, Default)]
pub struct IngestCounters {
    pub reports: AtomicU64,
    pub unlisted: AtomicU64,
    rejected: [AtomicU64; RejectReason::ALL.len()],
    /// New pids the process table refused or evicted, by kind of sender.
    pub table: TableCounters,
}

impl IngestCounters {
    pub fn reject(&self, reason: RejectReason) {
        self.rejected[reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn rejected(&self, reason: RejectReason) -> u64 {
        self.rejected[reason as usize].load(Ordering::Relaxed)
    }
}

#[derive(Clone)]
pub struct IngestState {
    engine: Arc<Mutex<Engine>>,
    counters: Arc<IngestCounters>,
    clock: Arc<dyn Fn() -> Time + Send + Sync>,
    limits: Arc<IngestConfig>,
    rates: Arc<Mutex<Rates>>,
    /// The process table's places by kind of sender.
    admission: Arc<Mutex<Admission>>,
    /// Pids already warned about reporting on a GPU NVML does not list them on.
    warned: Arc<Mutex<HashSet<u32>>>,
}

impl IngestState {
    pub fn new(
        engine: Arc<Mutex<Engine>>,
        counters: Arc<IngestCounters>,
        clock: Arc<dyn Fn() -> Time + Send + Sync>,
        limits: IngestConfig,
        max_processes: usize,
    ) -> Self {
        IngestState {
            engine,
            counters,
            clock,
            rates: Arc::new(Mutex::new(Rates {
                rate: f64::from(limits.max_reports_per_second),
                buckets: HashMap::new(),
            })),
            admission: Arc::new(Mutex::new(Admission::new(
                limits.max_tcp_processes.min(max_processes),
                limits.max_tcp_processes_per_address,
                limits.expire_after,
            ))),
            limits: Arc::new(limits),
            warned: Arc::new(Mutex::new(HashSet::new())),
        }
    }

    fn warn_unlisted(&self, pid: u32, gpus: &[String]) {
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        if warned.len() >= MAX_BUCKETS {
            warned.clear();
        }
        if warned.insert(pid) {
            tracing::warn!(
                pid,
                gpus = ?gpus,
                "a process has reported for longer than ingest.listing_grace on GPUs NVML does not list it on: its reports count only as its own numbers (is the exporter in the host's pid namespace? see ingest.require_nvml_listing)"
            );
        }
    }
}

fn reject(counters: &IngestCounters, r: Rejection) -> Response {
    counters.reject(r.reason);
    let status = match r.reason {
        RejectReason::Malformed | RejectReason::InvalidValue => StatusCode::BAD_REQUEST,
        RejectReason::UnsupportedVersion => StatusCode::CONFLICT,
        RejectReason::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        RejectReason::ContentType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        RejectReason::UnknownGpu => StatusCode::UNPROCESSABLE_ENTITY,
        RejectReason::TooManyProcesses | RejectReason::RateLimited => StatusCode::TOO_MANY_REQUESTS,
        RejectReason::TooManyConnections => StatusCode::SERVICE_UNAVAILABLE,
        RejectReason::Timeout => StatusCode::REQUEST_TIMEOUT,
    };
    (
        status,
        Json(json!({"error": r.message, "reason": r.reason.as_str()})),
    )
        .into_response()
}

async fn handle_report(
    State(st): State<IngestState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if let Some(ct) = headers.get(header::CONTENT_TYPE) {
        let ct = ct.to_str().unwrap_or("");
        if !ct.to_ascii_lowercase().contains("json") {
            return reject(
                &st.counters,
                Rejection::new(
                    RejectReason::ContentType,
                    format!("content type `{ct}`: send application/json"),
                ),
            );
        }
    }
    let pid = match peer {
        Peer::Unix { pid: Some(pid) } => pid,
        Peer::Unix { pid: None } => {
            return reject(
                &st.counters,
                Rejection::new(
                    RejectReason::Malformed,
                    "the kernel gave no peer pid for this connection",
                ),
            )
        }
        Peer::Tcp { .. } => match headers
            .get(PID_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u32>().ok())
        {
            Some(pid) if pid > 0 => pid,
            _ => {
                return reject(
                    &st.counters,
                    Rejection::new(
                        RejectReason::Malformed,
                        "over TCP the header X-Gpumem-Pid must name the sender's pid",
                    ),
                )
            }
        },
    };
    let limited = st
        .rates
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take(pid, Instant::now());
    if let Err(wait) = limited {
        let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
        let mut r = reject(
            &st.counters,
            Rejection::new(
                RejectReason::RateLimited,
                format!(
                    "pid {pid} sent more than {} reports a second (ingest.max_reports_per_second); retry in {secs} s",
                    st.limits.max_reports_per_second
                ),
            ),
        );
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        return r;
    }
    let max = st.limits.max_body_bytes;
    let bytes =
        match tokio::time::timeout(st.limits.read_timeout, axum::body::to_bytes(body, max)).await {
            Ok(Ok(b)) => b,
            Ok(Err(_)) => {
                return reject(
                    &st.counters,
                    Rejection::new(RejectReason::TooLarge, format!("body over {max} bytes")),
                )
            }
            Err(_) => {
                return reject(
                    &st.counters,
                    Rejection::new(
                        RejectReason::Timeout,
                        format!(
                            "the body did not arrive within {} (ingest.read_timeout)",
                            humantime::format_duration(st.limits.read_timeout)
                        ),
                    ),
                )
            }
        };
    let parsed = match report::parse(&bytes) {
        Ok(r) => r,
        Err(r) => return reject(&st.counters, r),
    };
    let t = (st.clock)();
    match store(&st, peer, pid, t, &parsed) {
        Ok(a) => {
            st.counters.reports.fetch_add(1, Ordering::Relaxed);
            let mut answer = json!({"accepted": true, "pid": pid});
            if !a.unlisted.is_empty() {
                st.counters
                    .unlisted
                    .fetch_add(a.unlisted_items, Ordering::Relaxed);
                if a.unlisted_for > st.limits.listing_grace.as_secs_f64() {
                    st.warn_unlisted(pid, &a.unlisted);
                }
                answer["unlisted"] = json!(a.unlisted);
            }
            (StatusCode::ACCEPTED, Json(answer)).into_response()
        }
        Err(r) => reject(&st.counters, r),
    }
}

/// Store a parsed report within the process table's shares (src/ingest/admission.rs): a TCP
/// pid over its share is refused; a socket peer that finds the table full takes the place of
/// the TCP pid heard from least recently, as many times as its report needs.
fn store(
    st: &IngestState,
    peer: Peer,
    pid: u32,
    t: Time,
    report: &Report,
) -> Result<Applied, Rejection> {
    let now = Instant::now();
    // Taken before the engine's and held across it: admission and storing are one step.
    let mut adm = st.admission.lock().unwrap_or_else(|e| e.into_inner());
    if let Peer::Tcp { addr } = peer {
        if let Err(refusal) = adm.check_tcp(pid, addr, now) {
            let reason = match refusal {
                Refusal::SocketPid => RejectReason::InvalidValue,
                _ => {
                    adm.count(&st.counters.table, Sender::Tcp, Outcome::Refused, 1, now);
                    RejectReason::TooManyProcesses
                }
            };
            return Err(Rejection::new(reason, refusal.message(pid)));
        }
    }
    let mut engine = st.engine.lock().unwrap_or_else(|e| e.into_inner());
    let mut applied = engine.report(pid, t, report);
    if let Peer::Unix { .. } = peer {
        let mut evicted = 0;
        while matches!(&applied, Err(r) if r.reason == RejectReason::TooManyProcesses) {
            let Some(victim) = adm.evict_tcp() else {
                break;
            };
            if engine.forget_reporter(victim) > 0 {
                evicted += 1;
                applied = engine.report(pid, t, report);
            }
        }
        drop(engine);
        if evicted > 0 {
            adm.count(
                &st.counters.table,
                Sender::Tcp,
                Outcome::Evicted,
                evicted,
                now,
            );
        }
        match &applied {
            Ok(_) => adm.heard_socket(pid, now),
            Err(r) if r.reason == RejectReason::TooManyProcesses => {
                adm.count(&st.counters.table, Sender::Socket, Outcome::Refused, 1, now)
            }
            Err(_) => {}
        }
    } else if let Peer::Tcp { addr } = peer {
        drop(engine);
        match &applied {
            Ok(_) => adm.heard_tcp(pid, addr, now),
            // A table full of NVML-listed processes and socket peers: refused all the same.
            Err(r) if r.reason == RejectReason::TooManyProcesses => {
                adm.count(&st.counters.table, Sender::Tcp, Outcome::Refused, 1, now)
            }
            Err(_) => {}
        }
    }
    applied
}

pub fn router(state: IngestState) -> Router {
    Router::new()
        .route(REPORT_PATH, post(handle_report))
        // Our own limit gives a JSON answer and a counter; axum's would give neither.
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(state)
}

/// Serve the ingest endpoint on `listener` until `shutdown` completes, within `budget`: a
/// connection it refuses (every one busy, or its process's share used) is closed at once and
/// counted as `too_many_connections`; a full listener closes its longest idle connection to
/// let a new one in; one that sends no complete request headers within `ingest.idle_timeout`
/// (idle kept-alive ones too) is closed, so that neither many nor slow clients hold the
/// exporter's resources.
pub async fn serve<L>(
    mut listener: L,
    state: IngestState,
    budget: Arc<Budget>,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()>
where
    L: axum::serve::Listener,
    L::Io: PeerStream,
{
    let app = router(state.clone());
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        // The listener waits out accept errors (out of file descriptors) by itself.
        let (io, _) = tokio::select! {
            c = listener.accept() => c,
            _ = &mut shutdown => break,
        };
        let peer = io.peer();
        let pid = match peer {
            Peer::Unix { pid } => pid,
            Peer::Tcp { .. } => None,
        };
        let ticket = match budget.admit(pid) {
            Ok(t) => t,
            Err(why) => {
                state.counters.reject(RejectReason::TooManyConnections);
                tracing::debug!(?peer, ?why, "ingest connection refused");
                continue;
            }
        };
        let app = app
            .clone()
            .map_request(move |mut req: axum::extract::Request<_>| {
                req.extensions_mut().insert(ConnectInfo(peer));
                req
            });
        tokio::spawn(serve_connection(
            io,
            app,
            ticket,
            state.limits.idle_timeout,
            graceful.watcher(),
        ));
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_process_over_its_rate_leaves_the_others_alone() {
        let mut r = Rates {
            rate: 5.0,
            buckets: HashMap::new(),
        };
        let t0 = Instant::now();
        let sent: Vec<bool> = (0..12).map(|_| r.take(1, t0).is_ok()).collect();
        assert_eq!(sent.iter().filter(|ok| **ok).count(), 10, "a burst of 2 s");
        let wait = r.take(1, t0).unwrap_err();
        assert!(wait > Duration::ZERO && wait <= Duration::from_millis(200));
        assert!(r.take(2, t0).is_ok(), "another pid has its own bucket");
        assert!(
            r.take(1, t0 + Duration::from_millis(200)).is_ok(),
            "refilled"
        );
    }

    #[test]
    fn the_rate_table_forgets_full_buckets_rather_than_grow() {
        let mut r = Rates {
            rate: 5.0,
            buckets: HashMap::new(),
        };
        let t0 = Instant::now();
        for pid in 0..MAX_BUCKETS as u32 {
            r.take(pid, t0).unwrap();
        }
        // A second later every bucket is full again: they go when a new pid needs room.
        r.take(u32::MAX, t0 + Duration::from_secs(1)).unwrap();
        assert_eq!(r.buckets.len(), 1);
    }
}
