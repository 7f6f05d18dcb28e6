//! Async handlers on one database (feature `tokio`): web-style handlers take the database
//! from shared state, run their transactions with `update_async`, `batch_async` and
//! `view_async` on tokio's blocking pool, and return the app's own errors. They are written
//! as axum handlers are (`State`, a typed body, `Result<_, AppError>`), without pulling in a
//! web framework: `main` plays the router and sends the requests as spawned tasks.
//!
//! `cargo run -p rbolt --example async_handler`

use rbolt::{BucketDef, Db, Json};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The app's state, as an axum `State<AppState>` extractor would hand it to handlers.
#[derive(Clone)]
struct AppState {
    db: Arc<Db>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
struct Bookmark {
    url: String,
    tags: Vec<String>,
}

/// Bookmarks by name, stored as JSON.
const BOOKMARKS: BucketDef<String, Json<Bookmark>> = BucketDef::new("bookmarks");
/// One key per visit, written by many handlers at once: batched.
const VISITS: BucketDef<(u64, u32), ()> = BucketDef::new("visits");

#[derive(Debug, thiserror::Error)]
enum AppError {
    #[error("bookmark {0:?} exists already")]
    Conflict(String),
    #[error("no bookmark {0:?}")]
    NotFound(String),
    #[error("database: {0}")]
    Db(#[from] rbolt::Error),
}

impl AppError {
    /// The HTTP status a web framework would answer with.
    fn status(&self) -> u16 {
        match self {
            AppError::Conflict(_) => 409,
            AppError::NotFound(_) => 404,
            AppError::Db(_) => 500,
        }
    }
}

/// `POST /bookmarks/{name}`: creates a bookmark, refusing to replace one.
async fn create(state: AppState, name: String, body: Bookmark) -> Result<u16, AppError> {
    state
        .db
        .update_async(move |tx| {
            let mut bookmarks = tx.open_bucket(BOOKMARKS)?;
            if bookmarks.get(&name)?.is_some() {
                return Err(AppError::Conflict(name)); // rolls back
            }
            bookmarks.put(&name, &body)?;
            Ok(201)
        })
        .await
}

/// `GET /bookmarks/{name}`: a read on the blocking pool; the value is owned, so it leaves
/// the transaction.
async fn show(state: AppState, name: String) -> Result<Bookmark, AppError> {
    state
        .db
        .view_async(move |tx| {
            let bookmarks = tx.open_bucket(BOOKMARKS)?;
            let found = bookmarks.and_then(|b| b.get(&name).transpose());
            found
                .ok_or(AppError::NotFound(name))?
                .map_err(AppError::from)
        })
        .await
}

/// `POST /visits/{visitor}`: one small write per request, sharing commits with the others.
async fn visit(state: AppState, visitor: u64, seq: u32) -> Result<u16, AppError> {
    state
        .db
        .batch_async(move |tx| tx.open_bucket(VISITS)?.put((visitor, seq), ()))
        .await?;
    Ok(204)
}

fn main() -> Result<(), AppError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let state = AppState {
        db: Arc::new(Db::open(dir.path().join("app.db"))?),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("a tokio runtime");

    // Forty creates at once, every name twice: one of each pair wins, the other is refused.
    let creates: Vec<_> = (0..40u32)
        .map(|i| {
            let name = format!("site-{}", i % 20);
            let body = Bookmark {
                url: format!("https://example.com/{}", i % 20),
                tags: vec!["example".into()],
            };
            runtime.spawn(create(state.clone(), name, body))
        })
        .collect();
    let mut created = 0;
    let mut conflicts = 0;
    for task in creates {
        match runtime.block_on(task).expect("a handler panicked") {
            Ok(201) => created += 1,
            Err(error) if error.status() == 409 => conflicts += 1,
            other => panic!("unexpected answer: {other:?}"),
        }
    }
    assert_eq!((created, conflicts), (20, 20));

    // A hundred visits at once, batched into a few commits.
    let commits_before = state.db.stats().write_tx_n;
    let visits: Vec<_> = (0..100u32)
        .map(|seq| runtime.spawn(visit(state.clone(), u64::from(seq % 7), seq)))
        .collect();
    for task in visits {
        assert_eq!(runtime.block_on(task).expect("a handler panicked")?, 204);
    }
    let visit_commits = state.db.stats().write_tx_n - commits_before;

    let found = runtime.block_on(show(state.clone(), "site-3".into()))?;
    assert_eq!(found.url, "https://example.com/3");
    let missing = runtime.block_on(show(state.clone(), "nowhere".into()));
    assert_eq!(missing.as_ref().map_err(AppError::status).unwrap_err(), 404);
    let visits = state.db.view(|tx| tx.open_bucket(VISITS)?.unwrap().len())?;
    assert_eq!(visits, 100);
    println!(
        "{created} bookmarks created, {conflicts} refused with 409; {visits} visits in \
         {visit_commits} write transaction(s); GET site-3 -> {}",
        found.url
    );
    Ok(())
}
