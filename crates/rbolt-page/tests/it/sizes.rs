//! The size functions and in-use counts other crates ask instead of computing from record
//! sizes: each against the bytes a builder writes.

use rbolt_page::{
    BranchBuilder, BranchPage, BucketHeader, LeafBuilder, LeafPage, MAGIC, META_PAGE_LEN, Meta,
    PageHeader, Pgid, VERSION, element_page_size, leaf_entry_size, leaf_page_size, read_meta,
    write_meta_in_slot,
};

const PAGE: usize = 4096;

/// bbolt's `LeafInuse`/`BranchInuse` is where a packed page's data ends; a leaf built from
/// entries uses the header and each entry's element, key and value.
#[test]
fn in_use_lengths_are_the_packed_data_of_a_built_page() {
    let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..20u32)
        .map(|i| (i.to_be_bytes().to_vec(), vec![7; i as usize * 3]))
        .collect();
    let mut buf = vec![0u8; PAGE];
    let mut leaf = LeafBuilder::new(&mut buf, Pgid(3), entries.len(), 0);
    for (key, value) in &entries {
        leaf.push(0, key, value);
    }
    let written = leaf.finish();
    let page = LeafPage::new(&buf, Pgid(3)).unwrap();
    let sizes: usize = entries
        .iter()
        .map(|(k, v)| leaf_entry_size(k.len(), v.len()))
        .sum();
    let kv: usize = entries.iter().map(|(k, v)| k.len() + v.len()).sum();
    assert_eq!(page.in_use_len(), written);
    assert_eq!(page.in_use_len(), element_page_size(sizes));
    assert_eq!(page.in_use_len(), leaf_page_size(entries.len(), kv));
    assert_eq!(page.in_use_len(), page.payload_len().unwrap());

    let mut empty = vec![0u8; PAGE];
    LeafBuilder::new(&mut empty, Pgid(4), 0, 0).finish();
    let page = LeafPage::new(&empty, Pgid(4)).unwrap();
    assert_eq!(page.in_use_len(), element_page_size(0));

    let mut buf = vec![0u8; PAGE];
    let mut branch = BranchBuilder::new(&mut buf, Pgid(5), 3, 0);
    for (i, key) in [&b"a"[..], b"bb", b"ccc"].into_iter().enumerate() {
        branch.push(key, Pgid(10 + i as u64));
    }
    let written = branch.finish();
    let page = BranchPage::new(&buf, Pgid(5)).unwrap();
    assert_eq!(page.in_use_len(), written);
    assert_eq!(page.in_use_len(), page.payload_len().unwrap());
}

/// A meta written into a slot by hand names that slot, whatever its txid, and reads back with
/// its checksum computed.
#[test]
fn a_meta_written_in_a_slot_names_the_slot() {
    let meta = Meta {
        magic: MAGIC,
        version: VERSION,
        page_size: PAGE as u32,
        root: BucketHeader::new(Pgid(3), 0),
        freelist: 2,
        pgid: 10,
        txid: 7,
        ..Meta::default()
    };
    for slot in [0, 1] {
        let mut buf = [0u8; META_PAGE_LEN];
        let written = write_meta_in_slot(&mut buf, &meta, slot);
        assert_eq!(PageHeader::read(&buf).unwrap().id, slot);
        let read = read_meta(&buf, Pgid(slot)).unwrap();
        assert_eq!(read, written);
        assert_eq!(read.txid, 7);
        assert_eq!(read.checksum, meta.compute_checksum());
    }
}
