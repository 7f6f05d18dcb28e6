//! The database handle: open, the published snapshot, the writer lock and durable points.

mod open;

use crate::engine::batch::Batcher;
use crate::engine::snapshot::{Snapshot, map_size};
use crate::engine::{Engine, Writer};
use crate::error::{Error, Result};
use crate::options::Options;
use crate::stats::{DbStats, StatCounters};
use crate::storage::{Claim, FileOptions, FileStorage, OpenError, Storage};
use crate::trace;
use crate::tx::{ReadTx, WriteTx};
pub(crate) use open::load_freelist;
use open::{init, interrupted_creation, make_durable_at_open, read_metas};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
///     Ok::<_, rbolt::Error>(widgets.get(b"foo")?.map(<[u8]>::to_vec))
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
    pub(crate) engine: Engine,
    pub(crate) batcher: Batcher,
    /// This handle's ownership of the storage, given up when the handle is dropped.
    _claim: Claim,
}

impl Db {
    /// Opens the database file at `path` with default options, creating it if missing.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("app.db");
    /// let db = rbolt::Db::open(&path)?; // created: two metas, an empty freelist and root
    /// drop(db);
    /// let db = rbolt::Db::open(&path)?; // opened again, with what was committed
    /// assert_eq!(db.path(), Some(path.as_path()));
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Db> {
        Db::open_with(path, Options::default())
    }

    /// Opens the database file at `path` with `options`: creates it if missing (unless
    /// read-only), locks it, reads and checks its metas, maps it. Options are checked before
    /// any file is touched.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use rbolt::{Db, Error, Options};
    /// // A mistyped path is refused instead of created.
    /// let missing = Db::open_with(dir.path().join("typo.db"), Options::default().create(false));
    /// assert!(missing.is_err());
    /// // Invalid options are refused before the file is touched.
    /// let bad = Db::open_with(dir.path().join("db"), Options::default().page_size(10));
    /// assert!(matches!(bad, Err(Error::InvalidOptions { .. })));
    /// assert!(!dir.path().join("db").exists());
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn open_with(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        options.validate()?;
        if !options.read_only && !path.as_ref().exists() {
            // Refused before the file is made (`open_storage` checks again at creation).
            options.check_max_size_for_new_file(options.page_size_for_new_file())?;
        }
        let storage = open_file(path.as_ref(), &options)?;
        if options.readers_beside_writer
            && storage.lock_mode() == crate::storage::LockMode::WriterWithoutReaderTable
        {
            trace::no_reader_table(path.as_ref());
        }
        Db::open_storage(Arc::new(storage), options)
    }

