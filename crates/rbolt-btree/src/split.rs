//! Splitting a node that outgrew its page, like a B-tree: when an insert does not fit, the
//! node is cut in two (or, with entries larger than a page, more) at once, and the new
//! node's first key goes into the parent, which may split in turn, up to a new root.
//!
//! Where the cut falls ([`Policy`]): unless a fill percent is set, at the byte middle, so
//! random inserts leave pages about 69% full (half full after a split, full before the next,
//! ln 2 on average); or, when the node is being filled in ascending order, at the append
//! point, so a sorted load leaves full pages behind it. A fill percent set by the user puts
//! that fraction of a page in the left node, as bbolt does when it cuts pages at commit.
//!
//! The entry being inserted is part of the cut: it is written once, into the node it ends
//! in, and the entries that move are copied once, as one block of data.

use crate::node::arena::Arena;
use crate::node::{NODE_TAG, Node, NodeId};
use crate::tree::{FILL_PERCENT_MAX, FILL_PERCENT_MIN, MIN_KEYS_PER_PAGE, Root, Tree};
use rbolt_page::{ELEMENT_COUNT_MAX, NewEntry, branch_page_size, element_page_size, pages_for};
use smallvec::SmallVec;

/// Where an overflowing node is cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Policy {
    /// Into halves of (nearly) equal bytes.
    Middle,
    /// Before the last entry (the last two in a branch, which keeps two children at least):
    /// the node is being filled in ascending order and the new node will take what follows.
    Append,
    /// The left piece filled up to `threshold` bytes, as often as it takes.
    Fill { threshold: usize },
}

/// The first entry of every piece after the first.
pub(crate) type Cuts = SmallVec<[usize; 4]>;

/// New nodes made by a split, in key order.
pub(crate) type Pieces = SmallVec<[NodeId; 4]>;

/// Where to cut `count` entries, entry `k` taking `size(k)` bytes (element and data), into
/// pieces that fit a page of `page_size` bytes, each with at least `min_entries` entries.
/// A piece that does not fit but has fewer than twice `min_entries` entries stays whole
/// (it takes overflow pages). Empty when nothing needs cutting or nothing can be cut.
pub(crate) fn plan(
    count: usize,
    size: &dyn Fn(usize) -> usize,
    page_size: usize,
    min_entries: usize,
    policy: Policy,
) -> Cuts {
    debug_assert!(min_entries >= 1, "a piece of no entries");
    // Sums of sizes, so that any piece's bytes are one subtraction.
    let mut sums: SmallVec<[usize; 128]> = SmallVec::with_capacity(count + 1);
    sums.push(0);
    let mut total = 0;
    for k in 0..count {
        total += size(k);
        sums.push(total);
    }
    let bytes = |start: usize, end: usize| element_page_size(sums[end] - sums[start]);
    let fits = |start: usize, end: usize| {
        end - start <= ELEMENT_COUNT_MAX && bytes(start, end) <= page_size
    };
    let splittable = |start: usize, end: usize| end - start >= 2 * min_entries;
    let mut cuts = Cuts::new();
    if fits(0, count) || !splittable(0, count) {
        return cuts;
    }
    match policy {
        Policy::Append => {
            let cut = count - min_entries;
            if fits(0, cut) && fits(cut, count) {
                cuts.push(cut);
                return cuts;
            }
            // A node that did not fit before this entry: cut it as any other.
            return plan(count, size, page_size, min_entries, Policy::Middle);
        }
        Policy::Fill { threshold } => {
            let mut start = 0;
            while !fits(start, count) && splittable(start, count) {
                let mut used = element_page_size(0);
                let mut end = start;
                while end < count - min_entries {
                    let len = size(end);
                    if end - start >= min_entries
                        && (used + len > threshold || end - start >= ELEMENT_COUNT_MAX)
                    {
                        break;
                    }
                    used += len;
                    end += 1;
                }
                cuts.push(end);
                start = end;
            }
        }
        Policy::Middle => {
            // Halve every piece that does not fit until all do (or cannot be halved).
            let mut pieces: SmallVec<[(usize, usize); 4]> = SmallVec::new();
            pieces.push((0, count));
            let mut at = 0;
            while at < pieces.len() {
                let (start, end) = pieces[at];
                if fits(start, end) || !splittable(start, end) {
                    at += 1;
                    continue;
                }
                let total = sums[end] - sums[start];
                let mut left = 0;
                let mut best = (start + min_entries, usize::MAX);
                for cut in start + 1..=end - min_entries {
                    left += size(cut - 1);
                    if cut < start + min_entries {
                        continue;
                    }
                    let distance = (2 * left).abs_diff(total);
                    if distance >= best.1 {
                        // Past the middle: the distance only grows from here.
                        break;
                    }
                    best = (cut, distance);
                }
                pieces[at] = (start, best.0);
                pieces.insert(at + 1, (best.0, end));
            }
            cuts.extend(pieces[1..].iter().map(|&(start, _)| start));
        }
    }
    debug_assert!(
        cuts.windows(2).all(|w| w[0] < w[1]) && cuts.iter().all(|&c| c > 0 && c < count),
        "cuts {cuts:?} of {count} entries out of order"
    );
    cuts
}

