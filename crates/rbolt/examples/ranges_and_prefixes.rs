//! Range scans, prefix scans and cursors, forwards and backwards; none of them copies a key.
//! Then the deletes by prefix, range and predicate, each one walk over the leaves it touches
//! (a loop over `iter()` cannot delete: the iterator borrows the bucket).
//!
//! `cargo run -p rbolt --example ranges_and_prefixes`

fn main() -> rbolt::Result<()> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = rbolt::Db::open(dir.path().join("ranges.db"))?;
    db.update(|tx| {
        let mut files = tx.create_bucket("files")?;
        for path in [
            "docs/a.md",
            "docs/b.md",
            "src/lib.rs",
            "src/main.rs",
            "src/util/io.rs",
        ] {
            files.put(path, path.len().to_string())?;
        }
        Ok::<_, rbolt::Error>(())
    })?;
    db.view(|tx| {
        let files = tx.bucket("files")?.expect("created above");
        let text = |e: rbolt::Result<rbolt::Entry<'_>>| {
            e.map(|e| String::from_utf8_lossy(e.key()).into_owned())
        };

        let src: Vec<String> = files.prefix("src/").map(text).collect::<Result<_, _>>()?;
        println!("under src/: {src:?}");
        assert_eq!(src.len(), 3);

        let between: Vec<String> = files
            .range("docs/b".."src/m")
            .map(text)
            .collect::<Result<_, _>>()?;
        println!("from docs/b to src/m: {between:?}");

        let last_two: Vec<String> = files
            .iter()
            .rev()
            .take(2)
            .map(text)
            .collect::<Result<_, _>>()?;
        println!("the last two, backwards: {last_two:?}");

        // A cursor positions itself at the first key at or after the one sought.
        let mut cursor = files.cursor();
        let found = cursor.seek("src/m")?.expect("a key at or after src/m");
        assert_eq!(found.key(), b"src/main.rs");
        let before = cursor.prev()?.expect("one before");
        assert_eq!(before.key(), b"src/lib.rs");
        Ok::<_, rbolt::Error>(())
    })?;
    db.update(|tx| {
        let mut files = tx.bucket_mut("files")?.expect("created above");
        let docs = files.delete_prefix("docs/")?;
        println!("deleted under docs/: {docs}");
        assert_eq!(docs, 2);
        // Every file whose recorded length is under 11 bytes ("src/lib.rs" is 10).
        let short = files.extract_if::<&str>(.., |_, len| len < b"11".as_slice())?;
        println!("taken out: {} entry", short.len());
        assert_eq!(short[0].0, b"src/lib.rs");
        let rest = files.delete_range("src/".."src/util/")?;
        assert_eq!(rest, 1); // src/main.rs
        assert_eq!(
            files.pop_last()?.map(|(key, _)| key),
            Some(b"src/util/io.rs".to_vec())
        );
        assert_eq!(files.iter().count(), 0);
        Ok::<_, rbolt::Error>(())
    })?;
    db.close()
}
