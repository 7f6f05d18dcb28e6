//! Recovery at open: reading both metas (the page size from meta 0, or by probing for meta 1),
//! telling an interrupted creation from a file of another program, choosing the meta to open
//! (a torn one falls back, one past the end of the file is refused, a non-durable one is
//! trusted only in the boot that wrote it), writing a new file, and loading the freelist.

use crate::engine::snapshot::Snapshot;
use crate::engine::{Engine, TXID_MAX};
use crate::error::{Error, Result};
use crate::options::Options;
use crate::storage::{Mapping, Storage};
use crate::walk::PageSet;
use rbolt_btree::Pages;
use rbolt_freelist::{AnyFreelist, Freelist};
use rbolt_page::{
    BootId, Corruption, EMPTY_DB_PAGES, FreelistPage, MAGIC, META_PAGE_LEN, META_PAGE_READ_LEN,
    Meta, MetaDurability, ONE_SYNC_LEN_MAX, OneSyncRecord, PAGE_SIZE_SCAN_MAX, PGID_NO_FREELIST,
    PagesDigest, Pgid, Reason, empty_db_prefixes, find_meta1, page_digest, read_meta_page,
    run_digest, write_empty_db,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Writes a new database: both metas, an empty freelist (page 2) and an empty root leaf
/// (page 3) in one write, then syncs.
///
/// A crash before the sync can leave any part of the four pages written; no commit can exist
/// yet, and [`interrupted_creation`] recognises such a file and writes it again.
pub(super) fn init(storage: &dyn Storage, page_size: usize) -> std::io::Result<()> {
    let mut buf = vec![0u8; page_size * EMPTY_DB_PAGES];
    write_empty_db(&mut buf, page_size);
    storage.write_all_at(&buf, 0)?;
    storage.sync_data()
}

/// Whether the file holds no commit and an interrupted creation left it incomplete (or it is
/// empty): then it is initialised again, with the page size returned. Only read-write opens
/// act on it; nothing is lost, since a file in this state has never been committed to.
///
/// Creation is one write of four pages and one sync; a crash before the sync can leave any of
/// its sectors written or not, and a failed write (`ENOSPC`) any prefix of it. So a file
/// qualifies when its newest intact meta is still that of a new file (txid 0 or 1, four
/// pages) but the pages are not all as creation wrote them (a meta page holding no valid meta
/// beside a valid new-file meta is left out of that comparison: a later commit's meta write,
/// torn or garbled, put it there); or when no meta is intact and every byte of the
/// file is either zero or what creation with this open's page size writes there. Anything else
/// — a file of another program, say — is left alone. (A committed file cut from outside to
/// fewer bytes than a meta page also qualifies when what is left is the start of its meta 0,
/// which every meta shares with a new file's: nothing of its data is left in it either.)
pub(super) fn interrupted_creation(
    storage: &dyn Storage,
    file_len: u64,
    found: &FoundMetas,
    options: &Options,
) -> Result<Option<usize>> {
    let path = storage.path();
    if file_len == 0 {
        return Ok(Some(options.page_size_for_new_file()));
    }
    let (page_size, fresh_metas) = match found.newest_intact() {
        Some(newest) => {
            // A meta naming a huge page size is more likely damage than a creation: writing
            // four such pages again is not done on its word.
            let fresh = newest.txid <= 1
                && newest.pgid == EMPTY_DB_PAGES as u64
                && newest.page_size <= PAGE_SIZE_SCAN_MAX;
            if !fresh {
                return Ok(None);
            }
            (newest.page_size as usize, true)
        }
        None => (options.page_size_for_new_file(), false),
    };
    let image_len = (EMPTY_DB_PAGES * page_size) as u64;
    if file_len > image_len {
        return Ok(None);
    }
    // Compare with what creation writes: the start of each page, zeros elsewhere. The file is
    // at most four pages, and read in pieces of at most a page.
    let prefixes = empty_db_prefixes(page_size);
    let expected = |offset: u64| -> u8 {
        let (page, within) = (
            offset / page_size as u64,
            (offset % page_size as u64) as usize,
        );
        prefixes[page as usize].get(within).copied().unwrap_or(0)
    };
    let mut matches = true;
    let mut buf = vec![0u8; page_size.min(file_len as usize)];
    let mut offset = 0u64;
    while offset < file_len {
        let len = ((file_len - offset) as usize).min(buf.len());
        storage
            .read_exact_at(&mut buf[..len], offset)
            .map_err(|e| Error::io(path, e))?;
        for (i, &have) in buf[..len].iter().enumerate() {
            let at = offset + i as u64;
            // A meta page that holds no valid meta beside a valid new-file meta was written
            // after the creation (a commit that did not last: torn, or garbled by a power
            // loss), not by it: the valid meta and the pages it names are the whole file.
            let meta_slot = (at / page_size as u64) as usize;
            if fresh_metas && meta_slot < 2 && !found.is_valid(meta_slot) {
                continue;
            }
            let want = expected(at);
            // Intact new-file metas: any difference means a page is missing. No meta: every
            // byte is either one creation wrote or still zero.
            if have != want && (fresh_metas || have != 0) {
                matches = false;
            }
        }
        offset += len as u64;
    }
    if fresh_metas {
        let complete = matches && file_len == image_len && found.any_valid();
        return Ok((!complete).then_some(page_size));
    }
    let torn_creation = matches;
    Ok(torn_creation.then_some(page_size))
}

/// One meta of a file, as read at open.
#[derive(Debug)]
enum MetaState {
    /// Intact, and its fields are sound.
    Valid(Meta),
    /// Intact, but its high-water mark lies past the end of the file.
    PastEnd(Meta),
    /// Intact (its checksum matches) but a field is impossible.
    Unsound(Meta, Corruption),
    /// Intact, but written without a sync in another boot than this one: a power loss or an
    /// OS crash since may have dropped any page it points at, so it is not opened.
    Stale(Meta),
    /// Intact, written by a one-sync commit whose pages do not give its digest (or lie
    /// outside the file): its one sync did not finish before a power loss, so it is not
    /// opened, and the other meta, which its commit could not have touched, is.
    Unverified(Meta),
    /// Intact, written without a sync in this boot, but its high-water mark lies past the end
    /// of the file: pages it reaches are gone (the file was cut since, as the close of an open
    /// that fell back from it to the durable meta may cut it), so it is not opened, and the
    /// durable meta it built on is.
    Cut(Meta),
    /// Not a meta: torn, absent or of another format.
    Broken(Corruption),
}

impl MetaState {
    /// The meta, if its checksum matched: it was written whole.
    fn intact(&self) -> Option<&Meta> {
        match self {
            MetaState::Valid(meta)
            | MetaState::PastEnd(meta)
            | MetaState::Unsound(meta, _)
            | MetaState::Stale(meta)
            | MetaState::Unverified(meta)
            | MetaState::Cut(meta) => Some(meta),
            MetaState::Broken(_) => None,
        }
    }

    /// The meta, if it is intact and may be opened (not stale).
    fn trusted(&self) -> Option<&Meta> {
        match self {
            MetaState::Stale(_) | MetaState::Unverified(_) | MetaState::Cut(_) => None,
            state => state.intact(),
        }
    }
}

/// What the two metas of a file hold.
#[derive(Debug)]
pub(super) struct FoundMetas {
    /// The page size: meta 0's, or that of meta 1 found by probing; `None` if neither.
    page_size: Option<u64>,
    /// Meta 0 and meta 1 (both `Broken` when no page size was found).
    metas: [MetaState; 2],
    /// How each meta was written: a trusted non-durable meta (this boot's) is opened like a
    /// durable one, and made durable at once.
    durability: [MetaDurability; 2],
    /// The first bytes of the file, to tell "not a bbolt file" from a damaged one; `None`
    /// when the file is too short to hold them.
    first: Option<[u8; ONE_SYNC_LEN_MAX]>,
    /// Why meta 0 did not give the page size.
    meta0_error: Option<Corruption>,
}

impl FoundMetas {
    /// The intact meta with the largest txid.
    fn newest_intact(&self) -> Option<&Meta> {
        self.metas
            .iter()
            .filter_map(MetaState::intact)
            .max_by_key(|meta| meta.txid)
    }

    /// The intact meta with the largest txid that may be opened.
    fn newest_trusted(&self) -> Option<&Meta> {
        self.metas
            .iter()
            .filter_map(MetaState::trusted)
            .max_by_key(|meta| meta.txid)
    }

    fn any_valid(&self) -> bool {
        (0..2).any(|slot| self.is_valid(slot))
    }

    fn is_valid(&self, slot: usize) -> bool {
        matches!(self.metas.get(slot), Some(MetaState::Valid(_)))
    }

    /// The durable meta in the other slot than `chosen`'s, when it holds a sound one: what a
    /// non-durable `chosen` builds on (commits without syncs never write its slot).
    pub(super) fn durable_beside(&self, chosen: &Meta) -> Option<(Meta, MetaDurability)> {
        let other = (1 - chosen.txid % 2) as usize;
        match (&self.metas[other], self.durability[other]) {
            (
                MetaState::Valid(meta),
                durability @ (MetaDurability::Durable | MetaDurability::OneSync),
            ) if meta.txid < chosen.txid => Some((*meta, durability)),
            _ => None,
        }
    }

    /// Why the open of `chosen` falls back from the other meta, if it does (for the recovery
    /// event at open): the other slot holds a torn meta, or a newer one that cannot be opened.
    pub(super) fn fallback(&self, chosen: &Meta) -> Option<&'static str> {
        match &self.metas[(1 - chosen.txid % 2) as usize] {
            MetaState::Broken(_) => Some("the other meta is torn or damaged"),
            MetaState::PastEnd(meta) if meta.txid > chosen.txid => {
                Some("the newest meta points past the end of the file (fallback_on_truncation)")
            }
            MetaState::Unsound(meta, _) if meta.txid > chosen.txid => {
                Some("the newest meta holds an impossible field")
            }
            MetaState::Stale(meta) if meta.txid > chosen.txid => {
                Some("the newest commits were made without syncs before the last reboot")
            }
            MetaState::Unverified(meta) if meta.txid > chosen.txid => {
                Some("the newest commit's one sync did not finish: its pages are not all there")
            }
            MetaState::Cut(meta) if meta.txid > chosen.txid => {
                Some("the newest commits were made without syncs, and the file was cut since")
            }
            _ => None,
        }
    }

    /// The page size and the meta to open from: the newest sound meta. A torn newest meta
    /// (checksum wrong) falls back to the other; an intact newest meta past the end of the
    /// file does not, unless the options ask for it (see `Error::Truncated`).
    pub(super) fn choose(
        &self,
        path: Option<&Path>,
        file_len: u64,
        options: &Options,
    ) -> Result<(usize, Meta, MetaDurability)> {
        let Some(page_size) = self.page_size else {
            let Some(first) = self.first else {
                return Err(Error::Invalid {
                    path: path.map(PathBuf::from),
                    reason: format!("the file is {file_len} bytes, too short for a meta page"),
                });
            };
            let error = self
                .meta0_error
                .clone()
                .unwrap_or_else(|| Corruption::new(Pgid(0), Reason::NoMeta));
            if Meta::read_unchecked(&first).is_none_or(|m| m.magic != MAGIC) {
                // Not even the magic number: not a bbolt file at all, whatever else is wrong.
                return Err(Error::Invalid {
                    path: path.map(PathBuf::from),
                    reason: format!("not a bbolt database ({error})"),
                });
            }
            return Err(Error::from_meta(path, error));
        };
        let truncated = |meta: &Meta| Error::Truncated {
            path: path.map(PathBuf::from),
            expected: meta.pgid.saturating_mul(page_size),
            actual: file_len,
        };
        let past_end = self.metas.iter().find_map(|state| match state {
            MetaState::PastEnd(meta) if self.newest_trusted() == Some(meta) => Some(meta),
            _ => None,
        });
        if let Some(meta) = past_end
            && !options.fallback_on_truncation
        {
            return Err(truncated(meta));
        }
        let best = self
            .metas
            .iter()
            .zip(self.durability)
            .filter_map(|(state, durability)| match state {
                MetaState::Valid(meta) => Some((*meta, durability)),
                _ => None,
            })
            .max_by_key(|(meta, _)| meta.txid);
        if let Some((meta, durability)) = best {
            return Ok((page_size as usize, meta, durability));
        }
        if let Some(meta) = past_end {
            return Err(truncated(meta));
        }
        Err(self.no_sound_meta(path))
    }

    /// The error of a file none of whose metas may be opened: the first meta's reason.
    fn no_sound_meta(&self, path: Option<&Path>) -> Error {
        let error = self
            .metas
            .iter()
            .find_map(|state| match state {
                MetaState::Unsound(_, error) | MetaState::Broken(error) => Some(error.clone()),
                MetaState::Stale(meta) | MetaState::Cut(meta) => {
                    Some(Corruption::new(Pgid(meta.txid % 2), Reason::NoDurableMeta))
                }
                MetaState::Unverified(meta) => Some(Corruption::new(
                    Pgid(meta.txid % 2),
                    Reason::Other("a one-sync meta whose pages do not give its digest"),
                )),
                _ => None,
            })
            .expect("no sound meta means an error was recorded");
        Error::from_meta(path, error)
    }
}

