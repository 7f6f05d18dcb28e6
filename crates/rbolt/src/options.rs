//! How a database is opened.

use rbolt_freelist::FreelistKind;
use std::time::Duration;

/// The page size of new files when none is given: the usual OS page size.
pub const PAGE_SIZE_DEFAULT: usize = 4096;
/// Batches run once they hold this many calls...
pub const BATCH_SIZE_MAX_DEFAULT: usize = 1000;
/// ...or once the first call has waited this long.
pub const BATCH_DELAY_MAX_DEFAULT: Duration = Duration::from_millis(10);
/// The most a growth of the file adds past what it must hold (bbolt's `AllocSize`, which
/// bbolt adds whole once a file is past it).
pub const ALLOC_SIZE_DEFAULT: u64 = 16 * 1024 * 1024;
/// Commits that take this long are reported with the `tracing` feature: a durable one-key
/// commit takes well under a millisecond on a local disk, a large bulk load seconds.
pub const SLOW_COMMIT_THRESHOLD_DEFAULT: Duration = Duration::from_secs(1);

/// How a write transaction's commit reaches the disk ([`WriteTx::set_durability`]).
///
/// [`WriteTx::set_durability`]: crate::WriteTx::set_durability
///
/// ```
/// use rbolt::Durability;
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db"))?;
/// assert_eq!(Durability::default(), Durability::Immediate);
/// let tx = db.begin_write()?;
/// tx.set_durability(Durability::None); // a bulk load that can be redone
/// tx.create_bucket("bulk")?;
/// tx.commit()?;
/// db.sync()?; // now durable
/// # Ok::<(), rbolt::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Durability {
    /// Two `fdatasync`s: when `commit` returns, the commit and every one before it survive a
    /// crash of the process, an OS crash or a power loss.
    #[default]
    Immediate,
    /// No sync (Go bbolt's `NoSync`, redb's `Durability::None`): the commit is visible at once
    /// and survives a crash of the process (the page cache keeps it; the next open in the same
    /// boot finds it and makes it durable; on Linux, which has a boot id to tell the same boot:
    /// elsewhere such a crash loses it like a power loss), but an OS crash or a power loss
    /// before the next durable point loses it and the other commits since the last durable
    /// one: the file then opens at the last durable commit, whole. Never a mix, never an older
    /// state, never a file that does not open: pages the last durable commit reaches are not
    /// reused, and its meta is not overwritten, until a newer commit is durable (bbolt's and
    /// LMDB's no-sync modes promise nothing after a power loss; rbolt keeps redb's promise).
    ///
    /// Durable points: an `Immediate` commit (even one that changed nothing), [`Db::sync`],
    /// closing the handle, and every vacuum step. Such commits write no freelist page (the
    /// open after a crash of the process rebuilds it by walking the file). They do not reuse
    /// the pages of the last durable commit, each of which is freed at most once, so a run of
    /// them grows the file by at most about the pages its newest state uses: at most about
    /// double. For loads that can be redone.
    ///
    /// Such a commit is made durable instead (two syncs) where its meta could not be trusted
    /// after a crash: on a file whose pages are not the system's page size, when it would go to
    /// meta slot 0 (the first commit after a durable one in slot 1, as a new file's is: Go
    /// bbolt 1.3 reads the page size from meta 0 alone, or else takes the system's, so meta 0
    /// must stay a meta Go can read), and where the meta would not fit its page within one
    /// 4 KiB block (pages under 112 bytes, odd page sizes). So on such files a run of such
    /// commits has at most one durable commit at its start.
    ///
    /// After a crash of the process, the next open trusts such a commit only when the pages
    /// written since the last durable one are still as written (its meta carries their digest):
    /// if another writer (Go bbolt) reused them, or a sync failed and the kernel dropped them,
    /// the open falls back to the last durable commit.
    ///
    /// [`Db::sync`]: crate::Db::sync
    None,
    /// Durable with one sync (issue 51): the commit writes its pages and its meta, then syncs
    /// once (`fdatasync`, or `fsync` when the file grew). When `commit` returns, the commit
    /// and every one before it survive a crash of the process, an OS crash or a power loss,
    /// as with [`Durability::Immediate`]. Its meta lists the page runs the commit wrote and a
    /// digest of their bytes; an open trusts it only when the pages still give the digest,
    /// and otherwise (a power loss during the sync kept the meta but not every page) opens the
    /// commit before it, which this one could not have touched.
    ///
    /// What Go bbolt sees: such a meta carries a checksum Go rejects, so Go opens the other
    /// meta. rbolt writes a meta in Go's form over it at close and at the open after a crash,
    /// so Go opens every file rbolt closed, and every crashed file once rbolt has opened it;
    /// a crashed file that Go opens first may show Go an older commit, or no valid meta at
    /// all when both slots hold such metas. Use [`Durability::Immediate`] for a file that Go
    /// may open straight after a crash.
    ///
    /// Such a commit writes no freelist page (which lists every free page id, hundreds of
    /// pages on a large file with much free space): it writes its tree paths and its meta
    /// only. The open after a crash rebuilds the freelist by walking the tree, as after
    /// commits without syncs (tens of milliseconds at a million keys).
    ///
    /// Made with two syncs instead where its meta could not be trusted (the rules of
    /// [`Durability::None`]: meta slot 0 of a file whose pages are not the system's page size,
    /// a meta that would not fit its page within one 4 KiB block), when its page runs do not
    /// fit the meta page or pass [`rbolt_page::ONE_SYNC_BYTES_MAX`] bytes, and right after
    /// commits without syncs (whose pages its digest does not cover). Vacuum steps are always
    /// made with two syncs. Set for every transaction with [`Options::one_sync`].
    OneSync,
}

