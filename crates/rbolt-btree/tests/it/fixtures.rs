//! Every tree of every Go bbolt fixture, read through the cursor: forwards, backwards, by
//! seek and by point lookup, against the fixture's manifest.

use rbolt_btree::{Cursor, Entry, Pages, TreeView};
use rbolt_fixtures::{Bucket, Item, NAMES, db_bytes, manifest};
use rbolt_page::{BucketValue, Meta, Pgid, read_meta};

/// The newest valid meta of a file.
pub fn newest_meta(data: &[u8]) -> Meta {
    let page_size = Meta::read_unchecked(data).unwrap().page_size as usize;
    let metas: Vec<Meta> = (0..2)
        .filter_map(|i| read_meta(&data[i * page_size..], Pgid(i as u64)).ok())
        .collect();
    *metas.iter().max_by_key(|m| m.txid).expect("a valid meta")
}

fn collect_forward(mut cursor: Cursor<'_>) -> Vec<(Vec<u8>, Vec<u8>, u32)> {
    let mut out = Vec::new();
    let mut entry = cursor.first().unwrap();
    while let Some(Entry { key, value, flags }) = entry {
        out.push((key.to_vec(), value.to_vec(), flags));
        entry = cursor.next().unwrap();
    }
    out
}

/// Reads a bucket's tree into the model, checking every way of reading agrees.
fn read_bucket(view: TreeView<'_>, sequence: u64) -> Bucket {
    let pages = view.pages();
    let forward = collect_forward(view.cursor());

    let mut backward = Vec::new();
    let mut cursor = view.cursor();
    let mut entry = cursor.last().unwrap();
    while let Some(e) = entry {
        backward.push(e.key.to_vec());
        entry = cursor.prev().unwrap();
    }
    backward.reverse();
    let keys: Vec<Vec<u8>> = forward.iter().map(|(k, _, _)| k.clone()).collect();
    assert_eq!(backward, keys, "backward scan");

    let mut cursor = view.cursor();
    for (index, (key, value, flags)) in forward.iter().enumerate() {
        let found = view.get(key).unwrap().expect("get finds every key");
        assert_eq!((found.value, found.flags), (&value[..], *flags));
        let at = cursor.seek(key).unwrap().unwrap();
        assert_eq!(at.key, &key[..]);
        // A key just after this one seeks to the next key.
        let mut between = key.clone();
        between.push(0);
        let next = cursor.seek(&between).unwrap().map(|e| e.key.to_vec());
        assert_eq!(next.as_ref(), keys.get(index + 1));
        assert!(view.get(&between).unwrap().is_none() || keys.contains(&between));
    }

    let mut bucket = Bucket {
        sequence,
        ..Bucket::default()
    };
    for (key, value, flags) in forward {
        let item = if flags & rbolt_page::LEAF_FLAG_BUCKET != 0 {
            let parsed = BucketValue::parse(&value, Pgid(0)).unwrap();
            // The nested view borrows the value; re-read it from the pages to get the lifetime.
            let entry = view.get(&key).unwrap().unwrap();
            let child = match parsed.inline {
                Some(_) => {
                    TreeView::from_inline(pages, &entry.value[rbolt_page::BUCKET_HEADER_SIZE..])
                }
                None => TreeView::from_page(pages, parsed.header.root_pgid()),
            };
            Item::Bucket(read_bucket(child, parsed.header.sequence))
        } else {
            Item::Value(value)
        };
        bucket.entries.insert(key, item);
    }
    bucket
}

#[test]
fn every_fixture_reads_back_as_its_manifest() {
    for name in NAMES {
        let data = db_bytes(name);
        let meta = newest_meta(&data);
        let pages = Pages::new(&data, meta.page_size as usize, meta.high_water()).unwrap();
        let root = read_bucket(TreeView::from_page(pages, meta.root_pgid()), 0);
        let want = manifest(name);
        assert_eq!(
            root.entries.len(),
            want.entries.len(),
            "{name}: top-level buckets"
        );
        assert_eq!(root.key_count(), want.key_count(), "{name}: keys");
        assert!(root == want, "{name}: content differs from the manifest");
    }
}
