//! Every Go bbolt fixture, read through rbolt-page alone: both metas against the summary, every
//! tree walked and compared with the manifest, every page reached written again with the
//! builders and compared byte for byte, bbolt's bucket stats recomputed, and every page below
//! the high-water mark accounted for exactly once.

use crate::support::{Db, Reached, Stats, Walker, select_meta};
use rbolt_page::{
    BranchBuilder, BranchPage, FREELIST_COUNT_OVERFLOW, LEAF_FLAG_BUCKET, LeafBuilder, LeafEntry,
    LeafPage, Meta, PageHeader, PageKind, Pgid, branch_page_size, freelist_page_size,
    leaf_page_size, lower_bound, pages_for, search, write_freelist, write_meta,
};
use serde_json::Value;

macro_rules! fixture_tests {
    ($($test:ident => $name:literal,)*) => {
        $(
            #[test]
            fn $test() {
                check_fixture($name);
            }
        )*
        const TESTED: &[&str] = &[$($name),*];
    };
}

fixture_tests! {
    empty => "empty",
    small => "small",
    pagesize_16k => "pagesize-16k",
    bigfreelist => "bigfreelist",
    overflow => "overflow",
    hashmap => "hashmap",
    nofreelistsync => "nofreelistsync",
    deep => "deep",
}

#[test]
fn every_fixture_has_a_test() {
    let mut tested = TESTED.to_vec();
    let mut names = rbolt_fixtures::NAMES.to_vec();
    tested.sort_unstable();
    names.sort_unstable();
    assert_eq!(tested, names);
}

fn check_fixture(name: &str) {
    let db = Db::open(name);
    let summary = rbolt_fixtures::summary(name);
    check_metas(name, &db, &summary);

    let newest = db.newest();
    let (walker, root) = db.walk(newest);

    let expected = rbolt_fixtures::manifest(name);
    if root.content != expected {
        panic!("{name}: {}", first_difference(&root.content, &expected));
    }
    assert_eq!(
        root.content.sequence, db.metas[newest].root.sequence,
        "{name}"
    );

    // bbolt writes each branch key as the first key of the child it points at, so in the
    // files it writes the bound bbolt's check verifies (key <= every key below) is equality.
    assert_eq!(
        walker.branch_keys_exact, walker.branch_keys,
        "{name}: branch keys"
    );
    check_stats(name, &root, &summary);
    check_pages(name, &walker);
    let free = check_freelist(name, &db, newest, &summary);
    check_every_page_accounted_for(name, &db, newest, &walker, free.as_deref(), &summary);

    // The previous meta's trees are intact too: its pages were freed by the newest transaction
    // and cannot be reused before a later one. This is what lets a crash before the meta write
    // fall back to it.
    let (previous, _) = db.walk(1 - newest);
    check_pages(name, &previous);
    check_freelist(name, &db, 1 - newest, &Value::Null);
}