/// Options for [`Db::open_with`](crate::Db::open_with). `Options::default()` gives bbolt's
/// defaults; the methods set one field each and chain.
///
/// ```
/// use rbolt::{FreelistKind, Options};
/// use std::time::Duration;
///
/// let options = Options::default()
///     .lock_timeout(Some(Duration::from_secs(1)))
///     .freelist(FreelistKind::Span)
///     .no_grow_sync(true);
/// assert!(!options.read_only);
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Options {
    /// How long to wait for the file lock when another process holds it (has the database
    /// open). `Some(Duration::ZERO)`, the default, does not wait: the open fails at once with
    /// `Error::Locked`, as redb's and sled's do (and the `rbolt` command's). `Some(d)` waits
    /// up to `d`, then fails with `Error::Timeout`; `None` waits for ever (bbolt's default,
    /// its timeout 0). A wait is reported with the `tracing` feature. Within one process a
    /// second read-write open of a file fails at once whatever this says
    /// (`Error::StorageInUse`): it would wait for itself.
    ///
    /// ```
    /// use rbolt::{Db, Error, Options};
    /// use std::time::Duration;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("db");
    /// # drop(Db::open(&path)?);
    /// // Another process has the database open (here: its lock taken on another descriptor).
    /// let other = std::fs::File::open(&path).unwrap();
    /// rustix::fs::flock(&other, rustix::fs::FlockOperation::LockExclusive).unwrap();
    /// assert!(matches!(Db::open(&path), Err(Error::Locked { .. }))); // at once
    /// let patient = Options::default().lock_timeout(Some(Duration::from_millis(20)));
    /// assert!(matches!(Db::open_with(&path, patient), Err(Error::Timeout { .. })));
    /// drop(other); // the other process closes it
    /// let db = Db::open_with(&path, Options::default().lock_timeout(None))?; // waits for ever
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub lock_timeout: Option<Duration>,
    /// Open read-only. Other read-only openers may share the file, and, on Linux, so may a
    /// writer in another process (issue 50):
    ///
    /// - With no writer open, the handle takes the shared file lock (`flock`) as before:
    ///   read-only handles share it, and no writer — rbolt's or Go bbolt's — can open the
    ///   file until they close (a writer waits, or fails with `Error::Locked`). Its snapshot
    ///   is the file as it was opened.
    /// - When a writer of another process holds the file, the handle reads beside it
    ///   ([`Db::reads_beside_writer`](crate::Db::reads_beside_writer)): it takes no `flock`
    ///   and registers in the writer's reader table, in the lock file `<path>-lock`. Each read
    ///   transaction reads the newest commit the writer published when it began, and keeps
    ///   it for as long as it lives: the writer never reuses a page it reaches and never cuts
    ///   the file below what it reads (a vacuum or auto-shrink waits for it, as for the
    ///   writer's own readers). A transaction's start and end are atomic stores into a shared
    ///   mapping, no system call, once the handle holds a slot.
    /// - A read-only open fails with `Error::Locked` (or waits, as `lock_timeout` says) when a
    ///   writer holds the file and it cannot read beside it; the error says why: the writer
    ///   keeps no reader table (Go bbolt, an rbolt before issue 50, a writer whose directory
    ///   was read-only so the lock file could not be made), the lock file cannot be written by
    ///   this process, or all of its slots are taken. Not on other systems than Linux (open
    ///   file description locks are needed), nor on network file systems, whose `flock` and
    ///   shared mappings do not reach other machines: there, open one process at a time.
    ///
    /// Raw page bytes (`ReadTx::raw_pages`) are not given out beside a writer: it rewrites
    /// free pages meanwhile.
    pub read_only: bool,
    /// Keep a reader table in the lock file `<path>-lock`, so that read-only opens in other
    /// processes read beside this handle (see [`read_only`](Options::read_only)): for a
    /// read-write open, whether it makes the lock file; for a read-only one, whether it may
    /// read beside a writer. On by default; off, a writer excludes every other open as
    /// before, and makes no lock file (for files made to be renamed into place, whose lock
    /// file would be left behind under the temporary name).
    pub readers_beside_writer: bool,
    /// Commit with `Durability::None` unless a transaction says otherwise: no fdatasyncs, fast;
    /// a crash of the process keeps every commit, an OS crash or a power loss loses those
    /// since the last durable point (`Db::sync`, a close, an `Immediate` commit) and opens that
    /// one, whole. For bulk loads that can be redone. A vacuum's steps are durable regardless.
    pub no_sync: bool,
    /// Commit with [`Durability::OneSync`] unless a transaction says otherwise (and unless
    /// `no_sync`): durable commits with one sync instead of two. Off by default in this first
    /// landing (issue 51): after a crash, Go bbolt may not open the file until rbolt has
    /// opened it once, and a file shared with Go wants bbolt's two syncs.
    pub one_sync: bool,
    /// Create the file when it does not exist (read-write opens; the default). With `false`,
    /// opening a missing file is an error, so a mistyped path does not make a new database.
    pub create: bool,
    /// bbolt's option to skip the fsync after the file grows. rbolt never syncs growth on its
    /// own: a commit that grew the file syncs its length with its data (its first sync is an
    /// fsync then), so this changes nothing and is kept for bbolt's option set.
    pub no_grow_sync: bool,
    /// Do not write the freelist at commit; it is rebuilt by scanning the file at open.
    /// Commits write less; opens take longer.
    pub no_freelist_sync: bool,
    /// Which freelist representation to use in memory (the page written is the same).
    pub freelist: FreelistKind,
    /// Page size of a new file (0: `PAGE_SIZE_DEFAULT`). An existing file keeps its own.
    pub page_size: usize,
    /// Initial size of the memory mapping, so that early growth remaps less (0: the file size).
    pub initial_mmap_size: usize,
    /// The largest the file may grow, in bytes (0: no limit). A commit that would pass it
    /// fails with `Error::MaxSizeReached`.
    pub max_size: u64,
    /// Lock the mapped file in memory (mlock).
    pub mlock: bool,
    /// The most calls one batch runs.
    pub max_batch_size: usize,
    /// The longest the first call of a batch waits for others (10 ms, bbolt's). Calls that
    /// arrive while the batch then waits for the writer (another commit's syncs) join it
    /// anyway, so zero is a group commit: no call waits for a timer, and every thread that
    /// commits while a sync is under way shares the next one (`cargo bench -p rbolt-bench
    /// --bench group_commit` measures durable commits/s of 1, 4 and 16 threads each way).
    pub max_batch_delay: Duration,
    /// The most room a growth of the file leaves past what it must hold. Growth leaves a
    /// 32nd of the file's length (at least 64 KiB), and never more than this: a loaded file
    /// is a few percent longer than its pages (bbolt doubles a small file and then adds
    /// `AllocSize` whole, so a 19 MiB database is a 32 MiB file there).
    pub alloc_size: u64,
    /// When the newest meta is intact but points past the end of the file (the file was
    /// truncated from outside), open the older meta instead of failing with
    /// `Error::Truncated`. The newest commit is lost, and the next commit overwrites its meta.
    /// Only for recovery, e.g. after a power loss with `no_grow_sync`.
    pub fallback_on_truncation: bool,
    /// Shrink the file at commit when pages at its end are free: the commit lowers the
    /// high-water mark past them, and once that meta is durable (after a commit without syncs,
    /// at the next durable point) and no open reader's snapshot reaches the cut pages, the
    /// file is truncated, never below what the last durable meta needs (keeping the slack a growth would add, so
    /// a file near its size does not shrink and grow by turns). Off by default: bbolt's files
    /// never shrink, and a workload that deletes and re-inserts at the end would pay a
    /// truncation and a regrowth (`fallocate` and an fsync) per cycle. `Db::vacuum` shrinks
    /// whatever this says. With it on, closing the handle also gives the growth room back:
    /// the file is cut to the pages the last commit uses.
    pub auto_shrink: bool,
    /// With the `tracing` feature, a commit that takes at least this long is reported as a
    /// `WARN` event with its phases' times (`None`: never). Without the feature it does
    /// nothing.
    pub slow_commit_threshold: Option<Duration>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            lock_timeout: Some(Duration::ZERO),
            read_only: false,
            readers_beside_writer: true,
            no_sync: false,
            one_sync: false,
            create: true,
            no_grow_sync: false,
            no_freelist_sync: false,
            freelist: FreelistKind::Array,
            page_size: 0,
            initial_mmap_size: 0,
            max_size: 0,
            mlock: false,
            max_batch_size: BATCH_SIZE_MAX_DEFAULT,
            max_batch_delay: BATCH_DELAY_MAX_DEFAULT,
            alloc_size: ALLOC_SIZE_DEFAULT,
            fallback_on_truncation: false,
            auto_shrink: false,
            slow_commit_threshold: Some(SLOW_COMMIT_THRESHOLD_DEFAULT),
        }
    }
}

