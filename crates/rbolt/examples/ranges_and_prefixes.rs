//! Range scans, prefix scans and cursors, forwards and backwards; none of them copies a key.
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
    db.close()
}
