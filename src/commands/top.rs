//! `top`: a live terminal view of the GPUs and their processes, fed by the exporter's own
//! sampler thread and engine. Fits an 80×24 terminal; works over ssh (plain ANSI).
//!
//! Keys: `s` cycles the sort (used, risk, pid), `/` filters the processes by text (Enter keeps
//! it, Esc clears it), `1`-`9` or the arrows select a GPU (only its processes are shown), `0`
//! or `a` shows all GPUs again, `q` (or Ctrl-C) quits.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table};
use ratatui::Frame;

use crate::analysis::oom::RiskLevel;
use crate::cli::TopArgs;
use crate::config::Config;
use crate::engine::current;
use crate::runtime::live::{source_clock, spawn_sampler, Shared};
use crate::snapshot::{GpuView, ProcessView, Snapshot};
use crate::source;
use crate::units::{GIB, MIB};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortBy {
    Used,
    Risk,
    Pid,
}

impl SortBy {
    fn next(self) -> Self {
        match self {
            SortBy::Used => SortBy::Risk,
            SortBy::Risk => SortBy::Pid,
            SortBy::Pid => SortBy::Used,
        }
    }
    fn as_str(self) -> &'static str {
        match self {
            SortBy::Used => "used",
            SortBy::Risk => "risk",
            SortBy::Pid => "pid",
        }
    }
}

/// What the user chose; the view is a function of it and the latest snapshot.
pub struct App {
    pub sort: SortBy,
    pub filter: String,
    pub editing: bool,
    /// Position of the selected GPU in the snapshot's list; None: all.
    pub selected: Option<usize>,
    pub quit: bool,
    /// Highest NVML used (or allocated) seen per (pid, uuid) while the view runs.
    peaks: HashMap<(u32, String), u64>,
}

impl Default for App {
    fn default() -> Self {
        App {
            sort: SortBy::Used,
            filter: String::new(),
            editing: false,
            selected: None,
            quit: false,
            peaks: HashMap::new(),
        }
    }
}

fn proc_used(p: &ProcessView) -> u64 {
    p.nvml_used
        .or(p.allocator.as_ref().map(|a| a.reserved_bytes))
        .unwrap_or(0)
}

impl App {
    pub fn key(&mut self, code: KeyCode, modifiers: KeyModifiers, gpus: usize) {
        if self.editing {
            match code {
                KeyCode::Enter => self.editing = false,
                KeyCode::Esc => {
                    self.editing = false;
                    self.filter.clear();
                }
                KeyCode::Backspace => {
                    self.filter.pop();
                }
                KeyCode::Char('c') if modifiers.contains(KeyModifiers::CONTROL) => self.quit = true,
                KeyCode::Char(c) if self.filter.chars().count() < 32 => self.filter.push(c),
                _ => {}
            }
            return;
        }
        match code {
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Esc => {
                self.selected = None;
                self.filter.clear();
            }
            KeyCode::Char('c') if modifiers.contains(KeyModifiers::CONTROL) => self.quit = true,
            KeyCode::Char('s') => self.sort = self.sort.next(),
            KeyCode::Char('/') => {
                self.editing = true;
                self.filter.clear();
            }
            KeyCode::Char('0') | KeyCode::Char('a') => self.selected = None,
            KeyCode::Char(c @ '1'..='9') => {
                let i = c as usize - '1' as usize;
                if i < gpus {
                    self.selected = Some(i);
                }
            }
            KeyCode::Down | KeyCode::Right => {
                self.selected = match self.selected {
                    None if gpus > 0 => Some(0),
                    Some(i) if i + 1 < gpus => Some(i + 1),
                    other => other,
                }
            }
            KeyCode::Up | KeyCode::Left => {
                self.selected = match self.selected {
                    Some(0) => None,
                    Some(i) => Some(i - 1),
                    None => None,
                }
            }
            _ => {}
        }
    }

    fn note_peaks(&mut self, snap: &Snapshot) {
        for p in &snap.processes {
            let e = self.peaks.entry((p.pid, p.uuid.clone())).or_insert(0);
            *e = (*e).max(proc_used(p));
        }
        if self.peaks.len() > 4096 {
            let live: std::collections::HashSet<(u32, &str)> = snap
                .processes
                .iter()
                .map(|p| (p.pid, p.uuid.as_str()))
                .collect();
            self.peaks
                .retain(|k, _| live.contains(&(k.0, k.1.as_str())));
        }
    }

