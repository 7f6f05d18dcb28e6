//! Typed buckets: keys sort as their types do, values round-trip, bad bytes are typed errors.

use quickcheck::{QuickCheck, TestResult};
use rbolt::{BucketDef, Db, Error, ErrorKind, Json, Key, Value};

fn temp_db() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    (dir, db)
}

/// Whether the bytes of `a` and `b` compare as `a` and `b` do.
fn ordered<'x, K: Key>(a: K::SelfType<'x>, b: K::SelfType<'x>) -> bool
where
    K::SelfType<'x>: Ord,
{
    let (ea, eb) = (K::to_bytes(&a), K::to_bytes(&b));
    ea.as_ref().cmp(eb.as_ref()) == a.cmp(&b)
}

#[test]
fn integer_and_tuple_keys_sort_as_their_values() {
    fn integers(a: (i64, i64), b: (u32, u32), c: (i8, i8), d: (i128, i128)) -> bool {
        ordered::<i64>(a.0, a.1)
            && ordered::<u32>(b.0, b.1)
            && ordered::<i8>(c.0, c.1)
            && ordered::<i128>(d.0, d.1)
            && ordered::<u64>(a.0 as u64, a.1 as u64)
    }
    QuickCheck::new()
        .tests(2000)
        .quickcheck(integers as fn((i64, i64), (u32, u32), (i8, i8), (i128, i128)) -> bool);
    fn tuples(a: (u16, i32), b: (u16, i32), s: String, t: String) -> bool {
        ordered::<(u16, i32)>(a, b)
            && ordered::<(u16, &str)>((a.0, s.as_str()), (b.0, t.as_str()))
            && ordered::<(u8, u8, [u8; 2])>((1, a.0 as u8, [2, 3]), (1, b.0 as u8, [2, 3]))
    }
    QuickCheck::new()
        .tests(2000)
        .quickcheck(tuples as fn((u16, i32), (u16, i32), String, String) -> bool);
    fn floats(a: f64, b: f64, c: f32, d: f32) -> bool {
        let f64_ok = {
            let (ea, eb) = (f64::to_bytes(&a), f64::to_bytes(&b));
            ea.cmp(&eb) == a.total_cmp(&b) && f64::from_bytes(&ea).unwrap().to_bits() == a.to_bits()
        };
        let f32_ok = {
            let (ec, ed) = (f32::to_bytes(&c), f32::to_bytes(&d));
            ec.cmp(&ed) == c.total_cmp(&d) && f32::from_bytes(&ec).unwrap().to_bits() == c.to_bits()
        };
        f64_ok && f32_ok
    }
    QuickCheck::new()
        .tests(2000)
        .quickcheck(floats as fn(f64, f64, f32, f32) -> bool);
    for (a, b) in [
        (f64::NEG_INFINITY, -1.0),
        (-1.0, -0.0),
        (-0.0, 0.0),
        (0.0, 1.0),
        (1.0, f64::INFINITY),
    ] {
        assert_eq!(
            f64::to_bytes(&a).cmp(&f64::to_bytes(&b)),
            std::cmp::Ordering::Less,
            "{a} {b}"
        );
    }
    // Edges of the signed encoding.
    for (a, b) in [(i64::MIN, -1), (-1, 0), (0, 1), (1, i64::MAX)] {
        assert!(ordered::<i64>(a, b), "{a} {b}");
    }
}

#[test]
fn values_round_trip() {
    fn round_trip(a: i64, b: u128, s: String, bytes: Vec<u8>, pair: (u32, String)) -> TestResult {
        let ok = i64::from_bytes(i64::to_bytes(&a).as_ref()).unwrap() == a
            && u128::from_bytes(u128::to_bytes(&b).as_ref()).unwrap() == b
            && <&str>::from_bytes(<&str>::to_bytes(&s.as_str())).unwrap() == s
            && <&[u8]>::from_bytes(<&[u8]>::to_bytes(&bytes.as_slice())).unwrap()
                == bytes.as_slice()
            && <(u32, &str)>::from_bytes(
                <(u32, &str)>::to_bytes(&(pair.0, pair.1.as_str())).as_ref(),
            )
            .unwrap()
                == (pair.0, pair.1.as_str());
        TestResult::from_bool(ok)
    }
    QuickCheck::new()
        .tests(1000)
        .quickcheck(round_trip as fn(i64, u128, String, Vec<u8>, (u32, String)) -> TestResult);
}

