//! `rbolt surgery ...`: repairs on the raw file, bbolt's set, and `fix-separators` (rbolt's
//! own, made of rbolt write transactions on the copy). Each reads the source (under a
//! shared lock while copying it), writes the repaired copy to a temporary file next to
//! `--output`, and renames it into place only when everything succeeded: the source is never
//! written, and a failed repair leaves no half-made output behind.

use crate::new_file::NewFile;
use crate::open::LockArgs;
use crate::progress::Unit;
use crate::raw::{RawFile, meta_page_bytes};
use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, Subcommand};
use rbolt::{Db, Options};
use rbolt_page::{
    BranchBuilder, LeafBuilder, META_PAGE_LEN, Meta, PageHeader, PageKind, PageRef, Pgid,
    branch_page_size, leaf_page_size, pages_for,
};
use rbolt_storage::{FileOptions, FileStorage, Storage};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// The surgery commands.
#[derive(Debug, Subcommand)]
pub enum SurgeryCommand {
    /// Make the older meta page the current one, undoing the last transaction.
    RevertMetaPage(BaseArgs),
    /// Copy a page (with its overflow pages) over another page.
    CopyPage(CopyPageArgs),
    /// Remove every element of a branch or leaf page.
    ClearPage(ClearPageArgs),
    /// Remove a range of elements of a branch or leaf page.
    ClearPageElements(ClearPageElementsArgs),
    /// Freelist repairs.
    #[command(subcommand)]
    Freelist(FreelistCommand),
    /// Meta page repairs.
    #[command(subcommand)]
    Meta(MetaCommand),
    /// Rewrite every page Go bbolt's writer would corrupt the file on (rbolt's own; bbolt has
    /// none): each branch element whose key is not its child's first key, empty leaves below
    /// a root, branches with one child, inline buckets whose page names a page. Files of
    /// older rbolt versions can hold them; `rbolt check` lists them.
    FixSeparators(BaseArgs),
}

/// Freelist repairs.
#[derive(Debug, Subcommand)]
pub enum FreelistCommand {
    /// Drop the freelist from both metas; it is rebuilt by scanning the file when opened.
    Abandon(BaseArgs),
    /// Write a freelist into a file that keeps none.
    Rebuild(BaseArgs),
}

/// Meta page repairs.
#[derive(Debug, Subcommand)]
pub enum MetaCommand {
    /// Check both meta pages (reads only; writes nothing).
    Validate(ValidateArgs),
    /// Set fields of one meta page and recompute its checksum.
    Update(MetaUpdateArgs),
}

/// The source and the output of a surgery.
#[derive(Args, Debug)]
pub struct BaseArgs {
    /// The database file to repair; it is only read.
    pub path: PathBuf,
    /// Where to write the repaired copy.
    #[arg(long, value_name = "FILE")]
    pub output: PathBuf,
    #[command(flatten)]
    pub lock: LockArgs,
}

/// Arguments of `surgery copy-page`.
#[derive(Args, Debug)]
pub struct CopyPageArgs {
    #[command(flatten)]
    pub base: BaseArgs,
    /// The page to copy.
    #[arg(long, value_name = "PGID")]
    pub from_page: u64,
    /// The page to overwrite.
    #[arg(long, value_name = "PGID")]
    pub to_page: u64,
}

/// Arguments of `surgery clear-page`.
#[derive(Args, Debug)]
pub struct ClearPageArgs {
    #[command(flatten)]
    pub base: BaseArgs,
    /// The branch or leaf page to clear.
    #[arg(long = "pageId", alias = "page-id", value_name = "PGID")]
    pub page_id: u64,
}

