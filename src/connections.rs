//! Connection budgets, and the one function that serves an HTTP/1.1 connection.
//!
//! Every listener (the web port, the ingest socket, TCP ingest) has a budget of its own, so
//! that a flood on one cannot starve another, and together they fit the file descriptor limit
//! (`fit_fd_limit`). A full listener makes room by closing its connection that has waited
//! longest for a request (a connection is idle from its accept, and again after each answer,
//! until its next request's headers are in) rather than by refusing the newcomer: a flood of
//! idle connections then pushes out only itself, while a scraper or a client that sends its
//! request at once still gets in. A newcomer is refused only when every connection is in the
//! middle of a request, or its process already holds its own share (ingest socket).

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::response::Response;
use hyper::body::Incoming;
use tokio::sync::oneshot;
use tower::ServiceExt;

/// The listeners, each with its own budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    Web,
    IngestSocket,
    IngestTcp,
}

impl Listener {
    pub const ALL: [Listener; 3] = [Listener::Web, Listener::IngestSocket, Listener::IngestTcp];

    /// The `listener` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Listener::Web => "web",
            Listener::IngestSocket => "ingest_socket",
            Listener::IngestTcp => "ingest_tcp",
        }
    }

    /// The setting that sizes its budget.
    pub fn setting(self) -> &'static str {
        match self {
            Listener::Web => "web.max_connections",
            Listener::IngestSocket | Listener::IngestTcp => "ingest.max_connections",
        }
    }
}

/// Open and shed connections of one listener, for `/metrics`, and whether it listens.
#[derive(Debug, Default)]
pub struct ListenerCounters {
    pub open: AtomicU64,
    pub shed: AtomicU64,
    /// `NOT_CONFIGURED`, `DOWN` or `UP`.
    state: AtomicU8,
    /// Configured explicitly: readiness fails while it is down.
    required: AtomicBool,
    /// Why it is down, for the readiness answer.
    why_down: Mutex<String>,
}

const NOT_CONFIGURED: u8 = 0;
const DOWN: u8 = 1;
const UP: u8 = 2;

impl ListenerCounters {
    /// The listener is configured (not yet listening); `required`: readiness waits for it.
    pub fn configure(&self, required: bool) {
        self.required.store(required, Ordering::Relaxed);
        self.set_down("not bound yet".into());
    }

    pub fn set_up(&self) {
        self.state.store(UP, Ordering::Release);
    }

    pub fn set_down(&self, why: String) {
        *locked(&self.why_down) = why;
        self.state.store(DOWN, Ordering::Release);
    }

    /// Whether it listens; `None` for a listener that is not configured.
    pub fn up(&self) -> Option<bool> {
        match self.state.load(Ordering::Acquire) {
            NOT_CONFIGURED => None,
            s => Some(s == UP),
        }
    }

    /// Why readiness fails because of this listener: it was configured explicitly and is down.
    pub fn required_but_down(&self) -> Option<String> {
        (self.required.load(Ordering::Relaxed) && self.up() == Some(false))
            .then(|| locked(&self.why_down).clone())
    }
}

/// Every listener's counters.
#[derive(Debug, Default)]
pub struct ConnectionCounters([ListenerCounters; 3]);

impl ConnectionCounters {
    pub fn of(&self, l: Listener) -> &ListenerCounters {
        &self.0[l as usize]
    }
}

/// How often at most a listener logs that it sheds connections.
const SHED_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// One open connection.
struct Conn {
    pid: Option<u32>,
    /// Requests in flight, from their headers to the end of their answer.
    busy: usize,
    /// Key in `Table::idle` while no request is in flight.
    idle_key: Option<u64>,
    /// Fired when the connection is closed to make room.
    close: Option<oneshot::Sender<()>>,
}

#[derive(Default)]
struct Table {
    conns: HashMap<u64, Conn>,
    per_pid: HashMap<u32, usize>,
    /// Idle connections, longest idle first: key → connection id.
    idle: BTreeMap<u64, u64>,
    next: u64,
}

