//! Batched writes: concurrent `Db::batch` calls share one write transaction.
//!
//! The first caller of a batch leads it: it waits until the batch holds `max_batch_size`
//! calls or `max_batch_delay` has passed, then waits for the writer, and only then takes the
//! calls queued by that time: it runs them in one transaction on its own thread and hands each
//! caller its result. So calls that arrive while another commit runs (its syncs, most of a
//! durable commit's time) join the next one: with a delay of zero, a group commit — every
//! thread that commits while a sync is under way shares the next sync, and no call waits for a
//! timer. A call that fails is taken out and its caller
//! runs it again alone (so the others still commit together); if the commit itself fails,
//! every caller runs its call alone.
//!
//! A call's error is its caller's own type, so calls of one batch can fail with different
//! types: the shared transaction only learns that a call failed, and the caller who runs it
//! again alone gets its error back from that run.

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::options::Durability;
use crate::tx::WriteTx;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

/// A call as the shared transaction runs it: whether it succeeded (its error, of its caller's
/// type, stays on the leader's thread and is dropped there; the caller's solo run reports it).
type BatchFn = Arc<dyn Fn(&mut WriteTx<'_>) -> bool + Send + Sync>;

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

pub(crate) fn run<F, E>(engine: &Engine, batcher: &Batcher, f: F) -> Result<(), E>
where
    F: Fn(&mut WriteTx<'_>) -> Result<(), E> + Send + Sync + 'static,
    E: From<Error>,
{
    // A caller holding the writer would wait for a batch that needs it.
    engine.check_not_writer()?;
    let f = Arc::new(f);
    let shared: BatchFn = {
        let f = f.clone();
        Arc::new(move |tx| f(tx).is_ok())
    };
    let mailbox = Arc::new(Mailbox::default());
    let max_size = engine.options.max_batch_size.max(1);
    let leads = {
        let mut queue = batcher.lock();
        queue.calls.push(Call {
            f: shared,
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
        lead(engine, batcher);
    }
    loop {
        match mailbox.wait() {
            Outcome::Done => return Ok(()),
            Outcome::Solo => return engine.update(|tx| f(tx)),
            Outcome::Lead => lead(engine, batcher),
        }
    }
}

/// Why the shared transaction of a batch was rolled back.
enum Abort {
    /// A call failed (returned its error, or panicked): it is taken out and run alone.
    Call,
    /// The database failed (a put, or the commit); every caller runs its call alone, and a
    /// caller whose call fails again gets that error.
    Db,
}

impl From<Error> for Abort {
    fn from(_: Error) -> Abort {
        Abort::Db
    }
}

/// Gathers a batch, runs it, and hands out the results.
fn lead(engine: &Engine, batcher: &Batcher) {
    let max_size = engine.options.max_batch_size.max(1);
    // A delay too long for the clock (`Duration::MAX`) means: wait until the batch is full.
    let deadline = Instant::now().checked_add(engine.options.max_batch_delay);
    {
        let mut queue = batcher.lock();
        while queue.calls.len() < max_size {
            let now = Instant::now();
            queue = match deadline {
                Some(deadline) if now >= deadline => break,
                Some(deadline) => {
                    batcher
                        .full
                        .wait_timeout(queue, deadline - now)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .0
                }
                None => batcher
                    .full
                    .wait(queue)
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            };
        }
    }
    // The calls are taken once the writer is this thread's: those queued meanwhile join.
    let tx = engine.begin_write();
    let calls = {
        let mut queue = batcher.lock();
        let take = queue.calls.len().min(max_size);
        let calls: Vec<Call> = queue.calls.drain(..take).collect();
        match queue.calls.first() {
            // Calls beyond this batch: the first of them leads the next one.
            Some(next) => next.mailbox.send(Outcome::Lead),
            None => queue.led = false,
        }
        calls
    };
    run_calls(engine, tx, calls);
}

/// The stronger of two durabilities: the one that promises more when the commit returns.
fn stronger(a: Durability, b: Durability) -> Durability {
    let rank = |durability| match durability {
        Durability::None => 0,
        Durability::OneSync => 1,
        // `Immediate`, and any durability to come: the strongest known.
        _ => 2,
    };
    if rank(b) > rank(a) { b } else { a }
}

/// Runs `calls` in one transaction, the first try in `tx` (the writer, taken before the calls
/// were), and answers each caller.
fn run_calls<'db>(engine: &'db Engine, tx: Result<WriteTx<'db>>, mut calls: Vec<Call>) {
    let mut tx = Some(tx);
    while !calls.is_empty() {
        let mut failed = None;
        // Set by the first `on_commit` hook, so that a panic in a later hook is known to come
        // after the commit.
        let committed = Arc::new(AtomicBool::new(false));
        // A panic outside the calls (in an `on_commit` hook, say) must still answer every
        // caller, or they would wait for ever: the others are told, then the panic goes on
        // on this caller's thread.
        let first_try = tx.take();
        let result = catch_unwind(AssertUnwindSafe(|| {
            let mut tx = first_try.unwrap_or_else(|| engine.begin_write())?;
            let committed = committed.clone();
            tx.on_commit(move || committed.store(true, Ordering::Release));
            // Each call starts from the handle's durability, and the commit is the strongest
            // any call asked for: a call that asks for no syncs must not take the durability
            // of the others, whose callers hear `Ok` as for a commit of their own.
            let default = tx.durability();
            let mut wanted = None;
            for (index, call) in calls.iter().enumerate() {
                tx.set_durability(default);
                // A panic is a failure like an error: the call's solo run shows it.
                if !catch_unwind(AssertUnwindSafe(|| (call.f)(&mut tx))).unwrap_or(false) {
                    failed = Some(index);
                    return Err(Abort::Call);
                }
                wanted = Some(stronger(
                    wanted.unwrap_or(Durability::None),
                    tx.durability(),
                ));
            }
            tx.set_durability(wanted.unwrap_or(default));
            tx.commit()?;
            Ok::<(), Abort>(())
        }));
        let result = match result {
            Ok(result) => result,
            Err(panic) => {
                let outcome = || {
                    if committed.load(Ordering::Acquire) {
                        Outcome::Done
                    } else {
                        Outcome::Solo
                    }
                };
                for call in calls.drain(..) {
                    call.mailbox.send(outcome());
                }
                std::panic::resume_unwind(panic);
            }
        };
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
