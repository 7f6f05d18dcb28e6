//! A minimal reader over a whole database file in memory, built only from rbolt-page's public
//! API: it reads pages by id, walks bucket trees, rebuilds their logical content and computes
//! bbolt's bucket statistics on the way.

use rbolt_fixtures::{Bucket, Item};
use rbolt_page::{
    BRANCH_ELEMENT_SIZE, BranchPage, BucketHeader, BucketValue, Corruption, LEAF_ELEMENT_SIZE,
    LeafPage, Meta, PAGE_HEADER_SIZE, PageHeader, PageKind, PageRef, Pgid, Reason, check_overflow,
    check_pgid, read_meta, span_len,
};
use serde_json::Value;
use std::collections::BTreeMap;

/// The deepest descent the walk follows, counting tree levels and bucket nesting together.
/// bbolt's trees are a handful of levels deep; in a corrupt file a cycle between pages would
/// otherwise recurse until the stack overflows.
pub(crate) const DEPTH_MAX: usize = 64;

/// A database file held in memory, read page by page.
#[derive(Clone, Copy, Debug)]
pub(crate) struct File<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) page_size: usize,
    pub(crate) high_water: Pgid,
}

impl<'a> File<'a> {
    /// The file with the page size of meta 0 and the high-water mark of `meta`.
    pub(crate) fn new(bytes: &'a [u8], page_size: usize, high_water: Pgid) -> File<'a> {
        File {
            bytes,
            page_size,
            high_water,
        }
    }

    /// The bytes of page `pgid`'s span: the page and its overflow pages.
    pub(crate) fn span(&self, pgid: Pgid) -> Result<&'a [u8], Corruption> {
        if pgid.0 >= self.high_water.0 {
            return Err(Corruption::new(
                pgid,
                Reason::PgidOutOfBounds {
                    what: "page",
                    pgid: pgid.0,
                    high_water: self.high_water.0,
                },
            ));
        }
        let start = usize::try_from(pgid.0)
            .ok()
            .and_then(|n| n.checked_mul(self.page_size))
            .ok_or(Corruption::new(
                pgid,
                Reason::Other("page offset overflows"),
            ))?;
        let header = self
            .bytes
            .get(start..)
            .and_then(PageHeader::read)
            .ok_or_else(|| {
                truncated(
                    pgid,
                    "page header",
                    start + PAGE_HEADER_SIZE,
                    self.bytes.len(),
                )
            })?;
        check_overflow(pgid, header.overflow, self.high_water)?;
        let len = span_len(self.page_size, header.overflow).ok_or(Corruption::new(
            pgid,
            Reason::OverflowOutOfBounds {
                overflow: header.overflow,
            },
        ))?;
        self.bytes
            .get(start..start + len)
            .ok_or_else(|| truncated(pgid, "page span", start + len, self.bytes.len()))
    }

    /// Page `pgid`.
    pub(crate) fn page(&self, pgid: Pgid) -> Result<PageRef<'a>, Corruption> {
        PageRef::new(self.span(pgid)?, pgid)
    }
}

fn truncated(pgid: Pgid, what: &'static str, need: usize, have: usize) -> Corruption {
    Corruption::new(
        pgid,
        Reason::Truncated {
            what,
            need: need as u64,
            have: have as u64,
        },
    )
}

/// bbolt's `BucketStats`, field for field (see bucket.go, `Bucket.Stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Stats {
    pub(crate) branch_page_n: u64,
    pub(crate) branch_overflow_n: u64,
    pub(crate) leaf_page_n: u64,
    pub(crate) leaf_overflow_n: u64,
    pub(crate) key_n: u64,
    pub(crate) depth: u64,
    pub(crate) branch_alloc: u64,
    pub(crate) branch_inuse: u64,
    pub(crate) leaf_alloc: u64,
    pub(crate) leaf_inuse: u64,
    pub(crate) bucket_n: u64,
    pub(crate) inline_bucket_n: u64,
    pub(crate) inline_bucket_inuse: u64,
}