impl Table {
    fn key(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// Take a connection out of the table, giving back its place in the budget.
    fn remove(&mut self, id: u64) -> Option<Conn> {
        let c = self.conns.remove(&id)?;
        if let Some(k) = c.idle_key {
            self.idle.remove(&k);
        }
        if let Some(pid) = c.pid {
            if let Some(n) = self.per_pid.get_mut(&pid) {
                *n -= 1;
                if *n == 0 {
                    self.per_pid.remove(&pid);
                }
            }
        }
        Some(c)
    }
}

#[derive(Default)]
struct ShedLog {
    last: Option<Instant>,
    unlogged: u64,
}

/// The connections of one listener: at most `max` open, at most `max_per_process` of them from
/// one process where the kernel names the peer's pid (the ingest socket).
pub struct Budget {
    listener: Listener,
    max: usize,
    max_per_process: usize,
    counters: Arc<ConnectionCounters>,
    table: Mutex<Table>,
    log: Mutex<ShedLog>,
}

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Every connection of the listener is in the middle of a request.
    Full,
    /// The process already holds `max_per_process` connections.
    PerProcess,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Budget {
    pub fn new(
        listener: Listener,
        max: usize,
        max_per_process: usize,
        counters: Arc<ConnectionCounters>,
    ) -> Arc<Budget> {
        Arc::new(Budget {
            listener,
            max: max.max(1),
            max_per_process: max_per_process.max(1),
            counters,
            table: Mutex::new(Table::default()),
            log: Mutex::new(ShedLog::default()),
        })
    }

    pub fn listener(&self) -> Listener {
        self.listener
    }

    pub fn max(&self) -> usize {
        self.max
    }

    /// Admit a connection just accepted (from `pid`, where the kernel says), closing the
    /// longest idle one if the listener is full; or refuse it.
    pub fn admit(self: &Arc<Self>, pid: Option<u32>) -> Result<Ticket, Refused> {
        let mut t = locked(&self.table);
        if let Some(pid) = pid {
            if t.per_pid.get(&pid).copied().unwrap_or(0) >= self.max_per_process {
                drop(t);
                self.shed(1);
                return Err(Refused::PerProcess);
            }
        }
        if t.conns.len() >= self.max {
            let oldest = t.idle.first_key_value().map(|(_, id)| *id);
            let Some(victim) = oldest.and_then(|id| t.remove(id)) else {
                drop(t);
                self.shed(1);
                return Err(Refused::Full);
            };
            if let Some(close) = victim.close {
                let _ = close.send(());
            }
            self.shed(1);
        }
        let id = t.key();
        let idle_key = t.key();
        let (close, closed) = oneshot::channel();
        t.conns.insert(
            id,
            Conn {
                pid,
                busy: 0,
                idle_key: Some(idle_key),
                close: Some(close),
            },
        );
        t.idle.insert(idle_key, id);
        if let Some(pid) = pid {
            *t.per_pid.entry(pid).or_insert(0) += 1;
        }
        self.set_open(&t);
        Ok(Ticket {
            slot: Slot {
                budget: Arc::clone(self),
                id,
            },
            closed,
        })
    }

    fn set_open(&self, t: &Table) {
        self.counters
            .of(self.listener)
            .open
            .store(t.conns.len() as u64, Ordering::Relaxed);
    }

    /// Count `n` connections shed, and say so in the log at most once per interval.
    fn shed(&self, n: u64) {
        self.counters
            .of(self.listener)
            .shed
            .fetch_add(n, Ordering::Relaxed);
        let mut log = locked(&self.log);
        log.unlogged += n;
        if log.last.is_none_or(|t| t.elapsed() >= SHED_LOG_INTERVAL) {
            tracing::warn!(
                listener = self.listener.as_str(),
                shed = log.unlogged,
                max = self.max,
                setting = self.listener.setting(),
                "connections shed to keep the listener within its budget"
            );
            log.unlogged = 0;
            log.last = Some(Instant::now());
        }
    }
}

/// A connection's place in its budget, and how it learns that it was closed to make room.
/// Dropping it gives the place back.
pub struct Ticket {
    slot: Slot,
    closed: oneshot::Receiver<()>,
}

impl Ticket {
    /// Resolves when the budget closed this connection to make room for a newer one.
    pub async fn closed(&mut self) {
        let _ = (&mut self.closed).await;
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let b = &self.slot.budget;
        let mut t = locked(&b.table);
        t.remove(self.slot.id);
        b.set_open(&t);
    }
}

/// A handle on a connection's entry, for marking requests in flight.
#[derive(Clone)]
struct Slot {
    budget: Arc<Budget>,
    id: u64,
}

impl Slot {
    /// A request is in flight until the guard is dropped (with the end of its answer).
    fn busy(&self) -> Busy {
        let mut t = locked(&self.budget.table);
        if let Some(c) = t.conns.get_mut(&self.id) {
            c.busy += 1;
            if let Some(k) = c.idle_key.take() {
                t.idle.remove(&k);
            }
        }
        Busy(self.clone())
    }
}

struct Busy(Slot);

impl Drop for Busy {
    fn drop(&mut self) {
        let mut t = locked(&self.0.budget.table);
        let key = t.key();
        let Some(c) = t.conns.get_mut(&self.0.id) else {
            return;
        };
        c.busy -= 1;
        if c.busy == 0 {
            c.idle_key = Some(key);
            t.idle.insert(key, self.0.id);
        }
    }
}

/// An answer's body that keeps its request in flight until it is sent or dropped.
struct BusyBody {
    inner: Body,
    _busy: Busy,
}

impl http_body::Body for BusyBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Serve one admitted connection: HTTP/1.1, the request headers within `header_timeout`
/// (on an idle kept-alive connection too), until the client goes, `graceful` shuts down, or
/// the budget closes it to make room.
pub async fn serve_connection<I, S>(
    io: I,
    app: S,
    mut ticket: Ticket,
    header_timeout: Duration,
    graceful: hyper_util::server::graceful::Watcher,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    S: tower::Service<Request<Incoming>, Response = Response, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let slot = ticket.slot.clone();
    let svc = tower::service_fn(move |req: Request<Incoming>| {
        let busy = slot.busy();
        let answer = app.clone().oneshot(req);
        async move {
            let res = answer.await?;
            Ok::<_, Infallible>(res.map(|inner| Body::new(BusyBody { inner, _busy: busy })))
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(header_timeout)
        .serve_connection(
            hyper_util::rt::TokioIo::new(io),
            hyper_util::service::TowerToHyperService::new(svc),
        );
    let listener = ticket.slot.budget.listener.as_str();
    tokio::select! {
        r = graceful.watch(conn) => if let Err(e) = r {
            tracing::debug!(listener, error = %e, "connection ended with an error");
        },
        () = ticket.closed() => tracing::debug!(listener, "idle connection closed to make room"),
    }
}

/// File descriptors kept for everything but connections: the listeners, NVML's device files,
/// `/proc` reads, the Kubernetes API, the runtime's own.
pub const RESERVED_FDS: u64 = 256;

/// Make room for every listener's connections in the open-files limit: raise the soft limit
/// as far as the budgets need (never above the hard limit), and where even the hard limit is
/// too low, shrink the budgets in proportion, saying so. Out of descriptors, a server can
/// accept nothing at all, not even the scrape that would show why.
pub fn fit_fd_limit(budgets: &mut [(&'static str, &mut usize)]) {
    let asked: u64 = budgets
        .iter()
        .fold(0u64, |sum, (_, n)| sum.saturating_add(**n as u64));
    let wanted = asked.saturating_add(RESERVED_FDS);
    let limit = match raise_nofile(wanted) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the open-files limit; connection budgets left as configured");
            return;
        }
    };
    if limit >= wanted {
        return;
    }
    let room = limit.saturating_sub(RESERVED_FDS).max(budgets.len() as u64);
    for (setting, n) in budgets.iter_mut() {
        let fitted = ((**n as u128 * room as u128) / asked as u128).max(1) as usize;
        tracing::warn!(
            setting = *setting,
            configured = **n,
            now = fitted,
            open_files_limit = limit,
            "the open-files limit is too low for the connection budgets: lowered to fit (raise the hard limit, e.g. LimitNOFILE= or ulimit -Hn)"
        );
        **n = fitted;
    }
}

/// Raise RLIMIT_NOFILE's soft limit towards `wanted`, up to the hard limit; the soft limit now.
fn raise_nofile(wanted: u64) -> std::io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let cur = lim.rlim_cur;
    if cur >= wanted {
        return Ok(cur);
    }
    let target = if lim.rlim_max == libc::RLIM_INFINITY {
        wanted
    } else {
        wanted.min(lim.rlim_max)
    };
    if target > cur {
        lim.rlim_cur = target as libc::rlim_t;
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        tracing::debug!(from = cur, to = target, "open-files soft limit raised");
    }
    Ok(target.max(cur))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(max: usize, per_process: usize) -> (Arc<Budget>, Arc<ConnectionCounters>) {
        let c = Arc::new(ConnectionCounters::default());
        (
            Budget::new(Listener::IngestSocket, max, per_process, Arc::clone(&c)),
            c,
        )
    }

    fn open(c: &ConnectionCounters) -> (u64, u64) {
        let l = c.of(Listener::IngestSocket);
        (
            l.open.load(Ordering::Relaxed),
            l.shed.load(Ordering::Relaxed),
        )
    }

    #[test]
    fn a_full_listener_closes_its_longest_idle_connection_for_a_newcomer() {
        let (b, c) = budget(3, 3);
        let mut first = b.admit(None).unwrap();
        let second = b.admit(None).unwrap();
        let third = b.admit(None).unwrap();
        // The first is in the middle of a request: the second has been idle longest.
        let busy = first.slot.busy();
        let mut second = second;
        let fourth = b.admit(None).unwrap();
        assert!(
            second.closed.try_recv().is_ok(),
            "the longest idle one goes"
        );
        assert!(first.closed.try_recv().is_err(), "a busy one stays");
        assert_eq!(open(&c), (3, 1));
        // Its answer sent, the first is idle again, but newer than the third.
        drop(busy);
        let mut third = third;
        let _fifth = b.admit(None).unwrap();
        assert!(third.closed.try_recv().is_ok());
        assert!(first.closed.try_recv().is_err());
        drop(second);
        assert_eq!(open(&c), (3, 2), "a closed ticket is not given back twice");
        drop((first, third, fourth));
        assert_eq!(open(&c).0, 1);
    }

    #[test]
    fn a_newcomer_is_refused_only_when_every_connection_is_busy() {
        let (b, c) = budget(2, 2);
        let t1 = b.admit(None).unwrap();
        let t2 = b.admit(None).unwrap();
        let g = (t1.slot.busy(), t2.slot.busy());
        assert_eq!(b.admit(None).err(), Some(Refused::Full));
        assert_eq!(open(&c), (2, 1));
        drop(g);
        assert!(b.admit(None).is_ok());
    }

    #[test]
    fn connections_are_capped_per_process_and_given_back() {
        let (b, c) = budget(4, 2);
        let a = (b.admit(Some(7)).unwrap(), b.admit(Some(7)).unwrap());
        assert_eq!(b.admit(Some(7)).err(), Some(Refused::PerProcess));
        let other = b.admit(Some(8)).unwrap();
        drop(a);
        let again = b.admit(Some(7)).unwrap();
        drop((other, again));
        assert_eq!(open(&c).0, 0);
        let t = locked(&b.table);
        assert!(
            t.per_pid.is_empty() && t.idle.is_empty(),
            "nothing left behind"
        );
    }

    #[test]
    fn the_budgets_fit_the_open_files_limit() {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
        let hard = if lim.rlim_max == libc::RLIM_INFINITY {
            u64::MAX
        } else {
            lim.rlim_max
        };
        let (mut web, mut socket) = (64usize, 64usize);
        fit_fd_limit(&mut [("a", &mut web), ("b", &mut socket)]);
        if hard >= 128 + RESERVED_FDS {
            assert_eq!((web, socket), (64, 64));
            unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
            assert!(lim.rlim_cur >= 128 + RESERVED_FDS, "soft limit raised");
        }
        // Far more than any hard limit allows: shrunk in proportion, never to nothing.
        let (mut web, mut socket) = (usize::MAX / 8, usize::MAX / 8);
        fit_fd_limit(&mut [("a", &mut web), ("b", &mut socket)]);
        assert!(web >= 1 && web == socket, "{web} {socket}");
        assert!((web as u64) < u64::MAX / 16);
    }
}
