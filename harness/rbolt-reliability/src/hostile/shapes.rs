//! The shapes: small valid databases the other cases are made from, each with the states its
//! two metas hold.

use crate::model::{Tree, read_db};
use rbolt::storage::SimFile;
use rbolt::{Db, Options, WriteTx};
use std::sync::Arc;

/// The page size of the small shapes: small pages make deep trees from few keys and keep the
/// number of bits to flip down.
pub const SHAPE_PAGE_SIZE: usize = 512;

/// A small valid database and the states its two metas hold (newest first).
#[derive(Clone, Debug)]
pub struct Shape {
    /// Its name, for failure messages.
    pub name: &'static str,
    /// The file.
    pub image: Vec<u8>,
    /// Its page size.
    pub page_size: usize,
    /// The content under the newest meta, then under the other one.
    pub states: Arc<Vec<Tree>>,
}

type Commit = Box<dyn Fn(&mut WriteTx<'_>) -> rbolt::Result<()>>;

fn build(name: &'static str, options: Options, commits: Vec<Commit>) -> Shape {
    let page_size = options.page_size;
    let sim = SimFile::new().expect("memfd");
    let db = Db::open_storage(Arc::new(sim.clone()), options).expect("open a new shape");
    let mut states = vec![read_db(&db).expect("read")];
    for commit in commits {
        let mut tx = db.begin_write().expect("begin");
        commit(&mut tx).expect("build a shape");
        tx.commit().expect("commit a shape");
        states.push(read_db(&db).expect("read"));
    }
    drop(db);
    states.reverse();
    states.truncate(2);
    Shape {
        name,
        image: sim.durable_image(),
        page_size,
        states: Arc::new(states),
    }
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// The shapes: an empty database, one key, an overflow value, a three-level tree, nested
/// buckets, a non-empty freelist, and no persisted freelist; `with_4k` adds a one-key file of
/// 4 KiB pages (bigger: soak only).
pub fn shapes(with_4k: bool) -> Vec<Shape> {
    let options = Options::default().page_size(SHAPE_PAGE_SIZE);
    let mut shapes = vec![
        build("empty", options.clone(), vec![]),
        build(
            "one-key",
            options.clone(),
            vec![
                Box::new(|tx| tx.create_bucket(b"b").map(drop)),
                Box::new(|tx| tx.bucket_mut(b"b")?.expect("b").put(b"k", b"v")),
            ],
        ),
        build(
            "overflow",
            options.clone(),
            vec![
                Box::new(|tx| tx.create_bucket(b"b")?.put(b"small", b"value")),
                Box::new(|tx| {
                    let big: Vec<u8> = (0..3 * SHAPE_PAGE_SIZE + 17).map(|i| i as u8).collect();
                    tx.bucket_mut(b"b")?.expect("b").put(b"big", &big)
                }),
            ],
        ),
        build(
            "three-level",
            options.clone(),
            vec![
                Box::new(|tx| {
                    let mut b = tx.create_bucket(b"b")?;
                    // Half-full pages (bbolt's cut), so that few keys make three levels.
                    b.set_fill_percent(0.5);
                    for i in 0..260 {
                        b.put(key(i), [i as u8; 8])?;
                    }
                    Ok(())
                }),
                Box::new(|tx| {
                    let mut b = tx.bucket_mut(b"b")?.expect("b");
                    for i in (0..260).step_by(13) {
                        b.put(key(i), b"changed")?;
                    }
                    Ok(())
                }),
            ],
        ),
        build(
            "nested",
            options.clone(),
            vec![
                Box::new(|tx| {
                    let mut a = tx.create_bucket(b"a")?;
                    a.put(b"x", b"1")?;
                    let mut inline = a.create_bucket(b"inline")?;
                    inline.put(b"y", b"2")?;
                    inline.set_sequence(7)?;
                    let mut deeper = inline.create_bucket(b"deeper")?;
                    deeper.put(b"z", b"3")?;
                    let mut big = tx.create_bucket(b"big")?;
                    for i in 0..40 {
                        big.put(key(i), [1; 20])?;
                    }
                    let mut inner = big.create_bucket(b"inner")?;
                    for i in 0..30 {
                        inner.put(key(i), [2; 20])?;
                    }
                    Ok(())
                }),
                Box::new(|tx| {
                    let mut big = tx.bucket_mut(b"big")?.expect("big");
                    big.next_sequence()?;
                    let mut inner = big.bucket_mut(b"inner")?.expect("inner");
                    inner.put(b"new", b"value")?;
                    Ok(())
                }),
            ],
        ),
        freelist_shape("freelist", options.clone()),
        freelist_shape("no-freelist", options.no_freelist_sync(true)),
    ];
    if with_4k {
        shapes.push(build(
            "one-key-4k",
            Options::default().page_size(4096),
            vec![
                Box::new(|tx| tx.create_bucket(b"b").map(drop)),
                Box::new(|tx| tx.bucket_mut(b"b")?.expect("b").put(b"k", b"v")),
            ],
        ));
    }
    shapes
}

fn freelist_shape(name: &'static str, options: Options) -> Shape {
    build(
        name,
        options,
        vec![
            Box::new(|tx| {
                let mut b = tx.create_bucket(b"b")?;
                for i in 0..200 {
                    b.put(key(i), [3; 20])?;
                }
                Ok(())
            }),
            Box::new(|tx| {
                let mut b = tx.bucket_mut(b"b")?.expect("b");
                for i in 0..150 {
                    b.delete(key(i))?;
                }
                Ok(())
            }),
        ],
    )
}