    /// Opens a database on any [`Storage`]: a real file, or a simulated one in tests. The
    /// storage is claimed for this handle ([`Storage::claim`]): a second open of the same
    /// storage while this handle lives fails with [`Error::StorageInUse`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use rbolt::storage::{FileOptions, FileStorage, Storage};
    /// use std::sync::Arc;
    /// let file = FileStorage::open(dir.path().join("db"), FileOptions::new()).unwrap();
    /// let storage: Arc<dyn Storage> = Arc::new(file);
    /// let db = rbolt::Db::open_storage(storage.clone(), rbolt::Options::default())?;
    /// db.update(|tx| tx.create_bucket("b").map(drop))?;
    /// // The storage is claimed while `db` lives.
    /// assert!(matches!(
    ///     rbolt::Db::open_storage(storage.clone(), rbolt::Options::default()),
    ///     Err(rbolt::Error::StorageInUse { .. })
    /// ));
    /// drop(db);
    /// let db = rbolt::Db::open_storage(storage, rbolt::Options::default())?;
    /// assert!(db.begin_read()?.bucket("b")?.is_some());
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn open_storage(storage: Arc<dyn Storage>, options: Options) -> Result<Db> {
        options.validate()?;
        let path = storage.path().map(Path::to_path_buf);
        let claim = storage
            .claim()
            .map_err(|_| Error::StorageInUse { path: path.clone() })?;
        let io = |e| Error::io(path.as_deref(), e);
        let mut file_len = storage.len().map_err(io)?;
        let boot_id = storage.boot_id();
        let mut found = read_metas(storage.as_ref(), path.as_deref(), file_len, boot_id)?;
        // Whether this open wrote the file anew (and synced it).
        let mut created = false;
        if let Some(page_size) = interrupted_creation(storage.as_ref(), file_len, &found, &options)?
        {
            if options.read_only {
                return Err(Error::Invalid {
                    path,
                    reason: if file_len == 0 {
                        "the file is empty, and a read-only open cannot initialise it".into()
                    } else {
                        "the file's creation was interrupted before its first commit; a \
                         read-write open initialises it"
                            .into()
                    },
                });
            }
            options.check_max_size_for_new_file(page_size)?;
            if file_len > 0 {
                trace::recovered_interrupted_creation(path.as_deref(), file_len);
            }
            init(storage.as_ref(), page_size).map_err(io)?;
            created = true;
            file_len = storage.len().map_err(io)?;
            found = read_metas(storage.as_ref(), path.as_deref(), file_len, boot_id)?;
        }
        // Beside a writer of another process, the metas on disk are the writer's to change:
        // the open reads the one it published (its pages are in the page cache, synced or not).
        // A newest meta past the end of the file is then the writer's growth racing this read
        // (the length was read before the metas), not a truncation: the metas give the page
        // size only. (The kill loop of reader processes found a reader refused so.)
        let beside_writer = options.read_only && storage.reader_table().is_some();
        let mut lenient = options.clone();
        lenient.fallback_on_truncation |= beside_writer;
        let (page_size, meta, durability) = found.choose(path.as_deref(), file_len, &lenient)?;
        let meta = match storage.reader_table() {
            Some(table) if beside_writer => {
                crate::engine::processes::published_meta(table, page_size)?.0
            }
            _ => meta,
        };
        if let Some(why) = found.fallback(&meta).filter(|_| !beside_writer) {
            trace::recovered_older_meta(path.as_deref(), meta.txid, why);
        }
        let map_len = map_size(
            (meta.pgid * page_size as u64)
                .max(file_len)
                .max(options.initial_mmap_size as u64),
        )
        .ok_or_else(|| Error::InvalidOptions {
            reason: "the mapping this file needs does not fit in the address space".into(),
        })?;
        let map = Arc::new(storage.map(map_len).map_err(io)?);
        let _ = map.advise_random();
        if options.mlock {
            map.lock(file_len as usize).map_err(io)?;
        }
        // A non-durable meta is opened only when the pages its commits wrote are still theirs.
        let (meta, durability, unsynced) = if beside_writer {
            (meta, durability, None)
        } else {
            open::trust_unsynced(
                path.as_deref(),
                &found,
                &map,
                page_size,
                meta,
                durability,
                &options,
            )?
        };
        let (reachable, extents) = unsynced.unzip();
        let snapshot = Snapshot { meta, map };
        let freelist = if options.read_only {
            None
        } else {
            if !meta.has_freelist() {
                trace::freelist_rebuilt(path.as_deref(), meta.txid);
            }
            Some(load_freelist(&snapshot, page_size, &options, reachable)?)
        };
        let counters = StatCounters::default();
        if let Some(freelist) = &freelist {
            counters.freelist_changed(freelist);
        }
        let writer = Writer::new(freelist, file_len, meta);
        let db = Db {
            engine: Engine::new(storage, options, page_size, snapshot, writer, counters),
            batcher: Batcher::default(),
            _claim: claim,
        };
        let engine = &db.engine;
        if !engine.options.read_only && !created {
            make_durable_at_open(engine, &meta, durability, &extents.unwrap_or_default())?;
        }
        crate::engine::processes::hold_for_older_readers(engine)?;
        crate::engine::processes::publish(engine, &engine.snapshot().meta);
        // A file written without a freelist, opened by a writer that keeps one: write it now,
        // so tools that cannot rebuild it (older bbolt) can open the file (as bbolt does). A
        // one-sync meta (which Go rejects) is followed by a meta in Go's form the same way,
        // so that Go opens the file once rbolt has.
        let go_form = durability == rbolt_page::MetaDurability::OneSync;
        let add_freelist = !engine.options.no_freelist_sync && !meta.has_freelist();
        if !engine.options.read_only && !created && (add_freelist || go_form) {
            let mut tx = engine.begin_write()?;
            tx.commit_unchanged = true;
            tx.set_durability(crate::Durability::Immediate);
            tx.commit()?;
        }
        Ok(db)
    }

