//! The write transaction: edits buckets in memory and commits them (the read transaction is
//! in `read_tx.rs`).

// Both transaction kinds keep their crate path `crate::tx::...`.
use crate::bucket::read::Bucket;
use crate::bucket::state::{
    BucketName, BucketState, Registry, check_name, check_not_held, create_child, delete_child,
    open_child, state_at,
};
use crate::bucket::write::BucketMut;
use crate::engine::context::{Workspace, WriteContext};
use crate::engine::page_writes::PageWrites;
use crate::engine::snapshot::{Snapshot, pages_of};
use crate::engine::{Engine, Writer};
use crate::error::{Error, Result};
use crate::iter::Iter;
use crate::options::Durability;
pub(crate) use crate::read_tx::ReadTx;
use crate::stats::TxStats;
use rbolt_btree::{Arena, Pages, Put};
use rbolt_freelist::{Allocator, AnyFreelist, Freelist, Limits};
use rbolt_page::{LEAF_FLAG_BUCKET, Meta, Txid};
mod repair;

use std::cell::{Cell, RefCell};
use std::sync::MutexGuard;
use std::time::Instant;

/// The write transaction: edits buckets in memory and writes them on [`WriteTx::commit`].
/// Dropping it, or [`WriteTx::rollback`], discards every change. There is one at a time.
///
/// Its bucket methods take `&self`, so several top-level buckets can be open at once, as in
/// bbolt: read one while writing another, or move entries between two while iterating. Each
/// [`BucketMut`] holds its bucket until dropped; opening, deleting or moving a top-level
/// bucket that a live handle holds is [`Error::BucketInUse`]. The read views
/// [`WriteTx::bucket`], [`WriteTx::root`] and [`WriteTx::buckets`] borrow the transaction
/// exclusively (`&mut self`) instead: they can then see every bucket, without a runtime
/// check, and give values that live as long as the borrow. To read a bucket beside a handle
/// on another, open it as a handle too.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = rbolt::Db::open(dir.path().join("db"))?;
/// db.update(|tx| {
///     let mut inbox = tx.create_bucket("inbox")?;
///     let mut done = tx.create_bucket("done")?;
///     inbox.put("task-1", "write docs")?;
///     // Two buckets of one transaction, open at once.
///     let task = inbox.get("task-1")?.unwrap().to_vec();
///     done.put("task-1", &task)?;
///     inbox.delete("task-1")?;
///     // The same top-level bucket cannot be opened twice.
///     assert!(matches!(tx.bucket_mut("inbox"), Err(rbolt::Error::BucketInUse)));
///     Ok::<_, rbolt::Error>(())
/// })?;
/// # Ok::<(), rbolt::Error>(())
/// ```
///
/// A read view beside a live handle does not compile (the view wants the transaction to
/// itself); open the second bucket as a handle, which reads too (as `inbox` does in the first
/// example). Decision record 0011 says why the borrows are so.
///
/// ```compile_fail,E0502
/// # let dir = tempfile::tempdir().unwrap();
/// let db = rbolt::Db::open(dir.path().join("db"))?;
/// let mut tx = db.begin_write()?;
/// let mut posts = tx.create_bucket("posts")?;
/// let users = tx.bucket("users")?; // error: `*tx` is borrowed by `posts`
/// posts.put("p1", "by u1")?;
/// # Ok::<(), rbolt::Error>(())
/// ```
///
/// A commit or rollback while a handle lives does not compile: both take the transaction by
/// value, and the handle borrows it.
///
/// ```compile_fail,E0505
/// # let dir = tempfile::tempdir().unwrap();
/// let db = rbolt::Db::open(dir.path().join("db"))?;
/// let tx = db.begin_write()?;
/// let mut b = tx.create_bucket("b")?;
/// tx.commit()?; // error: `tx` is borrowed by `b`
/// b.put("k", "v")?;
/// # Ok::<(), rbolt::Error>(())
/// ```
///
/// ```compile_fail,E0505
/// # let dir = tempfile::tempdir().unwrap();
/// let db = rbolt::Db::open(dir.path().join("db"))?;
/// let tx = db.begin_write()?;
/// let b = tx.create_bucket("b")?;
/// tx.rollback(); // error: `tx` is borrowed by `b`
/// drop(b);
/// # Ok::<(), rbolt::Error>(())
/// ```
///
/// `WriteTx` is not `Send`. The writer lock records the thread that holds it, so that a
/// second [`Db::begin_write`](crate::Db::begin_write) (or `update`, or `batch`) on that same thread returns
/// [`Error::WriteTxOnThisThread`] at once instead of waiting for itself for ever; a
/// transaction moved to another thread would make that record wrong (and the lock's guard
/// cannot move between threads either). To write from an async task, run the whole
/// transaction on one thread: `Db::update_async` (feature `tokio`) runs the closure on
/// tokio's blocking pool, and with another runtime its `spawn_blocking(move || db.update(..))`
/// does the same.
///
/// ```compile_fail,E0277
/// fn send<T: Send>(_: T) {}
/// # let dir = tempfile::tempdir().unwrap();
/// let db = rbolt::Db::open(dir.path().join("db"))?;
/// send(db.begin_write()?); // error: `WriteTx` is not `Send`
/// # Ok::<(), rbolt::Error>(())
/// ```
///
/// The same in async code: a `WriteTx` held across an `.await` makes the future not `Send`,
/// so `tokio::spawn` or an axum handler refuses it, and the compiler names the writer lock
/// inside the transaction: ``the trait `Send` is not implemented for
/// `std::sync::MutexGuard<'_, rbolt::engine::Writer>` ``. Move the transaction into
/// `Db::update_async`'s closure, or end it before the `.await` (its commit then blocks the
/// async thread for the fsyncs).
///
/// ```compile_fail
/// fn spawn<F: std::future::Future + Send>(_: F) {}
/// async fn handler(db: &rbolt::Db) -> rbolt::Result<()> {
///     let tx = db.begin_write()?;
///     tx.create_bucket("b")?;
///     std::future::ready(()).await; // `tx` is held across this await...
///     tx.commit()
/// }
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db")).unwrap();
/// spawn(handler(&db)); // ...so the future is not Send: error
/// ```
///
/// ```
/// # fn spawn<F: std::future::Future + Send>(_: F) {}
/// async fn handler(db: &rbolt::Db) -> rbolt::Result<()> {
///     {
///         let tx = db.begin_write()?;
///         tx.create_bucket("b")?;
///         tx.commit()?; // ended before the await: the future is Send
///     }
///     std::future::ready(()).await;
///     Ok(())
/// }
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db")).unwrap();
/// spawn(handler(&db));
/// ```
// The commit (`engine/commit.rs`) works on the fields marked `pub(crate)`.
pub struct WriteTx<'db> {
    pub(crate) engine: &'db Engine,
    pub(crate) writer: MutexGuard<'db, Writer>,
    pub(crate) base: Meta,
    pub(crate) shared: WriteContext,
    /// The root bucket and the open buckets below it (see [`Registry`]).
    pub(crate) buckets: Registry,
    on_commit: RefCell<Vec<Box<dyn FnOnce() + 'db>>>,
    pub(crate) stats: TxStats,
    ended: bool,
    /// The meta write has started and the new state is not yet published.
    pub(crate) meta_started: bool,
    /// Whether the commit syncs.
    pub(crate) durability: Cell<Durability>,
    /// Write a new meta (and freelist) even if no bucket changed.
    pub(crate) commit_unchanged: bool,
    /// Lower the high-water mark past free pages at the end of the file, and cut the file
    /// when no reader needs its tail (a vacuum step; `Options::auto_shrink` does it always).
    pub(crate) shrink: bool,
    /// Write no freelist page (a vacuum step with no run below its cut for one).
    pub(crate) skip_freelist: bool,
}