impl Stats {
    /// bbolt's `BucketStats.Add`: sums, except the depth, which is the larger one.
    pub(crate) fn add(&mut self, other: Stats) {
        self.branch_page_n += other.branch_page_n;
        self.branch_overflow_n += other.branch_overflow_n;
        self.leaf_page_n += other.leaf_page_n;
        self.leaf_overflow_n += other.leaf_overflow_n;
        self.key_n += other.key_n;
        self.depth = self.depth.max(other.depth);
        self.branch_alloc += other.branch_alloc;
        self.branch_inuse += other.branch_inuse;
        self.leaf_alloc += other.leaf_alloc;
        self.leaf_inuse += other.leaf_inuse;
        self.bucket_n += other.bucket_n;
        self.inline_bucket_n += other.inline_bucket_n;
        self.inline_bucket_inuse += other.inline_bucket_inuse;
    }

    /// The stats as the fixture summaries spell them (bbolt's JSON field names).
    pub(crate) fn from_json(value: &Value) -> Stats {
        let field = |name: &str| {
            value[name]
                .as_u64()
                .unwrap_or_else(|| panic!("stats field {name} missing in {value}"))
        };
        Stats {
            branch_page_n: field("BranchPageN"),
            branch_overflow_n: field("BranchOverflowN"),
            leaf_page_n: field("LeafPageN"),
            leaf_overflow_n: field("LeafOverflowN"),
            key_n: field("KeyN"),
            depth: field("Depth"),
            branch_alloc: field("BranchAlloc"),
            branch_inuse: field("BranchInuse"),
            leaf_alloc: field("LeafAlloc"),
            leaf_inuse: field("LeafInuse"),
            bucket_n: field("BucketN"),
            inline_bucket_n: field("InlineBucketN"),
            inline_bucket_inuse: field("InlineBucketInuse"),
        }
    }
}

/// Bytes in use as bbolt's stats count them: the header, every element but the last, and
/// the last element's pos + sizes (which reach the end of the data when pages are packed).
/// `last`: the last element's index and its pos + sizes.
fn inuse(element_size: usize, last: Option<(usize, u64)>) -> u64 {
    match last {
        None => PAGE_HEADER_SIZE as u64,
        Some((last, data_end)) => (PAGE_HEADER_SIZE + element_size * last) as u64 + data_end,
    }
}

fn leaf_inuse(page: &LeafPage<'_>) -> u64 {
    let last = page.len().checked_sub(1).and_then(|last| {
        let elem = page.element(last)?;
        Some((
            last,
            u64::from(elem.pos) + u64::from(elem.ksize) + u64::from(elem.vsize),
        ))
    });
    inuse(LEAF_ELEMENT_SIZE, last)
}

fn branch_inuse(page: &BranchPage<'_>) -> u64 {
    let last = page.len().checked_sub(1).and_then(|last| {
        let elem = page.element(last)?;
        Some((last, u64::from(elem.pos) + u64::from(elem.ksize)))
    });
    inuse(BRANCH_ELEMENT_SIZE, last)
}

