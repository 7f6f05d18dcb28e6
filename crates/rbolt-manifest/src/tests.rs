//! The format's bytes, both directions.

use super::*;

#[test]
fn hex_round_trip_and_errors() {
    assert_eq!(hex(&[0, 0xff, 0x10]), "00ff10");
    assert_eq!(parse_hex("00ff10").unwrap(), [0, 0xff, 0x10]);
    assert_eq!(parse_hex("ABcd").unwrap(), [0xab, 0xcd]);
    assert_eq!(parse_hex("").unwrap(), [0u8; 0]);
    assert_eq!(
        parse_hex("abc").unwrap_err().to_string(),
        r#"odd length hex string "abc""#
    );
    assert_eq!(
        parse_hex("zz").unwrap_err().to_string(),
        r#"invalid hex digit 'z' in "zz""#
    );
    let mut out = Vec::new();
    write_hex(&mut out, &[0xde; 700]).unwrap();
    assert_eq!(out, "de".repeat(700).as_bytes());
}

#[test]
fn names() {
    let check = |name: &[u8], expected: &str| {
        let mut out = String::new();
        push_name(&mut out, name);
        assert_eq!(out, expected);
        let value: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(parse_name(&value).as_deref(), Some(name), "{expected}");
    };
    check(b"beta", r#""beta""#);
    check(b"q\"b\\", r#""q\"b\\""#);
    check("ünï<>".as_bytes(), "\"ünï<>\"");
    check(b"\x00\xff\x10", r#"{"hex":"00ff10"}"#);
    // U+0085 is a control character: hex, though it is valid UTF-8.
    check("c1\u{85}".as_bytes(), r#"{"hex":"6331c285"}"#);
    check(b"", r#""""#);
}

#[test]
fn lines_round_trip() {
    let path: [&[u8]; 2] = [b"top", b"\x00child"];
    let prefix = line_prefix(&path);
    let mut out = Vec::new();
    write_sequence_line(&mut out, &prefix, 42).unwrap();
    write_value_line(&mut out, &prefix, b"key", b"").unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(
        text,
        "{\"bucket\":[\"top\",{\"hex\":\"006368696c64\"}],\"sequence\":42}\n\
         {\"bucket\":[\"top\",{\"hex\":\"006368696c64\"}],\"key\":\"6b6579\",\"value\":\"\"}\n"
    );
    let lines: Vec<Line> = text.lines().map(|l| parse_line(l).unwrap()).collect();
    let bucket: Vec<Vec<u8>> = path.iter().map(|n| n.to_vec()).collect();
    assert_eq!(
        lines,
        [
            Line {
                bucket: bucket.clone(),
                entry: Entry::Sequence(42),
            },
            Line {
                bucket,
                entry: Entry::Value {
                    key: b"key".to_vec(),
                    value: Vec::new(),
                },
            },
        ]
    );
}

#[test]
fn bad_lines() {
    let check = |line: &str, expected: &str| {
        let error = parse_line(line).unwrap_err().to_string();
        assert!(error.contains(expected), "{line}: {error}");
    };
    check(r#"{"bucket":[],"sequence":1}"#, "needs a bucket path");
    check(r#"{"bucket":["a"]}"#, "expected either");
    check(
        r#"{"bucket":["a"],"sequence":1,"key":"00","value":"00"}"#,
        "expected either",
    );
    check(r#"{"bucket":["a"],"key":"00"}"#, "expected either");
    check(
        r#"{"bucket":["a"],"key":"0","value":"00"}"#,
        "key: odd length",
    );
    check(
        r#"{"bucket":["a"],"key":"00","value":"0g"}"#,
        "value: invalid hex digit",
    );
    check(
        r#"{"bucket":[{"hex":"x"}],"sequence":1}"#,
        "bucket name: odd length",
    );
    check(
        r#"{"bucket":["a"],"sequence":1,"extra":2}"#,
        "unknown field",
    );
    check("not json", "expected");
}
