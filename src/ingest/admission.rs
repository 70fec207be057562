//! Who may take a place in the process table, by kind of sender.
//!
//! The table (`history.max_processes`) is shared by every sender, but not every sender is who
//! it says it is. A report over the Unix socket carries the pid the kernel gives
//! (`SO_PEERCRED`); one over TCP carries whatever its `X-Gpumem-Pid` header says, so one client
//! can speak for a thousand processes that do not exist. Each kind therefore has its own share:
//!
//! - TCP senders hold at most `ingest.max_tcp_processes` places in all, and at most
//!   `ingest.max_tcp_processes_per_address` from one source address; a new pid over either is
//!   refused (`429 too_many_processes`).
//! - A peer the kernel vouches for is never refused because of TCP senders: when the table is
//!   full it takes the place of the TCP pid heard from least recently.
//! - A TCP report may not speak for a pid that reports over the socket.
//!
//! What was refused or evicted is counted (`gpumem_ingest_process_table_total`) and logged at
//! most once per interval.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often at most the table says in the log what it refused or evicted.
const LOG_INTERVAL: Duration = Duration::from_secs(60);

/// Socket pids remembered at most (so that a TCP report cannot speak for one); the one heard
/// from least recently is forgotten first.
const MAX_SOCKET_PIDS: usize = 65_536;

/// The kinds of sender, as the `sender` label says them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sender {
    /// The Unix socket: the kernel names the pid.
    Socket,
    /// TCP: the pid is the sender's word.
    Tcp,
}

impl Sender {
    pub fn as_str(self) -> &'static str {
        match self {
            Sender::Socket => "socket",
            Sender::Tcp => "tcp",
        }
    }
}

/// What became of a new pid that did not fit: refused, or (a TCP pid) evicted for a socket
/// peer; the `outcome` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Refused,
    Evicted,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Refused => "refused",
            Outcome::Evicted => "evicted",
        }
    }
}

/// The series `/metrics` shows, every one from the start so that `increase()` works from the
/// first event: socket peers are never evicted by this table.
pub const SERIES: [(Sender, Outcome); 3] = [
    (Sender::Socket, Outcome::Refused),
    (Sender::Tcp, Outcome::Refused),
    (Sender::Tcp, Outcome::Evicted),
];

/// The table's counters, read by `/metrics` without the table's lock.
#[derive(Debug, Default)]
pub struct TableCounters([AtomicU64; SERIES.len()]);

impl TableCounters {
    fn slot(sender: Sender, outcome: Outcome) -> usize {
        SERIES
            .iter()
            .position(|s| *s == (sender, outcome))
            .expect("a counted series")
    }

    pub fn add(&self, sender: Sender, outcome: Outcome, n: u64) {
        self.0[Self::slot(sender, outcome)].fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(&self, sender: Sender, outcome: Outcome) -> u64 {
        self.0[Self::slot(sender, outcome)].load(Ordering::Relaxed)
    }
}

/// Why a TCP pid did not get a place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Every place of the TCP share is taken by a pid still reporting.
    Share { max: usize },
    /// This source address already speaks for as many pids as it may.
    Address { addr: IpAddr, max: usize },
    /// The pid reports over the socket, where the kernel vouches for it.
    SocketPid,
}

