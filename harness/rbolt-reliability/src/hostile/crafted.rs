//! Files made by hand: files that are no database at all, crafted cycles, DAGs and nesting
//! bombs, cycles made from a valid shape, and random multi-byte mutations.

use super::fields::{fix_meta_checksum, high_water, u16_at, u32_at, u64_at, write_field};
use super::{SHAPE_PAGE_SIZE, Shape};
use rbolt_fixtures::rng::Rng;
use rbolt_page::{
    BranchBuilder, EMPTY_DB_PAGES, LEAF_FLAG_BUCKET, LeafBuilder, Meta, PGID_NO_FREELIST, PageRun,
    Pgid, empty_db_prefixes, read_meta, run_digest, write_empty_db, write_meta,
    write_meta_one_sync,
};

/// Nesting deeper than the 1,024 levels rbolt once capped buckets at.
const NESTING_PAST_OLD_CAP: usize = 1124;

/// Files that are not bbolt databases at all.
pub fn not_databases(seed: u64) -> Vec<(String, Vec<u8>)> {
    let mut rng = Rng::derive(seed, 0x0DB);
    let mut files = vec![
        ("empty file".to_string(), Vec::new()),
        ("1 byte".into(), vec![0]),
        ("79 zero bytes".into(), vec![0; 79]),
        ("80 zero bytes".into(), vec![0; 80]),
        ("4 KiB of zeros".into(), vec![0; 4096]),
        ("32 KiB of zeros".into(), vec![0; 32 * 1024]),
        ("16 KiB of 0xFF".into(), vec![0xFF; 16 * 1024]),
        ("text".into(), b"hello, world\n".repeat(500)),
    ];
    let mut sqlite = b"SQLite format 3\0".to_vec();
    sqlite.resize(8192, 0);
    files.push(("an SQLite header".into(), sqlite));
    for len in [16, 512, 4096, 40_000] {
        files.push((format!("{len} random bytes"), rng.bytes(len)));
    }
    // A meta's magic in front of nothing: a new database's first meta, claiming each page size.
    let meta = new_meta(SHAPE_PAGE_SIZE, 0);
    for page_size in [512u32, 4096, 1 << 24, 3000, 0] {
        let mut image = vec![0u8; 4096];
        write_meta(&mut image, &Meta { page_size, ..meta });
        files.push((format!("a lone meta with page size {page_size}"), image));
    }
    files
}

/// The meta a new database of `page_size` bytes a page holds on page `pgid` (0 or 1).
fn new_meta(page_size: usize, pgid: u64) -> Meta {
    read_meta(&empty_db_prefixes(page_size)[pgid as usize], Pgid(pgid))
        .expect("a new database's meta is valid")
}

/// A file of `n_pages` pages of `page_size` bytes: a new database (both metas pointing at root
/// 3, an empty freelist at page 2) whose metas' high-water mark is `n_pages`, with pages from 3
/// on written by `fill`.
fn crafted(page_size: usize, n_pages: u64, fill: impl FnOnce(&mut [u8])) -> Vec<u8> {
    let mut image = vec![0u8; n_pages as usize * page_size];
    write_empty_db(&mut image[..EMPTY_DB_PAGES * page_size], page_size);
    for pgid in 0..2 {
        let meta = Meta {
            pgid: n_pages,
            ..new_meta(page_size, pgid)
        };
        write_meta(page_mut(&mut image, page_size, pgid), &meta);
    }
    fill(&mut image);
    image
}

fn page_mut(image: &mut [u8], page_size: usize, pgid: u64) -> &mut [u8] {
    let start = pgid as usize * page_size;
    &mut image[start..start + page_size]
}

fn bucket_value(root: u64) -> [u8; 16] {
    let mut value = [0u8; 16];
    value[..8].copy_from_slice(&root.to_le_bytes());
    value
}

