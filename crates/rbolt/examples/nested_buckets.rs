//! Buckets inside buckets, sequences as ids, moving and deleting whole subtrees.
//!
//! `cargo run -p rbolt --example nested_buckets`

fn main() -> rbolt::Result<()> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = rbolt::Db::open(dir.path().join("nested.db"))?;

    db.update(|tx| {
        // tenants/acme/users/<id> = name, with ids from the bucket's sequence.
        let mut users = tx.create_bucket_path(&["tenants", "acme", "users"])?;
        for name in ["alice", "bob"] {
            let id = users.next_sequence()?;
            users.put(id.to_be_bytes(), name)?;
        }
        // The handle holds the top-level bucket "tenants" until it is dropped; the next path
        // goes through "tenants" again.
        drop(users);
        tx.create_bucket_path(&["tenants", "globex", "users"])?
            .put(1u64.to_be_bytes(), "carol")?;
        Ok::<_, rbolt::Error>(())
    })?;

    db.view(|tx| {
        let tenants = tx.bucket("tenants")?.expect("created above");
        // Every bucket and key below a bucket, depth first, without recursion.
        let mut walk = tenants.walk();
        while let Some(step) = walk.next_step() {
            if let rbolt::WalkStep::Value { key, value } = step? {
                let path: Vec<String> = walk
                    .path()
                    .iter()
                    .map(|name| String::from_utf8_lossy(name).into_owned())
                    .collect();
                let id = u64::from_be_bytes(key.try_into().expect("8-byte ids"));
                println!(
                    "{} #{id}: {}",
                    path.join("/"),
                    String::from_utf8_lossy(value)
                );
            }
        }
        Ok::<_, rbolt::Error>(())
    })?;

    // Rename a tenant (the whole subtree moves), then delete another (every page is freed).
    db.update(|tx| {
        tx.move_bucket(&["tenants", "acme"], &["tenants", "acme-corp"])?;
        tx.bucket_mut("tenants")?
            .expect("exists")
            .delete_bucket("globex")
    })?;
    db.view(|tx| {
        let tenants = tx.bucket("tenants")?.expect("exists");
        let names: Vec<&[u8]> = tenants
            .iter()
            .map(|e| e.map(|e| e.key()))
            .collect::<Result<_, _>>()?;
        assert_eq!(names, [b"acme-corp"]);
        assert!(tx.check().is_empty());
        Ok::<_, rbolt::Error>(())
    })?;
    db.close()
}
