//! The terminal interface (ratatui): per GPU a memory gauge, utilisation,
//! temperature, power, growth and forecast, a history sparkline; per process
//! its PID, user, memory, growth, forecast and command.
//!
//! [`App`] is plain state and [`draw`] a pure function of it, so rendering is
//! tested on ratatui's `TestBackend`; [`run`] owns the terminal. ratatui's
//! `init` restores the terminal on panic, and the loop stops (restoring it)
//! on `q`, Esc, Ctrl-C, or when the caller's stop flag is set by a signal.

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use oomkit_core::Bytes;
use oomkit_nvml::GpuReader;
use ratatui::Frame;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Gauge, Paragraph, Row, Sparkline, Table};

use crate::render;
use crate::sample::{GpuSample, ProcessSample, Sample, Tracker};

/// Alerts remembered for the status line.
pub const ALERTS_KEPT: usize = 16;

/// Points of history kept per GPU for the sparkline.
pub const HISTORY: usize = 240;

/// Process table order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sort {
    /// Largest memory first.
    Memory,
    /// Fastest growth first.
    Growth,
    /// Lowest PID first.
    Pid,
}

impl Sort {
    fn next(self) -> Sort {
        match self {
            Sort::Memory => Sort::Growth,
            Sort::Growth => Sort::Pid,
            Sort::Pid => Sort::Memory,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Sort::Memory => "memory",
            Sort::Growth => "growth",
            Sort::Pid => "pid",
        }
    }
}

/// What a key asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Keep going.
    Continue,
    /// Leave the TUI.
    Quit,
}

/// Everything the screen shows.
#[derive(Debug)]
pub struct App {
    /// The sample on screen (frozen while paused).
    pub sample: Option<Sample>,
    /// Used-memory history per GPU (index, MIG device), oldest first.
    pub history: BTreeMap<(u32, Option<u32>), Vec<u64>>,
    /// Driver version for the header.
    pub driver: Option<String>,
    /// Sampling interval, for the header.
    pub interval: Duration,
    /// Process order.
    pub sort: Sort,
    /// Case-insensitive substring kept in the process table (command or user).
    pub filter: String,
    /// True while the filter is being typed.
    pub editing: bool,
    /// True while the display is frozen (sampling, logs and metrics go on).
    pub paused: bool,
    /// The GPU shown alone, or all.
    pub gpu: Option<u32>,
    /// Alerts fired (`--alert-at`), newest last: the status line shows the
    /// newest, never written over the view.
    pub alerts: Vec<String>,
}

impl App {
    /// An empty screen.
    pub fn new(driver: Option<String>, interval: Duration) -> Self {
        App {
            sample: None,
            history: BTreeMap::new(),
            driver,
            interval,
            sort: Sort::Memory,
            filter: String::new(),
            editing: false,
            paused: false,
            gpu: None,
            alerts: Vec::new(),
        }
    }

    /// Records alerts for the status line (the last [`ALERTS_KEPT`]).
    pub fn alert(&mut self, messages: Vec<String>) {
        self.alerts.extend(messages);
        let extra = self.alerts.len().saturating_sub(ALERTS_KEPT);
        self.alerts.drain(..extra);
    }

    /// Takes a new sample (ignored while paused).
    pub fn update(&mut self, sample: Sample) {
        if self.paused {
            return;
        }
        for g in &sample.gpus {
            if let Some(used) = g.memory_used_bytes {
                let h = self.history.entry((g.index, g.mig)).or_default();
                h.push(used);
                if h.len() > HISTORY {
                    h.remove(0);
                }
            }
        }
        self.sample = Some(sample);
    }

