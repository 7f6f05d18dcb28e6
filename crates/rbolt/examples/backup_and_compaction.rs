//! A hot backup while the database is in use, and compaction into a smaller file.
//!
//! `cargo run -p rbolt --example backup_and_compaction`

fn main() -> rbolt::Result<()> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = rbolt::Db::open(dir.path().join("live.db"))?;
    db.update(|tx| {
        let mut log = tx.create_bucket("log")?;
        for i in 0..20_000u32 {
            log.put(i.to_be_bytes(), [7u8; 100])?;
        }
        Ok::<_, rbolt::Error>(())
    })?;
    // Delete most of it: the file keeps its size, the pages go to the freelist.
    db.update(|tx| {
        let mut log = tx.bucket_mut("log")?.expect("created");
        for i in 0..18_000u32 {
            log.delete(i.to_be_bytes())?;
        }
        Ok::<_, rbolt::Error>(())
    })?;

    // A backup is a consistent snapshot, taken while writers go on.
    let backup = dir.path().join("backup.db");
    let bytes = db.view(|tx| tx.copy_file(&backup))?;
    println!("backup: {bytes} bytes");

    // Compaction copies the live data into a new file with full pages.
    let compacted = rbolt::Db::open(dir.path().join("compacted.db"))?;
    rbolt::compact(&compacted, &db, 0)?;
    println!(
        "live file {} bytes, compacted copy {} bytes",
        db.file_len()?,
        compacted.file_len()?
    );
    assert!(compacted.file_len()? < db.file_len()?);
    for copy in [&compacted, &rbolt::Db::open(&backup)?] {
        let keys =
            copy.view(|tx| Ok::<_, rbolt::Error>(tx.bucket("log")?.unwrap().iter().count()))?;
        assert_eq!(keys, 2_000);
        assert!(
            copy.view(|tx| Ok::<_, rbolt::Error>(tx.check()))?
                .is_empty()
        );
    }
    Ok(())
}