/// Arguments of `surgery clear-page-elements`.
#[derive(Args, Debug)]
pub struct ClearPageElementsArgs {
    #[command(flatten)]
    pub base: BaseArgs,
    /// The branch or leaf page.
    #[arg(long = "pageId", alias = "page-id", value_name = "PGID")]
    pub page_id: u64,
    /// The first element to remove (from 0).
    #[arg(long, allow_negative_numbers = true)]
    pub from_index: i64,
    /// One past the last element to remove; -1 means to the end of the page.
    #[arg(long, allow_negative_numbers = true)]
    pub to_index: i64,
}

/// Arguments of `surgery meta validate`.
#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// The database file.
    pub path: PathBuf,
    #[command(flatten)]
    pub lock: LockArgs,
}

/// Arguments of `surgery meta update`.
#[derive(Args, Debug)]
pub struct MetaUpdateArgs {
    #[command(flatten)]
    pub base: BaseArgs,
    /// Fields to set, `name:value`, comma-separated or repeated; names: pageSize, root,
    /// freelist, pgid.
    #[arg(long, value_delimiter = ',', value_name = "NAME:VALUE")]
    pub fields: Vec<String>,
    /// The meta page to update: 0 or 1.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1))]
    pub meta_page: u64,
}

/// Runs a surgery command, naming its source file in any error (as `main` does for the
/// other commands).
pub fn run(command: SurgeryCommand) -> Result<()> {
    use super::in_file;
    match command {
        SurgeryCommand::RevertMetaPage(args) => in_file(&args.path, revert_meta_page(&args)),
        SurgeryCommand::CopyPage(args) => in_file(&args.base.path, copy_page(&args)),
        SurgeryCommand::ClearPage(args) => {
            let elements = ClearPageElementsArgs {
                base: args.base,
                page_id: args.page_id,
                from_index: 0,
                to_index: -1,
            };
            in_file(&elements.base.path, clear_page_elements(&elements, true))
        }
        SurgeryCommand::ClearPageElements(args) => {
            in_file(&args.base.path, clear_page_elements(&args, false))
        }
        SurgeryCommand::Freelist(FreelistCommand::Abandon(args)) => {
            in_file(&args.path, freelist_abandon(&args))
        }
        SurgeryCommand::Freelist(FreelistCommand::Rebuild(args)) => {
            in_file(&args.path, freelist_rebuild(&args))
        }
        SurgeryCommand::Meta(MetaCommand::Validate(args)) => {
            in_file(&args.path, meta_validate(&args))
        }
        SurgeryCommand::Meta(MetaCommand::Update(args)) => {
            in_file(&args.base.path, meta_update(&args))
        }
        SurgeryCommand::FixSeparators(args) => in_file(&args.path, fix_separators(&args)),
    }
}

/// A copy of the source being repaired: a temporary file beside the output (a [`NewFile`]),
/// put at `--output` by `finish`, removed if dropped before. The file is written through the
/// facade's storage layer.
struct Output {
    /// The temporary file, locked exclusively; `None` once released for a database to open.
    storage: Option<FileStorage>,
    file: NewFile,
}

/// How much of the source one step of the copy reads and writes.
const COPY_CHUNK_LEN: usize = 1 << 20;

impl Output {
    /// Copies `args.path` (under a shared lock) into a temporary file beside `args.output`,
    /// which must not exist (Go bbolt's surgery refuses an existing output too).
    fn copy_of(args: &BaseArgs) -> Result<Output> {
        let source = crate::raw::open_shared(&args.path, &args.lock)?;
        if crate::open::same_file(&args.path, &args.output) {
            bail!("--output names the source file; surgery never modifies the source");
        }
        let file = NewFile::begin(&args.output)?;
        let storage = FileStorage::open(
            file.temp(),
            FileOptions::new().lock_timeout(Some(Duration::ZERO)),
        )
        .with_context(|| format!("cannot create {}", file.temp().display()))?;
        let output = Output {
            storage: Some(storage),
            file,
        };
        let len = source
            .len()
            .with_context(|| format!("cannot read the size of {}", args.path.display()))?;
        let mut counter =
            crate::progress::Counter::new(crate::progress::bar(len, Unit::Bytes, "copying", false));
        let mut buf = vec![0u8; COPY_CHUNK_LEN];
        let mut offset = 0;
        while offset < len {
            let n = (len - offset).min(COPY_CHUNK_LEN as u64) as usize;
            source
                .read_exact_at(&mut buf[..n], offset)
                .with_context(|| format!("cannot read {}", args.path.display()))?;
            output.write_at(&buf[..n], offset)?;
            offset += n as u64;
            counter.add(n as u64);
        }
        counter.finish();
        // The source's lock goes with its handle: the copy is made.
        drop(source);
        Ok(output)
    }

