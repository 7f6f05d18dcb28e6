//! Hostile files: small valid databases of several shapes, corrupted every way we can think
//! of — every bit of both metas and the freelist page flipped, truncation at and around every
//! page boundary, field-aware mutations of ids, flags, counts, overflows and offsets, cycles
//! and DAGs of branch pages, nesting bombs, files that are no database at all, and many
//! random multi-byte mutations. Opening (read-only and read-write), checking and fully
//! scanning each must end in `Ok` or a typed error: never a panic, an abort, a hang, a stack
//! overflow, or a mapping or allocation larger than the file. A meta flip must give an error or
//! the other meta's state, never different data.

use crate::alloc_track;
use crate::model::{Tree, read_db};
use crate::power::panic_message;
use crate::scan::{ScanError, entries_max, scan_db};
use crate::summary::{Failures, Summary};
use rbolt::storage::{Claim, Mapping, SimFile, Storage};
use rbolt::{Db, Options, WriteTx};
use rbolt_fixtures::rng::Rng;
use rbolt_page::{
    BranchBuilder, BucketHeader, LEAF_FLAG_BUCKET, LeafBuilder, MAGIC, Meta, PGID_NO_FREELIST,
    Pgid, VERSION, fnv1a64, write_freelist, write_meta,
};
use std::io::{self, Write as _};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The page size of the small shapes: small pages make deep trees from few keys and keep the
/// number of bits to flip down.
pub const SHAPE_PAGE_SIZE: usize = 512;

// ---------------------------------------------------------------------------------------------
// Watching what rbolt asks of the storage

/// A [`SimFile`] that remembers the largest mapping and read asked of it.
#[derive(Debug)]
pub struct Watch {
    inner: SimFile,
    max_map: AtomicUsize,
    max_read: AtomicUsize,
}

impl Watch {
    /// Watches `inner`.
    pub fn new(inner: SimFile) -> Watch {
        Watch {
            inner,
            max_map: AtomicUsize::new(0),
            max_read: AtomicUsize::new(0),
        }
    }

    /// The largest mapping asked for, in bytes.
    pub fn max_map(&self) -> usize {
        self.max_map.load(Ordering::Relaxed)
    }
}

impl Storage for Watch {
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.max_read.fetch_max(buf.len(), Ordering::Relaxed);
        self.inner.read_exact_at(buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.inner.write_all_at(buf, offset)
    }

    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        self.inner.write_vectored_at(bufs, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.inner.sync_data()
    }

    fn sync_all(&self) -> io::Result<()> {
        self.inner.sync_all()
    }

    fn grow(&self, len: u64) -> io::Result<()> {
        self.inner.grow(len)
    }

    fn map(&self, len: usize) -> io::Result<Mapping> {
        self.max_map.fetch_max(len, Ordering::Relaxed);
        self.inner.map(len)
    }

    fn path(&self) -> Option<&Path> {
        None
    }

    fn claim(&self) -> io::Result<Claim> {
        self.inner.claim()
    }
}

/// Nesting deeper than the 1,024 levels rbolt once capped buckets at.
const NESTING_PAST_OLD_CAP: usize = 1124;

/// The largest mapping a file of `file_len` bytes justifies: rbolt maps powers of two from
/// 32 KiB, and a new file has 4 pages of at most 4 KiB (the default page size).
fn map_bound(file_len: u64) -> usize {
    file_len.max(4 * 4096).next_power_of_two().max(32 * 1024) as usize
}

/// The largest single allocation a file of `file_len` bytes justifies: a few copies of the
/// file (the test's own image included), or 1 MiB for small files.
fn alloc_bound(file_len: u64) -> usize {
    (4 * file_len as usize).max(1 << 20)
}

// ---------------------------------------------------------------------------------------------
// One case

/// What a case's content must be.
#[derive(Clone, Debug)]
pub enum Expect {
    /// Anything, as long as every step ends in `Ok` or a typed error.
    Any,
    /// When a scan succeeds, its content is one of these states (a corrupt freelist page
    /// cannot change the data).
    Content(Arc<Vec<Tree>>),
    /// When the file opens, its check is clean and its content is one of these states (a
    /// damaged meta or a truncated tail may only make rbolt fall back to the other meta).
    Clean(Arc<Vec<Tree>>),
}

/// Counts over cases.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// Cases run (each opened read-only and read-write).
    pub cases: u64,
    /// Opens that succeeded.
    pub opened: u64,
    /// Opens that returned an error.
    pub open_errors: u64,
    /// Checks that reported problems (fine on a corrupt file).
    pub check_reported: u64,
    /// Scans that ended in an error from rbolt (fine on a corrupt file).
    pub scan_errors: u64,
    /// Scans stopped at bucket values pointing back at their ancestors (the scan's own bound).
    pub nesting_stops: u64,
    /// Panics.
    pub panics: u64,
    /// Cases that did not finish within the time limit.
    pub hangs: u64,
    /// Cases that killed their process: a stack overflow, an abort, a signal.
    pub crashes: u64,
    /// Buckets that yielded more entries than the file can hold.
    pub overruns: u64,
    /// Mappings larger than the file justifies.
    pub oversize_maps: u64,
    /// Allocations larger than the file justifies.
    pub oversize_allocs: u64,
    /// Cases whose content or check broke their expectation.
    pub wrong_content: u64,
    /// Descriptions of the failures.
    pub failures: Failures,
}

