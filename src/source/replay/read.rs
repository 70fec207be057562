//! Reading a trace: every line checked (its size, its UTF-8, its JSON, its time and its order
//! in its stream), a file read through once before it is replayed, gzip or plain, cut short or
//! whole.

use super::*;

/// The longest line a trace may hold. Recorded lines are under a kilobyte (a header with a
/// long command line, a sample of a GPU with hundreds of processes: tens of kilobytes); a longer
/// one is not a recording, and reading it whole would take as much memory as it is long.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// How far from its start a trace's times may lie, and how long the traces of one replay may
/// span together: 7 days. Replay steps through every second of trace time (a day of an idle
/// GPU takes about 5 s on one core of a release build), so a time of 1e12 would run for
/// millennia; recordings for a bug report last minutes to hours.
pub const MAX_TRACE_SECONDS: f64 = 7.0 * 86_400.0;

/// How far behind the newest line of its trace a line may lie. A trace holds up to three
/// streams, each in time order: NVML samples (written by the recorder), allocator samples and
/// events (written inside the process). A recording cut short before the recorder tidied it
/// has them interleaved a little late (a tick, or the lines a process wrote before its GPU was
/// known). Replay reads this far ahead of what it hands on and keeps no more than that in
/// memory, so memory follows this window, not the file's length.
pub const REORDER_WINDOW_SECONDS: f64 = 60.0;

/// What replay does with a trace whose lines are out of time order or repeated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Disorder {
    /// Refuse it, naming the file and line (the default: such a trace is not a recording).
    #[default]
    Refuse,
    /// Sort each such trace by time and drop repeated lines, with a warning that counts them
    /// (`--replay.sort`). The trace is then held in memory whole.
    Sort,
}

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    // Not a `source` field: the message already carries it, and `{:#}` would print it twice.
    #[error("{path}: {error}")]
    Io { path: String, error: std::io::Error },
    #[error("{path}:{line}: {message}")]
    Parse {
        path: String,
        line: usize,
        message: String,
    },
    #[error("{0}")]
    Span(String),
}

/// One line's item, and where it was.
pub(super) struct Read {
    pub(super) line: usize,
    pub(super) t: f64,
    pub(super) item: Item,
}

/// A trace read line by line: the header first, then one item at a time.
///
/// A last line without its newline that does not parse is what a recorder killed mid-write
/// leaves: it is dropped, and the trace up to it replays. So is the end of a gzip stream cut
/// short (a `.jsonl.gz` copied while it was written, or cut by a crash): what it held
/// replays. Both say so with the same warning. Anywhere else a malformed line is an error that
/// names it.
pub(super) struct Lines<R> {
    pub(super) reader: R,
    pub(super) name: String,
    pub(super) line: usize,
    pub(super) raw: Vec<u8>,
    pub(super) header: Header,
    pub(super) ended: bool,
    /// Say in the log that the trace was cut short (the first of several reads does).
    pub(super) warn: bool,
}

impl<R: BufRead> Lines<R> {
    pub(super) fn new(mut reader: R, name: &str, warn: bool) -> Result<Self, TraceError> {
        let mut line = 0;
        let mut raw = Vec::new();
        loop {
            let (read, cut) = read_line(&mut reader, &mut raw, name, line + 1)?;
            if read == 0 && !cut {
                return Err(TraceError::Parse {
                    path: name.into(),
                    line: 0,
                    message: "empty trace: no header".into(),
                });
            }
            line += 1;
            let text = utf8(&raw, name, line)?;
            if text.trim().is_empty() {
                if cut {
                    return Err(TraceError::Parse {
                        path: name.into(),
                        line: 0,
                        message: "empty trace: no header".into(),
                    });
                }
                continue;
            }
            let parsed: Line =
                serde_json::from_str(text.trim_end_matches(['\n', '\r'])).map_err(|e| {
                    TraceError::Parse {
                        path: name.into(),
                        line,
                        message: e.to_string(),
                    }
                })?;
            let Line::Header(h) = parsed else {
                return Err(TraceError::Parse {
                    path: name.into(),
                    line,
                    message: "the first line must be the header".into(),
                });
            };
            for (field, v) in [("t0_unix", h.t0_unix), ("start_offset_s", h.start_offset_s)] {
                if v.is_some_and(|v| !v.is_finite()) {
                    return Err(TraceError::Parse {
                        path: name.into(),
                        line,
                        message: format!("{field} is not a finite number"),
                    });
                }
            }
            return Ok(Lines {
                reader,
                name: name.into(),
                line,
                raw,
                header: h,
                ended: cut,
                warn,
            });
        }
    }

