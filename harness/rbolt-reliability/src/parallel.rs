//! Running a suite's independent units (seeds, batches of cases) on worker threads, and adding
//! up what they report: the kill loop, power loss, I/O errors and the hostile files share it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

/// A suite's report: counts that add up over the units it ran.
pub trait Report: Default + Send {
    /// Adds `other`'s counts (in any order: the units end in any order).
    fn merge(&mut self, other: Self);
}

/// Runs `unit(i)` for every `i` in `0..n` on `threads` worker threads (at least one), each
/// taking the next `i` no other has taken, and merges what they report.
pub fn run_units<R: Report>(n: u64, threads: usize, unit: impl Fn(u64) -> R + Sync) -> R {
    let next = AtomicU64::new(0);
    let total = Mutex::new(R::default());
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let report = unit(i);
                    // A unit that panicked took only its own report with it.
                    total
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .merge(report);
                }
            });
        }
    });
    total.into_inner().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::{Report, run_units};

    #[derive(Default)]
    struct Seen(Vec<u64>);

    impl Report for Seen {
        fn merge(&mut self, other: Seen) {
            self.0.extend(other.0);
        }
    }

    #[test]
    fn every_unit_runs_once() {
        for (n, threads) in [(0, 2), (1, 2), (17, 1), (17, 3), (5, 0)] {
            let mut seen = run_units(n, threads, |i| Seen(vec![i])).0;
            seen.sort_unstable();
            assert_eq!(
                seen,
                (0..n).collect::<Vec<_>>(),
                "{n} units, {threads} threads"
            );
        }
    }
}
