//! The Raft log and vote in one rbolt file: [`LogStore`] and its [`LogReader`].

use crate::codec::{
    KEY_FORMAT, LOG_FORMAT, LOG_FORMAT_1, blocking, check_format, decode, decode_entry, encode,
    encode_entry, index_key, key_index, seal_entry,
};
use crate::error::{Error, Result};
use crate::files::open_or_create;
use crate::observe::{LogWrite, NoObserver, Observer, retry_no_space};
use openraft::entry::RaftEntry;
use openraft::storage::{IOFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::type_config::alias::{LogIdOf, VoteOf};
use openraft::{OptionalSend, RaftTypeConfig};
use rbolt::{Db, WriteTx};
use std::fmt::Debug;
use std::io;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// The bucket of log entries, keyed by the 8-byte big-endian index.
pub const LOG_BUCKET: &[u8] = b"raft_log";
/// The bucket of the vote, the last purged log id and the committed log id.
pub const LOG_META_BUCKET: &[u8] = b"raft_meta";

const KEY_VOTE: &[u8] = b"vote";
const KEY_PURGED: &[u8] = b"last_purged_log_id";
const KEY_COMMITTED: &[u8] = b"committed";

/// `limited_get_log_entries` stops adding entries past this many stored bytes (it always
/// returns at least one), so a replication batch never holds an unbounded log range; by
/// default (see [`LogStore::set_read_bytes_max`]).
pub const LIMITED_READ_BYTES_MAX: usize = 4 << 20;

/// The open log file, shared by the store and its readers.
struct LogFile {
    db: Db,
    path: PathBuf,
    /// Durable commits of the store, each two `fdatasync`s.
    commits: AtomicU64,
    /// Of those, the appends.
    appends: AtomicU64,
    /// Entries appended by them.
    entries_appended: AtomicU64,
    /// Where `limited_get_log_entries` and the apply stream stop a batch.
    read_bytes_max: AtomicUsize,
    /// Told of every durable write.
    observer: OnceLock<Arc<dyn Observer>>,
}

impl LogFile {
    fn observer(&self) -> &dyn Observer {
        match self.observer.get() {
            Some(observer) => observer.as_ref(),
            None => &NoObserver,
        }
    }
}

/// What a [`LogStore`] has written since it was opened: how well appends are batched, and
/// so how many `fdatasync`s each entry costs (two per commit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogCounters {
    /// Durable commits: appends, truncations, purges and votes.
    pub commits: u64,
    /// Of those commits, the appends.
    pub appends: u64,
    /// Entries appended.
    pub entries_appended: u64,
}

/// The Raft log and vote, stored in one rbolt file.
///
/// Every write is one rbolt commit, durable (two `fdatasync`s) before the call returns:
/// [`RaftLogStorage::append`] of any number of entries, [`RaftLogStorage::truncate_after`],
/// [`RaftLogStorage::purge`] and [`RaftLogStorage::save_vote`]. So the log on disk is always
/// one contiguous run of entries after the last purged id, whatever the moment of a crash.
///
/// [`RaftLogStorage::save_committed`] is the exception: it only records the id in memory, and
/// the next commit of any other kind writes it along. openraft calls it every time the commit
/// index moves, and a commit of its own each time would double the `fdatasync`s of the write
/// path; a committed id that lags on disk is safe (it is a lower bound, and the state machine
/// is durable on its own).
pub struct LogStore<C: RaftTypeConfig> {
    file: Arc<LogFile>,
    /// The newest committed id openraft reported.
    committed: Option<LogIdOf<C>>,
    /// Whether `committed` is newer than what the file holds.
    committed_unsaved: bool,
}

/// A read handle on a [`LogStore`]'s file, for openraft's replication and apply tasks. Each
/// call reads one consistent snapshot of the file, except `entries_stream`, which reads the
/// committed (hence unchanging) entries it is asked for in chunks.
pub struct LogReader<C: RaftTypeConfig> {
    file: Arc<LogFile>,
    _config: PhantomData<fn() -> C>,
}

