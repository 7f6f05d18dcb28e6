//! The page walker on pages built by hand: the order and the facts of its events on a sound
//! tree, and on damaged ones — cycles, shared pages, bucket roots pointing back at an
//! ancestor, ids of meta pages and past the high-water mark, wrong page kinds, bad elements,
//! overflow past the mark, a chain of branches deeper than `DEPTH_MAX`, buckets nested a
//! hundred thousand deep — that each gives its typed damage and the walk goes on (or stops,
//! for a visitor that stops), never a panic or a hang.

use super::{Damage, EntryAt, PageAt, PageWalk, Visitor};
use crate::error::Error;
use rbolt_btree::{DEPTH_MAX, Pages};
use rbolt_page::{
    BranchBuilder, BranchPage, BucketHeader, BucketValue, Corruption, LEAF_FLAG_BUCKET,
    LeafBuilder, LeafPage, PageHeader, PageKind, Pgid, Reason,
};
use std::convert::Infallible;

const PAGE_SIZE: usize = 256;

/// A file of `PAGE_SIZE` pages, built page by page.
struct File {
    bytes: Vec<u8>,
}

/// A leaf entry to build: a key and a plain value, a bucket with a root page, or an inline
/// bucket with its entries.
enum Item<'a> {
    Value(&'a str, &'a str),
    Bucket(&'a str, u64),
    Inline(&'a str, &'a [(&'a str, &'a str)]),
}

impl File {
    fn new(pages: usize) -> File {
        File {
            bytes: vec![0; pages * PAGE_SIZE],
        }
    }

    fn span(&mut self, pgid: u64, overflow: u32) -> &mut [u8] {
        let start = pgid as usize * PAGE_SIZE;
        &mut self.bytes[start..start + (overflow as usize + 1) * PAGE_SIZE]
    }

    fn branch(&mut self, pgid: u64, children: &[(&str, u64)]) {
        let mut page = BranchBuilder::new(self.span(pgid, 0), Pgid(pgid), children.len(), 0);
        for &(key, child) in children {
            page.push(key.as_bytes(), Pgid(child));
        }
        page.finish();
    }

    fn leaf(&mut self, pgid: u64, overflow: u32, items: &[Item<'_>]) {
        let values: Vec<(u32, &str, Vec<u8>)> = items
            .iter()
            .map(|item| match *item {
                Item::Value(key, value) => (0, key, value.as_bytes().to_vec()),
                Item::Bucket(key, root) => (LEAF_FLAG_BUCKET, key, bucket_value(root, &[])),
                Item::Inline(key, entries) => (LEAF_FLAG_BUCKET, key, bucket_value(0, entries)),
            })
            .collect();
        let span = self.span(pgid, overflow);
        let mut page = LeafBuilder::new(span, Pgid(pgid), values.len(), overflow);
        for (flags, key, value) in &values {
            page.push(*flags, key.as_bytes(), value);
        }
        page.finish();
    }

    fn header(&mut self, pgid: u64, header: PageHeader) {
        header.write(self.span(pgid, 0));
    }

    fn pages(&self) -> Pages<'_> {
        let high_water = Pgid((self.bytes.len() / PAGE_SIZE) as u64);
        Pages::new(&self.bytes, PAGE_SIZE, high_water).expect("the file holds its pages")
    }
}

/// A bucket value: a header naming `root`, and for an inline bucket (`root` 0) its page.
fn bucket_value(root: u64, entries: &[(&str, &str)]) -> Vec<u8> {
    let mut value = vec![0; 16];
    BucketHeader { root, sequence: 0 }.write(&mut value);
    if root == 0 {
        let mut page = vec![0; PAGE_SIZE];
        let mut leaf = LeafBuilder::new(&mut page, Pgid(0), entries.len(), 0);
        for &(key, value) in entries {
            leaf.push(0, key.as_bytes(), value.as_bytes());
        }
        let len = leaf.finish();
        value.extend_from_slice(&page[..len]);
    }
    value
}

fn text(bytes: Option<&[u8]>) -> String {
    bytes.map_or("-".to_string(), |b| String::from_utf8_lossy(b).into_owned())
}

/// A visitor that writes down every call and walks on past damage, as check does.
#[derive(Default)]
struct Recorder {
    events: Vec<String>,
    damage: Vec<Damage>,
}

