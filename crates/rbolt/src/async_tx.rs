//! Transactions from async code (feature `tokio`): `Db::update_async`, `Db::view_async` and
//! `Db::batch_async` run the closure API on tokio's blocking thread pool and await it, so an
//! async task never blocks its executor's thread on a commit's fsyncs or on the writer lock.
//!
//! A transaction itself never crosses an `.await`: a [`WriteTx`](crate::WriteTx) is not
//! `Send` (the writer lock records the thread that holds it), so it lives and ends on one
//! blocking thread. Other runtimes do the same with their own `spawn_blocking` around
//! [`Db::update`].

use crate::db::Db;
use crate::error::Error;
use crate::read_tx::ReadTx;
use crate::tx::WriteTx;
use std::sync::Arc;

impl Db {
    /// [`Db::update`] on tokio's blocking thread pool: runs `f` in a write transaction there,
    /// commits if it returns `Ok`, and resolves to what it returned. The future is `Send` and
    /// `'static` (it holds its own `Arc` of the database), so it can be awaited in a web
    /// handler or handed to `tokio::spawn`.
    ///
    /// Dropping the future does not stop the transaction: once started it runs to its end on
    /// its thread (commit or rollback), and the result is dropped. Outside a tokio runtime,
    /// or when the runtime shuts down before the task starts, it resolves to
    /// `Error::NotRun` and nothing is written. A panic in `f` resumes in the awaiting task.
    ///
    /// An axum-style handler (shared state in an `Arc`, the app's own error type):
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// #[derive(Debug, thiserror::Error)]
    /// enum AppError {
    ///     #[error("no such bookmark")]
    ///     NotFound,
    ///     #[error(transparent)]
    ///     Db(#[from] rbolt::Error),
    /// }
    ///
    /// async fn rename(db: Arc<rbolt::Db>, id: u64, title: String) -> Result<String, AppError> {
    ///     db.update_async(move |tx| {
    ///         let mut bookmarks = tx.create_bucket_if_not_exists("bookmarks")?;
    ///         if bookmarks.get(id.to_be_bytes())?.is_none() {
    ///             return Err(AppError::NotFound);
    ///         }
    ///         bookmarks.put(id.to_be_bytes(), &title)?;
    ///         Ok(format!("bookmark {id} is now {title:?}"))
    ///     })
    ///     .await
    /// }
    ///
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Arc::new(rbolt::Db::open(dir.path().join("db"))?);
    /// db.update(|tx| tx.create_bucket("bookmarks")?.put(7u64.to_be_bytes(), "old"))?;
    /// let runtime = tokio::runtime::Builder::new_multi_thread().build().unwrap();
    /// // Handlers run as spawned tasks: their futures must be Send, and these are.
    /// let found = runtime.spawn(rename(db.clone(), 7, "rbolt".into()));
    /// let missing = runtime.spawn(rename(db.clone(), 8, "nothing".into()));
    /// assert_eq!(runtime.block_on(found).unwrap()?, r#"bookmark 7 is now "rbolt""#);
    /// assert!(matches!(runtime.block_on(missing).unwrap(), Err(AppError::NotFound)));
    /// # Ok::<(), AppError>(())
    /// ```
    ///
    /// Holding a transaction across an `.await` instead does not compile where the future
    /// must be `Send` (`tokio::spawn`, axum): the compiler says ``the trait `Send` is not
    /// implemented for `std::sync::MutexGuard<'_, rbolt::engine::Writer>` `` (the writer lock
    /// inside [`WriteTx`]). Move the transaction into the closure instead, as above.
    ///
    /// ```compile_fail
    /// fn spawn<F: std::future::Future + Send>(_: F) {}
    /// async fn handler(db: &rbolt::Db) -> rbolt::Result<()> {
    ///     let tx = db.begin_write()?;
    ///     tx.create_bucket("b")?;
    ///     std::future::ready(()).await; // `tx` is held across this await...
    ///     tx.commit()
    /// }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db")).unwrap();
    /// spawn(handler(&db)); // ...so the future is not Send: error
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub fn update_async<T, E, F>(
        self: &Arc<Self>,
        f: F,
    ) -> impl Future<Output = Result<T, E>> + Send + 'static + use<T, E, F>
    where
        F: FnOnce(&mut WriteTx<'_>) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<Error> + Send + 'static,
    {
        let db = self.clone();
        run_blocking(move || db.update(f))
    }

    /// [`Db::view`] on tokio's blocking thread pool: runs `f` in a read transaction there and
    /// resolves to what it returned (which must own its data: copy values out with
    /// `to_vec`). See [`Db::update_async`] for cancellation and errors.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = std::sync::Arc::new(rbolt::Db::open(dir.path().join("db"))?);
    /// db.update(|tx| tx.create_bucket("users")?.put("alice", "admin"))?;
    /// let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// let role = runtime.block_on(db.view_async(|tx| {
    ///     let users = tx.bucket("users")?.expect("created above");
    ///     Ok::<_, rbolt::Error>(users.get("alice")?.map(<[u8]>::to_vec))
    /// }))?;
    /// assert_eq!(role.as_deref(), Some(&b"admin"[..]));
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub fn view_async<T, E, F>(
        self: &Arc<Self>,
        f: F,
    ) -> impl Future<Output = Result<T, E>> + Send + 'static + use<T, E, F>
    where
        F: FnOnce(&ReadTx<'_>) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<Error> + Send + 'static,
    {
        let db = self.clone();
        run_blocking(move || db.view(f))
    }

    /// [`Db::batch`] on tokio's blocking thread pool: many handlers' small writes share a
    /// commit, each awaiting its own result. `f` may run more than once (see
    /// [`Db::batch`]); see [`Db::update_async`] for cancellation and errors.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = std::sync::Arc::new(rbolt::Db::open(dir.path().join("db"))?);
    /// db.update(|tx| tx.create_bucket("hits").map(drop))?;
    /// let runtime = tokio::runtime::Builder::new_multi_thread().build().unwrap();
    /// let tasks: Vec<_> = (0..8u32)
    ///     .map(|i| {
    ///         let db = db.clone();
    ///         runtime.spawn(async move {
    ///             db.batch_async(move |tx| tx.bucket_mut("hits")?.unwrap().put(i.to_be_bytes(), ""))
    ///                 .await
    ///         })
    ///     })
    ///     .collect();
    /// for task in tasks {
    ///     runtime.block_on(task).unwrap()?;
    /// }
    /// assert_eq!(db.begin_read()?.bucket("hits")?.unwrap().iter().count(), 8);
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub fn batch_async<E, F>(
        self: &Arc<Self>,
        f: F,
    ) -> impl Future<Output = Result<(), E>> + Send + 'static + use<E, F>
    where
        F: Fn(&mut WriteTx<'_>) -> Result<(), E> + Send + Sync + 'static,
        E: From<Error> + Send + 'static,
    {
        let db = self.clone();
        run_blocking(move || db.batch(f))
    }
}

/// Runs `work` on tokio's blocking pool and awaits it: a panic in it resumes here; no runtime,
/// or one that shut down before the task started, is `Error::NotRun`.
async fn run_blocking<T, E>(work: impl FnOnce() -> Result<T, E> + Send + 'static) -> Result<T, E>
where
    T: Send + 'static,
    E: From<Error> + Send + 'static,
{
    // `spawn_blocking` panics outside a runtime; a typed error is the house rule.
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return Err(Error::NotRun {
            reason: "no tokio runtime is running on this thread",
        }
        .into());
    };
    match runtime.spawn_blocking(work).await {
        Ok(result) => result,
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        Err(_) => Err(Error::NotRun {
            reason: "the tokio runtime shut down before the transaction's task started",
        }
        .into()),
    }
}