impl<C: RaftTypeConfig> Clone for LogReader<C> {
    fn clone(&self) -> Self {
        LogReader {
            file: Arc::clone(&self.file),
            _config: PhantomData,
        }
    }
}

impl<C: RaftTypeConfig> Debug for LogStore<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogStore")
            .field("path", &self.file.path)
            .field("committed", &self.committed)
            .finish_non_exhaustive()
    }
}

impl<C: RaftTypeConfig> Debug for LogReader<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogReader")
            .field("path", &self.file.path)
            .finish_non_exhaustive()
    }
}

impl<C: RaftTypeConfig> LogStore<C> {
    /// Opens the log file at `path` with [`crate::rbolt_options`], creating it if missing.
    pub fn open(path: impl AsRef<Path>) -> Result<LogStore<C>> {
        LogStore::open_with(path, crate::rbolt_options())
    }

    /// Opens the log file at `path` with `options`, creating it if missing.
    ///
    /// `no_sync` in `options` gives up the durability this store promises; it is for tests
    /// whose files are thrown away.
    ///
    /// A new file is built under a temporary name (buckets and format included), synced, and
    /// only then given its name, with the directory synced: a crash while creating it leaves
    /// no file at `path` rather than a half-made one. The directory must exist.
    pub fn open_with(path: impl AsRef<Path>, options: rbolt::Options) -> Result<LogStore<C>> {
        let path = path.as_ref();
        let db = open_or_create(path, &options, |tx| {
            tx.create_bucket_if_not_exists(LOG_BUCKET)?;
            check_format(
                &mut tx.create_bucket_if_not_exists(LOG_META_BUCKET)?,
                path,
                LOG_FORMAT,
            )
        })?;
        LogStore::from_db(db)
    }

