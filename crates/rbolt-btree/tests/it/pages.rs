//! Where a tree reads committed pages from: `Pages` and the `PageSource`s, each giving the
//! same pages of the same bytes.

use rbolt_btree::{Arena, MemPages, MemStore, PageSource, Pages, Tree, TreeView};
use rbolt_page::{PageRef, Pgid};

const PAGE: usize = 512;

/// Entries, each a key and a value, in key order.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// A committed tree of 300 small entries and one of 2000 bytes (a leaf with overflow pages).
fn committed() -> (MemStore, Pgid, Entries) {
    let mut store = MemStore::new(PAGE, true);
    let mut arena = Arena::new(PAGE);
    let mut tree = Tree::new();
    let mut entries = Vec::new();
    let (pages, alloc) = store.parts();
    for i in 0..300u32 {
        let value = if i == 150 {
            vec![5; 2000]
        } else {
            vec![i as u8; 10]
        };
        tree.put(pages, &mut arena, &i.to_be_bytes(), &value, 0)
            .unwrap();
        entries.push((i.to_be_bytes().to_vec(), value));
    }
    tree.rebalance(pages, &mut arena, alloc).unwrap();
    let root = tree.spill(pages, &mut arena, alloc).unwrap();
    store.commit();
    (store, root, entries)
}

/// Everything the tree at `root` holds, read through `pages`.
fn entries(pages: Pages<'_>, root: Pgid) -> Entries {
    let mut cursor = TreeView::from_page(pages, root).cursor();
    let mut found = Vec::new();
    let mut entry = cursor.first().unwrap();
    while let Some(e) = entry {
        found.push((e.key.to_vec(), e.value.to_vec()));
        entry = cursor.next().unwrap();
    }
    found
}

/// What a page source says of itself, through the trait.
fn describe<S: PageSource>(source: &S) -> (usize, Pgid, Vec<u8>) {
    (
        source.page_size(),
        source.high_water(),
        source.data().to_vec(),
    )
}

#[test]
fn a_tree_reads_the_same_through_every_page_source() {
    let (store, root, want) = committed();
    let pages = store.pages();
    let bytes = pages.data().to_vec();
    assert_eq!(bytes.len() as u64, store.high_water().0 * PAGE as u64);
    assert_eq!(
        (pages.page_size(), pages.high_water()),
        (PAGE, store.high_water())
    );
    let mem = MemPages {
        data: bytes.clone(),
        page_size: PAGE,
        high_water: store.high_water(),
    };
    let described = (PAGE, store.high_water(), bytes);
    assert_eq!(describe(&pages), described);
    assert_eq!(describe(&mem), described);
    for (source, read) in [
        ("Pages", PageSource::pages(&pages).unwrap()),
        ("MemPages", mem.pages().unwrap()),
    ] {
        assert_eq!(describe(&read), described, "{source}");
        assert_eq!(entries(read, root), want, "{source}");
    }
}

#[test]
fn a_page_is_its_whole_span_and_nothing_more() {
    let (store, _, _) = committed();
    let pages = store.pages();
    let mut overflowed = 0;
    for pgid in (2..store.high_water().0).map(Pgid) {
        let Ok(bytes) = pages.page(Pgid(0), pgid) else {
            continue; // an overflow page of the span before, or a free page
        };
        let page = PageRef::new(bytes, pgid).unwrap();
        let span = page.header().overflow as usize + 1;
        overflowed += usize::from(span > 1);
        assert_eq!(bytes.len(), span * PAGE, "page {pgid}");
        let start = pgid.0 as usize * PAGE;
        assert!(std::ptr::eq(
            bytes,
            &pages.data()[start..start + span * PAGE]
        ));
    }
    assert_eq!(overflowed, 1, "the leaf of the 2000-byte value");
}

#[test]
fn position_of_finds_slices_of_the_pages_and_only_those() {
    let data = vec![0u8; 8192];
    let pages = Pages::new(&data[..4096], PAGE, Pgid(8)).unwrap();
    assert!(std::ptr::eq(pages.data(), &data[..4096]));
    assert_eq!(pages.position_of(&data[1000..2000]), Some(1000));
    assert_eq!(pages.position_of(&data[..10]), Some(0));
    assert_eq!(
        pages.position_of(&data[3000..4096]),
        Some(3000),
        "to the end"
    );
    assert_eq!(pages.position_of(&data[3000..5000]), None, "past the end");
    assert_eq!(pages.position_of(&data[4096..4100]), None);
    let elsewhere = vec![0u8; 100];
    assert_eq!(pages.position_of(&elsewhere), None);
}