    fn cut_short(&mut self) -> Option<Read> {
        self.ended = true;
        if self.warn {
            tracing::warn!(
                trace = %self.name,
                line = self.line,
                "the trace ends cut short (a recorder killed mid-write?): it replays up to its last whole line"
            );
        }
        None
    }

    /// The next item, or `None` at the end.
    pub(super) fn next(&mut self) -> Result<Option<Read>, TraceError> {
        loop {
            if self.ended {
                return Ok(None);
            }
            let (n, cut) = read_line(&mut self.reader, &mut self.raw, &self.name, self.line + 1)?;
            if n == 0 {
                return Ok(if cut { self.cut_short() } else { None });
            }
            self.line += 1;
            let line = self.line;
            let bad = |message: String| TraceError::Parse {
                path: self.name.clone(),
                line,
                message,
            };
            let buf = utf8(&self.raw, &self.name, line)?;
            let whole = buf.ends_with('\n') && !cut;
            let text = buf.trim_end_matches(['\n', '\r']);
            if text.trim().is_empty() {
                if cut {
                    return Ok(self.cut_short());
                }
                continue;
            }
            let parsed: Line = match serde_json::from_str(text) {
                Ok(l) => l,
                Err(_) if !whole => {
                    self.line -= 1;
                    return Ok(self.cut_short());
                }
                Err(e) => return Err(bad(e.to_string())),
            };
            let read = match parsed {
                Line::Header(_) => return Err(bad("a second header".into())),
                Line::Sample { t, nvml, torch } => {
                    check_time(t).map_err(|m| bad(format!("sample time {m}")))?;
                    Read {
                        line,
                        t,
                        item: Item::Sample { nvml, torch },
                    }
                }
                Line::Event {
                    t,
                    name,
                    error,
                    request_bytes,
                    device_free,
                } => {
                    check_time(t).map_err(|m| bad(format!("event time {m}")))?;
                    Read {
                        line,
                        t,
                        item: Item::Event {
                            name,
                            message: error,
                            request_bytes,
                            device_free,
                        },
                    }
                }
            };
            if cut {
                // The last line whole before the stream broke off: it counts, then the end.
                self.cut_short();
            }
            return Ok(Some(read));
        }
    }
}

/// Read one line into `raw` (cleared first), never more than `MAX_LINE_BYTES` of it. `cut`:
/// the input broke off (a gzip stream cut short) after what `raw` holds.
pub(super) fn read_line(
    reader: &mut impl BufRead,
    raw: &mut Vec<u8>,
    name: &str,
    line: usize,
) -> Result<(usize, bool), TraceError> {
    raw.clear();
    // Never more than one line over the limit in memory, however long the line.
    let read = reader
        .take(MAX_LINE_BYTES as u64 + 1)
        .read_until(b'\n', raw);
    let (n, cut) = match read {
        Ok(n) => (n, false),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => (raw.len(), true),
        Err(e) => {
            return Err(TraceError::Parse {
                path: name.into(),
                line,
                message: e.to_string(),
            })
        }
    };
    if raw.len() > MAX_LINE_BYTES {
        return Err(TraceError::Parse {
            path: name.into(),
            line,
            message: format!(
                "the line is longer than {} MiB; a recording's lines are far shorter",
                MAX_LINE_BYTES >> 20
            ),
        });
    }
    Ok((n, cut))
}

pub(super) fn utf8<'a>(raw: &'a [u8], name: &str, line: usize) -> Result<&'a str, TraceError> {
    std::str::from_utf8(raw).map_err(|e| TraceError::Parse {
        path: name.into(),
        line,
        message: format!("not UTF-8: {e}"),
    })
}