impl<'a> Visitor<'a> for Recorder {
    type Token = ();
    type Error = Infallible;
    const KEY_RANGES: bool = true;
    const ENTRIES: bool = true;

    fn damage(&mut self, damage: Damage) -> Result<(), Infallible> {
        self.events.push(format!("damage {damage:?}"));
        self.damage.push(damage);
        Ok(())
    }

    fn page(&mut self, at: &PageAt<'a>, (): ()) -> Result<Option<()>, Infallible> {
        self.events.push(format!(
            "page {} owner {} slot {:?} depth {} keys {}..{} span {:?}",
            at.pgid(),
            at.owner,
            at.slot,
            at.depth,
            text(at.range.low),
            text(at.range.high),
            at.span()
        ));
        Ok(Some(()))
    }

    fn branch(&mut self, at: &PageAt<'a>, _: &BranchPage<'a>, (): ()) -> Result<(), Infallible> {
        self.events.push(format!("branch {}", at.pgid()));
        Ok(())
    }

    fn leaf(&mut self, at: &PageAt<'a>, _: &LeafPage<'a>, (): ()) -> Result<(), Infallible> {
        self.events.push(format!("leaf {}", at.pgid()));
        Ok(())
    }

    fn entry(&mut self, at: &EntryAt<'a>, (): ()) -> Result<(), Infallible> {
        self.events.push(format!(
            "entry {}#{} {} after {}",
            at.pgid,
            at.index,
            text(Some(at.entry.key)),
            text(at.previous)
        ));
        Ok(())
    }

    fn bucket(
        &mut self,
        at: &EntryAt<'a>,
        value: &BucketValue<'a>,
        (): (),
    ) -> Result<Option<()>, Infallible> {
        let root = match value.inline {
            Some(_) => "inline".to_string(),
            None => format!("root {}", value.header.root_pgid()),
        };
        self.events
            .push(format!("bucket {} {root}", text(Some(at.entry.key))));
        Ok(Some(()))
    }
}

/// A visitor that stops at the first damage, as stats, the planner and the reachable set do.
struct Stopper {
    pages: usize,
}

impl Visitor<'_> for Stopper {
    type Token = ();
    type Error = Error;

    fn damage(&mut self, damage: Damage) -> Result<(), Error> {
        Err(damage.into())
    }

    fn page(&mut self, _: &PageAt<'_>, (): ()) -> Result<Option<()>, Error> {
        self.pages += 1;
        Ok(Some(()))
    }
}

fn record(file: &File, root: u64) -> (Recorder, PageWalk<'_>) {
    let mut walk = PageWalk::new(file.pages());
    let mut recorder = Recorder::default();
    let Ok(()) = walk.tree(&mut recorder, Pgid(0), Pgid(root), ());
    (recorder, walk)
}

fn stop(file: &File, root: u64) -> (Result<(), Error>, usize) {
    let mut stopper = Stopper { pages: 0 };
    let result = PageWalk::new(file.pages()).tree(&mut stopper, Pgid(0), Pgid(root), ());
    (result, stopper.pages)
}

#[test]
fn a_sound_tree_is_walked_depth_first_in_key_order_with_its_ranges_and_buckets() {
    let mut file = File::new(8);
    file.branch(2, &[("a", 3), ("m", 4)]);
    file.leaf(3, 0, &[Item::Value("a", "1"), Item::Bucket("b", 6)]);
    file.leaf(
        4,
        1,
        &[
            Item::Inline("m", &[("x", "y"), ("z", "w")]),
            Item::Value("z", "2"),
        ],
    );
    file.leaf(6, 0, &[Item::Value("k", "v")]);
    file.leaf(7, 0, &[]);
    let (recorder, walk) = record(&file, 2);
    assert_eq!(
        recorder.events,
        [
            "page 2 owner 0 slot None depth 0 keys -..- span 2..=2",
            "branch 2",
            "page 3 owner 2 slot Some(0) depth 1 keys a..m span 3..=3",
            "entry 3#0 a after -",
            "entry 3#1 b after a",
            "bucket b root 6",
            "leaf 3",
            "page 6 owner 3 slot None depth 0 keys -..- span 6..=6",
            "entry 6#0 k after -",
            "leaf 6",
            "page 4 owner 2 slot Some(1) depth 1 keys m..- span 4..=5",
            "entry 4#0 m after -",
            "bucket m inline",
            "entry 4#1 z after m",
            "leaf 4",
            // The inline page's entries, named by the page holding its bucket value.
            "entry 4#0 x after -",
            "entry 4#1 z after x",
        ]
    );
    let seen: Vec<u64> = (0..8).filter(|&id| walk.seen().contains(id)).collect();
    assert_eq!(seen, [2, 3, 4, 5, 6], "page 7 is reached by nothing");
    assert_eq!(stop(&file, 2).1, 4);
}

