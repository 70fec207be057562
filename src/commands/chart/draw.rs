//! The drawing, with plotters. Text is drawn with DejaVu Sans embedded in the binary (through
//! `ab_glyph`), so charts render the same on any machine, without fontconfig or system fonts.

use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::FontStyle;

use super::{heatmap_size, panels_size, Heatmap, ImageKind, Panel, Rgb};

impl From<Rgb> for RGBColor {
    fn from(c: Rgb) -> Self {
        RGBColor(c.0, c.1, c.2)
    }
}

fn fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
    });
}

/// Encode an RGB buffer as PNG.
fn write_png(path: &Path, buf: &[u8], (w, h): (u32, u32)) -> anyhow::Result<()> {
    let file = std::fs::File::create(path)
        .map_err(|e| anyhow::anyhow!("--plot: cannot write {}: {e}", path.display()))?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), w, h);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut writer = enc.write_header()?;
    writer.write_image_data(buf)?;
    writer.finish()?;
    Ok(())
}

/// Draw with `draw_png` on a bitmap and encode it, or with `draw_svg` into an SVG file.
macro_rules! render {
    ($path:expr, $kind:expr, $size:expr, |$root:ident| $body:expr) => {{
        let path: &Path = $path;
        let size: (u32, u32) = $size;
        match $kind {
            ImageKind::Png => {
                let mut buf = vec![255u8; size.0 as usize * size.1 as usize * 3];
                {
                    let $root = BitMapBackend::with_buffer(&mut buf, size).into_drawing_area();
                    $body?;
                }
                write_png(path, &buf, size)
            }
            ImageKind::Svg => {
                let mut text = String::new();
                {
                    let $root = SVGBackend::with_string(&mut text, size).into_drawing_area();
                    $body?;
                }
                std::fs::write(path, text)
                    .map_err(|e| anyhow::anyhow!("--plot: cannot write {}: {e}", path.display()))
            }
        }
    }};
}

