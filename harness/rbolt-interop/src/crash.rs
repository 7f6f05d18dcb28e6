//! The crash writer: an rbolt process that creates a file, makes a planned run of durable
//! commits (two syncs or one), commits without syncs (`Durability::None`) and `Db::sync`s on it, reports each
//! step on stdout before (`begin N`, and `txid T` for a commit) and after (`acked N`) it,
//! and is killed (SIGKILL) by the suite, either while it idles after its plan or at a random
//! moment inside it. Its workload
//! is a pure function of the seed, the page size and the commit's number, so the suite
//! replays it into the model of every state ([`model_after`]) without trusting the child.

use rbolt::{Db, Durability, FreelistKind, Options};
use rbolt_fixtures::rng::Rng;
use rbolt_fixtures::{Bucket, Item};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// The one bucket the workload writes.
pub const BUCKET: &[u8] = b"crash";

/// Keys are drawn from this many, so that commits overwrite and delete each other's keys and
/// free pages the next commits take.
const KEYS: u64 = 3000;

/// How long the child idles after its plan before it exits on its own (without closing the
/// file): a guard against a parent that never kills it.
const IDLE_MAX: Duration = Duration::from_secs(120);

/// One step of a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A commit with `Durability::Immediate`.
    Durable,
    /// A commit with `Durability::None`.
    Unsynced,
    /// `Db::sync`: a durable point without a commit.
    Sync,
    /// A commit with `Durability::OneSync` (issue 51): durable, in a meta Go cannot read
    /// until rbolt has opened the file again.
    OneSync,
}

impl Step {
    pub fn is_commit(self) -> bool {
        self != Step::Sync
    }
}

/// A plan as the child's command line spells it: `D`, `N`, `S` and `O` for each step.
pub fn parse_plan(text: &str) -> Result<Vec<Step>, String> {
    text.chars()
        .map(|letter| match letter {
            'D' => Ok(Step::Durable),
            'N' => Ok(Step::Unsynced),
            'S' => Ok(Step::Sync),
            'O' => Ok(Step::OneSync),
            other => Err(format!("unknown step {other:?} in plan {text:?}")),
        })
        .collect()
}

/// The commits among `steps`.
pub fn commits(steps: &[Step]) -> usize {
    steps.iter().filter(|step| step.is_commit()).count()
}

/// The commits among `steps` that a durable point among them made durable (every commit up
/// to the last durable commit or sync).
pub fn durable_commits(steps: &[Step]) -> usize {
    match steps.iter().rposition(|&step| step != Step::Unsynced) {
        Some(last) => commits(&steps[..=last]),
        None => 0,
    }
}

/// One change of the workload.
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

/// The changes of commit number `commit`: about 120 puts and deletes over [`KEYS`] keys,
/// values of up to half a page and some spanning two or three pages (overflow).
fn commit_ops(seed: u64, page_size: usize, commit: usize) -> Vec<Op> {
    let mut rng = Rng::derive(seed, commit as u64);
    let n = 60 + rng.index(120);
    (0..n)
        .map(|_| {
            let key = format!("c{:05}", rng.below(KEYS)).into_bytes();
            match rng.below(10) {
                0..3 => Op::Delete(key),
                3 => {
                    let len = page_size + rng.index(2 * page_size);
                    Op::Put(key, rng.bytes(len))
                }
                _ => {
                    let len = rng.index(page_size / 2);
                    Op::Put(key, rng.bytes(len))
                }
            }
        })
        .collect()
}

/// The content after the first `n` commits of the workload.
pub fn model_after(seed: u64, page_size: usize, n: usize) -> Bucket {
    let mut root = Bucket::default();
    for commit in 0..n {
        let bucket = root.bucket_path_mut(&[BUCKET.to_vec()]);
        for op in commit_ops(seed, page_size, commit) {
            match op {
                Op::Put(key, value) => {
                    bucket.entries.insert(key, Item::Value(value));
                }
                Op::Delete(key) => {
                    bucket.entries.remove(&key);
                }
            }
        }
    }
    root
}

/// One report line, flushed: what the parent reads is exactly what was reported before the
/// kill.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The child: `FILE PAGE_SIZE SEED PLAN [span] [no-freelist-sync]`. Creates FILE (it must
/// not exist) with the freelist kind and freelist option given, runs the plan, says `idle`
/// and waits to be killed; never closes the file.
pub fn child_main(args: &[String]) -> Result<(), String> {
    let [file, page_size, seed, plan, flags @ ..] = args else {
        return Err(format!(
            "usage: FILE PAGE_SIZE SEED PLAN [span] [no-freelist-sync] (got {args:?})"
        ));
    };
    let page_size: usize = page_size.parse().map_err(|e| format!("page size: {e}"))?;
    let seed: u64 = seed.parse().map_err(|e| format!("seed: {e}"))?;
    let steps = parse_plan(plan)?;
    let mut options = Options::default().page_size(page_size);
    for flag in flags {
        options = match flag.as_str() {
            "span" => options.freelist(FreelistKind::Span),
            "no-freelist-sync" => options.no_freelist_sync(true),
            other => return Err(format!("unknown option {other:?}")),
        };
    }
    let run = || -> rbolt::Result<()> {
        let db = Db::open_with(Path::new(file), options)?;
        let mut commit = 0;
        for (i, step) in steps.iter().enumerate() {
            if *step == Step::Sync {
                say(&format!("begin {i}"));
                db.sync()?;
            } else {
                let tx = db.begin_write()?;
                say(&format!("begin {i} txid {}", tx.id().0));
                match step {
                    Step::Unsynced => tx.set_durability(Durability::None),
                    Step::OneSync => tx.set_durability(Durability::OneSync),
                    Step::Durable | Step::Sync => {}
                }
                let mut bucket = tx.create_bucket_if_not_exists(BUCKET)?;
                for op in commit_ops(seed, page_size, commit) {
                    match op {
                        Op::Put(key, value) => bucket.put(key, value)?,
                        Op::Delete(key) => {
                            bucket.delete(key)?;
                        }
                    }
                }
                drop(bucket);
                tx.commit()?;
                commit += 1;
            }
            say(&format!("acked {i}"));
        }
        say("idle");
        std::thread::sleep(IDLE_MAX);
        // Never closed: the process ends as a kill would end it.
        std::process::exit(3);
    };
    run().map_err(|e| e.to_string())
}
