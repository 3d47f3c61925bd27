//! Progress on a terminal for long work (issue 12, item 5): `record`, `replay` and `stats`
//! on a big file printed nothing for a minute or more. A line on stderr, only when stderr
//! is a terminal, and only after the work has taken a second (short jobs stay silent):
//! slices so far, the rate, the file's size, and the ETA when the total is known (replay).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{HumanBytes, ProgressBar, ProgressStyle};
use strobe_runtime::engine::{SliceRecord, SliceSink};

/// Above this size a recording gets the hint about the lean options.
pub const LARGE_RECORDING: u64 = 1 << 30;

/// How long work runs before the progress line appears.
const QUIET_FOR: Duration = Duration::from_secs(1);

/// The hint shown once a recording is large.
pub fn lean_hint(size: u64) -> String {
    format!(
        "strobe: the recording is {}: `--schedule-log off --metrics off` records only the replay log (a fraction of the size; `strobe replay FILE --record FULL` regenerates the rest: docs/recording.md)",
        HumanBytes(size)
    )
}

/// The size of `file` in words, for the final line ("12.3 MiB").
pub fn size_of(file: &Path) -> Option<String> {
    std::fs::metadata(file)
        .ok()
        .map(|m| HumanBytes(m.len()).to_string())
}

/// Counts slices on the slice path (one relaxed store) for the progress line.
pub struct SliceCounter(pub Arc<AtomicU64>);

impl SliceSink for SliceCounter {
    fn slice(&self, rec: &SliceRecord) {
        self.0.store(rec.slice, Ordering::Relaxed);
    }
}

/// A progress line drawn by its own thread until dropped.
pub struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// What the line shows.
pub struct Work {
    /// "recording", "replaying", "reading".
    pub verb: &'static str,
    /// The file whose size is shown (the recording being written or read).
    pub file: Option<PathBuf>,
    /// The last slice, when known (replay): a bar with an ETA.
    pub total: Option<u64>,
    /// The current slice (`None`: no slices, a spinner with the elapsed time).
    pub current: Option<Box<dyn Fn() -> u64 + Send>>,
}

impl Progress {
    /// Start drawing `work` on stderr; `None` when stderr is not a terminal.
    pub fn start(work: Work) -> Option<Progress> {
        if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            return None;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("strobe-progress".into())
            .spawn(move || draw(work, &s))
            .ok()?;
        Some(Progress {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn draw(work: Work, stop: &AtomicBool) {
    let started = Instant::now();
    let mut bar: Option<ProgressBar> = None;
    let mut hinted = false;
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(100));
        if started.elapsed() < QUIET_FOR {
            continue;
        }
        let b = bar.get_or_insert_with(|| new_bar(&work));
        let size = work
            .file
            .as_deref()
            .and_then(|f| std::fs::metadata(f).ok())
            .map(|m| m.len());
        let mut msg = String::new();
        if let Some(cur) = &work.current {
            let slice = cur();
            b.set_position(slice);
            let rate = slice as f64 / started.elapsed().as_secs_f64().max(1e-3);
            msg.push_str(&format!("{rate:.0} slices/s"));
        }
        if let Some(n) = size {
            msg.push_str(&format!("  {}", HumanBytes(n)));
            if n > LARGE_RECORDING && !hinted && work.verb == "recording" {
                hinted = true;
                b.println(lean_hint(n));
            }
        }
        b.set_message(msg);
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
}

fn new_bar(work: &Work) -> ProgressBar {
    let (bar, template) = match (work.total, &work.current) {
        (Some(total), Some(_)) => (
            ProgressBar::new(total),
            format!(
                "strobe: {} [{{bar:30}}] slice {{pos}}/{{len}}  {{msg}}  {{elapsed}}, ETA {{eta}}",
                work.verb
            ),
        ),
        (None, Some(_)) => (
            ProgressBar::new_spinner(),
            format!(
                "strobe: {} {{spinner}} slice {{pos}}  {{msg}}  {{elapsed}}",
                work.verb
            ),
        ),
        (_, None) => (
            ProgressBar::new_spinner(),
            format!("strobe: {} {{spinner}} {{msg}}  {{elapsed}}", work.verb),
        ),
    };
    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr_with_hz(4));
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.enable_steady_tick(Duration::from_millis(250));
    bar
}