/// Crafted files: cycles and DAGs of branch pages, and nesting that goes as deep as the
/// limits allow (or deeper). Each is `(name, image)`.
pub fn crafted_files() -> Vec<(String, Vec<u8>)> {
    let ps = SHAPE_PAGE_SIZE;
    let mut files = Vec::new();
    // A branch page whose only child is itself, and two that point at each other.
    files.push((
        "branch page pointing at itself".to_string(),
        crafted(ps, 4, |image| {
            let mut b = BranchBuilder::new(page_mut(image, ps, 3), Pgid(3), 1, 0);
            b.push(b"a", Pgid(3));
            b.finish();
        }),
    ));
    files.push((
        "two branch pages pointing at each other".to_string(),
        crafted(ps, 5, |image| {
            for (pgid, child) in [(3, 4), (4, 3)] {
                let mut b = BranchBuilder::new(page_mut(image, ps, pgid), Pgid(pgid), 1, 0);
                b.push(b"a", Pgid(child));
                b.finish();
            }
        }),
    ));
    // DAGs: each of `depth` branch pages has two children, both the next page; a full walk
    // that does not notice meets the last page 2^depth times.
    for (name, with_entry) in [("empty leaf", false), ("one-entry leaf", true)] {
        let depth = 50u64;
        files.push((
            format!("a DAG of {depth} branch pages over an {name}"),
            crafted(ps, 4 + depth, |image| {
                for level in 0..depth {
                    let pgid = 3 + level;
                    let mut b = BranchBuilder::new(page_mut(image, ps, pgid), Pgid(pgid), 2, 0);
                    b.push(b"a", Pgid(pgid + 1));
                    b.push(b"b", Pgid(pgid + 1));
                    b.finish();
                }
                let leaf = 3 + depth;
                let count = usize::from(with_entry);
                let mut l = LeafBuilder::new(page_mut(image, ps, leaf), Pgid(leaf), count, 0);
                if with_entry {
                    l.push(0, b"a", b"value");
                }
                l.finish();
            }),
        ));
    }
    // Buckets nested one per page, deeper than the 1,024 levels rbolt once refused (Go bbolt
    // has no limit): a sound file that must read in full.
    let chain = NESTING_PAST_OLD_CAP as u64;
    files.push((
        format!("{chain} buckets nested one per page"),
        crafted(ps, 4 + chain, |image| {
            for level in 0..chain {
                let pgid = 3 + level;
                let mut l = LeafBuilder::new(page_mut(image, ps, pgid), Pgid(pgid), 1, 0);
                l.push(LEAF_FLAG_BUCKET, b"b", &bucket_value(pgid + 1));
                l.finish();
            }
            let last = 3 + chain;
            LeafBuilder::new(page_mut(image, ps, last), Pgid(last), 0, 0).finish();
        }),
    ));
    // Buckets nested 40 deep, each bucket's tree a chain of 60 one-child branch pages.
    files.push((
        "40 nested buckets, each a 60-deep chain of branch pages".to_string(),
        deep_chain(ps, 40, 60, true),
    ));
    // Within every limit and still too deep for recursion: 1000 nested buckets, each a chain
    // of 62 one-child branch pages (63 levels, under DEPTH_MAX), so a recursive walk nests
    // some 63,000 calls. Once with a freelist page and once without (opening read-write then
    // walks the whole tree to rebuild the freelist).
    for with_freelist in [true, false] {
        files.push((
            format!(
                "1000 nested buckets, each a 62-deep chain of branch pages ({})",
                if with_freelist {
                    "freelist"
                } else {
                    "no freelist"
                }
            ),
            deep_chain(ps, 1000, 62, with_freelist),
        ));
    }
    // Inline buckets nested inside each other's values, as deep.
    let levels = NESTING_PAST_OLD_CAP;
    let mut value = vec![0u8; 32];
    LeafBuilder::new(&mut value[16..], Pgid(0), 0, 0).finish();
    for _ in 0..levels {
        let mut outer = vec![0u8; 16 + 16 + 16 + 1 + value.len()];
        let mut l = LeafBuilder::new(&mut outer[16..], Pgid(0), 1, 0);
        l.push(LEAF_FLAG_BUCKET, b"b", &value);
        l.finish();
        value = outer;
    }
    let leaf_len = 16 + 16 + 1 + value.len();
    let overflow = leaf_len.div_ceil(ps) as u64 - 1;
    files.push((
        format!("{levels} inline buckets nested in one value"),
        crafted(ps, 4 + overflow, |image| {
            let start = 3 * ps;
            let end = start + (overflow as usize + 1) * ps;
            let mut l = LeafBuilder::new(&mut image[start..end], Pgid(3), 1, overflow as u32);
            l.push(LEAF_FLAG_BUCKET, b"b", &value);
            l.finish();
        }),
    ));
    files.extend(one_sync_metas(ps));
    files
}