    /// The temporary file's path, for a database to open.
    fn temp(&self) -> &std::path::Path {
        self.file.temp()
    }

    fn storage(&self) -> Result<&FileStorage> {
        self.storage
            .as_ref()
            .ok_or_else(|| anyhow!("{} was released", self.temp().display()))
    }

    /// Gives up the lock on the copy, so that a database can open it in this process.
    fn release(&mut self) {
        self.storage = None;
    }

    fn write_at(&self, bytes: &[u8], offset: u64) -> Result<()> {
        self.storage()?
            .write_all_at(bytes, offset)
            .with_context(|| format!("cannot write {}", self.temp().display()))
    }

    /// Makes the copy durable and puts it at `--output` (refusing a file that came there
    /// meanwhile), the directory synced.
    fn finish(mut self) -> Result<()> {
        let storage = match self.storage.take() {
            Some(storage) => storage,
            None => FileStorage::open(
                self.temp(),
                FileOptions::new()
                    .create(false)
                    .lock_timeout(Some(Duration::ZERO)),
            )
            .with_context(|| format!("cannot open {}", self.temp().display()))?,
        };
        storage
            .sync_all()
            .with_context(|| format!("cannot sync {}", self.temp().display()))?;
        drop(storage);
        self.file.publish()
    }
}

/// Whether the database in use (per the valid meta with the higher txid) keeps a freelist.
fn freelist_persisted(raw: &RawFile) -> Result<bool> {
    Ok(raw
        .active_meta()?
        .is_some_and(|(_, meta)| meta.has_freelist()))
}

fn abandon_hint(w: &mut impl Write) -> std::io::Result<()> {
    writeln!(
        w,
        "Please consider executing `rbolt surgery freelist abandon ...`"
    )
}

/// `surgery revert-meta-page`: copies the older meta over the newer one (by txid, as bbolt
/// decides), so the file opens at the transaction before the last.
fn revert_meta_page(args: &BaseArgs) -> Result<()> {
    let raw = RawFile::open(&args.path, &args.lock)?;
    let metas = raw.metas()?;
    let (Some(meta0), Some(meta1)) = (metas[0].meta, metas[1].meta) else {
        bail!("the file is too short to hold both meta pages");
    };
    let (active, older) = if meta0.txid < meta1.txid {
        (1, 0)
    } else {
        (0, 1)
    };
    if let Err(corruption) = &metas[older as usize].valid {
        bail!(
            "meta page {older}, which would become the current one, is invalid ({corruption}); \
             nothing was written"
        );
    }
    let page = raw.read_block(older)?;
    let output = Output::copy_of(args)?;
    let mut page = page;
    let mut header = PageHeader::read(&page).expect("a page holds a header");
    header.id = active;
    header.write(&mut page);
    output.write_at(&page, active * raw.page_size() as u64)?;
    output.finish()?;
    println!("The meta page is reverted.");
    Ok(())
}

