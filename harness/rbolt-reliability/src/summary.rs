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

/// One field of a suite's report: how two units' values add up, and what it puts on the
/// summary line.
pub trait Tally {
    /// Adds `other` (units end in any order, so in any order).
    fn add(&mut self, other: Self);
    /// Appends this field to `summary` as `name` (or as its own fields, or not at all).
    #[must_use]
    fn fields(&self, name: &'static str, summary: Summary) -> Summary;
}

impl Tally for u64 {
    fn add(&mut self, other: u64) {
        *self += other;
    }
    fn fields(&self, name: &'static str, summary: Summary) -> Summary {
        summary.field(name, self)
    }
}

impl Tally for Failures {
    fn add(&mut self, other: Failures) {
        self.extend(other);
    }
    /// Failures are shown in the test's panic message, not on the summary line.
    fn fields(&self, _: &'static str, summary: Summary) -> Summary {
        summary
    }
}

/// A field that keeps the largest value any unit saw (a file's size at the end, say).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Max(pub u64);

impl Tally for Max {
    fn add(&mut self, other: Max) {
        self.0 = self.0.max(other.0);
    }
    fn fields(&self, name: &'static str, summary: Summary) -> Summary {
        summary.field(name, self.0)
    }
}

/// Declares a suite's report once: the struct (its fields in summary-line order), its
/// [`Report::merge`](crate::parallel::Report::merge) and its `fields`, which appends every
/// field to a summary line in that order. Each field's type is a [`Tally`].
///
/// ```
/// use rbolt_reliability::report;
/// use rbolt_reliability::summary::{Failures, Summary};
/// use rbolt_reliability::parallel::Report;
/// report! {
///     /// What a run found.
///     pub struct Found {
///         /// Seeds run.
///         pub seeds: u64,
///         /// Descriptions of the failures.
///         pub failures: Failures,
///     }
/// }
/// let mut a = Found { seeds: 2, ..Found::default() };
/// a.merge(Found { seeds: 3, ..Found::default() });
/// assert_eq!(a.fields(Summary::new("demo")).to_string(), "demo: seeds=5");
/// ```
#[macro_export]
macro_rules! report {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$field_meta:meta])* pub $field:ident : $ty:ty, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default)]
        pub struct $name {
            $( $(#[$field_meta])* pub $field: $ty, )*
        }

        impl $crate::parallel::Report for $name {
            fn merge(&mut self, other: $name) {
                $( $crate::summary::Tally::add(&mut self.$field, other.$field); )*
            }
        }

        impl $name {
            /// Appends every field to `summary`, in declaration order.
            #[must_use]
            pub fn fields(&self, summary: $crate::summary::Summary) -> $crate::summary::Summary {
                $( let summary = $crate::summary::Tally::fields(&self.$field, stringify!($field), summary); )*
                summary
            }
        }
    };
}
