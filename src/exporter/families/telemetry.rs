//! The exporter's own families: its build, sampling, connections, scrape budget and ingest.

use std::fmt;
use std::sync::atomic::Ordering;

use super::labels::{counter, gauge};
use super::LabelValue::{Int, Str};
use super::{Desc, Label, Sink, Snapshot};
use crate::connections::Listener;
use crate::model::RejectReason;
use crate::runtime::telemetry::Counters;

/// The exporter's own families, in the order `/metrics` serves them.
pub(super) fn visit(s: &Snapshot, c: &Counters, version: &str, sink: &mut dyn Sink) -> fmt::Result {
    let one = |desc: Desc, labels: &[Label<'_>], v: f64, sink: &mut dyn Sink| {
        sink.family(&desc, &|e| e(labels, v))
    };
    one(
        gauge(
            "gpumem_exporter_build_info",
            None,
            "The exporter's version and sample source; always 1.",
        ),
        &[("version", Str(version)), ("source", Str(&s.source))],
        1.0,
        sink,
    )?;
    one(
        gauge(
            "gpumem_exporter_sample_duration_seconds",
            Some("seconds"),
            "Wall time the last sample's GPU queries took, all GPUs one after another.",
        ),
        &[],
        c.sample_duration(),
        sink,
    )?;
    one(
        counter("gpumem_exporter_samples_total", "Samples taken."),
        &[],
        c.samples.load(Ordering::Relaxed) as f64,
        sink,
    )?;
    let errors = c.sample_errors();
    sink.family(
        &counter(
            "gpumem_exporter_sample_errors_total",
            "Failed GPU queries by kind.",
        ),
        &|e| {
            for ((gpu, kind), n) in &errors {
                let l = [("gpu", Int((*gpu).into())), ("kind", Str(kind.as_str()))];
                e(&l, *n as f64)?;
            }
            Ok(())
        },
    )?;
    one(
        counter(
            "gpumem_exporter_nvml_reinit_total",
            "Times NVML was initialised again after failing as a whole.",
        ),
        &[],
        c.nvml_reinit.load(Ordering::Relaxed) as f64,
        sink,
    )?;
    one(
        counter(
            "gpumem_exporter_nvml_reader_restarts_total",
            "Times the NVML reader panicked and went on with the next sample.",
        ),
        &[],
        c.nvml_reader_restarts.load(Ordering::Relaxed) as f64,
        sink,
    )?;
    one(
        gauge(
            "gpumem_exporter_tracked_processes",
            None,
            "Processes held in the history.",
        ),
        &[],
        c.tracked_processes.load(Ordering::Relaxed) as f64,
        sink,
    )?;
    sink.family(
        &gauge(
            "gpumem_exporter_open_connections",
            None,
            "Connections open on each listener (web, ingest_socket, ingest_tcp).",
        ),
        &|e| {
            for l in Listener::ALL {
                let n = c.connections.of(l).open.load(Ordering::Relaxed);
                e(&[("listener", Str(l.as_str()))], n as f64)?;
            }
            Ok(())
        },
    )?;
    sink.family(
        &gauge(
            "gpumem_exporter_ingest_up",
            None,
            "Whether each configured ingest listener (ingest_socket, ingest_tcp) listens: 1, or 0 when it could not be bound or its socket file is gone.",
        ),
        &|e| {
            for l in [Listener::IngestSocket, Listener::IngestTcp] {
                if let Some(up) = c.connections.of(l).up() {
                    e(&[("listener", Str(l.as_str()))], f64::from(u8::from(up)))?;
                }
            }
            Ok(())
        },
    )?;
    sink.family(
        &counter(
            "gpumem_exporter_connections_shed_total",
            "Connections the exporter closed to keep a listener within its budget: idle ones closed to make room, or newcomers refused while every connection was busy.",
        ),
        &|e| {
            for l in Listener::ALL {
                let n = c.connections.of(l).shed.load(Ordering::Relaxed);
                e(&[("listener", Str(l.as_str()))], n as f64)?;
            }
            Ok(())
        },
    )?;
    one(
        counter(
            "gpumem_exporter_series_dropped_total",
            "Series left out of /metrics and /api/v1/snapshot to keep an answer within web.max_series, summed over answers.",
        ),
        &[],
        c.series_dropped.load(Ordering::Relaxed) as f64,
        sink,
    )?;
    one(
        counter("gpumem_ingest_reports_total", "Allocator reports accepted."),
        &[],
        c.ingest.reports.load(Ordering::Relaxed) as f64,
        sink,
    )?;
    one(
        counter(
            "gpumem_ingest_unlisted_total",
            "Device entries and OOM events in accepted reports from a process NVML does not list on that GPU: kept as the process's own numbers, no effect on the GPU.",
        ),
        &[],
        c.ingest.unlisted.load(Ordering::Relaxed) as f64,
        sink,
    )?;
    sink.family(
        &counter(
            "gpumem_ingest_rejected_total",
            "Allocator reports rejected, by reason.",
        ),
        &|e| {
            for r in RejectReason::ALL {
                e(&[("reason", Str(r.as_str()))], c.ingest.rejected(r) as f64)?;
            }
            Ok(())
        },
    )?;
    sink.family(
        &counter(
            "gpumem_ingest_process_table_total",
            "New pids the process table turned away, by kind of sender: refused (a TCP sender over its share, or a table with no place to give) or evicted (a TCP pid's place given to a process on the socket).",
        ),
        &|e| {
            for (sender, outcome) in crate::ingest::admission::SERIES {
                let l = [("sender", Str(sender.as_str())), ("outcome", Str(outcome.as_str()))];
                e(&l, c.ingest.table.get(sender, outcome) as f64)?;
            }
            Ok(())
        },
    )?;
    Ok(())
}
