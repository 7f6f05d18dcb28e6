//! Raw access to a database file, without opening it as a database: the page size, both metas
//! as they are (valid or not), and pages read at `pgid × page_size`.
//!
//! `page`, `page-item`, `dump` and `surgery` read files through this module so that they work
//! on files the database refuses to open. The file is opened through the facade's storage
//! layer ([`FileStorage`], read-only, under a shared lock), so these commands take the same
//! lock as a read-only database and never read a file mid-commit. Nothing here trusts the
//! file: every length is checked against the file's size before anything is allocated or read.
//! The one write here, [`settle_metas`], is for a copy this process made and has not put in
//! place yet.

use anyhow::{Context, Result, anyhow, bail};
use rbolt_page::{
    Corruption, META_PAGE_LEN, Meta, MetaDurability, OneSyncRecord, PAGE_SIZE_MAX, PAGE_SIZE_MIN,
    PageHeader, Pgid, Reason, find_meta1, read_meta, read_meta_page, run_digest,
};
use rbolt_storage::{FileOptions, FileStorage, OpenError, Storage};
use std::path::{Path, PathBuf};

use crate::open::LockArgs;

/// A database file opened for raw reading.
#[derive(Debug)]
pub struct RawFile {
    file: FileStorage,
    path: PathBuf,
    len: u64,
    page_size: usize,
}

/// What is known of one meta page.
#[derive(Clone, Debug)]
pub struct MetaSlot {
    /// The meta record as stored, if the page is long enough to hold one.
    pub meta: Option<Meta>,
    /// `Ok` when the meta passes every check the database makes when it opens the file.
    pub valid: Result<(), Corruption>,
}

impl RawFile {
    /// Opens `path` read-only and finds its page size: meta 0's when meta 0 is valid, else the
    /// size at which a valid meta 1 is found (probing 512 bytes to 16 MiB, as the database does
    /// when it opens a file), else meta 0's when at least its magic is right (as bbolt's tools
    /// do).
    ///
    /// The file is locked shared for as long as the `RawFile` lives, waiting as `lock` says.
    pub fn open(path: &Path, lock: &LockArgs) -> Result<RawFile> {
        let file = open_shared(path, lock)?;
        let len = file
            .len()
            .with_context(|| format!("cannot read the size of {}", path.display()))?;
        let mut raw = RawFile {
            file,
            path: path.to_owned(),
            len,
            page_size: 0,
        };
        raw.page_size = raw.find_page_size()?;
        Ok(raw)
    }

    fn find_page_size(&self) -> Result<usize> {
        let in_range = |size: u32| (PAGE_SIZE_MIN..=PAGE_SIZE_MAX).contains(&size);
        let first = self.read_short(0, META_PAGE_LEN)?;
        if first.len() < META_PAGE_LEN {
            bail!(
                "{} is not a bbolt database: it is {} bytes long, too short for a meta page",
                self.path.display(),
                self.len
            );
        }
        let meta0 = read_meta(&first, Pgid(0));
        if let Ok(meta) = &meta0
            && in_range(meta.page_size)
        {
            return Ok(meta.page_size as usize);
        }
        if let Some(meta) = find_meta1(self.len, |buf, offset| {
            self.file
                .read_exact_at(buf, offset)
                .with_context(|| format!("cannot read {}", self.path.display()))
        })? {
            return Ok(meta.page_size as usize);
        }
        if let Some(meta) = Meta::read_unchecked(&first)
            && meta.magic == rbolt_page::MAGIC
            && in_range(meta.page_size)
        {
            return Ok(meta.page_size as usize);
        }
        let reason = match meta0 {
            Err(e) => e.to_string(),
            Ok(meta) => Corruption::new(Pgid(0), Reason::BadPageSize(meta.page_size)).to_string(),
        };
        Err(anyhow!(
            "cannot find the page size of {}: meta 0 is invalid ({reason}) and no valid meta 1 \
             was found (at any power of two up to 1 GiB, or any offset up to 16 MiB)",
            self.path.display()
        ))
    }

    /// The page size.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// Whole pages in the file.
    pub fn file_pages(&self) -> u64 {
        self.len / self.page_size as u64
    }