    /// Handles one key.
    pub fn key(&mut self, code: KeyCode, modifiers: KeyModifiers) -> Action {
        if modifiers.contains(KeyModifiers::CONTROL) && code == KeyCode::Char('c') {
            return Action::Quit;
        }
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
                KeyCode::Char(c) => self.filter.push(c),
                _ => {}
            }
            return Action::Continue;
        }
        match code {
            KeyCode::Char('q') | KeyCode::Esc => return Action::Quit,
            KeyCode::Char('p') | KeyCode::Char(' ') => self.paused = !self.paused,
            KeyCode::Char('s') => self.sort = self.sort.next(),
            KeyCode::Char('/') => {
                self.editing = true;
                self.filter.clear();
            }
            KeyCode::Char('a') => self.gpu = None,
            KeyCode::Char(c @ '0'..='9') => {
                self.gpu = c.to_digit(10);
            }
            KeyCode::Tab | KeyCode::Char('g') => self.gpu = self.next_gpu(),
            _ => {}
        }
        Action::Continue
    }

    fn next_gpu(&self) -> Option<u32> {
        let indices: Vec<u32> = self
            .sample
            .as_ref()
            .map(|s| s.gpus.iter().map(|g| g.index).collect())
            .unwrap_or_default();
        match self.gpu {
            None => indices.first().copied(),
            Some(cur) => indices.iter().copied().find(|&i| i > cur),
        }
    }

    fn shown_gpus(&self) -> Vec<&GpuSample> {
        self.sample
            .as_ref()
            .map(|s| {
                s.gpus
                    .iter()
                    .filter(|g| self.gpu.is_none_or(|i| g.index == i))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn processes(&self) -> Vec<(u32, &ProcessSample)> {
        let needle = self.filter.to_lowercase();
        let mut rows: Vec<(u32, &ProcessSample)> = self
            .shown_gpus()
            .into_iter()
            .flat_map(|g| g.processes.iter().map(move |p| (g.index, p)))
            .filter(|(_, p)| {
                needle.is_empty()
                    || render::command(p).to_lowercase().contains(&needle)
                    || p.user
                        .as_deref()
                        .is_some_and(|u| u.to_lowercase().contains(&needle))
                    || p.pid.to_string().contains(&needle)
            })
            .collect();
        match self.sort {
            Sort::Memory => rows.sort_by_key(|r| std::cmp::Reverse(r.1.used_bytes)),
            Sort::Growth => rows.sort_by(|a, b| {
                let ga = a.1.growth_bytes_per_s.unwrap_or(f64::MIN);
                let gb = b.1.growth_bytes_per_s.unwrap_or(f64::MIN);
                gb.total_cmp(&ga)
            }),
            Sort::Pid => rows.sort_by_key(|r| r.1.pid),
        }
        rows
    }
}

/// Draws the whole screen.
pub fn draw(frame: &mut Frame, app: &App) {
    let gpus = app.shown_gpus();
    let area = frame.area();
    // Full panels (gauge, details, sparkline) when they fit in 60 % of the
    // screen; one gauge line per GPU otherwise (an 8-GPU node on 40 lines).
    let full = u16::try_from(gpus.len())
        .ok()
        .and_then(|n| n.checked_mul(6))
        .is_some_and(|h| u32::from(h) * 10 <= u32::from(area.height) * 6);
    let per_gpu: u16 = if full { 6 } else { 1 };
    let gpu_height = u16::try_from(gpus.len())
        .unwrap_or(u16::MAX)
        .saturating_mul(per_gpu)
        .max(1);
    let status_height = u16::from(!app.alerts.is_empty());
    let [header, gpu_area, table_area, status, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(gpu_height),
        Constraint::Min(3),
        Constraint::Length(status_height),
        Constraint::Length(1),
    ])
    .areas(area);

    frame.render_widget(Paragraph::new(header_line(app)), header);

    if gpus.is_empty() {
        let text = if app.sample.is_none() {
            "waiting for the first sample…"
        } else {
            "no NVIDIA GPU found"
        };
        frame.render_widget(Paragraph::new(text), gpu_area);
    }
    let rows = Layout::vertical(gpus.iter().map(|_| Constraint::Length(per_gpu))).split(gpu_area);
    for (g, rect) in gpus.iter().zip(rows.iter()) {
        if full {
            gpu_panel(frame, app, g, *rect);
        } else {
            frame.render_widget(gauge(g, true), *rect);
        }
    }

    process_table(frame, app, table_area);
    if let Some(last) = app.alerts.last() {
        let more = match app.alerts.len() {
            0 | 1 => String::new(),
            n => format!(" (+{} earlier)", n - 1),
        };
        frame.render_widget(
            Paragraph::new(Line::from(Span::styled(
                format!("⚠ {last}{more}"),
                Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
            ))),
            status,
        );
    }
    frame.render_widget(Paragraph::new(footer_line(app)), footer);
}

fn header_line(app: &App) -> Line<'static> {
    let mut spans = vec![Span::styled(
        "oomkit monitor",
        Style::new().add_modifier(Modifier::BOLD),
    )];
    if let Some(d) = &app.driver {
        spans.push(Span::raw(format!("  driver {d}")));
    }
    spans.push(Span::raw(format!(
        "  every {}",
        humantime::format_duration(app.interval)
    )));
    if let Some(s) = &app.sample {
        spans.push(Span::raw(format!("  {}", s.time)));
    }
    if app.paused {
        spans.push(Span::styled(
            "  PAUSED",
            Style::new().fg(Color::Yellow).bold(),
        ));
    }
    Line::from(spans)
}

