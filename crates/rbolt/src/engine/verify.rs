//! The internal `_verify` feature, for the test suites: every commit is followed by a check of the
//! whole file ([`crate::ReadTx::check`]), and a commit that leaves problems in a file that had none
//! panics with them. The workspace's tests run with it (`rbolt-reliability` asks for it, and
//! features unify across `cargo test --workspace`); benchmarks and users never do.
//!
//! A handle that opened a file with problems already (the hostile-file suites damage files
//! on purpose) is not verified: only a commit that breaks a sound file is a failure.

use crate::engine::snapshot::Snapshot;

/// What the writer knows of the file it commits to.
#[derive(Debug, Default)]
pub(crate) struct Verify {
    /// Whether the file checked clean, once checked (before this handle's first commit).
    #[cfg(feature = "_verify")]
    clean: Option<bool>,
}

impl Verify {
    /// Before a commit: checks the snapshot it starts from, once per handle.
    pub(crate) fn before(&mut self, current: impl FnOnce() -> Snapshot) {
        #[cfg(feature = "_verify")]
        if self.clean.is_none() {
            self.clean = Some(problems(&current()).is_empty());
        }
        #[cfg(not(feature = "_verify"))]
        let _ = current;
    }

    /// After a commit is published: checks the new snapshot of a file that was clean.
    ///
    /// # Panics
    /// When the commit left problems in a file that had none.
    pub(crate) fn after(&mut self, current: impl FnOnce() -> Snapshot) {
        #[cfg(feature = "_verify")]
        if self.clean == Some(true) {
            let problems = problems(&current());
            assert!(
                problems.is_empty(),
                "verify: a commit left a sound file with problems: {problems:?}"
            );
        }
        #[cfg(not(feature = "_verify"))]
        let _ = current;
    }
}

/// The problems `check` finds in the current snapshot (of pages of its meta's size).
#[cfg(feature = "_verify")]
fn problems(current: &Snapshot) -> Vec<crate::CheckError> {
    let page_size = current.meta.page_size as usize;
    let pages =
        crate::engine::snapshot::pages_of(&current.map, page_size, current.meta.high_water());
    crate::check::check(pages, &current.meta)
}

#[cfg(all(test, feature = "_verify"))]
mod tests {
    use crate::Db;
    use rbolt_page::FLAG_FREELIST;
    use std::panic::{AssertUnwindSafe, catch_unwind};

    #[test]
    fn a_commit_that_leaves_problems_panics_and_one_on_a_damaged_file_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path().join("db")).unwrap();
        db.update(|tx| {
            let mut x = tx.create_bucket(b"x")?;
            for i in 0..2000u32 {
                x.put(i.to_be_bytes(), [0; 100])?;
            }
            tx.create_bucket(b"y").map(drop)
        })
        .unwrap();
        // Damage bucket x's root page (a branch: 2000 keys do not fit one page) behind the
        // handle's back, then commit to bucket y, which does not read it.
        let root = db
            .view(|tx| Ok::<_, crate::Error>(tx.bucket(b"x")?.unwrap().root()))
            .unwrap();
        assert_ne!(root.0, 0);
        let flags_at = root.0 * db.page_size() as u64 + 8;
        db.engine
            .storage
            .write_all_at(&FLAG_FREELIST.to_le_bytes(), flags_at)
            .unwrap();
        let put_y = |db: &Db| db.update(|tx| tx.bucket_mut(b"y")?.unwrap().put(b"k", b"v"));
        let outcome = catch_unwind(AssertUnwindSafe(|| put_y(&db)));
        assert!(
            outcome.is_err(),
            "the commit after the damage did not panic"
        );
        drop(db);

        // A handle that opens the damaged file does not verify it: its commits go through.
        let db = Db::open(dir.path().join("db")).unwrap();
        assert!(
            !db.view(|tx| Ok::<_, crate::Error>(tx.check()))
                .unwrap()
                .is_empty()
        );
        put_y(&db).unwrap();
    }
}
