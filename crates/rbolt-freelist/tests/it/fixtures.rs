//! The freelist pages of the Go bbolt fixtures: read, written back byte for byte, and used.

use crate::{KINDS, observe};
use rbolt_freelist::{AnyFreelist, Freelist};
use rbolt_page::{
    BucketValue, FreelistPage, Meta, PGID_NO_FREELIST, PageHeader, PageKind, PageRef, Pgid, Txid,
    read_meta,
};

/// A fixture database: its bytes, page size and current meta.
struct Db {
    name: &'static str,
    bytes: Vec<u8>,
    page_size: usize,
    meta: Meta,
}

impl Db {
    fn open(name: &'static str) -> Db {
        let bytes = rbolt_fixtures::db_bytes(name);
        let page_size = summary_u64(name, &["page_size"]) as usize;
        // The valid meta with the higher txid is the current one.
        let meta = [0, 1]
            .into_iter()
            .filter_map(|i| read_meta(&bytes[i * page_size..], Pgid(i as u64)).ok())
            .max_by_key(|meta| meta.txid)
            .expect("a valid meta");
        Db {
            name,
            bytes,
            page_size,
            meta,
        }
    }

    /// The bytes of page `pgid` and its overflow pages.
    fn span(&self, pgid: Pgid) -> &[u8] {
        let start = pgid.0 as usize * self.page_size;
        let header = PageHeader::read(&self.bytes[start..]).unwrap();
        &self.bytes[start..start + (header.overflow as usize + 1) * self.page_size]
    }

    fn freelist_page(&self) -> Option<FreelistPage<'_>> {
        let pgid = self.meta.freelist_pgid();
        (pgid != PGID_NO_FREELIST).then(|| FreelistPage::new(self.span(pgid), pgid).unwrap())
    }
}

/// The number at `path` in fixture `name`'s summary.
fn summary_u64(name: &str, path: &[&str]) -> u64 {
    let summary = rbolt_fixtures::summary(name);
    let value = path.iter().fold(&summary, |value, key| &value[*key]);
    value
        .as_u64()
        .unwrap_or_else(|| panic!("{name}: no number at {path:?}"))
}

