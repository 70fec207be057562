//! The reports about reports: `compare` of two profiles and `sweep` over several.

use super::*;

#[test]
fn compare_two_profiles() {
    let dir = tempfile::tempdir().unwrap();
    let a = profile_tagged(&dir, "d1-steady.jsonl", &["config=base"], "a.json");
    let b = profile_tagged(&dir, "d1-oom.jsonl", &["config=big", "lr=3e-4"], "b.json");
    let o = out(&dir, "cmp.json");
    let r = run(&["compare", &a, &b, "--output", &o]);
    assert!(r.status.success(), "{}", text(&r));
    let table = String::from_utf8_lossy(&r.stdout);
    for want in [
        "peak used (NVML)",
        "GPU 0",
        "total (all GPUs)",
        "config",
        "base",
        "big",
    ] {
        assert!(table.contains(want), "{want} missing from\n{table}");
    }
    let j = read_json(Path::new(&o));
    assert_header_no_source(&j, "compare");
    let d = &j["devices"]["0"]["peak_used"];
    let (va, vb) = (d["a"].as_f64().unwrap(), d["b"].as_f64().unwrap());
    assert!(vb > va);
    assert_eq!(d["delta"].as_f64().unwrap(), vb - va);
    assert_eq!(j["totals"]["peak_used"]["delta"], d["delta"]);
    let lr = j["tags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["key"] == "lr")
        .unwrap();
    assert_eq!(lr["a"], Value::Null);
    assert_eq!(lr["b"], "3e-4");

    let r = run(&["compare", &a, &b, "--json"]);
    assert!(r.status.success());
    let j: Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(j["kind"], "compare");

    // Not a profile report.
    let r = run(&["compare", &a, &o]);
    assert_eq!(r.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&r.stderr).contains("not a profile report"));
}

#[test]
fn compare_and_sweep_take_only_the_gpus_both_reports_have() {
    let dir = tempfile::tempdir().unwrap();
    // Two GPUs (0: steady, 1: frag) against one (0: the OOM run).
    let two = profile_of(
        &dir,
        &["d1-steady.jsonl", "d1-frag.jsonl"],
        &[],
        &["bs=8", "sl=1"],
        "two.json",
    );
    let one = profile_of(&dir, &["d1-oom.jsonl"], &[], &["bs=16", "sl=1"], "one.json");
    let o = out(&dir, "cmp.json");
    let r = run(&["compare", &two, &one, "--output", &o]);
    assert!(r.status.success(), "{}", text(&r));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("GPUs 1 only in A") && err.contains("compared on GPUs 0 only"),
        "{err}"
    );
    let table = String::from_utf8_lossy(&r.stdout);
    assert!(
        table.contains("total (GPUs 0)") && !table.contains("GPU 1"),
        "{table}"
    );
    let j = read_json(Path::new(&o));
    assert_eq!(j["gpus"], serde_json::json!(["0"]));
    assert_eq!(j["only_in_a"], serde_json::json!(["1"]));
    assert_eq!(j["only_in_b"], serde_json::json!([]));
    assert!(j["devices"].get("1").is_none());
    // The total is GPU 0's, not GPU 0 and 1 of A against GPU 0 of B.
    assert_eq!(j["totals"]["peak_used"], j["devices"]["0"]["peak_used"]);

    // No GPU in common: refused, naming both sets.
    let gpu1 = profile_of(
        &dir,
        &["d1-steady.jsonl", "d1-frag.jsonl"],
        &["1"],
        &["bs=32", "sl=1"],
        "gpu1.json",
    );
    let r = run(&["compare", &gpu1, &one]);
    assert_eq!(r.status.code(), Some(1), "{}", text(&r));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("no GPU in common (A: GPUs 1; B: GPUs 0)"),
        "{err}"
    );

    // A sweep over both: peaks of GPU 0 only, said in the report and on stderr.
    let o = out(&dir, "sweep.json");
    let r = run(&[
        "sweep", &two, &one, "--x", "bs", "--y", "sl", "--output", &o,
    ]);
    assert!(r.status.success(), "{}", text(&r));
    assert!(
        String::from_utf8_lossy(&r.stderr).contains("GPUs 1 of"),
        "{}",
        text(&r)
    );
    let j = read_json(Path::new(&o));
    assert_eq!(j["gpus"], serde_json::json!(["0"]));
    assert!(j["note"].as_str().unwrap().contains("GPUs 0 only"));
    assert!(j["cells"].as_array().unwrap().iter().all(|c| c["gpu"] == 0));
    let r = run(&["sweep", &gpu1, &one, "--x", "bs", "--y", "sl"]);
    assert_eq!(r.status.code(), Some(1), "{}", text(&r));
    assert!(String::from_utf8_lossy(&r.stderr).contains("no GPU in common"));
}

fn assert_header_no_source(r: &Value, kind: &str) {
    assert_eq!(r["schema_version"], 1);
    assert_eq!(r["kind"], kind);
    assert!(r["generated_at"].as_str().unwrap().ends_with('Z'));
}

#[test]
fn sweep_tabulates_peaks_by_two_tags() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    let traces = [
        "d1-steady.jsonl",
        "d1-leak.jsonl",
        "d1-oom.jsonl",
        "d1-frag.jsonl",
    ];
    let mut i = 0;
    for bs in ["8", "16"] {
        for sl in ["128", "1024"] {
            let tags = [format!("batch_size={bs}"), format!("seq_len={sl}")];
            let tags: Vec<&str> = tags.iter().map(|s| s.as_str()).collect();
            files.push(profile_tagged(
                &dir,
                traces[i],
                &tags,
                &format!("r{i}.json"),
            ));
            i += 1;
        }
    }
    // A report without the tags is skipped, not fatal.
    files.push(profile_tagged(
        &dir,
        "d1-steady.jsonl",
        &["other=1"],
        "untagged.json",
    ));
    let o = out(&dir, "sweep.json");
    let mut args = vec!["sweep"];
    args.extend(files.iter().map(|s| s.as_str()));
    args.extend(["--x", "batch_size", "--y", "seq_len", "--output", &o]);
    let r = run(&args);
    assert!(r.status.success(), "{}", text(&r));
    let table = String::from_utf8_lossy(&r.stdout);
    assert!(table.contains("seq_len \\ batch_size"), "{table}");
    let j = read_json(Path::new(&o));
    assert_header_no_source(&j, "sweep");
    assert_eq!(j["x_values"], serde_json::json!(["8", "16"]));
    assert_eq!(j["y_values"], serde_json::json!(["128", "1024"]));
    let m = j["matrix"].as_array().unwrap();
    assert_eq!(m.len(), 2);
    for row in m {
        assert_eq!(row.as_array().unwrap().len(), 2);
        assert!(row
            .as_array()
            .unwrap()
            .iter()
            .all(|v| v.as_u64().unwrap() > 0));
    }
    // The third report (batch_size=16, seq_len=128) replays d1-oom: the biggest peak.
    let max = m
        .iter()
        .flat_map(|r| r.as_array().unwrap())
        .map(|v| v.as_u64().unwrap())
        .max();
    assert_eq!(m[0][1].as_u64(), max);
    assert_eq!(j["skipped"].as_array().unwrap().len(), 1);

    let r = run(&["sweep", &files[0], "--x", "nope", "--y", "seq_len"]);
    assert_eq!(r.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&r.stderr).contains("nope"));
}
