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
    let (ea, eb) = (K::to_bytes(&a).unwrap(), K::to_bytes(&b).unwrap());
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
            && ordered::<String>(s.clone(), t.clone())
            && ordered::<Vec<u8>>(s.clone().into_bytes(), t.clone().into_bytes())
            && ordered::<(u8, u8, [u8; 2])>((1, a.0 as u8, [2, 3]), (1, b.0 as u8, [2, 3]))
    }
    QuickCheck::new()
        .tests(2000)
        .quickcheck(tuples as fn((u16, i32), (u16, i32), String, String) -> bool);
    fn floats(a: f64, b: f64, c: f32, d: f32) -> bool {
        let f64_ok = {
            let (ea, eb) = (f64::to_bytes(&a).unwrap(), f64::to_bytes(&b).unwrap());
            ea.cmp(&eb) == a.total_cmp(&b) && f64::from_bytes(&ea).unwrap().to_bits() == a.to_bits()
        };
        let f32_ok = {
            let (ec, ed) = (f32::to_bytes(&c).unwrap(), f32::to_bytes(&d).unwrap());
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
            f64::to_bytes(&a).unwrap().cmp(&f64::to_bytes(&b).unwrap()),
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
        let ok = i64::from_bytes(i64::to_bytes(&a).unwrap().as_ref()).unwrap() == a
            && u128::from_bytes(u128::to_bytes(&b).unwrap().as_ref()).unwrap() == b
            && <&str>::from_bytes(<&str>::to_bytes(&s.as_str()).unwrap()).unwrap() == s
            && String::from_bytes(String::to_bytes(&s).unwrap()).unwrap() == s
            && <&[u8]>::from_bytes(<&[u8]>::to_bytes(&bytes.as_slice()).unwrap()).unwrap()
                == bytes.as_slice()
            && <Vec<u8>>::from_bytes(<Vec<u8>>::to_bytes(&bytes).unwrap()).unwrap() == bytes
            && <(u32, &str)>::from_bytes(
                <(u32, &str)>::to_bytes(&(pair.0, pair.1.as_str()))
                    .unwrap()
                    .as_ref(),
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

#[test]
fn owned_strings_and_byte_vectors_read_what_borrowed_ones_wrote() {
    const BORROWED: BucketDef<&str, &[u8]> = BucketDef::new("b");
    const OWNED: BucketDef<String, Vec<u8>> = BucketDef::new("b");
    let (_dir, db) = temp_db();
    db.update(|tx| {
        let mut b = tx.open_bucket(BORROWED)?;
        b.put("bob", &b"2"[..])?;
        b.put("alice", &b"1"[..])?;
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    // Owned values outlive the transaction they were read in.
    let all: Vec<(String, Vec<u8>)> = db
        .view(|tx| tx.open_bucket(OWNED)?.unwrap().iter().collect())
        .unwrap();
    assert_eq!(
        all,
        [
            ("alice".into(), b"1".to_vec()),
            ("bob".into(), b"2".to_vec())
        ]
    );
    db.update(|tx| {
        tx.open_bucket(OWNED)?
            .put("carol".to_string(), b"3".to_vec())
    })
    .unwrap();
    let carol = db
        .view(|tx| {
            tx.open_bucket(BORROWED)?
                .unwrap()
                .get("carol")
                .map(|v| v.map(<[u8]>::to_vec))
        })
        .unwrap();
    assert_eq!(carol.as_deref(), Some(&b"3"[..]));
    // Bytes that are not UTF-8 do not decode as a String.
    db.update(|tx| tx.bucket_mut("b")?.unwrap().put("dave", [0xFF]))
        .unwrap();
    const TEXT: BucketDef<String, String> = BucketDef::new("b");
    let error = db
        .view(|tx| tx.open_bucket(TEXT)?.unwrap().get("dave".to_string()))
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Decode);
    assert!(error.to_string().contains("String"), "{error}");
}

/// The sorted model of a bucket of text keys.
type TextModel = std::collections::BTreeMap<String, u16>;

/// Checks every read of a typed bucket against `model`, for the probe keys `probes`.
fn check_reads(b: &rbolt::TypedBucketMut<'_, String, u16>, model: &TextModel, probes: &[String]) {
    fn pairs(iter: impl Iterator<Item = rbolt::Result<(String, u16)>>) -> Vec<(String, u16)> {
        iter.collect::<rbolt::Result<_>>().unwrap()
    }
    let owned = |(k, v): (&String, &u16)| (k.clone(), *v);
    assert_eq!(b.len().unwrap(), model.len() as u64);
    assert_eq!(b.is_empty().unwrap(), model.is_empty());
    assert_eq!(b.first().unwrap(), model.first_key_value().map(owned));
    assert_eq!(b.last().unwrap(), model.last_key_value().map(owned));
    let everything: Vec<(String, u16)> = model.iter().map(owned).collect();
    assert_eq!(pairs(b.iter()), everything);
    let mut backwards = everything.clone();
    backwards.reverse();
    assert_eq!(pairs(b.iter().rev()), backwards);
    for probe in probes {
        let with_prefix: Vec<_> = model
            .iter()
            .filter(|(k, _)| k.starts_with(probe.as_str()))
            .map(owned)
            .collect();
        assert_eq!(pairs(b.prefix(probe)), with_prefix, "prefix {probe:?}");
        let mut backwards = with_prefix.clone();
        backwards.reverse();
        assert_eq!(
            pairs(b.prefix(probe).rev()),
            backwards,
            "prefix {probe:?} backwards"
        );
        let mut cursor = b.cursor();
        let at_or_after = model.range(probe.clone()..).next().map(owned);
        assert_eq!(cursor.seek(probe).unwrap(), at_or_after, "seek {probe:?}");
        let after = model.range(probe.clone()..).nth(1).map(owned);
        if at_or_after.is_some() {
            assert_eq!(cursor.next().unwrap(), after, "next after seek {probe:?}");
        }
        let from: Vec<_> = model.range(probe.clone()..).map(owned).collect();
        assert_eq!(pairs(b.range(probe.clone()..)), from, "range {probe:?}..");
        let below: Vec<_> = model.range(..probe.clone()).rev().map(owned).collect();
        assert_eq!(
            pairs(b.range(..probe.clone()).rev()),
            below,
            "range ..{probe:?}"
        );
    }
}

#[test]
fn typed_reads_agree_with_a_sorted_model() {
    const WORDS: BucketDef<String, u16> = BucketDef::new("words");
    let (_dir, db) = temp_db();
    fn case(db: &Db, entries: Vec<(String, u16)>, probes: Vec<String>) -> TestResult {
        let model: TextModel = entries.into_iter().filter(|(k, _)| !k.is_empty()).collect();
        let mut probes = probes;
        probes.extend(model.keys().take(3).cloned());
        probes.extend(
            model
                .keys()
                .filter_map(|k| k.chars().next())
                .map(String::from),
        );
        // Checked in a transaction that then rolls back, so every case starts empty.
        let checked: Result<(), Option<Error>> = db.update(|tx| {
            let mut b = tx.open_bucket(WORDS)?;
            // A nested bucket whose name is no UTF-8 (it sorts after every text key): typed
            // reads skip it.
            b.bytes().create_bucket([0xFF])?;
            for (k, v) in &model {
                b.put(k, v)?;
            }
            check_reads(&b, &model, &probes);
            Err(None)
        });
        match checked {
            Err(None) => TestResult::passed(),
            other => TestResult::error(format!("{other:?}")),
        }
    }
    // Generated by hand: quickcheck's runner takes no state (the database) along.
    let mut g = quickcheck::Gen::new(30);
    for _ in 0..300 {
        let entries: Vec<(String, u16)> = quickcheck::Arbitrary::arbitrary(&mut g);
        let probes: Vec<String> = quickcheck::Arbitrary::arbitrary(&mut g);
        let result = case(&db, entries.clone(), probes.clone());
        assert!(!result.is_failure(), "{entries:?} {probes:?}: {result:?}");
    }
}

/// A key type whose odd numbers have no bytes: a codec that can fail.
struct EvenOnly;

impl Value for EvenOnly {
    type SelfType<'a> = u32;
    type Bytes<'a>
        = [u8; 4]
    where
        Self: 'a;

    fn to_bytes<'a>(value: &'a u32) -> rbolt::Result<[u8; 4]>
    where
        Self: 'a,
    {
        if value % 2 == 1 {
            return Err(Error::Encode {
                type_name: "EvenOnly",
                reason: format!("{value} is odd"),
            });
        }
        Ok(value.to_be_bytes())
    }

    fn from_bytes(bytes: &[u8]) -> rbolt::Result<u32> {
        <u32 as Value>::from_bytes(bytes)
    }
}

impl Key for EvenOnly {}

#[test]
fn a_key_that_does_not_encode_is_an_error_everywhere_and_changes_nothing() {
    const EVENS: BucketDef<EvenOnly, &str> = BucketDef::new("evens");
    let (_dir, db) = temp_db();
    db.update(|tx| {
        let mut evens = tx.open_bucket(EVENS)?;
        evens.put(2, "two")?;
        evens.put(4, "four")?;
        let owned = |e: rbolt::Result<(u32, &str)>| e.map(|(k, v)| (k, v.to_string()));
        let before: Vec<(u32, String)> = evens.iter().map(owned).collect::<rbolt::Result<_>>()?;
        let is_encode = |e: &Error| e.kind() == ErrorKind::Encode && e.to_string().contains("odd");
        assert!(is_encode(&evens.put(3, "three").unwrap_err()));
        assert!(is_encode(&evens.delete(3).unwrap_err()));
        assert!(is_encode(&evens.get(3).unwrap_err()));
        assert!(is_encode(&evens.cursor().seek(3).unwrap_err()));
        // An iterator whose bound or prefix does not encode yields the error, then ends.
        for mut iter in [evens.range(3..), evens.range(..=3), evens.prefix(3)] {
            assert!(is_encode(&iter.next().unwrap().unwrap_err()));
            assert!(iter.next().is_none());
        }
        let mut cloned = evens.range(1..).clone();
        assert!(cloned.next().unwrap().is_err(), "a clone keeps the error");
        // Nothing changed, and the transaction commits.
        let after: Vec<(u32, String)> = evens.iter().map(owned).collect::<rbolt::Result<_>>()?;
        assert_eq!(after, before);
        assert_eq!(evens.range(2..4).count(), 1);
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    let committed = db.view(|tx| tx.open_bucket(EVENS)?.unwrap().len()).unwrap();
    assert_eq!(committed, 2);
}

/// A "fixed-width" key that is not: its bytes are not `WIDTH` long.
struct Liar;

impl Value for Liar {
    type SelfType<'a> = u8;
    type Bytes<'a>
        = [u8; 2]
    where
        Self: 'a;

    fn to_bytes<'a>(value: &'a u8) -> rbolt::Result<[u8; 2]>
    where
        Self: 'a,
    {
        Ok([*value, 0])
    }

    fn from_bytes(bytes: &[u8]) -> rbolt::Result<u8> {
        <u8 as Value>::from_bytes(bytes)
    }
}

impl Key for Liar {}

impl rbolt::FixedWidth for Liar {
    const WIDTH: usize = 1;
}

#[test]
fn a_tuple_whose_fixed_width_component_is_not_is_an_encode_error() {
    const PAIRS: BucketDef<(Liar, &str), ()> = BucketDef::new("pairs");
    let (_dir, db) = temp_db();
    let error = db
        .update(|tx| tx.open_bucket(PAIRS)?.put((1, "x"), ()))
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Encode);
    assert!(error.to_string().contains("WIDTH 1"), "{error}");
    // The failed update rolled back, the bucket it created with it.
    assert!(
        db.begin_read()
            .unwrap()
            .open_bucket(PAIRS)
            .unwrap()
            .is_none()
    );
    // In a transaction that goes on, the failed put leaves the bucket as it was.
    db.update(|tx| {
        let mut pairs = tx.open_bucket(PAIRS)?;
        assert!(pairs.put((2, "y"), ()).is_err());
        assert_eq!(pairs.bytes().iter().count(), 0);
        Ok::<_, Error>(())
    })
    .unwrap();
}

#[test]
fn a_decode_error_ends_the_iteration_from_either_end() {
    const IDS: BucketDef<u32, &str> = BucketDef::new("ids");
    let (_dir, db) = temp_db();
    db.update(|tx| {
        let mut ids = tx.open_bucket(IDS)?;
        ids.put(1, "one")?;
        ids.put(0x0010_0000, "big")?;
        // Two bytes sort between the two four-byte keys, and are no u32.
        ids.bytes().put([0, 5], "bad")?;
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    db.view(|tx| {
        let ids = tx.open_bucket(IDS)?.unwrap();
        let mut forward = ids.iter();
        assert_eq!(forward.next().transpose()?, Some((1, "one")));
        assert_eq!(
            forward.next().unwrap().unwrap_err().kind(),
            ErrorKind::Decode
        );
        assert!(
            forward.next().is_none(),
            "an entry after the error is not reached"
        );
        let mut backward = ids.iter();
        assert_eq!(
            backward.next_back().transpose()?,
            Some((0x0010_0000, "big"))
        );
        assert!(backward.next_back().unwrap().is_err());
        assert!(backward.next_back().is_none());
        // The count does not decode, so it sees all three.
        assert_eq!(ids.len()?, 3);
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
}

#[test]
fn json_a_value_json_cannot_hold_is_an_encode_error_and_changes_nothing() {
    use std::collections::BTreeMap;
    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    struct Reading {
        celsius: f64,
    }
    /// A map keyed by tuples.
    type Grid = BTreeMap<(u8, u8), u32>;
    const GRID: BucketDef<&str, Json<Grid>> = BucketDef::new("data");
    const READINGS: BucketDef<&str, Json<Reading>> = BucketDef::new("data");
    let (_dir, db) = temp_db();
    db.update(|tx| {
        tx.open_bucket(READINGS)?
            .put("kept", &Reading { celsius: 20.5 })
    })
    .unwrap();
    let stored = |db: &Db| -> Vec<(Vec<u8>, Vec<u8>)> {
        db.view(|tx| {
            let b = tx.bucket("data")?.unwrap();
            b.iter()
                .map(|e| e.map(|e| (e.key().to_vec(), e.raw_value().to_vec())))
                .collect()
        })
        .unwrap()
    };
    let before = stored(&db);
    let result = db.update(|tx| {
        // A map with tuple keys: serde_json refuses it ("key must be a string").
        let grid = BTreeMap::from([((1, 2), 3)]);
        let error = tx.open_bucket(GRID)?.put("grid", &grid).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Encode);
        assert!(
            error.to_string().contains("key must be a string"),
            "{error}"
        );
        // NaN: serde_json writes `null`, which no f64 reads back.
        let mut readings = tx.open_bucket(READINGS)?;
        let error = readings
            .put("nan", &Reading { celsius: f64::NAN })
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Encode);
        assert!(error.to_string().contains("null"), "{error}");
        assert_eq!(readings.get("nan")?, None);
        // The transaction goes on and commits what else it writes.
        readings.put("later", &Reading { celsius: -3.0 })?;
        Ok::<_, rbolt::Error>(())
    });
    result.unwrap();
    let after = stored(&db);
    assert_eq!(after.len(), before.len() + 1);
    assert_eq!(&after[..1], &before[..], "only the good put landed");
    assert_eq!(after[1].0, b"later");
}

/// Tuple keys with text or bytes before the last component (issue 49, item 5): their bytes
/// sort as the tuples do, zero bytes and prefixes included, and read back as written.
#[test]
fn tuple_keys_with_variable_width_leading_components_sort_and_round_trip() {
    fn check(a: (String, u64), b: (String, u64), x: Vec<u8>, y: Vec<u8>) -> TestResult {
        let sorted = ordered::<(String, u64)>(a.clone(), b.clone())
            && ordered::<(Vec<u8>, u8)>((x.clone(), 1), (y.clone(), 0))
            && ordered::<(Vec<u8>, String, u32)>(
                (x.clone(), a.0.clone(), 7),
                (y.clone(), b.0.clone(), 7),
            );
        let bytes = <(String, u64)>::to_bytes(&a).unwrap();
        let back = <(String, u64)>::from_bytes(&bytes).unwrap();
        let three = (x.clone(), a.0.clone(), y.clone());
        let bytes3 = <(Vec<u8>, String, Vec<u8>)>::to_bytes(&three).unwrap();
        let back3 = <(Vec<u8>, String, Vec<u8>)>::from_bytes(&bytes3).unwrap();
        // Borrowed components take text without zero bytes, and read it back borrowed.
        let borrowed = if a.0.contains('\0') || b.0.contains('\0') {
            true
        } else {
            ordered::<(&str, u64)>((a.0.as_str(), a.1), (b.0.as_str(), b.1))
                && <(&str, u64)>::to_bytes(&(a.0.as_str(), a.1))
                    .unwrap()
                    .as_slice()
                    == <(String, u64)>::to_bytes(&a).unwrap().as_slice()
        };
        TestResult::from_bool(sorted && back == a && back3 == three && borrowed)
    }
    QuickCheck::new()
        .tests(3000)
        .quickcheck(check as fn((String, u64), (String, u64), Vec<u8>, Vec<u8>) -> TestResult);
    // The cases a random draw seldom makes: zero bytes, a string that begins another, a
    // component followed by bytes that would sort wrong if the end were one byte.
    let keys: Vec<(Vec<u8>, u64)> = vec![
        (vec![], u64::MAX),
        (vec![0], 0),
        (vec![0, 0], 0),
        (vec![0, 0xFF], 0),
        (vec![1], 0),
        (b"a".to_vec(), u64::MAX),
        (b"a\0".to_vec(), 0),
        (b"a\0b".to_vec(), 0),
        (b"ab".to_vec(), 0),
    ];
    for pair in keys.windows(2) {
        assert!(
            ordered::<(Vec<u8>, u64)>(pair[0].clone(), pair[1].clone()),
            "{pair:?}"
        );
        assert!(pair[0] < pair[1]);
    }
}

#[test]
fn a_borrowed_leading_component_with_a_zero_byte_is_an_encode_error_and_changes_nothing() {
    const TAGGED: BucketDef<(&str, u64), &str> = BucketDef::new("tagged");
    const OWNED: BucketDef<(String, u64), &str> = BucketDef::new("tagged");
    let (_dir, db) = temp_db();
    db.update(|tx| {
        let mut tagged = tx.open_bucket(TAGGED)?;
        tagged.put(("ok", 1), "kept")?;
        let error = tagged.put(("bad\0tag", 2), "lost").unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Encode);
        assert!(error.to_string().contains("String or Vec<u8>"), "{error}");
        assert_eq!(tagged.bytes().iter().count(), 1);
        Ok::<_, Error>(())
    })
    .unwrap();
    // An owned component takes it; a borrowed reader of such a key gets a decode error that
    // says what to read it as.
    db.update(|tx| {
        tx.open_bucket(OWNED)?
            .put(("with\0zero".to_string(), 3), "ok")
    })
    .unwrap();
    db.view(|tx| {
        let owned = tx.open_bucket(OWNED)?.unwrap();
        let keys: Vec<(String, u64)> = owned
            .iter()
            .map(|entry| entry.map(|(k, _)| k))
            .collect::<rbolt::Result<_>>()?;
        assert_eq!(keys, [("ok".to_string(), 1), ("with\0zero".to_string(), 3)]);
        let tagged = tx.open_bucket(TAGGED)?.unwrap();
        let error = tagged.iter().nth(1).unwrap().unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Decode);
        assert!(error.to_string().contains("read it as String"), "{error}");
        Ok::<_, Error>(())
    })
    .unwrap();
}

/// `with_first` takes exactly the keys whose first component is the one asked for, from
/// either end, against a model; a key whose first component has no end is a decode error.
#[test]
fn with_first_scans_one_leading_component() {
    const INDEX: BucketDef<(String, u16), u16> = BucketDef::new("index");
    let (_dir, db) = temp_db();
    let tags = ["", "a", "a\0", "ab", "b", "rust", "rusty", "rust\0y"];
    let mut model = std::collections::BTreeMap::new();
    db.update(|tx| {
        let mut index = tx.open_bucket(INDEX)?;
        for (i, tag) in tags.iter().cycle().take(80).enumerate() {
            let id = (i * 7919 % 1000) as u16;
            index.put((tag.to_string(), id), i as u16)?;
            model.insert((tag.to_string(), id), i as u16);
        }
        Ok::<_, Error>(())
    })
    .unwrap();
    db.view(|tx| {
        let index = tx.open_bucket(INDEX)?.unwrap();
        for tag in tags.iter().chain(&["r", "rus", "c"]) {
            let expected: Vec<((String, u16), u16)> = model
                .iter()
                .filter(|((t, _), _)| t == tag)
                .map(|(k, v)| (k.clone(), *v))
                .collect();
            let forward: Vec<_> = index
                .with_first(tag.to_string())
                .collect::<rbolt::Result<_>>()?;
            assert_eq!(forward, expected, "{tag:?}");
            let mut backward: Vec<_> = index
                .with_first(tag.to_string())
                .rev()
                .collect::<rbolt::Result<_>>()?;
            backward.reverse();
            assert_eq!(backward, expected, "{tag:?} backward");
        }
        Ok::<_, Error>(())
    })
    .unwrap();
    // Raw bytes with no end to their first component: a typed error, not a panic.
    db.update(|tx| tx.open_bucket(INDEX)?.bytes().put(b"zz-no-end", [0, 0]))
        .unwrap();
    db.view(|tx| {
        let index = tx.open_bucket(INDEX)?.unwrap();
        let last = index.iter().next_back().unwrap().unwrap_err();
        assert_eq!(last.kind(), ErrorKind::Decode);
        Ok::<_, Error>(())
    })
    .unwrap();
}

#[test]
fn with_first_two_scans_two_leading_components() {
    const INDEX: BucketDef<(String, String, u16), u16> = BucketDef::new("index3");
    let (_dir, db) = temp_db();
    let parts = ["", "a", "a\0", "ab", "b", "b\0c"];
    let mut model = std::collections::BTreeMap::new();
    db.update(|tx| {
        let mut index = tx.open_bucket(INDEX)?;
        let mut n = 0u16;
        for first in parts {
            for second in parts {
                for id in [3u16, 1, 2] {
                    let key = (first.to_string(), second.to_string(), id);
                    index.put(key.clone(), n)?;
                    model.insert(key, n);
                    n += 1;
                }
            }
        }
        Ok::<_, Error>(())
    })
    .unwrap();
    db.view(|tx| {
        let index = tx.open_bucket(INDEX)?.unwrap();
        for first in parts.iter().chain(&["c"]) {
            for second in parts.iter().chain(&["z"]) {
                let expected: Vec<((String, String, u16), u16)> = model
                    .iter()
                    .filter(|((f, s, _), _)| f == first && s == second)
                    .map(|(k, v)| (k.clone(), *v))
                    .collect();
                let found: Vec<_> = index
                    .with_first_two(first.to_string(), second.to_string())
                    .collect::<rbolt::Result<_>>()?;
                assert_eq!(found, expected, "{first:?}, {second:?}");
                let mut backward: Vec<_> = index
                    .with_first_two(first.to_string(), second.to_string())
                    .rev()
                    .collect::<rbolt::Result<_>>()?;
                backward.reverse();
                assert_eq!(backward, expected, "{first:?}, {second:?} backward");
            }
        }
        Ok::<_, Error>(())
    })
    .unwrap();
}