/// `surgery copy-page --from-page A --to-page B`.
fn copy_page(args: &CopyPageArgs) -> Result<()> {
    if args.from_page == args.to_page {
        bail!(
            "'--from-page' and '--to-page' have the same value: {}",
            args.from_page
        );
    }
    let raw = RawFile::open(&args.base.path, &args.base.lock)?;
    let (mut header, mut page) = raw.read_page(args.from_page)?;
    let last = args.to_page.checked_add(u64::from(header.overflow));
    if last.is_none_or(|last| last >= raw.file_pages()) {
        bail!(
            "page {} (with its {} overflow pages) does not fit at page {} of a {}-page file",
            args.from_page,
            header.overflow,
            args.to_page,
            raw.file_pages()
        );
    }
    header.id = args.to_page;
    header.write(&mut page);
    let output = Output::copy_of(&args.base)?;
    output.write_at(&page, args.to_page * raw.page_size() as u64)?;
    output.finish()?;
    let mut w = std::io::stdout().lock();
    if freelist_persisted(&raw)? {
        writeln!(w, "WARNING: the free list might have changed.")?;
        abandon_hint(&mut w)?;
    }
    writeln!(
        w,
        "The page {} was successfully copied to page {}",
        args.from_page, args.to_page
    )?;
    Ok(())
}

/// `surgery clear-page-elements`, and `clear-page` (all elements).
fn clear_page_elements(args: &ClearPageElementsArgs, whole_page: bool) -> Result<()> {
    if args.page_id < 2 {
        bail!("the pageId must be at least 2, but got {}", args.page_id);
    }
    let raw = RawFile::open(&args.base.path, &args.base.lock)?;
    let (header, bytes) = raw.read_page(args.page_id)?;
    let page = PageRef::new(&bytes, Pgid(args.page_id))?;
    let kind = header.kind();
    if !matches!(kind, Some(PageKind::Leaf | PageKind::Branch)) {
        bail!(
            "can't clear elements in {:?} page",
            super::pages::type_name(header.flags)
        );
    }
    let count = i64::from(header.count);
    let (start, end) = (args.from_index, args.to_index);
    let mut rewritten: Option<(Vec<u8>, bool)> = None;
    if count > 0 {
        if start < 0 || start >= count {
            bail!("the start index ({start}) is out of range [0, {count})");
        }
        if (end < 0 || end > count) && end != -1 {
            bail!("the end index ({end}) is out of range [0, {count}]");
        }
        if start > end && end != -1 {
            bail!("the start index ({start}) is bigger than the end index ({end})");
        }
        if start == end {
            bail!("invalid: the start index ({start}) is equal to the end index ({end})");
        }
        let end = if end == -1 { count } else { end };
        let removed = (start as usize)..(end as usize);
        rewritten = Some(rebuild_page(&page, kind, removed, raw.page_size())?);
    }
    let output = Output::copy_of(&args.base)?;
    let mut abandoned = false;
    if let Some((new_page, orphans)) = rewritten {
        let new_overflow = PageHeader::read(&new_page)
            .expect("a page holds a header")
            .overflow;
        abandoned = orphans || new_overflow != header.overflow || kind == Some(PageKind::Branch);
        output.write_at(&new_page, args.page_id * raw.page_size() as u64)?;
    }
    output.finish()?;
    let mut w = std::io::stdout().lock();
    if abandoned && freelist_persisted(&raw)? {
        writeln!(
            w,
            "WARNING: The clearing has abandoned some pages that are not yet referenced from free list."
        )?;
        abandon_hint(&mut w)?;
    }
    if whole_page {
        writeln!(w, "The page ({}) was cleared", args.page_id)?;
    } else {
        writeln!(
            w,
            "All elements in [{}, {}) in page {} were cleared",
            args.from_index, args.to_index, args.page_id
        )?;
    }
    Ok(())
}

