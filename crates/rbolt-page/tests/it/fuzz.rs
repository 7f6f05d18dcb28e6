//! Property tests: arbitrary bytes, fixture pages with arbitrary bytes spliced over them, and
//! well-formed headers with arbitrary counts and offsets, fed to every decoder and accessor.
//! Each must return `Ok` or `Err(Corruption)` without panicking, and each answer is checked
//! against an oracle written from the format's rules: the bytes a view hands out, the error
//! variant it returns, the page it names.

use crate::support::{Db, Reached, Walker, new_meta};
use quickcheck::{Arbitrary, Gen, QuickCheck, Testable};
use rbolt_page::{
    BranchBuilder, BranchPage, BucketHeader, BucketValue, Corruption, FLAG_BRANCH, FLAG_FREELIST,
    FLAG_LEAF, FLAG_META, FREELIST_COUNT_OVERFLOW, FreelistPage, LEAF_FLAG_BUCKET, LeafBuilder,
    LeafPage, MAGIC, Meta, PAGE_SIZE_MAX, PAGE_SIZE_MIN, PageHeader, PageKind, PageRef, Pgid,
    Reason, VERSION, child_index, freelist_page_size, inline_bucket_size, leaf_page_size,
    lower_bound, pages_for, read_meta, search, write_bucket_header, write_freelist, write_meta,
};
use std::sync::OnceLock;

/// Cases per property. Together the properties run in a few seconds.
const TESTS: u64 = 10_000;

fn run<A: Testable>(gen_size: usize, property: A) {
    QuickCheck::new()
        .rng(Gen::new(gen_size))
        .tests(TESTS)
        .max_tests(TESTS)
        .quickcheck(property);
}

// ---------------------------------------------------------------------------------------------
// The oracle: what every decoder must answer for given bytes.

