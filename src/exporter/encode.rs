//! The two exposition formats, written straight from a snapshot into any `fmt::Write`.
//! OpenMetrics, through prometheus-client, for scrapers that ask for it (Prometheus does); the
//! classic text format 0.0.4 for everyone else (curl, promtool, older agents), because its
//! counters are typed under their `_total` name and `promtool check metrics` reads it without
//! complaint.

use std::fmt::{self, Write};
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelValue, LabelValueEncoder, MetricEncoder,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use super::families::{visit, Desc, Kind, LabelValue, SeriesFn, Sink};
use crate::runtime::telemetry::Counters;
use crate::snapshot::Snapshot;

pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Does the Accept header ask for OpenMetrics?
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| a.contains("application/openmetrics-text"))
}

/// Does the Accept-Encoding header take gzip (Prometheus always sends `gzip`)? A `q` of 0
/// refuses it.
pub fn wants_gzip(accept_encoding: Option<&str>) -> bool {
    accept_encoding.is_some_and(|a| {
        a.split(',').any(|part| {
            let mut it = part.split(';');
            let coding = it.next().unwrap_or("").trim();
            let refused = it.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f64>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            (coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip"))
                && !refused
        })
    })
}

/// Writes `s` with the text format's escapes: backslash and newline everywhere, and the
/// double quote too inside label values.
fn escaped(out: &mut dyn Write, s: &str, quote: bool) -> fmt::Result {
    let mut rest = s;
    while let Some(i) = rest.find(|c| c == '\\' || c == '\n' || (quote && c == '"')) {
        out.write_str(&rest[..i])?;
        out.write_str(match rest.as_bytes()[i] {
            b'\\' => "\\\\",
            b'\n' => "\\n",
            _ => "\\\"",
        })?;
        rest = &rest[i + 1..];
    }
    out.write_str(rest)
}

fn write_value(out: &mut dyn Write, v: f64) -> fmt::Result {
    if v.is_nan() {
        out.write_str("NaN")
    } else if v.is_infinite() {
        out.write_str(if v > 0.0 { "+Inf" } else { "-Inf" })
    } else {
        write!(out, "{v}")
    }
}

struct TextSink<'w>(&'w mut dyn Write);

impl Sink for TextSink<'_> {
    fn family(&mut self, d: &Desc, series: &SeriesFn<'_>) -> fmt::Result {
        let out = &mut *self.0;
        let mut first = true;
        series(&mut |labels, value| {
            if first {
                first = false;
                write!(out, "# HELP {} ", d.name)?;
                escaped(out, d.help, false)?;
                let kind = match d.kind {
                    Kind::Gauge => "gauge",
                    Kind::Counter => "counter",
                };
                writeln!(out, "\n# TYPE {} {kind}", d.name)?;
            }
            out.write_str(d.name)?;
            if !labels.is_empty() {
                out.write_char('{')?;
                for (i, (k, v)) in labels.iter().enumerate() {
                    if i > 0 {
                        out.write_char(',')?;
                    }
                    write!(out, "{k}=\"")?;
                    match v {
                        LabelValue::Str(s) => escaped(out, s, true)?,
                        LabelValue::Int(n) => write!(out, "{n}")?,
                    }
                    out.write_char('"')?;
                }
                out.write_char('}')?;
            }
            out.write_char(' ')?;
            write_value(out, value)?;
            out.write_char('\n')
        })
    }
}

/// Prometheus text format 0.0.4.
pub fn text(s: &Snapshot, c: &Counters, version: &str, out: &mut dyn Write) -> fmt::Result {
    visit(s, c, version, &mut TextSink(out))
}

impl EncodeLabelValue for LabelValue<'_> {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> fmt::Result {
        match self {
            LabelValue::Str(s) => s.encode(encoder),
            LabelValue::Int(n) => n.encode(encoder),
        }
    }
}

fn encode_value(kind: Kind, mut e: MetricEncoder, v: f64) -> fmt::Result {
    match kind {
        Kind::Gauge => e.encode_gauge(&v),
        Kind::Counter => {
            e.encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(&v, None)
        }
    }
}

/// Hands families to prometheus-client's OpenMetrics encoder.
struct OpenMetricsSink<'a, 'b>(&'a mut DescriptorEncoder<'b>);

impl Sink for OpenMetricsSink<'_, '_> {
    fn family(&mut self, d: &Desc, series: &SeriesFn<'_>) -> fmt::Result {
        // The descriptor is written before any series, so count them first: an empty family
        // must not appear.
        let (mut n, mut labelled) = (0usize, false);
        series(&mut |labels, _| {
            n += 1;
            labelled |= !labels.is_empty();
            Ok(())
        })?;
        if n == 0 {
            return Ok(());
        }
        // prometheus-client appends the unit and `_total` itself.
        let mut base = d.name;
        if d.kind == Kind::Counter {
            base = base.strip_suffix("_total").unwrap_or(base);
        }
        let unit = d.unit.and_then(|u| {
            let stem = base.strip_suffix(u)?.strip_suffix('_')?;
            base = stem;
            Some(match u {
                "bytes" => Unit::Bytes,
                "seconds" => Unit::Seconds,
                other => Unit::Other(other.to_string()),
            })
        });
        let kind = match d.kind {
            Kind::Gauge => MetricType::Gauge,
            Kind::Counter => MetricType::Counter,
        };
        let mut me = Some(
            self.0
                .encode_descriptor(base, d.help, unit.as_ref(), kind)?,
        );
        series(&mut |labels, v| {
            if labelled {
                let me = me.as_mut().ok_or(fmt::Error)?;
                encode_value(d.kind, me.encode_family(&labels)?, v)
            } else {
                // A family without labels has one series, encoded without `{}`.
                encode_value(d.kind, me.take().ok_or(fmt::Error)?, v)
            }
        })
    }
}

