//! Corrupt trees: a bad child pointer, a cycle, a bad header or element, an empty or
//! mixed-depth branch must end in `Err(Corruption)` (or `Ok` where the operation does not see
//! the damage), never in a panic, a hang or a stack overflow. For the read path (`get` and
//! every cursor move) and the write path (`put`, `delete`, `rebalance`, `spill`, `free_all`
//! on a `Tree::from_page` over the corrupt pages).
//!
//! Valid trees are built with `MemStore` + `Tree` (512-byte pages make depth cheap), or
//! written page by page for shapes `Tree` never makes (chains, shared children, mixed
//! depths); their bytes are copied and damaged, then read through `Pages::new`.

use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};
use rbolt_btree::{
    Arena, DEPTH_MAX, Delete, Direction, PageAlloc, Pages, Put, Tree, TreeView, Verdict,
};
use rbolt_btree::{Entry, MemStore};
use rbolt_page::{
    BranchBuilder, Corruption, FLAG_FREELIST, FLAG_META, LeafBuilder, PageKind, PageRef, Pgid,
    Reason, branch_page_size, leaf_page_size,
};
use std::collections::{BTreeMap, BTreeSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;
use std::time::Duration;

const PAGE_SIZE: usize = 512;

/// A key and its value.
type KeyValue = (Vec<u8>, Vec<u8>);
/// Says whether an error has the reason a kind of damage must give.
type ReasonCheck = fn(&Reason) -> bool;
/// Every test body runs under this deadline: a hang fails the test instead of stalling it.
const DEADLINE: Duration = Duration::from_secs(60);

// ---- Images --------------------------------------------------------------------------------

/// A file image holding one tree: pages 0 and 1 (the metas' place) are zeros.
#[derive(Clone, Debug)]
struct Image {
    bytes: Vec<u8>,
    high_water: Pgid,
    root: Pgid,
    /// The tree's entries in key order, as built (before any damage).
    entries: Vec<KeyValue>,
}

/// Key `i` of a built image: ordered by `i`, `len` bytes long.
fn key_of(i: usize, len: usize) -> Vec<u8> {
    let mut key = vec![b'k'; len.max(4)];
    key[..4].copy_from_slice(&(i as u32 * 7 + 7).to_be_bytes());
    key
}

fn value_of(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 31 + j) as u8).collect()
}

impl Image {
    /// `n` entries put into a new tree and spilled into a `MemStore` of 512-byte pages, half
    /// full (fill percent 0.5), so that few entries make deep trees.
    fn build(n: usize, key_len: usize, value_len: usize) -> Image {
        let mut store = MemStore::new(PAGE_SIZE, false);
        let mut arena = Arena::new(PAGE_SIZE);
        let mut tree = Tree::new();
        tree.set_fill_percent(0.5);
        let entries: Vec<KeyValue> = (0..n)
            .map(|i| (key_of(i, key_len), value_of(i, value_len)))
            .collect();
        for (key, value) in &entries {
            assert_eq!(
                tree.put(store.pages(), &mut arena, key, value, 0).unwrap(),
                Put::Inserted
            );
        }
        let (pages, alloc) = store.parts();
        tree.rebalance(pages, &mut arena, alloc).unwrap();
        let root = tree.spill(pages, &mut arena, alloc).unwrap();
        store.commit();
        let pages = store.pages();
        Image {
            bytes: pages.data().to_vec(),
            high_water: pages.high_water(),
            root,
            entries,
        }
    }

    fn pages(&self) -> Pages<'_> {
        Pages::new(&self.bytes, PAGE_SIZE, self.high_water).expect("image covers its pages")
    }

    fn at(&self, pgid: Pgid, offset: usize) -> usize {
        pgid.0 as usize * PAGE_SIZE + offset
    }

    fn put_u16(&mut self, pgid: Pgid, offset: usize, value: u16) {
        let at = self.at(pgid, offset);
        self.bytes[at..at + 2].copy_from_slice(&value.to_le_bytes());
    }

    fn put_u32(&mut self, pgid: Pgid, offset: usize, value: u32) {
        let at = self.at(pgid, offset);
        self.bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
    }

    fn put_u64(&mut self, pgid: Pgid, offset: usize, value: u64) {
        let at = self.at(pgid, offset);
        self.bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
    }

    fn set_id(&mut self, pgid: Pgid, id: u64) {
        self.put_u64(pgid, 0, id);
    }

    fn set_flags(&mut self, pgid: Pgid, flags: u16) {
        self.put_u16(pgid, 8, flags);
    }

    fn set_count(&mut self, pgid: Pgid, count: u16) {
        self.put_u16(pgid, 10, count);
    }

    fn set_overflow(&mut self, pgid: Pgid, overflow: u32) {
        self.put_u32(pgid, 12, overflow);
    }

    /// Sets the child page id of branch element `index`.
    fn set_child(&mut self, branch: Pgid, index: usize, child: u64) {
        self.put_u64(branch, 16 + 16 * index + 8, child);
    }

    /// Sets field `field` (a `u32` at byte `4 * field`) of element `index`: for a leaf 0 flags,
    /// 1 pos, 2 ksize, 3 vsize; for a branch 0 pos, 1 ksize.
    fn set_element_field(&mut self, pgid: Pgid, index: usize, field: usize, value: u32) {
        self.put_u32(pgid, 16 + 16 * index + 4 * field, value);
    }

    /// The shape of the (undamaged) tree.
    fn shape(&self) -> Shape {
        let mut shape = Shape::default();
        shape.visit(self.pages(), self.root, None, 0);
        shape
    }
}

/// Where everything is in a valid tree.
#[derive(Debug, Default)]
struct Shape {
    kind: BTreeMap<Pgid, PageKind>,
    children: BTreeMap<Pgid, Vec<Pgid>>,
    parent: BTreeMap<Pgid, Pgid>,
    keys_under: BTreeMap<Pgid, BTreeSet<Vec<u8>>>,
    /// Leaf page of each key, and the element index there.
    leaf_of: BTreeMap<Vec<u8>, (Pgid, usize)>,
    /// Pages by depth, root first.
    levels: Vec<Vec<Pgid>>,
}

impl Shape {
    fn visit(&mut self, pages: Pages<'_>, pgid: Pgid, parent: Option<Pgid>, depth: usize) {
        let page = PageRef::new(pages.page(Pgid(0), pgid).unwrap(), pgid).unwrap();
        let kind = page.kind().unwrap();
        self.kind.insert(pgid, kind);
        if let Some(parent) = parent {
            self.parent.insert(pgid, parent);
        }
        if self.levels.len() <= depth {
            self.levels.push(Vec::new());
        }
        self.levels[depth].push(pgid);
        let mut keys = BTreeSet::new();
        match kind {
            PageKind::Leaf => {
                let leaf = page.leaf().unwrap();
                for index in 0..leaf.len() {
                    let key = leaf.key(index).unwrap().to_vec();
                    self.leaf_of.insert(key.clone(), (pgid, index));
                    keys.insert(key);
                }
            }
            PageKind::Branch => {
                let branch = page.branch().unwrap();
                let children: Vec<Pgid> = (0..branch.len())
                    .map(|i| branch.child(i).unwrap())
                    .collect();
                for &child in &children {
                    self.visit(pages, child, Some(pgid), depth + 1);
                    keys.extend(self.keys_under[&child].iter().cloned());
                }
                self.children.insert(pgid, children);
            }
            other => panic!("a valid tree holds a {other} page"),
        }
        self.keys_under.insert(pgid, keys);
    }

    fn leaves(&self) -> impl Iterator<Item = Pgid> + '_ {
        self.kind
            .iter()
            .filter(|(_, kind)| **kind == PageKind::Leaf)
            .map(|(pgid, _)| *pgid)
    }

    fn depth(&self) -> usize {
        self.levels.len()
    }
}