    /// The processes shown, filtered and sorted.
    pub fn processes<'a>(&self, snap: &'a Snapshot) -> Vec<&'a ProcessView> {
        let uuid = self
            .selected
            .and_then(|i| snap.gpus.get(i))
            .map(|g| g.id.uuid.as_str());
        let needle = self.filter.to_lowercase();
        let mut v: Vec<&ProcessView> = snap
            .processes
            .iter()
            .filter(|p| uuid.is_none_or(|u| p.uuid == u))
            .filter(|p| {
                needle.is_empty()
                    || [
                        p.pid.to_string(),
                        p.comm.to_lowercase(),
                        p.identity.job.clone().unwrap_or_default().to_lowercase(),
                        p.phase.clone().unwrap_or_default().to_lowercase(),
                        p.pod
                            .as_ref()
                            .map(|x| format!("{}/{}", x.namespace, x.pod))
                            .unwrap_or_default()
                            .to_lowercase(),
                    ]
                    .iter()
                    .any(|s| s.contains(&needle))
            })
            .collect();
        match self.sort {
            SortBy::Used => {
                v.sort_by(|a, b| proc_used(b).cmp(&proc_used(a)).then(a.pid.cmp(&b.pid)))
            }
            SortBy::Risk => v.sort_by(|a, b| {
                b.risk
                    .cmp(&a.risk)
                    .then(proc_used(b).cmp(&proc_used(a)))
                    .then(a.pid.cmp(&b.pid))
            }),
            SortBy::Pid => v.sort_by_key(|p| p.pid),
        }
        v
    }
}

fn risk_style(r: RiskLevel) -> Style {
    match r {
        RiskLevel::Low => Style::default().fg(Color::Green),
        RiskLevel::Medium => Style::default().fg(Color::Yellow),
        RiskLevel::High => Style::default().fg(Color::LightRed),
        RiskLevel::Critical => Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
    }
}

fn short_name(name: &str) -> String {
    let n = name
        .trim_start_matches("NVIDIA ")
        .replace(" (simulated)", "");
    n.chars().take(14).collect()
}

fn slope_text(s: Option<f64>) -> String {
    match s {
        None => "-".into(),
        Some(s) => {
            let m = s * 60.0 / MIB;
            if m.abs() >= 10_000.0 {
                format!("{:+.0}G", m / 1024.0)
            } else {
                format!("{m:+.0}M")
            }
        }
    }
}

fn eta_text(e: Option<f64>) -> String {
    match e {
        None => "-".into(),
        Some(s) if s < 100.0 => format!("{s:.0}s"),
        Some(s) if s < 6000.0 => format!("{:.0}m", s / 60.0),
        Some(s) => format!("{:.0}h", s / 3600.0),
    }
}

fn bar(frac: f64, width: usize) -> String {
    let full = (frac.clamp(0.0, 1.0) * width as f64).round() as usize;
    format!("{}{}", "█".repeat(full), "·".repeat(width - full))
}

fn gpu_row(g: &GpuView, selected: bool) -> Row<'static> {
    let (used, total, frac) = match g.memory {
        Some(m) => (
            m.used as f64,
            m.total as f64,
            g.used_fraction().unwrap_or(0.0),
        ),
        None => (0.0, 0.0, 0.0),
    };
    let style = if selected {
        Style::default().add_modifier(Modifier::REVERSED)
    } else {
        Style::default()
    };
    let risk = if g.up { g.risk.as_str() } else { "down" };
    Row::new(vec![
        Span::raw(g.id.index.to_string()),
        Span::raw(short_name(&g.id.name)),
        Span::raw(format!("{:.1}/{:.0}", used / GIB, total / GIB)),
        Span::styled(
            format!("{} {:>3.0}%", bar(frac, 8), frac * 100.0),
            if frac >= 0.9 {
                Style::default().fg(Color::Red)
            } else {
                Style::default().fg(Color::Cyan)
            },
        ),
        Span::raw(
            g.peak_window
                .or(g.peak_lifetime)
                .map(|p| format!("{:.1}", p as f64 / GIB))
                .unwrap_or_else(|| "-".into()),
        ),
        Span::styled(risk.to_string(), risk_style(g.risk)),
        Span::raw(eta_text(g.eta_seconds)),
        Span::raw(slope_text(g.leak_slope)),
        Span::raw(
            g.fragmentation
                .map(|f| format!("{f:.2}"))
                .unwrap_or_else(|| "-".into()),
        ),
    ])
    .style(style)
}