    /// The file's path, if it has one.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("db");
    /// let db = rbolt::Db::open(&path)?;
    /// assert_eq!(db.path(), Some(path.as_path()));
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn path(&self) -> Option<&Path> {
        self.engine.path()
    }

    /// The page size of the file.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("db");
    /// let db = rbolt::Db::open_with(&path, rbolt::Options::default().page_size(8192))?;
    /// assert_eq!(db.page_size(), 8192);
    /// db.close()?;
    /// // An existing file keeps its page size, whatever the options say.
    /// let db = rbolt::Db::open_with(&path, rbolt::Options::default().page_size(16384))?;
    /// assert_eq!(db.page_size(), 8192);
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn page_size(&self) -> usize {
        self.engine.page_size
    }

    /// Whether the database was opened read-only.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("db");
    /// let db = rbolt::Db::open(&path)?;
    /// assert!(!db.is_read_only());
    /// db.close()?;
    /// let db = rbolt::Db::open_with(&path, rbolt::Options::default().read_only(true))?;
    /// assert!(db.is_read_only());
    /// assert!(matches!(db.begin_write(), Err(rbolt::Error::DatabaseReadOnly)));
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn is_read_only(&self) -> bool {
        self.engine.options.read_only
    }

    /// The options it was opened with.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let options = rbolt::Options::default().no_sync(true).max_batch_size(10);
    /// let db = rbolt::Db::open_with(dir.path().join("db"), options)?;
    /// assert!(db.options().no_sync);
    /// assert_eq!(db.options().max_batch_size, 10);
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn options(&self) -> &Options {
        &self.engine.options
    }

