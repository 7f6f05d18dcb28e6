//! Touching a page: making nodes of the path from the root down to a given depth, unchanged,
//! so that the commit writes that page (and the pages above it) again at newly allocated ids.
//! The online vacuum moves a page this way, without rewriting anything below it.

use crate::tree::{Bound, Path, Tree, Undo, too_deep};
use crate::{Arena, Pages};
use rbolt_page::Pgid;

impl Tree {
    /// Makes nodes of the path from the root to the node at `depth` (0: the root) on the way to
    /// `key`, and returns the page that node was made from (`None`: it was a node already, or
    /// the tree is new or inline). Nothing below `depth` is touched. The nodes are unchanged
    /// copies of their pages; the commit writes each of them at a new page and frees the old.
    /// A tree shallower than `depth` is touched to its leaf. On an error (a corrupt page on
    /// the way) the tree is exactly as before.
    pub fn touch_to_depth(
        &mut self,
        pages: Pages<'_>,
        arena: &mut Arena,
        key: &[u8],
        depth: usize,
    ) -> rbolt_page::Result<Option<Pgid>> {
        self.append_hint = None;
        let mut undo = self.undo_point();
        let found = self.touch_path(pages, arena, key, depth, &mut undo);
        if found.is_err() {
            self.undo(undo, arena);
        }
        found
    }

    fn touch_path(
        &mut self,
        pages: Pages<'_>,
        arena: &mut Arena,
        key: &[u8],
        depth: usize,
        undo: &mut Undo,
    ) -> rbolt_page::Result<Option<Pgid>> {
        let made_before = self.nodes.len();
        let mut path = Path::new();
        let mut id = self.materialize_root(pages, arena, Some(undo))?;
        let mut bounds: (Bound, Bound) = (None, None);
        while path.len() < depth {
            let node = &self.nodes[id as usize];
            if node.is_leaf() || node.count() == 0 {
                break;
            }
            if path.len() + 1 >= crate::DEPTH_MAX {
                return Err(too_deep());
            }
            let index = node.child_index(key);
            bounds = self.child_bounds(id, index, bounds);
            let child = self.child_node(pages, arena, id, index, bounds, &path, Some(undo))?;
            path.push((id, index));
            id = child;
        }
        let node = &self.nodes[id as usize];
        let made = id as usize >= made_before;
        Ok((made && node.pgid != Pgid(0)).then_some(node.pgid))
    }
}
