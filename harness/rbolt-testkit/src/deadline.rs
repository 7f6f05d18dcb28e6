//! The hang guard: run a closure on a thread of its own and fail the test when it does not
//! return in time, so that a hang or a deadlock in the code under test fails the run instead
//! of stalling it. A panic in the closure is raised again on the caller's thread, unchanged.
//!
//! (The hostile-file suite keeps its own watchdog, one thread reused for thousands of cases,
//! which reports a hung case instead of failing at once.)

use std::sync::mpsc;
use std::time::Duration;

/// Runs `f` on a new thread and returns what it returns; panics, naming `what`, if it has
/// not returned within `limit` (the thread is left behind: a hung thread cannot be stopped).
///
/// ```
/// use std::time::Duration;
/// let sum = rbolt_testkit::deadline::within(Duration::from_secs(5), "a sum", || 2 + 2);
/// assert_eq!(sum, 4);
/// let hung = std::panic::catch_unwind(|| {
///     rbolt_testkit::deadline::within(Duration::from_millis(10), "a sleep", || {
///         std::thread::sleep(Duration::from_secs(1))
///     })
/// });
/// assert!(hung.is_err());
/// ```
pub fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (done, finished) = mpsc::channel();
    let handle = std::thread::Builder::new()
        .name(format!("deadline: {what}"))
        .spawn(move || {
            let _ = done.send(f());
        })
        .expect("a test thread starts");
    match finished.recv_timeout(limit) {
        Ok(value) => {
            let _ = handle.join();
            value
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => match handle.join() {
            // The closure panicked: raise its panic here, as if it had run on this thread.
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("the thread sends before it returns"),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what} did not finish within {limit:?}: a hang or a deadlock")
        }
    }
}