/// Reads both metas. The page size comes from meta 0, or else from meta 1, found by probing
/// the powers of two and then by scanning the start of the file for it (Go bbolt writes page
/// sizes that are not powers of two, and a torn meta 0 is what a crash leaves).
pub(super) fn read_metas(
    storage: &dyn Storage,
    path: Option<&Path>,
    file_len: u64,
    boot_id: Option<BootId>,
) -> Result<FoundMetas> {
    // A meta past the end is absent; a read that fails is an error of its own, never taken for
    // an invalid meta (falling back to the older meta would hide the newest commit). A file
    // that ends within the boot id of a non-durable meta reads it as zeros (the meta then
    // fails its checksum, as its write was cut short).
    let read_at = |offset: u64| -> Result<Option<[u8; ONE_SYNC_LEN_MAX]>> {
        let mut buf = [0u8; ONE_SYNC_LEN_MAX];
        if offset.saturating_add(META_PAGE_LEN as u64) > file_len {
            return Ok(None);
        }
        let len = (file_len - offset).min(buf.len() as u64) as usize;
        storage
            .read_exact_at(&mut buf[..len], offset)
            .map_err(|e| Error::io(path, e))?;
        Ok(Some(buf))
    };
    let Some(first) = read_at(0)? else {
        let short = || {
            MetaState::Broken(Corruption::new(
                Pgid(0),
                Reason::Truncated {
                    what: "meta page",
                    need: META_PAGE_LEN as u64,
                    have: file_len,
                },
            ))
        };
        return Ok(FoundMetas {
            page_size: None,
            metas: [short(), short()],
            durability: [MetaDurability::Durable; 2],
            first: None,
            meta0_error: None,
        });
    };
    let meta0 = read_meta_page(&first, Pgid(0)).map(|(meta, _)| meta);
    let (page_size, meta0_error) = match meta0 {
        Ok(meta) => (Some(u64::from(meta.page_size)), None),
        Err(error) => {
            let meta1 = find_meta1(file_len, |buf, offset| {
                storage
                    .read_exact_at(buf, offset)
                    .map_err(|e| Error::io(path, e))
            })?;
            (meta1.map(|meta| u64::from(meta.page_size)), Some(error))
        }
    };
    let Some(page_size) = page_size else {
        return Ok(FoundMetas {
            page_size: None,
            metas: [
                MetaState::Broken(meta0_error.clone().expect("meta 0 failed")),
                MetaState::Broken(Corruption::new(Pgid(1), Reason::NoMeta)),
            ],
            durability: [MetaDurability::Durable; 2],
            first: Some(first),
            meta0_error,
        });
    };
    let mut metas = Vec::with_capacity(2);
    let mut durability = [MetaDurability::Durable; 2];
    for index in 0..2u64 {
        let pgid = Pgid(index);
        let Some(buf) = read_at(index * page_size)? else {
            metas.push(MetaState::Broken(Corruption::new(
                pgid,
                Reason::Truncated {
                    what: "meta page",
                    need: (index * page_size).saturating_add(META_PAGE_LEN as u64),
                    have: file_len,
                },
            )));
            continue;
        };
        let meta = match read_meta_page(&buf, pgid) {
            Ok((meta, MetaDurability::Durable)) => meta,
            Ok((meta, written @ MetaDurability::NonDurable { boot_id: boot, .. })) => {
                if boot_id != Some(boot) {
                    metas.push(MetaState::Stale(meta));
                    continue;
                }
                durability[index as usize] = written;
                meta
            }
            Ok((meta, MetaDurability::OneSync)) => {
                let verified = one_sync_pages_intact(storage, path, file_len, page_size, &buf)?;
                if !verified {
                    metas.push(MetaState::Unverified(meta));
                    continue;
                }
                durability[index as usize] = MetaDurability::OneSync;
                meta
            }
            Err(error) => {
                metas.push(MetaState::Broken(error));
                continue;
            }
        };
        let state = if u64::from(meta.page_size) != page_size {
            MetaState::Unsound(
                meta,
                Corruption::new(pgid, Reason::BadPageSize(meta.page_size)),
            )
        } else if meta.txid >= TXID_MAX {
            // No commit can follow it, and readers count past it.
            MetaState::Unsound(meta, Corruption::new(pgid, Reason::TxidAtMax))
        } else {
            match meta.validate_fields(pgid, file_len) {
                Ok(()) => MetaState::Valid(meta),
                Err(error) if matches!(error.reason, Reason::HighWaterPastEnd { .. }) => {
                    if matches!(
                        durability[index as usize],
                        MetaDurability::NonDurable { .. }
                    ) {
                        MetaState::Cut(meta)
                    } else {
                        MetaState::PastEnd(meta)
                    }
                }
                Err(error) => MetaState::Unsound(meta, error),
            }
        };
        metas.push(state);
    }
    let [meta0, meta1]: [MetaState; 2] = metas.try_into().expect("two metas");
    Ok(FoundMetas {
        page_size: Some(page_size),
        metas: [meta0, meta1],
        durability,
        first: Some(first),
        meta0_error,
    })
}