/// The contiguous runs of defined values.
fn segments(points: &[(f64, Option<f64>)]) -> Vec<Vec<(f64, f64)>> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    for &(x, y) in points {
        match y {
            Some(y) if y.is_finite() => cur.push((x, y)),
            _ => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    p: &Panel,
    x_label: &str,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let x_max = if p.x_max > 0.0 { p.x_max } else { 1.0 };
    let y_max = if p.y_max > 0.0 { p.y_max } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(&p.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(|e| anyhow::anyhow!("chart: {e}"))?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(&p.y_label)
        .light_line_style(RGBColor(235, 235, 235))
        .label_style(("sans-serif", 13))
        .draw()
        .map_err(|e| anyhow::anyhow!("chart: {e}"))?;
    let mut legend: Vec<&str> = Vec::new();
    for b in &p.bands {
        let fill = RGBColor::from(b.color).mix(0.22).filled();
        let s = chart
            .draw_series(std::iter::once(Rectangle::new(
                [(b.x0, 0.0), (b.x1, y_max)],
                fill,
            )))
            .map_err(|e| anyhow::anyhow!("chart: {e}"))?;
        if !legend.contains(&b.label.as_str()) {
            legend.push(&b.label);
            s.label(b.label.clone())
                .legend(move |(x, y)| Rectangle::new([(x, y - 4), (x + 18, y + 4)], fill));
        }
    }
    for h in &p.hlines {
        let color = RGBColor::from(h.color);
        chart
            .draw_series(LineSeries::new(
                vec![(0.0, h.y), (x_max, h.y)],
                color.stroke_width(1),
            ))
            .map_err(|e| anyhow::anyhow!("chart: {e}"))?;
    }
    for m in &p.markers {
        let color = RGBColor::from(m.color).mix(0.6);
        chart
            .draw_series(LineSeries::new(
                vec![(m.x, 0.0), (m.x, y_max)],
                color.stroke_width(1),
            ))
            .map_err(|e| anyhow::anyhow!("chart: {e}"))?;
        if !m.label.is_empty() {
            // A marker near the right edge writes its label to its left, inside the plot.
            let anchor = if m.x > x_max * 0.7 {
                Pos::new(HPos::Right, VPos::Top)
            } else {
                Pos::new(HPos::Left, VPos::Top)
            };
            chart
                .draw_series(std::iter::once(Text::new(
                    m.label.clone(),
                    (m.x, y_max * 0.98),
                    ("sans-serif", 11)
                        .into_font()
                        .color(&RGBColor::from(m.color))
                        .pos(anchor),
                )))
                .map_err(|e| anyhow::anyhow!("chart: {e}"))?;
        }
    }
    for l in &p.lines {
        let color = RGBColor::from(l.color);
        let width = l.width;
        let mut labelled = false;
        for seg in segments(&l.points) {
            let s = chart
                .draw_series(LineSeries::new(seg, color.stroke_width(width)))
                .map_err(|e| anyhow::anyhow!("chart: {e}"))?;
            if !labelled && !l.label.is_empty() {
                s.label(l.label.clone()).legend(move |(x, y)| {
                    Rectangle::new([(x, y - 4), (x + 18, y + 4)], color.filled())
                });
                labelled = true;
            }
        }
    }
    // Labels of the reference lines last, so that the data does not hide them.
    for h in &p.hlines {
        chart
            .draw_series(std::iter::once(Text::new(
                h.label.clone(),
                (x_max * 0.005, h.y),
                ("sans-serif", 12)
                    .into_font()
                    .color(&RGBColor::from(h.color)),
            )))
            .map_err(|e| anyhow::anyhow!("chart: {e}"))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(|e| anyhow::anyhow!("chart: {e}"))?;
    Ok(())
}

fn draw_panels<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    panels: &[Panel],
    x_label: &str,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)
        .map_err(|e| anyhow::anyhow!("chart: {e}"))?;
    let areas = root.split_evenly((panels.len().max(1), 1));
    for (area, p) in areas.iter().zip(panels) {
        draw_panel(area, p, x_label)?;
    }
    root.present().map_err(|e| anyhow::anyhow!("chart: {e}"))?;
    Ok(())
}

/// Stacked time-series panels, one per GPU.
pub fn render_panels(
    path: &Path,
    kind: ImageKind,
    panels: &[Panel],
    x_label: &str,
) -> anyhow::Result<()> {
    fonts();
    render!(path, kind, panels_size(panels.len()), |root| draw_panels(
        root, panels, x_label
    ))
}

/// Viridis-like ramp from dark blue (0) to yellow (1).
pub fn ramp(f: f64) -> RGBColor {
    let stops = [
        (68.0, 1.0, 84.0),
        (59.0, 82.0, 139.0),
        (33.0, 145.0, 140.0),
        (94.0, 201.0, 98.0),
        (253.0, 231.0, 37.0),
    ];
    let f = f.clamp(0.0, 1.0) * (stops.len() - 1) as f64;
    let i = (f.floor() as usize).min(stops.len() - 2);
    let w = f - i as f64;
    let (a, b) = (stops[i], stops[i + 1]);
    let lerp = |x: f64, y: f64| (x + (y - x) * w).round() as u8;
    RGBColor(lerp(a.0, b.0), lerp(a.1, b.1), lerp(a.2, b.2))
}

fn draw_heatmap<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, h: &Heatmap) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)
        .map_err(|e| anyhow::anyhow!("chart: {e}"))?;
    let nx = h.cols.len().max(1);
    let ny = h.rows.len().max(1);
    let defined: Vec<f64> = h.values.iter().flatten().filter_map(|v| *v).collect();
    let lo = defined.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = defined.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let span = if hi > lo { hi - lo } else { 1.0 };
    let cols = h.cols.clone();
    let rows = h.rows.clone();
    let mut chart = ChartBuilder::on(&root)
        .caption(&h.title, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..nx as f64, 0.0..ny as f64)
        .map_err(|e| anyhow::anyhow!("chart: {e}"))?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc(&h.x_label)
        .y_desc(&h.y_label)
        .x_labels(nx * 2 + 1)
        .y_labels(ny * 2 + 1)
        .x_label_formatter(&|v| cell_label(&cols, *v))
        .y_label_formatter(&|v| cell_label(&rows, *v))
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(|e| anyhow::anyhow!("chart: {e}"))?;
    for (r, row) in h.values.iter().enumerate() {
        for (c, v) in row.iter().enumerate() {
            let (x0, y0) = (c as f64, r as f64);
            let (fill, label, text_color) = match v {
                Some(v) => {
                    let f = (v - lo) / span;
                    let text = if f > 0.6 { BLACK } else { WHITE };
                    (ramp(f), format!("{v:.1} {}", h.unit), text)
                }
                None => (RGBColor(230, 230, 230), "-".to_string(), BLACK),
            };
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x0 + 0.02, y0 + 0.02), (x0 + 0.98, y0 + 0.98)],
                    fill.filled(),
                )))
                .map_err(|e| anyhow::anyhow!("chart: {e}"))?;
            chart
                .draw_series(std::iter::once(Text::new(
                    label,
                    (x0 + 0.35, y0 + 0.55),
                    ("sans-serif", 16).into_font().color(&text_color),
                )))
                .map_err(|e| anyhow::anyhow!("chart: {e}"))?;
        }
    }
    root.present().map_err(|e| anyhow::anyhow!("chart: {e}"))?;
    Ok(())
}

/// A heatmap, as PNG or SVG.
pub fn render_heatmap(path: &Path, kind: ImageKind, h: &Heatmap) -> anyhow::Result<()> {
    fonts();
    render!(path, kind, heatmap_size(h), |root| draw_heatmap(root, h))
}

/// A heatmap axis names each cell at its centre (ticks at every half cell, the others blank).
fn cell_label(names: &[String], v: f64) -> String {
    let i = v.floor() as usize;
    if (v - v.floor() - 0.5).abs() < 1e-6 && i < names.len() {
        names[i].clone()
    } else {
        String::new()
    }
}
