//! The logic of the cargo-fuzz targets in `fuzz/`, as library functions so that a normal test
//! runs them over a deterministic corpus and CI needs no fuzzer.
//!
//! - [`open_bytes`]: a mode byte, then any bytes as a database file: opened read-only and
//!   read-write, checked and fully scanned, under the hostile-file suite's rules (no panic, no mapping or
//!   allocation beyond the file, no runaway walk).
//! - [`ops`]: bytes decoded into operations — puts, deletes, nested buckets, commits,
//!   rollbacks, reopens, power cuts and crashes in the middle of a commit — run against a
//!   database on a [`SimFile`] and against a model; they must agree.
//!
//! Both panic on a violation, which is what a fuzzer looks for.

use crate::hostile::{Expect, evaluate, fix_meta_checksum};
use crate::model::{Item, Path, Tree, bucket_at, describe_difference, read_bucket, read_db};
use crate::workload::{Op, apply_model, apply_tx};
use rbolt::storage::{CrashProfile, FaultPlan, SimFile};
use rbolt::{Db, FreelistKind, Options, WriteTx};
use rbolt_fixtures::rng::Rng;
use std::sync::Arc;

/// Inputs longer than this are ignored: they only slow a fuzzer down.
pub const INPUT_LEN_MAX: usize = 1 << 20;

/// The `open-bytes` target. Panics, describing the problem, when rbolt breaks a rule.
///
/// The first byte is a mode, the rest the file. With an odd mode both metas' checksums are
/// made right before the file is opened, so that mutations of meta fields reach what lies
/// behind the checksum (a fuzzer cannot compute FNV-1a by chance).
pub fn open_bytes(data: &[u8]) {
    if data.len() > INPUT_LEN_MAX {
        return;
    }
    let (mode, file) = data.split_first().map_or((0, data), |(&m, f)| (m, f));
    let mut image = file.to_vec();
    if mode & 1 == 1 {
        fix_checksums(&mut image);
    }
    let tally = evaluate(&image, &Expect::Any, "fuzz input");
    assert!(tally.is_clean(), "{}", tally.failures);
}

/// Recomputes meta 0's checksum, and meta 1's where meta 0's page size puts it.
fn fix_checksums(image: &mut [u8]) {
    const META_END: usize = 16 + 64;
    if image.len() < META_END {
        return;
    }
    fix_meta_checksum(image, 0, 0);
    let page_size = u32::from_le_bytes(image[24..28].try_into().expect("4 bytes")) as usize;
    let (min, max) = (rbolt_page::PAGE_SIZE_MIN, rbolt_page::PAGE_SIZE_MAX);
    if (min as usize..=max as usize).contains(&page_size) && image.len() >= page_size + META_END {
        fix_meta_checksum(image, page_size, 1);
    }
}

/// Decodes fuzz input bytes.
struct Input<'a> {
    data: &'a [u8],
}

impl Input<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&first, rest) = self.data.split_first()?;
        self.data = rest;
        Some(first)
    }

    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes([self.byte()?, self.byte()?]))
    }
}

/// Where `ops` keeps the state it expects.
struct Expected {
    /// What the last successful commit left.
    committed: Tree,
    /// What the open transaction has made of it.
    pending: Tree,
}

