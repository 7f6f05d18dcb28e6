//! Page buffers once the writer is warm: a steady run of small commits takes every page
//! buffer it needs (nodes, the freelist page, the meta page) from the writer's pool and gives
//! it back, so none of them allocates one.
//!
//! The pages are 16 KiB, larger than anything else a small commit allocates (its list of
//! dirty pages is the largest, about 6 KiB), so the largest single allocation a commit makes
//! says whether it allocated a page buffer. Beyond page buffers, a warm commit allocates a
//! few small things a transaction and nothing for each key it writes.

use rbolt::{Db, Durability, Options};
use rbolt_testkit::alloc::{CountingAlloc, count_allocations, installed, peak, reset_peak};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

const PAGE_SIZE: usize = 16 * 1024;

/// A database whose bucket `b` spans a branch page and several leaves, opened anew: its
/// writer has no buffers yet.
fn loaded_db(dir: &tempfile::TempDir) -> Db {
    let path = dir.path().join("db");
    let options = Options::default().page_size(PAGE_SIZE);
    let db = Db::open_with(&path, options.clone()).unwrap();
    db.update(|tx| {
        let mut b = tx.create_bucket("b")?;
        for i in 0..2000u32 {
            b.put(i.to_be_bytes(), [7u8; 40])?;
        }
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    db.close().unwrap();
    Db::open_with(&path, options).unwrap()
}

/// Rewrites eight values spread over the leaves: the same pages every round, nothing split.
fn small_commit(db: &Db, round: u32, durability: Durability) {
    let tx = db.begin_write().unwrap();
    tx.set_durability(durability);
    let mut b = tx.bucket_mut("b").unwrap().unwrap();
    for i in 0..8u32 {
        b.put((i * 250).to_be_bytes(), [round as u8; 40]).unwrap();
    }
    drop(b);
    tx.commit().unwrap();
}

/// The largest single allocation of `rounds` small commits after `warm` of them.
fn largest_allocation(durability: Durability, warm: u32, rounds: u32) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let db = loaded_db(&dir);
    for round in 0..warm {
        small_commit(&db, round, durability);
    }
    reset_peak();
    for round in warm..warm + rounds {
        small_commit(&db, round, durability);
    }
    peak()
}

#[test]
fn warm_durable_commits_allocate_no_page_buffer() {
    assert!(installed(), "the counting allocator must be installed");
    let largest = largest_allocation(Durability::Immediate, 4, 20);
    assert!(
        largest < PAGE_SIZE,
        "a warm durable commit allocated {largest} bytes at once: a page buffer"
    );
}

#[test]
fn warm_commits_without_syncs_allocate_no_page_buffer() {
    let largest = largest_allocation(Durability::None, 4, 20);
    assert!(
        largest < PAGE_SIZE,
        "a warm commit without syncs allocated {largest} bytes at once: a page buffer"
    );
}

#[test]
fn a_cold_writer_allocates_page_buffers() {
    // What the two tests above measure is visible: the first commits of a fresh handle have
    // no pooled buffers and allocate them.
    assert!(largest_allocation(Durability::Immediate, 0, 1) >= PAGE_SIZE);
}

/// Rewrites `per_leaf` values in each of the eight leaves `small_commit` writes to: the same
/// pages whatever `per_leaf`, nothing split.
fn commit_of(db: &Db, round: u32, durability: Durability, per_leaf: u32) {
    let tx = db.begin_write().unwrap();
    tx.set_durability(durability);
    let mut b = tx.bucket_mut("b").unwrap().unwrap();
    for i in 0..8u32 {
        for j in 0..per_leaf {
            b.put((i * 250 + j).to_be_bytes(), [round as u8; 40])
                .unwrap();
        }
    }
    drop(b);
    tx.commit().unwrap();
}

/// The most allocations one commit of `per_leaf` keys a leaf made, over `rounds` commits
/// after `warm`.
fn allocations_per_commit(durability: Durability, per_leaf: u32, warm: u32, rounds: u32) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let db = loaded_db(&dir);
    for round in 0..warm {
        commit_of(&db, round, durability, per_leaf);
    }
    (warm..warm + rounds)
        .map(|round| count_allocations(|| commit_of(&db, round, durability, per_leaf)).1)
        .max()
        .unwrap()
}

#[test]
fn warm_commits_allocate_nothing_per_key_whatever_the_durability() {
    assert!(installed(), "the counting allocator must be installed");
    for durability in [Durability::Immediate, Durability::None] {
        let few = allocations_per_commit(durability, 1, 4, 20);
        let many = allocations_per_commit(durability, 32, 4, 20);
        // Without debug assertions (whose page checks allocate), what is left is the first
        // node of the map of open buckets, made when the transaction opens `b`: one today,
        // about twenty before issue 26 took out the rest (the list of dirty pages and the
        // handle's box are the writer's from one transaction to the next).
        if !cfg!(debug_assertions) {
            assert!(
                few <= 1,
                "{durability:?}: a warm small commit allocated {few} times"
            );
        }
        // Eight times 32 keys allocate what eight keys do: a transaction's handles and
        // lists, nothing for each key.
        assert_eq!(
            many, few,
            "{durability:?}: 8 keys allocated {few} times, 256 keys {many}"
        );
        // The count sees the commit's allocations: a cold handle makes more.
        assert!(allocations_per_commit(durability, 1, 0, 1) > few);
    }
}