fn le_u64(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

fn le_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// FNV-1a 64 from test support's copy, so that the checksum is not checked against its own
/// code.
fn fnv(bytes: &[u8]) -> u64 {
    rbolt_testkit::fnv::fnv1a64(bytes)
}

/// Asserts an error names the page it was asked about and displays as a sentence.
fn named(error: &Corruption, pgid: Pgid) {
    assert_eq!(error.pgid, pgid, "{error}");
    assert!(
        error.to_string().len() > format!("page {pgid}: ").len(),
        "{error:?}"
    );
}

/// Feeds `bytes`, read as page `pgid`, to every decoder and accessor, and checks each answer.
pub(crate) fn decode_everything(
    bytes: &[u8],
    pgid: Pgid,
    high_water: Pgid,
    file_len: u64,
    probe: &[u8],
) {
    let header = PageHeader::read(bytes);
    let page = PageRef::new(bytes, pgid);
    match (&page, header) {
        (Ok(page), Some(header)) => {
            assert_eq!(header.id, pgid.0);
            assert_eq!(page.header(), header);
            assert_eq!(page.pgid(), pgid);
            assert_eq!(page.bytes().len(), bytes.len());
        }
        (Err(error), Some(header)) => {
            assert_ne!(header.id, pgid.0);
            assert_eq!(error.reason, Reason::IdMismatch { found: header.id });
        }
        (Err(error), None) => assert!(matches!(error.reason, Reason::Truncated { .. })),
        (Ok(_), None) => panic!("a page from {} bytes", bytes.len()),
    }
    if let Err(error) = &page {
        named(error, pgid);
    }

    let meta_read = read_meta(bytes, pgid);
    if let Err(error) = &page {
        assert_eq!(meta_read.as_ref().err(), Some(error));
    }
    if let (Ok(page), Some(header)) = (page, header) {
        match page.kind() {
            Ok(kind) => assert_eq!(Some(kind), PageKind::from_flags(header.flags)),
            Err(error) => {
                assert_eq!(PageKind::from_flags(header.flags), None);
                assert_eq!(error.reason, Reason::UnknownFlags(header.flags));
                named(&error, pgid);
            }
        }
        check_leaf(page.leaf(), bytes, pgid, header, probe);
        check_branch(page.branch(), bytes, pgid, header, high_water, probe);
        check_freelist(page.freelist(), bytes, pgid, header, high_water);
        let meta = page.meta();
        check_meta(&meta, bytes, pgid, header);
        assert_eq!(meta_read, meta);
    }

    // An inline page: the same as a leaf, whatever id its header names.
    let inline = LeafPage::inline(bytes, pgid);
    match header {
        Some(header) => check_leaf(inline, bytes, pgid, header, probe),
        None => assert!(matches!(
            inline.map(|_| ()).unwrap_err().reason,
            Reason::Truncated { .. }
        )),
    }

    check_bucket_value(bytes, pgid, probe);

    let unchecked = Meta::read_unchecked(bytes);
    assert_eq!(unchecked.is_some(), bytes.len() >= 80);
    if let Some(meta) = unchecked {
        check_fields(&meta, pgid, file_len);
        check_fields(&meta, pgid, u64::MAX);
        let needed = meta.pgid.saturating_mul(u64::from(meta.page_size));
        check_fields(&meta, pgid, needed);
        check_fields(&meta, pgid, needed.saturating_sub(1));
    }
}

/// A leaf view (or the error instead of one) against the header it was made from.
fn check_leaf(
    leaf: Result<LeafPage<'_>, Corruption>,
    bytes: &[u8],
    pgid: Pgid,
    header: PageHeader,
    probe: &[u8],
) {
    let capacity = bytes.len().saturating_sub(16) / 16;
    let count = usize::from(header.count);
    let leaf = match leaf {
        Err(error) => {
            named(&error, pgid);
            if header.flags != FLAG_LEAF {
                let expected = Reason::WrongKind {
                    expected: PageKind::Leaf,
                    flags: header.flags,
                };
                assert_eq!(error.reason, expected);
            } else {
                assert!(count > capacity);
                let expected = Reason::CountTooLarge {
                    count: count as u64,
                    capacity: capacity as u64,
                };
                assert_eq!(error.reason, expected);
            }
            return;
        }
        Ok(leaf) => leaf,
    };
    assert_eq!(header.flags, FLAG_LEAF);
    assert_eq!(leaf.len(), count);
    assert_eq!(leaf.is_empty(), count == 0);
    assert_eq!(leaf.pgid(), pgid);
    assert_eq!(leaf.bytes().len(), bytes.len());

    let span = bytes.len();
    let entries: Vec<_> = leaf.iter().collect();
    assert_eq!(entries.len(), count);
    let mut payload = 16 + 16 * count;
    let mut readable = Vec::with_capacity(count);
    let mut valid = true;
    for (index, from_iter) in entries.iter().enumerate() {
        let at = 16 + 16 * index;
        let elem = leaf.element(index).expect("element below len");
        assert_eq!(
            (elem.flags, elem.pos, elem.ksize, elem.vsize),
            (
                le_u32(bytes, at),
                le_u32(bytes, at + 4),
                le_u32(bytes, at + 8),
                le_u32(bytes, at + 12)
            )
        );
        let key_start = at + elem.pos as usize;
        let key_end = key_start + elem.ksize as usize;
        let value_end = key_end + elem.vsize as usize;
        payload = payload.max(value_end);
        let out_of_bounds = |end: usize| Reason::ElementOutOfBounds {
            index,
            end: end as u64,
            span: span as u64,
        };
        match leaf.key(index) {
            Ok(key) => assert_eq!(key, &bytes[key_start..key_end]),
            Err(error) => {
                assert!(key_end > span);
                assert_eq!(error.reason, out_of_bounds(key_end));
                named(&error, pgid);
            }
        }
        match leaf.value(index) {
            Ok(value) => assert_eq!(value, &bytes[key_end..value_end]),
            Err(error) => {
                assert!(value_end > span);
                assert_eq!(error.reason, out_of_bounds(value_end));
            }
        }
        let entry = leaf.entry(index);
        assert_eq!(&entry, from_iter);
        match entry {
            Ok(entry) => {
                assert!(value_end <= span);
                assert_eq!(entry.flags, elem.flags);
                assert_eq!(entry.key, &bytes[key_start..key_end]);
                assert_eq!(entry.value, &bytes[key_end..value_end]);
                assert_eq!(entry.is_bucket(), elem.flags & LEAF_FLAG_BUCKET != 0);
                valid &= elem.flags & !LEAF_FLAG_BUCKET == 0;
                if entry.is_bucket() {
                    valid &= BucketValue::parse(entry.value, pgid).is_ok();
                }
                readable.push(entry.key);
            }
            Err(error) => {
                assert!(value_end > span);
                assert_eq!(error.reason, out_of_bounds(value_end));
                valid = false;
            }
        }
    }
    assert!(leaf.element(count).is_none());
    assert!(leaf.key(count).is_err());
    assert!(leaf.value(count).is_err());
    assert!(leaf.entry(count).is_err());
    assert_eq!(leaf.payload_len(), Ok(payload));

    let all_readable = readable.len() == count;
    let ascending = all_readable && readable.windows(2).all(|pair| pair[0] < pair[1]);
    valid &= ascending;
    match leaf.validate() {
        Ok(()) => {
            assert!(valid, "validate passed a page the oracle rejects");
            assert!(payload <= span);
        }
        Err(error) => {
            assert!(!valid, "validate rejected a valid page: {error}");
            named(&error, pgid);
        }
    }
    check_search_result(
        leaf.search(probe),
        &readable,
        ascending,
        all_readable,
        probe,
    );
    if let Ok(bound) = lower_bound(&leaf, probe) {
        assert!(bound <= count);
        if ascending {
            assert_eq!(bound, readable.partition_point(|key| *key < probe));
        }
    }
}

/// A search answer against the keys: the standard library's answer when the keys are sorted,
/// and at least a true one when they are not.
fn check_search_result(
    found: Result<Result<usize, usize>, Corruption>,
    keys: &[&[u8]],
    ascending: bool,
    all_readable: bool,
    probe: &[u8],
) {
    if ascending {
        assert_eq!(found, Ok(keys.binary_search_by(|key| (*key).cmp(probe))));
    } else if all_readable {
        match found.expect("every key is readable") {
            Ok(index) => assert_eq!(keys[index], probe),
            Err(index) => assert!(index <= keys.len()),
        }
    }
}

fn check_branch(
    branch: Result<BranchPage<'_>, Corruption>,
    bytes: &[u8],
    pgid: Pgid,
    header: PageHeader,
    high_water: Pgid,
    probe: &[u8],
) {
    let capacity = bytes.len().saturating_sub(16) / 16;
    let count = usize::from(header.count);
    let branch = match branch {
        Err(error) => {
            named(&error, pgid);
            let expected = if header.flags != FLAG_BRANCH {
                Reason::WrongKind {
                    expected: PageKind::Branch,
                    flags: header.flags,
                }
            } else {
                Reason::CountTooLarge {
                    count: count as u64,
                    capacity: capacity as u64,
                }
            };
            assert_eq!(error.reason, expected);
            return;
        }
        Ok(branch) => branch,
    };
    assert_eq!(header.flags, FLAG_BRANCH);
    assert_eq!(branch.len(), count);
    assert_eq!(branch.is_empty(), count == 0);
    assert_eq!(branch.pgid(), pgid);

    let span = bytes.len();
    let from_iter: Vec<_> = branch.iter().collect();
    assert_eq!(from_iter.len(), count);
    let mut payload = 16 + 16 * count;
    let mut keys = Vec::with_capacity(count);
    let mut children_valid = true;
    for (index, item) in from_iter.iter().enumerate() {
        let at = 16 + 16 * index;
        let elem = branch.element(index).expect("element below len");
        assert_eq!(
            (elem.pos, elem.ksize, elem.pgid),
            (
                le_u32(bytes, at),
                le_u32(bytes, at + 4),
                le_u64(bytes, at + 8)
            )
        );
        let key_start = at + elem.pos as usize;
        let key_end = key_start + elem.ksize as usize;
        payload = payload.max(key_end);
        let child = branch.child(index).expect("child below len");
        assert_eq!(child, Pgid(elem.pgid));
        children_valid &= (2..high_water.0).contains(&child.0);
        match branch.key(index) {
            Ok(key) => {
                assert_eq!(key, &bytes[key_start..key_end]);
                assert_eq!(item, &Ok((key, child)));
                keys.push(key);
            }
            Err(error) => {
                assert!(key_end > span);
                let expected = Reason::ElementOutOfBounds {
                    index,
                    end: key_end as u64,
                    span: span as u64,
                };
                assert_eq!(error.reason, expected);
                assert_eq!(item.as_ref().unwrap_err(), &error);
                named(&error, pgid);
            }
        }
    }
    assert!(branch.element(count).is_none());
    assert!(branch.key(count).is_err());
    assert!(branch.child(count).is_err());
    assert_eq!(branch.payload_len(), Ok(payload));

    let all_readable = keys.len() == count;
    let ascending = all_readable && keys.windows(2).all(|pair| pair[0] < pair[1]);
    let valid = count > 0 && ascending && children_valid;
    match branch.validate(high_water) {
        Ok(()) => assert!(valid, "validate passed a branch the oracle rejects"),
        Err(error) => {
            assert!(!valid, "validate rejected a valid branch: {error}");
            named(&error, pgid);
        }
    }
    check_search_result(branch.search(probe), &keys, ascending, all_readable, probe);
    match branch.child_index(probe) {
        Ok(index) if ascending => {
            let expected = keys.iter().rposition(|key| *key <= probe).unwrap_or(0);
            assert_eq!(index, expected);
        }
        Ok(index) => assert!(index < count.max(1)),
        Err(error) => {
            assert!(!all_readable);
            named(&error, pgid);
        }
    }
    assert_eq!(child_index(&branch, probe), branch.child_index(probe));
}

fn check_freelist(
    freelist: Result<FreelistPage<'_>, Corruption>,
    bytes: &[u8],
    pgid: Pgid,
    header: PageHeader,
    high_water: Pgid,
) {
    let slots = bytes.len().saturating_sub(16) / 8;
    let extended = header.count == FREELIST_COUNT_OVERFLOW;
    let expected: Result<(u64, usize), Reason> = if header.flags != FLAG_FREELIST {
        Err(Reason::WrongKind {
            expected: PageKind::Freelist,
            flags: header.flags,
        })
    } else if extended && slots == 0 {
        Err(Reason::Truncated {
            what: "freelist count",
            need: 24,
            have: bytes.len() as u64,
        })
    } else {
        let (count, first) = if extended {
            (le_u64(bytes, 16), 1)
        } else {
            (u64::from(header.count), 0)
        };
        let capacity = (slots - first) as u64;
        if count > capacity {
            Err(Reason::CountTooLarge { count, capacity })
        } else {
            Ok((count, 16 + 8 * first))
        }
    };
    match (freelist, expected) {
        (Err(error), Err(reason)) => {
            assert_eq!(error.reason, reason);
            named(&error, pgid);
        }
        (Ok(freelist), Ok((count, start))) => {
            let count = count as usize;
            assert_eq!(freelist.len(), count);
            assert_eq!(freelist.is_empty(), count == 0);
            assert_eq!(freelist.pgid(), pgid);
            assert_eq!(freelist.has_extended_count(), extended);
            let ids: Vec<Pgid> = (0..count)
                .map(|i| Pgid(le_u64(bytes, start + 8 * i)))
                .collect();
            assert!(freelist.iter().eq(ids.iter().copied()));
            assert!(freelist.iter().rev().eq(ids.iter().rev().copied()));
            assert_eq!(freelist.iter().len(), count);
            assert_eq!(freelist.get(0), ids.first().copied());
            assert_eq!(freelist.get(count), None);
            assert_eq!(freelist.payload_len(), start + 8 * count);
            assert!(freelist.payload_len() <= bytes.len());
            let valid = ids.iter().all(|id| (2..high_water.0).contains(&id.0))
                && ids.windows(2).all(|pair| pair[0] < pair[1]);
            match freelist.validate(high_water) {
                Ok(()) => assert!(valid, "validate passed a freelist the oracle rejects"),
                Err(error) => {
                    assert!(!valid, "validate rejected a valid freelist: {error}");
                    named(&error, pgid);
                }
            }
        }
        (found, expected) => panic!("freelist: found {found:?}, expected {expected:?}"),
    }
}

fn check_meta(meta: &Result<Meta, Corruption>, bytes: &[u8], pgid: Pgid, header: PageHeader) {
    let expected: Result<Meta, Reason> = if header.flags != FLAG_META {
        Err(Reason::WrongKind {
            expected: PageKind::Meta,
            flags: header.flags,
        })
    } else if bytes.len() < 80 {
        Err(Reason::Truncated {
            what: "meta",
            need: 80,
            have: bytes.len() as u64,
        })
    } else {
        let unchecked = Meta::read_unchecked(bytes).expect("80 bytes");
        let computed = fnv(&bytes[16..72]);
        if le_u32(bytes, 16) != MAGIC {
            Err(Reason::BadMagic(le_u32(bytes, 16)))
        } else if le_u32(bytes, 20) != VERSION {
            Err(Reason::BadVersion(le_u32(bytes, 20)))
        } else if le_u64(bytes, 72) != computed {
            Err(Reason::BadChecksum {
                stored: le_u64(bytes, 72),
                computed,
            })
        } else {
            Ok(unchecked)
        }
    };
    match (meta, expected) {
        (Ok(meta), Ok(expected)) => {
            assert_eq!(*meta, expected);
            assert_eq!(meta.compute_checksum(), meta.checksum);
            assert_eq!(meta.validate(pgid), Ok(()));
        }
        (Err(error), Err(reason)) => {
            assert_eq!(error.reason, reason);
            named(error, pgid);
        }
        (found, expected) => panic!("meta: found {found:?}, expected {expected:?}"),
    }
}

/// `validate_fields` against the rules, in the order they are checked.
fn check_fields(meta: &Meta, pgid: Pgid, file_len: u64) {
    let page_size = meta.page_size;
    let id_error = |what: &'static str, id: u64| Reason::PgidOutOfBounds {
        what,
        pgid: id,
        high_water: meta.pgid,
    };
    let expected = if !(PAGE_SIZE_MIN..=PAGE_SIZE_MAX).contains(&page_size) {
        Err(Reason::BadPageSize(page_size))
    } else if meta.root.root < 2 || meta.root.root >= meta.pgid {
        Err(id_error("root", meta.root.root))
    } else if meta.freelist != u64::MAX && (meta.freelist < 2 || meta.freelist >= meta.pgid) {
        Err(id_error("freelist", meta.freelist))
    } else if u128::from(meta.pgid) * u128::from(page_size) > u128::from(file_len) {
        Err(Reason::HighWaterPastEnd {
            high_water: meta.pgid,
            file_len,
        })
    } else {
        Ok(())
    };
    let found = meta.validate_fields(pgid, file_len);
    if let Err(error) = &found {
        named(error, pgid);
    }
    assert_eq!(
        found.map_err(|e| e.reason),
        expected,
        "{meta:?} in {file_len} bytes"
    );
}

