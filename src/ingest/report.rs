//! The allocator report body (docs/ingest.md): parsing and validation. Pure: bytes in, a
//! validated report or a rejection that names the field out.

use crate::model::{RejectReason, Rejection, Report, REPORT_VERSION};

/// 2^53: far beyond any GPU's memory; larger byte counts are absurd, not big.
pub const MAX_BYTES: u64 = 1 << 53;
const MAX_DEVICES: usize = 64;
const MAX_EVENTS: usize = 256;
const MAX_COMPONENTS: usize = 32;
const MAX_RANK: u64 = 1_000_000;
/// Allocated above reserved by more than this is an inconsistent report.
const ALLOCATED_SLACK: u64 = 1 << 20;

fn invalid(message: String) -> Rejection {
    Rejection::new(RejectReason::InvalidValue, message)
}

/// Parse and validate a body. Unknown members are ignored (newer clients, older exporters).
pub fn parse(body: &[u8]) -> Result<Report, Rejection> {
    // Read the version first so that a future body gets "unsupported version", not a
    // confusing complaint about a field it renamed.
    let probe: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| Rejection::new(RejectReason::Malformed, format!("body is not JSON: {e}")))?;
    let Some(obj) = probe.as_object() else {
        return Err(Rejection::new(
            RejectReason::Malformed,
            "body must be a JSON object",
        ));
    };
    match obj.get("version") {
        None => {
            return Err(Rejection::new(
                RejectReason::Malformed,
                "missing field `version` (this exporter reads version 1)",
            ))
        }
        Some(v) if v.as_u64() == Some(REPORT_VERSION) => {}
        Some(v) => {
            return Err(Rejection::new(
                RejectReason::UnsupportedVersion,
                format!("unsupported version {v}: this exporter reads version {REPORT_VERSION}"),
            ))
        }
    }
    let mut report: Report = serde_path_to_error::deserialize(probe).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let text = inner.to_string();
        // A number where an integer belongs is a number out of range, like `-1`: the right
        // JSON type, a value this field cannot take. A string or an object there is malformed.
        if text.starts_with("invalid type: floating point") {
            let shown = text.split('`').nth(1).unwrap_or("?");
            return Rejection::new(
                RejectReason::InvalidValue,
                format!("{path}: {shown} is not a whole number as this field takes it; send an integer without a fraction or an exponent (1000, not 1000.0 or 1e3)"),
            );
        }
        let reason = if text.contains("invalid value") {
            RejectReason::InvalidValue
        } else {
            RejectReason::Malformed
        };
        Rejection::new(reason, format!("{path}: {inner}"))
    })?;
    validate(&mut report)?;
    Ok(report)
}

/// Keep label values printable and short; a label is no place for a payload. Control
/// characters go, and so do the invisible format characters (Unicode category Cf) and the line
/// and paragraph separators: a right-to-left override (U+202E) would make a dashboard show
/// `gpj` for `jpg`, a zero-width space two identical-looking values.
pub fn sanitize_label(value: &str, max_chars: usize) -> String {
    value
        .chars()
        .filter(|&c| !c.is_control() && !is_format(c))
        .take(max_chars)
        .collect()
}

/// Unicode's format characters (general category Cf, Unicode 15), and U+2028/U+2029.
fn is_format(c: char) -> bool {
    matches!(
        c as u32,
        0x00AD
            | 0x0600..=0x0605
            | 0x061C
            | 0x06DD
            | 0x070F
            | 0x0890..=0x0891
            | 0x08E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x2028..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    )
}

fn check_bytes(path: &str, v: Option<u64>) -> Result<(), Rejection> {
    match v {
        Some(v) if v > MAX_BYTES => Err(invalid(format!(
            "{path}: {v} is absurd (more than 2^53 bytes)"
        ))),
        _ => Ok(()),
    }
}

/// A count (segments, retries, OOMs) within what a process could ever reach.
fn check_count(path: &str, v: Option<u64>) -> Result<(), Rejection> {
    match v {
        Some(v) if v > MAX_BYTES => Err(invalid(format!("{path}: {v} is absurd (more than 2^53)"))),
        _ => Ok(()),
    }
}

