//! The edits of an image in place, in both layouts: insert, remove, a changed value or
//! child, and the truncate and append a split and a merge are made of.

use super::{
    BRANCH_PGID, ELEMENT_SIZE, HEADER_COUNT, LEAF_FLAGS, LEAF_POS, LEAF_VSIZE, NewEntry,
    PACKED_INSERTS_MAX, PageMut, elem_off, read_u32, write_u32,
};
use crate::layout::{BranchElement, LeafElement};
use crate::types::ELEMENT_COUNT_MAX;
use core::ops::Range;

impl<B: AsRef<[u8]> + AsMut<[u8]>> PageMut<B> {
    #[inline]
    fn set_count(&mut self, count: usize) {
        debug_assert!(
            count <= ELEMENT_COUNT_MAX,
            "{count} elements do not fit a page header"
        );
        self.bytes_mut()[HEADER_COUNT..HEADER_COUNT + 2]
            .copy_from_slice(&(count as u16).to_le_bytes());
    }

    /// Adds `delta` to the `pos` of elements `range`.
    #[inline]
    pub(super) fn shift_pos(&mut self, range: Range<usize>, delta: i64) {
        if delta == 0 {
            return;
        }
        let field = self.pos_field();
        let buf = self.bytes_mut();
        for index in range {
            let at = elem_off(index) + field;
            let pos = i64::from(read_u32(buf, at)) + delta;
            debug_assert!(
                (0..=i64::from(u32::MAX)).contains(&pos),
                "element {index} pos {pos} out of range"
            );
            write_u32(buf, at, pos as u32);
        }
    }

    /// Writes element `index` (its fields, with data at `data`) and the entry's bytes.
    #[inline]
    fn write_entry(&mut self, index: usize, data: usize, entry: &NewEntry<'_>) {
        let at = elem_off(index);
        let pos = (data - at) as u32;
        let buf = self.bytes_mut();
        match *entry {
            NewEntry::Leaf { flags, key, value } => {
                let element = LeafElement {
                    flags,
                    pos,
                    ksize: key.len() as u32,
                    vsize: value.len() as u32,
                };
                buf[at..at + ELEMENT_SIZE].copy_from_slice(bytemuck::bytes_of(&element));
                buf[data..data + key.len()].copy_from_slice(key);
                buf[data + key.len()..data + key.len() + value.len()].copy_from_slice(value);
            }
            NewEntry::Branch { key, child } => {
                let element = BranchElement {
                    pos,
                    ksize: key.len() as u32,
                    pgid: child,
                };
                buf[at..at + ELEMENT_SIZE].copy_from_slice(bytemuck::bytes_of(&element));
                buf[data..data + key.len()].copy_from_slice(key);
            }
        }
    }

    /// Inserts `entry` at `index`, in place: the buffer must have room (see
    /// [`PageMut::move_to`]).
    #[inline]
    pub fn insert(&mut self, index: usize, entry: &NewEntry<'_>) {
        if !self.gap && self.inserts >= PACKED_INSERTS_MAX && self.count() > 0 {
            self.open_gap();
        }
        if self.gap {
            self.insert_gap(index, entry);
        } else {
            self.insert_packed(index, entry);
            self.inserts = self.inserts.saturating_add(1);
        }
    }

    /// Moves the data of a packed image to the end of its buffer: the gap layout.
    pub(super) fn open_gap(&mut self) {
        debug_assert!(!self.gap, "an image in the gap layout already");
        let count = self.count();
        let (start, end, len) = (elem_off(count), self.used, self.bytes().len());
        let shift = len - end;
        self.bytes_mut().copy_within(start..end, start + shift);
        self.shift_pos(0..count, shift as i64);
        self.gap = true;
        self.data_low = start + shift;
        self.debug_check();
    }

    /// What every insert relies on: the index is within the image, the entry is of the
    /// image's kind, and a page header can count one more element.
    #[inline]
    fn debug_check_insert(&self, index: usize, entry: &NewEntry<'_>) {
        let count = self.count();
        debug_assert!(index <= count, "insert at {index} of {count}");
        debug_assert_eq!(entry.is_leaf(), self.leaf, "an entry of the other kind");
        debug_assert!(
            count < ELEMENT_COUNT_MAX,
            "an image of {count} elements is full"
        );
    }

    /// An insert in the gap layout: the element array's tail moves up one element, the pair
    /// goes below the data.
    fn insert_gap(&mut self, index: usize, entry: &NewEntry<'_>) {
        let count = self.count();
        let grow = entry.size();
        self.debug_check_insert(index, entry);
        debug_assert!(
            elem_off(count + 1) + entry.data_len() <= self.data_low,
            "insert of {grow} bytes into a gap of {}",
            self.data_low - elem_off(count)
        );
        self.bytes_mut()
            .copy_within(elem_off(index)..elem_off(count), elem_off(index + 1));
        // Elements after `index` moved up one element; their data stayed.
        self.shift_pos(index + 1..count + 1, -(ELEMENT_SIZE as i64));
        let data = self.data_low - entry.data_len();
        self.write_entry(index, data, entry);
        self.data_low = data;
        self.used += grow;
        self.set_count(count + 1);
        self.debug_check();
    }