fn check_bucket_value(bytes: &[u8], owner: Pgid, probe: &[u8]) {
    let parsed = BucketValue::parse(bytes, owner);
    let Some(header) = BucketHeader::read(bytes) else {
        let error = parsed.map(|_| ()).unwrap_err();
        assert!(matches!(error.reason, Reason::Truncated { .. }));
        named(&error, owner);
        return;
    };
    let rest = &bytes[16..];
    match parsed {
        Ok(value) => {
            assert_eq!(value.header, header);
            assert_eq!(header.root_pgid(), Pgid(le_u64(bytes, 0)));
            match value.inline {
                Some(page) => {
                    assert_eq!(header.root, 0);
                    assert_eq!(page.bytes(), rest);
                    let page_header = PageHeader::read(rest).expect("inline header");
                    check_leaf(Ok(page), rest, owner, page_header, probe);
                }
                None => assert!(header.root != 0 && rest.is_empty()),
            }
        }
        Err(error) => {
            named(&error, owner);
            if header.root == 0 {
                let inline = LeafPage::inline(rest, owner).map(|_| ()).unwrap_err();
                assert_eq!(error, inline);
            } else {
                assert!(!rest.is_empty());
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Inputs.

/// A valid page, bucket value or inline page taken from a fixture, with the context to read it.
#[derive(Debug)]
struct Sample {
    bytes: Vec<u8>,
    pgid: Pgid,
    high_water: Pgid,
    file_len: u64,
}

/// Spans larger than this are left out of the pool, to keep each case fast.
const SAMPLE_SPAN_MAX: usize = 64 * 1024;

fn samples() -> &'static [Sample] {
    static SAMPLES: OnceLock<Vec<Sample>> = OnceLock::new();
    SAMPLES.get_or_init(|| {
        let mut samples = Vec::new();
        for name in ["empty", "small", "pagesize-16k", "overflow"] {
            let db = Db::open(name);
            for index in 0..2 {
                let file = db.file(index);
                let sample = |bytes: &[u8], pgid: Pgid| Sample {
                    bytes: bytes.to_vec(),
                    pgid,
                    high_water: file.high_water,
                    file_len: db.bytes.len() as u64,
                };
                if index == db.newest() {
                    // Every page below the high-water mark: tree pages, metas, the freelist,
                    // free pages holding old versions, and overflow pages read as pages.
                    for pgid in 0..file.high_water.0 {
                        if let Ok(span) = file.span(Pgid(pgid))
                            && span.len() <= SAMPLE_SPAN_MAX
                        {
                            samples.push(sample(span, Pgid(pgid)));
                        }
                    }
                }
                let mut walker = Walker::new(file);
                walker
                    .bucket(db.metas[index].root, None, Pgid(index as u64), 0)
                    .expect("fixture walks");
                for (owner, value) in &walker.bucket_values {
                    samples.push(sample(value, *owner));
                }
                for reached in &walker.reached {
                    if let Reached::Inline(page) = reached {
                        samples.push(sample(page.bytes(), page.pgid()));
                    }
                }
            }
        }
        // A freelist page in the 0xFFFF form.
        let count = usize::from(FREELIST_COUNT_OVERFLOW);
        let span = pages_for(freelist_page_size(count), 4096) * 4096;
        let mut bytes = vec![0u8; span];
        let ids = (0..count as u32).map(|i| Pgid(10 + 2 * u64::from(i)));
        write_freelist(&mut bytes, Pgid(7), (span / 4096 - 1) as u32, ids);
        samples.push(Sample {
            bytes,
            pgid: Pgid(7),
            high_water: Pgid(10 + 2 * count as u64),
            file_len: u64::MAX,
        });
        samples
    })
}

#[test]
fn arbitrary_bytes() {
    fn property(
        bytes: Vec<u8>,
        pgid: u64,
        own_id: bool,
        high_water: u16,
        file_len: u64,
        probe: Vec<u8>,
    ) -> bool {
        // Half the time, read the bytes as the page their header names.
        let pgid = match PageHeader::read(&bytes) {
            Some(header) if own_id => Pgid(header.id),
            _ => Pgid(pgid),
        };
        decode_everything(&bytes, pgid, Pgid(u64::from(high_water)), file_len, &probe);
        true
    }
    run(
        512,
        property as fn(Vec<u8>, u64, bool, u16, u64, Vec<u8>) -> bool,
    );
}

#[test]
fn bytes_spliced_over_fixture_pages() {
    fn property(pick: usize, patch: Vec<u8>, at: u32, mode: u8, cut: u32, probe: Vec<u8>) -> bool {
        let samples = samples();
        let sample = &samples[pick % samples.len()];
        let mut bytes = sample.bytes.clone();
        let mut patch = patch;
        if mode & 0x08 != 0 {
            patch.truncate(usize::from(mode >> 4) + 1);
        }
        let region = match mode & 0x03 {
            // The header and the first elements, where counts, flags and offsets live.
            0 => bytes.len().min(16 + 16 * 4),
            // The header and the freelist's count slot.
            1 => bytes.len().min(32),
            _ => bytes.len(),
        };
        if region > 0 {
            let start = at as usize % region;
            let end = (start + patch.len()).min(bytes.len());
            bytes[start..end].copy_from_slice(&patch[..end - start]);
        }
        if mode & 0x04 != 0 {
            bytes.truncate(cut as usize % (bytes.len() + 1));
        }
        decode_everything(
            &bytes,
            sample.pgid,
            sample.high_water,
            sample.file_len,
            &probe,
        );
        true
    }
    // The unpatched samples must decode as valid pages do: this also checks the pool itself.
    for sample in samples() {
        decode_everything(
            &sample.bytes,
            sample.pgid,
            sample.high_water,
            sample.file_len,
            b"k",
        );
    }
    run(
        48,
        property as fn(usize, Vec<u8>, u32, u8, u32, Vec<u8>) -> bool,
    );
}

/// A page with a well-formed header of a chosen kind, and element arrays whose counts, offsets
/// and sizes are arbitrary, near the page's end, or sensible.
#[derive(Clone, Debug)]
struct Crafted {
    bytes: Vec<u8>,
    pgid: Pgid,
    high_water: Pgid,
}

impl Arbitrary for Crafted {
    fn arbitrary(g: &mut Gen) -> Crafted {
        const FLAGS: [u16; 9] = [
            FLAG_LEAF,
            FLAG_LEAF,
            FLAG_LEAF,
            FLAG_BRANCH,
            FLAG_BRANCH,
            FLAG_FREELIST,
            FLAG_META,
            0,
            0x03,
        ];
        let flags = *g.choose(&FLAGS).expect("flags");
        let n_elems = usize::from(u8::arbitrary(g) % 48);
        let data_len = usize::from(u16::arbitrary(g) % 1024);
        let span = 16 + 16 * n_elems + data_len;
        let pgid = Pgid(2 + u64::from(u8::arbitrary(g) % 8));
        let high_water = Pgid(u64::from(u8::arbitrary(g) % 16));
        let count = match u8::arbitrary(g) % 8 {
            0 => u16::arbitrary(g),
            1 => (n_elems + 1) as u16,
            2 if flags == FLAG_FREELIST => FREELIST_COUNT_OVERFLOW,
            3 => n_elems.saturating_sub(1) as u16,
            _ => n_elems as u16,
        };
        let overflow = if bool::arbitrary(g) {
            0
        } else {
            u32::arbitrary(g)
        };

        let mut bytes = vec![0u8; span];
        // Data bytes from a few choices, so keys collide and sort often enough.
        for byte in &mut bytes[16 + 16 * n_elems..] {
            *byte = *g.choose(&[0u8, 1, 2, b'a', b'b', 0xff]).expect("byte");
        }
        PageHeader::new(pgid, PageKind::Leaf, count, overflow).write(&mut bytes);
        bytes[8..10].copy_from_slice(&flags.to_le_bytes());
        if count == FREELIST_COUNT_OVERFLOW && span >= 24 {
            let real = match u8::arbitrary(g) % 3 {
                0 => u64::arbitrary(g),
                1 => ((span - 24) / 8) as u64,
                _ => ((span - 24) / 8 + 1) as u64,
            };
            bytes[16..24].copy_from_slice(&real.to_le_bytes());
        }

        // Elements: packed like a builder would, one past the end, or wild.
        let mut data = 16 + 16 * n_elems;
        for index in 0..n_elems {
            let at = 16 + 16 * index;
            let room = span - data;
            let (ksize, vsize) = match u8::arbitrary(g) % 6 {
                0 => (u32::arbitrary(g), u32::arbitrary(g)),
                1 => (room as u32, 1),
                2 => (room as u32 + 1, 0),
                _ => (
                    u32::from(u8::arbitrary(g) % 5),
                    u32::from(u8::arbitrary(g) % 24),
                ),
            };
            let pos = if u8::arbitrary(g) % 8 == 0 {
                u32::arbitrary(g)
            } else {
                (data - at) as u32
            };
            data = (data + ksize as usize + vsize as usize).min(span);
            if flags == FLAG_BRANCH {
                let child = match u8::arbitrary(g) % 4 {
                    0 => u64::arbitrary(g),
                    _ => u64::from(u8::arbitrary(g) % 16),
                };
                bytes[at..at + 4].copy_from_slice(&pos.to_le_bytes());
                bytes[at + 4..at + 8].copy_from_slice(&ksize.to_le_bytes());
                bytes[at + 8..at + 16].copy_from_slice(&child.to_le_bytes());
            } else {
                let elem_flags = match u8::arbitrary(g) % 8 {
                    0 => u32::arbitrary(g),
                    1 | 2 => LEAF_FLAG_BUCKET,
                    _ => 0,
                };
                bytes[at..at + 4].copy_from_slice(&elem_flags.to_le_bytes());
                bytes[at + 4..at + 8].copy_from_slice(&pos.to_le_bytes());
                bytes[at + 8..at + 12].copy_from_slice(&ksize.to_le_bytes());
                bytes[at + 12..at + 16].copy_from_slice(&vsize.to_le_bytes());
                // Some bucket values get an inline header and an inline leaf page header.
                let value_start = at as u64 + u64::from(pos) + u64::from(ksize);
                if elem_flags == LEAF_FLAG_BUCKET
                    && vsize >= 24
                    && value_start + 24 <= span as u64
                    && bool::arbitrary(g)
                {
                    let value_start = value_start as usize;
                    bytes[value_start..value_start + 16].fill(0);
                    let inline_count = u16::from(u8::arbitrary(g) % 3);
                    let inline = PageHeader::new(Pgid(0), PageKind::Leaf, inline_count, 0);
                    let mut header = [0u8; 16];
                    inline.write(&mut header);
                    let end = (value_start + 32).min(span);
                    bytes[value_start + 16..end].copy_from_slice(&header[..end - value_start - 16]);
                }
            }
        }
        Crafted {
            bytes,
            pgid,
            high_water,
        }
    }
}

#[test]
fn well_formed_headers_with_arbitrary_elements() {
    fn property(page: Crafted, probe: Vec<u8>, file_len: u64) -> bool {
        decode_everything(&page.bytes, page.pgid, page.high_water, file_len, &probe);
        true
    }
    run(8, property as fn(Crafted, Vec<u8>, u64) -> bool);
}

#[test]
fn meta_fields() {
    #[expect(
        clippy::too_many_arguments,
        reason = "quickcheck passes each input as an argument"
    )]
    fn property(
        pick: u8,
        raw_page_size: u32,
        root: u64,
        freelist: u64,
        high_water: u64,
        file_len: u64,
        txid: u64,
        damage: u8,
    ) -> bool {
        let page_size = match pick % 4 {
            0 => 1u32 << (pick / 4 % 32),
            1 => raw_page_size,
            2 => *[0, 511, 512, 513, 1 << 24, (1 << 24) + 1, 1 << 25, u32::MAX]
                .get(usize::from(pick / 4 % 8))
                .expect("in range"),
            _ => 4096,
        };
        // Mostly small ids, so the bounds checks decide rather than the magnitude.
        let small = damage & 0x80 == 0;
        let shrink = |id: u64| if small { id % 12 } else { id };
        let high_water = shrink(high_water);
        let freelist = if damage & 0x40 != 0 {
            u64::MAX
        } else {
            shrink(freelist)
        };
        let needed = high_water.saturating_mul(u64::from(page_size));
        let file_len = match (damage >> 4) & 0x03 {
            0 => needed,
            1 => needed.saturating_sub(1),
            _ => file_len,
        };
        // A new database's meta (magic, version, no flags) with the fields drawn here.
        let meta = Meta {
            page_size,
            root: BucketHeader {
                root: shrink(root),
                sequence: txid.rotate_left(7),
            },
            freelist,
            pgid: high_water,
            txid,
            ..new_meta(4096, 0)
        };
        let mut bytes = vec![0u8; 96];
        let written = write_meta(&mut bytes, &meta);
        assert_eq!(written.checksum, fnv(&bytes[16..72]));
        assert_eq!(written.checksum, le_u64(&bytes, 72));
        let pgid = Pgid(txid % 2);
        match damage % 6 {
            0 => assert_eq!(read_meta(&bytes, pgid), Ok(written)),
            1 => bytes[16] ^= 1,                                     // magic
            2 => bytes[20] ^= 3,                                     // version
            3 => bytes[72 + usize::from((damage >> 3) & 7)] ^= 0x10, // checksum
            4 => bytes[40 + usize::from((damage >> 3) & 7)] ^= 1,    // a field under the checksum
            _ => bytes[8] = FLAG_LEAF as u8,                         // page flags
        }
        decode_everything(&bytes, pgid, Pgid(high_water), file_len, b"");
        true
    }
    run(
        8,
        property as fn(u8, u32, u64, u64, u64, u64, u64, u8) -> bool,
    );
}

#[test]
fn built_pages_decode_and_search_like_the_standard_library() {
    fn property(keys: Vec<Vec<u8>>, probe: Vec<u8>, bucket_every: u8) -> bool {
        let mut keys = keys;
        keys.sort();
        keys.dedup();
        let value_of = |key: &[u8]| key.iter().rev().copied().collect::<Vec<u8>>();
        let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();

        // A leaf, some of whose values are inline buckets holding one entry.
        let inline_value = |key: &[u8]| {
            let page_len = leaf_page_size(1, key.len() * 2);
            let mut value = vec![0u8; 16 + page_len];
            BucketHeader {
                root: 0,
                sequence: key.len() as u64,
            }
            .write(&mut value);
            let mut inline = LeafBuilder::new(&mut value[16..], Pgid(0), 1, 0);
            inline.push(0, key, &value_of(key));
            inline.finish();
            value
        };
        let is_bucket =
            |index: usize| bucket_every > 0 && index.is_multiple_of(usize::from(bucket_every));
        let values: Vec<Vec<u8>> = keys
            .iter()
            .enumerate()
            .map(|(index, key)| {
                if is_bucket(index) {
                    inline_value(key)
                } else {
                    value_of(key)
                }
            })
            .collect();
        let kv_len = keys
            .iter()
            .zip(&values)
            .map(|(k, v)| k.len() + v.len())
            .sum();
        let size = leaf_page_size(keys.len(), kv_len);
        let mut page = vec![0u8; size];
        let mut builder = LeafBuilder::new(&mut page, Pgid(9), keys.len(), 0);
        for (index, (key, value)) in keys.iter().zip(&values).enumerate() {
            builder.push(
                if is_bucket(index) {
                    LEAF_FLAG_BUCKET
                } else {
                    0
                },
                key,
                value,
            );
        }
        assert_eq!(builder.finish(), size);

        // The same page with the bucket values written in place gives the same bytes.
        let mut in_place = vec![0u8; size];
        let mut builder = LeafBuilder::new(&mut in_place, Pgid(9), keys.len(), 0);
        for (index, key) in keys.iter().enumerate() {
            if is_bucket(index) {
                let page_len = leaf_page_size(1, key.len() * 2);
                let value = builder.push_with(LEAF_FLAG_BUCKET, key, inline_bucket_size(page_len));
                let header = BucketHeader {
                    root: 0,
                    sequence: key.len() as u64,
                };
                write_bucket_header(value, header);
                let mut inline = LeafBuilder::new(&mut value[16..], Pgid(0), 1, 0);
                inline.push(0, key, &value_of(key));
                assert_eq!(inline.finish(), page_len);
            } else {
                builder.push(0, key, &value_of(key));
            }
        }
        assert_eq!(builder.finish(), size);
        assert!(in_place == page);

        let leaf = LeafPage::new(&page, Pgid(9)).expect("leaf");
        assert_eq!(leaf.validate(), Ok(()));
        assert_eq!(leaf.payload_len(), Ok(size));
        for (index, entry) in leaf.iter().enumerate() {
            let entry = entry.expect("entry");
            assert_eq!(
                (entry.key, entry.value),
                (keys[index], values[index].as_slice())
            );
            assert_eq!(entry.is_bucket(), is_bucket(index));
            if entry.is_bucket() {
                let bucket = BucketValue::parse(entry.value, Pgid(9)).expect("bucket");
                let inline = bucket.inline.expect("inline");
                assert_eq!(inline.key(0), Ok(keys[index]));
                assert_eq!(inline.validate(), Ok(()));
            }
        }
        let expected = keys.binary_search_by(|key| (*key).cmp(probe.as_slice()));
        assert_eq!(leaf.search(&probe), Ok(expected));
        assert_eq!(search(keys.as_slice(), &probe), Ok(expected));
        let partition = keys.partition_point(|key| *key < probe.as_slice());
        assert_eq!(lower_bound(&leaf, &probe), Ok(partition));
        for (index, key) in keys.iter().enumerate() {
            assert_eq!(leaf.search(key), Ok(Ok(index)));
        }
        decode_everything(&page, Pgid(9), Pgid(10), 0, &probe);

        // A branch over the same keys.
        let key_len = keys.iter().map(|k| k.len()).sum();
        let size = rbolt_page::branch_page_size(keys.len(), key_len);
        let mut page = vec![0u8; size];
        let mut builder = BranchBuilder::new(&mut page, Pgid(9), keys.len(), 0);
        for (index, key) in keys.iter().enumerate() {
            builder.push(key, Pgid(10 + index as u64));
        }
        assert_eq!(builder.finish(), size);
        let branch = BranchPage::new(&page, Pgid(9)).expect("branch");
        let high_water = Pgid(10 + keys.len() as u64);
        assert_eq!(branch.validate(high_water).is_ok(), !keys.is_empty());
        assert_eq!(branch.search(&probe), Ok(expected));
        let child = keys
            .iter()
            .rposition(|key| *key <= probe.as_slice())
            .unwrap_or(0);
        assert_eq!(branch.child_index(&probe), Ok(child));
        assert_eq!(child_index(keys.as_slice(), &probe), Ok(child));
        decode_everything(&page, Pgid(9), high_water, 0, &probe);
        true
    }
    run(40, property as fn(Vec<Vec<u8>>, Vec<u8>, u8) -> bool);
}
