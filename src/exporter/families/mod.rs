//! The metric families of one snapshot: the single place where metric names, labels and help
//! texts are decided, one file for what each group of families describes (the GPUs, the
//! processes, what the analysis derives, the incidents, the exporter itself). `/metrics` (both
//! encodings) and the replay timeline read this.
//!
//! [`visit`] walks the snapshot and hands each family to a [`Sink`] with labels borrowed from
//! the snapshot, so a scrape of 8 GPUs × 64 processes (13 500 series) is encoded without
//! building one owned label string; [`families`] collects owned copies where a caller wants
//! values (the replay timeline, tests).

mod budget;
mod forecast;
mod gpu;
mod incidents;
mod labels;
mod process;
mod telemetry;

use std::fmt;

use serde::Serialize;

use crate::runtime::telemetry::Counters;
use crate::snapshot::Snapshot;

pub use budget::within_budget;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Gauge,
    Counter,
}

/// A label value as the snapshot holds it; numbers are formatted by the encoder.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LabelValue<'a> {
    Str(&'a str),
    Int(u64),
}

impl fmt::Display for LabelValue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LabelValue::Str(s) => f.write_str(s),
            LabelValue::Int(i) => write!(f, "{i}"),
        }
    }
}

pub type Label<'a> = (&'static str, LabelValue<'a>);

/// What a family is, apart from its series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Desc {
    /// The full name as it appears on samples (counters end in `_total`).
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    /// OpenMetrics unit, which is also the end of the name.
    pub unit: Option<&'static str>,
}

/// Receives one series of the family being visited.
pub type Emit<'e> = dyn FnMut(&[Label<'_>], f64) -> fmt::Result + 'e;
/// Emits every series of one family; calling it again emits the same series again.
pub type SeriesFn<'s> = dyn Fn(&mut Emit<'_>) -> fmt::Result + 's;

/// An encoder of families. A family whose `series` emits nothing must not appear in the
/// output at all (no HELP or TYPE line either).
pub trait Sink {
    fn family(&mut self, desc: &Desc, series: &SeriesFn<'_>) -> fmt::Result;
}

/// Owned labels, for callers that keep series beyond the snapshot.
pub type Labels = Vec<(&'static str, String)>;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Series {
    pub labels: Labels,
    pub value: f64,
}

/// One family with owned copies of its series.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub name: &'static str,
    pub kind: Kind,
    pub series: Vec<Series>,
}

/// Hand every family of the snapshot to `sink`, in a stable order.
pub fn visit(s: &Snapshot, c: &Counters, version: &str, sink: &mut dyn Sink) -> fmt::Result {
    gpu::visit(s, sink)?;
    process::memory(s, sink)?;
    forecast::derived(s, sink)?;
    process::identity(s, sink)?;
    forecast::risk(s, sink)?;
    incidents::visit(s, sink)?;
    forecast::imbalance(s, sink)?;
    telemetry::visit(s, c, version, sink)
}

/// Collects owned copies of the families that have series, of those `keep` names.
struct Collect<'k> {
    out: Vec<Family>,
    keep: &'k dyn Fn(&str) -> bool,
}

impl Sink for Collect<'_> {
    fn family(&mut self, d: &Desc, series: &SeriesFn<'_>) -> fmt::Result {
        if !(self.keep)(d.name) {
            return Ok(());
        }
        let mut out = Vec::new();
        series(&mut |labels, value| {
            out.push(Series {
                labels: labels.iter().map(|(k, v)| (*k, v.to_string())).collect(),
                value,
            });
            Ok(())
        })?;
        if !out.is_empty() {
            self.out.push(Family {
                name: d.name,
                kind: d.kind,
                series: out,
            });
        }
        Ok(())
    }
}

/// Every family of the snapshot with owned series, in a stable order; families without series
/// are left out.
pub fn families(s: &Snapshot, c: &Counters, version: &str) -> Vec<Family> {
    families_named(s, c, version, &|_| true)
}

/// The families `keep` names, as [`families`] gives them; the others' series are never built
/// (a replay's timeline of the forecast alone writes a tenth of the bytes).
pub fn families_named(
    s: &Snapshot,
    c: &Counters,
    version: &str,
    keep: &dyn Fn(&str) -> bool,
) -> Vec<Family> {
    let mut sink = Collect {
        out: Vec::new(),
        keep,
    };
    visit(s, c, version, &mut sink).expect("collecting into memory cannot fail");
    sink.out
}

/// The name of every family the exporter can serve, whether or not it has series now.
pub fn names() -> Vec<&'static str> {
    struct Names(Vec<&'static str>);
    impl Sink for Names {
        fn family(&mut self, d: &Desc, _: &SeriesFn<'_>) -> fmt::Result {
            self.0.push(d.name);
            Ok(())
        }
    }
    let mut sink = Names(Vec::new());
    visit(&Snapshot::default(), &Counters::default(), "", &mut sink)
        .expect("naming into memory cannot fail");
    sink.0
}