/// The `ops` target. Panics when the database and the model disagree, or when rbolt errs where
/// it must not.
pub fn ops(data: &[u8]) {
    if data.len() > INPUT_LEN_MAX {
        return;
    }
    let mut input = Input { data };
    let options = options_from(input.byte().unwrap_or(0));
    let page_size = options.page_size;
    let mut sim = SimFile::new().expect("memfd");
    let mut db = Db::open_storage(Arc::new(sim.clone()), options.clone()).expect("open");
    let mut expected = Expected {
        committed: Tree::default(),
        pending: Tree::default(),
    };
    // The open transaction's changes, applied when it ends.
    let mut changes: Vec<Op> = Vec::new();
    while let Some(tag) = input.byte() {
        match tag % 16 {
            0..=6 => {
                if let Some(op) = decode_change(tag, &mut input, &expected.pending, page_size) {
                    apply_model(&op, &mut expected.pending);
                    changes.push(op);
                }
            }
            7..=9 => {
                if !changes.is_empty() {
                    let tx = write(&db, &changes, &expected.pending);
                    tx.commit().expect("commit");
                    changes.clear();
                    expected.committed = expected.pending.clone();
                }
                verify(&db, &expected.committed, "after a commit");
            }
            10 => {
                if !changes.is_empty() {
                    write(&db, &changes, &expected.pending).rollback();
                    changes.clear();
                    expected.pending = expected.committed.clone();
                }
                verify(&db, &expected.committed, "after a rollback");
            }
            11 => {
                // Reopen the same file; the open transaction is lost.
                changes.clear();
                expected.pending = expected.committed.clone();
                drop(db);
                db = Db::open_storage(Arc::new(sim.clone()), options.clone()).expect("reopen");
                verify(&db, &expected.committed, "after a reopen");
            }
            12 | 13 => {
                // A power cut between transactions: every commit was synced, so every image
                // holds the last one.
                changes.clear();
                expected.pending = expected.committed.clone();
                drop(db);
                let profile = profile_from(input.byte().unwrap_or(0));
                let image = sim.crash_image(profile, u64::from(input.u16().unwrap_or(0)));
                sim = SimFile::from_image(image).expect("memfd");
                db = Db::open_storage(Arc::new(sim.clone()), options.clone())
                    .expect("reopen after a power cut");
                verify(&db, &expected.committed, "after a power cut");
            }
            _ => {
                // A crash in the middle of the commit: the image holds the last commit or this
                // one.
                if changes.is_empty() {
                    continue;
                }
                let at = sim.op_count() + u64::from(input.byte().unwrap_or(0) % 8);
                sim.set_fault_plan(FaultPlan::new().crash_at(at));
                let acknowledged = write(&db, &changes, &expected.pending).commit().is_ok();
                changes.clear();
                drop(db);
                let profile = profile_from(input.byte().unwrap_or(0));
                let image = sim.crash_image(profile, u64::from(input.u16().unwrap_or(0)));
                sim = SimFile::from_image(image).expect("memfd");
                db = Db::open_storage(Arc::new(sim.clone()), options.clone())
                    .expect("reopen after a crash");
                let state = read_db(&db).expect("read after a crash");
                if state == expected.pending {
                    expected.committed = expected.pending.clone();
                } else {
                    assert!(
                        !acknowledged && state == expected.committed,
                        "after a crash in a commit (acknowledged: {acknowledged}): {}",
                        describe_difference(&expected.committed, &state)
                    );
                    expected.pending = expected.committed.clone();
                }
                check(&db, "after a crash");
            }
        }
    }
    if !changes.is_empty() {
        write(&db, &changes, &expected.pending)
            .commit()
            .expect("commit");
        expected.committed = expected.pending;
    }
    verify(&db, &expected.committed, "at the end");
}

/// A write transaction with `changes` made, whose own view must already be `pending`.
fn write<'db>(db: &'db Db, changes: &[Op], pending: &Tree) -> WriteTx<'db> {
    let mut tx = db.begin_write().expect("begin_write");
    apply_tx(changes, &mut tx).unwrap_or_else(|e| panic!("{changes:?} failed: {e}"));
    let mut seen = read_bucket(&tx.root()).expect("read inside the transaction");
    seen.sequence = 0;
    assert!(
        seen == *pending,
        "inside the transaction: {}",
        describe_difference(pending, &seen)
    );
    tx
}