impl Options {
    /// Checks that the options can work, before any file is touched: `Error::InvalidOptions`
    /// names the first that cannot. `Db::open_with` calls it.
    ///
    /// ```
    /// use rbolt::Options;
    /// assert!(Options::default().validate().is_ok());
    /// let bad = Options::default().page_size(rbolt::page::PAGE_SIZE_MIN as usize - 1);
    /// assert!(matches!(bad.validate(), Err(rbolt::Error::InvalidOptions { .. })));
    /// # let dir = tempfile::tempdir().unwrap();
    /// // Opening checks the same, before touching the file.
    /// assert!(rbolt::Db::open_with(dir.path().join("db"), bad).is_err());
    /// assert!(!dir.path().join("db").exists());
    /// ```
    pub fn validate(&self) -> crate::Result<()> {
        let invalid = |reason: String| Err(crate::Error::InvalidOptions { reason });
        let (min, max) = (rbolt_page::PAGE_SIZE_MIN, rbolt_page::PAGE_SIZE_MAX);
        if self.page_size != 0 && !(min as usize..=max as usize).contains(&self.page_size) {
            return invalid(format!(
                "page_size {} is outside {min}..={max} bytes (0 picks {PAGE_SIZE_DEFAULT})",
                self.page_size
            ));
        }
        if crate::engine::snapshot::map_size(self.initial_mmap_size as u64).is_none() {
            return invalid(format!(
                "initial_mmap_size {} does not fit in the address space",
                self.initial_mmap_size
            ));
        }
        Ok(())
    }