/// A sample's or event's time: seconds since its trace started, within `MAX_TRACE_SECONDS`.
pub(super) fn check_time(t: f64) -> Result<(), String> {
    if !t.is_finite() {
        return Err("is not a finite number".into());
    }
    if t.abs() > MAX_TRACE_SECONDS {
        return Err(format!(
            "{t} is out of range; accepted: seconds since the trace started, within ±{} days",
            MAX_TRACE_SECONDS / 86_400.0
        ));
    }
    Ok(())
}

/// The time order of one trace's lines: each stream (NVML samples, allocator samples, events)
/// forward in time, a sample's time never twice in its stream nor an event twice at one time,
/// and no line more than `REORDER_WINDOW_SECONDS` behind the newest before it.
#[derive(Default)]
pub(super) struct Order {
    pub(super) nvml: Option<(f64, usize)>,
    pub(super) torch: Option<(f64, usize)>,
    pub(super) event: Option<(f64, usize, String)>,
    pub(super) newest: Option<(f64, usize)>,
    /// Lines out of time order, and lines repeated, seen so far.
    pub(super) backwards: u64,
    pub(super) repeated: u64,
}

impl Order {
    /// Where `r` breaks the order, in words (counted), or `None`.
    fn check(&mut self, r: &Read) -> Option<String> {
        let t = r.t;
        let mut broken = None;
        let mut stream = |prev: &mut Option<(f64, usize)>, what: &str| match *prev {
            Some((pt, pl)) if t < pt => {
                broken.get_or_insert((
                    false,
                    format!("{what} time {t} goes back from {pt} (line {pl})"),
                ));
            }
            Some((pt, pl)) if t == pt => {
                broken.get_or_insert((
                    true,
                    format!("{what} time {t} repeats line {pl}'s (a sample written twice?)"),
                ));
            }
            _ => *prev = Some((t, r.line)),
        };
        match &r.item {
            Item::Sample { nvml, torch } => {
                if nvml.is_some() || torch.is_none() {
                    stream(&mut self.nvml, "sample");
                }
                if torch.is_some() {
                    stream(&mut self.torch, "allocator sample");
                }
            }
            Item::Event { name, .. } => match &self.event {
                Some((pt, pl, _)) if t < *pt => {
                    broken = Some((
                        false,
                        format!("event time {t} goes back from {pt} (line {pl})"),
                    ));
                }
                Some((pt, pl, pn)) if t == *pt && pn == name => {
                    broken = Some((
                        true,
                        format!(
                            "event `{name}` at {t} repeats line {pl} (an event written twice?)"
                        ),
                    ));
                }
                _ => self.event = Some((t, r.line, name.clone())),
            },
        }
        if broken.is_none() {
            match self.newest {
                Some((nt, nl)) if t < nt - REORDER_WINDOW_SECONDS => {
                    broken = Some((
                        false,
                        format!(
                            "time {t} lies {:.1} s before line {nl}'s ({nt}); the lines of a trace may be out of order by at most {REORDER_WINDOW_SECONDS} s between its samples and its events",
                            nt - t
                        ),
                    ));
                }
                Some((nt, _)) if nt >= t => {}
                _ => self.newest = Some((t, r.line)),
            }
        }
        let (repeat, why) = broken?;
        if repeat {
            self.repeated += 1;
        } else {
            self.backwards += 1;
        }
        Some(why)
    }

    fn broken(&self) -> bool {
        self.backwards + self.repeated > 0
    }
}

/// Sort `items` by time (lines of one time keep their file order) and drop the repeated ones:
/// a sample at the time of one already kept with the same parts, an event of the same name at
/// the same time. How many were dropped.
pub(super) fn sort_and_dedup(items: &mut Vec<(f64, Item)>) -> u64 {
    items.sort_by(|a, b| a.0.total_cmp(&b.0));
    let key = |item: &Item| match item {
        Item::Sample { nvml, torch } => (0u8, nvml.is_some(), torch.is_some(), String::new()),
        Item::Event { name, .. } => (1, false, false, name.clone()),
    };
    let before = items.len();
    let mut kept: Vec<(f64, Item)> = Vec::with_capacity(items.len());
    let mut group_start = 0;
    for (t, item) in items.drain(..) {
        if kept.last().is_some_and(|(lt, _)| *lt != t) {
            group_start = kept.len();
        }
        let k = key(&item);
        if !kept[group_start..].iter().any(|(_, i)| key(i) == k) {
            kept.push((t, item));
        }
    }
    *items = kept;
    (before - items.len()) as u64
}

