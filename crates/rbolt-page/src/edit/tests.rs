//! `PageMut` against a model, the layouts' edge cases, and the strict check's reasons.

use super::*;
use crate::{BucketHeader, EMPTY_LEAF, LeafBuilder, branch_page_size, key_prefix, leaf_page_size};
use core::ops::Range;
use std::collections::BTreeMap;

const PAGE: usize = 512;

type Image = PageMut<Box<[u8]>>;

/// A buffer of garbage, as a reused page buffer is: an image must write every byte it uses.
fn buffer(len: usize) -> Box<[u8]> {
    vec![0xA5; len].into_boxed_slice()
}

fn leaf() -> Image {
    PageMut::empty(buffer(PAGE), true)
}

fn leaf_entries(image: &Image) -> Vec<(u32, Vec<u8>, Vec<u8>)> {
    let page = image.leaf(Pgid(0)).unwrap();
    page.validate().unwrap();
    page.iter()
        .map(|e| {
            let e = e.unwrap();
            (e.flags, e.key.to_vec(), e.value.to_vec())
        })
        .collect()
}

fn model_entries(model: &BTreeMap<Vec<u8>, Vec<u8>>) -> Vec<(u32, Vec<u8>, Vec<u8>)> {
    model
        .iter()
        .map(|(k, v)| (0, k.clone(), v.clone()))
        .collect()
}

fn search(image: &Image, key: &[u8]) -> core::result::Result<usize, usize> {
    image.leaf(Pgid(0)).unwrap().search(key).unwrap()
}

fn put(image: &mut Image, key: &[u8], value: &[u8]) {
    let entry = NewEntry::Leaf {
        flags: 0,
        key,
        value,
    };
    match search(image, key) {
        Ok(index) => image.set_value(index, 0, value),
        Err(index) => image.insert(index, &entry),
    }
}

/// The bytes a builder writes for `model`: what a packed image must equal.
fn built(model: &BTreeMap<Vec<u8>, Vec<u8>>) -> Vec<u8> {
    let mut page = vec![0u8; PAGE];
    let mut builder = LeafBuilder::new(&mut page, Pgid(0), model.len(), 0);
    for (key, value) in model {
        builder.push(0, key, value);
    }
    let used = builder.finish();
    page.truncate(used);
    page
}

/// Random puts, changed values and deletes, each within the page, in both layouts: after
/// every edit the image reads back as the model, and `used` counts a packed page.
#[test]
fn edits_match_a_model_in_both_layouts() {
    for gap in [false, true] {
        let mut image = leaf();
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut rng = rbolt_testkit::rng::Rng::new(0x1234_5678);
        for round in 0..2000 {
            let state = rng.next_u64() as u32;
            // Inserts switch a packed image to the gap layout after a few: each edit here
            // starts in the layout under test.
            if gap && image.is_packed() && image.count() > 0 {
                image.open_gap();
            } else if !gap && !image.is_packed() {
                let _ = image.pack_to(buffer(PAGE));
            }
            let key = [b'k', (state % 23) as u8];
            let value = vec![round as u8; (state % 13) as usize];
            if state.is_multiple_of(4) {
                if let Ok(index) = search(&image, &key) {
                    image.remove(index);
                    model.remove(key.as_slice());
                }
            } else {
                let grow = match model.get(key.as_slice()) {
                    Some(old) => value.len().saturating_sub(old.len()),
                    None => ELEMENT_SIZE + key.len() + value.len(),
                };
                if image.used() + grow <= PAGE {
                    put(&mut image, &key, &value);
                    model.insert(key.to_vec(), value);
                }
            }
            assert_eq!(leaf_entries(&image), model_entries(&model), "round {round}");
            let kv: usize = model.iter().map(|(k, v)| k.len() + v.len()).sum();
            assert_eq!(image.used(), leaf_page_size(model.len(), kv));
        }
        let mut packed = buffer(PAGE);
        image.write_packed(&mut packed);
        assert_eq!(&packed[..image.used()], &built(&model)[..], "gap {gap}");
    }
}

