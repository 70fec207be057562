//! Charts are real images: PNG files decode, have the expected size and show the data where the
//! SVG of the same chart puts it; SVG files parse and hold one polyline per series with one
//! point per sample.
//! Built with the `charts` feature only (a lean build refuses the chart flags: tests/lean.sh).
#![cfg(feature = "charts")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_gpumem-exporter");

fn replay(name: &str) -> String {
    let p = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/data/traces")).join(name);
    assert!(p.exists(), "trace {} is missing", p.display());
    format!("replay:{}", p.display())
}

fn run(args: &[&str]) -> Output {
    let o = Command::new(BIN)
        .args(args)
        .output()
        .expect("run the binary");
    assert!(
        o.status.success(),
        "{args:?}: {:?}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

struct Png {
    width: u32,
    height: u32,
    rgb: Vec<u8>,
}

impl Png {
    fn pixel(&self, x: i64, y: i64) -> Option<[u8; 3]> {
        if x < 0 || y < 0 || x >= self.width as i64 || y >= self.height as i64 {
            return None;
        }
        let i = (y as usize * self.width as usize + x as usize) * 3;
        Some([self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]])
    }

    /// Whether any pixel within one of (x, y) is not white.
    fn inked_near(&self, x: i64, y: i64) -> bool {
        (-1..=1).any(|dx| {
            (-1..=1).any(|dy| {
                self.pixel(x + dx, y + dy)
                    .is_some_and(|p| p != [255, 255, 255])
            })
        })
    }
}

fn read_png(p: &Path) -> Png {
    let bytes = std::fs::read(p).unwrap();
    assert_eq!(
        &bytes[..8],
        b"\x89PNG\r\n\x1a\n",
        "{} has no PNG signature",
        p.display()
    );
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgb);
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    buf.truncate(info.buffer_size());
    Png {
        width: info.width,
        height: info.height,
        rgb: buf,
    }
}

