//! The closure API with the caller's own error type (issue 25): `update`, `view` and `batch`
//! take any `E: From<rbolt::Error>`, roll back on an `Err` of any kind, and hand the caller's
//! error back unchanged.

use crate::support::{read_db, within};
use rbolt::{Db, Error, ErrorKind, Options};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
enum AppError {
    #[error("rejected {0}")]
    Rejected(u32),
    #[error(transparent)]
    Db(#[from] Error),
}

fn open(dir: &tempfile::TempDir, options: Options) -> Db {
    let db = Db::open_with(dir.path().join("db"), options).unwrap();
    db.update(|tx| tx.create_bucket("b")?.put("kept", "1"))
        .unwrap();
    db
}

/// The keys of bucket `b`.
fn keys_of_b(db: &Db) -> Vec<Vec<u8>> {
    db.view(|tx| {
        let b = tx.bucket("b")?.unwrap();
        b.iter().map(|e| e.map(|e| e.key().to_vec())).collect()
    })
    .unwrap()
}

#[test]
fn update_returns_the_callers_error_and_rolls_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, Options::default());
    let before = read_db(&db).unwrap();
    let result: Result<(), AppError> = db.update(|tx| {
        let mut b = tx.bucket_mut("b")?.unwrap();
        b.put("lost", "2")?;
        b.delete("kept")?;
        drop(b);
        tx.create_bucket("lost-bucket")?;
        Err(AppError::Rejected(7))
    });
    assert!(matches!(result, Err(AppError::Rejected(7))), "{result:?}");
    assert_eq!(
        read_db(&db).unwrap(),
        before,
        "the failed update changed nothing"
    );
    // The handle writes on as before.
    db.update(|tx| tx.bucket_mut("b")?.unwrap().put("after", "3"))
        .unwrap();
    assert_eq!(keys_of_b(&db), [&b"after"[..], b"kept"]);
}

#[test]
fn an_rbolt_error_inside_the_closure_comes_back_as_the_callers_type() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, Options::default());
    let before = read_db(&db).unwrap();
    let result: Result<(), AppError> = db.update(|tx| {
        tx.bucket_mut("b")?.unwrap().put("lost", "2")?;
        tx.delete_bucket("missing")?; // rbolt's BucketNotFound, converted by `?`
        Ok(())
    });
    match result {
        Err(AppError::Db(error)) => assert_eq!(error.kind(), ErrorKind::BucketNotFound),
        other => panic!("expected AppError::Db(BucketNotFound), got {other:?}"),
    }
    assert_eq!(read_db(&db).unwrap(), before);
}

#[test]
fn a_failed_commit_comes_back_as_the_callers_type() {
    let dir = tempfile::tempdir().unwrap();
    // Room for the metas, the freelist and the root, not for a megabyte of values.
    let db = open(&dir, Options::default().max_size(64 * 1024));
    let before = read_db(&db).unwrap();
    let mut closure_done = false;
    let result: Result<(), AppError> = db.update(|tx| {
        let mut b = tx.bucket_mut("b")?.unwrap();
        for i in 0u32..100 {
            b.put(i.to_be_bytes(), [0u8; 10_000])?;
        }
        closure_done = true;
        Ok(())
    });
    assert!(closure_done, "the puts succeed; the commit fails");
    match result {
        Err(AppError::Db(error)) => assert_eq!(error.kind(), ErrorKind::MaxSizeReached),
        other => panic!("expected AppError::Db(MaxSizeReached), got {other:?}"),
    }
    assert_eq!(read_db(&db).unwrap(), before);
}

#[test]
fn view_returns_the_callers_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, Options::default());
    let found: Result<Vec<u8>, AppError> = db.view(|tx| {
        let b = tx.bucket("b")?.ok_or(AppError::Rejected(1))?;
        b.get("kept")?
            .map(<[u8]>::to_vec)
            .ok_or(AppError::Rejected(2))
    });
    assert_eq!(found.unwrap(), b"1");
    let missing: Result<Vec<u8>, AppError> = db.view(|tx| {
        let b = tx.bucket("b")?.ok_or(AppError::Rejected(1))?;
        b.get("absent")?
            .map(<[u8]>::to_vec)
            .ok_or(AppError::Rejected(2))
    });
    assert!(matches!(missing, Err(AppError::Rejected(2))), "{missing:?}");
}

#[test]
fn a_failing_batch_call_gets_its_own_error_and_the_others_commit() {
    let dir = tempfile::tempdir().unwrap();
    // Four calls, one batch: it runs only once all four have arrived.
    let options = Options::default()
        .max_batch_size(4)
        .max_batch_delay(Duration::MAX);
    let db = Arc::new(open(&dir, options));
    let failing_runs = Arc::new(AtomicU32::new(0));
    let results = {
        let db = db.clone();
        let failing_runs = failing_runs.clone();
        within(Duration::from_secs(30), move || {
            let threads: Vec<_> = (0..4u32)
                .map(|i| {
                    let db = db.clone();
                    let failing_runs = failing_runs.clone();
                    std::thread::spawn(move || {
                        db.batch(move |tx| {
                            let mut b = tx.bucket_mut("b")?.unwrap();
                            b.put(format!("call-{i}"), "x")?;
                            if i == 2 {
                                failing_runs.fetch_add(1, Ordering::Relaxed);
                                return Err(AppError::Rejected(i));
                            }
                            Ok(())
                        })
                    })
                })
                .collect();
            threads
                .into_iter()
                .map(|t| t.join().unwrap())
                .collect::<Vec<Result<(), AppError>>>()
        })
    };
    for (i, result) in results.iter().enumerate() {
        if i == 2 {
            assert!(matches!(result, Err(AppError::Rejected(2))), "{result:?}");
        } else {
            assert!(result.is_ok(), "call {i}: {result:?}");
        }
    }
    // Once in the shared transaction, once alone, where its error came from.
    assert_eq!(failing_runs.load(Ordering::Relaxed), 2);
    assert_eq!(
        keys_of_b(&db),
        [&b"call-0"[..], b"call-1", b"call-3", b"kept"]
    );
}