/// Whether the one-sync meta page `bytes` (read from a file of `file_len` bytes whose pages
/// are `page_size` bytes) may be opened: its fields are sound, its runs are a list its commit
/// can have written, lie within the file and still give its digest. Any other answer is
/// `false`: the open takes the other meta, which that commit could not have touched. Only a
/// read that fails is an error.
fn one_sync_pages_intact(
    storage: &dyn Storage,
    path: Option<&Path>,
    file_len: u64,
    page_size: u64,
    bytes: &[u8],
) -> Result<bool> {
    let Some(meta) = Meta::read_unchecked(bytes) else {
        return Ok(false);
    };
    let Some(record) = OneSyncRecord::read(bytes, &meta) else {
        return Ok(false);
    };
    // Its mark past the end too: the length its one sync was to make durable is not there.
    if u64::from(meta.page_size) != page_size
        || meta.validate_fields(Pgid(meta.txid % 2), file_len).is_err()
        || !record.runs_plausible(&meta)
    {
        return Ok(false);
    }
    let mut sum = 0u128;
    let mut buf = Vec::new();
    for run in record.runs() {
        // Within the mark (`runs_plausible`), which is within the file (`validate_fields`).
        buf.resize((run.n_pages * page_size) as usize, 0);
        storage
            .read_exact_at(&mut buf, run.start.0 * page_size)
            .map_err(|e| Error::io(path, e))?;
        sum = sum.wrapping_add(run_digest(run.start, &[&buf]));
    }
    Ok(sum.to_le_bytes() == record.digest)
}