    /// Makes a log store of an open rbolt database, e.g. one on a simulated file
    /// (`Db::open_storage` with `rbolt::storage::SimFile`) in power-loss tests.
    pub fn from_db(db: Db) -> Result<LogStore<C>> {
        let path = db
            .path()
            .map_or_else(|| PathBuf::from("(no file)"), Path::to_path_buf);
        let format = db.view(|tx| {
            Ok::<_, rbolt::Error>(match tx.bucket(LOG_META_BUCKET)? {
                Some(meta) if tx.bucket(LOG_BUCKET)?.is_some() => {
                    meta.get(KEY_FORMAT)?.map(<[u8]>::to_vec)
                }
                _ => None,
            })
        })?;
        match format.as_deref() {
            Some(LOG_FORMAT) => {}
            Some(LOG_FORMAT_1) => upgrade_from_format_1(&db)?,
            _ => {
                let tx = db.begin_write()?;
                tx.create_bucket_if_not_exists(LOG_BUCKET)?;
                check_format(
                    &mut tx.create_bucket_if_not_exists(LOG_META_BUCKET)?,
                    &path,
                    LOG_FORMAT,
                )?;
                tx.commit()?;
            }
        }
        let committed = {
            let tx = db.begin_read()?;
            read_meta::<LogIdOf<C>>(&tx, KEY_COMMITTED, "committed log id")?
        };
        Ok(LogStore {
            file: Arc::new(LogFile {
                db,
                path,
                commits: AtomicU64::new(0),
                appends: AtomicU64::new(0),
                entries_appended: AtomicU64::new(0),
                read_bytes_max: AtomicUsize::new(LIMITED_READ_BYTES_MAX),
                observer: OnceLock::new(),
            }),

            committed,
            committed_unsaved: false,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.file.path
    }

    /// The rbolt database holding the log, for inspection. Writing to it behind the store's
    /// back breaks the store's invariants.
    pub fn db(&self) -> &Db {
        &self.file.db
    }

    /// What this store has written since it was opened.
    pub fn counters(&self) -> LogCounters {
        self.reader().counters()
    }

    /// Makes `limited_get_log_entries` (what openraft replicates in one append request) and
    /// the apply stream stop a batch once it holds `bytes` stored bytes (it always holds at
    /// least one entry, so a batch is at most `bytes` plus one entry). By default
    /// [`LIMITED_READ_BYTES_MAX`]. A network whose requests have a size limit sets this below
    /// it, less the largest entry it accepts.
    pub fn set_read_bytes_max(&self, bytes: usize) {
        self.file
            .read_bytes_max
            .store(bytes.max(1), Ordering::Relaxed);
    }

    /// Tells `observer` of every durable write of this store from now on. Only the first call
    /// has an effect: an observer is set once, before the store is handed to openraft.
    pub fn set_observer(&self, observer: Arc<dyn Observer>) {
        let _ = self.file.observer.set(observer);
    }

    /// Reads every entry in the log and checks its checksum and its index; returns how many
    /// there are. A damaged entry is [`Error::Damaged`] naming it: run this before handing the
    /// store to openraft, so a damaged file stops the start with that message instead of
    /// failing later in the middle of a replication.
    pub fn verify(&self) -> Result<u64> {
        let reader = self.reader();
        let tx = self.file.db.begin_read()?;
        let bucket = tx
            .bucket(LOG_BUCKET)?
            .ok_or_else(|| Error::invalid("the raft_log bucket is missing"))?;
        let mut n = 0;
        let mut expected: Option<u64> = None;
        for item in bucket.iter() {
            let item = item?;
            let index = key_index(item.key())?;
            if let Some(expected) = expected
                && index != expected
            {
                return Err(Error::invalid(format!(
                    "hole in the log: index {index} follows {}",
                    expected - 1
                )));
            }
            reader.decode_at(index, item.value())?;
            n += 1;
            expected = index.checked_add(1);
        }
        Ok(n)
    }

    /// A reader of this store's file.
    pub fn reader(&self) -> LogReader<C> {
        LogReader {
            file: Arc::clone(&self.file),
            _config: PhantomData,
        }
    }

    /// Runs `f` in one write transaction on the blocking pool and commits it durably, with the
    /// newest committed id if it has not been written yet.
    /// `f` returns its value, the kind of write and the entries it appended, for the observer.
    /// A commit that fails for want of space ran `f` in a transaction that rolled back, so it
    /// runs again in a new one while the observer asks for it ([`Observer::no_space`]).
    async fn write<T: Send + 'static>(
        &mut self,
        f: impl Fn(&mut WriteTx<'_>) -> Result<(T, LogWrite, u64)> + Send + 'static,
    ) -> Result<T> {
        let committed = if self.committed_unsaved {
            Some(encode("committed log id", &self.committed)?)
        } else {
            None
        };
        let file = Arc::clone(&self.file);
        let value = blocking::<C, _>(move || {
            let started = Instant::now();
            let (value, write, entries) = retry_no_space(file.observer(), &file.path, || {
                let mut tx = file.db.begin_write()?;
                let done = f(&mut tx)?;
                if let Some(committed) = &committed {
                    meta_bucket(&mut tx)?.put(KEY_COMMITTED, committed)?;
                }
                tx.commit()?;
                Ok(done)
            })?;
            file.commits.fetch_add(1, Ordering::Relaxed);
            file.observer()
                .log_written(write, entries, started.elapsed());
            Ok(value)
        })
        .await?;
        self.committed_unsaved = false;
        Ok(value)
    }

    /// Writes the committed id recorded by `save_committed` now, if it is not on disk yet.
    pub async fn flush_committed(&mut self) -> Result<()> {
        if self.committed_unsaved {
            self.write(|_| Ok(((), LogWrite::Committed, 0))).await?;
        }
        Ok(())
    }
}

fn meta_bucket<'tx>(tx: &'tx mut WriteTx<'_>) -> Result<rbolt::BucketMut<'tx>> {
    tx.bucket_mut(LOG_META_BUCKET)?
        .ok_or_else(|| Error::invalid("the raft_meta bucket is missing"))
}

fn log_bucket<'tx>(tx: &'tx mut WriteTx<'_>) -> Result<rbolt::BucketMut<'tx>> {
    tx.bucket_mut(LOG_BUCKET)?
        .ok_or_else(|| Error::invalid("the raft_log bucket is missing"))
}

/// Rewrites a format 1 log (entries without checksums) as format 2 in one commit.
fn upgrade_from_format_1(db: &Db) -> Result<()> {
    let mut tx = db.begin_write()?;
    let mut log = log_bucket(&mut tx)?;
    let mut sealed = Vec::new();
    for item in log.as_bucket().iter() {
        let item = item?;
        let index = key_index(item.key())?;
        let value = item
            .value()
            .ok_or_else(|| Error::invalid(format!("log index {index} holds a bucket")))?;
        sealed.push((index, seal_entry(index, value)));
    }
    for (index, value) in &sealed {
        log.put(index_key(*index), value)?;
    }
    drop(log);
    meta_bucket(&mut tx)?.put(KEY_FORMAT, LOG_FORMAT)?;
    tx.commit()?;
    Ok(())
}

/// Reads and decodes `key` of the meta bucket.
fn read_meta<T: serde::de::DeserializeOwned>(
    tx: &rbolt::ReadTx<'_>,
    key: &[u8],
    what: &'static str,
) -> Result<Option<T>> {
    let bucket = tx
        .bucket(LOG_META_BUCKET)?
        .ok_or_else(|| Error::invalid("the raft_meta bucket is missing"))?;
    match bucket.get(key)? {
        Some(bytes) => decode::<Option<T>>(what, bytes),
        None => Ok(None),
    }
}

/// Deletes the entries with index in `range` from `bucket`; returns how many there were.
fn delete_range(bucket: &mut rbolt::BucketMut<'_>, range: impl RangeBounds<u64>) -> Result<u64> {
    let start = match range.start_bound() {
        Bound::Included(&i) => i,
        Bound::Excluded(&i) => match i.checked_add(1) {
            Some(i) => i,
            None => return Ok(0),
        },
        Bound::Unbounded => 0,
    };
    let mut deleted = 0;
    let mut cursor = bucket.cursor_mut();
    let mut at = cursor
        .seek(index_key(start))?
        .map(|e| key_index(e.key()))
        .transpose()?;
    while let Some(index) = at {
        if !range.contains(&index) {
            break;
        }
        cursor.delete()?;
        deleted += 1;
        at = cursor.next()?.map(|e| key_index(e.key())).transpose()?;
    }
    Ok(deleted)
}

/// The last index in the log, if there is an entry.
fn last_index(bucket: &rbolt::Bucket<'_>) -> Result<Option<u64>> {
    bucket
        .cursor()
        .last()?
        .map(|e| key_index(e.key()))
        .transpose()
}

impl<C: RaftTypeConfig> LogReader<C> {
    /// The rbolt database holding the log, for inspection and maintenance (an online
    /// vacuum moves pages and changes no entry). Writing entries to it behind the store's
    /// back breaks the store's invariants.
    pub fn db(&self) -> &Db {
        &self.file.db
    }

    /// What the store of this file has written since it was opened.
    pub fn counters(&self) -> LogCounters {
        let entries_appended = self.file.entries_appended.load(Ordering::Relaxed);
        LogCounters {
            commits: self.file.commits.load(Ordering::Relaxed),
            appends: self.file.appends.load(Ordering::Relaxed),
            entries_appended,
        }
    }

    /// The entry stored under `index` (`None`: a bucket there), its checksum and index checked.
    fn decode_at(&self, index: u64, value: Option<&[u8]>) -> Result<C::Entry> {
        let value =
            value.ok_or_else(|| Error::invalid(format!("log index {index} holds a bucket")))?;
        let entry: C::Entry = decode_entry(&self.file.path, index, value)?;
        if entry.index() != index {
            return Err(Error::invalid(format!(
                "log key {index} holds the entry of index {}",
                entry.index()
            )));
        }
        Ok(entry)
    }

    fn read_bytes_max(&self) -> usize {
        self.file.read_bytes_max.load(Ordering::Relaxed)
    }

    /// Reads the entries in `range`, checking that they are contiguous and that each is the
    /// entry its key names. Stops after `bytes_max` stored bytes (at least one entry).
    fn read_entries(
        &self,
        range: (Bound<u64>, Bound<u64>),
        bytes_max: usize,
    ) -> Result<Vec<C::Entry>> {
        let tx = self.file.db.begin_read()?;
        let bucket = tx
            .bucket(LOG_BUCKET)?
            .ok_or_else(|| Error::invalid("the raft_log bucket is missing"))?;
        let start = match range.0 {
            Bound::Included(i) => i,
            Bound::Excluded(i) => match i.checked_add(1) {
                Some(i) => i,
                None => return Ok(Vec::new()),
            },
            Bound::Unbounded => 0,
        };
        let mut entries = Vec::new();
        let mut bytes = 0usize;
        let mut expected: Option<u64> = None;
        for item in bucket.range(&index_key(start)[..]..) {
            let item = item?;
            let index = key_index(item.key())?;
            if !range.contains(&index) {
                break;
            }
            if let Some(expected) = expected
                && index != expected
            {
                return Err(Error::invalid(format!(
                    "hole in the log: index {index} follows {}",
                    expected - 1
                )));
            }
            let value = item.value();
            let entry = self.decode_at(index, value)?;
            entries.push(entry);
            bytes += value.map_or(0, <[u8]>::len);
            if bytes >= bytes_max {
                break;
            }
            expected = index.checked_add(1);
        }
        Ok(entries)
    }

    fn read_vote_now(&self) -> Result<Option<VoteOf<C>>> {
        let tx = self.file.db.begin_read()?;
        read_meta(&tx, KEY_VOTE, "vote")
    }

    /// The last purged log id and the last log id, from one snapshot of the file.
    fn log_state(&self) -> Result<LogState<C>> {
        let tx = self.file.db.begin_read()?;
        let last_purged_log_id = read_meta::<LogIdOf<C>>(&tx, KEY_PURGED, "last purged log id")?;
        let bucket = tx
            .bucket(LOG_BUCKET)?
            .ok_or_else(|| Error::invalid("the raft_log bucket is missing"))?;
        let last_log_id = match bucket.cursor().last()? {
            Some(item) => {
                let index = key_index(item.key())?;
                Some(self.decode_at(index, item.value())?.log_id())
            }
            None => last_purged_log_id.clone(),
        };
        Ok(LogState {
            last_purged_log_id,
            last_log_id,
        })
    }
}

fn bounds(range: &impl RangeBounds<u64>) -> (Bound<u64>, Bound<u64>) {
    (range.start_bound().cloned(), range.end_bound().cloned())
}

impl<C: RaftTypeConfig> LogReader<C> {
    /// The entries of `range` as a stream read in chunks of about the read limit
    /// ([`LogStore::set_read_bytes_max`]), each chunk one read transaction. Entries in the range must not change while it
    /// streams, as committed entries do not; a chunk that does not start where the previous
    /// one ended is an error, not a silent hole.
    fn chunked_stream(
        &self,
        range: (Bound<u64>, Bound<u64>),
    ) -> futures_util::stream::BoxStream<'static, io::Result<C::Entry>> {
        use futures_util::{StreamExt, TryStreamExt, stream};
        let start = match range.0 {
            Bound::Included(i) => Some(i),
            Bound::Excluded(i) => i.checked_add(1),
            Bound::Unbounded => Some(0),
        };
        let end = range.1;
        let reader = self.clone();
        // State: the next index to read, and whether a chunk was read already.
        let chunks = stream::try_unfold((start, false), move |(next, continuing)| {
            let reader = reader.clone();
            async move {
                let Some(next) = next else {
                    return Ok(None);
                };
                let chunk = blocking::<C, _>(move || {
                    let bytes_max = reader.read_bytes_max();
                    reader.read_entries((Bound::Included(next), end), bytes_max)
                })
                .await?;
                let (Some(first), Some(last)) = (chunk.first(), chunk.last()) else {
                    return Ok(None);
                };
                if continuing && first.index() != next {
                    return Err(Error::invalid(format!(
                        "hole in the log: index {} follows {}",
                        first.index(),
                        next - 1
                    )));
                }
                let after = last.index().checked_add(1);
                Ok(Some((chunk, (after, true))))
            }
        });
        chunks
            .map_ok(|chunk| stream::iter(chunk.into_iter().map(Ok)))
            .map_err(io::Error::from)
            .try_flatten()
            .boxed()
    }
}

impl<C: RaftTypeConfig> RaftLogReader<C> for LogReader<C> {
    /// Streams committed entries for `apply` in bounded chunks, so a long catch-up neither
    /// holds the whole range in memory nor one read transaction open throughout.
    async fn entries_stream<RB>(
        &mut self,
        range: RB,
    ) -> impl futures_util::Stream<Item = io::Result<C::Entry>> + OptionalSend
    where
        RB: RangeBounds<u64> + Clone + Debug + OptionalSend,
    {
        self.chunked_stream(bounds(&range))
    }

    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> io::Result<Vec<C::Entry>> {
        let reader = self.clone();
        let range = bounds(&range);
        Ok(blocking::<C, _>(move || reader.read_entries(range, usize::MAX)).await?)
    }