/// The base images, built once: 1, 2, 3 and 4 levels deep.
fn images() -> &'static [Image; 4] {
    static IMAGES: OnceLock<[Image; 4]> = OnceLock::new();
    IMAGES.get_or_init(|| {
        let images = [
            Image::build(3, 8, 8),
            Image::build(20, 8, 8),
            Image::build(150, 24, 24),
            Image::build(400, 24, 24),
        ];
        for (image, depth) in images.iter().zip(1..) {
            assert_eq!(
                image.shape().depth(),
                depth,
                "base image of the wrong depth"
            );
        }
        images
    })
}

/// Writes trees page by page, for shapes `Tree` never makes.
struct Craft {
    pages: Vec<Vec<u8>>,
}

impl Craft {
    fn new() -> Craft {
        Craft {
            pages: vec![vec![0; PAGE_SIZE]; 2],
        }
    }

    fn next_pgid(&self) -> Pgid {
        Pgid(self.pages.len() as u64)
    }

    fn leaf(&mut self, entries: &[KeyValue]) -> Pgid {
        let kv_len: usize = entries.iter().map(|(k, v)| k.len() + v.len()).sum();
        assert!(leaf_page_size(entries.len(), kv_len) <= PAGE_SIZE);
        let pgid = self.next_pgid();
        let mut page = vec![0; PAGE_SIZE];
        let mut builder = LeafBuilder::new(&mut page, pgid, entries.len(), 0);
        for (key, value) in entries {
            builder.push(0, key, value);
        }
        builder.finish();
        self.pages.push(page);
        pgid
    }

    fn branch(&mut self, children: &[(Vec<u8>, Pgid)]) -> Pgid {
        let key_len: usize = children.iter().map(|(k, _)| k.len()).sum();
        assert!(branch_page_size(children.len(), key_len) <= PAGE_SIZE);
        let pgid = self.next_pgid();
        let mut page = vec![0; PAGE_SIZE];
        let mut builder = BranchBuilder::new(&mut page, pgid, children.len(), 0);
        for (key, child) in children {
            builder.push(key, *child);
        }
        builder.finish();
        self.pages.push(page);
        pgid
    }

    fn image(self, root: Pgid, entries: Vec<KeyValue>) -> Image {
        let high_water = self.next_pgid();
        Image {
            bytes: self.pages.concat(),
            high_water,
            root,
            entries,
        }
    }
}

// ---- An allocator for the write path -------------------------------------------------------

/// What `TestAlloc` says to a double free.
const DOUBLE_FREE: Reason = Reason::Other("page freed twice");

/// Hands out pages above the high-water mark (and drops what is written there), rejects a double
/// free (as `MemAlloc` and the real freelist do) unless `lax`. Caps the work it accepts, so
/// that a tree that keeps freeing or allocating ends here with an error and `runaway` set.
struct TestAlloc {
    first: u64,
    next: u64,
    freed: BTreeSet<u64>,
    lax: bool,
    frees_left: u64,
    bytes_left: usize,
    runaway: bool,
}

impl TestAlloc {
    fn new(pages: Pages<'_>, lax: bool) -> TestAlloc {
        TestAlloc {
            first: pages.high_water().0,
            next: pages.high_water().0,
            freed: BTreeSet::new(),
            lax,
            // Each page can be freed once; a tree whose loops are bounded by the depth limit
            // stops long before twice that plus two depth limits.
            frees_left: 2 * (pages.high_water().0 + DEPTH_MAX as u64),
            bytes_left: 64 << 20,
            runaway: false,
        }
    }

    fn runaway(&mut self, what: &'static str) -> Corruption {
        self.runaway = true;
        Corruption::new(Pgid(0), Reason::Other(what))
    }
}

impl PageAlloc for TestAlloc {
    type Error = Corruption;

    fn allocate(&mut self, n_pages: usize) -> Result<Pgid, Corruption> {
        let len = n_pages * PAGE_SIZE;
        if len > self.bytes_left {
            return Err(self.runaway("test allocator: more bytes allocated than the cap"));
        }
        self.bytes_left -= len;
        let pgid = Pgid(self.next);
        self.next += n_pages as u64;
        Ok(pgid)
    }

    fn write(&mut self, pgid: Pgid, buf: Box<[u8]>, _arena: &mut Arena) -> Result<(), Corruption> {
        assert!(
            pgid.0 >= self.first && pgid.0 < self.next && buf.len().is_multiple_of(PAGE_SIZE),
            "page {pgid} written without being allocated"
        );
        Ok(())
    }

    fn free(&mut self, pgid: Pgid, overflow: u32) -> Result<(), Corruption> {
        for offset in 0..=u64::from(overflow) {
            if self.frees_left == 0 {
                return Err(self.runaway("test allocator: more pages freed than exist"));
            }
            self.frees_left -= 1;
            let id = pgid.0 + offset;
            if id < 2 {
                return Err(Corruption::new(Pgid(id), Reason::Other("meta page freed")));
            }
            if !self.freed.insert(id) && !self.lax {
                return Err(Corruption::new(Pgid(id), DOUBLE_FREE));
            }
        }
        Ok(())
    }
}

// ---- Running things ------------------------------------------------------------------------

/// Runs `f` on another thread and fails if it does not finish within `DEADLINE`: a hang in
/// the code under test fails the test instead of stalling the run.
fn with_deadline(f: impl FnOnce() + Send + 'static) {
    rbolt_testkit::deadline::within(DEADLINE, "a walk of a corrupt tree", f);
}

/// The most entries a scan of `image` can see without reading some page twice: every entry
/// needs its own 16-byte element.
fn scan_cap(image: &Image) -> usize {
    image.bytes.len() / 16 + 1
}

/// What a full scan saw.
#[derive(Debug)]
struct Scan {
    keys: Vec<Vec<u8>>,
    end: Result<(), Corruption>,
    /// The scan went on past `scan_cap` entries: it read some page more than once.
    capped: bool,
}

fn scan(view: &TreeView<'_>, forward: bool, cap: usize) -> Scan {
    let mut cursor = view.cursor();
    let mut keys = Vec::new();
    let mut entry = if forward {
        cursor.first()
    } else {
        cursor.last()
    };
    loop {
        match entry {
            Ok(Some(e)) => {
                keys.push(e.key.to_vec());
                if keys.len() > cap {
                    return Scan {
                        keys,
                        end: Ok(()),
                        capped: true,
                    };
                }
            }
            Ok(None) => {
                return Scan {
                    keys,
                    end: Ok(()),
                    capped: false,
                };
            }
            Err(e) => {
                return Scan {
                    keys,
                    end: Err(e),
                    capped: false,
                };
            }
        }
        entry = if forward {
            cursor.next()
        } else {
            cursor.prev()
        };
    }
}

fn owned(entry: Option<Entry<'_>>) -> Option<KeyValue> {
    entry.map(|e| (e.key.to_vec(), e.value.to_vec()))
}

// ---- Expectations for one kind of damage ---------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Must {
    Fail,
    Pass,
    Either,
}

/// What one damaged image must give.
struct Expect {
    /// Names the damage in failure messages.
    name: String,
    /// The reason every error must have.
    reason: ReasonCheck,
    /// Keys whose operations may see the damage; the others must work as on the valid tree.
    damaged: BTreeSet<Vec<u8>>,
    /// Keys whose lookup (`get`, `seek`, `delete`) must fail.
    must_fail_read: BTreeSet<Vec<u8>>,
    /// Keys whose `put` and `delete` must fail (they make nodes of the damaged pages).
    must_fail_write: BTreeSet<Vec<u8>>,
    /// Full scans, both ways.
    scans: Must,
    /// `free_all` of the whole tree.
    free_all: Must,
}

impl Expect {
    fn new(name: String, reason: ReasonCheck) -> Expect {
        Expect {
            name,
            reason,
            damaged: BTreeSet::new(),
            must_fail_read: BTreeSet::new(),
            must_fail_write: BTreeSet::new(),
            scans: Must::Fail,
            free_all: Must::Fail,
        }
    }

    /// Damage that every operation on `keys` reads: lookups and writes of them must fail.
    fn all_fail(mut self, keys: &BTreeSet<Vec<u8>>) -> Expect {
        self.damaged.extend(keys.iter().cloned());
        self.must_fail_read.extend(keys.iter().cloned());
        self.must_fail_write.extend(keys.iter().cloned());
        self
    }

