//! Freeing every page of a tree (a deleted bucket): committed subtrees and the pages edited
//! nodes came from, depth first on an explicit stack bounded by `DEPTH_MAX`.

use crate::DEPTH_MAX;
use crate::node::{NODE_TAG, NodeId};
use crate::pages::Pages;
use crate::tree::{PageAlloc, Root, Tree, too_deep};
use rbolt_page::{Corruption, PageKind, PageRef, Pgid, Reason};

/// Something to free: an edited node, or a committed page (a child of `owner`).
#[derive(Clone, Copy)]
enum Item {
    Node(NodeId),
    Page { owner: Pgid, pgid: Pgid },
}

/// A node or page on the stack, freed already, and the next of its children to visit.
struct Freeing {
    item: Item,
    next: usize,
}

impl Tree {
    /// The root as the first item of a walk over the tree's own pages; `None` for a tree
    /// without pages of its own (new, or inline in its parent's value).
    fn root_item(&self) -> Option<Item> {
        match self.root {
            Root::Page(pgid) => Some(Item::Page {
                owner: Pgid(0),
                pgid,
            }),
            Root::Node(id) => Some(Item::Node(id)),
            Root::New | Root::Inline { .. } | Root::InlineCopy(_) => None,
        }
    }

    /// Frees every page of the tree: committed subtrees and the pages edited nodes came from.
    /// Nested buckets' trees are not this tree's: the caller frees them.
    pub fn free_all<A: PageAlloc>(
        &mut self,
        pages: Pages<'_>,
        alloc: &mut A,
    ) -> Result<(), A::Error> {
        self.append_hint = None;
        // A sound tree has fewer pages than the high-water mark; more means pages reached
        // along several paths, which would otherwise make this exponential.
        let mut budget = pages.high_water().0;
        let Some(first) = self.root_item() else {
            return Ok(());
        };
        let mut stack: Vec<Freeing> = Vec::new();
        self.free_one(pages, alloc, first, &mut budget)?;
        stack.push(Freeing {
            item: first,
            next: 0,
        });
        while let Some(top) = stack.last_mut() {
            let child = self.child_item(pages, top)?;
            let Some(child) = child else {
                stack.pop();
                continue;
            };
            top.next += 1;
            if stack.len() >= DEPTH_MAX {
                return Err(too_deep().into());
            }
            self.free_one(pages, alloc, child, &mut budget)?;
            stack.push(Freeing {
                item: child,
                next: 0,
            });
        }
        Ok(())
    }

    /// Calls `f` with every page [`Tree::free_all`] would free (each id with its overflow),
    /// changing nothing: so a caller can check a whole deletion before it frees anything. A
    /// corrupt page met on the way is an error, and `f` may have been called for some pages.
    pub fn for_each_page(
        &self,
        pages: Pages<'_>,
        mut f: impl FnMut(Pgid, u32),
    ) -> rbolt_page::Result<()> {
        let mut budget = pages.high_water().0;
        let Some(first) = self.root_item() else {
            return Ok(());
        };
        let mut visit = |item: Item, budget: &mut u64| -> rbolt_page::Result<()> {
            match item {
                Item::Node(id) => {
                    let node = &self.nodes[id as usize];
                    if node.pgid.0 != 0 {
                        f(node.pgid, node.overflow);
                    }
                }
                Item::Page { owner, pgid } => {
                    let overflow = check_tree_page(pages, owner, pgid, budget)?;
                    f(pgid, overflow);
                }
            }
            Ok(())
        };
        visit(first, &mut budget)?;
        let mut stack = vec![Freeing {
            item: first,
            next: 0,
        }];
        while let Some(top) = stack.last_mut() {
            let Some(child) = self.child_item(pages, top)? else {
                stack.pop();
                continue;
            };
            top.next += 1;
            if stack.len() >= DEPTH_MAX {
                return Err(too_deep());
            }
            visit(child, &mut budget)?;
            stack.push(Freeing {
                item: child,
                next: 0,
            });
        }
        Ok(())
    }

    /// The next child of `freeing` to visit, if any.
    fn child_item(&self, pages: Pages<'_>, freeing: &Freeing) -> rbolt_page::Result<Option<Item>> {
        Ok(match freeing.item {
            Item::Node(id) => {
                let node = &self.nodes[id as usize];
                (!node.is_leaf() && freeing.next < node.count()).then(|| {
                    let child = node.child(freeing.next);
                    if child & NODE_TAG != 0 {
                        Item::Node((child & !NODE_TAG) as NodeId)
                    } else {
                        Item::Page {
                            owner: node.pgid,
                            pgid: Pgid(child),
                        }
                    }
                })
            }
            Item::Page { owner, pgid } => {
                let page = PageRef::new(pages.page(owner, pgid)?, pgid)?;
                if page.header().kind() == Some(PageKind::Branch) {
                    let branch = page.branch()?;
                    if freeing.next < branch.len() {
                        Some(Item::Page {
                            owner: pgid,
                            pgid: branch.child(freeing.next)?,
                        })
                    } else {
                        None
                    }
                } else {
                    None
                }
            }
        })
    }

    /// Frees the page of `item` (for a node, the page it came from), counting pages against
    /// `budget`, and checks a page is a tree page.
    fn free_one<A: PageAlloc>(
        &mut self,
        pages: Pages<'_>,
        alloc: &mut A,
        item: Item,
        budget: &mut u64,
    ) -> Result<(), A::Error> {
        match item {
            Item::Node(id) => {
                let node = &mut self.nodes[id as usize];
                if node.pgid.0 != 0 {
                    let (pgid, overflow) = (node.pgid, node.overflow);
                    node.pgid = Pgid(0);
                    alloc.free(pgid, overflow)?;
                }
            }
            Item::Page { owner, pgid } => {
                let overflow = check_tree_page(pages, owner, pgid, budget)?;
                alloc.free(pgid, overflow)?;
            }
        }
        Ok(())
    }
}

/// Reads page `pgid` (a child of `owner`) of a tree to free, counting its span against
/// `budget` (a tree reaching more pages than the file holds reaches some twice), and checks it
/// is a leaf or a branch; returns its overflow.
fn check_tree_page(
    pages: Pages<'_>,
    owner: Pgid,
    pgid: Pgid,
    budget: &mut u64,
) -> rbolt_page::Result<u32> {
    let page = PageRef::new(pages.page(owner, pgid)?, pgid)?;
    let overflow = page.header().overflow;
    let span = u64::from(overflow) + 1;
    if *budget < span {
        return Err(Corruption::new(
            pgid,
            Reason::Other("a tree reaches pages twice"),
        ));
    }
    *budget -= span;
    match page.header().kind() {
        Some(PageKind::Leaf) => {}
        Some(PageKind::Branch) => {
            page.branch()?;
        }
        _ => {
            return Err(Corruption::new(
                pgid,
                Reason::NotTreePage {
                    flags: page.header().flags,
                },
            ));
        }
    }
    Ok(overflow)
}