    /// An insert in the packed layout.
    fn insert_packed(&mut self, index: usize, entry: &NewEntry<'_>) {
        let count = self.count();
        let grow = entry.size();
        self.debug_check_insert(index, entry);
        debug_assert!(
            self.used + grow <= self.bytes().len(),
            "insert of {grow} bytes into {} of {}",
            self.used,
            self.bytes().len()
        );
        let used = self.used;
        let at = elem_off(index);
        let data = if index < count {
            self.data_start(index)
        } else {
            used
        };
        // Entries from `index` on move up by the new element and data; the elements from
        // `index` on and the data before it, by one element.
        let buf = self.bytes_mut();
        buf.copy_within(data..used, data + grow);
        buf.copy_within(at..data, at + ELEMENT_SIZE);
        // Elements before `index` stayed, their data moved up one element; elements after it
        // moved up one element, their data by that and the new data.
        self.shift_pos(0..index, ELEMENT_SIZE as i64);
        self.shift_pos(index + 1..count + 1, entry.data_len() as i64);
        self.write_entry(index, data + ELEMENT_SIZE, entry);
        self.used = used + grow;
        self.set_count(count + 1);
        self.debug_check();
    }

    /// Removes entry `index`, in place.
    #[inline]
    pub fn remove(&mut self, index: usize) {
        if self.gap {
            self.remove_gap(index);
        } else {
            self.remove_packed(index);
        }
    }

    /// Adds `len` to the `pos` of every element but `except` whose data lies below `start`
    /// (the data there moved up by `len`), and of an empty pair at `start` (an empty key of a
    /// corrupt page), which would be left below the data otherwise.
    fn lift_data_below(&mut self, start: usize, len: usize, count: usize, except: Option<usize>) {
        let field = self.pos_field();
        for other in 0..count {
            if Some(other) == except {
                continue;
            }
            let other_start = self.data_start(other);
            if other_start < start || (other_start == start && self.data_len(other) == 0) {
                let at = elem_off(other) + field;
                let buf = self.bytes_mut();
                let pos = read_u32(buf, at) + len as u32;
                write_u32(buf, at, pos);
            }
        }
    }

    /// A delete in the gap layout: the element array's tail moves down one element, the data
    /// below the pair up by the pair (as LMDB does).
    fn remove_gap(&mut self, index: usize) {
        let count = self.count();
        debug_assert!(index < count, "remove {index} of {count}");
        let start = self.data_start(index);
        let len = self.data_len(index);
        self.bytes_mut()
            .copy_within(elem_off(index + 1)..elem_off(count), elem_off(index));
        self.shift_pos(index..count - 1, ELEMENT_SIZE as i64);
        let low = self.data_low;
        self.bytes_mut().copy_within(low..start, low + len);
        self.lift_data_below(start, len, count - 1, None);
        self.data_low = low + len;
        self.used -= ELEMENT_SIZE + len;
        self.set_count(count - 1);
        self.debug_check();
    }

    /// A delete in the packed layout.
    fn remove_packed(&mut self, index: usize) {
        let count = self.count();
        debug_assert!(index < count, "remove {index} of {count}");
        let used = self.used;
        let at = elem_off(index);
        let data = self.data_start(index);
        let len = self.data_len(index);
        let buf = self.bytes_mut();
        buf.copy_within(at + ELEMENT_SIZE..data, at);
        buf.copy_within(data + len..used, data - ELEMENT_SIZE);
        self.shift_pos(0..index, -(ELEMENT_SIZE as i64));
        self.shift_pos(index..count - 1, -(len as i64));
        self.used = used - ELEMENT_SIZE - len;
        self.set_count(count - 1);
        self.debug_check();
    }

    /// Replaces leaf entry `index`'s flags and value, in place: the buffer must have room for
    /// a longer value.
    pub fn set_value(&mut self, index: usize, flags: u32, value: &[u8]) {
        debug_assert!(self.leaf, "value of a branch element");
        let old = self.vsize(index);
        if self.gap && value.len() != old {
            self.set_value_gap(index, flags, value);
            return;
        }
        let count = self.count();
        let start = self.data_start(index) + self.ksize(index);
        let at = elem_off(index);
        if self.gap {
            let buf = self.bytes_mut();
            buf[start..start + value.len()].copy_from_slice(value);
            write_u32(buf, at + LEAF_FLAGS, flags);
            return;
        }
        let delta = value.len() as i64 - old as i64;
        debug_assert!(
            (self.used as i64 + delta) as usize <= self.bytes().len(),
            "a value that does not fit"
        );
        let used = self.used;
        let buf = self.bytes_mut();
        buf.copy_within(start + old..used, start + value.len());
        buf[start..start + value.len()].copy_from_slice(value);
        self.shift_pos(index + 1..count, delta);
        let buf = self.bytes_mut();
        write_u32(buf, at + LEAF_FLAGS, flags);
        write_u32(buf, at + LEAF_VSIZE, value.len() as u32);
        self.used = (used as i64 + delta) as usize;
        self.debug_check();
    }

