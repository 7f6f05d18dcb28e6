//! The registry of open read transactions, which the writer consults to know which freed
//! pages no reader can see any more.
//!
//! Readers take a cache-padded slot each (a thread remembers the last slot it used, so the
//! common case is one uncontended compare-and-swap on a line no other thread writes) and
//! store their txid in it; the writer scans the slots. When every slot is taken, readers fall
//! back to a locked list.

use crossbeam_utils::CachePadded;
use rbolt_page::Txid;
use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// How many readers get a slot of their own; more still work, through a locked list.
pub const READER_SLOTS: usize = 128;

/// A free slot holds 0; a taken one holds the reader's txid plus one.
const SLOT_FREE: u64 = 0;

thread_local! {
    static SLOT_HINT: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// The open read transactions.
#[derive(Debug)]
pub(crate) struct Readers {
    slots: Box<[CachePadded<AtomicU64>]>,
    overflow: Mutex<Vec<Txid>>,
}

/// A registered reader; hand it back to [`Readers::leave`].
#[derive(Debug)]
pub(crate) enum ReaderSlot {
    Slot(usize),
    Overflow(Txid),
}

impl Readers {
    pub(crate) fn new() -> Readers {
        Readers {
            slots: (0..READER_SLOTS)
                .map(|_| CachePadded::new(AtomicU64::new(SLOT_FREE)))
                .collect(),
            overflow: Mutex::new(Vec::new()),
        }
    }

    /// Registers a reader of `txid`.
    pub(crate) fn enter(&self, txid: Txid) -> ReaderSlot {
        let value = txid.0 + 1;
        let hint = SLOT_HINT.with(Cell::get);
        let start = if hint < self.slots.len() {
            hint
        } else {
            // Spread threads over the slots by the address of a thread-local.
            SLOT_HINT.with(|h| h as *const Cell<usize> as usize / 64) % self.slots.len()
        };
        for offset in 0..self.slots.len() {
            let index = (start + offset) % self.slots.len();
            let slot = &self.slots[index];
            if slot.load(Ordering::Relaxed) == SLOT_FREE
                && slot
                    .compare_exchange(SLOT_FREE, value, Ordering::SeqCst, Ordering::Relaxed)
                    .is_ok()
            {
                SLOT_HINT.with(|h| h.set(index));
                return ReaderSlot::Slot(index);
            }
        }
        self.overflow
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(txid);
        ReaderSlot::Overflow(txid)
    }

    /// Unregisters a reader.
    pub(crate) fn leave(&self, slot: ReaderSlot) {
        match slot {
            ReaderSlot::Slot(index) => self.slots[index].store(SLOT_FREE, Ordering::SeqCst),
            ReaderSlot::Overflow(txid) => {
                let mut overflow = self.overflow.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(position) = overflow.iter().position(|t| *t == txid) {
                    overflow.swap_remove(position);
                }
            }
        }
    }

    /// Appends the txids of the open readers to `out` (unsorted, with repeats).
    pub(crate) fn collect(&self, out: &mut Vec<Txid>) {
        for slot in self.slots.iter() {
            let value = slot.load(Ordering::SeqCst);
            if value != SLOT_FREE {
                out.push(Txid(value - 1));
            }
        }
        out.extend(
            self.overflow
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .copied(),
        );
    }

    /// Number of open readers.
    pub(crate) fn count(&self) -> usize {
        let mut txids = Vec::new();
        self.collect(&mut txids);
        txids.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_and_overflow_register_and_leave() {
        let readers = Readers::new();
        let slots: Vec<ReaderSlot> = (0..READER_SLOTS as u64 + 10)
            .map(|t| readers.enter(Txid(t)))
            .collect();
        let mut txids = Vec::new();
        readers.collect(&mut txids);
        txids.sort();
        assert_eq!(
            txids,
            (0..READER_SLOTS as u64 + 10).map(Txid).collect::<Vec<_>>()
        );
        for slot in slots {
            readers.leave(slot);
        }
        assert_eq!(readers.count(), 0);
    }
}