#[test]
fn loads_switch_to_the_gap_layout_and_pack_back_to_bbolts_bytes() {
    // Keys inserted out of order: the image switches layouts after a few inserts, takes
    // deletes and changed values in either, and packs into the bytes bbolt writes.
    let mut image = leaf();
    let mut model = BTreeMap::new();
    for i in [5u8, 1, 9, 3, 7, 2, 8, 0, 6, 4] {
        put(&mut image, &[i], &vec![i; usize::from(i) + 1]);
        model.insert(vec![i], vec![i; usize::from(i) + 1]);
    }
    assert!(!image.is_packed(), "ten inserts switch to the gap layout");
    image.remove(search(&image, &[3]).unwrap());
    model.remove(&vec![3]);
    put(&mut image, &[7], b"seven");
    model.insert(vec![7], b"seven".to_vec());
    put(&mut image, &[8], &[8; 9]);
    model.insert(vec![8], vec![8; 9]);
    put(&mut image, &[9], b"");
    model.insert(vec![9], Vec::new());
    assert_eq!(leaf_entries(&image), model_entries(&model));
    let old = image.pack_to(buffer(PAGE));
    assert_eq!(old.len(), PAGE, "the old buffer comes back");
    assert!(image.is_packed());
    assert_eq!(image.image(), &built(&model)[..]);
}

#[test]
fn an_empty_pair_stays_inside_the_data_of_the_gap_layout() {
    // Only corrupt pages hold empty keys, but what the layout does with them must stay sound:
    // an empty pair written at the bottom of the data, the pair it sits on given a longer and
    // a shorter value, then removed.
    let mut image = leaf();
    for i in 1..6u8 {
        put(&mut image, &[i], &[i; 3]);
    }
    assert!(!image.is_packed());
    put(&mut image, b"", b"");
    put(&mut image, &[5], &[5; 9]);
    put(&mut image, &[4], &[4; 1]);
    image.check_layout();
    for i in (1..6u8).rev() {
        image.remove(search(&image, &[i]).unwrap());
        image.check_layout();
    }
    assert_eq!(leaf_entries(&image), [(0, vec![], vec![])]);
}

#[test]
fn a_gap_image_moves_to_a_larger_buffer_with_its_data_at_the_end() {
    let mut image = leaf();
    let mut model = BTreeMap::new();
    for i in [4u8, 2, 6, 1, 5] {
        put(&mut image, &[i], &[i; 20]);
        model.insert(vec![i], vec![i; 20]);
    }
    assert!(!image.is_packed());
    let old = image.move_to(buffer(2 * PAGE));
    assert_eq!((old.len(), image.buffer_len()), (PAGE, 2 * PAGE));
    image.check_layout();
    // The room gained is the gap's: a value larger than the first page still goes in.
    put(&mut image, &[3], &[3; 600]);
    model.insert(vec![3], vec![3; 600]);
    assert_eq!(leaf_entries(&image), model_entries(&model));
}

#[test]
fn truncate_and_append_from_move_entries_between_images() {
    let mut left = leaf();
    for i in 0..10u8 {
        put(&mut left, &[i], &[i; 7]);
    }
    let _ = left.pack_to(buffer(PAGE));
    let mut right = leaf();
    right.append_from(&left, 6..10);
    left.truncate(6);
    let entries = |range: Range<u8>| range.map(|i| (0, vec![i], vec![i; 7])).collect::<Vec<_>>();
    assert_eq!(leaf_entries(&left), entries(0..6));
    assert_eq!(leaf_entries(&right), entries(6..10));
    left.append_from(&right, 0..4);
    assert_eq!(leaf_entries(&left), entries(0..10));
    left.truncate(0);
    assert_eq!(left.used(), EMPTY_LEAF.len());
}

