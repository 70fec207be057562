//! `serve`, the exporter itself: binds the web and ingest endpoints, starts the live runtime's
//! sampler, and stops cleanly on SIGTERM.

use std::sync::Arc;
use std::time::Duration;

use crate::config::{parse_listen_address, Config};
use crate::exporter::http::{self, WebState};
use crate::ingest::server::{self as ingest, IngestState, SocketGuard};
use crate::k8s::pods::KubeResolver;
use crate::pace::Stop;
use crate::runtime::live::{source_clock, spawn_sampler, Shared};
use crate::source::{self, Source};

async fn shutdown_signal(stop: Arc<Stop>) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("install SIGINT handler");
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = int.recv() => tracing::info!("SIGINT: shutting down"),
    }
    stop.set();
}

pub fn run(cfg: Config) -> anyhow::Result<()> {
    let source = source::open(&cfg, source::Reports::AtClientRate)?;
    let shared = Shared::new(&cfg, source.kind());
    let pods = if cfg.kubernetes.enabled() {
        let resolver = KubeResolver::start(&cfg.kubernetes, cfg.nvml.proc_root.clone())
            .map_err(|e| anyhow::anyhow!("kubernetes attribution: {e:#}"))?;
        tracing::info!("pod attribution on");
        Some(resolver)
    } else {
        None
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        // Scrapes are encoded on the blocking pool, whose threads exit after 10 s idle by
        // default: with Prometheus scraping every 15 s or more, every scrape would start a
        // fresh thread. An idle one costs nothing.
        .thread_keep_alive(Duration::from_secs(300))
        .enable_all()
        .build()?;
    rt.block_on(serve(cfg, source, shared, pods))
}

async fn serve(
    cfg: Config,
    source: Box<dyn Source>,
    shared: Shared,
    pods: Option<KubeResolver>,
) -> anyhow::Result<()> {
    let addr = parse_listen_address(&cfg.web.listen_address)
        .map_err(|m| anyhow::anyhow!("web.listen_address: {m}"))?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr} (web.listen_address): {e}"))?;
    let clock = source_clock(&cfg);
    let ingest_state = IngestState::new(
        Arc::clone(&shared.engine),
        Arc::clone(&shared.counters.ingest),
        Arc::clone(&clock),
        cfg.ingest.clone(),
    );
    let mut tasks = tokio::task::JoinSet::new();

    let mut _socket_guard = None;
    if !cfg.ingest.socket.as_os_str().is_empty() {
        let mode = u32::from_str_radix(cfg.ingest.socket_mode.trim_start_matches("0o"), 8)?;
        // Metrics matter more than reports: without the socket (no permission for its folder,
        // say) the exporter still serves, and says loudly what is missing.
        match ingest::bind_unix(&cfg.ingest.socket, mode) {
            Ok(l) => {
                _socket_guard = Some(SocketGuard(cfg.ingest.socket.clone()));
                tracing::info!(socket = %cfg.ingest.socket.display(), "ingest listening");
                let (state, stopped) = (ingest_state.clone(), shared.stop.wait());
                tasks.spawn(async move {
                    ingest::serve(l, state, stopped)
                        .await
                        .map_err(anyhow::Error::from)
                });
            }
            Err(e) => tracing::error!(
                error = %e,
                "allocator reports are OFF; choose a writable --ingest.socket, or --ingest.socket= to silence this"
            ),
        }
    }
    if let Some(a) = cfg.ingest.tcp_address() {
        let a =
            parse_listen_address(a).map_err(|m| anyhow::anyhow!("ingest.listen_address: {m}"))?;
        let l = tokio::net::TcpListener::bind(a)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {a} (ingest.listen_address): {e}"))?;
        let bound = l.local_addr().unwrap_or(a);
        tracing::warn!(address = %bound, "TCP ingest on: the sender's pid comes from a header, see docs/ingest.md");
        let stopped = shared.stop.wait();
        tasks.spawn(async move {
            ingest::serve(l, ingest_state, stopped)
                .await
                .map_err(anyhow::Error::from)
        });
    }

    let web = http::router(WebState {
        engine: Arc::clone(&shared.engine),
        counters: Arc::clone(&shared.counters),
        ready: Arc::clone(&shared.ready),
        telemetry_path: cfg.web.telemetry_path.clone(),
        encoders: Arc::new(tokio::sync::Semaphore::new(http::MAX_CONCURRENT_SCRAPES)),
    });
    // The bound address, not the asked one: with port 0 the system picks it, and whoever
    // started the exporter (a test, a supervisor) reads it here.
    let bound = listener.local_addr().unwrap_or(addr);
    tracing::info!(address = %bound, path = %cfg.web.telemetry_path, source = source.kind(), "serving metrics");
    let stopped = shared.stop.wait();
    match &cfg.web.config_file {
        // TLS and/or basic auth from the web config file (checked at start by validate).
        Some(path) => {
            let security = crate::exporter::webconfig::load(path)
                .map_err(|e| anyhow::anyhow!("web.config_file: {}: {e}", path.display()))?;
            tracing::info!(
                tls = security.tls.is_some(),
                basic_auth = security.auth.is_some(),
                "web config loaded"
            );
            tasks.spawn(async move {
                crate::exporter::webconfig::serve(listener, web, security, stopped)
                    .await
                    .map_err(anyhow::Error::from)
            });
        }
        None => {
            use axum::serve::ListenerExt;
            // A scrape is written in chunks as it is encoded: without TCP_NODELAY, Nagle's
            // algorithm holds the last small segment back for the client's delayed ACK (about
            // 40 ms a scrape), as the web-config server already avoids.
            let listener = listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            tasks.spawn(async move {
                axum::serve(listener, web)
                    .with_graceful_shutdown(stopped)
                    .await
                    .map_err(anyhow::Error::from)
            });
        }
    }

    let sampler = spawn_sampler(shared.clone(), source, cfg.sample_interval, clock, pods);
    shutdown_signal(Arc::clone(&shared.stop)).await;
    // In-flight requests finish; a scrape during shutdown gets a whole answer or none.
    while let Some(r) = tasks.join_next().await {
        if let Ok(Err(e)) = r {
            tracing::warn!(error = %e, "server ended with an error");
        }
    }
    let _ = tokio::task::spawn_blocking(move || sampler.join()).await;
    tracing::info!("stopped");
    Ok(())
}