/// What reading a trace through found: its header, the first and last times, its OOM events,
/// and, for a trace that had to be sorted, its items.
pub(super) struct Scan {
    pub(super) header: Header,
    pub(super) span: Option<(f64, f64)>,
    /// (time, line, item) of each `oom` event.
    pub(super) ooms: Vec<(f64, usize, Item)>,
    pub(super) sorted: Option<Vec<(f64, Item)>>,
}

pub(super) type Reader = Box<dyn BufRead + Send>;

/// Open a trace file for reading; a name ending in `.gz` is gunzipped (recordings attached to
/// bug reports are often compressed), every gzip member of it.
pub(super) fn open_file(path: &Path) -> Result<Reader, TraceError> {
    let f = std::fs::File::open(path).map_err(|e| TraceError::Io {
        path: path.display().to_string(),
        error: e,
    })?;
    Ok(if path.extension().is_some_and(|e| e == "gz") {
        Box::new(std::io::BufReader::new(flate2::read::MultiGzDecoder::new(
            f,
        )))
    } else {
        Box::new(std::io::BufReader::new(f))
    })
}

/// Read a trace file through once, checking every line and its time order.
pub(super) fn scan(path: &Path, disorder: Disorder) -> Result<Scan, TraceError> {
    let name = path.display().to_string();
    let mut lines = Lines::new(open_file(path)?, &name, true)?;
    let mut order = Order::default();
    let mut span: Option<(f64, f64)> = None;
    let mut ooms = Vec::new();
    while let Some(r) = lines.next()? {
        if let Some(why) = order.check(&r) {
            if disorder == Disorder::Refuse {
                return Err(TraceError::Parse {
                    path: name,
                    line: r.line,
                    message: format!(
                        "{why}: a trace's lines must be in time order, each time once; --replay.sort sorts it and drops repeated lines"
                    ),
                });
            }
        }
        span = Some(span.map_or((r.t, r.t), |(a, b)| (a.min(r.t), b.max(r.t))));
        if matches!(&r.item, Item::Event { name, .. } if name == "oom") {
            ooms.push((r.t, r.line, r.item));
        }
    }
    let header = lines.header;
    if !order.broken() {
        return Ok(Scan {
            header,
            span,
            ooms,
            sorted: None,
        });
    }
    let mut lines = Lines::new(open_file(path)?, &name, false)?;
    let mut items = Vec::new();
    while let Some(r) = lines.next()? {
        items.push((r.t, r.item));
    }
    let dropped = sort_and_dedup(&mut items);
    tracing::warn!(
        trace = %name,
        out_of_order = order.backwards,
        repeated = dropped,
        "the trace's lines were out of time order or repeated: sorted by time, repeated lines dropped (--replay.sort)"
    );
    let ooms = items
        .iter()
        .enumerate()
        .filter(|(_, (_, i))| matches!(i, Item::Event { name, .. } if name == "oom"))
        .map(|(n, (t, i))| (*t, n, i.clone()))
        .collect();
    Ok(Scan {
        header,
        span,
        ooms,
        sorted: Some(items),
    })
}

/// Parse a whole trace from any reader into memory; `name` is used in errors. The lines are
/// checked as `ReplaySource::open` checks them (a trace out of time order is refused).
pub fn parse_trace(reader: impl BufRead, name: &str) -> Result<Trace, TraceError> {
    let mut lines = Lines::new(reader, name, true)?;
    let mut order = Order::default();
    let mut items = Vec::new();
    while let Some(r) = lines.next()? {
        if let Some(why) = order.check(&r) {
            return Err(TraceError::Parse {
                path: name.into(),
                line: r.line,
                message: why,
            });
        }
        items.push((r.t, r.item));
    }
    Ok(Trace {
        path: PathBuf::from(name),
        header: lines.header,
        items,
    })
}

/// Read a whole trace file into memory (`parse_trace` on the file, gunzipped where its name
/// ends in `.gz`).
pub fn read_trace(path: &Path) -> Result<Trace, TraceError> {
    parse_trace(open_file(path)?, &path.display().to_string())
}
