//! The database handle: open, recovery, the published snapshot, and the writer lock.

use crate::error::{Error, Result};
use crate::options::{Options, PAGE_SIZE_DEFAULT};
use crate::readers::Readers;
use crate::stats::{DbStats, StatCounters};
use crate::storage::{FileOptions, FileStorage, Mapping, OpenError, Storage};
use crate::tx::{ReadTx, WriteTx};
use rbolt_btree::{Arena, Pages};
use rbolt_freelist::{AnyFreelist, Freelist};
use rbolt_page::{
    BucketHeader, FreelistPage, LeafBuilder, MAGIC, META_SIZE, Meta, PAGE_HEADER_SIZE,
    PAGE_SIZE_MAX, PAGE_SIZE_MIN, PGID_NO_FREELIST, Pgid, Txid, VERSION, read_meta, write_freelist,
    write_meta,
};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// The largest txid a meta may carry: the next commit, and readers' slot values, must not
/// overflow.
const TXID_MAX: u64 = u64::MAX - 2;
/// The smallest mapping (bbolt's: 32 KiB); mappings double from here up to 1 GiB.
const MAP_SIZE_MIN: u64 = 32 * 1024;
/// Past 1 GiB, mappings grow in steps of this many bytes.
const MAP_STEP_MAX: u64 = 1 << 30;

/// What readers see: the newest committed meta and a mapping that covers it.
#[derive(Clone, Debug)]
pub(crate) struct Snapshot {
    pub(crate) meta: Meta,
    pub(crate) map: Arc<Mapping>,
}

/// What only the writer touches, behind the writer lock.
#[derive(Debug)]
pub(crate) struct Writer {
    /// `None` until loaded (a read-only handle loads it only when asked).
    pub(crate) freelist: Option<AnyFreelist>,
    pub(crate) pool: Vec<Box<[u8]>>,
    pub(crate) arena: Arena,
    pub(crate) file_len: u64,
    pub(crate) readers_scratch: Vec<Txid>,
    /// The `verify` feature's state (nothing without it).
    pub(crate) verify: crate::verify::Verify,
}

/// An open database.
///
/// One writer at a time ([`Db::begin_write`], [`Db::update`], [`Db::batch`]) and any number of
/// readers ([`Db::begin_read`], [`Db::view`]) on any threads. Readers never wait for the
/// writer and the writer never waits for readers; growing the file never waits either: each
/// transaction keeps the mapping it started with alive.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = rbolt::Db::open(dir.path().join("my.db"))?;
/// db.update(|tx| tx.create_bucket(b"widgets")?.put(b"foo", b"bar"))?;
/// let value = db.view(|tx| {
///     let widgets = tx.bucket(b"widgets")?.expect("created above");
///     Ok(widgets.get(b"foo")?.map(<[u8]>::to_vec))
/// })?;
/// assert_eq!(value.as_deref(), Some(&b"bar"[..]));
/// db.close()?;
/// # Ok::<(), rbolt::Error>(())
/// ```
///
/// # Safety of the mapping
/// The file is memory-mapped. `Db::open` locks it (exclusively, or shared when read-only) so
/// that cooperating processes — rbolt, bbolt, anything that takes the same `flock` — cannot
/// change it while it is mapped. A process that ignores the lock and truncates or rewrites the
/// file can still make this process read changed bytes or crash with `SIGBUS`; no
/// memory-mapped store can prevent that.
#[derive(Debug)]
pub struct Db {
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) options: Options,
    pub(crate) page_size: usize,
    pub(crate) current: RwLock<Snapshot>,
    pub(crate) writer: Mutex<Writer>,
    pub(crate) readers: Readers,
    pub(crate) poisoned: AtomicBool,
    pub(crate) counters: StatCounters,
    pub(crate) batcher: crate::batch::Batcher,
}

impl Db {
    /// Opens the database file at `path` with default options, creating it if missing.
    pub fn open(path: impl AsRef<Path>) -> Result<Db> {
        Db::open_with(path, Options::default())
    }

    /// Opens the database file at `path` with `options`: creates it if missing (unless
    /// read-only), locks it, reads and checks its metas, maps it.
    pub fn open_with(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        let path = path.as_ref();
        let file_options = FileOptions::new()
            .read_only(options.read_only)
            .create(!options.read_only)
            .lock_timeout(options.lock_timeout);
        let storage = FileStorage::open(path, file_options).map_err(|error| match error {
            OpenError::LockTimeout { path, .. } => Error::Timeout { path: Some(path) },
            OpenError::Open { path, source } | OpenError::Lock { path, source } => Error::Io {
                path: Some(path),
                source,
            },
        })?;
        Db::open_storage(Arc::new(storage), options)
    }