    fn check_error(&self, what: &str, error: &Corruption) {
        assert!(
            (self.reason)(&error.reason),
            "{}: {what} failed with an unexpected reason: {error} ({:?})",
            self.name,
            error.reason
        );
    }

    /// A lookup of `key` that gave `got`: the right entry, or an error where allowed.
    fn check_lookup(
        &self,
        what: &str,
        key: &[u8],
        value: &[u8],
        got: Result<Option<KeyValue>, Corruption>,
    ) {
        match got {
            Err(error) => {
                assert!(
                    self.damaged.contains(key),
                    "{}: {what} {key:?} failed though the damage is elsewhere: {error}",
                    self.name
                );
                self.check_error(&format!("{what} {key:?}"), &error);
            }
            Ok(found) => {
                assert!(
                    !self.must_fail_read.contains(key),
                    "{}: {what} {key:?} went through the damage and gave {found:?}",
                    self.name
                );
                assert_eq!(
                    found,
                    Some((key.to_vec(), value.to_vec())),
                    "{}: {what} {key:?}",
                    self.name
                );
            }
        }
    }

    fn check_scan(&self, image: &Image, forward: bool) {
        let view = TreeView::from_page(image.pages(), image.root);
        let scan = scan(&view, forward, scan_cap(image));
        let way = if forward { "forward" } else { "backward" };
        assert!(
            !scan.capped,
            "{}: {way} scan saw more than {} entries: it reads pages more than once",
            self.name,
            scan_cap(image)
        );
        // Everything before the damage comes first, intact.
        let mut healthy: Vec<Vec<u8>> = image
            .entries
            .iter()
            .map(|(k, _)| k.clone())
            .take_while(|k| !self.damaged.contains(k))
            .collect();
        if !forward {
            healthy = image
                .entries
                .iter()
                .rev()
                .map(|(k, _)| k.clone())
                .take_while(|k| !self.damaged.contains(k))
                .collect();
        }
        let n = healthy.len().min(scan.keys.len());
        assert_eq!(
            scan.keys[..n],
            healthy[..n],
            "{}: {way} scan before the damage",
            self.name
        );
        match (&scan.end, self.scans) {
            (Err(error), Must::Fail | Must::Either) => {
                // A scan may also stop where a key repeats: that is how it sees a page again.
                if !matches!(error.reason, Reason::KeyOrder { .. }) {
                    self.check_error(&format!("{way} scan"), error);
                }
                assert!(
                    scan.keys.len() >= healthy.len(),
                    "{}: {way} scan failed before reaching the damage",
                    self.name
                );
            }
            (Err(error), Must::Pass) => {
                panic!("{}: {way} scan failed: {error}", self.name)
            }
            (Ok(()), Must::Fail) => panic!(
                "{}: {way} scan ended without an error after {} of {} keys",
                self.name,
                scan.keys.len(),
                image.entries.len()
            ),
            (Ok(()), Must::Pass | Must::Either) => {
                let mut all: Vec<Vec<u8>> = image.entries.iter().map(|(k, _)| k.clone()).collect();
                if !forward {
                    all.reverse();
                }
                assert_eq!(scan.keys, all, "{}: {way} scan", self.name);
            }
        }
    }

    /// Runs every operation on the damaged image and checks each outcome.
    fn check(&self, image: &Image) {
        let pages = image.pages();
        let view = TreeView::from_page(pages, image.root);

        // Reads: get and seek of every key, with the cursor moved on after each seek.
        let mut cursor = view.cursor();
        for (key, value) in &image.entries {
            self.check_lookup("get", key, value, view.get(key).map(owned));
            let seek = cursor.seek(key).map(owned);
            let failed = seek.is_err();
            self.check_lookup("seek", key, value, seek);
            // After an error or not, the cursor answers without panicking.
            let _ = cursor.current();
            let _ = cursor.next();
            let _ = cursor.prev();
            let _ = cursor.prev();
            if failed {
                let _ = cursor.current();
            }
        }
        self.check_scan(image, true);
        self.check_scan(image, false);

        // Writes, each on a fresh tree as its own transaction.
        for (i, (key, _)) in image.entries.iter().enumerate() {
            let mut arena = Arena::new(pages.page_size());
            let mut tree = Tree::from_page(image.root);
            let put = tree.put(pages, &mut arena, key, b"new value", 0);
            match put {
                Err(error) => {
                    assert!(
                        self.damaged.contains(key),
                        "{}: put {key:?} failed though the damage is elsewhere: {error}",
                        self.name
                    );
                    self.check_error(&format!("put {key:?}"), &error);
                    // A failed put changes nothing: no node of the way down stays behind.
                    assert!(
                        !tree.is_dirty() && tree.stats().node_count == 0,
                        "{}: put {key:?} failed and left the tree edited",
                        self.name
                    );
                }
                Ok(outcome) => {
                    assert!(
                        !self.must_fail_write.contains(key),
                        "{}: put {key:?} went through the damage and gave {outcome:?}",
                        self.name
                    );
                    assert_eq!(outcome, Put::Replaced { flags: 0 }, "{}", self.name);
                    let mut alloc = TestAlloc::new(pages, false);
                    let committed = tree
                        .rebalance(pages, &mut arena, &mut alloc)
                        .and_then(|()| tree.spill(pages, &mut arena, &mut alloc));
                    assert!(
                        !alloc.runaway,
                        "{}: commit after put {key:?} ran away",
                        self.name
                    );
                    if !self.damaged.contains(key) {
                        committed.unwrap_or_else(|e| {
                            panic!("{}: commit after put {key:?}: {e}", self.name)
                        });
                    }
                }
            }

            // Deletes: one key, or every other key to make rebalance merge.
            let mut tree = Tree::from_page(image.root);
            let doomed: Vec<&Vec<u8>> = if i % 8 == 0 {
                image
                    .entries
                    .iter()
                    .skip(i % 2)
                    .step_by(2)
                    .map(|(k, _)| k)
                    .collect()
            } else {
                vec![key]
            };
            let mut result = Ok(());
            for doomed in doomed {
                let before = fingerprint(&tree, pages);
                match tree.delete(pages, &mut arena, doomed, 0) {
                    Err(error) => {
                        assert!(
                            self.damaged.contains(doomed),
                            "{}: delete {doomed:?} failed though the damage is elsewhere: {error}",
                            self.name
                        );
                        self.check_error(&format!("delete {doomed:?}"), &error);
                        // A failed delete changes nothing: the tree is as the deletes before
                        // it left it.
                        assert_eq!(
                            fingerprint(&tree, pages),
                            before,
                            "{}: delete {doomed:?} failed and changed the tree",
                            self.name
                        );
                        result = Err(error);
                        break;
                    }
                    Ok(outcome) => {
                        assert!(
                            !self.must_fail_read.contains(doomed)
                                && !self.must_fail_write.contains(doomed),
                            "{}: delete {doomed:?} went through the damage and gave {outcome:?}",
                            self.name
                        );
                        assert_eq!(outcome, Delete::Deleted { flags: 0 }, "{}", self.name);
                    }
                }
            }
            if result.is_ok() {
                let mut alloc = TestAlloc::new(pages, false);
                let _ = tree
                    .rebalance(pages, &mut arena, &mut alloc)
                    .and_then(|()| tree.spill(pages, &mut arena, &mut alloc));
                assert!(
                    !alloc.runaway,
                    "{}: commit after deletes ran away",
                    self.name
                );
            }
        }

        // free_all, and touch + commit.
        let mut alloc = TestAlloc::new(pages, false);
        let freed = Tree::from_page(image.root).free_all(pages, &mut alloc);
        assert!(!alloc.runaway, "{}: free_all ran away", self.name);
        match (freed, self.free_all) {
            // Freeing a page twice (a cycle) is also what the allocator may report first.
            (Err(error), Must::Fail | Must::Either) if error.reason == DOUBLE_FREE => {}
            (Err(error), Must::Fail | Must::Either) => self.check_error("free_all", &error),
            (Err(error), Must::Pass) => panic!("{}: free_all failed: {error}", self.name),
            (Ok(()), Must::Fail) => panic!(
                "{}: free_all freed the pages of a corrupt tree without an error",
                self.name
            ),
            (Ok(()), Must::Pass | Must::Either) => {}
        }
        let mut alloc = TestAlloc::new(pages, false);
        let mut tree = Tree::from_page(image.root);
        let mut arena = Arena::new(pages.page_size());
        let _ = tree
            .touch(pages, &mut arena)
            .and_then(|()| tree.rebalance(pages, &mut arena, &mut alloc))
            .and_then(|()| tree.spill(pages, &mut arena, &mut alloc));
        assert!(!alloc.runaway, "{}: touch and commit ran away", self.name);
    }
}