fn footer_line(app: &App) -> Line<'static> {
    if app.editing {
        return Line::from(format!("filter: {}▏ (Enter keep, Esc clear)", app.filter));
    }
    let gpu = app.gpu.map_or_else(|| "all".to_owned(), |i| i.to_string());
    let filter = if app.filter.is_empty() {
        String::new()
    } else {
        format!("  filter \"{}\"", app.filter)
    };
    Line::from(vec![
        Span::styled(
            "q quit  p pause  s sort  / filter  g/Tab/0-9 GPU  a all",
            Style::new().fg(Color::DarkGray),
        ),
        Span::raw(format!("   sort {}  gpu {gpu}{filter}", app.sort.label())),
    ])
}

fn gauge(g: &GpuSample, with_name: bool) -> Gauge<'static> {
    let ratio = g.used_ratio().unwrap_or(0.0).clamp(0.0, 1.0);
    let color = if g.error.is_some() {
        Color::DarkGray
    } else if g.oom_eta_s.is_some() || ratio >= 0.9 {
        Color::Red
    } else if ratio >= 0.75 {
        Color::Yellow
    } else {
        Color::Green
    };
    let mut label = match (g.memory_used_bytes, g.memory_total_bytes) {
        (Some(u), Some(t)) => format!("{} / {} ({:.0}%)", Bytes(u), Bytes(t), ratio * 100.0),
        _ => "memory unknown".to_owned(),
    };
    if let Some(e) = &g.error {
        label = format!("{label}  error: {e}");
    }
    if with_name {
        label = format!(
            "GPU {} {}  {label}",
            g.index,
            g.name.as_deref().unwrap_or("")
        );
    }
    Gauge::default()
        .gauge_style(Style::new().fg(color))
        .ratio(ratio)
        .label(label)
}