    /// Starts a read transaction on the newest committed state. It never waits for a writer.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| tx.create_bucket("b")?.put("k", "old"))?;
    /// let snapshot = db.begin_read()?;
    /// db.update(|tx| tx.bucket_mut("b")?.unwrap().put("k", "new"))?;
    /// // The reader still sees the commit it started from.
    /// assert_eq!(snapshot.bucket("b")?.unwrap().get("k")?, Some(&b"old"[..]));
    /// drop(snapshot);
    /// let now = db.begin_read()?;
    /// assert_eq!(now.bucket("b")?.unwrap().get("k")?, Some(&b"new"[..]));
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn begin_read(&self) -> Result<ReadTx<'_>> {
        self.engine.begin_read()
    }

    /// Starts the write transaction, waiting for the one under way (if any) to end. On a thread
    /// that holds the write transaction already (an `update` inside an `update`, say) it fails
    /// at once with [`Error::WriteTxOnThisThread`] instead of waiting for itself.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// let tx = db.begin_write()?;
    /// tx.create_bucket("b")?.put("k", "v")?;
    /// // A second writer on this thread would wait for itself: it is an error instead.
    /// assert!(matches!(db.begin_write(), Err(rbolt::Error::WriteTxOnThisThread)));
    /// tx.commit()?; // or drop `tx` (or call `rollback`) to discard
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn begin_write(&self) -> Result<WriteTx<'_>> {
        self.engine.begin_write()
    }

    /// Runs `f` in a read transaction and returns what it returns. What `f` returns must not
    /// borrow from the transaction: copy values out (`to_vec`) to keep them.
    ///
    /// The error type is the caller's, as for [`Db::update`]: any `E: From<rbolt::Error>`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// # db.update(|tx| tx.create_bucket("users")?.put("alice", "admin"))?;
    /// let role: Option<Vec<u8>> = db.view(|tx| {
    ///     let users = tx.bucket("users")?.expect("created");
    ///     Ok::<_, rbolt::Error>(users.get("alice")?.map(<[u8]>::to_vec))
    /// })?;
    /// assert_eq!(role.as_deref(), Some(&b"admin"[..]));
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn view<'db, T, E: From<Error>>(
        &'db self,
        f: impl FnOnce(&ReadTx<'db>) -> Result<T, E>,
    ) -> Result<T, E> {
        let tx = self.begin_read()?;
        f(&tx)
    }

    /// Runs `f` in a write transaction and commits it if `f` returns `Ok`; rolls back
    /// otherwise and returns `f`'s error.
    ///
    /// The error is the caller's own type: any `E` with `From<rbolt::Error>` (an application
    /// error enum with a `#[from] rbolt::Error` variant, `anyhow::Error`, `Box<dyn Error>`, or
    /// `rbolt::Error` itself). An `Err` of any kind rolls the transaction back; a failed commit
    /// comes back converted into `E`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// #[derive(Debug, thiserror::Error)]
    /// enum AppError {
    ///     #[error("user {0} exists already")]
    ///     Duplicate(String),
    ///     #[error(transparent)]
    ///     Db(#[from] rbolt::Error),
    /// }
    ///
    /// fn add_user(db: &rbolt::Db, name: &str, role: &str) -> Result<(), AppError> {
    ///     db.update(|tx| {
    ///         let mut users = tx.create_bucket_if_not_exists("users")?; // `?`: into AppError
    ///         if users.get(name)?.is_some() {
    ///             return Err(AppError::Duplicate(name.to_string())); // rolls back
    ///         }
    ///         users.put(name, role)?;
    ///         Ok(())
    ///     })
    /// }
    ///
    /// let db = rbolt::Db::open(dir.path().join("db"))?;
    /// add_user(&db, "alice", "admin")?;
    /// let again = add_user(&db, "alice", "guest");
    /// assert!(matches!(again, Err(AppError::Duplicate(name)) if name == "alice"));
    /// // The failed call changed nothing.
    /// let tx = db.begin_read()?;
    /// assert_eq!(tx.bucket("users")?.unwrap().get("alice")?, Some(&b"admin"[..]));
    /// # Ok::<(), AppError>(())
    /// ```
    ///
    /// A closure whose only errors are rbolt's, passed on with `?`, and that ends in `Ok(...)`
    /// gives the compiler nothing to pick `E` from ("type annotations needed"): name it, with
    /// `Ok::<_, rbolt::Error>(...)` or a return type on the closure. A closure that ends in an
    /// rbolt call (`|tx| tx.create_bucket("b")?.put("k", "v")`) needs neither.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| tx.create_bucket("b")?.put("kept", "1"))?;
    /// // An error rolls the whole transaction back.
    /// let failed: rbolt::Result<()> = db.update(|tx| {
    ///     tx.bucket_mut("b")?.unwrap().put("lost", "2")?;
    ///     Err(rbolt::Error::BucketNotFound)
    /// });
    /// assert!(failed.is_err());
    /// db.view(|tx| -> rbolt::Result<()> {
    ///     let b = tx.bucket("b")?.unwrap();
    ///     assert!(b.get("kept")?.is_some() && b.get("lost")?.is_none());
    ///     Ok(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn update<'db, T, E: From<Error>>(
        &'db self,
        f: impl FnOnce(&mut WriteTx<'db>) -> Result<T, E>,
    ) -> Result<T, E> {
        self.engine.update(f)
    }

    /// Runs `f` in a write transaction shared with other concurrent `batch` callers: up to
    /// `max_batch_size` calls, what arrives within `max_batch_delay` and while the batch waits
    /// for the writer, commit together (with a delay of zero, a group commit: calls made while
    /// a commit syncs share the next commit's syncs; see `Options::max_batch_delay`).
    /// If the shared transaction fails, each call is run again alone, so `f` may run more
    /// than once and must only touch the database. Returns once the transaction holding
    /// `f`'s changes is committed. Each call starts from the handle's durability, and the
    /// shared commit is as durable as the most durable call asks: a call that sets
    /// [`Durability::None`](crate::Durability::None) does not weaken the others' commit.
    ///
    /// `f` is `'static` because it may run on another caller's thread: move what it needs
    /// into it. Its error is the caller's own type, as for [`Db::update`]: a call that fails
    /// is taken out of the shared transaction and run again alone, and the error of that run
    /// is what `batch` returns (the other calls still commit together).
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
    /// let events = db.view(|tx| {
    ///     Ok::<_, rbolt::Error>(tx.bucket(b"events")?.unwrap().iter().count())
    /// })?;
    /// assert_eq!(events, 4);
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn batch<F, E>(&self, f: F) -> Result<(), E>
    where
        F: Fn(&mut WriteTx<'_>) -> Result<(), E> + Send + Sync + 'static,
        E: From<Error>,
    {
        crate::engine::batch::run(&self.engine, &self.batcher, f)
    }

    /// Makes every commit so far durable: after it returns, a crash or a power loss keeps them
    /// all. Commits made with `Durability::None` (or `Options::no_sync`) become durable here, by
    /// a durable commit that writes the freelist page and the meta (two fdatasyncs); with none
    /// outstanding it is one fdatasync. It waits for a write transaction under way on another
    /// thread, and fails with [`Error::WriteTxOnThisThread`] on the thread that holds one (it
    /// would wait for itself). Safe to call from any thread while readers, commits and other
    /// syncs run.
    ///
    /// A failed sync poisons the handle, as a failed sync in a commit does: after a failed
    /// fsync the kernel may have dropped the dirty pages it could not write, so what is on disk
    /// is unknown until the file is opened again. On a read-only handle it does nothing.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let options = rbolt::Options::default().no_sync(true);
    /// let db = rbolt::Db::open_with(dir.path().join("db"), options)?;
    /// db.update(|tx| tx.create_bucket("b")?.put("k", "v"))?; // visible, not yet durable
    /// db.sync()?; // durable from here on
    /// assert_eq!(db.begin_read()?.bucket("b")?.unwrap().get("k")?, Some(&b"v"[..]));
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn sync(&self) -> Result<()> {
        self.engine.check_poisoned()?;
        if self.engine.options.read_only {
            return Ok(());
        }
        self.engine.begin_write()?.make_durable(true, false)
    }

    /// Closes the database: makes commits made without syncs durable (as [`Db::sync`] does),
    /// then releases the file lock and the mapping, and returns what the sync returned
    /// ([`Error::Poisoned`] when an earlier failure poisoned the handle). Every
    /// transaction has ended (they borrow the handle). Dropping the handle does the same and
    /// ignores a failed sync (the next open then finds the last durable commit).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("db");
    /// let db = rbolt::Db::open(&path)?;
    /// // A second handle on the same file fails at once (in this process, whatever the lock
    /// // timeout: it would wait for itself).
    /// assert!(matches!(rbolt::Db::open(&path), Err(rbolt::Error::StorageInUse { .. })));
    /// db.close()?;
    /// let db = rbolt::Db::open(&path)?; // the file is free now
    /// # drop(db);
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn close(self) -> Result<()> {
        let made_durable = self.make_durable_at_close();
        drop(self);
        made_durable
    }

    /// Makes commits made without syncs durable as the handle goes, so that closing keeps
    /// them (the next open, in any boot, finds them). Nothing to do when the handle is
    /// read-only; `Error::Poisoned` when it is poisoned (what is on disk is then for the next
    /// open's metas to decide).
    fn make_durable_at_close(&self) -> Result<()> {
        let engine = &self.engine;
        if engine.options.read_only {
            return Ok(());
        }
        // A poisoned handle cannot make anything durable: the close says so (issue 46: it
        // returned `Ok` after a failed `Db::sync`, and the commits before were then lost).
        engine.check_poisoned()?;
        engine.begin_write()?.make_durable(false, true)
    }

    /// Counters of the database and its freelist (bbolt's `DB.Stats`).
    ///
    /// Never waits for the writer (it may be called inside a write transaction): the freelist
    /// figures are those as of the last write transaction's start or end.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// let before = db.stats();
    /// db.update(|tx| tx.create_bucket("b").map(drop))?;
    /// let _reader = db.begin_read()?;
    /// let after = db.stats();
    /// assert_eq!(after.write_tx_n, before.write_tx_n + 1);
    /// assert_eq!(after.open_tx_n, 1);
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn stats(&self) -> DbStats {
        let engine = &self.engine;
        engine
            .counters
            .snapshot(engine.page_size, engine.readers.count())
    }

    /// Whether this read-only handle reads beside a writer of another process, through the
    /// writer's reader table (see [`Options::read_only`](crate::Options::read_only)); `false`
    /// for a writer and for a read-only handle that holds the shared file lock.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = rbolt::Db::open(dir.path().join("db"))?;
    /// assert!(!db.reads_beside_writer());
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn reads_beside_writer(&self) -> bool {
        self.engine.beside_writer.is_some()
    }

    /// The slots of the reader table that live reader processes hold (each names its process,
    /// the txid its open transaction reads, if any, how many bytes of the file it may read and
    /// since when): empty when the storage keeps no reader table.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = rbolt::Db::open(dir.path().join("db"))?;
    /// assert!(db.reader_processes()?.is_empty()); // no other process reads
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn reader_processes(&self) -> Result<Vec<crate::storage::SlotInfo>> {
        let Some(table) = self.engine.storage.reader_table() else {
            return Ok(Vec::new());
        };
        table.slots().map_err(|e| Error::io(Some(table.path()), e))
    }

    /// The file's current length.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("db");
    /// let db = rbolt::Db::open(&path)?;
    /// assert_eq!(db.file_len()?, std::fs::metadata(&path).unwrap().len());
    /// assert!(db.file_len()? >= 4 * db.page_size() as u64); // two metas, a freelist, a root page
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn file_len(&self) -> Result<u64> {
        let storage = &self.engine.storage;
        storage.len().map_err(|e| Error::io(storage.path(), e))
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        // Best effort: `close` reports what this cannot; a failure poisons, and the next open
        // finds the last durable commit.
        let _ = self.make_durable_at_close();
        crate::engine::shrink::on_close(&self.engine);
    }
}