impl std::fmt::Debug for WriteTx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteTx")
            .field("txid", &self.id())
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// How [`WriteTx::open_top`] opens a top-level bucket.
#[derive(Clone, Copy)]
enum Open {
    Existing,
    Create,
    CreateIfNotExists,
}

impl Engine {
    /// Starts the write transaction, waiting for the one under way to end
    /// ([`crate::Db::begin_write`]).
    pub(crate) fn begin_write(&self) -> Result<WriteTx<'_>> {
        if self.options.read_only {
            return Err(Error::DatabaseReadOnly);
        }
        self.check_poisoned()?;
        self.check_not_writer()?;
        let mut writer = self.lock_writer();
        self.writer_thread.store(
            crate::engine::thread_id(),
            std::sync::atomic::Ordering::Release,
        );
        if let Err(error) = self.check_poisoned() {
            self.writer_thread
                .store(0, std::sync::atomic::Ordering::Release);
            return Err(error);
        }
        let snapshot = self.snapshot();
        let mut readers = std::mem::take(&mut writer.readers_scratch);
        readers.clear();
        self.readers.collect(&mut readers);
        let mut slots = std::mem::take(&mut writer.slots_scratch);
        let live = crate::engine::processes::collect_live(
            self,
            snapshot.meta.txid(),
            &mut slots,
            &mut readers,
        );
        let newest = snapshot.meta.txid();
        crate::engine::processes::warn_long_pins(self, &slots, newest, &mut writer.pins_warned);
        writer.slots_scratch = slots;
        if let Err(error) = live {
            writer.readers_scratch = readers;
            self.writer_thread
                .store(0, std::sync::atomic::Ordering::Release);
            return Err(error);
        }
        let durable = writer.durable.txid();
        if let Some(freelist) = writer.freelist.as_mut() {
            freelist.release_pending_durable(&readers, durable);
            self.counters.freelist_changed(freelist);
        }
        writer.readers_scratch = readers;
        Ok(WriteTx::new(self, writer, snapshot))
    }

    /// Runs `f` in a write transaction and commits it if `f` returns `Ok`
    /// ([`crate::Db::update`]).
    pub(crate) fn update<'db, T, E: From<Error>>(
        &'db self,
        f: impl FnOnce(&mut WriteTx<'db>) -> Result<T, E>,
    ) -> Result<T, E> {
        let mut tx = self.begin_write()?;
        let value = f(&mut tx)?;
        tx.commit()?;
        Ok(value)
    }
}