/// Loads the freelist of `snapshot`: from its page, or by scanning for unreachable pages when
/// the file keeps none (`reachable`, when given, is the set of pages its meta reaches, walked
/// already).
pub(crate) fn load_freelist(
    snapshot: &Snapshot,
    page_size: usize,
    options: &Options,
    reachable: Option<PageSet>,
) -> Result<AnyFreelist> {
    let meta = &snapshot.meta;
    let pages = Pages::new(&snapshot.map, page_size, meta.high_water())?;
    let mut freelist = AnyFreelist::new(options.freelist);
    if meta.freelist != PGID_NO_FREELIST.0 {
        let span = pages.page(Pgid(0), meta.freelist_pgid())?;
        let page = FreelistPage::new(span, meta.freelist_pgid())?;
        freelist.read(&page, meta.high_water())?;
    } else {
        let reachable = match reachable {
            Some(reachable) => reachable,
            None => crate::walk::reachable_pages(pages, meta)?,
        };
        let free: Vec<Pgid> = (2..meta.pgid)
            .map(Pgid)
            .filter(|pgid| !reachable.contains(pgid.0))
            .collect();
        freelist.rebuild(&free)?;
    }
    Ok(freelist)
}

/// Whether the non-durable meta `newest` may be opened: the page extents it reaches and the
/// durable meta `durable` (in the other slot) does not — those the commits since `durable`
/// wrote — must still sum to the `digest` it carries (see [`rbolt_page::PagesDigest`]).
/// Returns the set of pages `newest` reaches and the first pages of the extents summed when
/// they do; `None` when they do not, or when `newest`'s tree or `durable`'s freelist cannot be
/// read: the open falls back to `durable`.
///
/// What it catches: pages changed after those commits wrote them. Go bbolt, which opens
/// `durable` (the non-durable meta fails its checksum) and reuses exactly the pages it
/// holds free, may write them and die before its meta; a sync that failed may have let the
/// kernel drop them, so they read back old or zeroed. Either way the meta points at pages
/// that are not what it committed, however sound each one looks.
pub(super) fn unsynced_pages_intact(
    map: &Arc<Mapping>,
    page_size: usize,
    newest: &Meta,
    durable: &Meta,
    digest: &PagesDigest,
    options: &Options,
) -> Option<UnsyncedPages> {
    let before = Snapshot {
        meta: *durable,
        map: map.clone(),
    };
    // Free in `durable`: free or pending then, or past its high-water mark.
    let free_before = load_freelist(&before, page_size, options, None).ok()?;
    let pages = Pages::new(map, page_size, newest.high_water()).ok()?;
    let older_pages = Pages::new(map, page_size, durable.high_water()).ok()?;
    // Only what changed since `durable` is walked (see `walk::since`).
    let since =
        crate::walk::reachable_since(pages, newest, older_pages, durable, &free_before).ok()?;
    let mut sum = 0u128;
    for &pgid in &since.written {
        let span = pages.page(Pgid(0), pgid).ok()?;
        sum = sum.wrapping_add(page_digest(pgid, span));
    }
    (sum.to_le_bytes() == *digest).then_some((since.reachable, since.written))
}

