//! The ingest endpoint: HTTP/1.1 on a Unix socket (pid from SO_PEERCRED) and, optionally,
//! on a loopback TCP address (pid from a header, see docs/ingest.md for what that trusts).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::json;

use super::report::{self, RejectReason, Rejection};
use crate::engine::Engine;
use crate::exporter::families::Counters;
use crate::model::Time;

pub const REPORT_PATH: &str = "/api/v1/report";
pub const PID_HEADER: &str = "x-gpumem-pid";

/// Who sent a request, as far as the transport can tell.
#[derive(Debug, Clone, Copy)]
pub enum Peer {
    /// From the kernel (SO_PEERCRED): trusted.
    Unix { pid: Option<u32> },
    /// TCP: the pid comes from a header anyone can write.
    Tcp,
}

impl
    axum::extract::connect_info::Connected<
        axum::serve::IncomingStream<'_, tokio::net::UnixListener>,
    > for Peer
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, tokio::net::UnixListener>) -> Self {
        let pid = stream
            .io()
            .peer_cred()
            .ok()
            .and_then(|c| c.pid())
            .and_then(|p| u32::try_from(p).ok());
        Peer::Unix { pid }
    }
}

impl
    axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, tokio::net::TcpListener>>
    for Peer
{
    fn connect_info(_: axum::serve::IncomingStream<'_, tokio::net::TcpListener>) -> Self {
        Peer::Tcp
    }
}

#[derive(Clone)]
pub struct IngestState {
    pub engine: Arc<Mutex<Engine>>,
    pub counters: Arc<Counters>,
    pub clock: Arc<dyn Fn() -> Time + Send + Sync>,
    pub max_body_bytes: usize,
}

fn reject(counters: &Counters, r: Rejection) -> Response {
    counters.reject(r.reason);
    let status = match r.reason {
        RejectReason::Malformed | RejectReason::InvalidValue => StatusCode::BAD_REQUEST,
        RejectReason::UnsupportedVersion => StatusCode::CONFLICT,
        RejectReason::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        RejectReason::ContentType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        RejectReason::TooManyProcesses => StatusCode::TOO_MANY_REQUESTS,
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
        Peer::Tcp => match headers
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
    let bytes = match axum::body::to_bytes(body, st.max_body_bytes).await {
        Ok(b) => b,
        Err(_) => {
            return reject(
                &st.counters,
                Rejection::new(
                    RejectReason::TooLarge,
                    format!("body over {} bytes", st.max_body_bytes),
                ),
            )
        }
    };
    let parsed = match report::parse(&bytes) {
        Ok(r) => r,
        Err(r) => return reject(&st.counters, r),
    };
    let t = (st.clock)();
    let applied = {
        let mut engine = st.engine.lock().unwrap_or_else(|e| e.into_inner());
        engine.report(pid, t, &parsed)
    };
    match applied {
        Ok(()) => {
            st.counters
                .ingest_reports
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            (
                StatusCode::ACCEPTED,
                Json(json!({"accepted": true, "pid": pid})),
            )
                .into_response()
        }
        Err(r) => reject(&st.counters, r),
    }
}

pub fn router(state: IngestState) -> Router {
    Router::new()
        .route(REPORT_PATH, post(handle_report))
        // Our own limit gives a JSON answer and a counter; axum's would give neither.
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(state)
}

/// Bind the Unix socket with the configured mode, replacing a stale socket file.
pub fn bind_unix(path: &Path, mode: u32) -> anyhow::Result<tokio::net::UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("ingest.socket: cannot create {}: {e}", dir.display()))?;
    }
    if path.exists() {
        // Only ever remove a socket, never a file someone put there.
        use std::os::unix::fs::FileTypeExt;
        let meta = std::fs::symlink_metadata(path)?;
        if !meta.file_type().is_socket() {
            anyhow::bail!(
                "ingest.socket: {} exists and is not a socket",
                path.display()
            );
        }
        std::fs::remove_file(path)?;
    }
    let l = tokio::net::UnixListener::bind(path)
        .map_err(|e| anyhow::anyhow!("ingest.socket: cannot bind {}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(l)
}

/// Removes the socket file when the server stops.
pub struct SocketGuard(pub PathBuf);

impl Drop for SocketGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