impl Tree {
    /// How this tree cuts a node that overflows; `appending`: the entry being inserted goes
    /// after the node's last, and so did the one before.
    fn policy(&self, appending: bool, page_size: usize) -> Policy {
        match self.fill_percent {
            Some(fill) => Policy::Fill {
                threshold: (page_size as f64 * fill.clamp(FILL_PERCENT_MIN, FILL_PERCENT_MAX))
                    as usize,
            },
            None if appending => Policy::Append,
            None => Policy::Middle,
        }
    }

    /// Inserts `entry` at `index` of node `id`, whose parents are `path`: in place when it
    /// fits the page, else by splitting the node (and its parents as they overflow in turn).
    /// Returns whether anything was split.
    pub(crate) fn insert_entry(
        &mut self,
        path: &[(NodeId, usize)],
        id: NodeId,
        index: usize,
        entry: &NewEntry<'_>,
        arena: &mut Arena,
    ) -> bool {
        let node = &mut self.nodes[id as usize];
        let count = node.count();
        if node.fits(entry.size(), 1, arena.page_size()) {
            node.insert(index, entry);
            node.appended = index == count;
            return false;
        }
        let pieces = self.split_with(id, Some((index, entry)), arena);
        if pieces.is_empty() {
            return false;
        }
        self.link_pieces(path, id, pieces, arena);
        true
    }