    async fn read_vote(&mut self) -> io::Result<Option<VoteOf<C>>> {
        let reader = self.clone();
        Ok(blocking::<C, _>(move || reader.read_vote_now()).await?)
    }

    async fn limited_get_log_entries(&mut self, start: u64, end: u64) -> io::Result<Vec<C::Entry>> {
        let reader = self.clone();
        let range = (Bound::Included(start), Bound::Excluded(end));
        Ok(blocking::<C, _>(move || {
            let bytes_max = reader.read_bytes_max();
            reader.read_entries(range, bytes_max)
        })
        .await?)
    }
}

impl<C: RaftTypeConfig> RaftLogReader<C> for LogStore<C> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> io::Result<Vec<C::Entry>> {
        self.reader().try_get_log_entries(range).await
    }

    async fn read_vote(&mut self) -> io::Result<Option<VoteOf<C>>> {
        self.reader().read_vote().await
    }

    async fn limited_get_log_entries(&mut self, start: u64, end: u64) -> io::Result<Vec<C::Entry>> {
        self.reader().limited_get_log_entries(start, end).await
    }
}

impl<C: RaftTypeConfig> RaftLogStorage<C> for LogStore<C> {
    type LogReader = LogReader<C>;

    async fn get_log_state(&mut self) -> io::Result<LogState<C>> {
        let reader = self.reader();
        Ok(blocking::<C, _>(move || reader.log_state()).await?)
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.reader()
    }