impl Tally {
    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: Tally) {
        self.cases += other.cases;
        self.opened += other.opened;
        self.open_errors += other.open_errors;
        self.check_reported += other.check_reported;
        self.scan_errors += other.scan_errors;
        self.nesting_stops += other.nesting_stops;
        self.panics += other.panics;
        self.hangs += other.hangs;
        self.crashes += other.crashes;
        self.overruns += other.overruns;
        self.oversize_maps += other.oversize_maps;
        self.oversize_allocs += other.oversize_allocs;
        self.wrong_content += other.wrong_content;
        self.failures.extend(other.failures);
    }

    /// Whether every case ended as it must.
    pub fn is_clean(&self) -> bool {
        self.panics == 0
            && self.hangs == 0
            && self.crashes == 0
            && self.overruns == 0
            && self.oversize_maps == 0
            && self.oversize_allocs == 0
            && self.wrong_content == 0
            && self.failures.is_empty()
    }

    fn fail(&mut self, what: &str, message: String) {
        self.failures
            .push(format!("{what}: {message}").replace('\n', " "));
    }

    fn counters(&mut self) -> [(&'static str, &mut u64); 13] {
        [
            ("cases", &mut self.cases),
            ("opened", &mut self.opened),
            ("open_errors", &mut self.open_errors),
            ("check_reported", &mut self.check_reported),
            ("scan_errors", &mut self.scan_errors),
            ("nesting_stops", &mut self.nesting_stops),
            ("panics", &mut self.panics),
            ("hangs", &mut self.hangs),
            ("crashes", &mut self.crashes),
            ("overruns", &mut self.overruns),
            ("oversize_maps", &mut self.oversize_maps),
            ("oversize_allocs", &mut self.oversize_allocs),
            ("wrong_content", &mut self.wrong_content),
        ]
    }

    /// The tally as lines a child process prints: `tally k=v ...`, then `failure ...` lines.
    pub fn to_lines(&self) -> String {
        let mut copy = self.clone();
        let mut line = String::from("tally");
        for (key, value) in copy.counters() {
            line.push_str(&format!(" {key}={value}"));
        }
        for failure in self.failures.to_string().lines().skip(1) {
            line.push_str("\nfailure ");
            line.push_str(failure.trim_start_matches("  - "));
        }
        line
    }

    /// Parses what [`to_lines`](Tally::to_lines) printed (the failures it shows).
    pub fn from_lines(text: &str) -> Option<Tally> {
        let mut tally = Tally::default();
        let line = text.lines().find(|l| l.starts_with("tally "))?;
        for word in line.split_whitespace().skip(1) {
            let (key, value) = word.split_once('=')?;
            let value: u64 = value.parse().ok()?;
            for (name, counter) in tally.counters() {
                if name == key {
                    *counter = value;
                }
            }
        }
        for failure in text.lines().filter_map(|l| l.strip_prefix("failure ")) {
            tally.failures.push(failure);
        }
        Some(tally)
    }
}

/// What one open-check-scan did.
enum Run {
    OpenError,
    Opened {
        check: Result<usize, rbolt::Error>,
        scan: Result<crate::scan::Scan, ScanError>,
    },
}

/// Opens `image` read-only and read-write, checks and scans it (and, read-write, computes the
/// page statistics), and judges the outcome.
pub fn evaluate(image: &[u8], expect: &Expect, what: &str) -> Tally {
    let mut tally = Tally {
        cases: 1,
        ..Tally::default()
    };
    let tracking = alloc_track::installed();
    for read_only in [true, false] {
        let what = format!(
            "{what} ({})",
            if read_only { "read-only" } else { "read-write" }
        );
        let sim = SimFile::from_image(image.to_vec()).expect("memfd");
        let watch = Arc::new(Watch::new(sim.clone()));
        alloc_track::reset();
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let options = Options::default().read_only(read_only);
            let Ok(db) = Db::open_storage(watch.clone(), options) else {
                return Run::OpenError;
            };
            let check = db.view(|tx| Ok(tx.check().len()));
            let file_len = db.file_len().unwrap_or(image.len() as u64);
            let scan = scan_db(&db, entries_max(file_len));
            if !read_only {
                // The page statistics walk every page and nested bucket too (last: on some
                // files they overflow the stack). Only their errors matter here.
                let _ = db.view(|tx| tx.root().stats());
            }
            Run::Opened { check, scan }
        }));
        let peak = alloc_track::peak();
        let file_len = Storage::len(&sim).unwrap_or(image.len() as u64);
        if watch.max_map() > map_bound(file_len) {
            tally.oversize_maps += 1;
            tally.fail(
                &what,
                format!("mapped {} bytes of a {file_len}-byte file", watch.max_map()),
            );
        }
        // A panic's own report allocates (a backtrace); the panic is the failure then.
        if tracking && outcome.is_ok() && peak > alloc_bound(file_len) {
            tally.oversize_allocs += 1;
            tally.fail(
                &what,
                format!("allocated {peak} bytes at once for a {file_len}-byte file"),
            );
        }
        match outcome {
            Err(panic) => {
                tally.panics += 1;
                tally.fail(&what, format!("panic: {}", panic_message(&panic)));
            }
            Ok(Run::OpenError) => tally.open_errors += 1,
            Ok(Run::Opened { check, scan }) => {
                tally.opened += 1;
                let check_clean = matches!(check, Ok(0));
                if !check_clean {
                    tally.check_reported += 1;
                }
                let content = match scan {
                    Ok(scan) => Some(scan),
                    Err(ScanError::Db(_)) => {
                        tally.scan_errors += 1;
                        None
                    }
                    Err(ScanError::Nesting) => {
                        tally.nesting_stops += 1;
                        None
                    }
                    Err(ScanError::Overrun { entries_max }) => {
                        tally.overruns += 1;
                        tally.fail(
                            &what,
                            format!("a bucket yielded more than {entries_max} entries"),
                        );
                        None
                    }
                };
                judge(&mut tally, &what, expect, check_clean, content);
            }
        }
    }
    tally
}

