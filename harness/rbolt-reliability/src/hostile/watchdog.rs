//! Running cases on a worker thread with a watchdog: a case that hangs is given up on, not
//! waited for.

use super::Tally;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

type Job = Box<dyn FnOnce() -> Tally + Send>;

/// Runs cases on a worker thread and gives up on one that takes longer than a limit (the
/// worker is then abandoned, still spinning, and a new one takes over).
pub struct Runner {
    jobs: mpsc::Sender<Job>,
    results: mpsc::Receiver<Tally>,
    limit: Duration,
}

impl Runner {
    /// A runner whose cases may take up to `limit` each.
    pub fn new(limit: Duration) -> Runner {
        let (jobs, job_rx) = mpsc::channel::<Job>();
        let (result_tx, results) = mpsc::channel();
        std::thread::Builder::new()
            .name("hostile-case".into())
            // The default size of a spawned thread's stack, stated: rbolt's recursion must fit.
            .stack_size(2 << 20)
            .spawn(move || {
                for job in job_rx {
                    if result_tx.send(job()).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn a worker");
        Runner {
            jobs,
            results,
            limit,
        }
    }

    /// Runs `job`; `None` if it did not finish in time (or killed its thread).
    pub fn run(&mut self, job: Job) -> Option<Tally> {
        if self.jobs.send(job).is_err() {
            *self = Runner::new(self.limit);
            return None;
        }
        match self.results.recv_timeout(self.limit) {
            Ok(tally) => Some(tally),
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                *self = Runner::new(self.limit);
                None
            }
        }
    }
}