/// What can be seen of a tree: whether it is edited, its counters, its largest node, and a
/// scan of it through its view (as far as the damage lets it go).
type Fingerprint = (bool, rbolt_btree::TreeStats, usize, Vec<KeyValue>, bool);

fn fingerprint(tree: &Tree, pages: Pages<'_>) -> Fingerprint {
    let view = tree.view(pages);
    let mut cursor = view.cursor();
    let mut entries = Vec::new();
    let mut entry = cursor.first();
    let mut steps = 0;
    while let Ok(Some(e)) = entry {
        entries.push((e.key.to_vec(), e.value.to_vec()));
        steps += 1;
        if steps > 10_000 {
            break;
        }
        entry = cursor.next();
    }
    (
        tree.is_dirty(),
        tree.stats(),
        tree.largest_node_len(),
        entries,
        entry.is_err(),
    )
}

fn is_too_deep(reason: &Reason) -> bool {
    matches!(reason, Reason::TooDeep { depth_max } if *depth_max == DEPTH_MAX)
}

fn is_pgid_out_of_bounds(reason: &Reason) -> bool {
    matches!(reason, Reason::PgidOutOfBounds { .. })
}

fn is_id_mismatch(reason: &Reason) -> bool {
    matches!(reason, Reason::IdMismatch { .. })
}

fn is_wrong_kind(reason: &Reason) -> bool {
    matches!(
        reason,
        Reason::WrongKind { .. } | Reason::UnknownFlags(_) | Reason::NotTreePage { .. }
    )
}

fn is_overflow_out_of_bounds(reason: &Reason) -> bool {
    matches!(reason, Reason::OverflowOutOfBounds { .. })
}

fn is_count_too_large(reason: &Reason) -> bool {
    matches!(reason, Reason::CountTooLarge { .. })
}

fn is_element_out_of_bounds(reason: &Reason) -> bool {
    matches!(reason, Reason::ElementOutOfBounds { .. })
}

fn is_any(_: &Reason) -> bool {
    true
}

/// The branch slots to damage in a tree: the root's first and last child, and a middle child
/// of a branch one level down (when there is one).
fn slots(shape: &Shape) -> Vec<(Pgid, usize)> {
    let mut slots = Vec::new();
    for level in shape.levels.iter().take(2) {
        let Some(&branch) = level.iter().find(|p| shape.kind[p] == PageKind::Branch) else {
            continue;
        };
        let n = shape.children[&branch].len();
        if slots.is_empty() {
            slots.push((branch, 0));
            slots.push((branch, n - 1));
        } else {
            slots.push((branch, n / 2));
        }
    }
    slots
}

/// Pages whose own bytes to damage: the root, a branch below it, and a leaf.
fn targets(shape: &Shape) -> Vec<Pgid> {
    let mut targets = vec![shape.levels[0][0]];
    if let Some(level) = shape.levels.get(1)
        && let Some(&branch) = level.iter().find(|p| shape.kind[p] == PageKind::Branch)
    {
        targets.push(branch);
    }
    if shape.depth() > 1 {
        let leaves: Vec<Pgid> = shape.leaves().collect();
        targets.push(leaves[leaves.len() / 2]);
    }
    targets
}

// ---- Deterministic damage ------------------------------------------------------------------

/// A branch child pointing at itself, at its parent, at the metas, at and past the
/// high-water mark.
#[test]
fn bad_child_pointers() {
    with_deadline(|| {
        for image in &images()[1..] {
            let shape = image.shape();
            for (branch, index) in slots(&shape) {
                let child = shape.children[&branch][index];
                let keys = &shape.keys_under[&child];
                let hw = image.high_water.0;
                let mut cases: Vec<(&str, u64, ReasonCheck)> = vec![
                    ("itself", branch.0, is_too_deep),
                    ("page 0", 0, is_pgid_out_of_bounds),
                    ("page 1", 1, is_pgid_out_of_bounds),
                    ("the high-water mark", hw, is_pgid_out_of_bounds),
                    ("u64::MAX", u64::MAX, is_pgid_out_of_bounds),
                ];
                if let Some(parent) = shape.parent.get(&branch) {
                    cases.push(("its parent", parent.0, is_too_deep));
                }
                for (what, target, reason) in cases {
                    let mut damaged = image.clone();
                    damaged.set_child(branch, index, target);
                    let name = format!(
                        "depth {}: child {index} of branch {branch} points at {what}",
                        shape.depth()
                    );
                    Expect::new(name, reason).all_fail(keys).check(&damaged);
                }
            }
        }
    });
}

/// The root itself is a bad page id.
#[test]
fn bad_root_pointers() {
    with_deadline(|| {
        let image = &images()[2];
        for root in [0, 1, image.high_water.0, u64::MAX] {
            let mut damaged = image.clone();
            damaged.root = Pgid(root);
            let keys: BTreeSet<Vec<u8>> = image.entries.iter().map(|(k, _)| k.clone()).collect();
            Expect::new(format!("root {root}"), is_pgid_out_of_bounds)
                .all_fail(&keys)
                .check(&damaged);
        }
    });
}

/// A page whose header names another id, has the flags of a meta, freelist or no page
/// kind, or an overflow past the high-water mark.
#[test]
fn bad_child_headers() {
    with_deadline(|| {
        for image in images() {
            let shape = image.shape();
            for pgid in targets(&shape) {
                let keys = &shape.keys_under[&pgid];
                let hw = image.high_water.0;
                let mut cases: Vec<(HeaderDamage, ReasonCheck)> = vec![
                    (HeaderDamage::Id(pgid.0 + 1), is_id_mismatch),
                    (HeaderDamage::Id(0), is_id_mismatch),
                    (HeaderDamage::Id(u64::MAX), is_id_mismatch),
                    // Ends exactly at the high-water mark, one page too far.
                    (
                        HeaderDamage::Overflow((hw - pgid.0) as u32),
                        is_overflow_out_of_bounds,
                    ),
                    (HeaderDamage::Overflow(u32::MAX), is_overflow_out_of_bounds),
                ];
                for flags in [FLAG_META, FLAG_FREELIST, 0, 0x03, 0x80, 0xFFFF] {
                    cases.push((HeaderDamage::Flags(flags), is_wrong_kind));
                }
                for (damage, reason) in cases {
                    let mut damaged = image.clone();
                    match damage {
                        HeaderDamage::Id(id) => damaged.set_id(pgid, id),
                        HeaderDamage::Flags(flags) => damaged.set_flags(pgid, flags),
                        HeaderDamage::Overflow(overflow) => damaged.set_overflow(pgid, overflow),
                    }
                    let name = format!("depth {}: page {pgid} {damage:?}", shape.depth());
                    Expect::new(name, reason).all_fail(keys).check(&damaged);
                }
            }
        }
    });
}

/// A damaged header field and the value written there.
#[derive(Clone, Copy, Debug)]
enum HeaderDamage {
    Id(u64),
    Flags(u16),
    Overflow(u32),
}

