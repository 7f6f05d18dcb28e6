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
    // Keys and values: a hex string or one of the two objects, nothing else.
    let spelled = "a hex string, {\"text\": \"...\"} or {\"hex\": \"...\"}";
    check(r#"{"bucket":["a"],"key":5,"value":"00"}"#, spelled);
    check(r#"{"bucket":["a"],"key":"00","value":{"text":1}}"#, spelled);
    check(
        r#"{"bucket":["a"],"key":{"text":"a","hex":"00"},"value":"00"}"#,
        spelled,
    );
    check(
        r#"{"bucket":["a"],"key":{"txt":"a"},"value":"00"}"#,
        spelled,
    );
    check(
        r#"{"bucket":["a"],"key":{"hex":"0"},"value":"00"}"#,
        "key: odd length",
    );
    // A lone surrogate is no text.
    check(
        r#"{"bucket":["a"],"key":{"text":"\ud800"},"value":"00"}"#,
        "hex escape",
    );
}

#[test]
fn text_keys_and_values_round_trip() {
    let path: [&[u8]; 1] = [b"top"];
    let prefix = line_prefix(&path);
    // Every character JSON must escape, one it need not (DEL), non-ASCII, and the empty text.
    let mut all_controls: String = (0u8..0x20).map(char::from).collect();
    all_controls.push_str("\"\\/\u{7f}ünï☃\u{2028}𝄞");
    let cases: [(&str, &str); 3] = [("name", "plain text"), ("", &all_controls), ("k\"ey", "")];
    for (key, value) in cases {
        let mut out = Vec::new();
        write_value_line_as(&mut out, &prefix, Spelled::Text(key), Spelled::Text(value)).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches('\n').count(), 1, "one line: {text:?}");
        // Valid JSON whose strings are the texts, and a line that parses back to the bytes.
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(json["key"]["text"], key);
        assert_eq!(json["value"]["text"], value);
        let line = parse_line(text.trim_end()).unwrap();
        assert_eq!(
            line.entry,
            Entry::Value {
                key: key.as_bytes().to_vec(),
                value: value.as_bytes().to_vec(),
            }
        );
    }
    let mut out = Vec::new();
    write_value_line_as(
        &mut out,
        &prefix,
        Spelled::Text("k"),
        Spelled::Text("a\tb\u{1}\\"),
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "{\"bucket\":[\"top\"],\"key\":{\"text\":\"k\"},\"value\":{\"text\":\"a\\tb\\u0001\\\\\"}}\n"
    );
    // Both spelled as hex, the line is the fixtures' line.
    let (mut hex, mut plain) = (Vec::new(), Vec::new());
    write_value_line_as(&mut hex, &prefix, Spelled::Hex(b"k"), Spelled::Hex(b"\xff")).unwrap();
    write_value_line(&mut plain, &prefix, b"k", b"\xff").unwrap();
    assert_eq!(hex, plain);
    // `{"hex": ...}` reads as the plain hex string does.
    let line = parse_line(r#"{"bucket":["top"],"key":{"hex":"6B"},"value":"ff"}"#).unwrap();
    assert_eq!(
        line.entry,
        Entry::Value {
            key: b"k".to_vec(),
            value: vec![0xff],
        }
    );
}

#[test]
fn the_root_bucket_has_a_sequence_line() {
    let mut out = Vec::new();
    let root: [&[u8]; 0] = [];
    write_sequence_line(&mut out, &line_prefix(&root), 7).unwrap();
    assert_eq!(out, b"{\"bucket\":[],\"sequence\":7}\n");
    let line = parse_line(std::str::from_utf8(&out).unwrap().trim_end()).unwrap();
    assert_eq!(
        line,
        Line {
            bucket: Vec::new(),
            entry: Entry::Sequence(7),
        }
    );
}
