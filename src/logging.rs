//! Logs on stderr in the Prometheus exporters' formats (`--log.format`): logfmt lines such as
//! `ts=2026-11-23T23:57:19.590Z level=info target=… msg="ingest listening" socket=/run/…`, or one
//! JSON object per line. No terminal colour codes in either: both are read by machines and by
//! people through files and pipes.

use std::fmt::{self, Write as _};
use std::time::SystemTime;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

use crate::config::Config;

/// Set up logging to stderr at the configured level and format (`RUST_LOG` wins over the
/// level when set).
pub fn init(cfg: &Config) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!("gpumem_exporter={},warn", cfg.log_level))
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .event_format(Format {
            json: cfg.log_format == "json",
        })
        .finish()
        .with(SpanFields)
        .try_init();
}

/// Keeps each span's fields for the events inside it, so that a line says whose it is (the
/// engine reads each process inside a span naming its pid and GPU).
struct SpanFields;

impl<S> Layer<S> for SpanFields
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut f = Fields::default();
        attrs.record(&mut f);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(f);
        }
    }
}

/// A field's value, typed where JSON can keep the type.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Text(String),
    Int(i128),
    Float(f64),
    Bool(bool),
}

/// The message and fields of one event, in the order they were given.
#[derive(Default)]
struct Fields {
    message: String,
    fields: Vec<(&'static str, Value)>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            self.fields
                .push((field.name(), Value::Text(format!("{value:?}"))));
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_string();
        } else {
            self.fields.push((field.name(), Value::Text(value.into())));
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.fields.push((field.name(), Value::Int(value.into())));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.fields.push((field.name(), Value::Int(value.into())));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.fields.push((field.name(), Value::Float(value)));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.fields.push((field.name(), Value::Bool(value)));
    }
}

struct Format {
    json: bool,
}

impl<S, N> FormatEvent<S, N> for Format
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut f = Fields::default();
        for span in ctx.event_scope().into_iter().flat_map(|s| s.from_root()) {
            if let Some(outer) = span.extensions().get::<Fields>() {
                f.fields.extend(outer.fields.iter().cloned());
            }
        }
        event.record(&mut f);
        let meta = event.metadata();
        let ts = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
        let level = meta.level().as_str().to_ascii_lowercase();
        let line = if self.json {
            json_line(&ts, &level, meta.target(), &f)
        } else {
            logfmt_line(&ts, &level, meta.target(), &f)
        };
        writeln!(writer, "{line}")
    }
}

fn logfmt_line(ts: &str, level: &str, target: &str, f: &Fields) -> String {
    let mut out = String::with_capacity(128);
    let _ = write!(out, "ts={ts} level={level} target={target} msg=");
    logfmt_value(&mut out, &f.message);
    for (k, v) in &f.fields {
        let _ = write!(out, " {k}=");
        match v {
            Value::Text(s) => logfmt_value(&mut out, s),
            Value::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Value::Float(x) => {
                let _ = write!(out, "{x}");
            }
            Value::Bool(b) => {
                let _ = write!(out, "{b}");
            }
        }
    }
    out
}

/// A value bare where logfmt readers take it whole, quoted and escaped otherwise.
fn logfmt_value(out: &mut String, s: &str) {
    let bare = !s.is_empty()
        && s.chars()
            .all(|c| c > ' ' && c != '"' && c != '=' && c != '\\' && c != '\u{7f}');
    if bare {
        out.push_str(s);
        return;
    }
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:04x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn json_line(ts: &str, level: &str, target: &str, f: &Fields) -> String {
    let mut m = serde_json::Map::new();
    m.insert("ts".into(), ts.into());
    m.insert("level".into(), level.into());
    m.insert("target".into(), target.into());
    m.insert("msg".into(), f.message.clone().into());
    for (k, v) in &f.fields {
        let v = match v {
            Value::Text(s) => serde_json::Value::from(s.clone()),
            Value::Int(i) => i64::try_from(*i)
                .map(serde_json::Value::from)
                .unwrap_or_else(|_| i.to_string().into()),
            Value::Float(x) => serde_json::Number::from_f64(*x)
                .map(serde_json::Value::Number)
                .unwrap_or_else(|| x.to_string().into()),
            Value::Bool(b) => (*b).into(),
        };
        m.insert((*k).to_string(), v);
    }
    serde_json::Value::Object(m).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields() -> Fields {
        Fields {
            message: "NVML initialised again".into(),
            fields: vec![
                ("gpus", Value::Int(8)),
                ("path", Value::Text("/run/gpumem/ingest.sock".into())),
                ("error", Value::Text("said \"no\"\nthen left".into())),
                ("ratio", Value::Float(0.25)),
                ("tls", Value::Bool(true)),
                ("empty", Value::Text(String::new())),
            ],
        }
    }

    #[test]
    fn logfmt_quotes_only_what_needs_it_and_escapes_the_rest() {
        let line = logfmt_line(
            "2026-11-23T23:57:19.590Z",
            "warn",
            "gpumem_exporter::x",
            &fields(),
        );
        assert_eq!(
            line,
            r#"ts=2026-11-23T23:57:19.590Z level=warn target=gpumem_exporter::x msg="NVML initialised again" gpus=8 path=/run/gpumem/ingest.sock error="said \"no\"\nthen left" ratio=0.25 tls=true empty="""#
        );
        assert!(!line.contains('\u{1b}'), "no escape sequences");
    }

    #[test]
    fn an_event_inside_a_span_carries_the_spans_fields() {
        use std::sync::{Arc, Mutex};
        #[derive(Clone, Default)]
        struct Buf(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buf {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf::default();
        let out = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(move || out.clone())
            .event_format(Format { json: false })
            .finish()
            .with(SpanFields);
        tracing::subscriber::with_default(subscriber, || {
            let _p = tracing::trace_span!("process", pid = 7u32, gpu = "GPU-0").entered();
            tracing::trace!(at = 3.0, "demand trend");
        });
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert!(
            text.contains(r#"msg="demand trend" pid=7 gpu=GPU-0 at=3"#),
            "{text}"
        );
    }

    #[test]
    fn json_lines_parse_and_keep_types() {
        let line = json_line("2026-11-23T23:57:19.590Z", "info", "t", &fields());
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["msg"], "NVML initialised again");
        assert_eq!(v["level"], "info");
        assert_eq!(v["gpus"], 8);
        assert_eq!(v["ratio"], 0.25);
        assert_eq!(v["tls"], true);
        assert_eq!(v["error"], "said \"no\"\nthen left");
        assert!(!line.contains('\n'), "one line per event");
    }
}