impl<'db> WriteTx<'db> {
    fn new(
        engine: &'db Engine,
        mut writer: MutexGuard<'db, Writer>,
        snapshot: Snapshot,
    ) -> WriteTx<'db> {
        let meta = snapshot.meta;
        let freelist = writer
            .freelist
            .take()
            .expect("a writable database has its freelist loaded");
        // The writer's pool of page buffers, with those the last commit wrote: this
        // transaction's nodes and pages come from it, and go back to it once written.
        let arena = std::mem::replace(&mut writer.arena, Arena::new(engine.page_size));
        let spare_state = writer.spare_state.take();
        let txid = crate::engine::next_txid(meta.txid(), writer.durable.txid());
        let limits = Limits {
            page_size: engine.page_size,
            max_size: engine.options.max_size,
        };
        let allocator = Allocator::new(freelist, txid, meta.high_water(), limits);
        let storage = engine.storage.clone();
        let mut writes = PageWrites::new(
            allocator,
            engine.page_size,
            storage,
            writer.file_len,
            &engine.options,
        )
        .with_dirty_list(std::mem::take(&mut writer.dirty_list));
        writes.written = std::mem::take(&mut writer.written_scratch);
        WriteTx {
            engine,
            writer,
            base: meta,
            shared: WriteContext {
                map: snapshot.map,
                page_size: engine.page_size,
                high_water: meta.high_water(),
                core: RefCell::new(Workspace {
                    arena,
                    writes,
                    broken: false,
                }),
            },
            buckets: Registry::new(
                BucketState::from_root(meta.root_pgid(), meta.root.sequence),
                spare_state,
            ),
            on_commit: RefCell::new(Vec::new()),
            stats: TxStats::default(),
            ended: false,
            meta_started: false,
            durability: Cell::new(if engine.options.no_sync {
                Durability::None
            } else if engine.options.one_sync {
                Durability::OneSync
            } else {
                Durability::Immediate
            }),
            commit_unchanged: false,
            shrink: engine.options.auto_shrink,
            skip_freelist: false,
        }
    }

    /// The id this transaction commits as. A commit that changed nothing writes nothing and
    /// uses no id: the next transaction gets the same one. After commits without syncs the ids
    /// may skip one (such a commit's meta never goes to the slot of the last durable meta,
    /// `txid % 2`): this is the id the commit gets, skip included.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// let tx = db.begin_write()?;
    /// let id = tx.id();
    /// assert_eq!(id, rbolt::Txid(db.begin_read()?.id().0 + 1)); // one past the last commit
    /// tx.create_bucket("b")?;
    /// tx.commit()?;
    /// assert_eq!(db.begin_read()?.id(), id);
    /// for _ in 0..3 {
    ///     let tx = db.begin_write()?;
    ///     tx.set_durability(rbolt::Durability::None);
    ///     let id = tx.id();
    ///     tx.bucket_mut("b")?.unwrap().put("k", id.0.to_be_bytes())?;
    ///     tx.commit()?;
    ///     assert_eq!(db.begin_read()?.id(), id);
    /// }
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn id(&self) -> Txid {
        self.shared.core.borrow().writes.txid()
    }

    /// The root bucket as a read view (its entries are the top-level buckets). Borrows the
    /// transaction exclusively, so no handle is open meanwhile.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     tx.create_bucket("a")?;
    ///     tx.create_bucket("b")?;
    ///     let root = tx.root();
    ///     assert_eq!(root.iter().count(), 2); // the two new buckets
    ///     assert!(root.bucket("a")?.is_some());
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn root(&mut self) -> Bucket<'_> {
        self.buckets.root.get_mut().view(self.shared.pages())
    }

    /// The top-level bucket `name` as a read view, with this transaction's edits. Borrows the
    /// transaction exclusively (see the type's documentation); a handle from
    /// [`WriteTx::bucket_mut`] reads as well and can be open beside others.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     tx.create_bucket("b")?.put("k", "v")?; // the handle is dropped at the `;`
    ///     let b = tx.bucket("b")?.expect("created above");
    ///     assert_eq!(b.get("k")?, Some(&b"v"[..]));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn bucket(&mut self, name: impl AsRef<[u8]>) -> Result<Option<Bucket<'_>>> {
        let name = name.as_ref();
        self.root().bucket(name)
    }

    /// The top-level buckets, by name in order. Borrows the transaction exclusively.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     tx.create_bucket("z")?;
    ///     tx.create_bucket("a")?;
    ///     let names: Vec<&[u8]> =
    ///         tx.buckets().map(|e| e.map(|e| e.key())).collect::<Result<_, _>>()?;
    ///     assert_eq!(names, [b"a", b"z"]);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn buckets(&mut self) -> Iter<'_> {
        self.root().iter()
    }

    /// Opens, creates, or opens-or-creates the top-level bucket `name` as a handle. Every
    /// error leaves the registry as it was (a bucket loaded into it on the way is no change).
    fn open_top(&self, name: &[u8], how: Open) -> Result<Option<BucketMut<'_>>> {
        let pages = self.shared.pages();
        let mut root = self.buckets.root.borrow_mut();
        let state = match how {
            Open::Existing => match open_child(pages, &mut root, name)? {
                Some(state) => state,
                None => return Ok(None),
            },
            Open::Create | Open::CreateIfNotExists => {
                let mut core = self.shared.core.borrow_mut();
                let if_not_exists = matches!(how, Open::CreateIfNotExists);
                create_child(pages, &mut core, &mut root, name, if_not_exists)?
            }
        };
        let state = std::mem::replace(state, BucketState::placeholder());
        drop(root);
        Ok(Some(BucketMut::top(
            &self.shared,
            &self.buckets,
            name,
            state,
        )))
    }

    /// The top-level bucket `name`, open for reading and writing; `None` if there is none.
    /// Other top-level buckets can be open at the same time; this one is
    /// [`Error::BucketInUse`] while another handle holds it.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// # db.update(|tx| { tx.create_bucket("a")?.put("k", "1")?; tx.create_bucket("b").map(drop) })?;
    /// db.update(|tx| {
    ///     let a = tx.bucket_mut("a")?.expect("created");
    ///     let mut b = tx.bucket_mut("b")?.expect("created");
    ///     for entry in a.iter() {
    ///         let entry = entry?;
    ///         b.put(entry.key(), entry.value().unwrap_or_default())?;
    ///     }
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn bucket_mut(&self, name: impl AsRef<[u8]>) -> Result<Option<BucketMut<'_>>> {
        self.open_top(name.as_ref(), Open::Existing)
    }

    /// The bucket at `path` (top-level name, then nested names), open for writing; `None`
    /// when a bucket on the path does not exist. An empty path is `BucketNameRequired`: the
    /// root bucket holds only buckets and is changed through them (as in bbolt). The handle
    /// holds the top-level bucket of the path, as [`WriteTx::bucket_mut`] does.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| tx.create_bucket_path(&["users", "alice"]).map(drop))?;
    /// db.update(|tx| {
    ///     tx.bucket_path_mut(&["users", "alice"])?.expect("created").put("age", "42")?;
    ///     assert!(tx.bucket_path_mut(&["users", "bob"])?.is_none());
    ///     let empty: [&str; 0] = [];
    ///     assert!(matches!(tx.bucket_path_mut(&empty), Err(rbolt::Error::BucketNameRequired)));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.view(|tx| {
    ///     let alice = tx.bucket("users")?.unwrap().bucket("alice")?.unwrap();
    ///     assert_eq!(alice.get("age")?, Some(&b"42"[..]));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn bucket_path_mut<P: AsRef<[u8]>>(&self, path: &[P]) -> Result<Option<BucketMut<'_>>> {
        let Some((first, rest)) = path.split_first() else {
            return Err(Error::BucketNameRequired);
        };
        let Some(bucket) = self.open_top(first.as_ref(), Open::Existing)? else {
            return Ok(None);
        };
        bucket.descend_path(rest, false)
    }

    /// The bucket at `path` (top-level name, then nested names), open for writing, creating
    /// every bucket on the path that does not exist yet (like `mkdir -p`), in one walk down.
    /// An empty path is `BucketNameRequired`; a name on the path that holds a value is
    /// `IncompatibleValue`. Everything that can fail is checked before the first bucket is
    /// created, so an error creates nothing.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| tx.create_bucket_path(&["a", "b", "c"])?.put("k", "v"))?;
    /// db.view(|tx| {
    ///     let c = tx.bucket("a")?.unwrap().bucket("b")?.unwrap().bucket("c")?.unwrap();
    ///     assert_eq!(c.get("k")?, Some(&b"v"[..]));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn create_bucket_path<P: AsRef<[u8]>>(&self, path: &[P]) -> Result<BucketMut<'_>> {
        let Some((first, rest)) = path.split_first() else {
            return Err(Error::BucketNameRequired);
        };
        // Checks first: every name, then the part of the path that exists (a value on it is
        // `IncompatibleValue`, a held top-level bucket `BucketInUse`). What is left to create
        // is new, so creating it cannot fail.
        for name in path {
            check_name(name.as_ref())?;
        }
        if let Some(existing) = self.open_top(first.as_ref(), Open::Existing)? {
            drop(existing.descend_path(rest, false)?);
        }
        self.open_top(first.as_ref(), Open::CreateIfNotExists)?
            .ok_or(Error::BucketNotFound)?
            .descend_path(rest, true)?
            .ok_or(Error::BucketNotFound)
    }

    /// The bucket at `path`, the root bucket for an empty path: for copies that must carry
    /// whatever a source file holds.
    pub(crate) fn bucket_at(&mut self, path: &[&[u8]]) -> Result<Option<BucketMut<'_>>> {
        if path.is_empty() {
            return Ok(Some(BucketMut::borrowed(
                &self.shared,
                self.buckets.root.get_mut(),
            )));
        }
        self.bucket_path_mut(path)
    }

    /// For the vacuum: the committed pages this transaction started from, the meta they
    /// belong to, and the freelist (whose free set no reader can see).
    pub(crate) fn vacuum_view(&mut self) -> (Pages<'_>, &Meta, &AnyFreelist) {
        let WriteContext {
            map,
            page_size,
            high_water,
            core,
        } = &mut self.shared;
        (
            pages_of(map, *page_size, *high_water),
            &self.base,
            core.get_mut().writes.allocator.free_set(),
        )
    }

    /// Makes every commit so far durable: with commits made without syncs since the last
    /// durable one, commits this (unchanged) transaction as a durable one, which writes the
    /// freelist page and the meta; otherwise ends it, and syncs if `sync_anyway`. With
    /// `go_form` (the close), a durable meta in the one-sync form, which Go bbolt rejects, is
    /// followed by such a commit too, whose meta is in Go's form.
    pub(crate) fn make_durable(mut self, sync_anyway: bool, go_form: bool) -> Result<()> {
        let go_form_needed = go_form && self.writer.durable_one_sync;
        if self.writer.durable.txid == self.base.txid && !go_form_needed {
            let engine = self.engine;
            self.rollback();
            return if sync_anyway {
                engine.sync_or_poison()
            } else {
                Ok(())
            };
        }
        self.commit_unchanged = true;
        self.set_durability(Durability::Immediate);
        self.commit()
    }

    /// For the vacuum: the page allocator this transaction commits with.
    pub(crate) fn allocator_mut(&mut self) -> &mut Allocator {
        &mut self.shared.core.get_mut().writes.allocator
    }

    /// For the vacuum's planner: the planning face of the allocator (see
    /// [`Allocator::plan`]).
    pub(crate) fn allocation_plan(&mut self) -> Allocator<rbolt_freelist::FreeRuns> {
        self.shared.core.get_mut().writes.allocator.plan()
    }

    /// Sets the root bucket's sequence, which only files of other tools use.
    pub(crate) fn set_root_sequence(&mut self, sequence: u64) {
        self.buckets.root.get_mut().sequence = sequence;
        self.commit_unchanged = true;
    }

    /// Creates the top-level bucket `name`: `BucketExists` if it exists, `IncompatibleValue`
    /// if `name` holds a value (only files of other tools put values in the root).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     tx.create_bucket("users")?.put("alice", "admin")?;
    ///     assert!(matches!(tx.create_bucket("users"), Err(rbolt::Error::BucketExists)));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn create_bucket(&self, name: impl AsRef<[u8]>) -> Result<BucketMut<'_>> {
        self.open_top(name.as_ref(), Open::Create)?
            .ok_or(Error::BucketNotFound)
    }

    /// Creates the top-level bucket `name` unless it exists, and returns it.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// for run in 1..=3u8 {
    ///     // The first run creates the bucket, the later ones open it.
    ///     db.update(|tx| tx.create_bucket_if_not_exists("runs")?.put([run], ""))?;
    /// }
    /// db.view(|tx| {
    ///     assert_eq!(tx.bucket("runs")?.unwrap().iter().count(), 3);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn create_bucket_if_not_exists(&self, name: impl AsRef<[u8]>) -> Result<BucketMut<'_>> {
        self.open_top(name.as_ref(), Open::CreateIfNotExists)?
            .ok_or(Error::BucketNotFound)
    }

    /// Deletes the top-level bucket `name` and everything in it, freeing all their pages.
    /// `BucketInUse` while a handle holds it.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| tx.create_bucket_path(&["tmp", "inner"]).map(drop))?;
    /// db.update(|tx| {
    ///     let held = tx.bucket_mut("tmp")?.unwrap();
    ///     assert!(matches!(tx.delete_bucket("tmp"), Err(rbolt::Error::BucketInUse)));
    ///     drop(held);
    ///     tx.delete_bucket("tmp")?; // and "inner" with it
    ///     assert!(matches!(tx.delete_bucket("tmp"), Err(rbolt::Error::BucketNotFound)));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.view(|tx| {
    ///     assert!(tx.bucket("tmp")?.is_none());
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn delete_bucket(&self, name: impl AsRef<[u8]>) -> Result<()> {
        let name = name.as_ref();
        let mut root = self.buckets.root.borrow_mut();
        let mut core = self.shared.core.borrow_mut();
        delete_child(&self.shared, &mut core, &mut root, name)
    }

    /// Moves the bucket at path `from` to path `to` (both: top-level name, then nested
    /// names; the last name is the bucket's name there, so a move can also rename). The
    /// destination's parent must exist and `to` must be free; the new name is checked as
    /// `create_bucket` checks one. The bucket keeps what this transaction wrote in it. An
    /// error changes nothing. `BucketInUse` when a handle holds the top-level bucket of
    /// either path.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     tx.create_bucket("inbox")?.create_bucket("msg1")?.put("body", "hi")?;
    ///     tx.create_bucket("archive")?;
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.update(|tx| {
    ///     tx.move_bucket(&["inbox", "msg1"], &["archive", "2024-msg1"])?; // moved and renamed
    ///     assert!(matches!(
    ///         tx.move_bucket(&["archive"], &["archive", "x"]),
    ///         Err(rbolt::Error::MoveIntoSelf)
    ///     ));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.view(|tx| {
    ///     assert!(tx.bucket("inbox")?.unwrap().bucket("msg1")?.is_none());
    ///     let moved = tx.bucket("archive")?.unwrap().bucket("2024-msg1")?.unwrap();
    ///     assert_eq!(moved.get("body")?, Some(&b"hi"[..]));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn move_bucket<F: AsRef<[u8]>, T: AsRef<[u8]>>(&self, from: &[F], to: &[T]) -> Result<()> {
        let from: smallvec::SmallVec<[&[u8]; 8]> = from.iter().map(AsRef::as_ref).collect();
        let from = from.as_slice();
        let to: smallvec::SmallVec<[&[u8]; 8]> = to.iter().map(AsRef::as_ref).collect();
        let to = to.as_slice();
        let (Some((name, from_parent)), Some((new_name, to_parent))) =
            (from.split_last(), to.split_last())
        else {
            return Err(Error::BucketNameRequired);
        };
        let mut root = self.buckets.root.borrow_mut();
        let root = &mut *root;
        check_not_held(root, from[0])?;
        check_not_held(root, to[0])?;
        if from == to {
            return Err(Error::SameBuckets);
        }
        if to.len() > from.len() && to[..from.len()] == *from {
            return Err(Error::MoveIntoSelf);
        }
        check_name(new_name)?;
        let pages = self.shared.pages();
        let mut core = self.shared.core.borrow_mut();
        let arena = &mut core.arena;
        // Check both ends before changing either: the source is a bucket, the destination's
        // parent exists and the new name is free.
        let value = {
            let parent = state_at(pages, root, from_parent)?.ok_or(Error::BucketNotFound)?;
            let entry = parent.tree.get(pages, name)?.ok_or(Error::BucketNotFound)?;
            if !entry.is_bucket() {
                return Err(Error::IncompatibleValue);
            }
            entry.value.to_vec()
        };
        {
            let parent = state_at(pages, root, to_parent)?.ok_or(Error::BucketNotFound)?;
            match parent.tree.get(pages, new_name)? {
                Some(entry) if entry.is_bucket() => return Err(Error::BucketExists),
                Some(_) => return Err(Error::IncompatibleValue),
                None => {}
            }
        }
        // Insert at the destination first: if that fails nothing has changed. Then remove the
        // source; if that fails, take the insert back (its path is edited now, so that
        // cannot read a page and fail).
        {
            let parent = state_at(pages, root, to_parent)?.ok_or(Error::BucketNotFound)?;
            let outcome = parent
                .tree
                .put(pages, arena, new_name, &value, LEAF_FLAG_BUCKET)?;
            debug_assert_eq!(outcome, Put::Inserted);
        }
        let removed = {
            let parent = state_at(pages, root, from_parent)?.ok_or(Error::BucketNotFound)?;
            parent.tree.delete(pages, arena, name, LEAF_FLAG_BUCKET)
        };
        if let Err(error) = removed {
            let error = Error::from(error);
            let parent = state_at(pages, root, to_parent)?.ok_or(Error::BucketNotFound)?;
            if parent
                .tree
                .delete(pages, arena, new_name, LEAF_FLAG_BUCKET)
                .is_err()
            {
                core.broken = true;
            }
            return Err(error);
        }
        // The bucket's open state, with this transaction's edits, moves along.
        let from_state = state_at(pages, root, from_parent)?.ok_or(Error::BucketNotFound)?;
        if let Some(state) = from_state.children.remove(*name) {
            let to_state = state_at(pages, root, to_parent)?.ok_or(Error::BucketNotFound)?;
            to_state
                .children
                .insert(BucketName::from_slice(new_name), state);
        }
        Ok(())
    }

    /// Sets how this transaction's commit reaches the disk; the default is
    /// `Durability::Immediate`, or `Durability::None` when the database was opened with
    /// `Options::no_sync`, or `Durability::OneSync` (durable with one sync) with
    /// `Options::one_sync`. A bulk load can make its commits `None` and end with one
    /// `Immediate` commit or [`Db::sync`](crate::Db::sync), with no reopen.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use rbolt::Durability;
    /// let db = rbolt::Db::open(dir.path().join("db"))?;
    /// for chunk in 0..10u32 {
    ///     let tx = db.begin_write()?;
    ///     tx.set_durability(Durability::None);
    ///     let mut b = tx.create_bucket_if_not_exists(b"load")?;
    ///     for i in 0..100u32 {
    ///         b.put(&(chunk * 100 + i).to_be_bytes(), b"row")?;
    ///     }
    ///     drop(b);
    ///     tx.commit()?;
    /// }
    /// db.sync()?; // everything above is durable from here on
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn set_durability(&self, durability: Durability) {
        self.durability.set(durability);
    }

    /// How this transaction's commit will reach the disk.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use rbolt::{Db, Durability, Options};
    /// let db = Db::open_with(dir.path().join("db"), Options::default().no_sync(true))?;
    /// let tx = db.begin_write()?;
    /// assert_eq!(tx.durability(), Durability::None); // from `Options::no_sync`
    /// tx.set_durability(Durability::Immediate);
    /// assert_eq!(tx.durability(), Durability::Immediate);
    /// tx.commit()?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn durability(&self) -> Durability {
        self.durability.get()
    }

    /// Registers `f` to run after this transaction commits successfully. `f` may borrow
    /// anything that outlives the transaction's borrow of the handle, the handle included
    /// (inside [`Db::update`](crate::Db::update) too), so a hook can start the next transaction.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use std::cell::Cell;
    /// let committed = Cell::new(0);
    /// let db = rbolt::Db::open(dir.path().join("db"))?;
    /// let tx = db.begin_write()?;
    /// tx.on_commit(|| committed.set(committed.get() + 1));
    /// tx.rollback(); // a rolled-back transaction runs no hooks
    /// assert_eq!(committed.get(), 0);
    /// let tx = db.begin_write()?;
    /// tx.on_commit(|| committed.set(committed.get() + 1));
    /// tx.create_bucket("b")?;
    /// assert_eq!(committed.get(), 0); // not yet
    /// tx.commit()?;
    /// assert_eq!(committed.get(), 1);
    /// // Inside `update`, a hook that borrows the handle: it reads what the commit wrote.
    /// let seen = Cell::new(None);
    /// db.update(|tx| {
    ///     tx.on_commit(|| {
    ///         let tx = db.begin_read().unwrap();
    ///         seen.set(tx.bucket("b").unwrap().map(|b| b.get("k").unwrap().is_some()));
    ///     });
    ///     tx.bucket_mut("b")?.unwrap().put("k", "v")
    /// })?;
    /// assert_eq!(seen.get(), Some(true));
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn on_commit(&self, f: impl FnOnce() + 'db) {
        self.on_commit.borrow_mut().push(Box::new(f));
    }

    /// The transaction's counters so far. Borrows the transaction exclusively, so that every
    /// bucket handle is back and counted.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     for i in 0u32..2000 {
    ///         b.put(i.to_be_bytes(), [0u8; 64])?;
    ///     }
    ///     drop(b);
    ///     let stats = tx.stats();
    ///     assert!(stats.node_count > 0);
    ///     assert_eq!(stats.writes, 0); // nothing is written before the commit
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// assert!(db.stats().tx_stats.writes > 0);
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn stats(&mut self) -> TxStats {
        let mut stats = self.stats.clone();
        let pages_allocated = self
            .shared
            .core
            .get_mut()
            .writes
            .allocator
            .pages_allocated();
        stats.page_count = pages_allocated;
        stats.page_alloc = pages_allocated * self.engine.page_size as u64;
        let mut trees = rbolt_btree::TreeStats::default();
        self.buckets.root.get_mut().add_tree_stats(&mut trees);
        stats.node_count += trees.node_count;
        stats.split += trees.split;
        stats.rebalance += trees.rebalance;
        stats.spill += trees.spill;
        stats
    }

    /// Discards every change.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// let tx = db.begin_write()?;
    /// tx.create_bucket("scratch")?;
    /// tx.rollback();
    /// assert!(db.begin_read()?.bucket("scratch")?.is_none());
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn rollback(mut self) {
        self.abort();
    }

    /// Writes every change and makes it durable: dirty pages, then an fdatasync, then the
    /// meta, then an fdatasync (no syncs with [`Durability::None`], one after the meta with
    /// [`Durability::OneSync`], see there). A durable
    /// commit that changed nothing writes nothing, but still makes the commits before it
    /// durable if some were made without syncs. On error nothing of this transaction is
    /// visible; an error at or after the first sync poisons the handle. The `on_commit` hooks
    /// run after the writer is released, so a hook may start a write transaction.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("db");
    /// let db = rbolt::Db::open(&path)?;
    /// let tx = db.begin_write()?;
    /// tx.create_bucket("kept")?.put("k", "v")?;
    /// tx.commit()?;
    /// db.close()?;
    /// let db = rbolt::Db::open(&path)?; // durable: there after a reopen
    /// assert_eq!(db.begin_read()?.bucket("kept")?.unwrap().get("k")?, Some(&b"v"[..]));
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn commit(mut self) -> Result<()> {
        crate::trace::phase!("commit", txid = self.shared.core.get_mut().writes.txid().0);
        let started = Instant::now();
        let file_len_before = self.writer.file_len;
        match self.commit_inner() {
            Ok(()) => {
                self.stats.commit_time = started.elapsed();
                let txid = self.shared.core.get_mut().writes.txid().0;
                let file_len = self.writer.file_len;
                let engine = self.engine;
                let slow = engine.options.slow_commit_threshold;
                crate::trace::committed(
                    engine.path(),
                    slow,
                    &self.stats,
                    txid,
                    file_len_before,
                    file_len,
                );
                self.engine.counters.tx_committed(&self.stats());
                self.ended = true;
                let hooks = std::mem::take(self.on_commit.get_mut());
                drop(self);
                for f in hooks {
                    f();
                }
                Ok(())
            }
            Err(error) => {
                self.abort();
                Err(error)
            }
        }
    }

    /// Returns the freelist and the arena, with every page buffer still queued, to the writer
    /// state.
    pub(crate) fn give_back(&mut self) {
        self.ended = true;
        self.engine
            .writer_thread
            .store(0, std::sync::atomic::Ordering::Release);
        let core = self.shared.core.get_mut();
        let writes = &mut core.writes;
        self.writer.dirty_list = writes.take_dirty_list(&mut core.arena);
        writes.written.clear();
        self.writer.written_scratch = std::mem::take(&mut writes.written);
        self.writer.spare_state = self.buckets.take_spare();
        let freelist = writes.freelist();
        self.engine.counters.freelist_changed(freelist);
        let kind = freelist.kind();
        let freelist = std::mem::replace(freelist, AnyFreelist::new(kind));
        self.writer.freelist = Some(freelist);
        let page_size = self.engine.page_size;
        self.writer.arena = std::mem::replace(&mut core.arena, Arena::new(page_size));
        *self.buckets.root.get_mut() = BucketState::new_empty();
    }

    /// Undoes this transaction's freelist changes and ends it.
    pub(crate) fn abort(&mut self) {
        if self.ended {
            return;
        }
        let core = self.shared.core.get_mut();
        if self.meta_started {
            // The meta write began: the disk may hold this commit.
            self.engine.poison();
        }
        let txid = core.writes.txid();
        core.writes.freelist().rollback(txid);
        self.give_back();
    }
}

impl Drop for WriteTx<'_> {
    fn drop(&mut self) {
        self.abort();
    }
}