fn gpu_panel(frame: &mut Frame, app: &App, g: &GpuSample, rect: Rect) {
    let title = format!(
        " GPU {}{}  {}  {} ",
        g.index,
        g.mig.map_or_else(String::new, |m| format!(" MIG {m}")),
        g.name.as_deref().unwrap_or("(unknown)"),
        g.uuid.as_deref().unwrap_or("")
    );
    let block = Block::default().borders(Borders::ALL).title(title);
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    let [gauge_row, info_row, spark_row] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(2),
    ])
    .areas(inner);
    frame.render_widget(gauge(g, false), gauge_row);

    let na = |v: Option<String>| v.unwrap_or_else(|| "n/a".to_owned());
    if g.error.is_some() {
        return;
    }
    let mut info = vec![Span::raw(format!(
        "util {}  temp {}  power {}",
        na(g.utilization_pct.map(|p| format!("{p}%"))),
        na(g.temperature_c.map(|c| format!("{c} °C"))),
        na(g.power_w.map(|w| format!("{w:.0} W"))),
    ))];
    match (g.oom_eta_s, &g.forecast) {
        (Some(eta), Some(f)) => info.push(Span::styled(
            format!(
                "  ⚠ out of memory in {}: {}, {} steps over {}",
                render::eta(eta),
                render::growth(f.growth_bytes_per_s),
                f.steps,
                render::eta(f.regime_s)
            ),
            Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
        )),
        _ => {
            if let Some(rate) = g.growth_bytes_per_s {
                info.push(Span::raw(format!("  growth {}", render::growth(rate))));
            }
        }
    }
    frame.render_widget(Paragraph::new(Line::from(info)), info_row);

    let history: &[u64] = app
        .history
        .get(&(g.index, g.mig))
        .map_or(&[], Vec::as_slice);
    // The newest points that fit, scaled to the GPU's total (a full bar is a full GPU).
    let width = usize::from(spark_row.width);
    let start = history.len().saturating_sub(width);
    let shown: Vec<u64> = history.iter().skip(start).copied().collect();
    let spark = Sparkline::default()
        .data(&shown)
        .max(g.memory_total_bytes.unwrap_or(0).max(1))
        .style(Style::new().fg(Color::Cyan));
    frame.render_widget(spark, spark_row);
}

fn process_table(frame: &mut Frame, app: &App, rect: Rect) {
    let header = Row::new([
        "PID", "GPU", "USER", "MEMORY", "GROWTH", "OOM IN", "COMMAND",
    ])
    .style(Style::new().add_modifier(Modifier::BOLD));
    let rows: Vec<Row> = app
        .processes()
        .into_iter()
        .map(|(gpu, p)| {
            let eta = p.oom_eta_s.map(render::eta).unwrap_or_default();
            let style = if p.oom_eta_s.is_some() {
                Style::new().fg(Color::Red)
            } else {
                Style::new()
            };
            Row::new(vec![
                Cell::from(p.pid.to_string()),
                Cell::from(gpu.to_string()),
                Cell::from(p.user.clone().unwrap_or_else(|| "?".to_owned())),
                Cell::from(
                    p.used_bytes
                        .map_or_else(|| "n/a".to_owned(), |b| Bytes(b).to_string()),
                ),
                Cell::from(p.growth_bytes_per_s.map(render::growth).unwrap_or_default()),
                Cell::from(eta),
                Cell::from(render::command(p)),
            ])
            .style(style)
        })
        .collect();
    let empty = rows.is_empty();
    let table = Table::new(
        rows,
        [
            Constraint::Length(8),
            Constraint::Length(3),
            Constraint::Length(10),
            Constraint::Length(11),
            Constraint::Length(16),
            Constraint::Length(10),
            Constraint::Min(10),
        ],
    )
    .header(header)
    .block(Block::default().borders(Borders::TOP).title(if empty {
        " processes: none "
    } else {
        " processes "
    }));
    frame.render_widget(table, rect);
}