    /// Up to `len` bytes at `offset`: fewer when the file ends first.
    pub fn read_short(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let available = self.len.saturating_sub(offset).min(len as u64) as usize;
        let mut buf = vec![0u8; available];
        self.file
            .read_exact_at(&mut buf, offset)
            .with_context(|| format!("cannot read {}", self.path.display()))?;
        Ok(buf)
    }

    /// Exactly `len` bytes at `offset`, or an error naming what lies past the end.
    pub fn read_exact(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let end = offset.checked_add(len as u64);
        if end.is_none_or(|end| end > self.len) {
            bail!(
                "{}: bytes {offset}..{} lie past the end of the {}-byte file",
                self.path.display(),
                offset.saturating_add(len as u64),
                self.len
            );
        }
        self.read_short(offset, len)
    }

    /// Page `pgid`'s first page, exactly as stored.
    pub fn read_block(&self, pgid: u64) -> Result<Vec<u8>> {
        let offset = pgid
            .checked_mul(self.page_size as u64)
            .ok_or_else(|| anyhow!("page {pgid} lies past the end of the file"))?;
        if offset.saturating_add(self.page_size as u64) > self.len {
            bail!(
                "page {pgid} lies past the end of the file ({} pages of {} bytes)",
                self.file_pages(),
                self.page_size
            );
        }
        self.read_exact(offset, self.page_size)
    }

    /// Page `pgid` with its overflow pages. Its header must name `pgid`, and its overflow must
    /// end inside the file (so a corrupt header cannot make this read gigabytes).
    pub fn read_page(&self, pgid: u64) -> Result<(PageHeader, Vec<u8>)> {
        let first = self.read_block(pgid)?;
        let header = PageHeader::read(&first).expect("a page is longer than its header");
        if header.id != pgid {
            bail!(
                "page {pgid}: the page header names page {} (not a page start, or corrupt)",
                header.id
            );
        }
        if header.overflow == 0 {
            return Ok((header, first));
        }
        let last = pgid.checked_add(u64::from(header.overflow));
        if last.is_none_or(|last| last >= self.file_pages()) {
            bail!(
                "page {pgid}: its {} overflow pages run past the end of the file ({} pages)",
                header.overflow,
                self.file_pages()
            );
        }
        let span = (header.overflow as usize + 1) * self.page_size;
        Ok((header, self.read_exact(pgid * self.page_size as u64, span)?))
    }

    /// Both metas, each with whether it passes the database's checks.
    pub fn metas(&self) -> Result<[MetaSlot; 2]> {
        let slot = |index: u64| -> Result<MetaSlot> {
            // The record and, for a meta written without syncs, the boot id after it; for a
            // one-sync commit's, its runs, up to the end of its page's first 4 KiB.
            let read_len = rbolt_page::ONE_SYNC_LEN_MAX.min(self.page_size);
            let bytes = self.read_short(index * self.page_size as u64, read_len)?;
            let meta = Meta::read_unchecked(&bytes);
            let valid = if bytes.len() < META_PAGE_LEN {
                Err(Corruption::new(
                    Pgid(index),
                    Reason::Truncated {
                        what: "meta page",
                        need: (index + 1) * self.page_size as u64,
                        have: self.len,
                    },
                ))
            } else {
                // Every kind of meta is sound: one written without syncs carries a second
                // checksum over the boot id (the database trusts it only in that boot).
                read_meta_page(&bytes, Pgid(index))
                    .and_then(|(meta, kind)| {
                        meta.validate_fields(Pgid(index), self.len)
                            .map(|()| (meta, kind))
                    })
                    .and_then(|(meta, kind)| {
                        // A one-sync commit's meta is sound only when its pages give its
                        // digest, as the database checks before it opens at it (issue 51).
                        if kind == MetaDurability::OneSync
                            && !self.one_sync_pages_intact(&bytes, &meta)
                        {
                            return Err(Corruption::new(
                                Pgid(index),
                                Reason::Other(
                                    "a one-sync commit whose pages do not give its digest \
                                     (its sync did not finish: the database opens at the meta \
                                     before it)",
                                ),
                            ));
                        }
                        Ok(meta)
                    })
                    .and_then(|meta| {
                        if meta.page_size as usize == self.page_size {
                            Ok(())
                        } else {
                            Err(Corruption::new(
                                Pgid(index),
                                Reason::BadPageSize(meta.page_size),
                            ))
                        }
                    })
            };
            Ok(MetaSlot { meta, valid })
        };
        Ok([slot(0)?, slot(1)?])
    }