/// The page without the elements in `removed`, packed anew, in whole pages; and whether a
/// removed element owned pages of its own (a child page, or a bucket with a root page) that
/// nothing refers to now.
fn rebuild_page(
    page: &PageRef<'_>,
    kind: Option<PageKind>,
    removed: std::ops::Range<usize>,
    page_size: usize,
) -> Result<(Vec<u8>, bool)> {
    let pgid = page.pgid();
    let kept = |index: &usize| !removed.contains(index);
    if kind == Some(PageKind::Leaf) {
        let leaf = page.leaf()?;
        let mut entries = Vec::new();
        let mut orphans = false;
        for index in 0..leaf.len() {
            let entry = leaf.entry(index)?;
            if kept(&index) {
                entries.push(entry);
            } else if entry.is_bucket() {
                orphans |= rbolt_page::BucketHeader::read(entry.value).is_some_and(|h| h.root != 0);
            }
        }
        let kv_len = entries.iter().map(|e| e.key.len() + e.value.len()).sum();
        let size = leaf_page_size(entries.len(), kv_len);
        let n_pages = pages_for(size, page_size);
        let mut buf = vec![0u8; n_pages * page_size];
        let mut builder = LeafBuilder::new(&mut buf, pgid, entries.len(), (n_pages - 1) as u32);
        for entry in &entries {
            builder.push(entry.flags, entry.key, entry.value);
        }
        builder.finish();
        Ok((buf, orphans))
    } else {
        let branch = page.branch()?;
        let mut children = Vec::new();
        for index in (0..branch.len()).filter(kept) {
            children.push((branch.key(index)?, branch.child(index)?));
        }
        let key_len = children.iter().map(|(key, _)| key.len()).sum();
        let size = branch_page_size(children.len(), key_len);
        let n_pages = pages_for(size, page_size);
        let mut buf = vec![0u8; n_pages * page_size];
        let mut builder = BranchBuilder::new(&mut buf, pgid, children.len(), (n_pages - 1) as u32);
        for (key, child) in &children {
            builder.push(key, *child);
        }
        builder.finish();
        Ok((buf, !removed.is_empty()))
    }
}

/// `surgery freelist abandon`: both metas say "no freelist", so the next open rebuilds it by
/// scanning. A meta that is already invalid is left alone: recomputing its checksum would
/// make a torn meta look valid.
fn freelist_abandon(args: &BaseArgs) -> Result<()> {
    let raw = RawFile::open(&args.path, &args.lock)?;
    let metas = raw.metas()?;
    let output = Output::copy_of(args)?;
    let mut w = std::io::stdout().lock();
    let mut skipped = Vec::new();
    for (index, slot) in metas.iter().enumerate() {
        let index = index as u64;
        let read_len = rbolt_page::ONE_SYNC_LEN_MAX.min(raw.page_size());
        let bytes = raw.read_short(index * raw.page_size() as u64, read_len)?;
        // A meta in rbolt's own forms (a one-sync commit's, or one without syncs) is whole,
        // but rbolt trusts it only after checking its pages; rewriting it in Go's form here
        // would skip that. rbolt's open does it, and writes a meta in Go's form.
        if let Ok((_, kind)) = rbolt_page::read_meta_page(&bytes, Pgid(index))
            && kind != rbolt_page::MetaDurability::Durable
        {
            skipped.push(format!(
                "meta page {index} was written by rbolt in its own form ({}); open the file \
                 with rbolt first, which checks it and writes a meta in Go's form",
                if kind == rbolt_page::MetaDurability::OneSync {
                    "a one-sync commit"
                } else {
                    "a commit without syncs"
                }
            ));
            continue;
        }
        match (slot.meta, rbolt_page::read_meta(&bytes, Pgid(index))) {
            (Some(meta), Ok(_)) => {
                let meta = Meta {
                    freelist: rbolt_page::PGID_NO_FREELIST.0,
                    ..meta
                };
                output.write_at(
                    &meta_page_bytes(index, &meta),
                    index * raw.page_size() as u64,
                )?;
            }
            (_, Err(corruption)) => skipped.push(format!("{corruption}")),
            (None, Ok(_)) => unreachable!("a meta that reads has a record"),
        }
    }
    if skipped.len() == 2 {
        bail!(
            "neither meta page could be rewritten ({}); nothing was written",
            skipped.join("; ")
        );
    }
    output.finish()?;
    for reason in &skipped {
        writeln!(w, "WARNING: left a meta page as it is: {reason}")?;
    }
    writeln!(w, "The freelist was abandoned in both meta pages.")?;
    writeln!(
        w,
        "It may cause some delay on next startup because the whole db must be scanned to reconstruct the free list."
    )?;
    Ok(())
}