    /// A value of another length in the gap layout: the pair moves to the bottom of the data
    /// (the data below it up by the pair), where it is rewritten with its new value, growing
    /// into the gap or shrinking out of it. No byte of the key is copied out of the buffer.
    fn set_value_gap(&mut self, index: usize, flags: u32, value: &[u8]) {
        let count = self.count();
        let key_len = self.ksize(index);
        let old = key_len + self.vsize(index);
        let new = key_len + value.len();
        let start = self.data_start(index);
        let low = self.data_low;
        debug_assert!(
            elem_off(count) + new <= low + old,
            "a value that does not fit the gap"
        );
        self.bytes_mut()[low..start + old].rotate_right(old);
        self.lift_data_below(start, old, count, Some(index));
        let new_low = low + old - new;
        let buf = self.bytes_mut();
        buf.copy_within(low..low + key_len, new_low);
        buf[new_low + key_len..new_low + new].copy_from_slice(value);
        let at = elem_off(index);
        write_u32(buf, at + LEAF_FLAGS, flags);
        write_u32(buf, at + LEAF_POS, (new_low - at) as u32);
        write_u32(buf, at + LEAF_VSIZE, value.len() as u32);
        self.data_low = new_low;
        self.used = self.used + new - old;
        self.debug_check();
    }

    /// Sets branch entry `index`'s page-id field.
    #[inline]
    pub fn set_child(&mut self, index: usize, child: u64) {
        debug_assert!(!self.leaf, "child of a leaf element");
        let at = elem_off(index) + BRANCH_PGID;
        self.bytes_mut()[at..at + 8].copy_from_slice(&child.to_le_bytes());
    }

    /// Keeps the first `keep` entries of a packed image.
    pub fn truncate(&mut self, keep: usize) {
        debug_assert!(!self.gap, "an image in the gap layout: pack it first");
        let count = self.count();
        if keep >= count {
            return;
        }
        let data = elem_off(count);
        let end = if keep > 0 {
            self.data_start(keep - 1) + self.data_len(keep - 1)
        } else {
            data
        };
        let shift = ELEMENT_SIZE * (count - keep);
        self.bytes_mut().copy_within(data..end, data - shift);
        self.shift_pos(0..keep, -(shift as i64));
        self.used = end - shift;
        self.set_count(keep);
        self.debug_check();
    }

    /// Appends entries `range` of `source` (a packed image of the same kind, keys after this
    /// one's) to this packed image, in place: the buffer must have room.
    pub fn append_from<S: AsRef<[u8]>>(&mut self, source: &PageMut<S>, range: Range<usize>) {
        debug_assert!(
            !self.gap && !source.gap,
            "an image in the gap layout: pack it first"
        );
        if range.is_empty() {
            return;
        }
        debug_assert_eq!(source.leaf, self.leaf, "entries of the other kind");
        let count = self.count();
        let added = range.len();
        let elements = ELEMENT_SIZE * added;
        let used = self.used;
        // Own data moves up by the new elements.
        self.bytes_mut()
            .copy_within(elem_off(count)..used, elem_off(count) + elements);
        self.shift_pos(0..count, elements as i64);
        // The source's data for `range` is one packed block: one copy.
        let first = source.data_start(range.start);
        let last = range.end - 1;
        let end = source.data_start(last) + source.data_len(last);
        let data = used + elements;
        let len = end - first;
        debug_assert!(
            data + len <= self.bytes().len(),
            "appended entries do not fit"
        );
        let field = self.pos_field();
        let (from_bytes, buf) = (source.bytes(), self.buf.as_mut());
        buf[data..data + len].copy_from_slice(&from_bytes[first..end]);
        for (slot, index) in range.enumerate() {
            let to = elem_off(count + slot);
            let from = elem_off(index);
            buf[to..to + ELEMENT_SIZE].copy_from_slice(&from_bytes[from..from + ELEMENT_SIZE]);
            let entry_data = data + (source.data_start(index) - first);
            write_u32(buf, to + field, (entry_data - to) as u32);
        }
        self.used = data + len;
        self.set_count(count + added);
        self.debug_check();
    }
}