    async fn save_vote(&mut self, vote: &VoteOf<C>) -> io::Result<()> {
        let vote = encode("vote", &Some(vote))?;
        self.write(move |tx| {
            meta_bucket(tx)?.put(KEY_VOTE, &vote)?;
            Ok(((), LogWrite::Vote, 0))
        })
        .await?;
        Ok(())
    }

    async fn save_committed(&mut self, committed: Option<LogIdOf<C>>) -> io::Result<()> {
        if committed != self.committed {
            self.committed = committed;
            self.committed_unsaved = true;
        }
        Ok(())
    }

    async fn read_committed(&mut self) -> io::Result<Option<LogIdOf<C>>> {
        Ok(self.committed.clone())
    }

    async fn append<I>(&mut self, entries: I, callback: IOFlushed<C>) -> io::Result<()>
    where
        I: IntoIterator<Item = C::Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let encoded = entries
            .into_iter()
            .map(|entry| Ok((entry.index(), encode_entry(entry.index(), &entry)?)))
            .collect::<Result<Vec<(u64, Vec<u8>)>>>();
        let result = match encoded {
            Ok(encoded) if encoded.is_empty() => Ok(()),
            Ok(encoded) => {
                let n = encoded.len() as u64;
                let file = Arc::clone(&self.file);
                let appended = self
                    .write(move |tx| {
                        append_in::<C>(tx, &encoded)?;
                        Ok(((), LogWrite::Append, n))
                    })
                    .await;
                if appended.is_ok() {
                    file.appends.fetch_add(1, Ordering::Relaxed);
                    file.entries_appended.fetch_add(n, Ordering::Relaxed);
                }
                appended
            }
            Err(error) => Err(error),
        };
        // The commit above is durable (or failed) by now: only then is openraft told.
        match result {
            Ok(()) => {
                callback.io_completed(Ok(()));
                Ok(())
            }
            Err(error) => {
                let error = io::Error::from(error);
                callback.io_completed(Err(io::Error::new(error.kind(), error.to_string())));
                Err(error)
            }
        }
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogIdOf<C>>) -> io::Result<()> {
        let after = last_log_id.map(|id| id.index());
        self.write(move |tx| {
            let mut log = log_bucket(tx)?;
            match after {
                Some(index) => delete_range(&mut log, (Bound::Excluded(index), Bound::Unbounded))?,
                None => delete_range(&mut log, ..)?,
            };
            Ok(((), LogWrite::Truncate, 0))
        })
        .await?;
        Ok(())
    }

    async fn purge(&mut self, log_id: LogIdOf<C>) -> io::Result<()> {
        let index = log_id.index();
        let purged = encode("last purged log id", &Some(&log_id))?;
        self.write(move |tx| {
            let previous = {
                let meta = meta_bucket(tx)?;
                match meta.get(KEY_PURGED)? {
                    Some(bytes) => decode::<Option<LogIdOf<C>>>("last purged log id", bytes)?,
                    None => None,
                }
            };
            // Purging never moves back: a stale request must not make purged entries look
            // present again.
            if previous.is_some_and(|p| p.index() >= index) {
                return Ok(((), LogWrite::Purge, 0));
            }
            delete_range(&mut log_bucket(tx)?, ..=index)?;
            meta_bucket(tx)?.put(KEY_PURGED, &purged)?;
            Ok(((), LogWrite::Purge, 0))
        })
        .await?;
        Ok(())
    }
}