/// Writes the meta of `txid` (its head, as the page cache holds it) again where the device
/// does not hold the same bytes (`Storage::read_durable`), so that the sync after writes it: a
/// meta whose sync failed may be in the cache, clean, and not on the disk. Where the device
/// holds it, nothing is written (an in-place rewrite of a durable meta that a power loss then
/// garbles would lose it); where the storage cannot tell, only the sync follows.
///
/// `len`: how many bytes of the meta page to compare and write (a one-sync meta's runs reach
/// further than the other kinds' fields).
pub(super) fn meta_on_disk(
    storage: &dyn Storage,
    page_size: usize,
    txid: u64,
    len: usize,
) -> Result<()> {
    let io = |e| Error::io(storage.path(), e);
    let len = len.min(page_size).min(ONE_SYNC_LEN_MAX);
    let offset = (txid % 2) * page_size as u64;
    let mut cached = [0u8; ONE_SYNC_LEN_MAX];
    storage
        .read_exact_at(&mut cached[..len], offset)
        .map_err(io)?;
    let mut on_disk = [0u8; ONE_SYNC_LEN_MAX];
    let differs = match storage.read_durable(&mut on_disk[..len], offset) {
        Ok(told) => told && on_disk[..len] != cached[..len],
        // The device could not be read: write it again.
        Err(_) => true,
    };
    if differs {
        storage.write_whole_at(&cached[..len], offset).map_err(io)?;
    }
    Ok(())
}