/// The points of every polyline in an SVG document, which must parse as XML.
fn polylines(p: &Path) -> (u32, u32, Vec<Vec<(f64, f64)>>) {
    let text = std::fs::read_to_string(p).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("the SVG parses");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    let w = root.attribute("width").unwrap().parse().unwrap();
    let h = root.attribute("height").unwrap().parse().unwrap();
    let lines = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline"))
        .map(|n| {
            n.attribute("points")
                .unwrap()
                .split_whitespace()
                .map(|pt| {
                    let (x, y) = pt.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect()
        })
        .collect();
    (w, h, lines)
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn profile_chart_png_and_svg_show_the_series() {
    let dir = tempfile::tempdir().unwrap();
    let (png_path, svg_path, json) = (
        dir.path().join("chart.png"),
        dir.path().join("chart.svg"),
        dir.path().join("profile.json"),
    );
    run(&[
        "profile",
        "--source",
        &replay("d1-oom.jsonl"),
        "--duration",
        "40",
        "--plot",
        png_path.to_str().unwrap(),
        "--plot",
        svg_path.to_str().unwrap(),
        "--output",
        json.to_str().unwrap(),
    ]);
    let report = read_json(&json);
    let n = report["devices"]["0"]["series"]["t"]
        .as_array()
        .unwrap()
        .len();
    assert!(n > 300, "{n} samples");

    // SVG: used, reserved and allocated, one point per sample.
    let (w, h, lines) = polylines(&svg_path);
    assert_eq!((w, h), (1200, 380));
    let data: Vec<&Vec<(f64, f64)>> = lines.iter().filter(|l| l.len() == n).collect();
    assert_eq!(data.len(), 3, "three series of {n} points");
    // Time runs left to right.
    for l in &data {
        assert!(l.windows(2).all(|p| p[1].0 >= p[0].0));
    }
    // d1-oom climbs: the used line ends higher (smaller y) than it starts.
    let used = data[0];
    assert!(
        used[n - 1].1 < used[n / 10].1 - 20.0,
        "{:?}",
        (used[0], used[n - 1])
    );

    // PNG: same size, white background, and ink along the used line where the SVG draws it
    // (both backends lay the chart out the same way).
    let png = read_png(&png_path);
    assert_eq!((png.width, png.height), (1200, 380));
    assert_eq!(png.pixel(2, 2), Some([255, 255, 255]));
    let step = (n / 100).max(1);
    let samples: Vec<&(f64, f64)> = used.iter().step_by(step).collect();
    let inked = samples
        .iter()
        .filter(|(x, y)| png.inked_near(x.round() as i64, y.round() as i64))
        .count();
    assert!(
        inked * 10 >= samples.len() * 9,
        "{inked} of {} points of the used line are drawn",
        samples.len()
    );
    // And the plot area is not inked everywhere: a point well above the line stays white.
    let (x, y) = used[n / 2];
    assert!(y > 60.0);
    let blank = (5..40)
        .filter(|dy| png.pixel(x as i64, (y as i64) - dy) == Some([255, 255, 255]))
        .count();
    assert!(blank > 10, "the chart is not just ink");
}

#[test]
fn profile_chart_on_the_simulator_has_a_panel_per_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("sim.svg");
    let png_path = dir.path().join("sim.png");
    let json = dir.path().join("sim.json");
    run(&[
        "profile",
        "--source",
        "sim",
        "--sample-interval",
        "50ms",
        "--duration",
        "1.5",
        "--devices",
        "1",
        "3",
        "--plot",
        svg.to_str().unwrap(),
        "--plot",
        png_path.to_str().unwrap(),
        "--output",
        json.to_str().unwrap(),
    ]);
    let report = read_json(&json);
    let (_, h, lines) = polylines(&svg);
    assert_eq!(h, 2 * 380);
    for k in ["1", "3"] {
        let n = report["devices"][k]["series"]["t"]
            .as_array()
            .unwrap()
            .len();
        assert!(
            lines.iter().filter(|l| l.len() == n).count() >= 3,
            "GPU {k}"
        );
    }
    let png = read_png(&png_path);
    assert_eq!((png.width, png.height), (1200, 760));
}

#[test]
fn fragment_chart_has_both_ratios_and_the_band_lines() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("frag.svg");
    let png_path = dir.path().join("frag.png");
    let json = dir.path().join("frag.json");
    run(&[
        "fragment",
        "--source",
        &replay("d1-frag.jsonl"),
        "--duration",
        "30",
        "--plot",
        svg.to_str().unwrap(),
        "--plot",
        png_path.to_str().unwrap(),
        "--output",
        json.to_str().unwrap(),
    ]);
    let report = read_json(&json);
    let s = &report["devices"]["0"]["series"];
    let defined = |k: &str| {
        s[k].as_array()
            .unwrap()
            .iter()
            .filter(|v| !v.is_null())
            .count()
    };
    let (w, h, lines) = polylines(&svg);
    assert_eq!((w, h), (1200, 380));
    // Each ratio is one line through all its defined points (null values would break it).
    let long: Vec<usize> = lines.iter().map(|l| l.len()).filter(|&n| n > 50).collect();
    assert!(long.contains(&defined("fragmentation")), "{long:?}");
    assert!(long.contains(&defined("cached_unallocated")), "{long:?}");
    // The three band lines: horizontal, across the plot, at 0.15 < 0.30 < 0.40 (y grows down).
    let mut bands: Vec<f64> = lines
        .iter()
        .filter(|l| l.len() == 2 && l[0].1 == l[1].1 && l[1].0 - l[0].0 > 800.0)
        .map(|l| l[0].1)
        .collect();
    bands.sort_by(f64::total_cmp);
    bands.dedup();
    assert!(bands.len() >= 3, "{bands:?}");
    let png = read_png(&png_path);
    assert_eq!((png.width, png.height), (1200, 380));
    let ink = png.rgb.chunks(3).filter(|p| *p != [255, 255, 255]).count();
    assert!(ink > 10_000, "{ink} inked pixels");
}

#[test]
fn sweep_heatmap_has_a_cell_per_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (i, (bs, trace)) in [("8", "d1-steady.jsonl"), ("16", "d1-oom.jsonl")]
        .iter()
        .enumerate()
    {
        for sl in ["128", "256", "512"] {
            let f = dir.path().join(format!("r{i}_{sl}.json"));
            run(&[
                "profile",
                "--source",
                &replay(trace),
                "--duration",
                "10",
                "--tag",
                &format!("batch_size={bs}"),
                "--tag",
                &format!("seq_len={sl}"),
                "--output",
                f.to_str().unwrap(),
            ]);
            files.push(f.display().to_string());
        }
    }
    let svg = dir.path().join("heat.svg");
    let png_path = dir.path().join("heat.png");
    let mut args = vec!["sweep"];
    args.extend(files.iter().map(|s| s.as_str()));
    args.extend([
        "--x",
        "batch_size",
        "--y",
        "seq_len",
        "--plot",
        svg.to_str().unwrap(),
        "--plot",
        png_path.to_str().unwrap(),
    ]);
    run(&args);
    let text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("the SVG parses");
    let labels: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .map(|t| t.trim().to_string())
        .collect();
    let cells = labels.iter().filter(|t| t.ends_with(" GiB")).count();
    assert_eq!(cells, 6, "{labels:?}");
    for v in ["8", "16", "128", "256", "512"] {
        assert!(
            labels.iter().any(|t| t == v),
            "axis label {v} in {labels:?}"
        );
    }
    let filled = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect"))
        .filter(|n| n.attribute("fill").is_some_and(|f| f != "#FFFFFF"))
        .count();
    assert!(filled >= 6, "{filled} filled cells");
    let png = read_png(&png_path);
    // 2 columns, 3 rows.
    assert_eq!((png.width, png.height), (480, 400));
    let ink = png.rgb.chunks(3).filter(|p| *p != [255, 255, 255]).count();
    assert!(
        ink * 4 > (png.width * png.height) as usize,
        "cells are filled"
    );
}