/// Element counts past the page, and element positions and sizes past the span.
#[test]
fn bad_elements() {
    with_deadline(|| {
        for image in images() {
            let shape = image.shape();
            for pgid in targets(&shape) {
                let keys = &shape.keys_under[&pgid];
                let kind = shape.kind[&pgid];
                let is_leaf = kind == PageKind::Leaf;
                // Count: one element more than the page holds, and the 16-bit maximum.
                for count in [(PAGE_SIZE / 16) as u16, u16::MAX] {
                    let mut damaged = image.clone();
                    damaged.set_count(pgid, count);
                    let name = format!("depth {}: {kind} {pgid} count {count}", shape.depth());
                    let mut expect = Expect::new(name, is_count_too_large).all_fail(keys);
                    // Freeing a leaf does not read its elements.
                    expect.free_all = if is_leaf { Must::Either } else { Must::Fail };
                    expect.check(&damaged);
                }
                // Each field of the middle element, pushed past the span.
                let n = if is_leaf {
                    image
                        .pages()
                        .page(Pgid(0), pgid)
                        .map(|b| PageRef::new(b, pgid).unwrap().leaf().unwrap().len())
                } else {
                    Ok(shape.children[&pgid].len())
                }
                .unwrap();
                let index = n / 2;
                let fields: &[(usize, &str)] = if is_leaf {
                    &[(1, "pos"), (2, "ksize"), (3, "vsize")]
                } else {
                    &[(0, "pos"), (1, "ksize")]
                };
                for &(field, field_name) in fields {
                    for value in [PAGE_SIZE as u32, u32::MAX] {
                        let mut damaged = image.clone();
                        damaged.set_element_field(pgid, index, field, value);
                        let name = format!(
                            "depth {}: {kind} {pgid} element {index} {field_name} {value}",
                            shape.depth()
                        );
                        let mut expect = Expect::new(name, is_element_out_of_bounds);
                        // Every key of the page may meet the bad element in a binary search;
                        // the key it belongs to always does. Making a node reads all elements.
                        expect.damaged = keys.clone();
                        expect.must_fail_write = keys.clone();
                        if is_leaf {
                            let key = shape
                                .leaf_of
                                .iter()
                                .find(|(_, at)| **at == (pgid, index))
                                .map(|(k, _)| k.clone())
                                .unwrap();
                            expect.must_fail_read.insert(key);
                            expect.free_all = Must::Either;
                        } else {
                            let child = shape.children[&pgid][index];
                            expect.must_fail_read = shape.keys_under[&child].clone();
                            // Scans and free_all follow child ids and never read separators.
                            expect.scans = Must::Either;
                            expect.free_all = Must::Either;
                        }
                        expect.check(&damaged);
                    }
                }
            }
        }
    });
}

/// A branch page with no children, at the root and below it.
#[test]
fn empty_branch_pages() {
    with_deadline(|| {
        for image in &images()[1..] {
            let shape = image.shape();
            for pgid in targets(&shape) {
                if shape.kind[&pgid] != PageKind::Branch {
                    continue;
                }
                let mut damaged = image.clone();
                damaged.set_count(pgid, 0);
                let name = format!("depth {}: empty branch {pgid}", shape.depth());
                let mut expect = Expect::new(name, is_any).all_fail(&shape.keys_under[&pgid]);
                // Freeing an empty branch frees one page, reads nothing wrong.
                expect.free_all = Must::Either;
                expect.check(&damaged);
            }
        }
    });
}

/// A tree of one single-child branch after another above one leaf: exactly `DEPTH_MAX`
/// levels is a tree, one more is `TooDeep` for every operation that descends.
fn chain(levels: usize) -> Image {
    let mut craft = Craft::new();
    let entries = vec![(b"key".to_vec(), b"value".to_vec())];
    let mut pgid = craft.leaf(&entries);
    for _ in 1..levels {
        pgid = craft.branch(&[(b"key".to_vec(), pgid)]);
    }
    craft.image(pgid, entries)
}

#[test]
fn depth_limit_is_exact() {
    with_deadline(|| {
        let keys: BTreeSet<Vec<u8>> = [b"key".to_vec()].into();
        let mut deepest = Expect::new(format!("{DEPTH_MAX} levels"), is_any);
        deepest.scans = Must::Pass;
        deepest.free_all = Must::Pass;
        deepest.check(&chain(DEPTH_MAX));

        let mut too_deep =
            Expect::new(format!("{} levels", DEPTH_MAX + 1), is_too_deep).all_fail(&keys);
        too_deep.free_all = Must::Fail;
        too_deep.check(&chain(DEPTH_MAX + 1));
    });
}

/// A branch whose children are a leaf and branches: a search tree of uneven depth. Reads
/// work; deletes that make rebalance merge a leaf with a branch must fail, not panic.
#[test]
fn mixed_depth_children() {
    with_deadline(|| {
        let mut craft = Craft::new();
        let entry = |i: usize| (key_of(i, 8), value_of(i, 8));
        let entries: Vec<KeyValue> = (0..40).map(entry).collect();
        let leaf_a = craft.leaf(&entries[0..10]);
        let leaf_b = craft.leaf(&entries[10..20]);
        let leaf_c = craft.leaf(&entries[20..30]);
        let leaf_d = craft.leaf(&entries[30..40]);
        let branch_bc = craft.branch(&[
            (entries[10].0.clone(), leaf_b),
            (entries[20].0.clone(), leaf_c),
        ]);
        // leaf, branch, leaf.
        let root = craft.branch(&[
            (entries[0].0.clone(), leaf_a),
            (entries[10].0.clone(), branch_bc),
            (entries[30].0.clone(), leaf_d),
        ]);
        let image = craft.image(root, entries);
        let mut expect = Expect::new("mixed depths".into(), is_any);
        // Nothing a lookup or a scan reads is wrong: they must work.
        expect.scans = Must::Pass;
        expect.free_all = Must::Pass;
        expect.check(&image);
        // Deleting most of leaf A makes rebalance merge it with its sibling, a branch.
        let pages = image.pages();
        let mut arena = Arena::new(pages.page_size());
        let mut tree = Tree::from_page(root);
        for (key, _) in &image.entries[1..10] {
            assert_eq!(
                tree.delete(pages, &mut arena, key, 0).unwrap(),
                Delete::Deleted { flags: 0 }
            );
        }
        let mut alloc = TestAlloc::new(pages, false);
        let result = tree
            .rebalance(pages, &mut arena, &mut alloc)
            .and_then(|()| tree.spill(pages, &mut arena, &mut alloc));
        if let Err(error) = result {
            assert_eq!(
                error.reason,
                Reason::Other("sibling pages are of different kinds"),
                "{error}"
            );
        }
    });
}

/// Branches whose children all point at the same page, level after level: no cycle, every
/// path is short, but there are `4^24` of them. A scan must fail (a key repeats, or a page is
/// reached twice), not walk them all.
#[test]
fn shared_children_do_not_multiply_a_scan() {
    with_deadline(|| {
        let mut craft = Craft::new();
        let entries: Vec<KeyValue> = (0..4).map(|i| (key_of(i, 8), value_of(i, 8))).collect();
        let mut pgid = craft.leaf(&entries);
        for _ in 0..24 {
            let children: Vec<(Vec<u8>, Pgid)> = (0..4).map(|i| (key_of(i, 8), pgid)).collect();
            pgid = craft.branch(&children);
        }
        let image = craft.image(pgid, entries.clone());
        let view = TreeView::from_page(image.pages(), image.root);
        for forward in [true, false] {
            let scan = scan(&view, forward, scan_cap(&image));
            assert!(
                !scan.capped && scan.end.is_err(),
                "a {} scan over shared children ran on past {} entries (the file holds {} \
                 element slots; it would see 4^24 * 4) instead of failing",
                if forward { "forward" } else { "backward" },
                scan.keys.len(),
                scan_cap(&image)
            );
        }
        // Freeing reaches the shared page twice: the allocator's double-free check stops it.
        let pages = image.pages();
        let mut alloc = TestAlloc::new(pages, false);
        assert!(
            Tree::from_page(image.root)
                .free_all(pages, &mut alloc)
                .is_err()
        );
        assert!(!alloc.runaway);
    });
}

