//! Batched writes: concurrent `Db::batch` calls share one write transaction.
//!
//! The first caller of a batch leads it: it waits until the batch holds `max_batch_size`
//! calls or `max_batch_delay` has passed, then runs every call in one transaction on its own
//! thread and hands each caller its result. A call that fails is taken out and its caller
//! runs it again alone (so the others still commit together); if the commit itself fails,
//! every caller runs its call alone.

use crate::db::Db;
use crate::error::Result;
use crate::tx::WriteTx;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

type BatchFn = Arc<dyn Fn(&mut WriteTx<'_>) -> Result<()> + Send + Sync>;

/// How a call of a batch ended, for its caller.
enum Outcome {
    /// Committed with the batch.
    Done,
    /// Run it again alone.
    Solo,
    /// Lead the next batch (this call is in it).
    Lead,
}

#[derive(Default)]
struct Mailbox {
    outcome: Mutex<Option<Outcome>>,
    ready: Condvar,
}

impl Mailbox {
    fn send(&self, outcome: Outcome) {
        *self
            .outcome
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(outcome);
        self.ready.notify_one();
    }

    fn wait(&self) -> Outcome {
        let mut slot = self
            .outcome
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        loop {
            if let Some(outcome) = slot.take() {
                return outcome;
            }
            slot = self
                .ready
                .wait(slot)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
}

struct Call {
    f: BatchFn,
    mailbox: Arc<Mailbox>,
}

#[derive(Default)]
struct Queue {
    calls: Vec<Call>,
    led: bool,
}

/// The batch being gathered.
#[derive(Default)]
pub(crate) struct Batcher {
    queue: Mutex<Queue>,
    full: Condvar,
}

impl std::fmt::Debug for Batcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher").finish_non_exhaustive()
    }
}

impl Batcher {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

pub(crate) fn run<F>(db: &Db, f: F) -> Result<()>
where
    F: Fn(&mut WriteTx<'_>) -> Result<()> + Send + Sync + 'static,
{
    let f: BatchFn = Arc::new(f);
    let mailbox = Arc::new(Mailbox::default());
    let batcher = &db.batcher;
    let max_size = db.options.max_batch_size.max(1);
    let leads = {
        let mut queue = batcher.lock();
        queue.calls.push(Call {
            f: f.clone(),
            mailbox: mailbox.clone(),
        });
        if queue.led {
            if queue.calls.len() >= max_size {
                batcher.full.notify_one();
            }
            false
        } else {
            queue.led = true;
            true
        }
    };
    if leads {
        lead(db);
    }
    loop {
        match mailbox.wait() {
            Outcome::Done => return Ok(()),
            Outcome::Solo => return db.update(|tx| f(tx)),
            Outcome::Lead => lead(db),
        }
    }
}

/// Gathers a batch, runs it, and hands out the results.
fn lead(db: &Db) {
    let batcher = &db.batcher;
    let max_size = db.options.max_batch_size.max(1);
    let deadline = Instant::now() + db.options.max_batch_delay;
    let calls = {
        let mut queue = batcher.lock();
        while queue.calls.len() < max_size {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            queue = batcher
                .full
                .wait_timeout(queue, deadline - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        let take = queue.calls.len().min(max_size);
        let calls: Vec<Call> = queue.calls.drain(..take).collect();
        match queue.calls.first() {
            // Calls beyond this batch: the first of them leads the next one.
            Some(next) => next.mailbox.send(Outcome::Lead),
            None => queue.led = false,
        }
        calls
    };
    run_calls(db, calls);
}

fn run_calls(db: &Db, mut calls: Vec<Call>) {
    while !calls.is_empty() {
        let mut failed = None;
        let result = db.update(|tx| {
            for (index, call) in calls.iter().enumerate() {
                match catch_unwind(AssertUnwindSafe(|| (call.f)(tx))) {
                    Ok(Ok(())) => {}
                    Ok(Err(error)) => {
                        failed = Some(index);
                        return Err(error);
                    }
                    Err(_panic) => {
                        failed = Some(index);
                        return Err(crate::Error::Poisoned);
                    }
                }
            }
            Ok(())
        });
        if let Some(index) = failed {
            calls.swap_remove(index).mailbox.send(Outcome::Solo);
            continue;
        }
        let outcome = || {
            if result.is_ok() {
                Outcome::Done
            } else {
                Outcome::Solo
            }
        };
        for call in calls.drain(..) {
            call.mailbox.send(outcome());
        }
    }
}