pub fn draw(f: &mut Frame, app: &App, snap: &Snapshot) {
    let area = f.area();
    let gpu_rows = snap.gpus.len().clamp(1, 8) as u16;
    let [head, gpus_area, procs_area, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(gpu_rows + 2),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(area);

    let sel = match app.selected.and_then(|i| snap.gpus.get(i)) {
        Some(g) => format!("GPU {}", g.id.index),
        None => "all".into(),
    };
    let filter = if app.editing {
        format!("/{}_", app.filter)
    } else if app.filter.is_empty() {
        "-".into()
    } else {
        app.filter.clone()
    };
    f.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled("gpumem top", Style::default().add_modifier(Modifier::BOLD)),
            Span::raw(format!(
                " {} {} GPUs  sort: {}  filter: {}  show: {}",
                snap.source,
                snap.gpus.len(),
                app.sort.as_str(),
                filter,
                sel
            )),
        ])),
        head,
    );

    // 71 columns + 8 spaces: fits 80.
    let widths = [
        Constraint::Length(3),
        Constraint::Length(14),
        Constraint::Length(10),
        Constraint::Length(13),
        Constraint::Length(5),
        Constraint::Length(8),
        Constraint::Length(5),
        Constraint::Length(7),
        Constraint::Length(4),
    ];
    let rows: Vec<Row> = snap
        .gpus
        .iter()
        .enumerate()
        .map(|(i, g)| gpu_row(g, app.selected == Some(i)))
        .collect();
    let header = Row::new(vec![
        "GPU", "name", "used GiB", "memory", "peak", "risk", "ETA", "leak/m", "frag",
    ])
    .style(Style::default().add_modifier(Modifier::BOLD));
    f.render_widget(
        Table::new(rows, widths)
            .header(header)
            .column_spacing(1)
            .block(Block::default().borders(Borders::TOP).title(" GPUs ")),
        gpus_area,
    );

    let procs = app.processes(snap);
    let title = format!(
        " Processes ({}){} ",
        procs.len(),
        match app.selected.and_then(|i| snap.gpus.get(i)) {
            Some(g) => format!(" on GPU {}", g.id.index),
            None => String::new(),
        }
    );
    // 69 columns + 9 spaces: fits 80.
    let pwidths = [
        Constraint::Length(7),
        Constraint::Length(3),
        Constraint::Length(9),
        Constraint::Length(12),
        Constraint::Length(5),
        Constraint::Length(5),
        Constraint::Length(5),
        Constraint::Length(6),
        Constraint::Length(8),
        Constraint::Length(9),
    ];
    let prow = |p: &ProcessView| {
        let who = match (&p.identity.job, p.identity.rank) {
            (Some(j), Some(r)) => format!("{j}/{r}"),
            (Some(j), None) => j.clone(),
            _ => "-".into(),
        };
        let peak = app
            .peaks
            .get(&(p.pid, p.uuid.clone()))
            .copied()
            .unwrap_or(0);
        Row::new(vec![
            Span::raw(p.pid.to_string()),
            Span::raw(p.gpu.map(|g| g.to_string()).unwrap_or_else(|| "?".into())),
            Span::raw(p.comm.chars().take(9).collect::<String>()),
            Span::raw(who.chars().take(12).collect::<String>()),
            Span::raw(format!("{:.1}", proc_used(p) as f64 / GIB)),
            Span::raw(format!("{:.1}", peak as f64 / GIB)),
            Span::raw(
                p.allocator
                    .as_ref()
                    .map(|a| format!("{:.1}", a.allocated_bytes as f64 / GIB))
                    .unwrap_or_else(|| "-".into()),
            ),
            Span::styled(
                slope_text(p.leak_slope),
                if p.leak_suspected {
                    Style::default().fg(Color::Red)
                } else {
                    Style::default()
                },
            ),
            Span::styled(p.risk.as_str().to_string(), risk_style(p.risk)),
            Span::raw(
                p.phase
                    .clone()
                    .unwrap_or_else(|| "-".into())
                    .chars()
                    .take(9)
                    .collect::<String>(),
            ),
        ])
    };
    let prows: Vec<Row> = procs.iter().map(|p| prow(p)).collect();
    let pheader = Row::new(vec![
        "PID", "GPU", "comm", "job/rank", "used", "peak", "alloc", "leak/m", "risk", "phase",
    ])
    .style(Style::default().add_modifier(Modifier::BOLD));
    f.render_widget(
        Table::new(prows, pwidths)
            .header(pheader)
            .column_spacing(1)
            .block(Block::default().borders(Borders::TOP).title(title)),
        procs_area,
    );

    f.render_widget(
        Paragraph::new(Line::from(vec![Span::styled(
            if app.editing {
                "type to filter  Enter keep  Esc clear".to_string()
            } else {
                "q quit  s sort  / filter  1-9 GPU  0 all  ↑↓ select  (GiB)".to_string()
            },
            Style::default().fg(Color::DarkGray),
        )])),
        foot,
    );
}