/// The tree's own depth limit bounds its work, whatever the allocator checks: with an
/// allocator that does not reject double frees, `free_all` over shared children and
/// `rebalance` of a root whose only child is itself must still stop with an error.
#[test]
fn work_is_bounded_without_the_allocators_double_free_check() {
    with_deadline(|| {
        // A root branch whose only child is the root.
        let mut craft = Craft::new();
        let root = craft.next_pgid();
        craft.branch(&[(b"a".to_vec(), root)]);
        let image = craft.image(root, Vec::new());
        let pages = image.pages();
        let mut arena = Arena::new(pages.page_size());
        let mut tree = Tree::from_page(root);
        tree.touch(pages, &mut arena).unwrap();
        let mut alloc = TestAlloc::new(pages, true);
        let result = tree
            .rebalance(pages, &mut arena, &mut alloc)
            .and_then(|()| tree.spill(pages, &mut arena, &mut alloc));
        assert!(
            !alloc.runaway,
            "rebalance of a root whose only child is itself kept collapsing it: {result:?}"
        );
        assert!(result.is_err(), "a self-referencing root committed");

        // Two children per branch, all the same page, 24 levels.
        let mut craft = Craft::new();
        let mut pgid = craft.leaf(&[(b"a".to_vec(), b"1".to_vec())]);
        for _ in 0..24 {
            pgid = craft.branch(&[(b"a".to_vec(), pgid), (b"b".to_vec(), pgid)]);
        }
        let image = craft.image(pgid, Vec::new());
        let pages = image.pages();
        let mut alloc = TestAlloc::new(pages, true);
        let result = Tree::from_page(image.root).free_all(pages, &mut alloc);
        assert!(
            !alloc.runaway,
            "free_all over shared children kept freeing (2^24 paths): {result:?}"
        );
        assert!(result.is_err(), "free_all over shared children succeeded");
    });
}

/// A cursor that failed to move must not be left pointing at a branch: `current`, `next` and
/// `prev` afterwards answer (anything but a panic).
#[test]
fn cursor_after_an_error() {
    with_deadline(|| {
        let image = &images()[2];
        let shape = image.shape();
        let root = shape.levels[0][0];
        let last = shape.children[&root].len() - 1;
        let mut damaged = image.clone();
        damaged.set_child(root, last, u64::MAX);
        let view = TreeView::from_page(damaged.pages(), damaged.root);

        // Seek into the healthy part, then move into the damage.
        for op in ["last", "seek", "next"] {
            let mut cursor = view.cursor();
            let first_key = &image.entries[0].0;
            assert!(cursor.seek(first_key).unwrap().is_some());
            let result = match op {
                "last" => cursor.last().map(owned),
                "seek" => cursor.seek(&image.entries.last().unwrap().0).map(owned),
                _ => {
                    // Walk forward to the damage.
                    let mut entry = cursor.current().map(owned);
                    while let Ok(Some(_)) = entry {
                        entry = cursor.next().map(owned);
                    }
                    entry
                }
            };
            assert!(result.is_err(), "{op} into the damage: {result:?}");
            let current = catch_unwind(AssertUnwindSafe(|| cursor.current().map(owned)));
            assert!(
                current.is_ok(),
                "Cursor::current panicked after a failed {op}"
            );
            let next = catch_unwind(AssertUnwindSafe(|| cursor.next().map(owned)));
            assert!(next.is_ok(), "Cursor::next panicked after a failed {op}");
            assert!(
                !matches!(next, Ok(Ok(None))),
                "after a failed {op}, next reports the end of the tree as if the damaged \
                 subtree were not there"
            );
        }
    });
}

/// The write path validates keys and flags it writes: a leaf whose keys are out of order, or
/// whose element flags are unknown, or that claims a bucket with a malformed value, is
/// corruption when a transaction rewrites it (spill), not a debug assertion.
#[test]
fn spill_of_a_corrupt_leaf_is_an_error() {
    with_deadline(|| {
        let image = &images()[2];
        let shape = image.shape();
        let leaves: Vec<Pgid> = shape.leaves().collect();
        let leaf = leaves[leaves.len() / 2];
        // Put the leaf's last key: the damaged elements 0 and 1 stay as they are.
        let (key, _) = shape
            .leaf_of
            .iter()
            .filter(|(_, at)| at.0 == leaf)
            .max_by_key(|(_, at)| at.1)
            .unwrap();
        assert!(shape.leaf_of[key].1 >= 2, "the leaf needs three keys");
        type Damage = (&'static str, fn(&mut Image, Pgid));
        let cases: [Damage; 3] = [
            ("element 0 with unknown flags", |image, p| {
                image.set_element_field(p, 0, 0, 0x80)
            }),
            ("element 0 marked a bucket", |image, p| {
                image.set_element_field(p, 0, 0, 1)
            }),
            ("element 1 key shortened below element 0", |image, p| {
                // Key 1 becomes its first byte only: smaller than key 0.
                image.set_element_field(p, 1, 2, 1)
            }),
        ];
        for (what, damage) in cases {
            let mut damaged = image.clone();
            damage(&mut damaged, leaf);
            let pages = damaged.pages();
            let mut arena = Arena::new(pages.page_size());
            let mut tree = Tree::from_page(damaged.root);
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                let put = tree.put(pages, &mut arena, key, b"x", 0)?;
                let mut alloc = TestAlloc::new(pages, false);
                tree.rebalance(pages, &mut arena, &mut alloc)?;
                tree.spill(pages, &mut arena, &mut alloc)?;
                Ok::<_, Corruption>(put)
            }));
            match outcome {
                Err(_) => panic!("put + spill into a leaf with {what} panicked"),
                Ok(Ok(put)) => panic!(
                    "put + spill into a leaf with {what} committed ({put:?}): it writes a \
                     corrupt page"
                ),
                Ok(Err(_)) => {}
            }
        }
    });
}

// ---- Random damage -------------------------------------------------------------------------

/// A page field a mutation writes.
#[derive(Clone, Copy, Debug)]
enum Field {
    Id,
    Flags,
    Count,
    Overflow,
    /// Field `n % 4` of element `index` (see `Image::set_element_field`).
    Element {
        index: u16,
        n: u8,
    },
    /// The child id of branch element `index`.
    Child {
        index: u16,
    },
}

/// One change to the image.
#[derive(Clone, Debug)]
enum Mutation {
    /// Any byte of any tree page.
    Byte { offset: usize, value: u8 },
    /// A header or element field of tree page `page % pages`.
    Field {
        page: usize,
        field: Field,
        value: Value,
    },
}

/// A value for a field: mostly the ones that matter at the edges.
#[derive(Clone, Copy, Debug)]
enum Value {
    Zero,
    One,
    /// A page of the tree (`n % pages`), or this page's parent, or itself.
    TreePage(usize),
    Parent,
    Itself,
    HighWater,
    HighWaterMinusOne,
    Max16,
    Max32,
    Max64,
    PageSize,
    Small(u8),
    Any(u64),
}

impl Arbitrary for Field {
    fn arbitrary(g: &mut Gen) -> Field {
        let index = u16::arbitrary(g) % 24;
        match u8::arbitrary(g) % 10 {
            0 => Field::Id,
            1 => Field::Flags,
            2 => Field::Count,
            3 => Field::Overflow,
            4..=6 => Field::Element {
                index,
                n: u8::arbitrary(g),
            },
            _ => Field::Child { index },
        }
    }
}

impl Arbitrary for Value {
    fn arbitrary(g: &mut Gen) -> Value {
        match u8::arbitrary(g) % 14 {
            0 => Value::Zero,
            1 => Value::One,
            2 | 3 => Value::TreePage(usize::arbitrary(g)),
            4 => Value::Parent,
            5 => Value::Itself,
            6 => Value::HighWater,
            7 => Value::HighWaterMinusOne,
            8 => Value::Max16,
            9 => Value::Max32,
            10 => Value::Max64,
            11 => Value::PageSize,
            12 => Value::Small(u8::arbitrary(g)),
            _ => Value::Any(u64::arbitrary(g)),
        }
    }
}

impl Arbitrary for Mutation {
    fn arbitrary(g: &mut Gen) -> Mutation {
        if bool::arbitrary(g) {
            Mutation::Byte {
                offset: usize::arbitrary(g),
                value: u8::arbitrary(g),
            }
        } else {
            Mutation::Field {
                page: usize::arbitrary(g),
                field: Field::arbitrary(g),
                value: Value::arbitrary(g),
            }
        }
    }
}