    /// Opens a database on any [`Storage`]: a real file, or a simulated one in tests.
    pub fn open_storage(storage: Arc<dyn Storage>, options: Options) -> Result<Db> {
        let path = storage.path().map(Path::to_path_buf);
        let io = |e| Error::io(path.as_deref(), e);
        let mut file_len = storage.len().map_err(io)?;
        if file_len == 0 {
            if options.read_only {
                return Err(Error::Invalid {
                    path,
                    reason: "the file is empty, and a read-only open cannot initialise it".into(),
                });
            }
            let page_size = if options.page_size == 0 {
                PAGE_SIZE_DEFAULT
            } else {
                options.page_size
            };
            if !page_size.is_power_of_two()
                || !(PAGE_SIZE_MIN as usize..=PAGE_SIZE_MAX as usize).contains(&page_size)
            {
                return Err(Error::Invalid {
                    path,
                    reason: format!(
                        "page size {page_size} is not a power of two from 512 bytes to 16 MiB"
                    ),
                });
            }
            init(storage.as_ref(), page_size).map_err(io)?;
            file_len = storage.len().map_err(io)?;
        }
        let (page_size, meta) = read_metas(storage.as_ref(), path.as_deref(), file_len)?;
        let map_len = map_size(
            (meta.pgid * page_size as u64)
                .max(file_len)
                .max(options.initial_mmap_size as u64),
            page_size,
        );
        let map = Arc::new(storage.map(map_len).map_err(io)?);
        let _ = map.advise_random();
        if options.mlock {
            map.lock(file_len as usize).map_err(io)?;
        }
        let snapshot = Snapshot { meta, map };
        let freelist = if options.read_only {
            None
        } else {
            Some(load_freelist(&snapshot, page_size, &options)?)
        };
        let counters = StatCounters::default();
        if let Some(freelist) = &freelist {
            counters.freelist_changed(freelist);
        }
        let db = Db {
            storage,
            page_size,
            current: RwLock::new(snapshot),
            writer: Mutex::new(Writer {
                freelist,
                pool: Vec::new(),
                arena: Arena::new(),
                file_len,
                readers_scratch: Vec::new(),
                verify: Default::default(),
            }),
            readers: Readers::new(),
            poisoned: AtomicBool::new(false),
            counters,
            batcher: crate::batch::Batcher::default(),
            options,
        };
        // A file written without a freelist, opened by a writer that keeps one: write it now,
        // so tools that cannot rebuild it (older bbolt) can open the file (as bbolt does).
        if !db.options.read_only && !db.options.no_freelist_sync && !meta.has_freelist() {
            let mut tx = db.begin_write()?;
            tx.force = true;
            tx.commit()?;
        }
        Ok(db)
    }

    /// The file's path, if it has one.
    pub fn path(&self) -> Option<&Path> {
        self.storage.path()
    }