/// Writes the page extents at `extents` (what [`unsynced_pages_intact`] summed) again, as the
/// page cache holds them, before recovery syncs the file and makes their meta durable. After a
/// sync that failed, Linux may keep a page it could not write in the cache, marked clean: the
/// digest matches, a later sync succeeds without writing it, and the disk keeps the old bytes
/// under what would become a durable meta. Written again, each is dirty, and the sync writes
/// it (or fails, and the open with it).
pub(super) fn rewrite_extents(
    storage: &dyn Storage,
    map: &Mapping,
    page_size: usize,
    high_water: Pgid,
    extents: &[Pgid],
) -> Result<()> {
    let pages = Pages::new(map, page_size, high_water)?;
    let mut copy = Vec::new();
    for &pgid in extents {
        let span = pages.page(Pgid(0), pgid)?;
        // From a copy: the source must not be the page the write goes to.
        copy.clear();
        copy.extend_from_slice(span);
        storage
            .write_all_at(&copy, pgid.0 * page_size as u64)
            .map_err(|e| Error::io(storage.path(), e))?;
    }
    Ok(())
}

/// Writes the runs the one-sync meta of `txid` names again, as the page cache holds them (the
/// open verified them already), for the reason [`rewrite_extents`] gives.
fn rewrite_one_sync_runs(storage: &dyn Storage, page_size: usize, txid: u64) -> Result<()> {
    let io = |e| Error::io(storage.path(), e);
    let offset = (txid % 2) * page_size as u64;
    let mut head = [0u8; ONE_SYNC_LEN_MAX];
    let len = page_size.min(ONE_SYNC_LEN_MAX);
    storage
        .read_exact_at(&mut head[..len], offset)
        .map_err(io)?;
    let record = Meta::read_unchecked(&head)
        .and_then(|meta| OneSyncRecord::read(&head[..len], &meta).map(|r| (meta, r)));
    let Some((meta, record)) = record.filter(|(meta, r)| r.runs_plausible(meta)) else {
        return Err(Error::from_meta(
            storage.path(),
            Corruption::new(
                Pgid(txid % 2),
                Reason::Other("the one-sync meta changed while the file was opened"),
            ),
        ));
    };
    let page_size = u64::from(meta.page_size);
    let mut buf = Vec::new();
    for run in record.runs() {
        buf.resize((run.n_pages * page_size) as usize, 0);
        let at = run.start.0 * page_size;
        storage.read_exact_at(&mut buf, at).map_err(io)?;
        storage.write_all_at(&buf, at).map_err(io)?;
    }
    Ok(())
}