/// A base image and 1 to 20 mutations of it.
#[derive(Clone, Debug)]
struct Case {
    /// Index into `images()` (the deeper ones).
    image: usize,
    mutations: Vec<Mutation>,
}

impl Arbitrary for Case {
    fn arbitrary(g: &mut Gen) -> Case {
        let n = 1 + usize::arbitrary(g) % 20;
        Case {
            image: 1 + usize::arbitrary(g) % 3,
            mutations: (0..n).map(|_| Mutation::arbitrary(g)).collect(),
        }
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Case>> {
        let image = self.image;
        Box::new(
            self.mutations
                .shrink()
                .filter(|m| !m.is_empty())
                .map(move |mutations| Case { image, mutations }),
        )
    }
}

impl Case {
    fn apply(&self) -> Image {
        let base = &images()[self.image];
        let shape = base.shape();
        let tree_pages: Vec<Pgid> = shape.kind.keys().copied().collect();
        let mut image = base.clone();
        let hw = image.high_water.0;
        for mutation in &self.mutations {
            match *mutation {
                Mutation::Byte { offset, value } => {
                    // Bytes of the tree's pages only (pages 0 and 1 are not read).
                    let start = 2 * PAGE_SIZE;
                    let at = start + offset % (image.bytes.len() - start);
                    image.bytes[at] = value;
                }
                Mutation::Field { page, field, value } => {
                    let pgid = tree_pages[page % tree_pages.len()];
                    let value = match value {
                        Value::Zero => 0,
                        Value::One => 1,
                        Value::TreePage(n) => tree_pages[n % tree_pages.len()].0,
                        Value::Parent => shape.parent.get(&pgid).map_or(pgid.0, |p| p.0),
                        Value::Itself => pgid.0,
                        Value::HighWater => hw,
                        Value::HighWaterMinusOne => hw - 1,
                        Value::Max16 => u64::from(u16::MAX),
                        Value::Max32 => u64::from(u32::MAX),
                        Value::Max64 => u64::MAX,
                        Value::PageSize => PAGE_SIZE as u64,
                        Value::Small(n) => u64::from(n),
                        Value::Any(n) => n,
                    };
                    match field {
                        Field::Id => image.set_id(pgid, value),
                        Field::Flags => image.set_flags(pgid, value as u16),
                        Field::Count => image.set_count(pgid, value as u16),
                        Field::Overflow => image.set_overflow(pgid, value as u32),
                        Field::Element { index, n } => image.set_element_field(
                            pgid,
                            index.into(),
                            usize::from(n % 4),
                            value as u32,
                        ),
                        Field::Child { index } => image.set_child(pgid, index.into(), value),
                    }
                }
            }
        }
        image
    }
}

/// Runs `f`, turning a panic into a description of it.
fn guard<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into());
        format!("{what} panicked: {message}")
    })
}

/// Every read operation on `view`: lookups and seeks of `probes` (moving on and back after
/// each), and full scans both ways, which must stop within `cap` entries.
fn exercise_reads(view: &TreeView<'_>, probes: &[Vec<u8>], cap: usize) -> Result<(), String> {
    for probe in probes {
        guard("get", || {
            let _ = view.get(probe);
        })?;
        let mut cursor = view.cursor();
        guard("seek + current/next/prev", || {
            let _ = cursor.seek(probe);
            let _ = cursor.current();
            for _ in 0..3 {
                let _ = cursor.next();
                let _ = cursor.current();
            }
            for _ in 0..5 {
                let _ = cursor.prev();
                let _ = cursor.current();
            }
        })?;
    }
    for forward in [true, false] {
        let way = if forward { "forward" } else { "backward" };
        let mut cursor = view.cursor();
        let steps = guard(way, || {
            let mut steps = 0;
            let mut entry = if forward {
                cursor.first()
            } else {
                cursor.last()
            };
            while let Ok(Some(_)) = entry {
                steps += 1;
                if steps > cap {
                    break;
                }
                entry = if forward {
                    cursor.next()
                } else {
                    cursor.prev()
                };
            }
            // After the end or an error, the cursor still answers.
            let _ = cursor.current();
            let _ = cursor.next();
            let _ = cursor.current();
            let _ = cursor.prev();
            let _ = cursor.current();
            steps
        })?;
        if steps > cap {
            return Err(format!(
                "{way} scan saw more than {cap} entries: it reads pages more than once"
            ));
        }
    }
    Ok(())
}

/// Every write operation, each sequence as its own transaction that stops at its first error.
fn exercise_writes(image: &Image, probes: &[Vec<u8>], cap: usize) -> Result<(), String> {
    let pages = image.pages();
    let runaway = |alloc: &TestAlloc, what: &str| {
        if alloc.runaway {
            Err(format!("{what}: the tree freed or allocated without bound"))
        } else {
            Ok(())
        }
    };

    // Puts (new and existing keys), reads through the edited tree, deletes, commit.
    let mut alloc = TestAlloc::new(pages, false);
    guard("put, read, delete, rebalance, spill", || {
        let mut arena = Arena::new(pages.page_size());
        let mut tree = Tree::from_page(image.root);
        let mut ok = true;
        for (i, probe) in probes.iter().enumerate().step_by(7) {
            if tree
                .put(pages, &mut arena, probe, &[i as u8; 20], 0)
                .is_err()
            {
                ok = false;
                break;
            }
        }
        exercise_reads(&tree.view(pages), &probes[..probes.len().min(40)], cap)?;
        if ok {
            for probe in probes.iter().skip(3).step_by(5) {
                if tree.delete(pages, &mut arena, probe, 0).is_err() {
                    ok = false;
                    break;
                }
            }
        }
        if ok {
            let _ = tree
                .rebalance(pages, &mut arena, &mut alloc)
                .and_then(|()| tree.spill(pages, &mut arena, &mut alloc));
        }
        Ok::<(), String>(())
    })??;
    runaway(&alloc, "put and delete")?;

    // Delete most keys: rebalance merges and collapses.
    let mut alloc = TestAlloc::new(pages, false);
    guard("delete most, rebalance, spill", || {
        let mut arena = Arena::new(pages.page_size());
        let mut tree = Tree::from_page(image.root);
        for (i, (key, _)) in image.entries.iter().enumerate() {
            if i % 4 != 1 && tree.delete(pages, &mut arena, key, 0).is_err() {
                return;
            }
        }
        let _ = tree
            .rebalance(pages, &mut arena, &mut alloc)
            .and_then(|()| tree.spill(pages, &mut arena, &mut alloc));
    })?;
    runaway(&alloc, "delete most")?;

    let mut alloc = TestAlloc::new(pages, false);
    guard("free_all", || {
        let _ = Tree::from_page(image.root).free_all(pages, &mut alloc);
    })?;
    runaway(&alloc, "free_all")?;

    let mut alloc = TestAlloc::new(pages, false);
    guard("touch, rebalance, spill", || {
        let mut arena = Arena::new(pages.page_size());
        let mut tree = Tree::from_page(image.root);
        let _ = tree
            .touch(pages, &mut arena)
            .and_then(|()| tree.rebalance(pages, &mut arena, &mut alloc))
            .and_then(|()| tree.spill(pages, &mut arena, &mut alloc));
    })?;
    runaway(&alloc, "touch")?;
    Ok(())
}