#[test]
fn every_freelist_page_is_written_back_byte_for_byte() {
    let mut checked = 0;
    for &name in rbolt_fixtures::NAMES {
        let db = Db::open(name);
        let Some(page) = db.freelist_page() else {
            assert_eq!(
                name, "nofreelistsync",
                "only nofreelistsync has no freelist page"
            );
            continue;
        };
        let original = db.span(page.pgid());
        let header = PageHeader::read(original).unwrap();
        let summary = |field| summary_u64(name, &["freelist_page", field]);
        assert_eq!(
            page.pgid().0,
            summary_u64(name, &["freelist_pgid"]),
            "{name}"
        );
        assert_eq!(page.len() as u64, summary("ids"), "{name}");
        assert_eq!(u64::from(header.count), summary("count_field"), "{name}");
        assert_eq!(u64::from(header.overflow), summary("overflow"), "{name}");
        for kind in KINDS {
            let mut freelist = AnyFreelist::new(kind);
            freelist.read(&page, db.meta.high_water()).unwrap();
            // bbolt counts every id on the page as free once the file is reopened.
            assert_eq!(
                freelist.free_count() as u64,
                summary_u64(name, &["free_page_n"]),
                "{name}"
            );
            assert_eq!(freelist.pending_count(), 0);
            assert_eq!(freelist.write_size(), page.payload_len(), "{name} {kind:?}");

            let mut written = vec![0u8; original.len()];
            let len = freelist.write_into(&mut written, page.pgid(), header.overflow);
            assert_eq!(len, page.payload_len());
            assert!(
                written[..len] == original[..len],
                "{name} {kind:?}: page bytes differ"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 2 * (rbolt_fixtures::NAMES.len() - 1));
}

#[test]
fn bigfreelist_uses_the_count_slot() {
    let db = Db::open("bigfreelist");
    let page = db.freelist_page().unwrap();
    assert!(page.has_extended_count());
    assert!(page.len() > 0xFFFF);
    assert_eq!(page.len(), 77_920);
    for kind in KINDS {
        let mut freelist = AnyFreelist::new(kind);
        freelist.read(&page, db.meta.high_water()).unwrap();
        assert_eq!(freelist.free_ids().next(), Some(Pgid(41)));
        assert_eq!(freelist.free_ids().last(), Some(Pgid(78_620)));
    }
}

/// Both implementations run the same write transactions on a real freelist and stay
/// identical; a rolled-back transaction leaves no trace.
#[test]
fn the_implementations_agree_on_real_freelists() {
    for name in ["bigfreelist", "deep", "hashmap"] {
        let db = Db::open(name);
        let page = db.freelist_page().unwrap();
        let high_water = db.meta.high_water();
        let mut freelists = KINDS.map(AnyFreelist::new);
        for freelist in &mut freelists {
            freelist.read(&page, high_water).unwrap();
        }
        let mut txid = db.meta.txid + 1;
        let mut in_use: Vec<(Pgid, u32)> = Vec::new();
        for round in 0..40u64 {
            let before = freelists.each_ref().map(observe);
            let mut allocated = Vec::new();
            for (i, n_pages) in [1, 1, 2, 1, 4, 1, 3, 8, 1, 2].into_iter().enumerate() {
                let [array, span] = &mut freelists;
                let pgid = array.allocate(Txid(txid), n_pages);
                assert_eq!(
                    pgid,
                    span.allocate(Txid(txid), n_pages),
                    "{name} round {round}/{i}"
                );
                if let Some(pgid) = pgid {
                    allocated.push((pgid, n_pages as u32 - 1));
                }
            }
            // Free some pages the earlier transactions allocated.
            let n_frees = in_use.len() / 3;
            for (pgid, overflow) in in_use.drain(..n_frees) {
                for freelist in &mut freelists {
                    freelist.free(Txid(txid), pgid, overflow).unwrap();
                }
            }
            let [array, span] = &freelists;
            assert_eq!(observe(array), observe(span), "{name} round {round}");
            if round % 5 == 4 {
                for freelist in &mut freelists {
                    freelist.rollback(Txid(txid));
                }
                let after = freelists.each_ref().map(observe);
                assert_eq!(after, before, "{name} round {round}: rollback");
                continue; // `in_use` lost the freed pages, as the rolled-back tx would have.
            }
            for freelist in &mut freelists {
                freelist.commit(Txid(txid));
                // A reader two transactions back keeps what it may see.
                freelist.release_pending(&[Txid(txid - 2)]);
            }
            in_use.extend(allocated);
            txid += 1;
        }
        let [array, span] = &freelists;
        assert_eq!(observe(array), observe(span), "{name}");
    }
}

/// Pages reachable from the root of `db`: the freelist's complement, as bbolt computes it
/// for a file without a persisted freelist.
fn reachable_pages(db: &Db) -> Vec<bool> {
    let high_water = db.meta.high_water();
    let mut reachable = vec![false; high_water.0 as usize];
    reachable[0] = true;
    reachable[1] = true;
    let mut stack = vec![db.meta.root_pgid()];
    while let Some(pgid) = stack.pop() {
        let span = db.span(pgid);
        let page = PageRef::new(span, pgid).unwrap();
        for id in pgid.0..=pgid.0 + u64::from(page.header().overflow) {
            assert!(
                !reachable[id as usize],
                "{}: page {id} reached twice",
                db.name
            );
            reachable[id as usize] = true;
        }
        match page.kind().unwrap() {
            PageKind::Branch => {
                let branch = page.branch().unwrap();
                stack.extend((0..branch.len()).map(|i| branch.child(i).unwrap()));
            }
            PageKind::Leaf => {
                let leaf = page.leaf().unwrap();
                for i in 0..leaf.len() {
                    let entry = leaf.entry(i).unwrap();
                    if entry.is_bucket() {
                        let bucket = BucketValue::parse(entry.value, pgid).unwrap();
                        if bucket.header.root != 0 {
                            stack.push(Pgid(bucket.header.root));
                        }
                    }
                }
            }
            kind => panic!("{}: {kind} page {pgid} in a tree", db.name),
        }
    }
    reachable
}

#[test]
fn nofreelistsync_is_rebuilt_from_the_unreachable_pages() {
    let db = Db::open("nofreelistsync");
    assert_eq!(db.meta.freelist_pgid(), PGID_NO_FREELIST);
    let reachable = reachable_pages(&db);
    let free: Vec<Pgid> = (2..reachable.len() as u64)
        .filter(|&id| !reachable[id as usize])
        .map(Pgid)
        .collect();
    for kind in KINDS {
        let mut freelist = AnyFreelist::new(kind);
        freelist.rebuild(&free).unwrap();
        assert_eq!(
            freelist.free_count() as u64,
            summary_u64(db.name, &["free_page_n"])
        );
    }
}