    /// Splits node `id`, with `pending` inserted at its index, into pieces that fit a page:
    /// the node keeps the first, new nodes (returned in key order) take the others. A node
    /// that cannot be split (too few entries) grows instead to hold `pending`, and nothing is
    /// returned.
    pub(crate) fn split_with(
        &mut self,
        id: NodeId,
        pending: Option<(usize, &NewEntry<'_>)>,
        arena: &mut Arena,
    ) -> Pieces {
        if let Some(piece) = self.split_at_append_point(id, pending, arena) {
            return piece;
        }
        let page_size = arena.page_size();
        self.nodes[id as usize].ensure_packed(arena);
        let node = &self.nodes[id as usize];
        let leaf = node.is_leaf();
        let old_count = node.count();
        let count = old_count + usize::from(pending.is_some());
        let inserted = pending.map(|(index, _)| index);
        // Old entries before virtual index `k` (the pending entry counts in `k`, not here).
        let old_before = |k: usize| k - usize::from(inserted.is_some_and(|i| i < k));
        let size = |k: usize| match pending {
            Some((index, entry)) if k == index => entry.size(),
            _ => node.entry_size(old_before(k)),
        };
        let min_entries = if leaf { 1 } else { MIN_KEYS_PER_PAGE };
        let appending = inserted == Some(old_count) && node.appended;
        let cuts = plan(
            count,
            &size,
            page_size,
            min_entries,
            self.policy(appending, page_size),
        );
        if cuts.is_empty() {
            if let Some((index, entry)) = pending {
                let node = &mut self.nodes[id as usize];
                node.reserve(node.used() + entry.size(), arena);
                node.insert(index, entry);
                node.appended = index == old_count;
            }
            return Pieces::new();
        }
        let piece_bytes = |start: usize, end: usize| {
            let bytes = element_page_size((start..end).map(size).sum::<usize>());
            pages_for(bytes, page_size) * page_size
        };
        let first_len = piece_bytes(0, cuts[0]);
        let mut built: SmallVec<[Node; 4]> = SmallVec::new();
        for (at, &start) in cuts.iter().enumerate() {
            let end = cuts.get(at + 1).copied().unwrap_or(count);
            let mut piece = Node::empty(arena, piece_bytes(start, end), leaf);
            piece.append_from(node, old_before(start)..old_before(end));
            if let Some((index, entry)) = pending
                && (start..end).contains(&index)
            {
                piece.insert(index - start, entry);
                piece.appended = index + 1 == end;
            }
            built.push(piece);
        }
        let first_end = cuts[0];
        let node = &mut self.nodes[id as usize];
        node.truncate(old_before(first_end));
        node.appended = false;
        if let Some((index, entry)) = pending
            && index < first_end
        {
            node.reserve(first_len, arena);
            node.insert(index, entry);
            node.appended = index + 1 == first_end;
        }
        self.stats.split += built.len() as u64;
        built
            .into_iter()
            .map(|piece| self.push_node(piece))
            .collect()
    }

    /// The common split of a sorted load, without planning: a leaf filled in ascending order
    /// (and within its fill percent, if one is set) overflows with an entry after its last.
    /// The node stays as it is (packed when it is written) and a new one takes the entry.
    /// `None` when the split is another.
    fn split_at_append_point(
        &mut self,
        id: NodeId,
        pending: Option<(usize, &NewEntry<'_>)>,
        arena: &mut Arena,
    ) -> Option<Pieces> {
        let (index, entry) = pending?;
        let page_size = arena.page_size();
        let node = &self.nodes[id as usize];
        let threshold = match self.policy(node.appended, page_size) {
            Policy::Append => page_size,
            Policy::Fill { threshold } => threshold,
            Policy::Middle => return None,
        };
        let alone = element_page_size(entry.size());
        if !node.is_leaf()
            || index != node.count()
            || node.count() == 0
            || node.used() > threshold.min(page_size)
            || alone > page_size
        {
            return None;
        }
        let mut piece = Node::empty(arena, page_size, true);
        piece.insert(0, entry);
        piece.appended = true;
        self.nodes[id as usize].appended = false;
        self.stats.split += 1;
        let mut pieces = Pieces::new();
        pieces.push(self.push_node(piece));
        Some(pieces)
    }

    /// Puts the first keys of `pieces` (split off node `id`, whose parents are `path`) into
    /// the parent after `id`, splitting parents that overflow, and the root into a new root.
    fn link_pieces(
        &mut self,
        path: &[(NodeId, usize)],
        mut id: NodeId,
        mut pieces: Pieces,
        arena: &mut Arena,
    ) {
        let page_size = arena.page_size();
        let mut level = path.len();
        loop {
            if level == 0 {
                self.grow_root(id, pieces, arena);
                return;
            }
            level -= 1;
            let (parent, index) = path[level];
            // The separator is copied out: the split may move the piece's node in memory.
            let mut scratch = std::mem::take(&mut self.scratch);
            let next = if let [piece] = pieces[..] {
                let entry = separator_entry(&mut scratch, &self.nodes, piece);
                let node = &mut self.nodes[parent as usize];
                let count = node.count();
                if node.fits(entry.size(), 1, page_size) {
                    node.insert(index + 1, &entry);
                    node.appended = index + 1 == count;
                    Pieces::new()
                } else {
                    self.split_with(parent, Some((index + 1, &entry)), arena)
                }
            } else {
                // Several pieces (entries larger than a page): all in, then one split.
                for (offset, &piece) in pieces.iter().enumerate() {
                    let entry = separator_entry(&mut scratch, &self.nodes, piece);
                    let node = &mut self.nodes[parent as usize];
                    node.reserve(node.used() + entry.size(), arena);
                    node.insert(index + 1 + offset, &entry);
                }
                if self.nodes[parent as usize].fits(0, 0, page_size) {
                    Pieces::new()
                } else {
                    self.split_with(parent, None, arena)
                }
            };
            self.scratch = scratch;
            if next.is_empty() {
                return;
            }
            pieces = next;
            id = parent;
        }
    }

    /// Makes a new root above the old root `id` and the nodes split off it; splits that one
    /// too while it does not fit a page.
    fn grow_root(&mut self, mut id: NodeId, mut pieces: Pieces, arena: &mut Arena) {
        let page_size = arena.page_size();
        debug_assert!(
            matches!(self.root, Root::Node(root) if root == id),
            "not the root"
        );
        loop {
            let children: SmallVec<[NodeId; 4]> = std::iter::once(id).chain(pieces).collect();
            let bytes = branch_page_size(
                children.len(),
                children
                    .iter()
                    .map(|&child| self.nodes[child as usize].key(0).len())
                    .sum::<usize>(),
            );
            let len = pages_for(bytes, page_size) * page_size;
            let mut root = Node::empty(arena, len, false);
            for (index, &child) in children.iter().enumerate() {
                root.insert(
                    index,
                    &NewEntry::Branch {
                        key: self.nodes[child as usize].key(0),
                        child: NODE_TAG | u64::from(child),
                    },
                );
            }
            // Built in ascending order: if what comes next does too, cut at the append point.
            root.appended = true;
            id = self.push_node(root);
            self.root = Root::Node(id);
            pieces = if self.nodes[id as usize].fits(0, 0, page_size) {
                Pieces::new()
            } else {
                self.split_with(id, None, arena)
            };
            if pieces.is_empty() {
                return;
            }
        }
    }
}

/// The branch entry that points at the split piece `piece`, its separator (the piece's first
/// key) copied into `scratch`: the split may move the piece's node in memory.
fn separator_entry<'s>(scratch: &'s mut Vec<u8>, nodes: &[Node], piece: u32) -> NewEntry<'s> {
    scratch.clear();
    scratch.extend_from_slice(nodes[piece as usize].key(0));
    NewEntry::Branch {
        key: scratch,
        child: NODE_TAG | u64::from(piece),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cuts of `sizes` into pages of `page` bytes.
    fn check(sizes: &[usize], page: usize, min: usize, policy: Policy, expected: &[usize]) {
        let cuts = plan(sizes.len(), &|k| sizes[k], page, min, policy);
        assert_eq!(&cuts[..], expected, "{sizes:?} in {page}, {policy:?}");
    }

    #[test]
    fn cuts() {
        // 16-byte header, entries of 100 bytes: five fit 520 bytes (16 + 500), six do not.
        let six = [100; 6];
        check(&six[..5], 520, 1, Policy::Middle, &[]);
        check(&six, 520, 1, Policy::Middle, &[3]);
        check(&six, 520, 1, Policy::Append, &[5]);
        // A branch keeps two children on the right.
        check(&six, 520, 2, Policy::Append, &[4]);
        check(&six, 520, 1, Policy::Fill { threshold: 520 }, &[5]);
        check(&six, 520, 1, Policy::Fill { threshold: 256 }, &[2]);
        // A tenth of 520 is 52 bytes: one entry, then the rest fits.
        check(&six, 520, 1, Policy::Fill { threshold: 52 }, &[1]);
        // ... and with smaller pages, one entry a piece until the rest fits.
        check(&six, 420, 1, Policy::Fill { threshold: 42 }, &[1, 2]);
        // The middle by bytes, not by count: 340 of 440 bytes is nearer half than 40.
        check(&[10, 10, 10, 10, 300, 100], 400, 1, Policy::Middle, &[5]);
        // Entries larger than a page each get their own piece.
        check(&[600, 600, 600], 512, 1, Policy::Middle, &[1, 2]);
        check(&[50, 600, 50], 512, 1, Policy::Middle, &[1, 2]);
        // A branch of three entries cannot be cut into pieces of two.
        check(&[600, 600, 600], 512, 2, Policy::Middle, &[]);
        // An append that would not fit on its own falls back to the middle.
        check(
            &[100, 100, 100, 100, 100, 600],
            512,
            1,
            Policy::Append,
            &[2, 5],
        );
    }
}