fn validate(r: &mut Report) -> Result<(), Rejection> {
    if r.devices.len() > MAX_DEVICES {
        return Err(invalid(format!(
            "devices: {} items, at most {MAX_DEVICES}",
            r.devices.len()
        )));
    }
    if r.events.len() > MAX_EVENTS {
        return Err(invalid(format!(
            "events: {} items, at most {MAX_EVENTS}",
            r.events.len()
        )));
    }
    for (name, v) in [
        ("identity.rank", r.identity.rank),
        ("identity.local_rank", r.identity.local_rank),
        ("identity.world_size", r.identity.world_size),
    ] {
        if let Some(v) = v {
            if v > MAX_RANK {
                return Err(invalid(format!(
                    "{name}: {v} is out of range 0..{MAX_RANK}"
                )));
            }
        }
    }
    if let Some(job) = &r.identity.job {
        r.identity.job = Some(sanitize_label(job, 128));
    }
    let mut seen_uuids: Vec<String> = Vec::with_capacity(r.devices.len());
    for (i, d) in r.devices.iter_mut().enumerate() {
        let p = |f: &str| format!("devices[{i}].{f}");
        let uuid = sanitize_label(d.uuid.trim(), 96);
        if uuid.is_empty() {
            return Err(invalid(format!("{}: must not be empty", p("uuid"))));
        }
        d.uuid = uuid;
        if seen_uuids.contains(&d.uuid) {
            return Err(invalid(format!(
                "{}: {} appears twice in one report",
                p("uuid"),
                d.uuid
            )));
        }
        seen_uuids.push(d.uuid.clone());
        if let Some(a) = &d.allocator {
            d.allocator = Some(sanitize_label(a, 32));
        }
        for (f, v) in [
            ("allocated_bytes", Some(d.allocated_bytes)),
            ("reserved_bytes", Some(d.reserved_bytes)),
            ("active_bytes", d.active_bytes),
            ("inactive_split_bytes", d.inactive_split_bytes),
            ("allocated_peak_bytes", d.allocated_peak_bytes),
            ("reserved_peak_bytes", d.reserved_peak_bytes),
            ("largest_free_block_bytes", d.largest_free_block_bytes),
        ] {
            check_bytes(&p(f), v)?;
        }
        for (f, v) in [
            ("segments", d.segments),
            ("alloc_retries", d.alloc_retries),
            ("ooms", d.ooms),
        ] {
            check_count(&p(f), v)?;
        }
        if d.allocated_bytes > d.reserved_bytes.saturating_add(ALLOCATED_SLACK) {
            return Err(invalid(format!(
                "{}: allocated_bytes {} exceeds reserved_bytes {}",
                p("allocated_bytes"),
                d.allocated_bytes,
                d.reserved_bytes
            )));
        }
    }
    if let Some(Some(phase)) = &r.phase {
        r.phase = Some(Some(sanitize_label(phase, 64)).filter(|s| !s.is_empty()));
    }
    for (i, e) in r.events.iter_mut().enumerate() {
        check_bytes(&format!("events[{i}].request_bytes"), e.request_bytes)?;
        check_bytes(&format!("events[{i}].free_bytes"), e.free_bytes)?;
        e.name = sanitize_label(&e.name, 64);
        if let Some(m) = &e.message {
            e.message = Some(sanitize_label(m, 1024));
        }
    }
    if let Some(components) = &mut r.components {
        if components.len() > MAX_COMPONENTS {
            return Err(invalid(format!(
                "components: {} items, at most {MAX_COMPONENTS}",
                components.len()
            )));
        }
        for (i, c) in components.iter_mut().enumerate() {
            c.component = sanitize_label(&c.component, 32);
            if c.component.is_empty() {
                return Err(invalid(format!(
                    "components[{i}].component: must not be empty"
                )));
            }
            for (f, v) in [
                ("parameters_bytes", c.parameters_bytes),
                ("gradients_bytes", c.gradients_bytes),
                ("optimizer_bytes", c.optimizer_bytes),
            ] {
                check_bytes(&format!("components[{i}].{f}"), v)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::EventKind;

    fn ok_body() -> serde_json::Value {
        serde_json::json!({
            "version": 1,
            "identity": {"job": "j", "rank": 3},
            "devices": [{"uuid": "GPU-1", "allocated_bytes": 10, "reserved_bytes": 20,
                          "largest_free_block_bytes": 5}],
            "phase": "forward",
            "events": [{"kind": "mark", "name": "loaded"}],
            "unknown_member": {"is": "ignored"}
        })
    }

    fn parse_value(v: serde_json::Value) -> Result<Report, Rejection> {
        parse(serde_json::to_vec(&v).unwrap().as_slice())
    }

    #[test]
    fn accepts_a_valid_body_and_ignores_unknown_members() {
        let r = parse_value(ok_body()).unwrap();
        assert_eq!(r.devices[0].reserved_bytes, 20);
        assert_eq!(r.identity.rank, Some(3));
        assert_eq!(r.phase, Some(Some("forward".to_string())));
        let mut v = ok_body();
        v["phase"] = serde_json::Value::Null;
        assert_eq!(parse_value(v).unwrap().phase, Some(None));
        let mut v = ok_body();
        v.as_object_mut().unwrap().remove("phase");
        assert_eq!(parse_value(v).unwrap().phase, None);
        assert_eq!(r.events[0].kind, EventKind::Mark);
    }

    #[test]
    fn rejects_each_kind_of_bad_input_with_the_field_named() {
        let e = parse(b"{not json").unwrap_err();
        assert_eq!(e.reason, RejectReason::Malformed);

        let mut v = ok_body();
        v["version"] = 2.into();
        assert_eq!(
            parse_value(v).unwrap_err().reason,
            RejectReason::UnsupportedVersion
        );

        let mut v = ok_body();
        v["devices"][0]["allocated_bytes"] = "ten".into();
        let e = parse_value(v).unwrap_err();
        assert_eq!(e.reason, RejectReason::Malformed);
        assert!(
            e.message.contains("devices[0].allocated_bytes"),
            "{}",
            e.message
        );

        let mut v = ok_body();
        v["devices"][0]["reserved_bytes"] = (-5).into();
        let e = parse_value(v).unwrap_err();
        assert!(
            e.message.contains("devices[0].reserved_bytes"),
            "{}",
            e.message
        );

        let mut v = ok_body();
        v["devices"][0]["reserved_bytes"] = (1u64 << 60).into();
        v["devices"][0]["allocated_bytes"] = 0.into();
        let e = parse_value(v).unwrap_err();
        assert_eq!(e.reason, RejectReason::InvalidValue);
        assert!(e.message.contains("absurd"));

        let mut v = ok_body();
        v["devices"][0]["allocated_bytes"] = (100u64 << 20).into();
        let e = parse_value(v).unwrap_err();
        assert_eq!(e.reason, RejectReason::InvalidValue);

        let mut v = ok_body();
        v["devices"][0]["uuid"] = "".into();
        assert_eq!(
            parse_value(v).unwrap_err().reason,
            RejectReason::InvalidValue
        );

        let mut v = ok_body();
        v.as_object_mut().unwrap().remove("devices");
        let e = parse_value(v).unwrap_err();
        assert!(e.message.contains("devices"), "{}", e.message);
    }

    #[test]
    fn an_oom_event_carries_the_failing_request_and_the_free_bytes() {
        let mut v = ok_body();
        v["events"] = serde_json::json!([{"kind": "oom", "name": "GPU-1",
            "request_bytes": 2059403264u64, "free_bytes": 1750138880u64}]);
        let r = parse_value(v.clone()).unwrap();
        assert_eq!(r.events[0].kind, EventKind::Oom);
        assert_eq!(r.events[0].request_bytes, Some(2059403264));
        assert_eq!(r.events[0].free_bytes, Some(1750138880));
        v["events"][0]["free_bytes"] = (1u64 << 60).into();
        let e = parse_value(v).unwrap_err();
        assert_eq!(e.reason, RejectReason::InvalidValue);
        assert!(e.message.contains("events[0].free_bytes"), "{}", e.message);
    }

    #[test]
    fn label_values_are_cleaned_and_capped() {
        let mut v = ok_body();
        v["identity"]["job"] = "a\u{0}b\nc".repeat(100).into();
        let r = parse_value(v).unwrap();
        let job = r.identity.job.unwrap();
        assert!(job.chars().all(|c| !c.is_control()));
        assert_eq!(job.chars().count(), 128);
    }

    #[test]
    fn a_number_an_integer_field_cannot_take_is_an_invalid_value_however_it_is_written() {
        for (raw, shown) in [
            ("1000.0", "1000"),
            ("2e3", "2000"),
            ("0.5", "0.5"),
            ("-1", "-1"),
        ] {
            let body = format!(
                r#"{{"version":1,"devices":[{{"uuid":"GPU-1","allocated_bytes":{raw},"reserved_bytes":20}}]}}"#
            );
            let e = parse(body.as_bytes()).unwrap_err();
            assert_eq!(e.reason, RejectReason::InvalidValue, "{raw}: {}", e.message);
            assert!(
                e.message.starts_with("devices[0].allocated_bytes: ") && e.message.contains(shown),
                "{raw}: {}",
                e.message
            );
        }
        // The wrong JSON type is still malformed.
        let e = parse(br#"{"version":1,"devices":[{"uuid":"GPU-1","allocated_bytes":"1000","reserved_bytes":20}]}"#)
            .unwrap_err();
        assert_eq!(e.reason, RejectReason::Malformed);
    }

    #[test]
    fn an_absurd_count_is_not_called_bytes() {
        let mut v = ok_body();
        v["devices"][0]["segments"] = (1u64 << 62).into();
        let e = parse_value(v).unwrap_err();
        assert_eq!(e.reason, RejectReason::InvalidValue);
        assert!(e.message.contains("devices[0].segments"), "{}", e.message);
        assert!(
            e.message.contains("more than 2^53") && !e.message.contains("bytes"),
            "{}",
            e.message
        );
    }

    #[test]
    fn bidi_and_other_invisible_characters_leave_label_values() {
        let mut v = ok_body();
        v["identity"]["job"] =
            "evil\u{202E}gpj.exe\u{200B}\u{2066}x\u{FEFF}\u{2028}y\u{E0041}".into();
        v["phase"] = "fwd\u{200D}".into();
        let r = parse_value(v).unwrap();
        assert_eq!(r.identity.job.as_deref(), Some("evilgpj.exexy"));
        assert_eq!(r.phase, Some(Some("fwd".to_string())));
        // Letters of every script stay.
        assert_eq!(sanitize_label("训练-σ-עברית", 64), "训练-σ-עברית");
    }

    #[test]
    fn a_pid_in_the_body_is_not_part_of_the_report() {
        let mut v = ok_body();
        v["pid"] = 1.into();
        let r = parse_value(v).unwrap();
        // The report type has no pid at all: attribution comes from the transport.
        let back = serde_json::to_value(&r).unwrap();
        assert!(back.get("pid").is_none());
    }

    proptest::proptest! {
        #[test]
        fn parser_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let _ = parse(&bytes);
        }

        #[test]
        fn parser_never_panics_on_arbitrary_json_numbers(a in proptest::num::i64::ANY, b in proptest::num::f64::ANY, s in ".{0,80}") {
            let v = serde_json::json!({"version": 1, "identity": {"job": s, "rank": a},
                "devices": [{"uuid": "GPU-x", "allocated_bytes": a, "reserved_bytes": b}]});
            if let Ok(r) = parse_value(v) {
                proptest::prop_assert!(r.devices[0].allocated_bytes <= r.devices[0].reserved_bytes + (1 << 20));
            }
        }
    }
}
