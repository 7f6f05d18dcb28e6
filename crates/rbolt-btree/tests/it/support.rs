//! Helpers shared by the tests: a whole-tree check of committed pages.

use rbolt_btree::{DEPTH_MAX, Pages};
use rbolt_page::{BranchPage, LeafPage, PageKind, PageRef, Pgid, leaf_page_size};
use std::collections::BTreeSet;

/// What a walk of a committed tree found.
#[derive(Debug, Default)]
pub struct Walk {
    pub pages: BTreeSet<Pgid>,
    pub keys: Vec<Vec<u8>>,
    pub depth: usize,
    /// Leaf pages found.
    pub leaves: usize,
}

/// Walks the committed tree at `root`: every page must validate, keys must be ordered within
/// and across pages (each subtree's keys at or above its separator and below the next one),
/// no page may be reached twice, all leaves sit at the same depth, and nothing breaks what Go
/// bbolt's writer assumes (every separator its child's first key, no empty page below the
/// root, no branch with one child).
pub fn walk(pages: Pages<'_>, root: Pgid) -> Walk {
    let mut walk = Walk::default();
    let mut leaf_depth = None;
    visit(pages, root, None, None, 1, &mut leaf_depth, &mut walk);
    walk.depth = leaf_depth.unwrap_or(0);
    let mut hazards = Vec::new();
    rbolt_btree::tree_hazards(pages, root, &mut hazards).expect("the tree decodes");
    assert!(
        hazards.is_empty(),
        "Go bbolt's writer would corrupt this tree: {}",
        hazards
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    );
    walk
}

fn visit(
    pages: Pages<'_>,
    pgid: Pgid,
    low: Option<&[u8]>,
    high: Option<&[u8]>,
    depth: usize,
    leaf_depth: &mut Option<usize>,
    walk: &mut Walk,
) {
    assert!(depth <= DEPTH_MAX, "tree too deep");
    let bytes = pages.page(Pgid(0), pgid).expect("page in bounds");
    let page = PageRef::new(bytes, pgid).expect("page header");
    let overflow = page.header().overflow;
    for id in pgid.0..=pgid.0 + u64::from(overflow) {
        assert!(walk.pages.insert(Pgid(id)), "page {id} reached twice");
    }
    let in_range =
        |key: &[u8]| low.is_none_or(|low| key >= low) && high.is_none_or(|high| key < high);
    match page.kind().expect("kind") {
        PageKind::Leaf => {
            let leaf: LeafPage<'_> = page.leaf().unwrap();
            leaf.validate().unwrap();
            let payload = leaf.payload_len().unwrap();
            assert!(payload <= bytes.len());
            assert!(
                overflow == 0 || payload > (overflow as usize) * pages.page_size(),
                "leaf page {pgid} uses more overflow pages than it needs"
            );
            assert!(leaf_page_size(0, 0) <= payload);
            walk.leaves += 1;
            for index in 0..leaf.len() {
                let key = leaf.key(index).unwrap();
                assert!(
                    in_range(key),
                    "leaf {pgid} key {index} outside its parent's range"
                );
                walk.keys.push(key.to_vec());
            }
            match leaf_depth {
                Some(d) => assert_eq!(*d, depth, "leaves at different depths"),
                None => *leaf_depth = Some(depth),
            }
        }
        PageKind::Branch => {
            let branch: BranchPage<'_> = page.branch().unwrap();
            branch.validate(pages.high_water()).unwrap();
            assert!(!branch.is_empty(), "empty branch {pgid}");
            for index in 0..branch.len() {
                let key = branch.key(index).unwrap();
                assert!(
                    in_range(key),
                    "branch {pgid} key {index} outside its parent's range"
                );
                let next = if index + 1 < branch.len() {
                    Some(branch.key(index + 1).unwrap())
                } else {
                    high
                };
                // A separator is the smallest key of its child's subtree.
                visit(
                    pages,
                    branch.child(index).unwrap(),
                    Some(key),
                    next,
                    depth + 1,
                    leaf_depth,
                    walk,
                );
            }
        }
        other => panic!("page {pgid} in a tree is a {other} page"),
    }
}
