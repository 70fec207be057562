//! The two exposition formats. OpenMetrics, through prometheus-client, for scrapers that ask
//! for it (Prometheus does); the classic text format 0.0.4 for everyone else (curl, promtool,
//! older agents), because its counters are typed under their `_total` name and `promtool check
//! metrics` reads it without complaint.

use std::fmt::Write;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use super::families::{Family, Kind};

pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Does the Accept header ask for OpenMetrics?
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| a.contains("application/openmetrics-text"))
}

fn escape_label_value(v: &str, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn write_value(v: f64, out: &mut String) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "+Inf" } else { "-Inf" });
    } else {
        let _ = write!(out, "{v}");
    }
}

/// Prometheus text format 0.0.4.
pub fn text(families: &[Family]) -> String {
    let mut out = String::with_capacity(64 * 1024);
    for f in families {
        let help = f.help.replace('\\', "\\\\").replace('\n', "\\n");
        let kind = match f.kind {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
        };
        let _ = writeln!(out, "# HELP {} {}", f.name, help);
        let _ = writeln!(out, "# TYPE {} {}", f.name, kind);
        for s in &f.series {
            out.push_str(f.name);
            if !s.labels.is_empty() {
                out.push('{');
                for (i, (k, v)) in s.labels.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(k);
                    out.push_str("=\"");
                    escape_label_value(v, &mut out);
                    out.push('"');
                }
                out.push('}');
            }
            out.push(' ');
            write_value(s.value, &mut out);
            out.push('\n');
        }
    }
    out
}

/// A prometheus-client collector over already-built families.
#[derive(Debug)]
pub struct FamiliesCollector(pub Vec<Family>);

struct Gauge(f64);
struct Counter(f64);

impl EncodeMetric for Gauge {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::MetricEncoder,
    ) -> Result<(), std::fmt::Error> {
        encoder.encode_gauge(&self.0)
    }
    fn metric_type(&self) -> MetricType {
        MetricType::Gauge
    }
}

impl EncodeMetric for Counter {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::MetricEncoder,
    ) -> Result<(), std::fmt::Error> {
        encoder.encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(&self.0, None)
    }
    fn metric_type(&self) -> MetricType {
        MetricType::Counter
    }
}

impl Collector for FamiliesCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for f in &self.0 {
            // prometheus-client appends the unit and `_total` itself.
            let mut base = f.name;
            if f.kind == Kind::Counter {
                base = base.strip_suffix("_total").unwrap_or(base);
            }
            let unit = f.unit.and_then(|u| {
                base.strip_suffix(u)
                    .and_then(|b| b.strip_suffix('_'))
                    .map(|b| {
                        base = b;
                        match u {
                            "bytes" => Unit::Bytes,
                            "seconds" => Unit::Seconds,
                            other => Unit::Other(other.to_string()),
                        }
                    })
            });
            let kind = match f.kind {
                Kind::Gauge => MetricType::Gauge,
                Kind::Counter => MetricType::Counter,
            };
            let mut me = encoder.encode_descriptor(base, f.help, unit.as_ref(), kind)?;
            let encode = |e: prometheus_client::encoding::MetricEncoder, v: f64| match f.kind {
                Kind::Gauge => Gauge(v).encode(e),
                Kind::Counter => Counter(v).encode(e),
            };
            match f.series.as_slice() {
                // A family without labels has one series, encoded without `{}`.
                [only] if only.labels.is_empty() => encode(me, only.value)?,
                series => {
                    for s in series {
                        let labels: Vec<(&str, &str)> =
                            s.labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
                        encode(me.encode_family(&labels)?, s.value)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// OpenMetrics text through prometheus-client's encoder.
pub fn openmetrics(families: Vec<Family>) -> String {
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(FamiliesCollector(families)));
    let mut out = String::with_capacity(64 * 1024);
    prometheus_client::encoding::text::encode(&mut out, &registry)
        .expect("writing to a String cannot fail");
    out
}

#[cfg(test)]
mod tests {
    use super::super::families::Series;
    use super::*;

    fn fams() -> Vec<Family> {
        vec![
            Family {
                name: "gpumem_used_bytes",
                help: "Used.",
                kind: Kind::Gauge,
                unit: Some("bytes"),
                series: vec![Series {
                    labels: vec![("gpu", "0".into()), ("comm", "a\"b\\c\nd".into())],
                    value: 12e9,
                }],
            },
            Family {
                name: "gpumem_ingest_reports_total",
                help: "Reports.",
                kind: Kind::Counter,
                unit: None,
                series: vec![Series {
                    labels: vec![],
                    value: 3.0,
                }],
            },
        ]
    }

    #[test]
    fn text_format_types_counters_by_their_total_name_and_escapes() {
        let t = text(&fams());
        assert!(t.contains("# TYPE gpumem_ingest_reports_total counter\n"));
        assert!(t.contains("gpumem_used_bytes{gpu=\"0\",comm=\"a\\\"b\\\\c\\nd\"} 12000000000\n"));
    }

    #[test]
    fn openmetrics_keeps_the_names_and_adds_units() {
        let t = openmetrics(fams());
        assert!(t.contains("# TYPE gpumem_used_bytes gauge"), "{t}");
        assert!(t.contains("# UNIT gpumem_used_bytes bytes"), "{t}");
        assert!(t.contains("# TYPE gpumem_ingest_reports counter"), "{t}");
        assert!(t.contains("\ngpumem_ingest_reports_total 3"), "{t}");
        assert!(t.ends_with("# EOF\n"));
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
