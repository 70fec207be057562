//! What each process holds and says of itself: NVML's and its allocator's numbers, its
//! training identity, its model's components and its phases.

use std::fmt;

use super::labels::{counter, gauge, process_labels};
use super::LabelValue::{Int, Str};
use super::{Desc, Sink, Snapshot};
use crate::model::DeviceStats;
use crate::snapshot::ProcessView;

/// A reading of the process's latest allocator report.
fn alloc(p: &ProcessView, field: fn(&DeviceStats) -> Option<u64>) -> Option<f64> {
    p.allocator.as_ref().and_then(field).map(|v| v as f64)
}

/// The process's memory as NVML and its allocator report it, one series per process.
pub(super) fn memory(s: &Snapshot, sink: &mut dyn Sink) -> fmt::Result {
    type OfProcess = fn(&ProcessView) -> Option<f64>;
    let numbers: [(Desc, OfProcess); 11] = [
        (
            gauge(
                "gpumem_process_used_bytes",
                Some("bytes"),
                "GPU memory NVML attributes to the process (allocator reserved plus CUDA context and libraries).",
            ),
            |p| p.nvml_used.map(|v| v as f64),
        ),
        (
            gauge(
                "gpumem_process_allocated_bytes",
                Some("bytes"),
                "Bytes in live tensors, as the process's allocator reports.",
            ),
            |p| alloc(p, |a| Some(a.allocated_bytes)),
        ),
        (
            gauge(
                "gpumem_process_reserved_bytes",
                Some("bytes"),
                "Bytes the process's allocator holds from the driver (allocated plus cache).",
            ),
            |p| alloc(p, |a| Some(a.reserved_bytes)),
        ),
        (
            gauge(
                "gpumem_process_active_bytes",
                Some("bytes"),
                "Bytes in active allocator blocks.",
            ),
            |p| alloc(p, |a| a.active_bytes),
        ),
        (
            gauge(
                "gpumem_process_inactive_split_bytes",
                Some("bytes"),
                "Free bytes inside partly used (split) segments.",
            ),
            |p| alloc(p, |a| a.inactive_split_bytes),
        ),
        (
            gauge(
                "gpumem_process_segments",
                None,
                "Segments the allocator holds.",
            ),
            |p| alloc(p, |a| a.segments),
        ),
        (
            gauge(
                "gpumem_process_allocated_peak_bytes",
                Some("bytes"),
                "The allocator's own peak of allocated bytes.",
            ),
            |p| alloc(p, |a| a.allocated_peak_bytes),
        ),
        (
            gauge(
                "gpumem_process_largest_free_block_bytes",
                Some("bytes"),
                "The largest free cached block: the biggest request the cache can serve without the driver.",
            ),
            |p| p.largest_free_block.map(|v| v as f64),
        ),
        (
            counter(
                "gpumem_process_alloc_retries_total",
                "Times the allocator freed its cache and retried an allocation.",
            ),
            |p| alloc(p, |a| a.alloc_retries),
        ),
        (
            counter(
                "gpumem_process_ooms_total",
                "Out-of-memory errors the allocator raised.",
            ),
            |p| alloc(p, |a| a.ooms),
        ),
        (
            gauge(
                "gpumem_process_overhead_bytes",
                Some("bytes"),
                "Memory outside the allocator: NVML used minus allocator reserved (CUDA context, libraries, NCCL).",
            ),
            |p| p.overhead,
        ),
    ];
    for (desc, of_process) in numbers {
        sink.family(&desc, &|e| {
            for p in &s.processes {
                if let Some(v) = of_process(p) {
                    e(process_labels(p).get(), v)?;
                }
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// What the process reported of itself: its identity, components and phases.
pub(super) fn identity(s: &Snapshot, sink: &mut dyn Sink) -> fmt::Result {
    let procs = &s.processes;
    sink.family(
        &gauge(
            "gpumem_process_info",
            None,
            "Training identity the process reported; always 1.",
        ),
        &|e| {
            for p in procs.iter().filter(|p| p.has_identity()) {
                let i = &p.identity;
                let opt = |v: Option<u64>| v.map_or(Str(""), Int);
                let l = process_labels(p).with(&[
                    ("job", Str(i.job.as_deref().unwrap_or_default())),
                    ("rank", opt(i.rank)),
                    ("local_rank", opt(i.local_rank)),
                    ("world_size", opt(i.world_size)),
                ]);
                e(l.get(), 1.0)?;
            }
            Ok(())
        },
    )?;
    sink.family(
        &gauge(
            "gpumem_process_component_bytes",
            Some("bytes"),
            "Model memory by component and kind (parameters, gradients, optimizer).",
        ),
        &|e| {
            for p in procs {
                let pl = process_labels(p);
                for c in &p.components {
                    for (kind, v) in [
                        ("parameters", c.parameters_bytes),
                        ("gradients", c.gradients_bytes),
                        ("optimizer", c.optimizer_bytes),
                    ] {
                        if let Some(v) = v {
                            let l =
                                pl.with(&[("component", Str(&c.component)), ("kind", Str(kind))]);
                            e(l.get(), v as f64)?;
                        }
                    }
                }
            }
            Ok(())
        },
    )?;
    sink.family(
        &gauge(
            "gpumem_process_phase_info",
            None,
            "The phase the process is in now; always 1.",
        ),
        &|e| {
            for p in procs {
                if let Some(ph) = &p.phase {
                    e(process_labels(p).with(&[("phase", Str(ph))]).get(), 1.0)?;
                }
            }
            Ok(())
        },
    )?;
    sink.family(
        &counter(
            "gpumem_process_phase_entries_total",
            "Times the process entered each phase.",
        ),
        &|e| {
            for p in procs {
                for (ph, n) in &p.phase_entries {
                    e(
                        process_labels(p).with(&[("phase", Str(ph))]).get(),
                        *n as f64,
                    )?;
                }
            }
            Ok(())
        },
    )?;
    Ok(())
}
