//! Progress on long work: indicatif bars and spinners on stderr.
//!
//! They are drawn only when stderr is a terminal, `--no-progress` was not given, and the
//! command's own output does not go to the same terminal (a bar redrawn between lines of
//! output would garble both). Everywhere else they are hidden and cost next to nothing, so
//! scripts and pipes see exactly what they would without them.

use indicatif::{HumanCount, ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

static DISABLED: AtomicBool = AtomicBool::new(false);

/// Turns progress off for the whole run (`--no-progress`).
pub fn disable() {
    DISABLED.store(true, Ordering::Relaxed);
}

/// Whether progress may be drawn. `stdout_busy`: the command streams its result to stdout.
fn drawable(stdout_busy: bool) -> bool {
    !DISABLED.load(Ordering::Relaxed)
        && std::io::stderr().is_terminal()
        && !(stdout_busy && std::io::stdout().is_terminal())
}

/// What a bar counts, which decides how its numbers read.
#[derive(Clone, Copy, Debug)]
pub enum Unit {
    /// Items: keys, pages, operations.
    Items,
    /// Bytes.
    Bytes,
}

fn target(stdout_busy: bool) -> ProgressDrawTarget {
    if drawable(stdout_busy) {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    }
}

/// A style from `template`, which may use `{rate}`: whole items per second with thousands
/// separators (indicatif's `{per_sec}` shows four decimals).
fn styled(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .expect("the template is valid")
        .with_key(
            "rate",
            |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{}/s", HumanCount(state.per_sec() as u64));
            },
        )
}

/// A bar towards `len`.
pub fn bar(len: u64, unit: Unit, message: &'static str, stdout_busy: bool) -> ProgressBar {
    let template = match unit {
        Unit::Items => {
            "{msg:>10} [{bar:40.cyan/blue}] {human_pos}/{human_len} ({rate}, {eta} left)"
        }
        Unit::Bytes => {
            "{msg:>10} [{bar:40.cyan/blue}] {binary_bytes}/{binary_total_bytes} \
             ({binary_bytes_per_sec}, {eta} left)"
        }
    };
    let style = styled(template).progress_chars("=> ");
    ProgressBar::with_draw_target(Some(len), target(stdout_busy))
        .with_style(style)
        .with_message(message)
}

/// A spinner for work of unknown size, counting items; it ticks on its own so it moves even
/// while one long call runs.
pub fn spinner(message: &'static str, unit: Unit, stdout_busy: bool) -> ProgressBar {
    let template = match unit {
        Unit::Items => "{spinner} {msg} {human_pos} ({rate}) {elapsed}",
        Unit::Bytes => "{spinner} {msg} {binary_bytes} ({binary_bytes_per_sec}) {elapsed}",
    };
    let style = styled(template);
    let bar = ProgressBar::with_draw_target(None, target(stdout_busy))
        .with_style(style)
        .with_message(message);
    if !bar.is_hidden() {
        bar.enable_steady_tick(Duration::from_millis(100));
    }
    bar
}

/// Counts items into a bar in batches, so a tight loop does not touch the bar's shared state
/// on every item.
#[derive(Debug)]
pub struct Counter {
    bar: ProgressBar,
    pending: u64,
}

impl Counter {
    const BATCH: u64 = 4096;

    /// A counter feeding `bar`.
    pub fn new(bar: ProgressBar) -> Counter {
        Counter { bar, pending: 0 }
    }

    /// Counts `n` more.
    #[inline]
    pub fn add(&mut self, n: u64) {
        self.pending += n;
        if self.pending >= Self::BATCH {
            self.bar.inc(self.pending);
            self.pending = 0;
        }
    }

    /// Removes the bar from the terminal.
    pub fn finish(mut self) {
        self.bar.inc(std::mem::take(&mut self.pending));
        self.bar.finish_and_clear();
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        // Clears the line on early returns too, so an error message starts on a clean line.
        self.bar.finish_and_clear();
    }
}
