//! Edge cases, one data-driven `check` per behaviour: freelist counts around 0xFFFF, counts and
//! elements one past the page, overflow spans, unaligned input, every way a meta can fail, and
//! the meta selection rule.

use crate::support::{DEPTH_MAX, File, Walker, new_db, new_meta, select_meta};
use rbolt_page::{
    BOOT_ID_SIZE, BootId, META_PAGE_LEN, META_PAGE_READ_LEN, MetaDurability, read_meta_page,
    write_meta_non_durable,
};
use rbolt_page::{
    BranchBuilder, BranchPage, BucketHeader, BucketValue, Corruption, FLAG_FREELIST, FLAG_LEAF,
    FREELIST_COUNT_OVERFLOW, FreelistPage, LEAF_FLAG_BUCKET, LeafBuilder, LeafEntry, LeafPage,
    Meta, PageHeader, PageKind, PageRef, Pgid, Reason, check_overflow, freelist_page_size,
    key_prefix, leaf_page_size, pages_for, read_meta, span_len, write_freelist, write_meta,
};

// ---------------------------------------------------------------------------------------------
// Freelist counts.

#[test]
fn freelist_counts_round_trip() {
    #[track_caller]
    fn check(count: usize, header_count: u16, payload_len: usize) {
        let page_size = 4096;
        let ids: Vec<Pgid> = (0..count as u64).map(|i| Pgid(2 + 3 * i)).collect();
        let n_pages = pages_for(freelist_page_size(count), page_size);
        let mut page = vec![0u8; n_pages * page_size];
        let overflow = (n_pages - 1) as u32;
        let written = write_freelist(&mut page, Pgid(9), overflow, ids.iter().copied());
        assert_eq!(written, payload_len);
        assert_eq!(freelist_page_size(count), payload_len);

        let header = PageHeader::read(&page).expect("header");
        assert_eq!(
            header,
            PageHeader::new(Pgid(9), PageKind::Freelist, header_count, overflow)
        );
        let extended = header_count == FREELIST_COUNT_OVERFLOW;
        if extended {
            assert_eq!(page[16..24], (count as u64).to_le_bytes());
        }

        let freelist = FreelistPage::new(&page, Pgid(9)).expect("freelist");
        assert_eq!(freelist.len(), count);
        assert_eq!(freelist.has_extended_count(), extended);
        assert_eq!(freelist.payload_len(), payload_len);
        assert!(freelist.iter().eq(ids.iter().copied()));
        let high_water = Pgid(ids.last().map_or(2, |last| last.0 + 1));
        assert_eq!(freelist.validate(high_water), Ok(()));
        // The unaligned copy reads the same.
        let mut shifted = vec![0u8; page.len() + 3];
        shifted[3..].copy_from_slice(&page);
        let unaligned = FreelistPage::new(&shifted[3..], Pgid(9)).expect("freelist");
        assert!(unaligned.iter().eq(ids.iter().copied()));
    }
    check(0, 0, 16);
    check(1, 1, 24);
    check(0xFFFE, 0xFFFE, 16 + 0xFFFE * 8);
    check(0xFFFF, 0xFFFF, 16 + 0x1_0000 * 8);
    check(0x1_0000, 0xFFFF, 16 + 0x1_0001 * 8);
}

#[test]
fn freelist_counts_that_do_not_fit() {
    #[track_caller]
    fn check(
        count_field: u16,
        first_slot: Option<u64>,
        n_slots: usize,
        expected: Result<usize, Reason>,
    ) {
        let mut page = vec![0u8; 16 + 8 * n_slots];
        PageHeader::new(Pgid(4), PageKind::Freelist, count_field, 0).write(&mut page);
        if let Some(count) = first_slot {
            page[16..24].copy_from_slice(&count.to_le_bytes());
        }
        let found = FreelistPage::new(&page, Pgid(4));
        assert_eq!(found.map(|f| f.len()).map_err(|e| e.reason), expected);
    }
    check(2, None, 2, Ok(2));
    check(
        3,
        None,
        2,
        Err(Reason::CountTooLarge {
            count: 3,
            capacity: 2,
        }),
    );
    check(
        0xFFFE,
        None,
        0,
        Err(Reason::CountTooLarge {
            count: 0xFFFE,
            capacity: 0,
        }),
    );
    check(0xFFFF, Some(2), 3, Ok(2));
    check(
        0xFFFF,
        Some(3),
        3,
        Err(Reason::CountTooLarge {
            count: 3,
            capacity: 2,
        }),
    );
    check(
        0xFFFF,
        Some(u64::MAX),
        3,
        Err(Reason::CountTooLarge {
            count: u64::MAX,
            capacity: 2,
        }),
    );
    check(
        0xFFFF,
        None,
        0,
        Err(Reason::Truncated {
            what: "freelist count",
            need: 24,
            have: 16,
        }),
    );
    check(0xFFFF, Some(0), 1, Ok(0));
}

