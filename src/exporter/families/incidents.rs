//! The out-of-memory errors each GPU saw, the recent ones one by one, and the forecast's score
//! against them.

use std::fmt;

use super::labels::{counter, gauge, gpu_labels, oom_event_labels, with_pod};
use super::LabelValue::{Int, Str};
use super::{Desc, Sink, Snapshot};
use crate::analysis::incident::{EpisodeOutcome, OomKind, Outcome, Score};
use crate::snapshot::OomEventView;

/// The OOM counts, the recent events and the score, in the order `/metrics` serves them.
pub(super) fn visit(s: &Snapshot, sink: &mut dyn Sink) -> fmt::Result {
    let gpus = &s.gpus;
    sink.family(
        &counter(
            "gpumem_oom_events_total",
            "Out-of-memory events on this GPU, each one failure of one process (its failed requests within 5 s of the first), by kind (reported by a process's client, or inferred: a process without a client vanished from a full GPU) and training job.",
        ),
        &|e| {
            for g in gpus {
                for c in &g.oom_counts {
                    let l = gpu_labels(g)
                        .with(&[("kind", Str(c.kind.as_str())), ("job", Str(&c.job))]);
                    e(l.get(), c.count as f64)?;
                }
            }
            Ok(())
        },
    )?;
    sink.family(
        &counter(
            "gpumem_oom_failed_requests_total",
            "Allocation requests that failed in the reported out-of-memory events on this GPU (a cascade of failed requests is one event).",
        ),
        &|e| {
            for g in gpus {
                e(gpu_labels(g).get(), g.oom_failed_requests as f64)?;
            }
            Ok(())
        },
    )?;
    sink.family(
        &gauge(
            "gpumem_oom_event_info",
            None,
            "One recent out-of-memory event, one failure of one process (event: its number on this GPU), its process and what the GPU showed before it (outcome: paged, warned, missed); served for two minutes; always 1.",
        ),
        &|e| {
            for g in gpus {
                for ev in &g.oom_events {
                    let l = oom_event_labels(g, ev).with(&[
                        ("kind", Str(ev.kind.as_str())),
                        ("pid", Int(ev.pid.into())),
                        ("comm", Str(&ev.comm)),
                        ("job", Str(&ev.job)),
                        ("outcome", Str(ev.outcome.as_str())),
                    ]);
                    let l = with_pod(l, ev.pod.as_ref());
                    e(l.get(), 1.0)?;
                }
            }
            Ok(())
        },
    )?;
    type OfEvent = fn(&OomEventView) -> Option<f64>;
    let event_numbers: [(Desc, OfEvent); 3] = [
        (
            gauge(
                "gpumem_oom_event_request_bytes",
                Some("bytes"),
                "The largest request that failed in a recent out-of-memory event, where its client said.",
            ),
            |ev| ev.request_bytes.map(|v| v as f64),
        ),
        (
            gauge(
                "gpumem_oom_event_free_bytes",
                Some("bytes"),
                "The GPU's free memory when a recent out-of-memory error came (its client's word, or the last reading for an inferred one).",
            ),
            |ev| ev.free_bytes.map(|v| v as f64),
        ),
        (
            gauge(
                "gpumem_oom_event_lead_seconds",
                Some("seconds"),
                "How long the GPU had been at critical (outcome paged) or high (warned) when a recent out-of-memory error came.",
            ),
            |ev| ev.lead,
        ),
    ];
    for (desc, of_event) in event_numbers {
        sink.family(&desc, &|e| {
            for g in gpus {
                for ev in &g.oom_events {
                    if let Some(v) = of_event(ev) {
                        e(oom_event_labels(g, ev).get(), v)?;
                    }
                }
            }
            Ok(())
        })?;
    }
    // The score by kind and outcome: the OOMs of each outcome, and the leads of those that
    // came after a page or a warning.
    type ByOutcome = fn(&Score, OomKind, Outcome) -> f64;
    let by_outcome: [(Desc, &[Outcome], ByOutcome); 2] = [
        (
            counter(
                "gpumem_forecast_ooms_total",
                "Out-of-memory events (one failure of one process each) by what the GPU showed when they came: paged (critical), warned (high only), missed.",
            ),
            &Outcome::ALL,
            |s, k, o| s.ooms(k, o) as f64,
        ),
        (
            Desc {
                unit: Some("seconds"),
                ..counter(
                    "gpumem_forecast_lead_seconds_total",
                    "Seconds the GPU had been at critical (outcome paged) or high (warned) when its out-of-memory errors came, summed: divided by gpumem_forecast_ooms_total, the mean lead.",
                )
            },
            &[Outcome::Paged, Outcome::Warned],
            |s, k, o| s.lead_seconds(k, o),
        ),
    ];
    for (desc, outcomes, value) in by_outcome {
        sink.family(&desc, &|e| {
            for g in gpus {
                for kind in OomKind::ALL {
                    for &outcome in outcomes {
                        let l = gpu_labels(g).with(&[
                            ("kind", Str(kind.as_str())),
                            ("outcome", Str(outcome.as_str())),
                        ]);
                        e(l.get(), value(&g.score, kind, outcome))?;
                    }
                }
            }
            Ok(())
        })?;
    }
    sink.family(
        &counter(
            "gpumem_forecast_critical_episodes_total",
            "Critical episodes of the GPU's risk that ended, by what followed: an out-of-memory error while critical or within 10 s after (oom), or none (no_oom).",
        ),
        &|e| {
            for g in gpus {
                for outcome in EpisodeOutcome::ALL {
                    let l = gpu_labels(g).with(&[("outcome", Str(outcome.as_str()))]);
                    e(l.get(), g.score.episodes(outcome) as f64)?;
                }
            }
            Ok(())
        },
    )?;
    Ok(())
}
