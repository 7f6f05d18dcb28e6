//! The deferred truncation: cutting the file once no reader can need its tail.
//!
//! A commit that lowers the high-water mark (auto-shrink, a vacuum step: see `vacuum/mod.rs`)
//! leaves a [`Truncate`] in the writer state. It is done after a commit, a durable point or a
//! reader's end, once both hold: a meta with a mark that low is durable (a power loss brings
//! back the durable meta, whose pages must all stay in the file), and no open reader started
//! from an older snapshot (its mapping and mark may reach the tail). The file is never cut
//! below the newest meta's mark, so an open never finds it `Truncated`, crash or not.

use crate::engine::{Engine, Truncate, Writer, processes};
use crate::error::{Error, Result};
use crate::trace;
use rbolt_page::Meta;
use std::sync::atomic::Ordering;

/// The length auto-shrink leaves a file whose pages end at `needed` bytes: what growth from
/// there would make it, so that a file near its size does not shrink and grow by turns.
fn slack_len(needed: u64, options: &crate::Options, page_size: u64) -> u64 {
    crate::engine::page_writes::grown_len(
        needed,
        options.alloc_size.max(page_size),
        page_size,
        options.max_size,
    )
}

/// After a commit of `meta` (published, writer still held): keeps a waiting truncation above
/// the new mark, plans one if this commit shrank (`shrink`), and truncates if nothing stands
/// in the way. A failed truncation is forgotten: the commit is done, and a file longer than
/// its pages is sound.
pub(crate) fn after_commit(engine: &Engine, writer: &mut Writer, meta: &Meta, shrink: bool) {
    let page_size = engine.page_size as u64;
    let needed = meta.pgid.saturating_mul(page_size);
    if let Some(truncate) = writer.truncate.as_mut() {
        truncate.len = truncate.len.max(needed);
    }
    if shrink {
        let target = slack_len(needed, &engine.options, page_size);
        if writer.file_len > target && writer.truncate.is_none_or(|t| t.len > target) {
            writer.truncate = Some(Truncate {
                len: target,
                after: meta.txid(),
            });
        }
    }
    let _ = truncate_if_unseen(engine, writer);
}

/// After a newer meta became durable outside a commit (`Db::sync`, a close, recovery at open):
/// a truncation that waited for it may go ahead.
pub(crate) fn after_durable(engine: &Engine, writer: &mut Writer) {
    if writer.truncate.is_some() {
        let _ = truncate_if_unseen(engine, writer);
    }
}

/// After a reader ended: if a truncation waits (perhaps for this reader), tries it, unless a
/// writer is busy (its commit will try).
pub(crate) fn after_reader(engine: &Engine) {
    if !engine.truncate_wanted.load(Ordering::Acquire) {
        return;
    }
    if let Ok(mut writer) = engine.writer.try_lock() {
        let _ = truncate_if_unseen(engine, &mut writer);
    }
}

/// When the handle closes: a truncation still waiting (its reader ended while a writer was
/// busy, and nothing committed since) is done now that no reader is left. Under
/// `auto_shrink` the file also gives its growth room back: it is cut to the pages the last
/// commit uses, once that commit is durable (the close made it so, unless it failed).
pub(crate) fn on_close(engine: &Engine) {
    let give_back = engine.options.auto_shrink
        && !engine.options.read_only
        && !engine.poisoned.load(Ordering::Acquire);
    if !give_back && !engine.truncate_wanted.load(Ordering::Acquire) {
        return;
    }
    let mut writer = engine
        .writer
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if give_back {
        let meta = engine.snapshot().meta;
        let needed = meta.pgid.saturating_mul(engine.page_size as u64);
        if writer.durable.txid == meta.txid
            && writer.file_len > needed
            && writer.truncate.is_none_or(|t| t.len > needed)
        {
            writer.truncate = Some(Truncate {
                len: needed,
                after: meta.txid(),
            });
        }
    }
    let _ = truncate_if_unseen(engine, &mut writer);
}

/// Cuts the file to the waiting truncation's length if its meta is durable and no reader of
/// an older snapshot is open; returns whether it cut. Call with the writer held.
pub(crate) fn truncate_if_unseen(engine: &Engine, writer: &mut Writer) -> Result<bool> {
    let Some(truncate) = writer.truncate else {
        engine.truncate_wanted.store(false, Ordering::Release);
        return Ok(false);
    };
    if truncate.len >= writer.file_len {
        writer.truncate = None;
        engine.truncate_wanted.store(false, Ordering::Release);
        return Ok(false);
    }
    engine.truncate_wanted.store(true, Ordering::Release);
    // A crash may bring back the durable meta (and, in this boot, the newest): the cut must
    // leave every page of both. The newest's are within `len` (`after_commit`); the durable
    // one's are once a meta with a mark that low is durable.
    let durable_needs = writer.durable.pgid.saturating_mul(engine.page_size as u64);
    if engine.poisoned.load(Ordering::Acquire) || truncate.len < durable_needs {
        return Ok(false);
    }
    // A reader registers under the lock that publishing takes, so one that took an older
    // snapshot is in the registry by now; new readers start from the newest, at or after
    // `truncate.after`, whose marks are all within `truncate.len`.
    let mut readers = std::mem::take(&mut writer.readers_scratch);
    readers.clear();
    engine.readers.collect(&mut readers);
    let mut slots = std::mem::take(&mut writer.slots_scratch);
    let blocked = readers.iter().any(|&txid| txid < truncate.after)
        || processes::blocks_truncation(engine, truncate.after, truncate.len, &mut slots);
    writer.readers_scratch = readers;
    writer.slots_scratch = slots;
    if blocked {
        return Ok(false);
    }
    writer.truncate = None;
    engine.truncate_wanted.store(false, Ordering::Release);
    failpoint!("vacuum::before-truncate");
    match engine.storage.shrink(truncate.len) {
        Ok(()) => {
            trace::shrunk(engine.storage.path(), writer.file_len, truncate.len);
            writer.file_len = truncate.len;
            Ok(true)
        }
        // A storage that cannot shrink keeps its length: sound, only longer than it needs.
        Err(error) if error.kind() == std::io::ErrorKind::Unsupported => Ok(false),
        Err(error) => Err(Error::io(engine.storage.path(), error)),
    }
}