fn judge(
    tally: &mut Tally,
    what: &str,
    expect: &Expect,
    check_clean: bool,
    content: Option<crate::scan::Scan>,
) {
    match expect {
        Expect::Any => {}
        Expect::Content(states) => {
            if let Some(scan) = content
                && !states.contains(&scan.tree)
            {
                tally.wrong_content += 1;
                tally.fail(what, "the content is neither committed state".into());
            }
        }
        Expect::Clean(states) => {
            let ok = check_clean
                && content.is_some_and(|scan| scan.consistent && states.contains(&scan.tree));
            if !ok {
                tally.wrong_content += 1;
                tally.fail(
                    what,
                    format!(
                        "opened, but check clean {check_clean} and the content is not one of the committed states"
                    ),
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Running cases with a watchdog

type Job = Box<dyn FnOnce() -> Tally + Send>;

/// Runs cases on a worker thread and gives up on one that takes longer than a limit (the
/// worker is then abandoned, still spinning, and a new one takes over).
pub struct Runner {
    jobs: mpsc::Sender<Job>,
    results: mpsc::Receiver<Tally>,
    limit: Duration,
}

impl Runner {
    /// A runner whose cases may take up to `limit` each.
    pub fn new(limit: Duration) -> Runner {
        let (jobs, job_rx) = mpsc::channel::<Job>();
        let (result_tx, results) = mpsc::channel();
        std::thread::Builder::new()
            .name("hostile-case".into())
            // The default size of a spawned thread's stack, stated: rbolt's recursion must fit.
            .stack_size(2 << 20)
            .spawn(move || {
                for job in job_rx {
                    if result_tx.send(job()).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn a worker");
        Runner {
            jobs,
            results,
            limit,
        }
    }

    /// Runs `job`; `None` if it did not finish in time (or killed its thread).
    pub fn run(&mut self, job: Job) -> Option<Tally> {
        if self.jobs.send(job).is_err() {
            *self = Runner::new(self.limit);
            return None;
        }
        match self.results.recv_timeout(self.limit) {
            Ok(tally) => Some(tally),
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                *self = Runner::new(self.limit);
                None
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Shapes

/// A small valid database and the states its two metas hold (newest first).
#[derive(Clone, Debug)]
pub struct Shape {
    /// Its name, for failure messages.
    pub name: &'static str,
    /// The file.
    pub image: Vec<u8>,
    /// Its page size.
    pub page_size: usize,
    /// The content under the newest meta, then under the other one.
    pub states: Arc<Vec<Tree>>,
}

type Commit = Box<dyn Fn(&mut WriteTx<'_>) -> rbolt::Result<()>>;

fn build(name: &'static str, options: Options, commits: Vec<Commit>) -> Shape {
    let page_size = options.page_size;
    let sim = SimFile::new().expect("memfd");
    let db = Db::open_storage(Arc::new(sim.clone()), options).expect("open a new shape");
    let mut states = vec![read_db(&db).expect("read")];
    for commit in commits {
        let mut tx = db.begin_write().expect("begin");
        commit(&mut tx).expect("build a shape");
        tx.commit().expect("commit a shape");
        states.push(read_db(&db).expect("read"));
    }
    drop(db);
    states.reverse();
    states.truncate(2);
    Shape {
        name,
        image: sim.durable_image(),
        page_size,
        states: Arc::new(states),
    }
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// The shapes: an empty database, one key, an overflow value, a three-level tree, nested
/// buckets, a non-empty freelist, and no persisted freelist; `with_4k` adds a one-key file of
/// 4 KiB pages (bigger: soak only).
pub fn shapes(with_4k: bool) -> Vec<Shape> {
    let options = Options::default().page_size(SHAPE_PAGE_SIZE);
    let mut shapes = vec![
        build("empty", options.clone(), vec![]),
        build(
            "one-key",
            options.clone(),
            vec![
                Box::new(|tx| tx.create_bucket(b"b").map(drop)),
                Box::new(|tx| tx.bucket_mut(b"b")?.expect("b").put(b"k", b"v")),
            ],
        ),
        build(
            "overflow",
            options.clone(),
            vec![
                Box::new(|tx| tx.create_bucket(b"b")?.put(b"small", b"value")),
                Box::new(|tx| {
                    let big: Vec<u8> = (0..3 * SHAPE_PAGE_SIZE + 17).map(|i| i as u8).collect();
                    tx.bucket_mut(b"b")?.expect("b").put(b"big", &big)
                }),
            ],
        ),
        build(
            "three-level",
            options.clone(),
            vec![
                Box::new(|tx| {
                    let mut b = tx.create_bucket(b"b")?;
                    for i in 0..260 {
                        b.put(&key(i), &[i as u8; 8])?;
                    }
                    Ok(())
                }),
                Box::new(|tx| {
                    let mut b = tx.bucket_mut(b"b")?.expect("b");
                    for i in (0..260).step_by(13) {
                        b.put(&key(i), b"changed")?;
                    }
                    Ok(())
                }),
            ],
        ),
        build(
            "nested",
            options.clone(),
            vec![
                Box::new(|tx| {
                    let mut a = tx.create_bucket(b"a")?;
                    a.put(b"x", b"1")?;
                    let mut inline = a.create_bucket(b"inline")?;
                    inline.put(b"y", b"2")?;
                    inline.set_sequence(7)?;
                    let mut deeper = inline.create_bucket(b"deeper")?;
                    deeper.put(b"z", b"3")?;
                    let mut big = tx.create_bucket(b"big")?;
                    for i in 0..40 {
                        big.put(&key(i), &[1; 20])?;
                    }
                    let mut inner = big.create_bucket(b"inner")?;
                    for i in 0..30 {
                        inner.put(&key(i), &[2; 20])?;
                    }
                    Ok(())
                }),
                Box::new(|tx| {
                    let mut big = tx.bucket_mut(b"big")?.expect("big");
                    big.next_sequence()?;
                    let mut inner = big.bucket_mut(b"inner")?.expect("inner");
                    inner.put(b"new", b"value")?;
                    Ok(())
                }),
            ],
        ),
        freelist_shape("freelist", options.clone()),
        freelist_shape("no-freelist", options.no_freelist_sync(true)),
    ];
    if with_4k {
        shapes.push(build(
            "one-key-4k",
            Options::default().page_size(4096),
            vec![
                Box::new(|tx| tx.create_bucket(b"b").map(drop)),
                Box::new(|tx| tx.bucket_mut(b"b")?.expect("b").put(b"k", b"v")),
            ],
        ));
    }
    shapes
}

fn freelist_shape(name: &'static str, options: Options) -> Shape {
    build(
        name,
        options,
        vec![
            Box::new(|tx| {
                let mut b = tx.create_bucket(b"b")?;
                for i in 0..200 {
                    b.put(&key(i), &[3; 20])?;
                }
                Ok(())
            }),
            Box::new(|tx| {
                let mut b = tx.bucket_mut(b"b")?.expect("b");
                for i in 0..150 {
                    b.delete(&key(i))?;
                }
                Ok(())
            }),
        ],
    )
}

// ---------------------------------------------------------------------------------------------
// Reading a valid file's structure, to mutate it field by field

fn u16_at(image: &[u8], offset: usize) -> Option<u64> {
    Some(u64::from(u16::from_le_bytes(
        image.get(offset..offset + 2)?.try_into().ok()?,
    )))
}

fn u32_at(image: &[u8], offset: usize) -> Option<u64> {
    Some(u64::from(u32::from_le_bytes(
        image.get(offset..offset + 4)?.try_into().ok()?,
    )))
}

fn u64_at(image: &[u8], offset: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        image.get(offset..offset + 8)?.try_into().ok()?,
    ))
}

fn read_field(image: &[u8], offset: usize, width: usize) -> Option<u64> {
    match width {
        2 => u16_at(image, offset),
        4 => u32_at(image, offset),
        _ => u64_at(image, offset),
    }
}

fn write_field(image: &mut [u8], offset: usize, width: usize, value: u64) {
    if let Some(target) = image.get_mut(offset..offset + width) {
        target.copy_from_slice(&value.to_le_bytes()[..width]);
    }
}

/// Recomputes the checksum of meta `index` after its fields changed.
pub fn fix_meta_checksum(image: &mut [u8], page_size: usize, index: usize) {
    let body = index * page_size + 16;
    if let Some(fields) = image.get(body..body + 56) {
        let checksum = fnv1a64(fields);
        write_field(image, body + 56, 8, checksum);
    }
}

/// One integer field of a file.
#[derive(Clone, Debug)]
pub struct Field {
    /// Its byte offset.
    pub offset: usize,
    /// 2, 4 or 8 bytes.
    pub width: usize,
    /// What it is, for failure messages.
    pub what: String,
    /// The meta whose checksum covers it, recomputed after a change.
    pub meta: Option<usize>,
}

/// The newest valid meta's high-water mark.
fn high_water(image: &[u8], page_size: usize) -> u64 {
    (0..2)
        .filter_map(|m| {
            let body = m * page_size + 16;
            (u32_at(image, body)? == u64::from(MAGIC))
                .then(|| Some((u64_at(image, body + 48)?, u64_at(image, body + 40)?)))?
        })
        .max()
        .map_or(0, |(_, pgid)| pgid)
}

/// Every header, element, bucket and freelist field of a valid file.
pub fn fields(image: &[u8], page_size: usize) -> Vec<Field> {
    let mut out = Vec::new();
    let mut push = |offset: usize, width: usize, what: String, meta: Option<usize>| {
        if offset + width <= image.len() {
            out.push(Field {
                offset,
                width,
                what,
                meta,
            });
        }
    };
    for m in 0..2 {
        let base = m * page_size;
        header_fields(&mut push, base, &format!("meta {m}"));
        let body = base + 16;
        for (offset, width, name) in [
            (0, 4, "magic"),
            (4, 4, "version"),
            (8, 4, "page size"),
            (12, 4, "flags"),
            (16, 8, "root"),
            (24, 8, "root sequence"),
            (32, 8, "freelist"),
            (40, 8, "high-water mark"),
            (48, 8, "txid"),
        ] {
            push(body + offset, width, format!("meta {m} {name}"), Some(m));
        }
        push(body + 56, 8, format!("meta {m} checksum"), None);
    }
    let hwm = high_water(image, page_size);
    let mut pgid = 2u64;
    while pgid < hwm {
        let base = pgid as usize * page_size;
        let (Some(flags), Some(count), Some(overflow)) = (
            u16_at(image, base + 8),
            u16_at(image, base + 10),
            u32_at(image, base + 12),
        ) else {
            break;
        };
        let page = format!("page {pgid}");
        header_fields(&mut push, base, &page);
        let elements = (count as usize).min((page_size - 16) / 16);
        match flags {
            0x01 => {
                for i in 0..elements {
                    let e = base + 16 + i * 16;
                    push(e, 4, format!("{page} branch {i} pos"), None);
                    push(e + 4, 4, format!("{page} branch {i} ksize"), None);
                    push(e + 8, 8, format!("{page} branch {i} pgid"), None);
                }
            }
            0x02 => leaf_fields(image, &mut push, base, elements, &page),
            0x10 => {
                let mut ids = base + 16;
                if count == 0xFFFF {
                    push(ids, 8, format!("{page} freelist count"), None);
                    ids += 8;
                }
                for i in 0..(count as usize).min(16) {
                    push(ids + i * 8, 8, format!("{page} free id {i}"), None);
                }
            }
            _ => {}
        }
        pgid += 1 + overflow;
    }
    out
}

fn header_fields(
    push: &mut impl FnMut(usize, usize, String, Option<usize>),
    base: usize,
    page: &str,
) {
    push(base, 8, format!("{page} header id"), None);
    push(base + 8, 2, format!("{page} header flags"), None);
    push(base + 10, 2, format!("{page} header count"), None);
    push(base + 12, 4, format!("{page} header overflow"), None);
}

fn leaf_fields(
    image: &[u8],
    push: &mut impl FnMut(usize, usize, String, Option<usize>),
    base: usize,
    elements: usize,
    page: &str,
) {
    for i in 0..elements {
        let e = base + 16 + i * 16;
        push(e, 4, format!("{page} leaf {i} flags"), None);
        push(e + 4, 4, format!("{page} leaf {i} pos"), None);
        push(e + 8, 4, format!("{page} leaf {i} ksize"), None);
        push(e + 12, 4, format!("{page} leaf {i} vsize"), None);
        let (Some(flags), Some(pos), Some(ksize)) =
            (u32_at(image, e), u32_at(image, e + 4), u32_at(image, e + 8))
        else {
            continue;
        };
        if flags & u64::from(LEAF_FLAG_BUCKET) == 0 {
            continue;
        }
        let value = e + (pos + ksize) as usize;
        push(value, 8, format!("{page} leaf {i} bucket root"), None);
        push(
            value + 8,
            8,
            format!("{page} leaf {i} bucket sequence"),
            None,
        );
        if u64_at(image, value) == Some(0) {
            // An inline bucket: a leaf page inside the value.
            let inline = value + 16;
            let inline_page = format!("{page} leaf {i} inline page");
            header_fields(push, inline, &inline_page);
            let count = u16_at(image, inline + 10).unwrap_or(0) as usize;
            for j in 0..count.min(8) {
                let e = inline + 16 + j * 16;
                push(e, 4, format!("{inline_page} leaf {j} flags"), None);
                push(e + 4, 4, format!("{inline_page} leaf {j} pos"), None);
                push(e + 8, 4, format!("{inline_page} leaf {j} ksize"), None);
                push(e + 12, 4, format!("{inline_page} leaf {j} vsize"), None);
            }
        }
    }
}

/// The values a field of `width` bytes is set to: 0, 1, the high-water mark and its
/// neighbours, the largest value, its own neighbours and the page size.
fn field_values(original: u64, width: usize, hwm: u64, page_size: usize) -> Vec<u64> {
    let mask = if width == 8 {
        u64::MAX
    } else {
        (1u64 << (8 * width)) - 1
    };
    let mut values: Vec<u64> = [
        0,
        1,
        hwm.wrapping_sub(1),
        hwm,
        hwm + 1,
        u64::MAX,
        original.wrapping_add(1),
        original.wrapping_sub(1),
        page_size as u64,
    ]
    .iter()
    .map(|v| v & mask)
    .filter(|&v| v != original)
    .collect();
    values.sort_unstable();
    values.dedup();
    values
}

// ---------------------------------------------------------------------------------------------
// Files that are no database, and crafted ones

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
    // A meta's magic in front of nothing, and a meta claiming each page size.
    for page_size in [512u32, 4096, 1 << 24, 3000, 0] {
        let mut image = vec![0u8; 4096];
        let meta = Meta {
            magic: MAGIC,
            version: VERSION,
            page_size,
            flags: 0,
            root: BucketHeader {
                root: 3,
                sequence: 0,
            },
            freelist: 2,
            pgid: 4,
            txid: 0,
            checksum: 0,
        };
        write_meta(&mut image, &meta);
        files.push((format!("a lone meta with page size {page_size}"), image));
    }
    files
}

/// A file of `n_pages` pages of `page_size` bytes with both metas pointing at root `root`, an
/// empty freelist at page 2, and pages from 3 on written by `fill`.
fn crafted(page_size: usize, n_pages: u64, root: u64, fill: impl FnOnce(&mut [u8])) -> Vec<u8> {
    let mut image = vec![0u8; n_pages as usize * page_size];
    for txid in 0..2u64 {
        let meta = Meta {
            magic: MAGIC,
            version: VERSION,
            page_size: page_size as u32,
            flags: 0,
            root: BucketHeader { root, sequence: 0 },
            freelist: 2,
            pgid: n_pages,
            txid,
            checksum: 0,
        };
        let start = txid as usize * page_size;
        write_meta(&mut image[start..start + page_size], &meta);
    }
    write_freelist(
        &mut image[2 * page_size..3 * page_size],
        Pgid(2),
        0,
        std::iter::empty(),
    );
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
        crafted(ps, 4, 3, |image| {
            let mut b = BranchBuilder::new(page_mut(image, ps, 3), Pgid(3), 1, 0);
            b.push(b"a", Pgid(3));
            b.finish();
        }),
    ));
    files.push((
        "two branch pages pointing at each other".to_string(),
        crafted(ps, 5, 3, |image| {
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
            crafted(ps, 4 + depth, 3, |image| {
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
        crafted(ps, 4 + chain, 3, |image| {
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
        crafted(ps, 4 + overflow, 3, |image| {
            let start = 3 * ps;
            let end = start + (overflow as usize + 1) * ps;
            let mut l = LeafBuilder::new(&mut image[start..end], Pgid(3), 1, overflow as u32);
            l.push(LEAF_FLAG_BUCKET, b"b", &value);
            l.finish();
        }),
    ));
    files
}

/// `buckets` nested buckets, each a chain of `depth` one-child branch pages over a leaf that
/// holds the next bucket.
fn deep_chain(ps: usize, buckets: u64, depth: u64, with_freelist: bool) -> Vec<u8> {
    let per_bucket = depth + 1;
    let mut image = crafted(ps, 3 + buckets * per_bucket + 1, 3, |image| {
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

// ---------------------------------------------------------------------------------------------
// The suite

/// How big a hostile-file run is.
#[derive(Clone, Debug)]
pub struct HostileConfig {
    /// Random multi-byte mutations.
    pub random_cases: u64,
    /// Worker threads (each drives one child process at a time).
    pub threads: usize,
    /// The longest one case may take.
    pub case_limit: Duration,
    /// Run the shapes with 4 KiB pages too.
    pub with_4k: bool,
    /// The seed of the random mutations.
    pub seed: u64,
    /// `rbolt-crash-child`: cases run in child processes, a batch each, so that a case that
    /// overflows the stack or aborts kills only its child; the batch is then split until the
    /// case is found. Without it cases run in this process.
    pub child: Option<PathBuf>,
    /// Cases per child process.
    pub batch: usize,
}

/// What a hostile-file run found, per class of case and in all.
#[derive(Clone, Debug, Default)]
pub struct HostileReport {
    /// Shapes mutated.
    pub shapes: u64,
    /// Cases per class.
    pub classes: Vec<(&'static str, u64)>,
    /// All cases.
    pub tally: Tally,
}

impl HostileReport {
    /// The suite's summary line.
    pub fn summary(&self) -> Summary {
        let t = &self.tally;
        let mut summary = Summary::new("hostile").field("shapes", self.shapes);
        for (class, n) in &self.classes {
            summary = summary.field(class, n);
        }
        summary
            .field("cases", t.cases)
            .field("opened", t.opened)
            .field("open_errors", t.open_errors)
            .field("check_reported", t.check_reported)
            .field("scan_errors", t.scan_errors)
            .field("nesting_stops", t.nesting_stops)
            .field("panics", t.panics)
            .field("hangs", t.hangs)
            .field("crashes", t.crashes)
            .field("overruns", t.overruns)
            .field("oversize_maps", t.oversize_maps)
            .field("oversize_allocs", t.oversize_allocs)
            .field("wrong_content", t.wrong_content)
    }
}

/// A case before its image is made.
#[derive(Clone, Debug)]
enum Spec {
    Flip {
        shape: usize,
        byte: usize,
        bit: u8,
    },
    Truncate {
        shape: usize,
        len: usize,
    },
    Field {
        shape: usize,
        field: usize,
        value: u64,
    },
    Cycle {
        shape: usize,
        index: usize,
    },
    NotDatabase(usize),
    Crafted(usize),
    Random {
        shape: usize,
        seed: u64,
    },
}

/// Everything the cases are made from.
struct Material {
    shapes: Vec<Shape>,
    fields: Vec<Vec<Field>>,
    cycles: Vec<Vec<(String, Vec<u8>)>>,
    not_databases: Vec<(String, Vec<u8>)>,
    crafted: Vec<(String, Vec<u8>)>,
}

impl Material {
    fn make(&self, spec: &Spec) -> (String, Vec<u8>, Expect) {
        match *spec {
            Spec::Flip { shape, byte, bit } => {
                let s = &self.shapes[shape];
                let mut image = s.image.clone();
                image[byte] ^= 1 << bit;
                let page = byte / s.page_size;
                let expect = if page < 2 {
                    Expect::Clean(s.states.clone())
                } else {
                    Expect::Content(Arc::new(s.states[..1].to_vec()))
                };
                (
                    format!("{}: bit {bit} of byte {byte} (page {page}) flipped", s.name),
                    image,
                    expect,
                )
            }
            Spec::Truncate { shape, len } => {
                let s = &self.shapes[shape];
                let mut states = s.states.to_vec();
                if len < rbolt_page::META_PAGE_LEN {
                    // An empty file is a new database to a read-write open; so is a file cut to
                    // less than a meta page whose bytes are what creation writes there (the
                    // start of every meta page is a new file's): it holds nothing, and is what
                    // a creation cut short leaves.
                    states.push(Tree::default());
                }
                (
                    format!("{}: truncated to {len} of {} bytes", s.name, s.image.len()),
                    s.image[..len].to_vec(),
                    Expect::Clean(Arc::new(states)),
                )
            }
            Spec::Field {
                shape,
                field,
                value,
            } => {
                let s = &self.shapes[shape];
                let f = &self.fields[shape][field];
                let mut image = s.image.clone();
                write_field(&mut image, f.offset, f.width, value);
                if let Some(m) = f.meta {
                    fix_meta_checksum(&mut image, s.page_size, m);
                }
                (
                    format!("{}: {} set to {value:#x}", s.name, f.what),
                    image,
                    Expect::Any,
                )
            }
            Spec::Cycle { shape, index } => {
                let (what, image) = &self.cycles[shape][index];
                (what.clone(), image.clone(), Expect::Any)
            }
            Spec::NotDatabase(index) => {
                let (what, image) = &self.not_databases[index];
                (what.clone(), image.clone(), Expect::Any)
            }
            Spec::Crafted(index) => {
                let (what, image) = &self.crafted[index];
                (what.clone(), image.clone(), Expect::Any)
            }
            Spec::Random { shape, seed } => {
                let s = &self.shapes[shape];
                let mut rng = Rng::new(seed);
                let (what, image) = random_mutation(&s.image, s.page_size, &mut rng);
                (
                    format!("{}: random mutation {seed:#x} ({what})", s.name),
                    image,
                    Expect::Any,
                )
            }
        }
    }
}

/// Every case of a run, in a fixed order: a child process given the same parameters makes
/// the same list and runs a range of it.
struct Plan {
    material: Arc<Material>,
    specs: Vec<Spec>,
    classes: Vec<(&'static str, u64)>,
}

fn plan(seed: u64, random_cases: u64, with_4k: bool) -> Plan {
    let shapes = shapes(with_4k);
    let material = Material {
        fields: shapes
            .iter()
            .map(|s| fields(&s.image, s.page_size))
            .collect(),
        cycles: shapes.iter().map(cycles).collect(),
        not_databases: not_databases(seed),
        crafted: crafted_files(),
        shapes,
    };
    let mut classes: Vec<(&'static str, Vec<Spec>)> = vec![
        ("flips", Vec::new()),
        ("truncations", Vec::new()),
        ("fields", Vec::new()),
        ("cycles", Vec::new()),
        ("not_databases", Vec::new()),
        ("crafted", Vec::new()),
        ("random", Vec::new()),
    ];
    for (shape, s) in material.shapes.iter().enumerate() {
        let mut pages = vec![0, 1];
        let newest = (0..2)
            .max_by_key(|&m| u64_at(&s.image, m * s.page_size + 16 + 48).unwrap_or(0))
            .unwrap_or(0);
        let freelist = u64_at(&s.image, newest * s.page_size + 16 + 32).unwrap_or(u64::MAX);
        if freelist != PGID_NO_FREELIST.0 {
            pages.push(freelist as usize);
        }
        for page in pages {
            for byte in page * s.page_size..(page + 1) * s.page_size {
                for bit in 0..8 {
                    classes[0].1.push(Spec::Flip { shape, byte, bit });
                }
            }
        }
        let n_pages = s.image.len() / s.page_size;
        let mut lens: Vec<usize> = (0..=n_pages)
            .flat_map(|p| {
                let at = p * s.page_size;
                [at.saturating_sub(1), at, at + 1]
            })
            .filter(|&len| len < s.image.len())
            .collect();
        lens.dedup();
        for len in lens {
            classes[1].1.push(Spec::Truncate { shape, len });
        }
        let hwm = high_water(&s.image, s.page_size);
        for (index, f) in material.fields[shape].iter().enumerate() {
            let original = read_field(&s.image, f.offset, f.width).unwrap_or(0);
            for value in field_values(original, f.width, hwm, s.page_size) {
                classes[2].1.push(Spec::Field {
                    shape,
                    field: index,
                    value,
                });
            }
        }
        for index in 0..material.cycles[shape].len() {
            classes[3].1.push(Spec::Cycle { shape, index });
        }
    }
    for index in 0..material.not_databases.len() {
        classes[4].1.push(Spec::NotDatabase(index));
    }
    for index in 0..material.crafted.len() {
        classes[5].1.push(Spec::Crafted(index));
    }
    let mut rng = Rng::derive(seed, 0x4A2D);
    for _ in 0..random_cases {
        let shape = rng.index(material.shapes.len());
        classes[6].1.push(Spec::Random {
            shape,
            seed: rng.next_u64(),
        });
    }
    Plan {
        material: Arc::new(material),
        classes: classes
            .iter()
            .map(|(name, specs)| (*name, specs.len() as u64))
            .collect(),
        specs: classes.into_iter().flat_map(|(_, specs)| specs).collect(),
    }
}

/// Runs cases `range` of `plan` in this process, each with the watchdog.
fn run_range(plan: &Plan, range: std::ops::Range<usize>, limit: Duration) -> Tally {
    let mut runner = Runner::new(limit);
    let mut tally = Tally::default();
    for spec in &plan.specs[range] {
        let (what, image, expect) = plan.material.make(spec);
        let what_job = what.clone();
        match runner.run(Box::new(move || evaluate(&image, &expect, &what_job))) {
            Some(one) => tally.merge(one),
            None => {
                tally.cases += 1;
                tally.hangs += 1;
                tally.fail(&what, format!("did not finish within {limit:?}"));
            }
        }
    }
    tally
}

/// Runs the hostile-file suite.
pub fn run(config: &HostileConfig) -> HostileReport {
    let plan = plan(config.seed, config.random_cases, config.with_4k);
    let n = plan.specs.len();
    let batch = config.batch.max(1);
    let next = AtomicU64::new(0);
    let total = Mutex::new(Tally::default());
    std::thread::scope(|scope| {
        for _ in 0..config.threads.max(1) {
            scope.spawn(|| {
                loop {
                    let start = next.fetch_add(batch as u64, Ordering::Relaxed) as usize;
                    if start >= n {
                        break;
                    }
                    let range = start..(start + batch).min(n);
                    let tally = match &config.child {
                        Some(child) => run_in_child(child, config, &plan, range),
                        None => run_range(&plan, range, config.case_limit),
                    };
                    total
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .merge(tally);
                }
            });
        }
    });
    HostileReport {
        shapes: plan.material.shapes.len() as u64,
        classes: plan.classes,
        tally: total
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    }
}

/// Runs cases `range` in child processes. A child reports each case as it starts and ends;
/// when one dies, the case it had started is the culprit, and a new child goes on after it.
fn run_in_child(
    child: &Path,
    config: &HostileConfig,
    plan: &Plan,
    range: std::ops::Range<usize>,
) -> Tally {
    let mut tally = Tally::default();
    let mut start = range.start;
    while start < range.end {
        // Generous: a hung case is reported by the child's own watchdog after `case_limit`.
        let limit = 3 * config.case_limit + Duration::from_millis(50) * (range.end - start) as u32;
        let run = match spawn_batch(child, config, start..range.end, limit) {
            Ok(run) => run,
            Err(error) => {
                tally.failures.push(error);
                return tally;
            }
        };
        tally.merge(run.tally);
        match run.died {
            None => match run.last_finished {
                Some(last) if last + 1 < range.end => start = last + 1,
                Some(_) => break,
                None => {
                    tally.failures.push(format!(
                        "a hostile-batch child ran none of cases {start}..{}",
                        range.end
                    ));
                    break;
                }
            },
            Some(died) => {
                // The case the child had started and not finished killed it.
                let culprit = run.last_started.unwrap_or(start);
                let (what, _, _) = plan.material.make(&plan.specs[culprit]);
                let what = format!("#{culprit} {what}");
                tally.cases += 1;
                tally.crashes += 1;
                tally.fail(&what, died);
                start = culprit + 1;
            }
        }
    }
    tally
}

/// What one child process reported.
struct ChildBatch {
    /// The cases it finished.
    tally: Tally,
    /// The last case it finished.
    last_finished: Option<usize>,
    /// The case it started last and did not finish, if it died.
    last_started: Option<usize>,
    /// How it died, if it did.
    died: Option<String>,
}

fn spawn_batch(
    child: &Path,
    config: &HostileConfig,
    range: std::ops::Range<usize>,
    limit: Duration,
) -> Result<ChildBatch, String> {
    let mut process = std::process::Command::new(child)
        .arg("hostile-batch")
        .args([
            config.seed.to_string(),
            config.random_cases.to_string(),
            u8::from(config.with_4k).to_string(),
            config.case_limit.as_millis().to_string(),
            range.start.to_string(),
            range.end.to_string(),
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn {}: {e}", child.display()))?;
    let mut stdout = process.stdout.take().expect("piped");
    let mut stderr = process.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut text);
        text
    });
    // Keep only the end of stderr: panics print backtraces.
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with(' ') && !l.is_empty())
            .collect();
        lines[lines.len().saturating_sub(2)..].join(" | ")
    });
    let started = Instant::now();
    let status = loop {
        match process.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() < limit => {
                std::thread::sleep(Duration::from_millis(5));
            }
            _ => {
                let _ = process.kill();
                let _ = process.wait();
                break None;
            }
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    let mut batch = ChildBatch {
        tally: Tally::default(),
        last_finished: None,
        last_started: None,
        died: None,
    };
    for line in stdout.lines() {
        if let Some(index) = line.strip_prefix("start ") {
            batch.last_started = index.parse().ok();
        } else if line.starts_with("tally ") {
            if let Some(one) = Tally::from_lines(line) {
                batch.tally.merge(one);
            }
            batch.last_finished = batch.last_started;
        } else if let Some(failure) = line.strip_prefix("failure ") {
            batch.tally.failures.push(failure);
        }
    }
    if batch.last_finished == batch.last_started {
        batch.last_started = None;
    }
    match status {
        Some(status) if status.success() => {}
        Some(status) => batch.died = Some(format!("the child process died ({status}): {stderr}")),
        None => batch.died = Some(format!("the child process took more than {limit:?}")),
    }
    if batch.died.is_some() && batch.last_started.is_none() {
        return Err(format!(
            "a hostile-batch child died outside any case: {}",
            batch.died.unwrap_or_default()
        ));
    }
    Ok(batch)
}

/// The child's side: `hostile-batch SEED RANDOM WITH_4K LIMIT_MS START END`: runs those cases
/// of the plan and prints their tally.
pub fn batch_main(args: &[String]) -> Result<(), String> {
    let [seed, random, with_4k, limit_ms, start, end] = args else {
        return Err("usage: hostile-batch SEED RANDOM WITH_4K LIMIT_MS START END".into());
    };
    let parse = |s: &String| s.parse::<u64>().map_err(|_| format!("bad number {s}"));
    let plan = plan(parse(seed)?, parse(random)?, parse(with_4k)? != 0);
    let range = parse(start)? as usize..(parse(end)? as usize).min(plan.specs.len());
    let limit = Duration::from_millis(parse(limit_ms)?);
    // Panic messages reach the parent through the tally; backtraces would only slow the
    // cases down.
    std::panic::set_hook(Box::new(|_| {}));
    let mut runner = Runner::new(limit);
    let mut out = std::io::stdout().lock();
    for index in range {
        // Said before the case runs, so that if it kills this process the parent knows it.
        writeln!(out, "start {index}").map_err(|e| e.to_string())?;
        out.flush().map_err(|e| e.to_string())?;
        let (what, image, expect) = plan.material.make(&plan.specs[index]);
        let what = format!("#{index} {what}");
        let what_job = what.clone();
        match runner.run(Box::new(move || evaluate(&image, &expect, &what_job))) {
            Some(tally) => writeln!(out, "{}", tally.to_lines()).map_err(|e| e.to_string())?,
            None => {
                let mut hang = Tally {
                    cases: 1,
                    hangs: 1,
                    ..Tally::default()
                };
                hang.fail(&what, format!("did not finish within {limit:?}"));
                writeln!(out, "{}", hang.to_lines()).map_err(|e| e.to_string())?;
                // The hung case's thread cannot be stopped and would slow every later case
                // down: end here, and the parent starts a new child after this case.
                break;
            }
        }
    }
    out.flush().map_err(|e| e.to_string())?;
    Ok(())
}

/// The child's side: `hostile-replay SEED RANDOM WITH_4K INDEX [FILE]`: runs case `INDEX`
/// step by step, saying each step on stderr before it runs (so a crash names its step), and
/// writes the case's file to `FILE` if given. For whoever fixes what a case found.
pub fn replay_main(args: &[String]) -> Result<(), String> {
    // On a thread with the stack the suite's workers have.
    let args = args.to_vec();
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || replay(&args))
        .map_err(|e| e.to_string())?
        .join()
        .map_err(|_| "the replay panicked".to_string())?
}

fn replay(args: &[String]) -> Result<(), String> {
    let (seed, random, with_4k, index, file) = match args {
        [a, b, c, d] => (a, b, c, d, None),
        [a, b, c, d, e] => (a, b, c, d, Some(e)),
        _ => return Err("usage: hostile-replay SEED RANDOM WITH_4K INDEX [FILE]".into()),
    };
    let parse = |s: &String| s.parse::<u64>().map_err(|_| format!("bad number {s}"));
    let plan = plan(parse(seed)?, parse(random)?, parse(with_4k)? != 0);
    let spec = plan
        .specs
        .get(parse(index)? as usize)
        .ok_or("no such case")?;
    let (what, image, _) = plan.material.make(spec);
    eprintln!("case: {what}");
    if let Some(file) = file {
        std::fs::write(file, &image).map_err(|e| format!("write {file}: {e}"))?;
    }
    let step = |name: &str| {
        eprintln!("step: {name}");
    };
    for read_only in [true, false] {
        step(if read_only {
            "open read-only"
        } else {
            "open read-write"
        });
        let sim = SimFile::from_image(image.clone()).map_err(|e| e.to_string())?;
        let db = match Db::open_storage(Arc::new(sim), Options::default().read_only(read_only)) {
            Ok(db) => db,
            Err(error) => {
                eprintln!("  open error: {error}");
                continue;
            }
        };
        step("check");
        let checked = db.view(|tx| Ok(tx.check()));
        eprintln!("  {checked:?}");
        step("scan (iterate, both directions, nested buckets, lookups)");
        let tx = db.begin_read().map_err(|e| e.to_string())?;
        let scanned = crate::scan::scan_buckets(tx.root(), entries_max(image.len() as u64));
        eprintln!("  {:?}", scanned.map(|s| s.entries));
        step("stats");
        eprintln!("  {:?}", tx.root().stats().map(|s| (s.bucket_n, s.key_n)));
    }
    Ok(())
}

/// The child's side: `hostile-walk FILE WHAT`: on a thread with a 2 MiB stack, opens the file
/// read-write (`open-read-write`), or read-only and then checks it (`check`), computes the
/// root's page statistics (`stats`) or iterates every top-level entry both ways (`iterate`). Prints `ok` and exits 0 when the call ends (in `Ok` or an error); fails
/// when iteration yields more entries than the file can hold.
pub fn walk_main(args: &[String]) -> Result<(), String> {
    let [path, what] = args else {
        return Err("usage: hostile-walk FILE open-read-write|check|stats|iterate".into());
    };
    let image = std::fs::read(path).map_err(|e| format!("read {path}: {e}"))?;
    let what = what.clone();
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || walk(image, &what))
        .map_err(|e| e.to_string())?
        .join()
        .map_err(|_| "panicked".to_string())?
}

fn walk(image: Vec<u8>, what: &str) -> Result<(), String> {
    let cap = entries_max(image.len() as u64);
    let sim = SimFile::from_image(image).map_err(|e| e.to_string())?;
    let read_only = what != "open-read-write";
    let db = match Db::open_storage(Arc::new(sim), Options::default().read_only(read_only)) {
        Ok(db) => db,
        // An error is a fine end for a corrupt file.
        Err(error) => {
            println!("ok: open: {error}");
            return Ok(());
        }
    };
    let tx = db.begin_read().map_err(|e| e.to_string())?;
    match what {
        "open-read-write" => println!("ok"),
        "check" => println!("ok {}", tx.check().len()),
        "stats" => {
            let stats = tx.root().stats();
            println!("ok {:?}", stats.map(|s| s.bucket_n));
        }
        "iterate" => {
            for (direction, entries) in [
                (
                    "forwards",
                    Box::new(tx.root().iter()) as Box<dyn Iterator<Item = _>>,
                ),
                ("backwards", Box::new(tx.root().iter().rev())),
            ] {
                let mut n = 0u64;
                for entry in entries {
                    n += 1;
                    if entry.is_err() {
                        break;
                    }
                    if n > cap {
                        return Err(format!(
                            "iterating {direction} yielded more than {cap} entries from a file of that size"
                        ));
                    }
                }
            }
            println!("ok");
        }
        other => return Err(format!("unknown walk {other}")),
    }
    Ok(())
}
