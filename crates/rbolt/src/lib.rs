//! rbolt, the facade crate: the database handle, transactions and buckets built on
//! rbolt-page, rbolt-freelist and rbolt-btree, and the only crate that touches files, the
//! memory mapping and file locks. All of that I/O goes through the [`storage::Storage`]
//! trait, so the same database code runs on a real file or on a simulated one that can
//! produce crash images.

pub mod storage;
