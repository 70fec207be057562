//! What each GPU holds: its identity, whether it answers, its memory and its peaks.

use std::fmt;

use super::labels::{gauge, gpu_labels};
use super::LabelValue::Str;
use super::{Sink, Snapshot};

/// The GPU's own families, in the order `/metrics` serves them.
pub(super) fn visit(s: &Snapshot, sink: &mut dyn Sink) -> fmt::Result {
    let gpus = &s.gpus;
    let bool_value = |b: bool| if b { 1.0 } else { 0.0 };

    sink.family(
        &gauge(
            "gpumem_gpu_info",
            None,
            "Descriptive data of the GPU; always 1.",
        ),
        &|e| {
            for g in gpus {
                let l = gpu_labels(g).with(&[
                    ("name", Str(&g.id.name)),
                    ("pci_bus_id", Str(&g.id.pci_bus_id)),
                ]);
                e(l.get(), 1.0)?;
            }
            Ok(())
        },
    )?;
    sink.family(
        &gauge(
            "gpumem_device_up",
            None,
            "1 when the last sample of this GPU succeeded, 0 when it failed or missed its deadline.",
        ),
        &|e| {
            for g in gpus {
                e(gpu_labels(g).get(), bool_value(g.up))?;
            }
            Ok(())
        },
    )?;
    type MemField = fn(&crate::model::DeviceMemory) -> u64;
    let mem_families: [(&'static str, &'static str, MemField); 4] = [
        ("gpumem_total_bytes", "Installed GPU memory.", |m| m.total),
        (
            "gpumem_used_bytes",
            "GPU memory in use by processes and contexts, without the driver's reservation.",
            |m| m.used,
        ),
        (
            "gpumem_free_bytes",
            "GPU memory neither in use nor reserved.",
            |m| m.free,
        ),
        (
            "gpumem_reserved_bytes",
            "GPU memory the driver reserves for itself.",
            |m| m.reserved,
        ),
    ];
    for (name, help, field) in mem_families {
        sink.family(&gauge(name, Some("bytes"), help), &|e| {
            for g in gpus {
                if let Some(m) = &g.memory {
                    e(gpu_labels(g).get(), field(m) as f64)?;
                }
            }
            Ok(())
        })?;
    }
    sink.family(
        &gauge(
            "gpumem_unattributed_bytes",
            Some("bytes"),
            "Used memory that no process NVML lists accounts for (processes in another PID namespace, contexts left by dead processes, leaked IPC handles).",
        ),
        &|e| {
            for g in gpus {
                if let Some(v) = g.unattributed {
                    e(gpu_labels(g).get(), v as f64)?;
                }
            }
            Ok(())
        },
    )?;
    sink.family(
        &gauge(
            "gpumem_peak_used_bytes",
            Some("bytes"),
            "Highest used memory seen, since the exporter started (window=\"lifetime\") and over a trailing window.",
        ),
        &|e| {
            for g in gpus.iter().filter(|g| g.up) {
                let l = gpu_labels(g);
                if let Some(v) = g.peak_lifetime {
                    e(l.with(&[("window", Str("lifetime"))]).get(), v as f64)?;
                }
                if let Some(v) = g.peak_window {
                    let window = Str(&s.peak_window_label);
                    e(l.with(&[("window", window)]).get(), v as f64)?;
                }
            }
            Ok(())
        },
    )?;
    Ok(())
}
