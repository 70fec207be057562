//! `serve`, the exporter itself: binds the web and ingest endpoints, starts the live runtime's
//! sampler, and stops cleanly on SIGTERM (SIGHUP is logged and ignored).

use std::sync::Arc;
use std::time::Duration;

use crate::config::{parse_listen_address, Config};
use crate::connections::{fit_fd_limit, Budget, ConnectionCounters, Listener};
use crate::exporter::http::{self, WebState};
use crate::exporter::webconfig::WebSecurity;
use crate::ingest::server::{self as ingest, IngestState};
use crate::ingest::socket;
use crate::k8s::pods::KubeResolver;
use crate::pace::Stop;
use crate::runtime::live::{source_clock, spawn_sampler, Shared};
use crate::source::{self, Source};

/// The signals the exporter answers, installed before anything is bound so that none comes
/// too early to be heard.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> std::io::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// Until SIGTERM or SIGINT, then stop. SIGHUP, whose default action would end the exporter
    /// without a word and leave its socket behind, is answered in the log: the configuration
    /// (and the web config file) are read at start only.
    async fn stop_on_signal(mut self, stop: Arc<Stop>) {
        loop {
            tokio::select! {
                _ = self.term.recv() => {
                    tracing::info!("SIGTERM: shutting down");
                    break;
                }
                _ = self.int.recv() => {
                    tracing::info!("SIGINT: shutting down");
                    break;
                }
                _ = self.hup.recv() => tracing::warn!(
                    "SIGHUP ignored: the configuration is read at start only; restart the exporter to change it"
                ),
            }
        }
        stop.set();
    }
}

/// Each listener's connection budget: the web port, the ingest socket and TCP ingest apart, so
/// that a flood on one leaves the others their room; together they fit the open-files limit.
struct Budgets {
    web: Arc<Budget>,
    socket: Arc<Budget>,
    tcp: Arc<Budget>,
}

impl Budgets {
    fn new(cfg: &Config, counters: &Arc<ConnectionCounters>) -> Budgets {
        let (mut web, mut socket) = (cfg.web.max_connections, cfg.ingest.max_connections);
        let mut tcp = cfg.ingest.max_connections;
        let mut sized: Vec<(&'static str, &mut usize)> = vec![("web.max_connections", &mut web)];
        if !cfg.ingest.socket.as_os_str().is_empty() {
            sized.push(("ingest.max_connections (socket)", &mut socket));
        }
        if cfg.ingest.tcp_address().is_some() {
            sized.push(("ingest.max_connections (TCP)", &mut tcp));
        }
        fit_fd_limit(&mut sized);
        let per_process = cfg.ingest.max_connections_per_process;
        let budget = |l, n| Budget::new(l, n, per_process, Arc::clone(counters));
        Budgets {
            web: budget(Listener::Web, web),
            socket: budget(Listener::IngestSocket, socket),
            tcp: budget(Listener::IngestTcp, tcp),
        }
    }
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
    let signals = Signals::install()?;
    let addr = parse_listen_address(&cfg.web.listen_address)
        .map_err(|m| anyhow::anyhow!("web.listen_address: {m}"))?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr} (web.listen_address): {e}"))?;
    let clock = source_clock(&cfg);
    let budgets = Budgets::new(&cfg, &shared.counters.connections);
    let ingest_state = IngestState::new(
        Arc::clone(&shared.engine),
        Arc::clone(&shared.counters.ingest),
        Arc::clone(&clock),
        cfg.ingest.clone(),
        cfg.history.max_processes,
    );
    let mut tasks = tokio::task::JoinSet::new();

    let listeners = Arc::clone(&shared.counters.connections);
    let mut _socket = None;
    if !cfg.ingest.socket.as_os_str().is_empty() {
        let mode = u32::from_str_radix(cfg.ingest.socket_mode.trim_start_matches("0o"), 8)?;
        // A path someone wrote is a path they need: a socket that cannot be bound there stops
        // the start. The default one may be missing where the exporter is not root: metrics
        // matter more than reports, so it degrades, saying loudly what is missing
        // (gpumem_exporter_ingest_up 0). A socket another exporter serves on is a mistake to
        // stop at either way.
        let explicit = cfg.ingest.socket_is_explicit();
        let status = listeners.of(Listener::IngestSocket);
        status.configure(explicit);
        match socket::bind(&cfg.ingest.socket, mode) {
            Ok((l, owned)) => {
                let owned = Arc::new(owned);
                _socket = Some(Arc::clone(&owned));
                status.set_up();
                tracing::info!(socket = %cfg.ingest.socket.display(), "ingest listening");
                let (state, stopped) = (ingest_state.clone(), shared.stop.wait());
                let budget = Arc::clone(&budgets.socket);
                tasks.spawn(async move {
                    ingest::serve(l, state, budget, stopped)
                        .await
                        .map_err(anyhow::Error::from)
                });
                let (listeners, stopped) = (Arc::clone(&listeners), shared.stop.wait());
                tasks.spawn(async move {
                    socket::watch(owned, listeners, stopped).await;
                    Ok(())
                });
            }
            Err(e) if e.is::<socket::SocketInUse>() || explicit => return Err(e),
            Err(e) => {
                tracing::error!(
                    error = %e,
                    "allocator reports are OFF; choose a writable --ingest.socket (e.g. /tmp/gpumem.sock, and GPUMEM_INGEST_SOCKET=/tmp/gpumem.sock for the clients), or --ingest.socket= to silence this"
                );
                status.set_down(format!("{e:#}"));
            }
        }
    }
    if let Some(a) = cfg.ingest.tcp_address() {
        let a =
            parse_listen_address(a).map_err(|m| anyhow::anyhow!("ingest.listen_address: {m}"))?;
        listeners.of(Listener::IngestTcp).configure(true);
        let l = tokio::net::TcpListener::bind(a)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {a} (ingest.listen_address): {e}"))?;
        listeners.of(Listener::IngestTcp).set_up();
        let bound = l.local_addr().unwrap_or(a);
        tracing::warn!(address = %bound, "TCP ingest on: the sender's pid comes from a header, see docs/ingest.md");
        let (stopped, budget) = (shared.stop.wait(), Arc::clone(&budgets.tcp));
        tasks.spawn(async move {
            ingest::serve(l, ingest_state, budget, stopped)
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
        max_series: cfg.web.max_series,
        budget_logged: Arc::default(),
    });
    // The bound address, not the asked one: with port 0 the system picks it, and whoever
    // started the exporter (a test, a supervisor) reads it here.
    let bound = listener.local_addr().unwrap_or(addr);
    tracing::info!(address = %bound, path = %cfg.web.telemetry_path, source = source.kind(), "serving metrics");
    let security = match &cfg.web.config_file {
        // TLS and/or basic auth from the web config file (checked at start by validate).
        Some(path) => {
            let security = crate::exporter::webconfig::load(path)
                .map_err(|e| anyhow::anyhow!("web.config_file: {}: {e}", path.display()))?;
            tracing::info!(
                tls = security.tls.is_some(),
                basic_auth = security.auth.is_some(),
                "web config loaded"
            );
            security
        }
        None => WebSecurity::default(),
    };
    let (stopped, idle) = (shared.stop.wait(), cfg.web.idle_timeout);
    tasks.spawn(async move {
        http::serve(listener, web, security, budgets.web, idle, stopped)
            .await
            .map_err(anyhow::Error::from)
    });

    let sampler = spawn_sampler(shared.clone(), source, cfg.sample_interval, clock, pods);
    signals.stop_on_signal(Arc::clone(&shared.stop)).await;
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