/// Opens and locks the database file. The lock is tried once first: when another process
/// holds it, that is `Error::Locked` unless `Options::lock_timeout` asks for a wait, and a wait
/// is a second open that blocks as asked (and says so with the `tracing` feature).
fn open_file(path: &Path, options: &Options) -> Result<FileStorage> {
    let file_options = |lock_timeout| {
        FileOptions::new()
            .readers_beside_writer(options.readers_beside_writer)
            .read_only(options.read_only)
            .create(!options.read_only && options.create)
            .lock_timeout(lock_timeout)
    };
    let once = Some(Duration::ZERO);
    match FileStorage::open(path, file_options(once)) {
        Err(OpenError::LockTimeout { .. } | OpenError::HeldByWriter { .. })
            if options.lock_timeout != once => {}
        other => return other.map_err(|error| open_error(path, error)),
    }
    trace::lock_wait_started(path, options.lock_timeout);
    let started = Instant::now();
    let opened = FileStorage::open(path, file_options(options.lock_timeout));
    let error = opened.as_ref().err().map(|e| e as &dyn std::error::Error);
    trace::lock_wait_ended(path, started, error);
    opened.map_err(|error| open_error(path, error))
}

/// The facade's error for a file that did not open: a lock held elsewhere is `Locked` when
/// the open did not wait and `Timeout` when a wait ran out.
fn open_error(path: &Path, error: OpenError) -> Error {
    match error {
        OpenError::LockTimeout { path, timeout } if timeout.is_zero() => Error::Locked {
            path: Some(path),
            beside_writer: None,
        },
        OpenError::LockTimeout { path, .. } => Error::Timeout { path: Some(path) },
        OpenError::AlreadyOpen { path } => Error::StorageInUse { path: Some(path) },
        OpenError::HeldByWriter { path, reason } => Error::Locked {
            path: Some(path),
            beside_writer: Some(reason),
        },
        OpenError::Open { path, source } | OpenError::Lock { path, source } => Error::Io {
            path: Some(path),
            source,
        },
        other => Error::Io {
            path: Some(path.to_path_buf()),
            source: std::io::Error::other(other.to_string()),
        },
    }
}
