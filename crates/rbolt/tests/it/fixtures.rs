//! Every Go bbolt fixture opens and reads back exactly as its manifest says; rbolt writes the
//! same content into files of its own that read back the same.

use crate::support::{assert_clean, read_db, write_model};
use rbolt::{Db, Options};
use rbolt_fixtures::{Item, NAMES, manifest, summary, write_db};

#[test]
fn every_fixture_reads_back_as_its_manifest_and_checks_clean() {
    let dir = tempfile::tempdir().unwrap();
    for name in NAMES {
        let path = write_db(name, dir.path());
        for read_only in [true, false] {
            let db = Db::open_with(&path, Options::default().read_only(read_only)).unwrap();
            let summary = summary(name);
            assert_eq!(
                db.page_size() as u64,
                summary["page_size"].as_u64().unwrap()
            );
            assert!(read_db(&db).unwrap() == manifest(name), "{name}: content");
            assert_clean(&db);
            db.close().unwrap();
        }
    }
}

#[test]
fn bucket_stats_match_bbolt() {
    let dir = tempfile::tempdir().unwrap();
    for name in NAMES {
        let path = write_db(name, dir.path());
        let db = Db::open_with(&path, Options::default().read_only(true)).unwrap();
        let summary = summary(name);
        let Some(top) = summary["top_bucket_stats"].as_array() else {
            continue;
        };
        db.view(|tx| {
            for item in top {
                let name = rbolt_fixtures::parse_name(&item["bucket"]);
                let stats = tx.bucket(&name)?.unwrap().stats()?;
                let want = &item["stats"];
                let got = [
                    ("BranchPageN", stats.branch_page_n),
                    ("BranchOverflowN", stats.branch_overflow_n),
                    ("LeafPageN", stats.leaf_page_n),
                    ("LeafOverflowN", stats.leaf_overflow_n),
                    ("KeyN", stats.key_n),
                    ("Depth", stats.depth),
                    ("BranchAlloc", stats.branch_alloc),
                    ("BranchInuse", stats.branch_inuse),
                    ("LeafAlloc", stats.leaf_alloc),
                    ("LeafInuse", stats.leaf_inuse),
                    ("BucketN", stats.bucket_n),
                    ("InlineBucketN", stats.inline_bucket_n),
                    ("InlineBucketInuse", stats.inline_bucket_inuse),
                ];
                for (field, value) in got {
                    assert_eq!(
                        value as u64,
                        want[field].as_u64().unwrap(),
                        "{field} of a bucket in {}",
                        summary["name"]
                    );
                }
            }
            Ok::<_, rbolt::Error>(())
        })
        .unwrap();
    }
}

#[test]
fn recreated_fixtures_read_back_the_same_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    for name in NAMES {
        let content = manifest(name);
        let page_size = summary(name)["page_size"].as_u64().unwrap() as usize;
        let path = dir.path().join(format!("{name}.rbolt"));
        let db = Db::open_with(&path, Options::default().page_size(page_size)).unwrap();
        db.update(|tx| {
            for (key, item) in &content.entries {
                let Item::Bucket(child) = item else {
                    panic!("the root holds only buckets")
                };
                let mut bucket = tx.create_bucket(key)?;
                write_model(&mut bucket, child)?;
                bucket.set_sequence(child.sequence)?;
            }
            Ok::<_, rbolt::Error>(())
        })
        .unwrap();
        assert_clean(&db);
        db.close().unwrap();
        let db = Db::open(&path).unwrap();
        assert_eq!(db.page_size(), page_size);
        assert!(
            read_db(&db).unwrap() == content,
            "{name}: recreated content"
        );
        assert_clean(&db);
    }
}

#[test]
fn fixtures_accept_writes_and_stay_clean() {
    let dir = tempfile::tempdir().unwrap();
    for name in NAMES {
        let path = write_db(name, dir.path());
        let mut content = manifest(name);
        let db = Db::open(&path).unwrap();
        db.update(|tx| {
            let mut bucket = tx.create_bucket_if_not_exists(b"rbolt-was-here")?;
            for i in 0..500u32 {
                bucket.put(i.to_be_bytes(), [7u8; 300])?;
            }
            Ok::<_, rbolt::Error>(())
        })
        .unwrap();
        let added = content.bucket_path_mut(&[b"rbolt-was-here".to_vec()]);
        for i in 0..500u32 {
            added
                .entries
                .insert(i.to_be_bytes().to_vec(), Item::Value(vec![7u8; 300]));
        }
        // Delete the first top-level bucket (not ours) and everything in it.
        let first = content.entries.keys().next().cloned().unwrap();
        db.update(|tx| tx.delete_bucket(&first)).unwrap();
        content.entries.remove(&first);
        assert_clean(&db);
        drop(db);
        let db = Db::open(&path).unwrap();
        assert!(read_db(&db).unwrap() == content, "{name}: after writes");
        assert_clean(&db);
    }
}

#[test]
fn a_writer_opening_a_file_without_a_freelist_writes_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_db("nofreelistsync", dir.path());
    let freelist_pgid = |path: &std::path::Path| {
        let db = Db::open_with(path, Options::default().read_only(true)).unwrap();
        db.view(|tx| Ok::<_, rbolt::Error>(tx.meta().freelist))
            .unwrap()
    };
    assert_eq!(freelist_pgid(&path), u64::MAX);
    // Kept as it is by a writer that also skips the freelist...
    drop(Db::open_with(&path, Options::default().no_freelist_sync(true)).unwrap());
    assert_eq!(freelist_pgid(&path), u64::MAX);
    // ...and written by one that keeps it.
    let db = Db::open(&path).unwrap();
    assert_clean(&db);
    assert!(read_db(&db).unwrap() == manifest("nofreelistsync"));
    drop(db);
    assert_ne!(freelist_pgid(&path), u64::MAX);
}
