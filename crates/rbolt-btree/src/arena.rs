//! Bytes a write transaction owns: keys and values it wrote, in append-only chunks.
//!
//! Nodes never hold slices. They hold a position: either an offset into the committed pages
//! (a key or value not changed since it was read) or a place in this arena (tagged with the
//! top bit). This keeps the tree free of lifetimes and of `unsafe`, and keeps one allocation
//! per chunk instead of one per key.

/// Bit 63 of a position: the bytes are in the arena, not in the pages.
pub(crate) const ARENA_TAG: u64 = 1 << 63;
const CHUNK_SIZE_FIRST: usize = 64 * 1024;
const CHUNK_SIZE_MAX: usize = 8 * 1024 * 1024;

/// Append-only storage for the bytes a transaction writes.
#[derive(Debug, Default)]
pub struct Arena {
    chunks: Vec<Vec<u8>>,
    /// Index of the chunk being filled; big items get chunks of their own before it.
    current: usize,
    bytes: usize,
}

impl Arena {
    /// An empty arena; allocates nothing until the first push.
    pub fn new() -> Arena {
        Arena::default()
    }

    /// An empty arena, usable in a `static`.
    pub(crate) const fn empty() -> Arena {
        Arena {
            chunks: Vec::new(),
            current: 0,
            bytes: 0,
        }
    }

    /// Total bytes pushed.
    pub fn len(&self) -> usize {
        self.bytes
    }

    /// Whether nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// Forgets everything pushed, keeping the first chunk's memory for the next transaction.
    pub fn clear(&mut self) {
        self.chunks.truncate(1);
        if let Some(first) = self.chunks.first_mut() {
            first.clear();
        }
        self.current = 0;
        self.bytes = 0;
    }

    /// Appends `parts` back to back and returns the tagged position of the first byte.
    pub(crate) fn push(&mut self, parts: &[&[u8]]) -> u64 {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        self.bytes += len;
        let chunk_index = self.chunk_for(len);
        let chunk = &mut self.chunks[chunk_index];
        let offset = chunk.len();
        for part in parts {
            chunk.extend_from_slice(part);
        }
        ARENA_TAG | ((chunk_index as u64) << 32) | offset as u64
    }

    /// The index of a chunk with room for `len` more bytes without reallocating.
    fn chunk_for(&mut self, len: usize) -> usize {
        if let Some(chunk) = self.chunks.get(self.current)
            && chunk.capacity() - chunk.len() >= len
        {
            return self.current;
        }
        let next_size = self
            .chunks
            .last()
            .map_or(CHUNK_SIZE_FIRST, |c| (c.capacity() * 2).min(CHUNK_SIZE_MAX));
        if len > next_size / 2 {
            // A big item gets an exact chunk of its own; the current chunk stays current.
            self.chunks.push(Vec::with_capacity(len));
            let index = self.chunks.len() - 1;
            if self.chunks.len() == 1 {
                self.current = 0;
            }
            return index;
        }
        self.chunks.push(Vec::with_capacity(next_size));
        self.current = self.chunks.len() - 1;
        self.current
    }

    /// The tagged position of `slice`, if it lies in this arena.
    pub(crate) fn position_of(&self, slice: &[u8]) -> Option<u64> {
        let start = slice.as_ptr() as usize;
        self.chunks.iter().enumerate().find_map(|(index, chunk)| {
            let base = chunk.as_ptr() as usize;
            let offset = start.checked_sub(base)?;
            (offset + slice.len() <= chunk.len())
                .then_some(ARENA_TAG | ((index as u64) << 32) | offset as u64)
        })
    }

    /// The `len` bytes at tagged position `pos`.
    #[inline]
    pub(crate) fn get(&self, pos: u64, len: usize) -> &[u8] {
        debug_assert!(pos & ARENA_TAG != 0, "arena position without the tag");
        let chunk = ((pos & !ARENA_TAG) >> 32) as usize;
        let offset = (pos & 0xFFFF_FFFF) as usize;
        &self.chunks[chunk][offset..offset + len]
    }
}

/// Resolves a tagged position to bytes: in the arena, or in the committed pages.
#[inline]
pub(crate) fn resolve<'a>(pos: u64, len: usize, data: &'a [u8], arena: &'a Arena) -> &'a [u8] {
    if pos & ARENA_TAG != 0 {
        arena.get(pos, len)
    } else {
        let start = pos as usize;
        &data[start..start + len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushes_read_back_across_chunks_and_big_items() {
        let mut arena = Arena::new();
        let mut refs = Vec::new();
        for i in 0..20_000u32 {
            let key = i.to_be_bytes();
            let value = vec![i as u8; (i % 97) as usize];
            refs.push((arena.push(&[&key, &value]), key, value));
        }
        let big = vec![7u8; 3 * CHUNK_SIZE_MAX];
        let big_pos = arena.push(&[&big]);
        let after = arena.push(&[b"after"]);
        for (pos, key, value) in &refs {
            let bytes = arena.get(*pos, key.len() + value.len());
            assert_eq!(&bytes[..4], key);
            assert_eq!(&bytes[4..], &value[..]);
        }
        assert_eq!(arena.get(big_pos, big.len()), &big[..]);
        assert_eq!(arena.get(after, 5), b"after");
        arena.clear();
        assert!(arena.is_empty());
        let again = arena.push(&[b"x"]);
        assert_eq!(arena.get(again, 1), b"x");
    }
}