    /// Refuses a size limit a new file of `page_size` could not keep: below the 4 pages of an
    /// empty database (two metas, the freelist, the root). An existing file may be larger
    /// than its limit (it then cannot grow), as in bbolt.
    pub(crate) fn check_max_size_for_new_file(&self, page_size: usize) -> crate::Result<()> {
        let smallest = 4 * page_size as u64;
        if self.max_size != 0 && self.max_size < smallest {
            return Err(crate::Error::InvalidOptions {
                reason: format!(
                    "max_size {} is smaller than an empty database ({smallest} bytes: 4 pages \
                     of {page_size}); 0 means no limit",
                    self.max_size
                ),
            });
        }
        Ok(())
    }

    /// The page size a new file gets.
    pub(crate) fn page_size_for_new_file(&self) -> usize {
        if self.page_size == 0 {
            PAGE_SIZE_DEFAULT
        } else {
            self.page_size
        }
    }
}

macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty),* $(,)?) => {
        impl Options {
            $(
                $(#[$doc])*
                ///
                /// The setters chain; see the example on [`Options`].
                #[must_use]
                pub fn $name(mut self, $name: $ty) -> Options {
                    self.$name = $name;
                    self
                }
            )*
        }
    };
}

setters! {
    /// Sets `lock_timeout`.
    lock_timeout: Option<Duration>,
    /// Sets `read_only`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("db");
    /// # rbolt::Db::open(&path)?.close()?;
    /// let options = rbolt::Options::default().read_only(true);
    /// let a = rbolt::Db::open_with(&path, options.clone())?;
    /// let b = rbolt::Db::open_with(&path, options)?; // read-only handles share the file
    /// assert!(a.is_read_only() && b.is_read_only());
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    read_only: bool,
    /// Sets `readers_beside_writer`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("db");
    /// let options = rbolt::Options::default().readers_beside_writer(false);
    /// rbolt::Db::open_with(&path, options)?.close()?;
    /// assert!(!dir.path().join("db-lock").exists());
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    readers_beside_writer: bool,
    /// Sets `no_sync`.
    no_sync: bool,
    /// Sets `one_sync`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = rbolt::Db::open_with(dir.path().join("db"), rbolt::Options::default().one_sync(true))?;
    /// let tx = db.begin_write()?;
    /// assert_eq!(tx.durability(), rbolt::Durability::OneSync);
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    one_sync: bool,
    /// Sets `create`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let options = rbolt::Options::default().create(false);
    /// // Without `create`, a missing file is an error instead of a new database.
    /// assert!(rbolt::Db::open_with(dir.path().join("missing"), options).is_err());
    /// assert!(!dir.path().join("missing").exists());
    /// ```
    create: bool,
    /// Sets `no_grow_sync`.
    no_grow_sync: bool,
    /// Sets `no_freelist_sync`.
    no_freelist_sync: bool,
    /// Sets `freelist`.
    freelist: FreelistKind,
    /// Sets `page_size`.
    page_size: usize,
    /// Sets `initial_mmap_size`.
    initial_mmap_size: usize,
    /// Sets `max_size`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let options = rbolt::Options::default().max_size(1 << 20);
    /// let db = rbolt::Db::open_with(dir.path().join("db"), options)?;
    /// let result = db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     for i in 0u32..100 {
    ///         b.put(i.to_be_bytes(), [0u8; 100_000])?; // 10 MB in all
    ///     }
    ///     Ok(())
    /// });
    /// assert!(matches!(result, Err(rbolt::Error::MaxSizeReached { .. })));
    /// assert!(db.file_len()? <= 1 << 20);
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    max_size: u64,
    /// Sets `mlock`.
    mlock: bool,
    /// Sets `max_batch_size`.
    max_batch_size: usize,
    /// Sets `max_batch_delay`.
    max_batch_delay: Duration,
    /// Sets `alloc_size`.
    alloc_size: u64,
    /// Sets `fallback_on_truncation`.
    fallback_on_truncation: bool,
    /// Sets `auto_shrink`.
    auto_shrink: bool,
    /// Sets `slow_commit_threshold`.
    slow_commit_threshold: Option<Duration>,
}