/// What a trusted non-durable meta reaches: every page, and the first pages of the extents its
/// digest covered (the pages written since the durable meta).
pub(super) type UnsyncedPages = (PageSet, Vec<Pgid>);

/// The meta to open and how it was written, with, for a non-durable `meta` it trusts, the pages
/// it reaches and the extents its digest covered: `meta` itself when it is durable, or when it
/// is non-durable and the pages its commits wrote still give its digest
/// ([`unsynced_pages_intact`]); else the durable meta in the other slot.
pub(super) fn trust_unsynced(
    path: Option<&Path>,
    found: &FoundMetas,
    map: &Arc<Mapping>,
    page_size: usize,
    meta: Meta,
    durability: MetaDurability,
    options: &Options,
) -> Result<(Meta, MetaDurability, Option<UnsyncedPages>)> {
    let MetaDurability::NonDurable { digest, .. } = durability else {
        return Ok((meta, durability, None));
    };
    let durable = found.durable_beside(&meta);
    let intact = durable.and_then(|(durable, _)| {
        unsynced_pages_intact(map, page_size, &meta, &durable, &digest, options)
    });
    match (intact, durable) {
        (Some(pages), _) => Ok((meta, durability, Some(pages))),
        (None, Some((durable, its_durability))) => {
            crate::trace::recovered_older_meta(
                path,
                durable.txid,
                "pages the newest commits made without syncs wrote have changed since \
                 (another writer, or a failed sync)",
            );
            // A one-sync meta stays one: the open writes one in Go's form after it.
            Ok((durable, its_durability, None))
        }
        (None, None) => Err(Error::from_meta(
            path,
            Corruption::new(Pgid(meta.txid % 2), Reason::NoDurableMeta),
        )),
    }
}