#[test]
fn each_kind_of_damage_is_typed_and_the_walk_goes_on_past_it() {
    let mut file = File::new(10);
    file.branch(
        2,
        &[
            ("a", 3), // sound, but its bucket's root is the root branch
            ("b", 2), // the branch itself: a cycle
            ("c", 99),
            ("d", 1),
            ("e", 4),
            ("f", 5),
            ("g", 6),
            ("h", 3), // shared with "a"
        ],
    );
    file.leaf(3, 0, &[Item::Value("a", "1"), Item::Bucket("ab", 2)]);
    file.header(4, PageHeader::new(Pgid(4), PageKind::Freelist, 0, 0));
    // Leaf 5: a bucket entry whose walk the bad entry after it cancels, then an entry whose
    // value runs past the page.
    file.leaf(5, 0, &[Item::Bucket("f", 7), Item::Value("g", "x")]);
    let vsize_at = 5 * PAGE_SIZE + 16 + 16 + 12;
    file.bytes[vsize_at..vsize_at + 4].copy_from_slice(&10_000u32.to_le_bytes());
    file.leaf(6, 0, &[Item::Value("g", "1")]);
    file.header(6, PageHeader::new(Pgid(6), PageKind::Leaf, 1, 50));
    file.leaf(7, 0, &[Item::Value("never", "walked")]);
    let (recorder, walk) = record(&file, 2);
    let high_water = Pgid(10);
    let twice = |pgid, owner, first| Damage::ReachedTwice {
        pgid: Pgid(pgid),
        owner: Pgid(owner),
        first: Pgid(first),
    };
    let out_of_bounds = |pgid| Damage::OutOfBounds {
        pgid: Pgid(pgid),
        owner: Pgid(2),
        high_water,
    };
    let [bad_entry, overflow] = [5, 6].map(|pgid| {
        let span = file.pages().page(Pgid(2), Pgid(pgid));
        let error = span.and_then(|span| LeafPage::new(span, Pgid(pgid))?.entry(1));
        Damage::Corrupt(
            error
                .err()
                .unwrap_or(Corruption::new(Pgid(0), Reason::Other("-"))),
        )
    });
    assert!(matches!(&bad_entry, Damage::Corrupt(c) if c.pgid == Pgid(5)));
    assert!(matches!(&overflow, Damage::Corrupt(c)
        if matches!(c.reason, Reason::OverflowOutOfBounds { overflow: 50 })));
    assert_eq!(
        recorder.damage,
        [
            twice(2, 3, 2),
            twice(2, 2, 2),
            out_of_bounds(99),
            out_of_bounds(1),
            Damage::NotTreePage {
                pgid: Pgid(4),
                flags: PageKind::Freelist.flags(),
            },
            bad_entry,
            overflow,
            twice(3, 2, 3),
        ]
    );
    assert!(
        !recorder.events.iter().any(|e| e.starts_with("page 7")),
        "a leaf whose entries do not all decode has none of its buckets walked: {:?}",
        recorder.events
    );
    assert!(!recorder.events.contains(&"leaf 5".to_string()));
    assert!(!walk.seen().contains(7));

    // A visitor that stops does so at the first, with the error every walk but check gives.
    let (result, pages) = stop(&file, 2);
    let Err(Error::Corruption(corruption)) = result else {
        panic!("the cycle through the bucket is an error: {result:?}");
    };
    assert_eq!(corruption, Corruption::new(Pgid(2), Reason::ReachableTwice));
    assert_eq!(pages, 2);
}