impl Refusal {
    pub fn message(&self, pid: u32) -> String {
        match self {
            Refusal::Share { max } => format!(
                "TCP senders already hold {max} places in the process table (ingest.max_tcp_processes); pid {pid} gets none until one stops reporting"
            ),
            Refusal::Address { addr, max } => format!(
                "{addr} already reports for {max} pids (ingest.max_tcp_processes_per_address); pid {pid} gets no place until one of them stops reporting"
            ),
            Refusal::SocketPid => format!(
                "pid {pid} reports over the Unix socket, where the kernel vouches for it: a TCP report cannot speak for it"
            ),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct TcpPid {
    addr: IpAddr,
    heard: Instant,
}

#[derive(Debug, Default)]
struct Unlogged {
    last: Option<Instant>,
    tcp_refused: u64,
    tcp_evicted: u64,
    socket_refused: u64,
}

/// The pids each kind of sender holds, and its limits.
pub struct Admission {
    max_tcp: usize,
    max_per_address: usize,
    /// A pid not heard from for this long holds no place (`ingest.expire_after`: its reports
    /// no longer count either).
    stale_after: Duration,
    tcp: HashMap<u32, TcpPid>,
    per_address: HashMap<IpAddr, usize>,
    socket: HashMap<u32, Instant>,
    unlogged: Unlogged,
}

impl Admission {
    pub fn new(max_tcp: usize, max_per_address: usize, stale_after: Duration) -> Self {
        Admission {
            max_tcp: max_tcp.max(1),
            max_per_address: max_per_address.clamp(1, max_tcp.max(1)),
            stale_after,
            tcp: HashMap::new(),
            per_address: HashMap::new(),
            socket: HashMap::new(),
            unlogged: Unlogged::default(),
        }
    }

    /// May `pid`, sent from `addr` over TCP, hold a place? Nothing is taken yet: call
    /// `heard_tcp` once its report is in.
    pub fn check_tcp(&mut self, pid: u32, addr: IpAddr, now: Instant) -> Result<(), Refusal> {
        if self
            .socket
            .get(&pid)
            .is_some_and(|&t| now.saturating_duration_since(t) <= self.stale_after)
        {
            return Err(Refusal::SocketPid);
        }
        if let Some(p) = self.tcp.get(&pid) {
            if p.addr == addr {
                return Ok(());
            }
        }
        // A new pid for this address (or a pid another address held): room in both shares?
        if self.per_address.get(&addr).copied().unwrap_or(0) >= self.max_per_address
            || self.tcp.len() >= self.max_tcp
        {
            self.forget_stale(now);
        }
        if self.per_address.get(&addr).copied().unwrap_or(0) >= self.max_per_address {
            return Err(Refusal::Address {
                addr,
                max: self.max_per_address,
            });
        }
        if self.tcp.len() >= self.max_tcp && !self.tcp.contains_key(&pid) {
            return Err(Refusal::Share { max: self.max_tcp });
        }
        Ok(())
    }

    /// `pid`'s report over TCP from `addr` was stored: it holds its place from now.
    pub fn heard_tcp(&mut self, pid: u32, addr: IpAddr, now: Instant) {
        if let Some(old) = self.tcp.insert(pid, TcpPid { addr, heard: now }) {
            self.release_address(old.addr);
        }
        *self.per_address.entry(addr).or_insert(0) += 1;
    }

    /// A report over the socket from `pid`: TCP may no longer speak for it.
    pub fn heard_socket(&mut self, pid: u32, now: Instant) {
        if self.socket.len() >= MAX_SOCKET_PIDS && !self.socket.contains_key(&pid) {
            let stale = self.stale_after;
            self.socket
                .retain(|_, t| now.saturating_duration_since(*t) <= stale);
            if self.socket.len() >= MAX_SOCKET_PIDS {
                if let Some(oldest) = self.socket.iter().min_by_key(|(_, t)| **t).map(|(p, _)| *p) {
                    self.socket.remove(&oldest);
                }
            }
        }
        self.socket.insert(pid, now);
        // A pid the kernel names is that process, whatever a header said before.
        if let Some(old) = self.tcp.remove(&pid) {
            self.release_address(old.addr);
        }
    }

    /// Give up the place of the TCP pid heard from least recently, for a socket peer; the pid
    /// whose entries the engine should forget, or none when TCP holds no place.
    pub fn evict_tcp(&mut self) -> Option<u32> {
        let (&pid, _) = self.tcp.iter().min_by_key(|(_, p)| p.heard)?;
        let old = self.tcp.remove(&pid).expect("found above");
        self.release_address(old.addr);
        Some(pid)
    }

    fn release_address(&mut self, addr: IpAddr) {
        if let Some(n) = self.per_address.get_mut(&addr) {
            *n -= 1;
            if *n == 0 {
                self.per_address.remove(&addr);
            }
        }
    }

    /// TCP pids not heard from within `stale_after` give their places back.
    fn forget_stale(&mut self, now: Instant) {
        let stale = self.stale_after;
        let gone: Vec<(u32, IpAddr)> = self
            .tcp
            .iter()
            .filter(|(_, p)| now.saturating_duration_since(p.heard) > stale)
            .map(|(pid, p)| (*pid, p.addr))
            .collect();
        for (pid, addr) in gone {
            self.tcp.remove(&pid);
            self.release_address(addr);
        }
    }

    /// Count `n` turned away, and say so in the log at most once per interval.
    pub fn count(
        &mut self,
        counters: &TableCounters,
        sender: Sender,
        outcome: Outcome,
        n: u64,
        now: Instant,
    ) {
        counters.add(sender, outcome, n);
        let u = &mut self.unlogged;
        match (sender, outcome) {
            (Sender::Tcp, Outcome::Refused) => u.tcp_refused += n,
            (Sender::Tcp, Outcome::Evicted) => u.tcp_evicted += n,
            _ => u.socket_refused += n,
        }
        if u.last
            .is_none_or(|t| now.saturating_duration_since(t) >= LOG_INTERVAL)
        {
            tracing::warn!(
                tcp_refused = u.tcp_refused,
                tcp_evicted = u.tcp_evicted,
                socket_refused = u.socket_refused,
                tcp_pids = self.tcp.len(),
                max_tcp_processes = self.max_tcp,
                max_tcp_processes_per_address = self.max_per_address,
                "process table: new TCP pids refused over their share, TCP pids evicted to make room for socket peers (counted in gpumem_ingest_process_table_total)"
            );
            *u = Unlogged {
                last: Some(now),
                ..Unlogged::default()
            };
        }
    }

    #[cfg(test)]
    fn tcp_pids(&self) -> usize {
        self.tcp.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));

    fn admit(a: &mut Admission, pid: u32, addr: IpAddr, now: Instant) -> Result<(), Refusal> {
        a.check_tcp(pid, addr, now)?;
        a.heard_tcp(pid, addr, now);
        Ok(())
    }

    #[test]
    fn one_address_holds_at_most_its_share_and_the_tcp_senders_theirs() {
        let mut a = Admission::new(6, 4, Duration::from_secs(30));
        let t0 = Instant::now();
        for pid in 1..=4 {
            admit(&mut a, pid, A, t0).unwrap();
        }
        assert_eq!(
            admit(&mut a, 5, A, t0),
            Err(Refusal::Address { addr: A, max: 4 })
        );
        // A pid it holds keeps its place, however often it reports.
        admit(&mut a, 3, A, t0).unwrap();
        admit(&mut a, 5, B, t0).unwrap();
        admit(&mut a, 6, B, t0).unwrap();
        assert_eq!(admit(&mut a, 7, B, t0), Err(Refusal::Share { max: 6 }));
        // Pids that stopped reporting give their places back.
        let later = t0 + Duration::from_secs(31);
        admit(&mut a, 7, B, later).unwrap();
        admit(&mut a, 8, A, later).unwrap();
        assert_eq!(a.tcp_pids(), 2);
    }

    #[test]
    fn the_tcp_pid_heard_from_least_recently_goes_first_and_a_socket_pid_is_not_tcp_s() {
        let mut a = Admission::new(10, 10, Duration::from_secs(30));
        let t0 = Instant::now();
        for pid in 1..=3 {
            admit(&mut a, pid, A, t0 + Duration::from_secs(u64::from(pid))).unwrap();
        }
        // Pid 1 reports again: 2 is now the one heard from least recently.
        admit(&mut a, 1, A, t0 + Duration::from_secs(5)).unwrap();
        assert_eq!(a.evict_tcp(), Some(2));
        assert_eq!(a.evict_tcp(), Some(3));
        assert_eq!(a.evict_tcp(), Some(1));
        assert_eq!(a.evict_tcp(), None);

        a.heard_socket(42, t0);
        assert_eq!(a.check_tcp(42, A, t0), Err(Refusal::SocketPid));
        // A pid TCP held and the kernel then named is the socket's.
        admit(&mut a, 43, A, t0).unwrap();
        a.heard_socket(43, t0);
        assert_eq!(a.tcp_pids(), 0);
        assert_eq!(a.per_address.get(&A), None, "its address place given back");
    }

    #[test]
    fn every_refusal_and_eviction_is_counted() {
        let mut a = Admission::new(10, 10, Duration::from_secs(30));
        let c = TableCounters::default();
        let t0 = Instant::now();
        a.count(&c, Sender::Tcp, Outcome::Refused, 3, t0);
        a.count(&c, Sender::Tcp, Outcome::Refused, 2, t0);
        a.count(&c, Sender::Tcp, Outcome::Evicted, 1, t0);
        assert_eq!(c.get(Sender::Tcp, Outcome::Refused), 5);
        assert_eq!(c.get(Sender::Tcp, Outcome::Evicted), 1);
        assert_eq!(c.get(Sender::Socket, Outcome::Refused), 0);
        // Logged once for the interval: the rest waits, counted.
        assert_eq!(a.unlogged.tcp_refused, 2);
    }
}