#[test]
fn a_branch_takes_children_and_a_new_kind_when_empty() {
    let mut branch = PageMut::empty(buffer(PAGE), false);
    for (index, key) in [b"b", b"d", b"f"].into_iter().enumerate() {
        branch.insert(
            index,
            &NewEntry::Branch {
                key,
                child: 10 + index as u64,
            },
        );
    }
    branch.set_child(1, 1 << 63 | 7);
    assert_eq!(branch.used(), branch_page_size(3, 3));
    assert_eq!(
        (branch.key(1), branch.child(1), branch.child(2)),
        (&b"d"[..], 1 << 63 | 7, 12)
    );
    let page = branch.branch(Pgid(0)).unwrap();
    assert_eq!(page.child(2).unwrap(), Pgid(12));
    for _ in 0..3 {
        branch.remove(0);
    }
    branch.make_empty_leaf();
    assert_eq!(branch.image(), &EMPTY_LEAF[..]);
    assert!(branch.leaf(Pgid(0)).unwrap().is_empty());
}

#[test]
fn inline_images_and_headers_are_written_as_asked() {
    let mut image = leaf();
    put(&mut image, b"a", b"1");
    image.write_header(Pgid(9), 2);
    let header = PageHeader::read(image.image()).unwrap();
    assert_eq!((header.id, header.overflow), (9, 2));
    let mut inline = vec![0xEE; image.used()];
    image.write_inline(&mut inline);
    let header = PageHeader::read(&inline).unwrap();
    assert_eq!((header.id, header.overflow, header.count), (0, 0, 1));
    image.zero_tail();
    let used = image.used();
    let buffer = image.take_buffer();
    assert!(buffer[used..].iter().all(|&b| b == 0));
    assert!(image.is_detached());
}

/// A leaf page of `entries`, written by a builder.
fn leaf_page(pgid: Pgid, entries: &[(u32, &[u8], &[u8])]) -> Vec<u8> {
    let mut page = vec![0u8; PAGE];
    let mut builder = LeafBuilder::new(&mut page, pgid, entries.len(), 0);
    for &(flags, key, value) in entries {
        builder.push(flags, key, value);
    }
    builder.finish();
    page
}

/// The check of `page`, its prefixes, or its error's reason.
fn check(page: &[u8]) -> core::result::Result<(TreePageShape, Vec<u64>), Reason> {
    let mut prefixes = Vec::new();
    check_tree_page(page, Pgid(3), |prefix| prefixes.push(prefix))
        .map(|shape| (shape, prefixes))
        .map_err(|error| {
            assert_eq!(error.pgid, Pgid(3), "errors name the owner");
            error.reason
        })
}

#[test]
fn the_strict_check_names_what_is_wrong() {
    let good = leaf_page(Pgid(3), &[(0, b"a", b"1"), (0, b"b", b"22")]);
    let (shape, prefixes) = check(&good).unwrap();
    assert!(shape.is_leaf() && shape.is_packed());
    assert_eq!((shape.len(), shape.packed_len()), (2, leaf_page_size(2, 5)));
    assert_eq!(prefixes, [key_prefix(b"a"), key_prefix(b"b")]);

    let truncated = Reason::Truncated {
        what: "page header",
        need: PAGE_HEADER_SIZE as u64,
        have: 15,
    };
    assert_eq!(check(&good[..15]).unwrap_err(), truncated);
    let mut meta = good.clone();
    PageHeader::new(Pgid(3), PageKind::Meta, 0, 0).write(&mut meta);
    assert_eq!(
        check(&meta).unwrap_err(),
        Reason::NotTreePage {
            flags: PageKind::Meta.flags()
        }
    );
    let mut empty_branch = vec![0u8; PAGE];
    PageHeader::new(Pgid(3), PageKind::Branch, 0, 0).write(&mut empty_branch);
    assert_eq!(check(&empty_branch).unwrap_err(), Reason::EmptyBranch);
    let flags = leaf_page(Pgid(3), &[(0, b"a", b"1"), (4, b"b", b"2")]);
    assert_eq!(
        check(&flags).unwrap_err(),
        Reason::UnknownElementFlags { index: 1, flags: 4 }
    );
    // Same first eight bytes: the order is decided by the whole keys.
    let order = leaf_page(Pgid(3), &[(0, b"prefix-b", b""), (0, b"prefix-a", b"")]);
    assert_eq!(check(&order).unwrap_err(), Reason::KeyOrder { index: 1 });
    let twice = leaf_page(Pgid(3), &[(0, b"prefix-aa", b""), (0, b"prefix-aa", b"")]);
    assert_eq!(check(&twice).unwrap_err(), Reason::KeyOrder { index: 1 });
    let mut bucket = [0u8; 17];
    BucketHeader::new(Pgid(5), 0).write(&mut bucket);
    let trailing = leaf_page(Pgid(3), &[(LEAF_FLAG_BUCKET, b"a", &bucket)]);
    assert_eq!(
        check(&trailing).unwrap_err(),
        Reason::BucketValueTrailingBytes { len: 1 }
    );
    let mut past = leaf_page(
        Pgid(3),
        &[(0, b"a", b"1"), (0, b"b", b"2"), (0, b"c", b"3")],
    );
    write_u32(&mut past, elem_off(2) + LEAF_POS, PAGE as u32);
    assert!(matches!(
        check(&past).unwrap_err(),
        Reason::ElementOutOfBounds { index: 2, .. }
    ));
}