/// `Tree::delete_where` over the damaged pages, each way, after a few puts (so that nodes
/// older than the walk exist): an error (a corrupt page met halfway) must leave the tree
/// exactly as it was; otherwise the tree goes on to rebalance and spill.
fn exercise_delete_where(image: &Image, probes: &[Vec<u8>]) -> Result<(), String> {
    let pages = image.pages();
    for forward in [true, false] {
        let mut alloc = TestAlloc::new(pages, false);
        guard("puts, delete_where, rebalance, spill", || {
            let mut arena = Arena::new(pages.page_size());
            let mut tree = Tree::from_page(image.root);
            for (i, probe) in probes.iter().enumerate().step_by(13) {
                if tree
                    .put(pages, &mut arena, probe, &[i as u8; 9], 0)
                    .is_err()
                {
                    return Ok(());
                }
            }
            let before = fingerprint(&tree, pages);
            let direction = if forward {
                Direction::Forward
            } else {
                Direction::Backward
            };
            let mut n = 0u64;
            let walked = tree.delete_where::<Corruption>(
                pages,
                &mut arena,
                std::ops::Bound::Unbounded,
                direction,
                &mut |_| {
                    n += 1;
                    Ok(if n.is_multiple_of(2) {
                        Verdict::Keep
                    } else {
                        Verdict::Delete
                    })
                },
            );
            if walked.is_err() {
                let after = fingerprint(&tree, pages);
                if after != before {
                    return Err(format!(
                        "a delete_where that failed ({walked:?}) changed the tree: {before:?} -> {after:?}"
                    ));
                }
                return Ok(());
            }
            let _ = tree
                .rebalance(pages, &mut arena, &mut alloc)
                .and_then(|()| tree.spill(pages, &mut arena, &mut alloc));
            Ok(())
        })??;
        if alloc.runaway {
            return Err("delete_where: the tree freed or allocated without bound".to_string());
        }
    }
    Ok(())
}

fn run_case(case: Case) -> TestResult {
    let image = case.apply();
    let Ok(pages) = Pages::new(&image.bytes, PAGE_SIZE, image.high_water) else {
        return TestResult::discard();
    };
    // Every key, a key between each pair, and keys before and after all.
    let mut probes: Vec<Vec<u8>> = vec![Vec::new(), vec![0], vec![0xFF; 40]];
    for (key, _) in &image.entries {
        probes.push(key.clone());
        let mut between = key.clone();
        between.push(0);
        probes.push(between);
    }
    let cap = scan_cap(&image);
    let view = TreeView::from_page(pages, image.root);
    let outcome = exercise_reads(&view, &probes, cap)
        .and_then(|()| exercise_writes(&image, &probes[1..], cap))
        .and_then(|()| exercise_delete_where(&image, &probes[1..]));
    match outcome {
        Ok(()) => TestResult::passed(),
        Err(failure) => TestResult::error(failure),
    }
}

#[test]
fn random_damage_never_panics_or_hangs() {
    with_deadline(|| {
        images();
        QuickCheck::new()
            .tests(300)
            .max_tests(3000)
            .quickcheck(run_case as fn(Case) -> TestResult);
    });
}

/// A root whose second child is the root itself, above a leaf whose first key is its largest:
/// each lap of a forward scan crosses from the leaf's last key up to its first, so the check
/// of keys where a scan crosses pages passes, and every lap is one level deeper, so the
/// depth limit ends it only after 64 laps. The scan must end after reading about as many
/// pages as the file holds.
#[test]
fn a_scan_round_a_cycle_whose_keys_rise_where_it_crosses_ends() {
    with_deadline(|| {
        let mut craft = Craft::new();
        let mut entries: Vec<KeyValue> = (1..7).map(|i| (key_of(i, 8), value_of(i, 8))).collect();
        // The leaf's first key is larger than every other.
        entries[0].0 = key_of(99, 8);
        let leaf = craft.leaf(&entries);
        let root = craft.next_pgid();
        craft.branch(&[(key_of(0, 8), leaf), (key_of(50, 8), root)]);
        let image = craft.image(root, entries.clone());
        let view = TreeView::from_page(image.pages(), image.root);
        let scan = scan(&view, true, scan_cap(&image));
        assert!(
            !scan.capped,
            "the scan went on past {} entries",
            scan_cap(&image)
        );
        let error = scan.end.expect_err("the scan ended without an error");
        assert!(
            scan.keys.len() <= entries.len() * image.high_water.0 as usize,
            "{} keys before the error ({error})",
            scan.keys.len()
        );
    });
}

/// A case `random_damage_never_panics_or_hangs` found in CI (quickcheck's shrunk arguments):
/// one byte of the deepest image set to 1.
#[test]
fn a_damaged_byte_found_by_the_random_sweep_is_an_error() {
    with_deadline(|| {
        images();
        let case = Case {
            image: 3,
            mutations: vec![Mutation::Byte {
                offset: 2829333783633451635,
                value: 1,
            }],
        };
        let result = run_case(case);
        assert!(!result.is_failure(), "{result:?}");
    });
}

/// `Tree::delete_where` and `Tree::touch_to_depth` keep the depth limit as every descent
/// does: a chain of exactly `DEPTH_MAX` levels is walked (its entry deleted, each way) or
/// touched down to its leaf; one level more is `TooDeep`, and the tree is left as it was.
#[test]
fn delete_where_and_touch_to_depth_keep_the_depth_limit() {
    with_deadline(|| {
        for (levels, walks) in [(DEPTH_MAX, true), (DEPTH_MAX + 1, false)] {
            let image = chain(levels);
            let pages = image.pages();
            for direction in [Direction::Forward, Direction::Backward] {
                let mut arena = Arena::new(PAGE_SIZE);
                let mut tree = Tree::from_page(image.root);
                let before = fingerprint(&tree, pages);
                let outcome = tree.delete_where::<Corruption>(
                    pages,
                    &mut arena,
                    std::ops::Bound::Unbounded,
                    direction,
                    &mut |_| Ok(Verdict::Delete),
                );
                let what = format!("{levels} levels, {direction:?}");
                if walks {
                    assert_eq!(outcome.unwrap(), 1, "{what}");
                } else {
                    let error = outcome.unwrap_err();
                    assert!(is_too_deep(&error.reason), "{what}: {error}");
                    assert_eq!(fingerprint(&tree, pages), before, "{what}");
                }
            }
            let mut arena = Arena::new(PAGE_SIZE);
            let mut tree = Tree::from_page(image.root);
            let touched = tree.touch_to_depth(pages, &mut arena, b"key", DEPTH_MAX + 5);
            if walks {
                let leaf = touched.unwrap().expect("the leaf's page");
                let page = PageRef::new(pages.page(Pgid(0), leaf).unwrap(), leaf).unwrap();
                assert!(page.leaf().is_ok(), "touched down to the leaf");
            } else {
                let error = touched.unwrap_err();
                assert!(
                    is_too_deep(&error.reason),
                    "touch, {levels} levels: {error}"
                );
                assert!(!tree.is_dirty(), "a failed touch changed the tree");
            }
        }
    });
}

/// A branch whose children are all one leaf of two pages (a page and an overflow page): the
/// walks that free or list a tree's pages count each visit's whole span against the file's
/// pages and stop with an error once they have counted more pages than the file holds,
/// never counting past zero.
#[test]
fn a_shared_overflow_leaf_is_an_error_for_free_all_and_for_each_page() {
    with_deadline(|| {
        let mut craft = Craft::new();
        let leaf = craft.next_pgid();
        let mut span = vec![0; 2 * PAGE_SIZE];
        let mut builder = LeafBuilder::new(&mut span, leaf, 1, 1);
        builder.push(0, b"a", &[7; 600]);
        builder.finish();
        craft.pages.push(span[..PAGE_SIZE].to_vec());
        craft.pages.push(span[PAGE_SIZE..].to_vec());
        let children: Vec<(Vec<u8>, Pgid)> = (0..4u8).map(|i| (vec![b'a', i], leaf)).collect();
        let root = craft.branch(&children);
        // An unused page: 6 pages, so the count goes 6, 5, 3, 1 and the next span of 2
        // would pass zero.
        craft.leaf(&[]);
        let image = craft.image(root, Vec::new());
        assert_eq!(image.high_water, Pgid(6));
        let pages = image.pages();
        let reaches_twice = |error: &Corruption| matches!(error.reason, Reason::Other(what) if what.contains("twice"));
        let mut alloc = TestAlloc::new(pages, true);
        let freed = Tree::from_page(root).free_all(pages, &mut alloc);
        assert!(freed.as_ref().is_err_and(reaches_twice), "{freed:?}");
        let mut named = 0;
        let listed = Tree::from_page(root).for_each_page(pages, |_, _| named += 1);
        assert!(listed.as_ref().is_err_and(reaches_twice), "{listed:?}");
        assert_eq!(named, 3, "the root and the leaf twice");
    });
}