/// What a read-write open does before anything builds on `meta`, which it takes as durable:
/// - a non-durable `meta` (a process of this boot crashed after commits without syncs, and the
///   digest showed their pages whole) is made durable: its `extents` written again, an fsync
///   (those commits may have grown the file without syncing it), and the same meta written
///   durably;
/// - a durable-form `meta` may still be in the page cache only (the process that wrote it died
///   before its sync, or its sync failed and left it clean there): written again where the
///   device does not hold it, and synced.
pub(crate) fn make_durable_at_open(
    engine: &Engine,
    meta: &Meta,
    durability: MetaDurability,
    extents: &[Pgid],
) -> Result<()> {
    let storage = engine.storage.as_ref();
    let sync_all = || {
        storage.sync_all().map_err(|e| {
            engine.poison();
            Error::io(engine.path(), e)
        })
    };
    match durability {
        MetaDurability::Durable => {
            meta_on_disk(storage, engine.page_size, meta.txid, META_PAGE_READ_LEN)
                .inspect_err(|_| engine.poison())?;
            return sync_all();
        }
        MetaDurability::OneSync => {
            // Its pages gave its digest from the page cache: written again, they are dirty,
            // and the sync writes them even if a failed sync left them clean there; the meta
            // likewise, as far as it reaches in its 4 KiB block.
            let offset = (meta.txid % 2) * engine.page_size as u64;
            let len = ONE_SYNC_LEN_MAX - (offset % ONE_SYNC_LEN_MAX as u64) as usize;
            rewrite_one_sync_runs(storage, engine.page_size, meta.txid)
                .inspect_err(|_| engine.poison())?;
            meta_on_disk(storage, engine.page_size, meta.txid, len)
                .inspect_err(|_| engine.poison())?;
            engine.lock_writer().durable_one_sync = true;
            return sync_all();
        }
        MetaDurability::NonDurable { .. } => {}
    }
    crate::trace::recovered_unsynced(engine.path(), meta.txid);
    let mut writer = engine.lock_writer();
    let map = engine.snapshot().map;
    rewrite_extents(storage, &map, engine.page_size, meta.high_water(), extents)
        .inspect_err(|_| engine.poison())?;
    sync_all()?;
    crate::engine::commit::write_durable_meta(engine, &mut writer, meta)
}