#[test]
fn a_typed_bucket_reads_writes_and_ranges_in_key_order() {
    const TEMPS: BucketDef<i32, (u16, &str)> = BucketDef::new("temps");
    let (_dir, db) = temp_db();
    db.update(|tx| {
        let mut temps = tx.open_bucket(TEMPS)?;
        for t in [-40, -1, 0, 3, 25, 100] {
            temps.put(t, (t.unsigned_abs() as u16, "reading"))?;
        }
        assert!(temps.delete(3)?);
        assert!(!temps.delete(3)?);
        assert_eq!(temps.get(25)?, Some((25, "reading")));
        // A nested bucket in a typed bucket is skipped by iteration.
        temps.bytes().create_bucket("nested")?;
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    db.view(|tx| {
        let temps = tx.open_bucket(TEMPS)?.expect("created");
        let keys: Vec<i32> = temps
            .iter()
            .map(|e| e.map(|(k, _)| k))
            .collect::<Result<_, _>>()?;
        assert_eq!(keys, [-40, -1, 0, 25, 100]);
        let below_zero: Vec<i32> = temps
            .range(..0)
            .map(|e| e.map(|(k, _)| k))
            .collect::<Result<_, _>>()?;
        assert_eq!(below_zero, [-40, -1]);
        let backwards: Vec<i32> = temps
            .range(-1..=25)
            .rev()
            .map(|e| e.map(|(k, _)| k))
            .collect::<Result<_, _>>()?;
        assert_eq!(backwards, [25, 0, -1]);
        assert_eq!(temps.get(7)?, None);
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    // Missing in a read transaction: None, not created.
    db.view(|tx| {
        const NONE: BucketDef<u8, u8> = BucketDef::new("none");
        assert!(tx.open_bucket(NONE)?.is_none());
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
}

#[test]
fn bytes_of_another_type_are_a_decode_error() {
    let (_dir, db) = temp_db();
    db.update(|tx| {
        let mut b = tx.create_bucket("mixed")?;
        b.put("k", [0xFF, 0xFE])?; // not UTF-8, and not 8 bytes
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    db.view(|tx| {
        let mixed = tx.bucket("mixed")?.expect("created");
        let as_str = mixed.typed::<&str, &str>();
        let error = as_str.get("k").unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Decode);
        assert!(error.to_string().contains("&str"), "{error}");
        let as_u64 = mixed.typed::<&str, u64>();
        assert!(matches!(as_u64.get("k"), Err(Error::Decode { .. })));
        let first = as_u64.iter().next().expect("one entry");
        assert!(matches!(first, Err(Error::Decode { .. })));
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
}

#[test]
fn serde_values_are_stored_as_json() {
    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq, Eq)]
    struct User {
        name: String,
        admin: bool,
    }
    const USERS: BucketDef<u64, Json<User>> = BucketDef::new("users");
    let (_dir, db) = temp_db();
    let alice = User {
        name: "alice".into(),
        admin: true,
    };
    db.update(|tx| tx.open_bucket(USERS)?.put(1, &alice))
        .unwrap();
    db.view(|tx| {
        let users = tx.open_bucket(USERS)?.expect("created");
        assert_eq!(users.get(1)?, Some(alice));
        assert_eq!(
            tx.bucket("users")?.unwrap().get(1u64.to_be_bytes())?,
            Some(&br#"{"name":"alice","admin":true}"#[..])
        );
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
}
