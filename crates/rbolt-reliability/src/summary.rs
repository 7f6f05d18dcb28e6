//! The one summary line each suite prints, and the knobs that size the suites.

use std::fmt::{self, Display, Write as _};

/// `name: key=value key=value ...`, printed on stderr so `cargo test -- --nocapture` and
/// `cargo xtask soak` show it.
#[derive(Clone, Debug)]
pub struct Summary {
    name: &'static str,
    fields: Vec<(&'static str, String)>,
}

impl Summary {
    /// A summary line for suite `name`.
    pub fn new(name: &'static str) -> Summary {
        Summary {
            name,
            fields: Vec::new(),
        }
    }

    /// Appends `key=value`.
    #[must_use]
    pub fn field(mut self, key: &'static str, value: impl Display) -> Summary {
        self.fields.push((key, value.to_string()));
        self
    }

    /// Appends `secs=S.S`: the seconds since `started`, the last field of every suite's line.
    #[must_use]
    pub fn secs_since(self, started: std::time::Instant) -> Summary {
        self.field("secs", format!("{:.1}", started.elapsed().as_secs_f64()))
    }

    /// Prints the line on stderr.
    pub fn print(&self) {
        eprintln!("{self}");
    }
}

impl Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut line = format!("{}:", self.name);
        for (key, value) in &self.fields {
            let _ = write!(line, " {key}={value}");
        }
        f.write_str(&line)
    }
}

/// Whether the suites run at soak size (`RBOLT_SOAK=1`, set by `cargo xtask soak`).
pub fn soak() -> bool {
    std::env::var("RBOLT_SOAK").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The time budget of the open-ended soak loops (`RBOLT_SOAK_MINUTES`, default 5).
pub fn soak_minutes() -> f64 {
    env_f64("RBOLT_SOAK_MINUTES").unwrap_or(5.0)
}

/// `ci` normally, `soak` under `RBOLT_SOAK`, either overridden by the environment variable
/// `var` when it holds a number.
pub fn size(var: &str, ci: u64, soak_size: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if soak() { soak_size } else { ci })
}

fn env_f64(var: &str) -> Option<f64> {
    std::env::var(var).ok().and_then(|v| v.parse().ok())
}

/// Failures worth showing in a test's panic message: the first few, and how many in all.
#[derive(Clone, Debug, Default)]
pub struct Failures {
    shown: Vec<String>,
    total: u64,
}

/// How many failure descriptions a suite keeps (`RBOLT_FAILURES_SHOWN` to see more).
fn failures_shown_max() -> usize {
    static MAX: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| {
        std::env::var("RBOLT_FAILURES_SHOWN")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(20)
    })
}

impl Failures {
    /// Records one failure.
    pub fn push(&mut self, description: impl Into<String>) {
        self.total += 1;
        if self.shown.len() < failures_shown_max() {
            self.shown.push(description.into());
        }
    }

    /// Adds `other`'s failures.
    pub fn extend(&mut self, other: Failures) {
        self.total += other.total;
        for description in other.shown {
            if self.shown.len() < failures_shown_max() {
                self.shown.push(description);
            }
        }
    }

    /// Whether none were recorded.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// How many were recorded.
    pub fn total(&self) -> u64 {
        self.total
    }
}

impl Display for Failures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} failure(s); the first {}:",
            self.total,
            self.shown.len()
        )?;
        for description in &self.shown {
            writeln!(f, "  - {description}")?;
        }
        Ok(())
    }
}