/// `surgery freelist rebuild`: for a file that keeps no freelist, commits one transaction
/// that writes one (it rewrites one bucket's root page unchanged, so that there is something
/// to commit).
fn freelist_rebuild(args: &BaseArgs) -> Result<()> {
    let raw = RawFile::open(&args.path, &args.lock)?;
    if freelist_persisted(&raw)? {
        bail!(
            "the file already has freelist, please consider to abandon the freelist to forcibly rebuild it"
        );
    }
    let mut output = Output::copy_of(args)?;
    // The database takes its own lock on the copy; within one process the two would conflict.
    output.release();
    {
        let db = Db::open_with(
            output.temp(),
            Options::default().readers_beside_writer(false),
        )
        .map_err(|e| anyhow!(e).context("cannot open the copy"))?;
        let mut tx = db.begin_write()?;
        let first = tx.buckets().next().transpose()?.map(|e| e.key().to_vec());
        match first {
            Some(name) => {
                let mut bucket = tx
                    .bucket_mut(&name)?
                    .ok_or_else(|| anyhow!("bucket vanished"))?;
                let sequence = bucket.sequence();
                bucket.set_sequence(sequence)?;
            }
            None => {
                const NAME: &[u8] = b"rbolt-surgery-freelist-rebuild";
                tx.create_bucket(NAME)?;
                tx.delete_bucket(NAME)?;
            }
        }
        tx.commit()?;
        db.close()?;
    }
    let check = RawFile::open(output.temp(), &args.lock)?;
    if !freelist_persisted(&check)? {
        bail!("the rebuilt copy still keeps no freelist");
    }
    // `finish` opens the copy for writing, which a reader in this process would block.
    drop(check);
    output.finish()?;
    println!("The freelist was successfully rebuilt.");
    Ok(())
}

/// Rounds of `fix_separators` one surgery runs: a branch with one child below another one
/// is merged by the second round, and each round merges one more level of such a chain
/// (whatever is left is reported, and the surgery fails).
const FIX_ROUNDS_MAX: usize = 4;

/// `surgery fix-separators`: repairs a copy in rbolt write transactions (`WriteTx::fix_separators`
/// and a commit, again while one finds something), checks that nothing Go's writer cannot
/// continue is left and that the content is unchanged, and puts the copy at `--output`.
fn fix_separators(args: &BaseArgs) -> Result<()> {
    let mut output = Output::copy_of(args)?;
    output.release();
    let mut found = 0;
    {
        let db = Db::open_with(
            output.temp(),
            Options::default().readers_beside_writer(false),
        )
        .map_err(|e| anyhow!(e).context("cannot open the copy"))?;
        let before = content_digest(&db)?;
        for _ in 0..FIX_ROUNDS_MAX {
            let mut tx = db.begin_write()?;
            let round = tx.fix_separators()?;
            tx.commit()?;
            found += round;
            if round == 0 {
                break;
            }
        }
        let left: Vec<String> = db
            .begin_read()?
            .check()
            .iter()
            .filter(|error| error.breaks_go_writer())
            .map(ToString::to_string)
            .collect();
        if !left.is_empty() {
            bail!(
                "{} places are left that Go bbolt's writer cannot continue:\n{}",
                left.len(),
                left.join("\n")
            );
        }
        if content_digest(&db)? != before {
            bail!("the repaired copy's content differs from the source's");
        }
        db.close()?;
    }
    output.finish()?;
    let mut w = crate::out::stdout();
    writeln!(w, "{found} places repaired.")?;
    crate::out::flush(w)
}

