//! Typed buckets: keys and values as Rust types, ranges in the keys' order.
//!
//! `cargo run -p rbolt --example typed_buckets`

use rbolt::{BucketDef, Db};

/// Readings per sensor and time: the key is (sensor id, unix seconds), the value degrees.
const READINGS: BucketDef<(u16, i64), f32> = BucketDef::new("readings");

fn main() -> rbolt::Result<()> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = Db::open(dir.path().join("typed.db"))?;
    db.update(|tx| {
        let mut readings = tx.open_bucket(READINGS)?;
        for (sensor, time, degrees) in [
            (1, 100, 20.5),
            (1, 160, 21.0),
            (2, 100, 18.0),
            (1, -40, 19.5),
        ] {
            readings.put((sensor, time), degrees)?;
        }
        Ok::<_, rbolt::Error>(())
    })?;
    db.view(|tx| {
        let readings = tx.open_bucket(READINGS)?.expect("created above");
        // Sensor 1, in time order (negative times sort first: keys sort as their types).
        for reading in readings.range((1, i64::MIN)..(2, i64::MIN)) {
            let ((sensor, time), degrees) = reading?;
            println!("sensor {sensor} at {time}: {degrees}°");
        }
        assert_eq!(readings.get((2, 100))?, Some(18.0));
        Ok::<_, rbolt::Error>(())
    })?;
    db.close()
}
