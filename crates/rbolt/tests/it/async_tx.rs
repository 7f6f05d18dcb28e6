//! Transactions from async code (feature `tokio`, issue 25): `update_async`, `view_async`
//! and `batch_async` run on tokio's blocking pool, hand back the caller's error, keep a panic
//! a panic, and fail with a typed error where no runtime can run them.

use rbolt::{Db, Error, ErrorKind};
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

#[derive(Debug, thiserror::Error)]
enum AppError {
    #[error("rejected")]
    Rejected,
    #[error(transparent)]
    Db(#[from] Error),
}

fn open() -> (tempfile::TempDir, Arc<Db>) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    db.update(|tx| tx.create_bucket("b").map(drop)).unwrap();
    (dir, Arc::new(db))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap()
}

/// Compiles only for futures a multi-threaded executor can run.
fn is_send_static<F: Future + Send + 'static>(future: F) -> F {
    future
}

fn keys(db: &Db) -> Vec<Vec<u8>> {
    db.view(|tx| {
        let b = tx.bucket("b")?.unwrap();
        b.iter().map(|e| e.map(|e| e.key().to_vec())).collect()
    })
    .unwrap()
}

#[test]
fn spawned_tasks_write_and_read_through_the_blocking_pool() {
    let (_dir, db) = open();
    let runtime = runtime();
    let writes: Vec<_> = (0..32u32)
        .map(|i| {
            runtime.spawn(is_send_static(db.update_async(move |tx| {
                tx.bucket_mut("b")?.unwrap().put(i.to_be_bytes(), "v")?;
                Ok::<_, Error>(i)
            })))
        })
        .collect();
    let mut done: Vec<u32> = writes
        .into_iter()
        .map(|task| runtime.block_on(task).unwrap().unwrap())
        .collect();
    done.sort_unstable();
    assert_eq!(done, (0..32).collect::<Vec<_>>());
    let count = runtime
        .block_on(db.view_async(|tx| Ok::<_, Error>(tx.bucket("b")?.unwrap().iter().count())))
        .unwrap();
    assert_eq!(count, 32);
    let batched: Vec<_> = (100..116u32)
        .map(|i| {
            runtime.spawn(is_send_static(db.batch_async(move |tx| {
                tx.bucket_mut("b")?.unwrap().put(i.to_be_bytes(), "batched")
            })))
        })
        .collect();
    for task in batched {
        runtime.block_on(task).unwrap().unwrap();
    }
    assert_eq!(keys(&db).len(), 48);
}

#[test]
fn the_callers_error_comes_back_and_rolls_back() {
    let (_dir, db) = open();
    let runtime = runtime();
    let result: Result<(), AppError> = runtime.block_on(db.update_async(|tx| {
        tx.bucket_mut("b")?.unwrap().put("lost", "v")?;
        Err(AppError::Rejected)
    }));
    assert!(matches!(result, Err(AppError::Rejected)), "{result:?}");
    let result: Result<(), AppError> =
        runtime.block_on(db.update_async(|tx| Ok(tx.delete_bucket("missing")?)));
    assert!(
        matches!(&result, Err(AppError::Db(e)) if e.kind() == ErrorKind::BucketNotFound),
        "{result:?}"
    );
    let read: Result<(), AppError> = runtime.block_on(db.view_async(|tx| {
        tx.bucket("b")?
            .unwrap()
            .get("lost")?
            .ok_or(AppError::Rejected)?;
        Ok(())
    }));
    assert!(matches!(read, Err(AppError::Rejected)), "{read:?}");
    assert!(keys(&db).is_empty());
}

#[test]
fn a_panic_in_the_closure_resumes_in_the_awaiting_task_and_the_writer_is_free() {
    let (_dir, db) = open();
    let runtime = runtime();
    let task = runtime.spawn(db.update_async(|tx| {
        tx.bucket_mut("b")?.unwrap().put("lost", "v")?;
        if tx.id().0 > 0 {
            panic!("a handler bug");
        }
        Ok::<_, Error>(())
    }));
    let joined = runtime.block_on(task).unwrap_err();
    assert!(joined.is_panic());
    let message = joined.into_panic();
    assert_eq!(message.downcast_ref::<&str>(), Some(&"a handler bug"));
    // Rolled back, and the next writer gets the lock.
    runtime
        .block_on(db.update_async(|tx| tx.bucket_mut("b")?.unwrap().put("after", "v")))
        .unwrap();
    assert_eq!(keys(&db), [b"after".to_vec()]);
}

/// Polls `future` on this thread without any runtime, up to `polls` times.
fn poll_without_runtime<F: Future>(future: F, polls: usize) -> Option<F::Output> {
    let mut future = pin!(future);
    let mut context = Context::from_waker(Waker::noop());
    for _ in 0..polls {
        if let Poll::Ready(out) = future.as_mut().poll(&mut context) {
            return Some(out);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    None
}

#[test]
fn outside_a_runtime_or_after_its_shutdown_nothing_runs_and_the_error_says_why() {
    let (_dir, db) = open();
    let outside = poll_without_runtime(
        db.update_async(|tx| tx.bucket_mut("b")?.unwrap().put("k", "v")),
        1,
    )
    .expect("ready at once");
    let error = outside.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotRun);
    assert!(error.to_string().contains("no tokio runtime"), "{error}");
    // A runtime that has shut down runs no new task.
    let runtime = runtime();
    let handle = runtime.handle().clone();
    runtime.shutdown_background();
    let _entered = handle.enter();
    let after = poll_without_runtime(
        db.update_async(|tx| tx.bucket_mut("b")?.unwrap().put("k", "v")),
        500,
    )
    .expect("a shut-down runtime answers");
    let error = after.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotRun);
    assert!(error.to_string().contains("shut down"), "{error}");
    assert!(keys(&db).is_empty(), "nothing was written");
}

/// Issue 49, item 7: the futures hold a handle of their own and borrow nothing from the call
/// (their types say so with `+ use<...>`, so a borrow error in the caller's code no longer
/// points into rbolt's signature): the caller's `Arc` may go while they are pending, and none
/// keeps the handle once it has run.
#[test]
fn the_futures_do_not_borrow_the_handle_they_were_made_from() {
    let (_dir, db) = open();
    let update = db.update_async(|tx| tx.bucket_mut("b")?.unwrap().put("k", "v"));
    let view = db.view_async(|tx| Ok::<_, Error>(tx.bucket("b")?.unwrap().get("k")?.is_some()));
    let batch = db.batch_async(|tx| tx.bucket_mut("b")?.unwrap().put("j", "w"));
    let weak = Arc::downgrade(&db);
    drop(db);
    let runtime = runtime();
    runtime.block_on(update).unwrap();
    runtime.block_on(batch).unwrap();
    assert!(runtime.block_on(view).is_ok());
    assert!(
        weak.upgrade().is_none(),
        "the futures kept the handle after they ended"
    );
}