/// A page the walk reached.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Reached<'a> {
    /// A branch page of some bucket's tree.
    Branch(BranchPage<'a>),
    /// A leaf page of some bucket's tree.
    Leaf(LeafPage<'a>),
    /// The leaf page of an inline bucket, inside a bucket value of the page it names.
    Inline(LeafPage<'a>),
}

/// What walking one bucket found.
#[derive(Debug)]
pub(crate) struct BucketWalk {
    /// Its logical content.
    pub(crate) content: Bucket,
    /// bbolt's stats for it, nested buckets included.
    pub(crate) stats: Stats,
    /// The stats of each bucket directly inside it, by name.
    pub(crate) children: Vec<(Vec<u8>, Stats)>,
}

/// Walks the trees of one meta, checking structure as it goes.
#[derive(Debug)]
pub(crate) struct Walker<'a> {
    pub(crate) file: File<'a>,
    /// Every page reached, in walk order.
    pub(crate) reached: Vec<Reached<'a>>,
    /// Every bucket value met (owner page, value bytes).
    pub(crate) bucket_values: Vec<(Pgid, &'a [u8])>,
    /// First page id and overflow of every tree page reached: a page reached twice is an error.
    pub(crate) owned: BTreeMap<u64, u32>,
    /// Number of branch elements whose key is exactly the smallest key of the child's subtree.
    pub(crate) branch_keys_exact: usize,
    /// Number of branch elements.
    pub(crate) branch_keys: usize,
}

/// One bucket's walk in progress.
struct TreeState<'a> {
    entries: BTreeMap<Vec<u8>, Item>,
    stats: Stats,
    sub: Stats,
    children: Vec<(Vec<u8>, Stats)>,
    last_key: Option<&'a [u8]>,
    levels: u64,
    /// The level of the first leaf met: every leaf of a tree is at the same level.
    leaf_level: Option<u64>,
}

impl<'a> Walker<'a> {
    pub(crate) fn new(file: File<'a>) -> Walker<'a> {
        Walker {
            file,
            reached: Vec::new(),
            bucket_values: Vec::new(),
            owned: BTreeMap::new(),
            branch_keys_exact: 0,
            branch_keys: 0,
        }
    }

    /// Walks the bucket with `header` (and its inline page, if any); `owner` is the page that
    /// holds its value and `depth` the descent so far.
    pub(crate) fn bucket(
        &mut self,
        header: BucketHeader,
        inline: Option<LeafPage<'a>>,
        owner: Pgid,
        depth: usize,
    ) -> Result<BucketWalk, Corruption> {
        if depth > DEPTH_MAX {
            return Err(Corruption::new(
                owner,
                Reason::TooDeep {
                    depth_max: DEPTH_MAX,
                },
            ));
        }
        let mut state = TreeState {
            entries: BTreeMap::new(),
            stats: Stats {
                bucket_n: 1,
                ..Stats::default()
            },
            sub: Stats::default(),
            children: Vec::new(),
            last_key: None,
            levels: 0,
            leaf_level: None,
        };
        match inline {
            Some(page) => {
                self.reached.push(Reached::Inline(page));
                page.validate()?;
                state.stats.inline_bucket_n = 1;
                state.stats.key_n += page.len() as u64;
                state.stats.inline_bucket_inuse += leaf_inuse(&page);
                state.levels = 1;
                self.leaf_entries(page, &mut state, None, None, depth, true)?;
            }
            None => {
                check_pgid(
                    "bucket root",
                    owner,
                    header.root_pgid(),
                    self.file.high_water,
                )?;
                self.tree(header.root_pgid(), 0, None, None, &mut state, depth)?;
                let page_size = self.file.page_size as u64;
                let stats = &mut state.stats;
                stats.branch_alloc = (stats.branch_page_n + stats.branch_overflow_n) * page_size;
                stats.leaf_alloc = (stats.leaf_page_n + stats.leaf_overflow_n) * page_size;
            }
        }
        let mut stats = state.stats;
        stats.depth = state.levels + state.sub.depth;
        stats.add(state.sub);
        Ok(BucketWalk {
            content: Bucket {
                sequence: header.sequence,
                entries: state.entries,
            },
            stats,
            children: state.children,
        })
    }

    /// Walks the subtree at `pgid`, whose keys must lie in `[lower, upper)`. Returns the
    /// smallest key in it.
    fn tree(
        &mut self,
        pgid: Pgid,
        level: u64,
        lower: Option<&'a [u8]>,
        upper: Option<&'a [u8]>,
        state: &mut TreeState<'a>,
        depth: usize,
    ) -> Result<Option<&'a [u8]>, Corruption> {
        if depth > DEPTH_MAX {
            return Err(Corruption::new(
                pgid,
                Reason::TooDeep {
                    depth_max: DEPTH_MAX,
                },
            ));
        }
        let page = self.file.page(pgid)?;
        let header = page.header();
        if self.owned.insert(pgid.0, header.overflow).is_some() {
            return Err(Corruption::new(pgid, Reason::Other("page reached twice")));
        }
        state.levels = state.levels.max(level + 1);
        match page.kind()? {
            PageKind::Branch => {
                let branch = page.branch()?;
                self.reached.push(Reached::Branch(branch));
                branch.validate(self.file.high_water)?;
                state.stats.branch_page_n += 1;
                state.stats.branch_overflow_n += u64::from(header.overflow);
                state.stats.branch_inuse += branch_inuse(&branch);
                let mut first = None;
                for index in 0..branch.len() {
                    let key = branch.key(index)?;
                    let out_of_range =
                        lower.is_some_and(|low| key < low) || upper.is_some_and(|high| key >= high);
                    if out_of_range {
                        return Err(Corruption::new(pgid, Reason::KeyOrder { index }));
                    }
                    let next = if index + 1 < branch.len() {
                        Some(branch.key(index + 1)?)
                    } else {
                        upper
                    };
                    let child = branch.child(index)?;
                    let smallest =
                        self.tree(child, level + 1, Some(key), next, state, depth + 1)?;
                    self.branch_keys += 1;
                    if smallest == Some(key) {
                        self.branch_keys_exact += 1;
                    }
                    first = first.or(smallest);
                }
                Ok(first)
            }
            PageKind::Leaf => {
                let leaf = page.leaf()?;
                self.reached.push(Reached::Leaf(leaf));
                if *state.leaf_level.get_or_insert(level) != level {
                    return Err(Corruption::new(
                        pgid,
                        Reason::Other("leaves at different depths"),
                    ));
                }
                leaf.validate()?;
                state.stats.leaf_page_n += 1;
                state.stats.leaf_overflow_n += u64::from(header.overflow);
                state.stats.leaf_inuse += leaf_inuse(&leaf);
                state.stats.key_n += leaf.len() as u64;
                self.leaf_entries(leaf, state, lower, upper, depth, false)
            }
            PageKind::Meta | PageKind::Freelist => Err(Corruption::new(
                pgid,
                Reason::WrongKind {
                    expected: PageKind::Leaf,
                    flags: header.flags,
                },
            )),
        }
    }

    /// Takes the entries of a leaf (or an inline page) into the bucket's content, descending
    /// into nested buckets. Returns the first key.
    fn leaf_entries(
        &mut self,
        leaf: LeafPage<'a>,
        state: &mut TreeState<'a>,
        lower: Option<&'a [u8]>,
        upper: Option<&'a [u8]>,
        depth: usize,
        inline: bool,
    ) -> Result<Option<&'a [u8]>, Corruption> {
        let owner = leaf.pgid();
        for (index, entry) in leaf.iter().enumerate() {
            let entry = entry?;
            let out_of_order = state.last_key.is_some_and(|last| entry.key <= last)
                || lower.is_some_and(|low| entry.key < low)
                || upper.is_some_and(|high| entry.key >= high);
            if out_of_order {
                return Err(Corruption::new(owner, Reason::KeyOrder { index }));
            }
            state.last_key = Some(entry.key);
            let item = if entry.is_bucket() {
                self.bucket_values.push((owner, entry.value));
                let value = BucketValue::parse(entry.value, owner)?;
                let child = self.bucket(value.header, value.inline, owner, depth + 1)?;
                // bbolt counts the buckets nested in an inline bucket's page nowhere (writers
                // never put any there), so neither do we.
                if !inline {
                    state.sub.add(child.stats);
                }
                state.children.push((entry.key.to_vec(), child.stats));
                Item::Bucket(child.content)
            } else {
                Item::Value(entry.value.to_vec())
            };
            state.entries.insert(entry.key.to_vec(), item);
        }
        Ok(match leaf.len() {
            0 => None,
            _ => Some(leaf.key(0)?),
        })
    }
}