/// Puts `entries` (index, encoded entry) after the last entry, refusing anything that would
/// leave a hole: they must be consecutive and start right after the last entry, or right after
/// the purge point when the log is empty.
fn append_in<C: RaftTypeConfig>(tx: &mut WriteTx<'_>, entries: &[(u64, Vec<u8>)]) -> Result<()> {
    let purged: Option<u64> = {
        let meta = meta_bucket(tx)?;
        match meta.get(KEY_PURGED)? {
            Some(bytes) => {
                decode::<Option<LogIdOf<C>>>("last purged log id", bytes)?.map(|p| p.index())
            }
            None => None,
        }
    };
    let mut log = log_bucket(tx)?;
    let last = last_index(&log.as_bucket())?;
    let expected = last.or(purged).map(|i| i + 1);
    let first = entries[0].0;
    if let Some(expected) = expected
        && first != expected
    {
        return Err(Error::invalid(format!(
            "append of index {first} would not follow the log, whose next index is {expected}"
        )));
    }
    for (offset, (index, entry)) in entries.iter().enumerate() {
        if *index != first + offset as u64 {
            return Err(Error::invalid(format!(
                "appended entries are not consecutive: index {index} at position {offset} after {first}"
            )));
        }
        log.put(index_key(*index), entry)?;
    }
    Ok(())
}