/// A one-sync meta to craft: what it is, its runs, its digest, and a run count to write over
/// the true one.
type OneSyncCase = (&'static str, Vec<PageRun>, [u8; 16], Option<u16>);

/// Files whose meta 1 is a one-sync meta (issue 51) that passes its checksum but whose run
/// list or digest is damaged, or points outside the file: each must open at meta 0 (the
/// fallback) or fail with a typed error, never panic or read the whole address space. One
/// sound case, whose runs give the digest, opens at meta 1.
fn one_sync_metas(ps: usize) -> Vec<(String, Vec<u8>)> {
    let n_pages = 8u64;
    let base = crafted(ps, n_pages, |_| {});
    let sound = [PageRun {
        start: Pgid(2),
        n_pages: 2,
    }];
    let mut sum = 0u128;
    for r in &sound {
        let at = r.start.0 as usize * ps;
        let bytes = &base[at..at + r.n_pages as usize * ps];
        sum = sum.wrapping_add(run_digest(r.start, &[bytes]));
    }
    one_sync_cases(n_pages, &sound, sum.to_le_bytes())
        .into_iter()
        .map(|(what, runs, digest, count)| {
            let mut image = base.clone();
            let meta = Meta {
                txid: 3,
                pgid: n_pages,
                ..new_meta(ps, 1)
            };
            let page = page_mut(&mut image, ps, 1);
            write_meta_one_sync(page, &meta, &runs, &digest);
            if let Some(count) = count {
                write_field(page, 86, 2, u64::from(count));
            }
            (format!("a one-sync meta 1 with {what}"), image)
        })
        .collect()
}

/// The one-sync metas of [`one_sync_metas`] on a file of `n_pages`: the sound one (`sound`,
/// whose runs give `digest`), then the damaged ones.
fn one_sync_cases(n_pages: u64, sound: &[PageRun], digest: [u8; 16]) -> Vec<OneSyncCase> {
    let run = |start, n_pages| PageRun {
        start: Pgid(start),
        n_pages,
    };
    let sound = sound.to_vec();
    vec![
        ("sound (opens at meta 1)", sound.clone(), digest, None),
        ("a wrong digest", sound.clone(), [0xA5; 16], None),
        ("a run past the file", vec![run(n_pages, 4)], [0; 16], None),
        ("a run of 2^63 pages", vec![run(2, 1 << 63)], [0; 16], None),
        ("a run that wraps", vec![run(u64::MAX, 2)], [0; 16], None),
        ("a run of no pages", vec![run(3, 0)], [0; 16], None),
        ("a run over the metas", vec![run(0, 3)], [0; 16], None),
        (
            "runs out of order",
            vec![run(5, 1), run(3, 1)],
            [0; 16],
            None,
        ),
        (
            "overlapping runs",
            vec![run(3, 2), run(4, 1)],
            [0; 16],
            None,
        ),
        ("a count past the page", sound, [0; 16], Some(u16::MAX)),
    ]
}

/// `buckets` nested buckets, each a chain of `depth` one-child branch pages over a leaf that
/// holds the next bucket.
fn deep_chain(ps: usize, buckets: u64, depth: u64, with_freelist: bool) -> Vec<u8> {
    let per_bucket = depth + 1;
    let mut image = crafted(ps, 3 + buckets * per_bucket + 1, |image| {
        for bucket in 0..buckets {
            let first = 3 + bucket * per_bucket;
            for level in 0..depth {
                let pgid = first + level;
                let mut b = BranchBuilder::new(page_mut(image, ps, pgid), Pgid(pgid), 1, 0);
                b.push(b"b", Pgid(pgid + 1));
                b.finish();
            }
            let leaf = first + depth;
            let mut l = LeafBuilder::new(page_mut(image, ps, leaf), Pgid(leaf), 1, 0);
            l.push(LEAF_FLAG_BUCKET, b"b", &bucket_value(leaf + 1));
            l.finish();
        }
        let last = 3 + buckets * per_bucket;
        LeafBuilder::new(page_mut(image, ps, last), Pgid(last), 0, 0).finish();
    });
    if !with_freelist {
        for m in 0..2 {
            write_field(&mut image, m * ps + 16 + 32, 8, PGID_NO_FREELIST.0);
            fix_meta_checksum(&mut image, ps, m);
        }
    }
    image
}

/// Cycles made from a valid file: every branch element pointed at its own page, at the root
/// page, and at its page's parent; every page-based nested bucket pointed at the root.
pub fn cycles(shape: &Shape) -> Vec<(String, Vec<u8>)> {
    let ps = shape.page_size;
    let image = &shape.image;
    let hwm = high_water(image, ps);
    let newest = (0..2)
        .max_by_key(|&m| u64_at(image, m * ps + 16 + 48).unwrap_or(0))
        .unwrap_or(0);
    let root = u64_at(image, newest * ps + 16 + 16).unwrap_or(3);
    let mut parents = std::collections::HashMap::new();
    let mut branches = Vec::new();
    let mut buckets = Vec::new();
    let mut pgid = 2;
    while pgid < hwm {
        let base = pgid as usize * ps;
        let flags = u16_at(image, base + 8).unwrap_or(0);
        let count = u16_at(image, base + 10).unwrap_or(0) as usize;
        let overflow = u32_at(image, base + 12).unwrap_or(0);
        for i in 0..count.min((ps - 16) / 16) {
            let e = base + 16 + i * 16;
            if flags == 0x01 {
                let child = u64_at(image, e + 8).unwrap_or(0);
                parents.insert(child, pgid);
                branches.push((pgid, i, e + 8));
            } else if flags == 0x02 && u32_at(image, e).unwrap_or(0) & 1 == 1 {
                let value = e
                    + (u32_at(image, e + 4).unwrap_or(0) + u32_at(image, e + 8).unwrap_or(0))
                        as usize;
                if u64_at(image, value).unwrap_or(0) != 0 {
                    buckets.push((pgid, i, value));
                }
            }
        }
        pgid += 1 + overflow;
    }
    let mut out = Vec::new();
    for (pgid, i, offset) in branches {
        let mut targets = vec![("itself", pgid), ("the root", root)];
        if let Some(&parent) = parents.get(&pgid) {
            targets.push(("its parent", parent));
        }
        for (name, target) in targets {
            let mut image = image.clone();
            write_field(&mut image, offset, 8, target);
            out.push((
                format!(
                    "{}: page {pgid} branch {i} pointed at {name} ({target})",
                    shape.name
                ),
                image,
            ));
        }
    }
    for (pgid, i, offset) in buckets {
        let mut image = image.clone();
        write_field(&mut image, offset, 8, root);
        out.push((
            format!(
                "{}: page {pgid} bucket {i} rooted at the root page",
                shape.name
            ),
            image,
        ));
        // The bucket's root pointed at the page holding the bucket value itself.
        let mut image = shape.image.clone();
        write_field(&mut image, offset, 8, pgid);
        out.push((
            format!(
                "{}: page {pgid} bucket {i} rooted at its own parent page",
                shape.name
            ),
            image,
        ));
    }
    out
}

/// A random mutation of `image`: 1 to 4 changes of 1 to 8 bytes, in page headers and
/// elements, anywhere, or in meta fields with the checksum made right again.
pub fn random_mutation(image: &[u8], page_size: usize, rng: &mut Rng) -> (String, Vec<u8>) {
    let mut image = image.to_vec();
    let hwm = high_water(&image, page_size).max(2);
    let mut what = Vec::new();
    for _ in 0..rng.range(1, 5) {
        let len = rng.range(1, 9) as usize;
        let (offset, meta) = match rng.below(100) {
            0..40 => (
                rng.below(hwm) as usize * page_size + rng.below(64) as usize,
                None,
            ),
            40..70 => (rng.below(hwm * page_size as u64) as usize, None),
            70..85 => {
                let m = rng.index(2);
                (m * page_size + 16 + rng.below(56) as usize, Some(m))
            }
            _ => {
                let pgid = rng.range(2, hwm.max(3)) as usize;
                (
                    pgid * page_size + rng.below(page_size as u64) as usize,
                    None,
                )
            }
        };
        let Some(end) = offset.checked_add(len).filter(|&end| end <= image.len()) else {
            continue;
        };
        match rng.below(4) {
            0 | 1 => rng.fill(&mut image[offset..end]),
            2 => {
                let interesting = [
                    0,
                    1,
                    hwm - 1,
                    hwm,
                    hwm + 1,
                    u64::MAX,
                    page_size as u64,
                    0x8000_0000,
                    0xFFFF,
                ];
                let value = *rng.pick(&interesting).expect("not empty");
                image[offset..end].copy_from_slice(&value.to_le_bytes()[..len]);
            }
            _ => {
                let from = rng.below((image.len() - len) as u64) as usize;
                image.copy_within(from..from + len, offset);
            }
        }
        if let Some(m) = meta {
            fix_meta_checksum(&mut image, page_size, m);
        }
        what.push(format!(
            "{len}@{offset}{}",
            if meta.is_some() { "+sum" } else { "" }
        ));
    }
    (what.join(","), image)
}
