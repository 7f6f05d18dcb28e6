//! The first steps: open a file, write in a transaction, read in another.
//!
//! `cargo run -p rbolt --example quickstart`

fn main() -> rbolt::Result<()> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = rbolt::Db::open(dir.path().join("quickstart.db"))?;

    // Writes happen in a write transaction: all of it commits, or none of it.
    db.update(|tx| {
        let mut users = tx.create_bucket_if_not_exists("users")?;
        users.put("alice", "admin")?;
        users.put("bob", "guest")?;
        Ok::<_, rbolt::Error>(())
    })?;

    // Reads see a consistent snapshot; values borrow from the transaction, no copies.
    db.view(|tx| {
        let users = tx.bucket("users")?.expect("created above");
        assert_eq!(users.get("alice")?, Some(&b"admin"[..]));
        for entry in users.iter() {
            let entry = entry?;
            println!(
                "{} = {}",
                String::from_utf8_lossy(entry.key()),
                String::from_utf8_lossy(entry.value().unwrap_or_default())
            );
        }
        Ok::<_, rbolt::Error>(())
    })?;

    // An error (or a panic) inside `update` rolls everything back.
    let failed = db.update(|tx| {
        tx.bucket_mut("users")?
            .expect("exists")
            .put("carol", "guest")?;
        tx.create_bucket("users").map(drop) // BucketExists: the put above is undone too
    });
    assert_eq!(failed.unwrap_err().kind(), rbolt::ErrorKind::BucketExists);
    let carol =
        db.view(|tx| Ok::<_, rbolt::Error>(tx.bucket("users")?.unwrap().get("carol")?.is_some()))?;
    assert!(!carol, "the rolled-back put is not there");
    db.close()
}