#[derive(Debug)]
struct SnapshotCollector {
    snapshot: Arc<Snapshot>,
    counters: Arc<Counters>,
    version: &'static str,
}

impl Collector for SnapshotCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let mut sink = OpenMetricsSink(&mut encoder);
        visit(&self.snapshot, &self.counters, self.version, &mut sink)
    }
}

/// OpenMetrics text through prometheus-client's encoder.
pub fn openmetrics(
    snapshot: Arc<Snapshot>,
    counters: Arc<Counters>,
    version: &'static str,
    out: &mut impl Write,
) -> fmt::Result {
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(SnapshotCollector {
        snapshot,
        counters,
        version,
    }));
    prometheus_client::encoding::text::encode(out, &registry)
}

#[cfg(test)]
mod tests {
    use super::super::families::families;
    use super::*;
    use crate::config::Scenario;
    use crate::config::{Config, SimGpuConfig};
    use crate::engine::Engine;
    use crate::snapshot::PodLabels;
    use crate::source::sim::SimSource;
    use crate::source::Source;

    /// A simulated node with a reporting process whose command name needs escaping.
    fn node() -> (Snapshot, Counters) {
        let mut cfg = Config::default();
        cfg.sim.gpus = vec![
            SimGpuConfig::new(Scenario::Steady),
            SimGpuConfig::new(Scenario::Frag),
        ];
        let mut src = SimSource::new(&cfg.sim);
        let mut engine = Engine::new(&cfg, "sim");
        for i in 0..30 {
            engine.observe(&src.sample(f64::from(i)));
        }
        let mut snap = (*engine.current()).clone();
        snap.processes[0].comm = "a\"b\\c\nd".into();
        snap.processes[0].pod = Some(PodLabels {
            namespace: "ml".into(),
            pod: "train-0".into(),
            container: "main".into(),
        });
        let counters = Counters::default();
        counters
            .ingest
            .reports
            .store(3, std::sync::atomic::Ordering::Relaxed);
        (snap, counters)
    }

    fn text_of(s: &Snapshot, c: &Counters) -> String {
        let mut out = String::new();
        text(s, c, "test", &mut out).unwrap();
        out
    }

    #[test]
    fn text_format_holds_every_collected_series_and_nothing_else() {
        let (snap, counters) = node();
        let body = text_of(&snap, &counters);
        let fams = families(&snap, &counters, "test");
        let samples = body.lines().filter(|l| !l.starts_with('#')).count();
        assert_eq!(samples, fams.iter().map(|f| f.series.len()).sum::<usize>());
        let types = body.lines().filter(|l| l.starts_with("# TYPE ")).count();
        assert_eq!(types, fams.len(), "one TYPE line per non-empty family");
        for f in &fams {
            assert!(
                body.contains(&format!("\n# TYPE {} ", f.name)),
                "{}",
                f.name
            );
        }
        // No family without series: the ETA is absent on these calm GPUs.
        assert!(!body.contains("gpumem_oom_eta_seconds"));
    }

    #[test]
    fn text_format_types_counters_by_their_total_name_and_escapes() {
        let (snap, counters) = node();
        let t = text_of(&snap, &counters);
        assert!(t.contains(
            "# TYPE gpumem_ingest_reports_total counter\ngpumem_ingest_reports_total 3\n"
        ));
        let pid = snap.processes[0].pid;
        assert!(
            t.contains(&format!(
                "pid=\"{pid}\",comm=\"a\\\"b\\\\c\\nd\",namespace=\"ml\",pod=\"train-0\",container=\"main\"}}"
            )),
            "{t}"
        );
        let used = snap.gpus[0].memory.unwrap().used;
        let uuid = &snap.gpus[0].id.uuid;
        assert!(t.contains(&format!(
            "gpumem_used_bytes{{gpu=\"0\",uuid=\"{uuid}\"}} {used}\n"
        )));
    }

    #[test]
    fn openmetrics_keeps_the_names_adds_units_and_the_same_samples() {
        let (snap, counters) = node();
        let text_samples = text_of(&snap, &counters)
            .lines()
            .filter(|l| !l.starts_with('#'))
            .count();
        let mut t = String::new();
        openmetrics(Arc::new(snap), Arc::new(counters), "test", &mut t).unwrap();
        assert!(t.contains("# TYPE gpumem_used_bytes gauge"), "{t}");
        assert!(t.contains("# UNIT gpumem_used_bytes bytes"), "{t}");
        assert!(t.contains("# TYPE gpumem_ingest_reports counter"), "{t}");
        assert!(t.contains("\ngpumem_ingest_reports_total 3.0\n"), "{t}");
        assert!(t.contains("comm=\"a\\\"b\\\\c\\nd\""), "{t}");
        assert!(t.ends_with("# EOF\n"));
        let samples = t.lines().filter(|l| !l.starts_with('#')).count();
        assert_eq!(samples, text_samples);
    }

    #[test]
    fn gzip_negotiation() {
        assert!(wants_gzip(Some("gzip")));
        assert!(wants_gzip(Some("deflate, GZIP;q=0.5")));
        assert!(!wants_gzip(Some("gzip;q=0")));
        assert!(!wants_gzip(Some("identity, br")));
        assert!(!wants_gzip(None));
    }

    #[test]
    fn negotiation() {
        assert!(wants_openmetrics(Some(
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
        )));
        assert!(!wants_openmetrics(Some("text/plain")));
        assert!(!wants_openmetrics(None));
    }
}