    /// The page size of the file.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// Whether the database was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.options.read_only
    }

    /// The options it was opened with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    pub(crate) fn check_poisoned(&self) -> Result<()> {
        if self.poisoned.load(Ordering::Acquire) {
            return Err(Error::Poisoned);
        }
        Ok(())
    }

    pub(crate) fn poison(&self) {
        self.poisoned.store(true, Ordering::Release);
    }

    /// The committed snapshot readers start from.
    pub(crate) fn snapshot(&self) -> Snapshot {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Starts a read transaction on the newest committed state. It never waits for a writer.
    pub fn begin_read(&self) -> Result<ReadTx<'_>> {
        self.check_poisoned()?;
        let (snapshot, slot) = {
            let current = self
                .current
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            // Registering under the lock means a writer that publishes after us finds us.
            let slot = self.readers.enter(current.meta.txid());
            (current.clone(), slot)
        };
        self.counters.tx_begun();
        Ok(ReadTx::new(self, snapshot, slot))
    }

    /// Starts the write transaction, waiting for the one under way (if any) to end. Calling it
    /// again on a thread that already holds a write transaction deadlocks.
    pub fn begin_write(&self) -> Result<WriteTx<'_>> {
        if self.options.read_only {
            return Err(Error::DatabaseReadOnly);
        }
        self.check_poisoned()?;
        let mut writer = self
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.check_poisoned()?;
        let snapshot = self.snapshot();
        let mut readers = std::mem::take(&mut writer.readers_scratch);
        readers.clear();
        self.readers.collect(&mut readers);
        if let Some(freelist) = writer.freelist.as_mut() {
            freelist.release_pending(&readers);
            self.counters.freelist_changed(freelist);
        }
        writer.readers_scratch = readers;
        Ok(WriteTx::new(self, writer, snapshot))
    }

    /// Runs `f` in a read transaction.
    pub fn view<T>(&self, f: impl FnOnce(&ReadTx<'_>) -> Result<T>) -> Result<T> {
        let tx = self.begin_read()?;
        f(&tx)
    }

    /// Runs `f` in a write transaction and commits it if `f` returns `Ok`; rolls back
    /// otherwise and returns `f`'s error.
    pub fn update<T>(&self, f: impl FnOnce(&mut WriteTx<'_>) -> Result<T>) -> Result<T> {
        let mut tx = self.begin_write()?;
        let value = f(&mut tx)?;
        tx.commit()?;
        Ok(value)
    }

    /// Runs `f` in a write transaction shared with other concurrent `batch` callers: up to
    /// `max_batch_size` calls, or what arrives within `max_batch_delay`, commit together.
    /// If the shared transaction fails, each call is run again alone, so `f` may run more
    /// than once and must only touch the database. Returns once the transaction holding
    /// `f`'s changes is committed.
    ///
    /// `f` is `'static` because it may run on another caller's thread: move what it needs
    /// into it.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| tx.create_bucket(b"events").map(|_| ()))?;
    /// std::thread::scope(|s| {
    ///     for i in 0..4u32 {
    ///         let db = &db;
    ///         s.spawn(move || {
    ///             db.batch(move |tx| {
    ///                 let mut events = tx.bucket_mut(b"events")?.expect("created above");
    ///                 events.put(&i.to_be_bytes(), b"happened")
    ///             })
    ///         });
    ///     }
    /// });
    /// assert_eq!(db.view(|tx| Ok(tx.bucket(b"events")?.unwrap().iter().count()))?, 4);
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn batch<F>(&self, f: F) -> Result<()>
    where
        F: Fn(&mut WriteTx<'_>) -> Result<()> + Send + Sync + 'static,
    {
        crate::batch::run(self, f)
    }

    /// Makes everything written durable: an fdatasync, useful with `no_sync`.
    pub fn sync(&self) -> Result<()> {
        self.storage
            .sync_data()
            .map_err(|e| Error::io(self.storage.path(), e))
    }

    /// Closes the database: releases the file lock and the mapping. Every transaction has
    /// ended (they borrow the handle). Dropping the handle does the same.
    pub fn close(self) -> Result<()> {
        drop(self);
        Ok(())
    }

    /// Counters of the database and its freelist (bbolt's `DB.Stats`).
    ///
    /// Never waits for the writer (it may be called inside a write transaction): the freelist
    /// figures are those as of the last write transaction's start or end.
    pub fn stats(&self) -> DbStats {
        self.counters.snapshot(self.page_size, self.readers.count())
    }

    /// The file's current length.
    pub fn file_len(&self) -> Result<u64> {
        self.storage
            .len()
            .map_err(|e| Error::io(self.storage.path(), e))
    }
}

/// The mapping length for `needed` bytes: powers of two from 32 KiB to 1 GiB, then 1 GiB
/// steps, a multiple of the page size.
pub(crate) fn map_size(needed: u64, page_size: usize) -> usize {
    let needed = needed.max(MAP_SIZE_MIN);
    let size = if needed <= MAP_STEP_MAX {
        needed.next_power_of_two()
    } else {
        needed.div_ceil(MAP_STEP_MAX) * MAP_STEP_MAX
    };
    let page_size = page_size as u64;
    (size.div_ceil(page_size) * page_size) as usize
}

/// Writes a new database: both metas, an empty freelist (page 2) and an empty root leaf
/// (page 3), then syncs.
fn init(storage: &dyn Storage, page_size: usize) -> std::io::Result<()> {
    let mut buf = vec![0u8; page_size * 4];
    for txid in 0..2u64 {
        let meta = Meta {
            magic: MAGIC,
            version: VERSION,
            page_size: page_size as u32,
            flags: 0,
            root: BucketHeader {
                root: 3,
                sequence: 0,
            },
            freelist: 2,
            pgid: 4,
            txid,
            checksum: 0,
        };
        let start = txid as usize * page_size;
        write_meta(&mut buf[start..start + page_size], &meta);
    }
    write_freelist(
        &mut buf[2 * page_size..3 * page_size],
        Pgid(2),
        0,
        std::iter::empty(),
    );
    LeafBuilder::new(&mut buf[3 * page_size..], Pgid(3), 0, 0).finish();
    // The freelist and root pages first, then the metas that point at them, each made
    // durable before the next: a crash can leave metas missing (a clear error at open), never
    // valid metas over pages that never reached the disk.
    storage.write_all_at(&buf[2 * page_size..], 2 * page_size as u64)?;
    storage.sync_data()?;
    storage.write_all_at(&buf[..2 * page_size], 0)?;
    storage.sync_data()
}

/// Reads both metas and returns the page size and the newest valid meta.
fn read_metas(storage: &dyn Storage, path: Option<&Path>, file_len: u64) -> Result<(usize, Meta)> {
    // A meta past the end is absent; a read that fails is an error of its own, never taken for
    // an invalid meta (falling back to the older meta would hide the newest commit).
    let read_at = |offset: u64| -> Result<Option<[u8; PAGE_HEADER_SIZE + META_SIZE]>> {
        let mut buf = [0u8; PAGE_HEADER_SIZE + META_SIZE];
        if offset + buf.len() as u64 > file_len {
            return Ok(None);
        }
        storage
            .read_exact_at(&mut buf, offset)
            .map_err(|e| Error::io(path, e))?;
        Ok(Some(buf))
    };
    let Some(first) = read_at(0)? else {
        return Err(Error::Invalid {
            path: path.map(PathBuf::from),
            reason: format!("the file is {file_len} bytes, too short for a meta page"),
        });
    };
    let meta0 = read_meta(&first, Pgid(0));
    // The page size comes from meta 0, or else from meta 1 found by probing.
    let page_size = match &meta0 {
        Ok(meta) => Some(meta.page_size as u64),
        Err(_) => {
            let mut found = None;
            for offset in (0..16).map(|i| u64::from(PAGE_SIZE_MIN) << i) {
                let meta = read_at(offset)?.and_then(|buf| read_meta(&buf, Pgid(1)).ok());
                if meta.is_some_and(|meta| u64::from(meta.page_size) == offset) {
                    found = Some(offset);
                    break;
                }
            }
            found
        }
    };
    let Some(page_size) = page_size else {
        let error = meta0.expect_err("meta 0 is invalid when no page size was found");
        if Meta::read_unchecked(&first).is_none_or(|m| m.magic != MAGIC) {
            // Not even the magic number: not a bbolt file at all, whatever else is wrong.
            return Err(Error::Invalid {
                path: path.map(PathBuf::from),
                reason: format!("not a bbolt database ({error})"),
            });
        }
        return Err(Error::from_meta(path, error));
    };
    let mut best: Option<Meta> = None;
    let mut first_error = None;
    for index in 0..2u64 {
        let checked = read_at(index * page_size)?
            .ok_or_else(|| {
                rbolt_page::Corruption::new(
                    Pgid(index),
                    rbolt_page::Reason::Truncated {
                        what: "meta page",
                        need: (index + 1) * page_size,
                        have: file_len,
                    },
                )
            })
            .and_then(|buf| read_meta(&buf, Pgid(index)))
            .and_then(|meta| meta.validate_fields(Pgid(index), file_len).map(|()| meta))
            .and_then(|meta| {
                if meta.txid >= TXID_MAX {
                    // No commit can follow it, and readers count past it.
                    Err(rbolt_page::Corruption::new(
                        Pgid(index),
                        rbolt_page::Reason::Other("txid at its largest value"),
                    ))
                } else if u64::from(meta.page_size) == page_size {
                    Ok(meta)
                } else {
                    Err(rbolt_page::Corruption::new(
                        Pgid(index),
                        rbolt_page::Reason::BadPageSize(meta.page_size),
                    ))
                }
            });
        match checked {
            Ok(meta) => {
                if best.is_none_or(|b| meta.txid > b.txid) {
                    best = Some(meta);
                }
            }
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    match best {
        Some(meta) => Ok((page_size as usize, meta)),
        None => Err(Error::from_meta(
            path,
            first_error.expect("no valid meta means an error was recorded"),
        )),
    }
}

/// Loads the freelist of `snapshot`: from its page, or by scanning for unreachable pages when
/// the file keeps none.
pub(crate) fn load_freelist(
    snapshot: &Snapshot,
    page_size: usize,
    options: &Options,
) -> Result<AnyFreelist> {
    let meta = &snapshot.meta;
    let pages = Pages::new(&snapshot.map, page_size, meta.high_water())?;
    let mut freelist = AnyFreelist::new(options.freelist);
    if meta.freelist != PGID_NO_FREELIST.0 {
        let span = pages.page(Pgid(0), meta.freelist_pgid())?;
        let page = FreelistPage::new(span, meta.freelist_pgid())?;
        freelist.read(&page, meta.high_water())?;
    } else {
        let reachable = crate::walk::reachable_pages(pages, meta)?;
        let free: Vec<Pgid> = (2..meta.pgid)
            .map(Pgid)
            .filter(|pgid| !reachable.contains(pgid.0))
            .collect();
        freelist.rebuild(&free)?;
    }
    Ok(freelist)
}