/// A fixture file with both metas read.
pub(crate) struct Db {
    pub(crate) bytes: Vec<u8>,
    pub(crate) page_size: usize,
    pub(crate) metas: [Meta; 2],
}

impl Db {
    /// Reads fixture `name`: the page size from meta 0, then both metas.
    pub(crate) fn open(name: &str) -> Db {
        let bytes = rbolt_fixtures::db_bytes(name);
        let meta0 = read_meta(&bytes, Pgid(0)).unwrap_or_else(|e| panic!("{name}: meta 0: {e}"));
        let page_size = meta0.page_size as usize;
        let meta1 = read_meta(&bytes[page_size..2 * page_size], Pgid(1))
            .unwrap_or_else(|e| panic!("{name}: meta 1: {e}"));
        Db {
            bytes,
            page_size,
            metas: [meta0, meta1],
        }
    }

    /// The index of the meta with the higher txid (both are valid in the fixtures).
    pub(crate) fn newest(&self) -> usize {
        usize::from(self.metas[1].txid > self.metas[0].txid)
    }

    /// The file as seen through meta `index`.
    pub(crate) fn file(&self, index: usize) -> File<'_> {
        File::new(&self.bytes, self.page_size, self.metas[index].high_water())
    }

    /// Walks every tree of meta `index`.
    pub(crate) fn walk(&self, index: usize) -> (Walker<'_>, BucketWalk) {
        let mut walker = Walker::new(self.file(index));
        let root = walker
            .bucket(self.metas[index].root, None, Pgid(index as u64), 0)
            .unwrap_or_else(|e| panic!("walk from meta {index}: {e}"));
        (walker, root)
    }
}

