//! What the analysis derives: fragmentation, the leak test, the time to OOM and the risk, for
//! each GPU and each process, why a GPU has its risk, and the imbalance across GPUs and ranks.

use std::fmt;

use super::labels::{gauge, gpu_and_process, gpu_labels, with_pod};
use super::LabelValue::{Int, Str};
use super::{Desc, Sink, Snapshot};
use crate::snapshot::{GpuView, ProcessView};

/// The derived numbers with one series per GPU and, for some, one per process.
pub(super) fn derived(s: &Snapshot, sink: &mut dyn Sink) -> fmt::Result {
    type OfGpu = fn(&GpuView) -> Option<f64>;
    type OfProcess = fn(&ProcessView) -> Option<f64>;
    let per_gpu_and_process: [(Desc, OfGpu, OfProcess); 9] = [
        (
            gauge(
                "gpumem_cached_unallocated_ratio",
                None,
                "(reserved - allocated) / reserved: the share of the allocator cache not in live tensors (what is often called the fragmentation ratio; see gpumem_fragmentation_ratio for the share that is really stranded).",
            ),
            |g| g.cached_unallocated,
            |p| p.cached_unallocated,
        ),
        (
            gauge(
                "gpumem_fragmentation_ratio",
                None,
                "Share of the free cache stranded in split segments: inactive split bytes / free cached bytes (1 - largest free block / free cached bytes where the allocator reports no split bytes).",
            ),
            |g| g.fragmentation,
            |p| p.fragmentation,
        ),
        (
            gauge(
                "gpumem_leak_slope_bytes_per_second",
                Some("bytes_per_second"),
                "Robust (Theil-Sen) slope of the memory floor after warm-up.",
            ),
            |g| g.leak_slope,
            |p| p.leak_slope,
        ),
        (
            gauge(
                "gpumem_leak_suspected",
                None,
                "1 while the memory floor rises faster than the leak threshold, significantly and persistently.",
            ),
            |g| g.up.then_some(g.leak_suspected as u8 as f64),
            |p| Some(p.leak_suspected as u8 as f64),
        ),
        (
            gauge(
                "gpumem_oom_eta_seconds",
                Some("seconds"),
                "Predicted seconds until an allocation on this GPU (or of this process) fails; present only while memory is on course to run out.",
            ),
            |g| g.eta_seconds,
            |p| p.eta_seconds,
        ),
        (
            gauge(
                "gpumem_oom_eta_lower_seconds",
                Some("seconds"),
                "The earliest the failing allocation is credible: the ETA with growth at its upper confidence bound.",
            ),
            |g| g.eta_lower_seconds,
            |_| None,
        ),
        (
            gauge(
                "gpumem_oom_eta_upper_seconds",
                Some("seconds"),
                "The latest the failing allocation is expected: the ETA with growth at its lower confidence bound; absent where the growth may yet stop.",
            ),
            |g| g.eta_upper_seconds,
            |_| None,
        ),
        (
            gauge(
                "gpumem_headroom_tight",
                None,
                "1 while headroom is tight but steady: allocator retries within the last minute, or the peak over the peak window at analysis.risk.high_used_fraction of the device or more, with nothing growing towards the limit. A ticket, not a page.",
            ),
            |g| g.up.then_some(g.headroom_tight as u8 as f64),
            |_| None,
        ),
        (
            gauge(
                "gpumem_oom_risk_level",
                None,
                "Out-of-memory risk: 0 low, 1 medium, 2 high, 3 critical.",
            ),
            |g| g.up.then_some(g.risk as u8 as f64),
            |p| Some(p.risk as u8 as f64),
        ),
    ];
    for (desc, of_gpu, of_process) in per_gpu_and_process {
        gpu_and_process(sink, desc, s, of_gpu, of_process)?;
    }
    Ok(())
}

/// Why each GPU has its risk level, and the process that drives it.
pub(super) fn risk(s: &Snapshot, sink: &mut dyn Sink) -> fmt::Result {
    let gpus = &s.gpus;
    sink.family(
        &gauge(
            "gpumem_oom_risk_info",
            None,
            "Why the GPU has its risk level; always 1.",
        ),
        &|e| {
            for g in gpus.iter().filter(|g| g.up) {
                let l = gpu_labels(g).with(&[
                    ("level", Str(g.risk.as_str())),
                    ("reason", Str(g.risk_reason.as_str())),
                ]);
                e(l.get(), 1.0)?;
            }
            Ok(())
        },
    )?;
    sink.family(
        &gauge(
            "gpumem_oom_risk_driver_info",
            None,
            "The incident on the GPU while its risk is high or critical: its driver, the process whose growth took the GPU there when it began, the same for the incident's life (pid=\"\": memory no listed process accounts for), and its other processes in words (others); always 1.",
        ),
        &|e| {
            for g in gpus.iter().filter(|g| g.up) {
                if let Some(d) = &g.driver {
                    let pid = d.pid.map_or(Str(""), |p| Int(p.into()));
                    let l = with_pod(
                        gpu_labels(g).with(&[("pid", pid), ("comm", Str(&d.comm))]),
                        d.pod.as_ref(),
                    );
                    let others = d.others_text();
                    let l = match others.as_str() {
                        "" => l,
                        o => l.with(&[("others", Str(o))]),
                    };
                    e(l.get(), 1.0)?;
                }
            }
            Ok(())
        },
    )?;
    Ok(())
}

/// How unevenly memory is spread across the node's GPUs and across each job's local ranks.
pub(super) fn imbalance(s: &Snapshot, sink: &mut dyn Sink) -> fmt::Result {
    sink.family(
        &gauge(
            "gpumem_imbalance_ratio",
            None,
            "max / mean of memory in use across this node's GPUs (scope=\"node\") or a job's local ranks (scope=\"job\").",
        ),
        &|e| {
            if let Some(v) = s.node_imbalance {
                e(&[("scope", Str("node")), ("job", Str(""))], v)?;
            }
            for (job, v) in &s.job_imbalance {
                e(&[("scope", Str("job")), ("job", Str(job))], *v)?;
            }
            Ok(())
        },
    )?;
    Ok(())
}