/// Both metas against the summary: fields, checksums, field validation, which one is newest,
/// and each one written again by `write_meta`.
fn check_metas(name: &str, db: &Db, summary: &Value) {
    let file_len = db.bytes.len() as u64;
    assert_eq!(
        summary["page_size"].as_u64(),
        Some(db.page_size as u64),
        "{name}"
    );
    assert_eq!(summary["file_bytes"].as_u64(), Some(file_len), "{name}");
    for (index, meta) in db.metas.iter().enumerate() {
        let expected = &summary["metas"][index];
        let at = format!("{name}: meta {index}");
        assert_eq!(expected["page"].as_u64(), Some(index as u64), "{at}");
        assert_eq!(
            expected["magic"].as_str(),
            Some(format!("{:#x}", meta.magic).as_str()),
            "{at}"
        );
        assert_eq!(
            expected["version"].as_u64(),
            Some(u64::from(meta.version)),
            "{at}"
        );
        assert_eq!(
            expected["page_size"].as_u64(),
            Some(u64::from(meta.page_size)),
            "{at}"
        );
        assert_eq!(
            expected["flags"].as_u64(),
            Some(u64::from(meta.flags)),
            "{at}"
        );
        assert_eq!(expected["root_pgid"].as_u64(), Some(meta.root.root), "{at}");
        assert_eq!(
            expected["root_sequence"].as_u64(),
            Some(meta.root.sequence),
            "{at}"
        );
        assert_eq!(
            expected["freelist_pgid"].as_u64(),
            Some(meta.freelist),
            "{at}"
        );
        assert_eq!(expected["hwm_pgid"].as_u64(), Some(meta.pgid), "{at}");
        assert_eq!(expected["txid"].as_u64(), Some(meta.txid), "{at}");
        assert_eq!(expected["valid"].as_bool(), Some(true), "{at}");
        let checksum = expected["checksum"].as_str().expect("checksum");
        let checksum = u64::from_str_radix(checksum.trim_start_matches("0x"), 16).expect("hex");
        assert_eq!(meta.checksum, checksum, "{at}");
        assert_eq!(meta.compute_checksum(), checksum, "{at}");
        meta.validate_fields(Pgid(index as u64), file_len)
            .unwrap_or_else(|e| panic!("{at}: {e}"));

        let page = &db.bytes[index * db.page_size..(index + 1) * db.page_size];
        assert_eq!(Meta::read_unchecked(page), Some(*meta), "{at}");
        let mut rewritten = vec![0u8; db.page_size];
        assert_eq!(write_meta(&mut rewritten, meta), *meta, "{at}");
        assert_eq!(rewritten[..80], page[..80], "{at}: written again");
    }

    let (selected, meta) = select_meta(&db.bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(selected, db.newest(), "{name}");
    assert_eq!(meta, db.metas[selected], "{name}");
    assert_eq!(
        summary["active_meta"].as_u64(),
        Some(selected as u64),
        "{name}"
    );
    assert_eq!(summary["txid"].as_u64(), Some(meta.txid), "{name}");
    assert_eq!(summary["hwm_pgid"].as_u64(), Some(meta.pgid), "{name}");
    assert_eq!(
        summary["freelist_pgid"].as_u64(),
        Some(meta.freelist),
        "{name}"
    );
}

/// bbolt's stats: summed over the top-level buckets, and per top-level bucket.
fn check_stats(name: &str, root: &crate::support::BucketWalk, summary: &Value) {
    let mut total = Stats::default();
    for (_, stats) in &root.children {
        total.add(*stats);
    }
    assert_eq!(total, Stats::from_json(&summary["stats"]), "{name}: stats");

    let per_bucket = summary["top_bucket_stats"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    assert_eq!(
        per_bucket.len(),
        root.children.len(),
        "{name}: top-level buckets"
    );
    for expected in per_bucket {
        let bucket_name = rbolt_fixtures::parse_name(&expected["bucket"]);
        let (_, stats) = root
            .children
            .iter()
            .find(|(child, _)| *child == bucket_name)
            .unwrap_or_else(|| panic!("{name}: no bucket {bucket_name:?}"));
        assert_eq!(
            *stats,
            Stats::from_json(&expected["stats"]),
            "{name}: {bucket_name:?}"
        );
    }
}

/// Every page the walk reached: valid, written again identically by the builders, sized as
/// bbolt sizes it, and searchable.
fn check_pages(name: &str, walker: &Walker<'_>) {
    let page_size = walker.file.page_size;
    let (mut leaves, mut inline, mut branches) = (0, 0, 0);
    for reached in &walker.reached {
        match *reached {
            Reached::Leaf(leaf) => {
                leaves += 1;
                let payload = rewrite_leaf(name, leaf);
                let overflow = PageHeader::read(leaf.bytes()).expect("header").overflow;
                assert_eq!(
                    pages_for(payload, page_size),
                    overflow as usize + 1,
                    "{name}"
                );
            }
            Reached::Inline(leaf) => {
                inline += 1;
                let payload = rewrite_leaf(name, leaf);
                let header = PageHeader::read(leaf.bytes()).expect("header");
                let at = format!("{name}: inline page in {}", leaf.pgid());
                // bbolt's inline rules: the value ends where the page does, the page header
                // names page 0, the page is at most a quarter page, and it holds no bucket.
                assert_eq!(payload, leaf.bytes().len(), "{at}");
                assert_eq!((header.id, header.overflow), (0, 0), "{at}");
                assert!(payload <= page_size / 4, "{at}: {payload} bytes");
                for entry in leaf.iter() {
                    assert_eq!(entry.expect("entry").flags & LEAF_FLAG_BUCKET, 0, "{at}");
                }
            }
            Reached::Branch(branch) => {
                branches += 1;
                let payload = rewrite_branch(name, branch);
                let overflow = PageHeader::read(branch.bytes()).expect("header").overflow;
                assert_eq!(
                    pages_for(payload, page_size),
                    overflow as usize + 1,
                    "{name}"
                );
            }
        }
    }
    assert_eq!(leaves + inline + branches, walker.reached.len(), "{name}");
    assert_eq!(walker.owned.len(), leaves + branches, "{name}");
}

/// Writes `leaf` again from its entries into a zeroed buffer of its span and compares the
/// payload. Also checks the searches. Returns the payload length.
fn rewrite_leaf(name: &str, leaf: LeafPage<'_>) -> usize {
    let at = format!("{name}: leaf {}", leaf.pgid());
    let bytes = leaf.bytes();
    let header = PageHeader::read(bytes).expect("header");
    let entries: Vec<LeafEntry<'_>> = leaf
        .iter()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{at}: {e}"));
    let payload = leaf.payload_len().unwrap_or_else(|e| panic!("{at}: {e}"));
    let kv_len = entries.iter().map(|e| e.key.len() + e.value.len()).sum();
    assert_eq!(leaf_page_size(entries.len(), kv_len), payload, "{at}");

    let mut buf = vec![0u8; bytes.len()];
    let mut builder = LeafBuilder::new(&mut buf, header.pgid(), entries.len(), header.overflow);
    for entry in &entries {
        builder.push(entry.flags, entry.key, entry.value);
    }
    assert_eq!(builder.finish(), payload, "{at}");
    assert!(
        buf[..payload] == bytes[..payload],
        "{at}: written again differently"
    );

    let keys: Vec<&[u8]> = entries.iter().map(|e| e.key).collect();
    check_search(&at, &keys, |probe| leaf.search(probe).expect("search"));
    payload
}

fn rewrite_branch(name: &str, branch: BranchPage<'_>) -> usize {
    let at = format!("{name}: branch {}", branch.pgid());
    let bytes = branch.bytes();
    let header = PageHeader::read(bytes).expect("header");
    let children: Vec<(&[u8], Pgid)> = branch
        .iter()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{at}: {e}"));
    let payload = branch.payload_len().unwrap_or_else(|e| panic!("{at}: {e}"));
    let key_len = children.iter().map(|(key, _)| key.len()).sum();
    assert_eq!(branch_page_size(children.len(), key_len), payload, "{at}");

    let mut buf = vec![0u8; bytes.len()];
    let mut builder = BranchBuilder::new(&mut buf, header.pgid(), children.len(), header.overflow);
    for (key, child) in &children {
        builder.push(key, *child);
    }
    assert_eq!(builder.finish(), payload, "{at}");
    assert!(
        buf[..payload] == bytes[..payload],
        "{at}: written again differently"
    );

    let keys: Vec<&[u8]> = children.iter().map(|(key, _)| *key).collect();
    check_search(&at, &keys, |probe| branch.search(probe).expect("search"));
    for (index, key) in keys.iter().enumerate() {
        assert_eq!(branch.child_index(key).expect("child_index"), index, "{at}");
        let mut after = key.to_vec();
        after.push(0);
        assert_eq!(
            branch.child_index(&after).expect("child_index"),
            index,
            "{at}"
        );
    }
    assert_eq!(branch.child_index(b"").expect("child_index"), 0, "{at}");
    payload
}

/// The page's search, the search over the keys in memory and `lower_bound` all agree with
/// the standard library, for every key and for probes just beside each one.
fn check_search(at: &str, keys: &[&[u8]], page_search: impl Fn(&[u8]) -> Result<usize, usize>) {
    let mut probes: Vec<Vec<u8>> = vec![Vec::new(), vec![0xff; 40]];
    for key in keys {
        probes.push(key.to_vec());
        let mut after = key.to_vec();
        after.push(0);
        probes.push(after);
        probes.push(key[..key.len().saturating_sub(1)].to_vec());
    }
    for probe in &probes {
        let expected = keys.binary_search_by(|key| (*key).cmp(probe.as_slice()));
        assert_eq!(page_search(probe), expected, "{at}: probe {probe:02x?}");
        assert_eq!(search(keys, probe).expect("search"), expected, "{at}");
        let partition = keys.partition_point(|key| *key < probe.as_slice());
        assert_eq!(
            lower_bound(keys, probe).expect("lower_bound"),
            partition,
            "{at}"
        );
    }
}

/// The freelist page of meta `index`, checked against the summary (when given) and written
/// again. Returns its span and ids, or `None` when the meta has no freelist page.
fn check_freelist(name: &str, db: &Db, index: usize, summary: &Value) -> Option<Vec<Pgid>> {
    let meta = db.metas[index];
    let at = format!("{name}: freelist of meta {index}");
    if !meta.has_freelist() {
        assert!(summary["freelist_page"].is_null(), "{at}");
        return None;
    }
    let file = db.file(index);
    let page = file
        .page(meta.freelist_pgid())
        .unwrap_or_else(|e| panic!("{at}: {e}"));
    assert_eq!(page.kind(), Ok(PageKind::Freelist), "{at}");
    let freelist = page.freelist().unwrap_or_else(|e| panic!("{at}: {e}"));
    freelist
        .validate(meta.high_water())
        .unwrap_or_else(|e| panic!("{at}: {e}"));
    let header = page.header();
    let ids: Vec<Pgid> = freelist.iter().collect();
    assert_eq!(ids.len(), freelist.len(), "{at}");
    assert_eq!(ids.first().copied(), freelist.get(0), "{at}");
    assert_eq!(
        freelist.has_extended_count(),
        header.count == FREELIST_COUNT_OVERFLOW,
        "{at}"
    );

    let expected = &summary["freelist_page"];
    if !expected.is_null() {
        let raw = |pgids: &[Pgid]| pgids.iter().map(|p| p.0).collect::<Vec<u64>>();
        assert_eq!(expected["pgid"].as_u64(), Some(meta.freelist), "{at}");
        assert_eq!(
            expected["page_flags"].as_u64(),
            Some(u64::from(header.flags)),
            "{at}"
        );
        assert_eq!(
            expected["count_field"].as_u64(),
            Some(u64::from(header.count)),
            "{at}"
        );
        assert_eq!(
            expected["overflow"].as_u64(),
            Some(u64::from(header.overflow)),
            "{at}"
        );
        assert_eq!(expected["ids"].as_u64(), Some(ids.len() as u64), "{at}");
        let first: Vec<u64> = serde_json::from_value(expected["first_ids"].clone()).expect("ids");
        let last: Vec<u64> = serde_json::from_value(expected["last_ids"].clone()).expect("ids");
        assert_eq!(raw(&ids[..first.len()]), first, "{at}");
        assert_eq!(raw(&ids[ids.len() - last.len()..]), last, "{at}");
    }

    let payload = freelist.payload_len();
    assert_eq!(freelist_page_size(ids.len()), payload, "{at}");
    // bbolt sizes the freelist page from an estimate that may exceed what it writes.
    assert!(
        pages_for(payload, db.page_size) <= header.overflow as usize + 1,
        "{at}"
    );
    let bytes = page.bytes();
    let mut buf = vec![0u8; bytes.len()];
    let written = write_freelist(
        &mut buf,
        meta.freelist_pgid(),
        header.overflow,
        ids.iter().copied(),
    );
    assert_eq!(written, payload, "{at}");
    assert!(
        buf[..payload] == bytes[..payload],
        "{at}: written again differently"
    );
    Some(ids)
}

/// The two metas, the pages reached from the root, the freelist page and the free ids cover
/// every page below the high-water mark, each exactly once (what bbolt's `check` verifies).
/// Without a freelist page the free pages are exactly the rest.
fn check_every_page_accounted_for(
    name: &str,
    db: &Db,
    index: usize,
    walker: &Walker<'_>,
    free: Option<&[Pgid]>,
    summary: &Value,
) {
    let meta = db.metas[index];
    let high_water = usize::try_from(meta.pgid).expect("high-water mark");
    let mut seen = vec![false; high_water];
    let mut mark = |first: u64, n_pages: u64, what: &str| {
        for pgid in first..first + n_pages {
            let slot = &mut seen[usize::try_from(pgid).expect("pgid")];
            assert!(!*slot, "{name}: page {pgid} ({what}) accounted for twice");
            *slot = true;
        }
    };
    mark(0, 2, "meta");
    for (&pgid, &overflow) in &walker.owned {
        mark(pgid, u64::from(overflow) + 1, "tree");
    }
    match free {
        Some(ids) => {
            let overflow = db
                .file(index)
                .page(meta.freelist_pgid())
                .expect("freelist")
                .header()
                .overflow;
            mark(meta.freelist, u64::from(overflow) + 1, "freelist");
            for id in ids {
                mark(id.0, 1, "free");
            }
            let missing: Vec<usize> = (0..high_water).filter(|&pgid| !seen[pgid]).collect();
            assert!(
                missing.is_empty(),
                "{name}: pages neither reachable nor free: {missing:?}"
            );
        }
        None => {
            let unreached = seen.iter().filter(|&&seen| !seen).count() as u64;
            assert_eq!(
                summary["free_page_n"].as_u64(),
                Some(unreached),
                "{name}: free pages"
            );
        }
    }
}

/// The first manifest line where two contents differ, for a readable failure.
fn first_difference(found: &rbolt_fixtures::Bucket, expected: &rbolt_fixtures::Bucket) -> String {
    let found = found.to_manifest();
    let expected = expected.to_manifest();
    for (number, (a, b)) in found.lines().zip(expected.lines()).enumerate() {
        if a != b {
            return format!("manifest line {}: found {a}, expected {b}", number + 1);
        }
    }
    format!(
        "found {} manifest lines, expected {} (or the root sequences differ)",
        found.lines().count(),
        expected.lines().count()
    )
}