/// The meta rule rbolt opens files with: the page size from meta 0, or when meta 0 is
/// unreadable, from the first meta 1 found at 512 << i; both metas read (magic, version,
/// checksum) and their fields checked against the file length; the higher txid of those that
/// pass. Returns the index of the meta chosen and the meta.
pub(crate) fn select_meta(bytes: &[u8]) -> Result<(usize, Meta), Corruption> {
    let page_size = probe_page_size(bytes)?;
    let file_len = bytes.len() as u64;
    // Each meta: intact (its checksum matches) or not, and sound or why not.
    let read = |index: usize| -> (Option<Meta>, Result<Meta, Corruption>) {
        let pgid = Pgid(index as u64);
        let page = bytes.get(index * page_size..).unwrap_or_default();
        let meta = match read_meta(page, pgid) {
            Ok(meta) => meta,
            Err(error) => return (None, Err(error)),
        };
        if meta.page_size as usize != page_size {
            let error = Corruption::new(pgid, Reason::Other("metas disagree on the page size"));
            return (Some(meta), Err(error));
        }
        (
            Some(meta),
            meta.validate_fields(pgid, file_len).map(|()| meta),
        )
    };
    let (metas, sound): (Vec<_>, Vec<_>) = [read(0), read(1)].into_iter().unzip();
    // An intact newest meta past the end of the file is a truncation: no falling back.
    let newest = (0..2)
        .filter(|&i| metas[i].is_some())
        .max_by_key(|&i| metas[i].map(|m| m.txid));
    if let Some(newest) = newest
        && let Err(error) = &sound[newest]
        && matches!(error.reason, Reason::HighWaterPastEnd { .. })
    {
        return Err(error.clone());
    }
    match (&sound[0], &sound[1]) {
        (Ok(meta0), Ok(meta1)) if meta1.txid > meta0.txid => Ok((1, *meta1)),
        (Ok(meta0), _) => Ok((0, *meta0)),
        (Err(_), Ok(meta1)) => Ok((1, *meta1)),
        (Err(error), Err(_)) => Err(error.clone()),
    }
}

fn probe_page_size(bytes: &[u8]) -> Result<usize, Corruption> {
    let error = match read_meta(bytes, Pgid(0)) {
        Ok(meta) => return Ok(meta.page_size as usize),
        Err(error) => error,
    };
    let found = rbolt_page::find_meta1(bytes.len() as u64, |buf, offset| {
        let start = offset as usize;
        buf.copy_from_slice(&bytes[start..start + buf.len()]);
        Ok::<(), std::convert::Infallible>(())
    });
    match found {
        Ok(Some(meta)) => Ok(meta.page_size as usize),
        _ => Err(error),
    }
}

/// A new database as bbolt's `init` writes it: metas with txids 0 and 1, an empty freelist at
/// page 2, an empty root leaf at page 3, high-water mark 4.
pub(crate) fn new_db(page_size: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; rbolt_page::EMPTY_DB_PAGES * page_size];
    rbolt_page::write_empty_db(&mut bytes, page_size);
    bytes
}

/// The meta `new_db` writes on page `pgid` (0 or 1): txid `pgid`, root 3, freelist 2,
/// high-water mark 4.
pub(crate) fn new_meta(page_size: usize, pgid: u64) -> Meta {
    let prefix = &rbolt_page::empty_db_prefixes(page_size)[pgid as usize];
    read_meta(prefix, Pgid(pgid)).expect("a new database's meta is valid")
}