#[test]
fn element_counts_that_do_not_fit() {
    #[track_caller]
    fn check(kind: PageKind, count: u16, len: usize, expected: Result<usize, Reason>) {
        let mut page = vec![0u8; len];
        PageHeader::new(Pgid(4), kind, count, 0).write(&mut page);
        let page_ref = PageRef::new(&page, Pgid(4)).expect("header");
        let found = match kind {
            PageKind::Leaf => page_ref.leaf().map(|p| p.len()),
            _ => page_ref.branch().map(|p| p.len()),
        };
        assert_eq!(found.map_err(|e| e.reason), expected);
    }
    for kind in [PageKind::Leaf, PageKind::Branch] {
        check(kind, 2, 48, Ok(2));
        check(
            kind,
            2,
            47,
            Err(Reason::CountTooLarge {
                count: 2,
                capacity: 1,
            }),
        );
        check(
            kind,
            1,
            16,
            Err(Reason::CountTooLarge {
                count: 1,
                capacity: 0,
            }),
        );
        check(kind, 0, 16, Ok(0));
        check(
            kind,
            u16::MAX,
            4096,
            Err(Reason::CountTooLarge {
                count: 65535,
                capacity: 255,
            }),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Elements one byte past the span.

/// A leaf of three entries, packed into exactly the bytes it needs.
fn packed_leaf() -> Vec<u8> {
    let entries: [(&[u8], &[u8]); 3] = [(b"a", b"1"), (b"bb", b"22"), (b"ccc", b"333")];
    let size = leaf_page_size(3, 12);
    let mut page = vec![0u8; size];
    let mut builder = LeafBuilder::new(&mut page, Pgid(5), 3, 0);
    for (key, value) in entries {
        builder.push(0, key, value);
    }
    assert_eq!(builder.finish(), size);
    page
}

#[test]
fn leaf_elements_one_byte_past_the_span() {
    /// Adds one to a field of the last element (`field` is the byte offset of pos (4), ksize
    /// (8) or vsize (12) in the element): its value then ends one byte past the span.
    #[track_caller]
    fn check(field: usize, key: &[u8]) {
        let mut page = packed_leaf();
        let span = page.len() as u64;
        let at = 16 + 2 * 16 + field;
        let raw = u32::from_le_bytes(page[at..at + 4].try_into().expect("u32"));
        page[at..at + 4].copy_from_slice(&(raw + 1).to_le_bytes());
        let leaf = LeafPage::new(&page, Pgid(5)).expect("leaf");
        let past = Corruption::new(
            Pgid(5),
            Reason::ElementOutOfBounds {
                index: 2,
                end: span + 1,
                span,
            },
        );
        assert_eq!(leaf.key(2), Ok(key));
        assert_eq!(leaf.value(2), Err(past.clone()));
        assert_eq!(leaf.entry(2), Err(past.clone()));
        assert_eq!(leaf.validate(), Err(past));
        assert_eq!(leaf.payload_len(), Ok(page.len() + 1));
        assert_eq!(leaf.key(1), Ok(&b"bb"[..]));
    }
    check(4, b"cc3");
    check(8, b"ccc3");
    check(12, b"ccc");

    // Unmodified, the last value ends exactly at the span.
    let page = packed_leaf();
    let leaf = LeafPage::new(&page, Pgid(5)).expect("leaf");
    assert_eq!(leaf.value(2), Ok(&b"333"[..]));
    assert_eq!(leaf.validate(), Ok(()));
    assert_eq!(leaf.payload_len(), Ok(page.len()));

    // A key that runs one byte past the span.
    let mut page = vec![0u8; leaf_page_size(1, 2)];
    let mut builder = LeafBuilder::new(&mut page, Pgid(5), 1, 0);
    builder.push(0, b"kk", b"");
    builder.finish();
    page[16 + 8] = 3; // ksize
    let leaf = LeafPage::new(&page, Pgid(5)).expect("leaf");
    let expected = Reason::ElementOutOfBounds {
        index: 0,
        end: page.len() as u64 + 1,
        span: page.len() as u64,
    };
    assert_eq!(leaf.key(0).map_err(|e| e.reason), Err(expected.clone()));
    assert_eq!(leaf.search(b"kk").map_err(|e| e.reason), Err(expected));
}

#[test]
fn branch_elements_one_byte_past_the_span() {
    /// Adds one to a field of the last element (pos at 0, ksize at 4), if any.
    #[track_caller]
    fn check(field: Option<usize>, expected: Result<&[u8], Reason>) {
        let size = rbolt_page::branch_page_size(2, 5);
        let mut page = vec![0u8; size];
        let mut builder = BranchBuilder::new(&mut page, Pgid(6), 2, 0);
        builder.push(b"ab", Pgid(7));
        builder.push(b"cde", Pgid(8));
        builder.finish();
        if let Some(field) = field {
            let at = 16 + 16 + field;
            let raw = u32::from_le_bytes(page[at..at + 4].try_into().expect("u32"));
            page[at..at + 4].copy_from_slice(&(raw + 1).to_le_bytes());
        }
        let branch = BranchPage::new(&page, Pgid(6)).expect("branch");
        assert_eq!(branch.key(1).map_err(|e| e.reason), expected);
        assert_eq!(branch.validate(Pgid(9)).is_ok(), expected.is_ok());
        assert_eq!(branch.child(1), Ok(Pgid(8)));
    }
    let span = rbolt_page::branch_page_size(2, 5) as u64;
    let past = Reason::ElementOutOfBounds {
        index: 1,
        end: span + 1,
        span,
    };
    check(None, Ok(b"cde"));
    check(Some(0), Err(past.clone()));
    check(Some(4), Err(past));
}

// ---------------------------------------------------------------------------------------------
// Overflow spans.

#[test]
fn a_value_spanning_several_pages_reads_whole() {
    let page_size = 4096;
    let value: Vec<u8> = (0..3 * page_size + 100).map(|i| (i % 251) as u8).collect();
    let size = leaf_page_size(1, 3 + value.len());
    let n_pages = pages_for(size, page_size);
    assert_eq!(n_pages, 4);
    let pgid = Pgid(5);
    let high_water = Pgid(5 + n_pages as u64);
    let mut file = vec![0u8; high_water.0 as usize * page_size];
    let start = pgid.0 as usize * page_size;
    let mut builder = LeafBuilder::new(&mut file[start..], pgid, 1, (n_pages - 1) as u32);
    builder.push(0, b"big", &value);
    assert_eq!(builder.finish(), size);

    let reader = File::new(&file, page_size, high_water);
    let span = reader.span(pgid).expect("span");
    assert_eq!(span.len(), n_pages * page_size);
    let leaf = reader.page(pgid).and_then(|p| p.leaf()).expect("leaf");
    assert_eq!(leaf.value(0), Ok(value.as_slice()));
    assert_eq!(leaf.validate(), Ok(()));

    // Read as its first page only, the value runs past the bytes given.
    let first_page = LeafPage::new(&file[start..start + page_size], pgid).expect("leaf");
    let past = first_page.value(0).map_err(|e| e.reason);
    assert_eq!(
        past,
        Err(Reason::ElementOutOfBounds {
            index: 0,
            end: size as u64,
            span: page_size as u64
        })
    );

    #[track_caller]
    fn check(pgid: u64, overflow: u32, high_water: u64, ok: bool) {
        let found = check_overflow(Pgid(pgid), overflow, Pgid(high_water));
        let expected = Corruption::new(Pgid(pgid), Reason::OverflowOutOfBounds { overflow });
        assert_eq!(found, if ok { Ok(()) } else { Err(expected) });
    }
    check(5, 3, 9, true);
    check(5, 3, 8, false);
    check(5, 0, 6, true);
    check(5, 0, 5, false);
    check(u64::MAX, 1, u64::MAX, false);
    check(u64::MAX - 1, 0, u64::MAX, true);
    check(2, u32::MAX, u64::MAX, true);

    assert_eq!(span_len(4096, 3), Some(4 * 4096));
    assert_eq!(
        span_len(1 << 24, u32::MAX),
        Some((1usize << 24) * (1 << 32))
    );
    assert_eq!(span_len(usize::MAX, 1), None);

    // A header whose overflow runs past the high-water mark is refused before slicing.
    let short = File::new(&file, page_size, Pgid(high_water.0 - 1));
    assert_eq!(
        short.span(pgid).map_err(|e| e.reason),
        Err(Reason::OverflowOutOfBounds { overflow: 3 })
    );
}

// ---------------------------------------------------------------------------------------------
// Unaligned input.

#[test]
fn pages_at_odd_offsets_decode_the_same() {
    let page_size = 4096;
    let mut pages: Vec<(Vec<u8>, Pgid)> = Vec::new();

    // A leaf with a plain value, an inline bucket and a bucket with a root page.
    let mut inline = vec![0u8; 16 + leaf_page_size(1, 2)];
    BucketHeader {
        root: 0,
        sequence: 3,
    }
    .write(&mut inline);
    let mut builder = LeafBuilder::new(&mut inline[16..], Pgid(0), 1, 0);
    builder.push(0, b"k", b"v");
    builder.finish();
    let mut rooted = vec![0u8; 16];
    BucketHeader {
        root: 12,
        sequence: 9,
    }
    .write(&mut rooted);
    let mut leaf = vec![0u8; page_size];
    let mut builder = LeafBuilder::new(&mut leaf, Pgid(10), 3, 0);
    builder.push(0, b"a", b"plain");
    builder.push(LEAF_FLAG_BUCKET, b"b", &inline);
    builder.push(LEAF_FLAG_BUCKET, b"c", &rooted);
    builder.finish();
    pages.push((leaf, Pgid(10)));

    let mut branch = vec![0u8; page_size];
    let mut builder = BranchBuilder::new(&mut branch, Pgid(11), 2, 0);
    builder.push(b"a", Pgid(10));
    builder.push(b"m", Pgid(12));
    builder.finish();
    pages.push((branch, Pgid(11)));

    let mut freelist = vec![0u8; page_size];
    write_freelist(&mut freelist, Pgid(13), 0, [Pgid(4), Pgid(9)].into_iter());
    pages.push((freelist, Pgid(13)));

    let db = new_db(page_size);
    pages.push((db[page_size..2 * page_size].to_vec(), Pgid(1)));

    for (page, pgid) in &pages {
        let aligned = describe(page, *pgid);
        for shift in [1, 3, 7] {
            let mut buf = vec![0u8; page.len() + shift];
            buf[shift..].copy_from_slice(page);
            assert_eq!(
                describe(&buf[shift..], *pgid),
                aligned,
                "page {pgid} at +{shift}"
            );
        }
    }
}

/// Everything the views read from a page, as text.
fn describe(bytes: &[u8], pgid: Pgid) -> String {
    let page = PageRef::new(bytes, pgid).expect("page");
    match page.kind().expect("kind") {
        PageKind::Leaf => {
            let leaf = page.leaf().expect("leaf");
            assert_eq!(leaf.validate(), Ok(()));
            let mut out = String::new();
            for entry in leaf.iter() {
                let entry: LeafEntry<'_> = entry.expect("entry");
                out += &format!("{:?}\n", entry);
                if entry.is_bucket() {
                    let bucket = BucketValue::parse(entry.value, pgid).expect("bucket");
                    out += &format!("{:?}\n", bucket.header);
                    if let Some(inline) = bucket.inline {
                        out += &format!("{:?}\n", inline.iter().collect::<Vec<_>>());
                    }
                }
            }
            out
        }
        PageKind::Branch => {
            let branch = page.branch().expect("branch");
            format!("{:?}", branch.iter().collect::<Vec<_>>())
        }
        PageKind::Freelist => {
            let freelist = page.freelist().expect("freelist");
            format!("{:?}", freelist.iter().collect::<Vec<_>>())
        }
        PageKind::Meta => format!("{:?}", page.meta().expect("meta")),
    }
}

// ---------------------------------------------------------------------------------------------
// Metas.

/// A valid meta of a new 4 KiB database in a 16 KiB file (its second, txid 1).
fn base_meta() -> Meta {
    new_meta(4096, 1)
}

/// A digest of pages, as a non-durable meta carries one.
const DIGEST: &[u8; 16] = b"digest-of-pages!";

#[test]
fn non_durable_metas_read_back_with_their_boot_and_fail_as_go_reads_them() {
    /// Writes the base meta as non-durable in `boot`, damages the bytes with `damage`, and
    /// reads the page back both ways: rbolt's (`read_meta_page`) and Go's (`read_meta`).
    #[track_caller]
    fn check(damage: fn(&mut Vec<u8>), expected: Option<MetaDurability>) {
        let boot: BootId = *b"boot-id-16-bytes";
        let mut page = vec![0u8; 512];
        let written = write_meta_non_durable(&mut page, &base_meta(), &boot, DIGEST);
        damage(&mut page);
        let found = read_meta_page(&page, Pgid(1));
        assert_eq!(found.as_ref().ok().map(|&(_, d)| d), expected);
        if let Ok((meta, _)) = found {
            assert_eq!(meta, written);
        }
        // Go knows only the plain checksum: to it a non-durable meta is torn.
        assert!(matches!(
            read_meta(&page, Pgid(1)).map_err(|e| e.reason),
            Err(Reason::BadChecksum { .. })
        ));
    }
    let boot = Some(MetaDurability::NonDurable {
        boot_id: *b"boot-id-16-bytes",
        digest: *DIGEST,
    });
    check(|_| {}, boot);
    // The boot id and the digest are covered by the checksum: another boot's bytes, a torn id
    // or another digest fail.
    check(|p| p[META_PAGE_LEN] ^= 1, None);
    check(|p| p[META_PAGE_LEN + BOOT_ID_SIZE - 1] ^= 0x80, None);
    check(|p| p[META_PAGE_LEN + BOOT_ID_SIZE] ^= 1, None);
    check(|p| p[META_PAGE_READ_LEN - 1] ^= 0x80, None);
    // So is every field.
    check(|p| p[48 + 5] ^= 1, None);
    // A page too short for the boot id reads as a torn meta.
    check(|p| p.truncate(META_PAGE_READ_LEN - 1), None);
    // A durable meta reads as durable, and the same fields written both ways differ.
    let mut durable = vec![0u8; 512];
    let plain = write_meta(&mut durable, &base_meta());
    assert_eq!(
        read_meta_page(&durable, Pgid(1)).map(|(_, d)| d),
        Ok(MetaDurability::Durable)
    );
    let other = write_meta_non_durable(
        &mut vec![0u8; 512],
        &base_meta(),
        &[0; BOOT_ID_SIZE],
        DIGEST,
    );
    assert_ne!(plain.checksum, other.checksum);
}

#[test]
fn meta_read_failures() {
    /// Writes the base meta changed by `change`, changes the written bytes with `damage`, and
    /// reads it back as page 1.
    #[track_caller]
    fn check(change: fn(&mut Meta), damage: fn(&mut Vec<u8>), expected: Result<(), Reason>) {
        let mut meta = base_meta();
        change(&mut meta);
        let mut page = vec![0u8; 4096];
        let written = write_meta(&mut page, &meta);
        damage(&mut page);
        let found = read_meta(&page, Pgid(1));
        assert_eq!(
            found.as_ref().map(|_| ()).map_err(|e| e.reason.clone()),
            expected
        );
        if let Ok(found) = found {
            assert_eq!(found, written);
        } else {
            assert_eq!(found.unwrap_err().pgid, Pgid(1));
        }
    }
    let none = |_: &mut Vec<u8>| {};
    check(|_| {}, none, Ok(()));
    check(
        |m| m.magic = 0xDEAD_BEEF,
        none,
        Err(Reason::BadMagic(0xDEAD_BEEF)),
    );
    check(|m| m.version = 1, none, Err(Reason::BadVersion(1)));
    check(|m| m.version = 3, none, Err(Reason::BadVersion(3)));
    // Magic is checked before the version, the version before the checksum (bbolt's order).
    check(
        |m| (m.magic, m.version) = (0, 0),
        none,
        Err(Reason::BadMagic(0)),
    );
    check(
        |m| m.version = 0,
        |p| p[72] ^= 1,
        Err(Reason::BadVersion(0)),
    );

    let written = write_meta(&mut vec![0u8; 4096], &base_meta()).checksum;
    check(
        |_| {},
        |p| p[72] ^= 0x80,
        Err(Reason::BadChecksum {
            stored: written ^ 0x80,
            computed: written,
        }),
    );
    let mut flipped = base_meta();
    flipped.freelist ^= 1 << 40;
    let computed = flipped.compute_checksum();
    check(
        |_| {},
        |p| p[48 + 5] ^= 1,
        Err(Reason::BadChecksum {
            stored: written,
            computed,
        }),
    );
    check(
        |_| {},
        |p| p[8] = FLAG_LEAF as u8,
        Err(Reason::WrongKind {
            expected: PageKind::Meta,
            flags: FLAG_LEAF,
        }),
    );
    check(
        |_| {},
        |p| p[8] = FLAG_FREELIST as u8,
        Err(Reason::WrongKind {
            expected: PageKind::Meta,
            flags: FLAG_FREELIST,
        }),
    );
    check(|_| {}, |p| p[0] = 0, Err(Reason::IdMismatch { found: 0 }));
    check(
        |_| {},
        |p| p.truncate(79),
        Err(Reason::Truncated {
            what: "meta",
            need: 80,
            have: 79,
        }),
    );
    check(
        |_| {},
        |p| p.truncate(15),
        Err(Reason::Truncated {
            what: "page header",
            need: 16,
            have: 15,
        }),
    );
    check(|_| {}, |p| p.truncate(80), Ok(()));
}

#[test]
fn meta_field_failures() {
    #[track_caller]
    fn check(change: fn(&mut Meta), file_len: u64, expected: Result<(), Reason>) {
        let mut meta = base_meta();
        change(&mut meta);
        let meta = write_meta(&mut vec![0u8; 4096], &meta);
        let found = meta.validate_fields(Pgid(1), file_len);
        assert_eq!(
            found.as_ref().map_err(|e| e.pgid),
            expected.as_ref().map_err(|_| Pgid(1))
        );
        assert_eq!(found.map_err(|e| e.reason), expected);
    }
    let file_len = 4 * 4096;
    let huge = u64::MAX;
    check(|_| {}, file_len, Ok(()));

    // Any size Go bbolt writes is sound, powers of two or not; only sizes that cannot hold a
    // meta page, or past the largest, are not.
    for size in [0, 1, 79, (1 << 30) + 1, u32::MAX] {
        let mut meta = base_meta();
        meta.page_size = size;
        let found = meta.validate_fields(Pgid(1), huge).map_err(|e| e.reason);
        assert_eq!(found, Err(Reason::BadPageSize(size)), "page size {size}");
    }
    for size in [80, 256, 511, 513, 3000, 4095, 1 << 25, 1 << 30] {
        let mut meta = base_meta();
        meta.page_size = size;
        assert_eq!(
            meta.validate_fields(Pgid(1), huge),
            Ok(()),
            "page size {size}"
        );
    }
    check(|m| m.page_size = 512, huge, Ok(()));
    check(|m| m.page_size = 1 << 24, huge, Ok(()));
    check(|m| m.page_size = 1 << 24, 4 << 24, Ok(()));
    check(
        |m| m.page_size = 1 << 24,
        (4 << 24) - 1,
        Err(Reason::HighWaterPastEnd {
            high_water: 4,
            file_len: (4 << 24) - 1,
        }),
    );

    let root = |pgid| {
        Err(Reason::PgidOutOfBounds {
            what: "root",
            pgid,
            high_water: 4,
        })
    };
    check(|m| m.root.root = 4, file_len, root(4));
    check(|m| m.root.root = 5, file_len, root(5));
    check(|m| m.root.root = u64::MAX, file_len, root(u64::MAX));
    check(|m| m.root.root = 0, file_len, root(0));
    check(|m| m.root.root = 1, file_len, root(1));
    check(|m| m.root.root = 2, file_len, Ok(()));

    let freelist = |pgid| {
        Err(Reason::PgidOutOfBounds {
            what: "freelist",
            pgid,
            high_water: 4,
        })
    };
    check(|m| m.freelist = 4, file_len, freelist(4));
    check(|m| m.freelist = 0, file_len, freelist(0));
    check(|m| m.freelist = 1, file_len, freelist(1));
    check(
        |m| m.freelist = u64::MAX - 1,
        file_len,
        freelist(u64::MAX - 1),
    );
    check(|m| m.freelist = u64::MAX, file_len, Ok(()));

    check(
        |_| {},
        file_len - 1,
        Err(Reason::HighWaterPastEnd {
            high_water: 4,
            file_len: file_len - 1,
        }),
    );
    check(
        |_| {},
        0,
        Err(Reason::HighWaterPastEnd {
            high_water: 4,
            file_len: 0,
        }),
    );
    check(
        |m| m.pgid = u64::MAX,
        huge,
        Err(Reason::HighWaterPastEnd {
            high_water: u64::MAX,
            file_len: huge,
        }),
    );
    // The page size is checked first, then the root, then the freelist, then the file length.
    check(
        |m| (m.page_size, m.root.root) = (0, 9),
        0,
        Err(Reason::BadPageSize(0)),
    );
    check(|m| (m.root.root, m.freelist) = (9, 9), 0, root(9));
    check(|m| m.freelist = 9, 0, freelist(9));
}

#[test]
fn meta_selection() {
    /// Builds a new database, applies `damage`, and selects a meta.
    #[track_caller]
    fn check(
        page_size: usize,
        damage: fn(&mut Vec<u8>, usize),
        expected: Result<(usize, u64), ()>,
    ) {
        let mut bytes = new_db(page_size);
        damage(&mut bytes, page_size);
        let found = select_meta(&bytes)
            .map(|(index, meta)| (index, meta.txid))
            .map_err(|_| ());
        assert_eq!(found, expected, "page size {page_size}");
    }
    /// Rewrites meta `index` with `change` applied, its checksum recomputed.
    fn rewrite(bytes: &mut [u8], page_size: usize, index: usize, change: fn(&mut Meta)) {
        let page = &mut bytes[index * page_size..(index + 1) * page_size];
        let mut meta = read_meta(page, Pgid(index as u64)).expect("meta");
        change(&mut meta);
        write_meta(page, &meta);
    }
    let page_sizes = (0..=15)
        .map(|shift| 512 << shift)
        .chain([80, 100, 256, 3000, 12345]);
    for page_size in page_sizes {
        check(page_size, |_, _| {}, Ok((1, 1)));
        // Meta 1 (the newest) fails its checksum: meta 0 is used.
        check(page_size, |b, ps| b[ps + 72] ^= 1, Ok((0, 0)));
        // Meta 0 is wiped: the page size is found by probing (or scanning) for meta 1.
        check(page_size, |b, ps| b[..ps].fill(0), Ok((1, 1)));
        // Meta 1, intact and the newest, lies past the end of the file: truncated from
        // outside, not a torn write, so there is no falling back to meta 0.
        check(
            page_size,
            |b, ps| rewrite(b, ps, 1, |m| m.pgid = 5),
            Err(()),
        );
        // The same in the older meta: the newest is sound and chosen.
        check(
            page_size,
            |b, ps| rewrite(b, ps, 0, |m| m.pgid = 5),
            Ok((1, 1)),
        );
        // Meta 0 becomes the newer one.
        check(
            page_size,
            |b, ps| rewrite(b, ps, 0, |m| m.txid = 2),
            Ok((0, 2)),
        );
        // Both metas broken.
        check(
            page_size,
            |b, ps| {
                b[16] ^= 1;
                b[ps + 16] ^= 1;
            },
            Err(()),
        );
    }
    // Meta 1 claims another page size than meta 0.
    check(
        4096,
        |b, ps| rewrite(b, ps, 1, |m| m.page_size = 8192),
        Ok((0, 0)),
    );
    // A file too short for meta 1.
    check(4096, |b, ps| b.truncate(ps), Err(()));
    check(4096, |b, _| b.truncate(40), Err(()));
}

#[test]
fn a_new_database_walks_as_empty() {
    let bytes = new_db(4096);
    let (index, meta) = select_meta(&bytes).expect("meta");
    assert_eq!(index, 1);
    let mut walker = Walker::new(File::new(&bytes, 4096, meta.high_water()));
    let root = walker.bucket(meta.root, None, Pgid(1), 0).expect("walk");
    assert!(root.content.entries.is_empty());
    assert_eq!(walker.owned.keys().copied().collect::<Vec<_>>(), [3]);
}

#[test]
fn a_cycle_between_pages_ends_in_an_error() {
    #[track_caller]
    fn check(children: fn(u64) -> u64, n_pages: u64, expected: fn(u64) -> Reason) {
        let page_size = 512;
        let high_water = 2 + n_pages;
        let mut bytes = vec![0u8; high_water as usize * page_size];
        for pgid in 2..high_water {
            let start = pgid as usize * page_size;
            let mut builder =
                BranchBuilder::new(&mut bytes[start..start + page_size], Pgid(pgid), 1, 0);
            builder.push(b"k", Pgid(children(pgid)));
            builder.finish();
        }
        let mut walker = Walker::new(File::new(&bytes, page_size, Pgid(high_water)));
        let root = BucketHeader {
            root: 2,
            sequence: 0,
        };
        let found = walker
            .bucket(root, None, Pgid(0), 0)
            .map(|_| ())
            .map_err(|e| e.reason);
        assert_eq!(found, Err(expected(high_water)));
    }
    // A page that is its own child.
    check(|pgid| pgid, 1, |_| Reason::Other("page reached twice"));
    // A chain of distinct pages deeper than the limit.
    check(
        |pgid| pgid + 1,
        DEPTH_MAX as u64 + 4,
        |_| Reason::TooDeep {
            depth_max: DEPTH_MAX,
        },
    );
    // A chain that ends past the high-water mark.
    check(
        |pgid| pgid + 1,
        3,
        |high_water| Reason::PgidOutOfBounds {
            what: "child",
            pgid: high_water,
            high_water,
        },
    );
}

#[test]
fn the_leaf_layout_in_the_format_document() {
    // docs/file-format.md, "Leaf page": a leaf holding a -> xy and b -> z.
    let mut page = vec![0u8; 64];
    let mut builder = LeafBuilder::new(&mut page, Pgid(3), 2, 0);
    builder.push(0, b"a", b"xy");
    builder.push(0, b"b", b"z");
    assert_eq!(builder.finish(), 53);
    let leaf = LeafPage::new(&page, Pgid(3)).expect("leaf");
    let fields = |index| {
        leaf.element(index)
            .map(|e| (e.flags, e.pos, e.ksize, e.vsize))
    };
    assert_eq!(fields(0), Some((0, 32, 1, 2)));
    assert_eq!(fields(1), Some((0, 19, 1, 1)));
    assert_eq!(&page[48..53], b"axybz");
    assert_eq!(leaf.payload_len(), Ok(53));
}

// ---------------------------------------------------------------------------------------------
// Key prefixes.

/// `key_prefix` is the key's first eight bytes read as a big-endian number, zero-padded: what
/// a node compares before it compares whole keys. (A constant would keep every search right,
/// only slower, so no search test can tell; the value is the contract.)
#[test]
fn key_prefixes_are_the_first_eight_bytes_big_endian() {
    #[track_caller]
    fn check(key: &[u8], expected: u64) {
        assert_eq!(key_prefix(key), expected, "{key:?}");
    }
    check(b"", 0);
    check(&[1], 0x0100_0000_0000_0000);
    check(&[0xAB, 0xCD], 0xABCD_0000_0000_0000);
    check(&[0xFF; 7], 0xFFFF_FFFF_FFFF_FF00);
    check(b"abcdefgh", u64::from_be_bytes(*b"abcdefgh"));
    check(b"abcdefghXYZ", u64::from_be_bytes(*b"abcdefgh"));
}