fn options_from(byte: u8) -> Options {
    let page_size = [512, 1024, 4096, 4096][usize::from(byte & 3)];
    let freelist = if byte & 4 == 0 {
        FreelistKind::Array
    } else {
        FreelistKind::Span
    };
    Options::default()
        .page_size(page_size)
        .freelist(freelist)
        .no_freelist_sync(byte & 8 != 0)
}

fn profile_from(byte: u8) -> CrashProfile {
    CrashProfile::ALL[usize::from(byte) % CrashProfile::ALL.len()]
}

/// A put, delete or bucket change that fits `model`, or `None` if the bytes do not make one.
fn decode_change(tag: u8, input: &mut Input<'_>, model: &Tree, page_size: usize) -> Option<Op> {
    let top = vec![format!("t{}", input.byte()? % 4).into_bytes()];
    let nested = {
        let mut path = top.clone();
        path.push(b"n".to_vec());
        path
    };
    if bucket_at(model, &top).is_none() {
        return Some(Op::CreateBucket(top));
    }
    let selector = input.byte()?;
    let bucket: Path = if selector & 0x80 != 0 && bucket_at(model, &nested).is_some() {
        nested.clone()
    } else {
        top.clone()
    };
    let key = {
        let n = input.byte()?;
        // Mostly a small key space so that keys repeat; sometimes long keys.
        let mut key = format!("k{:02}", n % 64).into_bytes();
        if n >= 240 {
            key.resize(usize::from(n) * 4, b'x');
        }
        key
    };
    let holds_bucket = matches!(
        bucket_at(model, &bucket).and_then(|b| b.entries.get(&key)),
        Some(Item::Bucket(_))
    );
    match tag % 16 {
        0..=3 => {
            if holds_bucket {
                return None;
            }
            let len = usize::from(input.u16()?) % (3 * page_size);
            let mut value = vec![0u8; len];
            Rng::new(u64::from(selector) << 8 | u64::from(tag)).fill(&mut value);
            Some(Op::Put { bucket, key, value })
        }
        4 | 5 => (!holds_bucket).then_some(Op::Delete { bucket, key }),
        _ => {
            // Toggle the nested bucket.
            if bucket_at(model, &nested).is_some() {
                Some(Op::DeleteBucket(nested))
            } else {
                Some(Op::CreateBucket(nested))
            }
        }
    }
}

fn check(db: &Db, when: &str) {
    let errors = db
        .view(|tx| Ok::<_, rbolt::Error>(tx.check()))
        .expect("check");
    assert!(errors.is_empty(), "{when}: check found {errors:?}");
}

fn verify(db: &Db, expected: &Tree, when: &str) {
    check(db, when);
    let state = read_db(db).unwrap_or_else(|e| panic!("{when}: read: {e}"));
    assert!(
        state == *expected,
        "{when}: {}",
        describe_difference(expected, &state)
    );
}

/// A deterministic corpus for `open-bytes`: the hostile suite's shapes, mutated, each behind
/// a mode byte (half of them with checksums fixed).
pub fn open_bytes_corpus(seed: u64, n: usize) -> Vec<Vec<u8>> {
    let shapes = crate::hostile::shapes(false);
    let mut rng = Rng::derive(seed, 0xF022);
    let mut corpus: Vec<Vec<u8>> = shapes
        .iter()
        .map(|s| [&[1u8][..], &s.image].concat())
        .collect();
    while corpus.len() < n {
        let shape = &shapes[rng.index(shapes.len())];
        let (_, image) = crate::hostile::random_mutation(&shape.image, shape.page_size, &mut rng);
        let mode = u8::from(rng.coin());
        corpus.push([&[mode][..], &image].concat());
    }
    corpus
}

/// A deterministic corpus for `ops`: random byte strings of up to `len_max` bytes.
pub fn ops_corpus(seed: u64, n: usize, len_max: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng::derive(seed, 0x0F5);
    (0..n)
        .map(|_| {
            let len = rng.below(len_max as u64 + 1) as usize;
            rng.bytes(len)
        })
        .collect()
}