/// Runs the TUI until quit or `stop` is set; `on_sample` sees every sample
/// (for `--log`, Prometheus and alerts, which go on while the display is
/// paused) and returns the alerts it fired, shown in the status line.
///
/// Keys are read on a thread of their own and arrive through a channel, so the
/// sampling loop never waits inside the terminal library: when the terminal
/// goes away (an SSH drop, `tmux kill-session`), crossterm 0.29's reader spins
/// on the dead tty instead of returning, and a loop blocked in it would never
/// see the SIGHUP flag. Here the loop sees the flag, or the failed draw on the
/// dead terminal, and returns; the reader thread ends with the process.
pub fn run(
    reader: &mut dyn GpuReader,
    tracker: &mut Tracker,
    interval: Duration,
    stop: &AtomicUsize,
    mut on_sample: impl FnMut(&Sample) -> io::Result<Vec<String>>,
) -> io::Result<()> {
    let mut terminal = ratatui::try_init()?;
    let (tx, keys) = std::sync::mpsc::sync_channel::<io::Result<Event>>(64);
    std::thread::spawn(move || {
        loop {
            let event = event::read();
            let failed = event.is_err();
            if tx.send(event).is_err() || failed {
                return;
            }
        }
    });
    let result = (|| -> io::Result<()> {
        let mut app = App::new(reader.driver_version(), interval);
        let start = Instant::now();
        let mut next = Instant::now();
        loop {
            if stop.load(Ordering::Relaxed) != 0 {
                return Ok(());
            }
            let now = Instant::now();
            if now >= next {
                let readings = reader.read();
                let sample =
                    tracker.observe(start.elapsed().as_secs_f64(), SystemTime::now(), readings);
                let alerts = on_sample(&sample)?;
                app.alert(alerts);
                app.update(sample);
                next += interval;
                if next < now {
                    next = now + interval;
                }
                terminal.draw(|f| draw(f, &app))?;
            }
            // Wake for keys, the next sample, or a signal (checked every 100 ms).
            let wait = next
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(100));
            match keys.recv_timeout(wait) {
                Ok(Ok(Event::Key(k))) if k.kind == KeyEventKind::Press => {
                    if app.key(k.code, k.modifiers) == Action::Quit {
                        return Ok(());
                    }
                    terminal.draw(|f| draw(f, &app))?;
                }
                Ok(Ok(Event::Resize(_, _))) => {
                    terminal.draw(|f| draw(f, &app))?;
                }
                Ok(Ok(_)) | Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                // The terminal is gone or unreadable: nothing left to show.
                Ok(Err(e)) => return Err(e),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
            }
        }
    })();
    // Restoring a terminal that is gone fails too; the run's own error matters more.
    let restored = ratatui::try_restore();
    result.and(restored)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    fn sample() -> Sample {
        let p = |pid, used, growth, eta, cmd: &str| ProcessSample {
            pid,
            user: Some("alice".into()),
            command: Some(cmd.into()),
            used_bytes: Some(used),
            growth_bytes_per_s: growth,
            oom_eta_s: eta,
            container_pid: None,
            forecast: None,
        };
        Sample {
            version: 1,
            time: "2026-11-25T12:00:00.000Z".into(),
            gpus: vec![
                GpuSample {
                    index: 0,
                    name: Some("NVIDIA H100 80GB HBM3".into()),
                    uuid: Some("GPU-aaaa".into()),
                    memory_total_bytes: Some(80 << 30),
                    memory_used_bytes: Some(60 << 30),
                    memory_reserved_bytes: None,
                    utilization_pct: Some(97),
                    temperature_c: Some(61),
                    power_w: Some(412.0),
                    growth_bytes_per_s: Some(3.0 * 1048576.0),
                    oom_eta_s: Some(6826.0),
                    error: None,
                    mig: None,
                    memory_source: None,
                    forecast: Some(crate::sample::Forecast {
                        growth_bytes_per_s: 3.0 * 1048576.0,
                        steps: 12,
                        regime_s: 240.0,
                        since_last_step_s: 4.0,
                    }),
                    refused: vec![],
                    processes: vec![
                        p(
                            4242,
                            50 << 30,
                            Some(3.0 * 1048576.0),
                            Some(6826.0),
                            "python train.py",
                        ),
                        p(777, 9 << 30, Some(0.0), None, "python eval.py"),
                    ],
                },
                GpuSample {
                    index: 1,
                    name: Some("NVIDIA H100 80GB HBM3".into()),
                    uuid: Some("GPU-bbbb".into()),
                    memory_total_bytes: None,
                    memory_used_bytes: None,
                    memory_reserved_bytes: None,
                    utilization_pct: None,
                    temperature_c: None,
                    power_w: None,
                    growth_bytes_per_s: None,
                    oom_eta_s: None,
                    error: Some("GPU is lost".into()),
                    mig: None,
                    memory_source: None,
                    forecast: None,
                    refused: vec![],
                    processes: vec![],
                },
            ],
        }
    }

    fn screen(app: &App, w: u16, h: u16) -> String {
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        t.draw(|f| draw(f, app)).unwrap();
        let buf = t.backend().buffer().clone();
        let mut out = String::new();
        for y in 0..buf.area.height {
            for x in 0..buf.area.width {
                out.push_str(buf[(x, y)].symbol());
            }
            out.push('\n');
        }
        out
    }

    #[test]
    fn renders_gpus_processes_and_forecast() {
        let mut app = App::new(Some("580.65.06".into()), Duration::from_secs(1));
        app.update(sample());
        let s = screen(&app, 120, 30);
        assert!(s.contains("GPU 0  NVIDIA H100 80GB HBM3  GPU-aaaa"), "{s}");
        assert!(s.contains("60.00 GiB / 80.00 GiB (75%)"), "{s}");
        assert!(s.contains("util 97%  temp 61 °C  power 412 W"), "{s}");
        assert!(
            s.contains("out of memory in 1h 53m 46s: +180.00 MiB/min, 12 steps over 4m"),
            "{s}"
        );
        assert!(s.contains("error: GPU is lost"), "{s}");
        assert!(s.contains("python train.py"), "{s}");
        let train = s.find("python train.py").unwrap();
        let eval = s.find("python eval.py").unwrap();
        assert!(train < eval, "sorted by memory");
        insta::assert_snapshot!(s);
    }

    #[test]
    fn keys_sort_filter_pause_pick() {
        let mut app = App::new(None, Duration::from_secs(1));
        app.update(sample());
        app.key(KeyCode::Char('s'), KeyModifiers::NONE);
        app.key(KeyCode::Char('s'), KeyModifiers::NONE);
        assert_eq!(app.sort, Sort::Pid);
        let order: Vec<u32> = app.processes().iter().map(|r| r.1.pid).collect();
        assert_eq!(order, vec![777, 4242]);
        for c in "/eval".chars() {
            app.key(KeyCode::Char(c), KeyModifiers::NONE);
        }
        app.key(KeyCode::Enter, KeyModifiers::NONE);
        let s = screen(&app, 120, 30);
        assert!(
            s.contains("python eval.py") && !s.contains("python train.py"),
            "{s}"
        );
        app.key(KeyCode::Char('p'), KeyModifiers::NONE);
        assert!(app.paused);
        let mut later = sample();
        later.time = "later".into();
        app.update(later);
        assert_eq!(
            app.sample.as_ref().unwrap().time,
            "2026-11-25T12:00:00.000Z"
        );
        assert!(screen(&app, 120, 30).contains("PAUSED"));
        app.alert(vec!["GPU 1 (H100) memory at 95.0%".into()]);
        let with_alert = screen(&app, 120, 30);
        let line = with_alert
            .lines()
            .find(|l| l.contains("⚠ GPU 1 (H100) memory at 95.0%"))
            .expect("status line");
        assert!(!line.contains("PID"), "{with_alert}");
        assert!(with_alert.contains("q quit"), "footer kept: {with_alert}");
        app.key(KeyCode::Char('1'), KeyModifiers::NONE);
        assert_eq!(app.gpu, Some(1));
        assert!(!screen(&app, 120, 30).contains("GPU 0 "));
        app.key(KeyCode::Char('a'), KeyModifiers::NONE);
        assert_eq!(app.gpu, None);
        app.key(KeyCode::Tab, KeyModifiers::NONE);
        assert_eq!(app.gpu, Some(0));
        assert_eq!(
            app.key(KeyCode::Char('q'), KeyModifiers::NONE),
            Action::Quit
        );
        assert_eq!(
            app.key(KeyCode::Char('c'), KeyModifiers::CONTROL),
            Action::Quit
        );
    }

    #[test]
    fn many_gpus_compact_and_tiny_terminal() {
        let mut s = sample();
        let first = s.gpus[0].clone();
        for i in 2..8 {
            let mut g = first.clone();
            g.index = i;
            s.gpus.push(g);
        }
        let mut app = App::new(None, Duration::from_secs(1));
        app.update(s);
        let text = screen(&app, 100, 24);
        assert!(text.contains("GPU 7 NVIDIA H100"), "{text}");
        // Degenerate sizes must not panic.
        let _ = screen(&app, 1, 1);
        let _ = screen(&app, 10, 3);
    }
}