/// A digest of every bucket, key, value and sequence of the database (FNV-1a over the walk):
/// what a repair must leave unchanged.
fn content_digest(db: &Db) -> Result<u64> {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &byte in (bytes.len() as u64).to_le_bytes().iter().chain(bytes) {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    let tx = db.begin_read()?;
    let root = tx.root();
    let mut walk = root.walk();
    while let Some(step) = walk.next_step() {
        match step? {
            rbolt::WalkStep::Value { key, value } => {
                eat(b"v");
                eat(key);
                eat(value);
            }
            rbolt::WalkStep::Enter { name, bucket } => {
                eat(b"b");
                eat(name);
                eat(&bucket.sequence().to_le_bytes());
            }
            rbolt::WalkStep::Leave => eat(b"l"),
        }
    }
    Ok(hash)
}

/// `surgery meta validate`: says for each meta page whether it is valid.
fn meta_validate(args: &ValidateArgs) -> Result<()> {
    let raw = RawFile::open(&args.path, &args.lock)?;
    let mut w = std::io::stdout().lock();
    for (index, slot) in raw.metas()?.iter().enumerate() {
        match &slot.valid {
            Ok(()) => writeln!(w, "The meta page {index} is valid!")?,
            Err(corruption) => {
                writeln!(
                    w,
                    "WARNING: The meta page {index} isn't valid: {corruption}!"
                )?;
            }
        }
    }
    Ok(())
}

/// The meta fields `surgery meta update` may set.
const META_FIELDS: [&str; 4] = ["pageSize", "root", "freelist", "pgid"];

/// `surgery meta update --fields name:value,... [--meta-page N]`: sets the fields, then makes
/// the page a well-formed meta page (header, magic, version, checksum).
fn meta_update(args: &MetaUpdateArgs) -> Result<()> {
    let mut fields = Vec::new();
    for field in &args.fields {
        let (name, value) = field
            .split_once(':')
            .filter(|(_, value)| !value.contains(':'))
            .ok_or_else(|| anyhow!("invalid key-value pair: {field}"))?;
        if !META_FIELDS.contains(&name) {
            bail!("field {name:?} isn't allowed to be updated");
        }
        let value: u64 = value
            .parse()
            .map_err(|_| anyhow!("invalid value {value:?} for field {name:?}"))?;
        fields.push((name, value));
    }
    let raw = RawFile::open(&args.base.path, &args.base.lock)?;
    let index = args.meta_page;
    let offset = index * raw.page_size() as u64;
    let bytes = raw.read_exact(offset, META_PAGE_LEN)?;
    let mut meta = Meta::read_unchecked(&bytes).expect("enough bytes were read");
    for &(name, value) in &fields {
        match name {
            "pageSize" => {
                meta.page_size =
                    u32::try_from(value).map_err(|_| anyhow!("pageSize {value} is too large"))?;
            }
            "root" => {
                meta.root = rbolt_page::BucketHeader {
                    root: value,
                    sequence: 0,
                };
            }
            "freelist" => meta.freelist = value,
            "pgid" => meta.pgid = value,
            _ => unreachable!("fields were checked above"),
        }
    }
    meta.magic = rbolt_page::MAGIC;
    meta.version = rbolt_page::VERSION;
    let new_bytes = meta_page_bytes(index, &meta);
    let changed = new_bytes[..] != bytes[..];
    let output = Output::copy_of(&args.base)?;
    if changed {
        output.write_at(&new_bytes, offset)?;
    }
    output.finish()?;
    let mut w = std::io::stdout().lock();
    if index == 1 && meta.page_size as usize != raw.page_size() {
        writeln!(
            w,
            "WARNING: The page size ({}) in the first meta page doesn't match the second meta page ({})",
            raw.page_size(),
            meta.page_size
        )?;
    }
    if changed {
        writeln!(w, "The meta page {index} has been updated!")?;
    } else {
        writeln!(w, "Nothing changed!")?;
    }
    Ok(())
}