/// The replay's chart draws what the verdict says: one point per second of the recording for
/// the device's memory, the failing request and the failure, and the critical band starting
/// where the verdict's paging starts, in both panels.
#[test]
fn the_replay_chart_draws_the_recording_and_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("run.svg");
    let summary = dir.path().join("summary.json");
    let run_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/corpus/dev/c-batch-warmup");
    let mut args: Vec<String> = vec!["replay".into()];
    for e in std::fs::read_dir(&run_dir).unwrap() {
        let p = e.unwrap().path();
        if p.to_string_lossy().contains(".jsonl") {
            args.push(p.display().to_string());
        }
    }
    args.extend(
        [
            "--chart",
            svg.to_str().unwrap(),
            "--summary",
            summary.to_str().unwrap(),
        ]
        .map(String::from),
    );
    run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let s = read_json(&summary);
    let (start, end) = (s["start_t"].as_f64().unwrap(), s["end_t"].as_f64().unwrap());
    let critical = s["critical_from_t"].as_f64().expect("the run pages");

    let text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    let words: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .map(str::trim)
        .collect();
    for want in [
        "device used",
        "device free",
        "risk critical",
        "ETA",
        "time really left",
    ] {
        assert!(words.contains(&want), "no {want:?} in {words:?}");
    }
    assert!(
        words.iter().any(|w| w.starts_with("failing request (")),
        "{words:?}"
    );
    assert!(
        words.iter().any(|w| w.starts_with("out of memory at ")),
        "{words:?}"
    );

    // The device's memory: one point a second over the whole recording; it sets the scale.
    let (_, _, lines) = polylines(&svg);
    let used = lines.iter().max_by_key(|l| l.len()).unwrap();
    assert_eq!(used.len() as f64, end - start + 1.0, "one point a second");
    let px_per_s = (used[used.len() - 1].0 - used[0].0) / (end - start);
    let x_of = |t: f64| used[0].0 + (t - start) * px_per_s;
    // The critical bands, one per panel, start where the verdict says paging starts.
    let red: Vec<f64> = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("fill") == Some("#D62728"))
        // A panel's height, not a legend's swatch.
        .filter(|n| n.attribute("height").and_then(|h| h.parse::<f64>().ok()) > Some(100.0))
        .map(|n| n.attribute("x").unwrap().parse().unwrap())
        .collect();
    assert_eq!(red.len(), 2, "a critical band in each panel");
    for x in red {
        assert!(
            (x - x_of(critical)).abs() <= 2.0,
            "band at {x}, paging at {}",
            x_of(critical)
        );
    }
}
