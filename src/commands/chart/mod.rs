//! Charts of the report commands, as PNG (bitmap, encoded with `png`) or SVG: what a chart
//! holds (panels, lines, bands, heatmaps; no drawing library in sight), and the drawing
//! itself in `draw`, built with the `charts` feature. A lean build (the exporter a cluster
//! runs) has no charts: the chart flags are refused before anything runs.

#[cfg(not(feature = "charts"))]
use std::path::Path;

/// Chart formats, from the file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageKind {
    Png,
    Svg,
}

/// A colour, red green blue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rgb(pub u8, pub u8, pub u8);

pub const BLUE: Rgb = Rgb(31, 119, 180);
pub const ORANGE: Rgb = Rgb(255, 127, 14);
pub const GREEN: Rgb = Rgb(44, 160, 44);
pub const RED: Rgb = Rgb(214, 39, 40);
pub const PURPLE: Rgb = Rgb(148, 103, 189);
pub const GREY: Rgb = Rgb(150, 150, 150);
pub const YELLOW: Rgb = Rgb(200, 160, 0);
pub const INK: Rgb = Rgb(30, 30, 30);

const PANEL_WIDTH: u32 = 1200;
const PANEL_HEIGHT: u32 = 380;

/// One line of a panel; `None` values break it.
pub struct Line {
    pub label: String,
    pub color: Rgb,
    pub width: u32,
    pub points: Vec<(f64, Option<f64>)>,
}

/// A horizontal reference line (capacity, a band's threshold).
pub struct HLine {
    pub y: f64,
    pub label: String,
    pub color: Rgb,
}

/// A vertical marker (a phase change, an event).
#[derive(Clone)]
pub struct Marker {
    pub x: f64,
    pub label: String,
    pub color: Rgb,
}

/// A shaded stretch of time behind the data (e.g. a risk level that held); one legend entry
/// per label.
#[derive(Clone)]
pub struct Band {
    pub x0: f64,
    pub x1: f64,
    pub label: String,
    pub color: Rgb,
}

pub struct Panel {
    pub title: String,
    pub y_label: String,
    pub x_max: f64,
    pub y_max: f64,
    pub lines: Vec<Line>,
    pub hlines: Vec<HLine>,
    pub markers: Vec<Marker>,
    pub bands: Vec<Band>,
}

/// Pixel size of a chart of `n` stacked panels.
pub fn panels_size(n: usize) -> (u32, u32) {
    (PANEL_WIDTH, PANEL_HEIGHT * n.max(1) as u32)
}

/// A heatmap: `values[row][col]`, rows bottom to top as `rows` lists them.
pub struct Heatmap {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub cols: Vec<String>,
    pub rows: Vec<String>,
    pub values: Vec<Vec<Option<f64>>>,
    /// Unit of the cell labels, e.g. "GiB".
    pub unit: String,
}

/// Pixel size of a heatmap: a column per value of one parameter, a row per value of the other.
pub fn heatmap_size(h: &Heatmap) -> (u32, u32) {
    let w = (140 * h.cols.len().max(1) as u32 + 160).clamp(480, 2400);
    let hgt = (80 * h.rows.len().max(1) as u32 + 160).clamp(360, 2000);
    (w, hgt)
}

/// Whether this build draws charts.
pub const AVAILABLE: bool = cfg!(feature = "charts");

#[cfg(feature = "charts")]
mod draw;
#[cfg(feature = "charts")]
pub use draw::{render_heatmap, render_panels};

#[cfg(not(feature = "charts"))]
fn no_charts() -> anyhow::Error {
    anyhow::anyhow!("this build draws no charts (it was built without the `charts` feature)")
}

/// Stacked time-series panels: not in this build.
#[cfg(not(feature = "charts"))]
pub fn render_panels(_: &Path, _: ImageKind, _: &[Panel], _: &str) -> anyhow::Result<()> {
    Err(no_charts())
}

/// A heatmap: not in this build.
#[cfg(not(feature = "charts"))]
pub fn render_heatmap(_: &Path, _: ImageKind, _: &Heatmap) -> anyhow::Result<()> {
    Err(no_charts())
}