    /// Whether the one-sync meta page `bytes` (its record `meta`, sound and within the file)
    /// names page runs a commit can have written and whose bytes give its digest. Any other
    /// answer, a read that fails included, is `false`: the database opens at the other meta.
    fn one_sync_pages_intact(&self, bytes: &[u8], meta: &Meta) -> bool {
        let Some(record) = OneSyncRecord::read(bytes, meta) else {
            return false;
        };
        if !record.runs_plausible(meta) {
            return false;
        }
        let page_size = self.page_size as u64;
        let mut sum = 0u128;
        for run in record.runs() {
            // Within the mark (`runs_plausible`), which is within the file (`validate_fields`),
            // and at most `ONE_SYNC_BYTES_MAX` bytes in all.
            let Ok(pages) =
                self.read_exact(run.start.0 * page_size, (run.n_pages * page_size) as usize)
            else {
                return false;
            };
            sum = sum.wrapping_add(run_digest(run.start, &[&pages]));
        }
        sum.to_le_bytes() == record.digest
    }

    /// The meta the database would use: the valid one with the higher txid.
    pub fn active_meta(&self) -> Result<Option<(u64, Meta)>> {
        let metas = self.metas()?;
        Ok(metas
            .iter()
            .enumerate()
            .filter(|(_, slot)| slot.valid.is_ok())
            .filter_map(|(index, slot)| slot.meta.map(|meta| (index as u64, meta)))
            .max_by_key(|(_, meta)| meta.txid))
    }

    /// One past the last page worth looking at: the active meta's high-water mark, or the
    /// number of pages in the file when no meta is valid.
    pub fn high_water(&self) -> Result<u64> {
        Ok(match self.active_meta()? {
            Some((_, meta)) => meta.pgid,
            None => self.file_pages(),
        })
    }
}

/// The first bytes of meta page `index` holding `meta`: a meta page header naming the page,
/// and the record with its checksum recomputed.
pub fn meta_page_bytes(index: u64, meta: &Meta) -> [u8; META_PAGE_LEN] {
    let mut out = [0u8; META_PAGE_LEN];
    rbolt_page::write_meta_in_slot(&mut out, meta, index);
    out
}