/// Whether the screen is big enough to be of use.
fn too_small(area: Rect) -> bool {
    area.width < 60 || area.height < 12
}

pub fn run(cfg: &Config, args: TopArgs) -> anyhow::Result<ExitCode> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        anyhow::bail!("top needs a terminal on stdout; use `profile` or /metrics for scripts");
    }
    // No log output: it would scribble over the screen.
    let src = source::open(cfg, source::Reports::AtClientRate)?;
    let shared = Shared::new(cfg, src.kind());
    let sampler = spawn_sampler(
        shared.clone(),
        src,
        cfg.sample_interval,
        source_clock(cfg),
        None,
    );
    let mut terminal = ratatui::init();
    let mut app = App::default();
    let refresh = args.refresh;
    let mut last_draw: Option<Instant> = None;
    let result = (|| -> anyhow::Result<()> {
        loop {
            let snap: Arc<Snapshot> = current(&shared.engine);
            if last_draw.is_none_or(|t| t.elapsed() >= refresh) {
                app.note_peaks(&snap);
                terminal.draw(|f| {
                    if too_small(f.area()) {
                        f.render_widget(
                            Paragraph::new(
                                "gpumem top: the terminal is too small (60x12 at least); q quits",
                            ),
                            f.area(),
                        );
                    } else {
                        draw(f, &app, &snap)
                    }
                })?;
                last_draw = Some(Instant::now());
            }
            let wait = refresh
                .saturating_sub(last_draw.map(|t| t.elapsed()).unwrap_or_default())
                .min(Duration::from_millis(250));
            if event::poll(wait)? {
                match event::read()? {
                    Event::Key(k) if k.kind != KeyEventKind::Release => {
                        app.key(k.code, k.modifiers, snap.gpus.len());
                        last_draw = None;
                    }
                    Event::Resize(_, _) => last_draw = None,
                    _ => {}
                }
            }
            if app.quit {
                return Ok(());
            }
        }
    })();
    ratatui::restore();
    shared.stop.set();
    let _ = sampler.join();
    result.map(|()| ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Scenario;
    use crate::config::{SimConfig, SimGpuConfig};
    use crate::engine::Engine;
    use crate::source::sim::SimSource;
    use crate::source::Source;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    fn snapshot() -> Snapshot {
        let cfg = Config {
            sim: SimConfig {
                seed: 1,
                gpus: vec![
                    SimGpuConfig::new(Scenario::Steady),
                    SimGpuConfig::new(Scenario::Shared),
                ],
            },
            ..Config::default()
        };
        let mut s = SimSource::new(&cfg.sim);
        let mut e = Engine::new(&cfg, "sim");
        for i in 0..30 {
            e.observe(&s.sample(i as f64 * 0.5));
        }
        (*e.current()).clone()
    }

    fn screen(app: &App, snap: &Snapshot) -> String {
        let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
        t.draw(|f| draw(f, app, snap)).unwrap();
        let buf = t.backend().buffer().clone();
        (0..24)
            .map(|y| {
                (0..80)
                    .map(|x| buf[(x, y)].symbol().to_string())
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn fits_80x24_and_filters_by_gpu() {
        let snap = snapshot();
        let mut app = App::default();
        let s = screen(&app, &snap);
        assert!(
            s.contains("1000") && s.contains("1100") && s.contains("1101"),
            "{s}"
        );
        assert!(s.contains("q quit"), "{s}");
        app.key(KeyCode::Char('2'), KeyModifiers::NONE, snap.gpus.len());
        let s = screen(&app, &snap);
        assert!(!s.contains("1000 "), "{s}");
        assert!(s.contains("on GPU 1"), "{s}");
        app.key(KeyCode::Char('s'), KeyModifiers::NONE, 2);
        assert_eq!(app.sort, SortBy::Risk);
        app.key(KeyCode::Char('0'), KeyModifiers::NONE, 2);
        app.key(KeyCode::Char('/'), KeyModifiers::NONE, 2);
        for c in "1101".chars() {
            app.key(KeyCode::Char(c), KeyModifiers::NONE, 2);
        }
        app.key(KeyCode::Enter, KeyModifiers::NONE, 2);
        let procs = app.processes(&snap);
        assert_eq!(procs.len(), 1);
        assert_eq!(procs[0].pid, 1101);
        app.key(KeyCode::Char('q'), KeyModifiers::NONE, 2);
        assert!(app.quit);
    }
}
