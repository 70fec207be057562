//! The labels a series of a GPU, a process or an OOM event carries, and the two kinds of family.

use std::fmt;

use super::{Desc, Kind, Label, LabelValue, Sink};
use crate::snapshot::{GpuView, OomEventView, PodLabels, ProcessView, Snapshot};
use LabelValue::{Int, Str};

/// The labels of one series, on the stack: the most any family has is an OOM event's, a
/// GPU's four, the process's five and four of its own.
#[derive(Clone, Copy)]
pub(super) struct LabelSet<'a> {
    items: [Label<'a>; 16],
    len: usize,
}

impl<'a> LabelSet<'a> {
    pub(super) fn of(labels: &[Label<'a>]) -> Self {
        LabelSet {
            items: [("", LabelValue::Str("")); 16],
            len: 0,
        }
        .with(labels)
    }

    pub(super) fn with(mut self, extra: &[Label<'a>]) -> Self {
        self.items[self.len..self.len + extra.len()].copy_from_slice(extra);
        self.len += extra.len();
        self
    }

    pub(super) fn get(&self) -> &[Label<'a>] {
        &self.items[..self.len]
    }
}

/// A GPU's labels; a MIG instance, a memory domain of its own, adds where it sits on its GPU.
pub(super) fn gpu_labels(g: &GpuView) -> LabelSet<'_> {
    let l = LabelSet::of(&[("gpu", Int(g.id.index.into())), ("uuid", Str(&g.id.uuid))]);
    match &g.id.mig {
        Some(m) => l.with(&[
            ("gpu_instance", Int(m.gpu_instance.into())),
            ("mig_profile", Str(&m.profile)),
        ]),
        None => l,
    }
}

/// `l` with a pod's labels, where the process runs in one.
pub(super) fn with_pod<'a>(l: LabelSet<'a>, pod: Option<&'a PodLabels>) -> LabelSet<'a> {
    match pod {
        Some(pod) => l.with(&[
            ("namespace", Str(&pod.namespace)),
            ("pod", Str(&pod.pod)),
            ("container", Str(&pod.container)),
        ]),
        None => l,
    }
}

/// An OOM event's labels: its GPU and its number there.
pub(super) fn oom_event_labels<'a>(g: &'a GpuView, e: &OomEventView) -> LabelSet<'a> {
    gpu_labels(g).with(&[("event", Int(e.event))])
}

pub(super) fn process_labels(p: &ProcessView) -> LabelSet<'_> {
    let gpu = p.gpu.map_or(Str(""), |g| Int(g.into()));
    let l = LabelSet::of(&[
        ("gpu", gpu),
        ("uuid", Str(&p.uuid)),
        ("pid", Int(p.pid.into())),
        ("comm", Str(&p.comm)),
    ]);
    with_pod(l, p.pod.as_ref())
}

pub(super) const fn gauge(
    name: &'static str,
    unit: Option<&'static str>,
    help: &'static str,
) -> Desc {
    Desc {
        name,
        help,
        kind: Kind::Gauge,
        unit,
    }
}

pub(super) const fn counter(name: &'static str, help: &'static str) -> Desc {
    Desc {
        name,
        help,
        kind: Kind::Counter,
        unit: None,
    }
}

/// One family per GPU (`gpu`, `uuid`) and per process (`gpu`, `uuid`, `pid`, `comm`, pod
/// labels) from two optional readings.
pub(super) fn gpu_and_process(
    sink: &mut dyn Sink,
    desc: Desc,
    s: &Snapshot,
    of_gpu: fn(&GpuView) -> Option<f64>,
    of_process: fn(&ProcessView) -> Option<f64>,
) -> fmt::Result {
    sink.family(&desc, &|e| {
        for g in &s.gpus {
            if let Some(v) = of_gpu(g) {
                e(gpu_labels(g).get(), v)?;
            }
        }
        for p in &s.processes {
            if let Some(v) = of_process(p) {
                e(process_labels(p).get(), v)?;
            }
        }
        Ok(())
    })
}