#[test]
fn entries_sharing_bytes_are_copied_apart() {
    // Element 1's key is the first byte of element 0's value: a page that reads, but whose
    // entries take 602 bytes once apart, more than its 512.
    let mut page = vec![0u8; PAGE];
    PageHeader::new(Pgid(3), PageKind::Leaf, 2, 0).write(&mut page);
    let data = elem_off(2);
    page[data] = b'a';
    page[data + 1] = b'b';
    page[data + 2..data + 302].fill(7);
    for (index, start) in [(0, data), (1, data + 1)] {
        let at = elem_off(index);
        let element = LeafElement {
            flags: 0,
            pos: (start - at) as u32,
            ksize: 1,
            vsize: 300,
        };
        page[at..at + ELEMENT_SIZE].copy_from_slice(bytemuck::bytes_of(&element));
    }
    assert_eq!(page_data_end(&page), data + 302);
    let (shape, _) = check(&page).unwrap();
    assert!(!shape.is_packed());
    assert_eq!(shape.packed_len(), leaf_page_size(2, 602));
    let mut relaid = buffer(2 * PAGE);
    repack_into(&page, &shape, &mut relaid);
    let image = PageMut::from_checked(relaid, &shape);
    let mut first = vec![b'b'];
    first.extend([7; 299]);
    assert_eq!(
        leaf_entries(&image),
        [(0, b"a".to_vec(), first), (0, b"b".to_vec(), vec![7; 300])]
    );
}

#[test]
fn pages_check_whether_packed_or_not_and_repack_to_the_same_image() {
    // A page written by a builder (packed), and the same entries with their data in reverse
    // order (valid, but not how bbolt writes): both give the same image.
    let entries: Vec<(u32, Vec<u8>, Vec<u8>)> =
        (0..3u8).map(|i| (0, vec![b'a' + i], vec![i; 4])).collect();
    let borrowed: Vec<(u32, &[u8], &[u8])> = entries
        .iter()
        .map(|(f, k, v)| (*f, k.as_slice(), v.as_slice()))
        .collect();
    let packed = leaf_page(Pgid(5), &borrowed);
    let mut reversed = vec![0u8; PAGE];
    reversed[..elem_off(3)].copy_from_slice(&packed[..elem_off(3)]);
    let mut data = elem_off(3);
    for index in (0..3).rev() {
        let start = elem_off(3) + index * 5;
        reversed[data..data + 5].copy_from_slice(&packed[start..start + 5]);
        let pos = (data - elem_off(index)) as u32;
        write_u32(&mut reversed, elem_off(index) + LEAF_POS, pos);
        data += 5;
    }
    let (packed_shape, _) = check(&packed).unwrap();
    let (reversed_shape, _) = check(&reversed).unwrap();
    assert!(packed_shape.is_packed() && !reversed_shape.is_packed());
    let mut relaid = buffer(PAGE);
    repack_into(&reversed, &reversed_shape, &mut relaid);
    let relaid = PageMut::from_checked(relaid, &reversed_shape);
    assert_eq!(relaid.image(), &packed[..packed_shape.packed_len()]);
    assert_eq!(leaf_entries(&relaid), entries);
}

