//! Repairs a write transaction makes on files older versions wrote: Go bbolt's writer rules
//! (`CheckError::breaks_go_writer`) put back, path by path.

use super::WriteTx;
use crate::error::Result;
use crate::walk::WalkStep;

impl WriteTx<'_> {
    /// Repairs, in this transaction, every place of the file where Go bbolt's writer would
    /// corrupt it on its next write there ([`CheckError::breaks_go_writer`](crate::CheckError::breaks_go_writer): files written by
    /// older rbolt versions): the paths to them are rewritten at commit, each separator from
    /// its child's first key, a branch with one child merged into a sibling, an empty leaf
    /// removed, an inline page written as page 0. Returns the number of places found (0: the
    /// commit writes nothing for it). Call it before any other edit of the transaction (a
    /// bucket edited already is not walked); `rbolt surgery fix-separators` is this and a
    /// commit.
    ///
    /// It reads every branch page of every bucket and the first key of every page below one,
    /// and holds the rewritten paths in memory until the commit. A branch with one child
    /// below another branch with one child needs a second run for the lower one (rbolt no
    /// longer writes branches with one child at all).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     for i in 0u32..2000 {
    ///         b.put(i.to_be_bytes(), [0u8; 64])?;
    ///     }
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// // A file rbolt writes keeps Go's rules: nothing to repair.
    /// let mut tx = db.begin_write()?;
    /// assert_eq!(tx.fix_separators()?, 0);
    /// tx.commit()?;
    /// assert!(db.begin_read()?.check().iter().all(|e| !e.breaks_go_writer()));
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn fix_separators(&mut self) -> Result<usize> {
        let mut paths: Vec<Vec<Vec<u8>>> = vec![Vec::new()];
        {
            let mut walk = self.root().walk();
            let mut path = Vec::new();
            while let Some(step) = walk.next_step() {
                match step? {
                    WalkStep::Enter { name, .. } => {
                        path.push(name.to_vec());
                        paths.push(path.clone());
                    }
                    WalkStep::Leave => {
                        path.pop();
                    }
                    WalkStep::Value { .. } => {}
                }
            }
        }
        let mut found = 0;
        for path in &paths {
            let names: Vec<&[u8]> = path.iter().map(Vec::as_slice).collect();
            let Some(mut bucket) = self.bucket_at(&names)? else {
                debug_assert!(false, "a bucket the walk found is missing");
                continue;
            };
            let shared = bucket.tx;
            let pages = shared.pages();
            let mut core = shared.core.borrow_mut();
            found += bucket
                .state_mut()
                .tree
                .fix_separators(pages, &mut core.arena)?;
        }
        Ok(found)
    }
}