/// Writes both meta pages of the closed database file at `path` anew from the meta it opens
/// at: that meta in its slot, with the root bucket's sequence set to `root_sequence`, and the
/// same with the txid before it in the other slot (as `ReadTx::write_to` makes the metas of a
/// copy), and syncs them. Only for a file this process made and has not put in place yet
/// (`compact`'s copy, the database a new `import` makes), since a meta page written in place
/// could tear; here a torn write costs only a copy nobody has seen. It does two things the
/// library's API does not:
///
/// - the root bucket's sequence, which files of other tools can hold, has no public setter;
/// - after the vacuum that cuts the copy to its pages, the other meta still names the
///   high-water mark before the cut, past the end of the file, which `check` reports (a
///   vacuum that commits once leaves that; see `seal` in `cmd/compact.rs`).
///
/// The meta is checked first (it is the one the database opens at) and afterwards (both
/// metas valid for the file's length, and the database opens with the sequence).
pub fn settle_metas(path: &Path, root_sequence: u64) -> Result<()> {
    let at_once = LockArgs {
        timeout: crate::open::LockTimeout(Some(std::time::Duration::ZERO)),
    };
    let opened_at = || -> Result<Meta> {
        let db = crate::open::open_read(path, &at_once)?;
        let meta = *db.begin_read()?.meta();
        Ok(meta)
    };
    let in_use = opened_at()?;
    let page_size = {
        let raw = RawFile::open(path, &at_once)?;
        match raw.active_meta()? {
            Some((index, meta)) if meta == in_use && index == meta.txid % 2 => {
                raw.page_size() as u64
            }
            _ => bail!(
                "{}: the meta page in use is not the one the database opens at",
                path.display()
            ),
        }
    };
    let mut meta = in_use;
    meta.root.sequence = root_sequence;
    let older = Meta {
        txid: meta.txid.saturating_sub(1),
        ..meta
    };
    let options = FileOptions::new()
        .create(false)
        .lock_timeout(Some(std::time::Duration::ZERO));
    let storage = FileStorage::open(path, options)
        .with_context(|| format!("cannot open {}", path.display()))?;
    for meta in [older, meta] {
        let index = meta.txid % 2;
        storage
            .write_all_at(&meta_page_bytes(index, &meta), index * page_size)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    storage
        .sync_data()
        .with_context(|| format!("cannot sync {}", path.display()))?;
    drop(storage);
    let raw = RawFile::open(path, &at_once)?;
    for (index, slot) in raw.metas()?.iter().enumerate() {
        if let Err(corruption) = &slot.valid {
            bail!(
                "{}: meta page {index} is not valid after writing it: {corruption}",
                path.display()
            );
        }
    }
    drop(raw);
    let found = opened_at()?;
    let written = Meta {
        checksum: found.checksum,
        ..meta
    };
    if found != written {
        bail!(
            "{}: the database opens at another meta than the one written",
            path.display()
        );
    }
    Ok(())
}

/// Opens `path` read-only through the facade's storage, under a shared lock taken as `lock`
/// says; a lock that times out is reported as opening a database would report it.
pub fn open_shared(path: &Path, lock: &LockArgs) -> Result<FileStorage> {
    crate::open::check_exists(path)?;
    let options = FileOptions::new()
        .read_only(true)
        .lock_timeout(lock.lock_timeout());
    FileStorage::open(path, options).map_err(|error| match error {
        OpenError::LockTimeout { path, .. } => crate::open::open_error(
            &path,
            rbolt::Error::Timeout {
                path: Some(path.clone()),
            },
            lock,
        ),
        error => anyhow!(error),
    })
}

/// Pages in memory (a mapped snapshot), below a high-water mark.
#[derive(Clone, Copy, Debug)]
pub struct RawPages<'a> {
    data: &'a [u8],
    page_size: usize,
    high_water: u64,
}

impl<'a> RawPages<'a> {
    /// The pages of `data`, which must cover `high_water` pages.
    pub fn new(data: &'a [u8], page_size: usize, high_water: u64) -> Result<RawPages<'a>> {
        if (high_water as u128) * page_size as u128 > data.len() as u128 {
            bail!("the mapping is shorter than the high-water mark");
        }
        Ok(RawPages {
            data,
            page_size,
            high_water,
        })
    }

    /// The header at the start of page `pgid` (below the high-water mark).
    pub fn header(&self, pgid: u64) -> Option<PageHeader> {
        if pgid >= self.high_water {
            return None;
        }
        PageHeader::read(&self.data[pgid as usize * self.page_size..])
    }

    /// The span of tree page `pgid` referred to by `owner`: the id is a tree page below the
    /// high-water mark, its header names it, and its overflow ends below the mark.
    pub fn span(&self, owner: Pgid, pgid: Pgid) -> Result<&'a [u8], Corruption> {
        rbolt_page::check_pgid("child", owner, pgid, Pgid(self.high_water))?;
        let header = self.header(pgid.0).ok_or_else(|| {
            Corruption::new(
                pgid,
                Reason::OutsideTheFile {
                    what: "the page header",
                },
            )
        })?;
        if header.id != pgid.0 {
            return Err(Corruption::new(
                pgid,
                Reason::IdMismatch { found: header.id },
            ));
        }
        rbolt_page::check_overflow(pgid, header.overflow, Pgid(self.high_water))?;
        let start = pgid.0 as usize * self.page_size;
        Ok(&self.data[start..start + (header.overflow as usize + 1) * self.page_size])
    }
}