#[test]
fn packed_data_end_is_where_a_packed_pages_last_entry_ends() {
    let page = leaf_page(Pgid(3), &[(0, b"a", b"one"), (0, b"bb", b"two!")]);
    let (shape, _) = check(&page).unwrap();
    assert!(shape.is_packed());
    assert_eq!(packed_data_end(&page), shape.packed_len());
    assert_eq!(packed_data_end(&page), page_data_end(&page));
    // An empty leaf ends at its header; a slice too short for a header or for the last
    // element, or a page of another kind, is copied whole.
    let empty = leaf_page(Pgid(3), &[]);
    assert_eq!(packed_data_end(&empty), PAGE_HEADER_SIZE);
    assert_eq!(packed_data_end(&page[..8]), 8);
    assert_eq!(
        packed_data_end(&page[..PAGE_HEADER_SIZE + 4]),
        PAGE_HEADER_SIZE + 4
    );
    let mut meta = page.clone();
    PageHeader::new(Pgid(3), PageKind::Meta, 2, 0).write(&mut meta);
    assert_eq!(packed_data_end(&meta), PAGE);
    // A last element pointing past the slice is clamped to it.
    let mut broken = page.clone();
    let at = elem_off(1);
    broken[at + LEAF_VSIZE..at + LEAF_VSIZE + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(packed_data_end(&broken), PAGE);
}

#[test]
fn a_reread_of_a_copy_cut_at_the_packed_end_refuses_data_past_it() {
    // The copy a marked page gets is its bytes up to `packed_data_end`, in a buffer whose
    // tail holds whatever it held before. Entries that are not packed up to that end (the
    // promise broken: the bytes changed) make the reread refuse the copy, whatever the tail.
    let page = leaf_page(Pgid(3), &[(0, b"a", b"one"), (0, b"bb", b"two!")]);
    let end = packed_data_end(&page);
    let mut copy = vec![0xAAu8; PAGE];
    copy[..end].copy_from_slice(&page[..end]);
    let shape = reread_checked_tree_page(&copy).expect("a packed page rereads");
    assert_eq!(shape.packed_len(), end);
    // The first entry's value grown by one byte: the second no longer starts where it ends.
    let mut changed = page.clone();
    let at = elem_off(0);
    changed[at + LEAF_VSIZE..at + LEAF_VSIZE + 4].copy_from_slice(&4u32.to_le_bytes());
    let end = packed_data_end(&changed);
    let mut copy = vec![0xAAu8; PAGE];
    copy[..end].copy_from_slice(&changed[..end]);
    assert!(reread_checked_tree_page(&copy).is_none());
}

#[test]
fn next_child_with_finds_each_marked_child_in_order() {
    const MARK: u64 = 1 << 63;
    let mut branch = PageMut::empty(buffer(PAGE), false);
    let keys: Vec<[u8; 2]> = (0..20u8).map(|i| [b'k', i]).collect();
    for (index, key) in keys.iter().enumerate() {
        branch.insert(
            index,
            &NewEntry::Branch {
                key,
                child: 100 + index as u64,
            },
        );
    }
    let marked = [0usize, 1, 9, 19];
    for &index in &marked {
        branch.set_child(index, MARK | index as u64);
    }
    // Walking as a spill does: from just after the last one found.
    let mut found = Vec::new();
    let mut from = 0;
    while let Some((index, field)) = branch.next_child_with(from, MARK) {
        assert_eq!(field, branch.child(index));
        found.push(index);
        from = index + 1;
    }
    assert_eq!(found, marked);
    assert_eq!(branch.next_child_with(20, MARK), None);
    assert_eq!(branch.next_child_with(usize::MAX, MARK), None);
    // Unmarked fields are the plain page ids.
    assert_eq!(branch.next_child_with(2, 1 << 62), None);
    assert_eq!(branch.next_child_with(2, 100 + 2), Some((2, 102)));
}