#[test]
fn each_damage_is_the_corruption_reading_the_page_for_a_tree_gives() {
    let pages = {
        let mut file = File::new(4);
        file.header(2, PageHeader::new(Pgid(2), PageKind::Meta, 0, 0));
        file
    };
    // What `Pages::page` says of a meta page's id, and `PageRef::kind` of unknown flags.
    let read = pages.pages().page(Pgid(3), Pgid(1)).err();
    let cases = [
        (
            Damage::OutOfBounds {
                pgid: Pgid(1),
                owner: Pgid(3),
                high_water: Pgid(4),
            },
            read.clone().expect("page 1 is no tree page"),
        ),
        (
            Damage::TooDeep { pgid: Pgid(9) },
            Corruption::new(
                Pgid(9),
                Reason::TooDeep {
                    depth_max: DEPTH_MAX,
                },
            ),
        ),
        (
            Damage::NotTreePage {
                pgid: Pgid(2),
                flags: PageKind::Meta.flags(),
            },
            Corruption::new(
                Pgid(2),
                Reason::WrongKind {
                    expected: PageKind::Leaf,
                    flags: PageKind::Meta.flags(),
                },
            ),
        ),
        (
            Damage::NotTreePage {
                pgid: Pgid(2),
                flags: 0xEEEE,
            },
            Corruption::new(Pgid(2), Reason::UnknownFlags(0xEEEE)),
        ),
    ];
    for (damage, corruption) in cases {
        assert_eq!(Corruption::from(damage), corruption);
    }
}

/// `levels` pages from page 2 down: single-child branches above one leaf.
fn chain(levels: u64) -> File {
    let mut file = File::new(levels as usize + 2);
    for pgid in 2..levels + 1 {
        file.branch(pgid, &[("k", pgid + 1)]);
    }
    file.leaf(levels + 1, 0, &[Item::Value("k", "v")]);
    file
}

#[test]
fn a_tree_deeper_than_depth_max_is_too_deep_and_one_of_depth_max_levels_is_not() {
    let levels = DEPTH_MAX as u64;
    let (recorder, _) = record(&chain(levels), 2);
    assert_eq!(recorder.damage, []);
    assert!(recorder.events.contains(&format!("leaf {}", levels + 1)));
    assert_eq!(stop(&chain(levels), 2).1, DEPTH_MAX);

    let (recorder, _) = record(&chain(levels + 1), 2);
    // The page at depth DEPTH_MAX (the leaf, page 2 + DEPTH_MAX) is not entered.
    assert_eq!(
        recorder.damage,
        [Damage::TooDeep {
            pgid: Pgid(levels + 2)
        }]
    );
    let (result, pages) = stop(&chain(levels + 1), 2);
    assert!(
        matches!(result, Err(Error::Corruption(c)) if matches!(c.reason, Reason::TooDeep { .. }))
    );
    assert_eq!(pages, DEPTH_MAX);
}

#[test]
fn buckets_nested_a_hundred_thousand_deep_are_walked_and_a_loop_of_them_ends() {
    const NESTED: u64 = 100_000;
    // Page 2 + i: the root leaf of the bucket nested i deep, holding the next one.
    let mut file = File::new(NESTED as usize + 3);
    for pgid in 2..NESTED + 2 {
        file.leaf(pgid, 0, &[Item::Bucket("n", pgid + 1)]);
    }
    file.leaf(NESTED + 2, 0, &[Item::Value("k", "v")]);
    let mut walk = PageWalk::new(file.pages());
    let mut recorder = Recorder::default();
    let Ok(()) = walk.tree(&mut recorder, Pgid(0), Pgid(2), ());
    assert_eq!(recorder.damage, []);
    assert!((2..NESTED + 3).all(|pgid| walk.seen().contains(pgid)));
    assert_eq!(stop(&file, 2).1, NESTED as usize + 1);

    // The deepest bucket's root points back at the first: the loop ends where it closes.
    file.leaf(NESTED + 2, 0, &[Item::Bucket("n", 2)]);
    let (recorder, _) = record(&file, 2);
    assert_eq!(
        recorder.damage,
        [Damage::ReachedTwice {
            pgid: Pgid(2),
            owner: Pgid(NESTED + 2),
            first: Pgid(2),
        }]
    );
    assert!(stop(&file, 2).0.is_err());
}
