//! How keys, values and names are shown and parsed: bbolt's `--format` modes, Go's `%q`
//! quoting and Go's JSON string escaping (for `inspect`). Hex is the manifest format's
//! (`rbolt-manifest`), the same lowercase hex bbolt prints.
//!
//! bbolt's tools are written in Go, so "printable" and "quoted" mean what Go's `unicode.IsPrint`
//! and `strconv.Quote` mean. Rust's standard library has no Unicode general categories, so
//! [`is_print`] recognises every non-printable class except unassigned code points (Go treats
//! those as non-printable, this module as printable); keys holding unassigned code points are
//! vanishingly rare.

use clap::ValueEnum;
use rbolt_manifest::parse_hex;
pub use rbolt_manifest::{hex, write_hex};
use sha2::{Digest, Sha256};
use std::fmt::Write as _;
use std::io::{self, Write};

/// How a key or value is printed (bbolt's `--format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// The bytes as text when they are printable UTF-8, else lowercase hex.
    Auto,
    /// A Go double-quoted string literal, with escapes (Go's `%q`).
    AsciiEncoded,
    /// Lowercase hex.
    Hex,
    /// The raw bytes.
    Bytes,
    /// Only the length and the SHA-256 digest.
    Redacted,
}

/// How a key, value or bucket name given on the command line is read (bbolt's
/// `--parse-format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ParseFormat {
    /// The argument's bytes as they are.
    AsciiEncoded,
    /// Hex digits, two per byte.
    Hex,
}

/// Reads a command-line argument as bytes in `format`.
pub fn parse_arg(
    arg: &std::ffi::OsStr,
    format: ParseFormat,
    what: &str,
) -> anyhow::Result<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    match format {
        ParseFormat::AsciiEncoded => Ok(arg.as_bytes().to_vec()),
        ParseFormat::Hex => {
            let text = arg
                .to_str()
                .ok_or_else(|| anyhow::anyhow!("{what} is not hex: {arg:?}"))?;
            parse_hex(text).map_err(|e| anyhow::anyhow!("{what}: {e}"))
        }
    }
}

/// Whether Go's `unicode.IsPrint` holds for `c`: a letter, mark, number, punctuation or symbol,
/// or the ASCII space. (Unassigned code points count as printable here; see the module doc.)
pub fn is_print(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_ascii() {
        return c.is_ascii_graphic();
    }
    // Control characters (Cc) and separators (Zs, Zl, Zp) other than the ASCII space.
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    let cp = u32::from(c);
    // Format characters (Cf), private use (Co), and the noncharacters of every plane (Cn).
    const FORMAT: &[(u32, u32)] = &[
        (0x00AD, 0x00AD),
        (0x0600, 0x0605),
        (0x061C, 0x061C),
        (0x06DD, 0x06DD),
        (0x070F, 0x070F),
        (0x0890, 0x0891),
        (0x08E2, 0x08E2),
        (0x180E, 0x180E),
        (0x200B, 0x200F),
        (0x202A, 0x202E),
        (0x2060, 0x2064),
        (0x2066, 0x206F),
        (0xFDD0, 0xFDEF),
        (0xFEFF, 0xFEFF),
        (0xFFF9, 0xFFFB),
        (0x110BD, 0x110BD),
        (0x110CD, 0x110CD),
        (0x13430, 0x1343F),
        (0x1BCA0, 0x1BCA3),
        (0x1D173, 0x1D17A),
        (0xE0001, 0xE0001),
        (0xE0020, 0xE007F),
        (0xE000, 0xF8FF),
        (0xF0000, 0x10FFFF),
    ];
    if cp & 0xFFFE == 0xFFFE {
        return false;
    }
    !FORMAT.iter().any(|&(lo, hi)| (lo..=hi).contains(&cp))
}

/// Whether `bytes` are valid UTF-8 made only of printable characters (bbolt's `isPrintable`).
pub fn is_printable(bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes).is_ok_and(|text| text.chars().all(is_print))
}

/// Go's `strconv.Quote` of `bytes` (what `%q` prints): a double-quoted literal where printable
/// characters stand as they are and everything else is escaped; invalid UTF-8 bytes as `\xNN`.
pub fn go_quote(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push('"');
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            push_escaped_rune(&mut out, c);
        }
        for &byte in chunk.invalid() {
            let _ = write!(out, "\\x{byte:02x}");
        }
    }
    out.push('"');
    out
}

fn push_escaped_rune(out: &mut String, c: char) {
    match c {
        '"' | '\\' => {
            out.push('\\');
            out.push(c);
        }
        _ if is_print(c) => out.push(c),
        '\x07' => out.push_str("\\a"),
        '\x08' => out.push_str("\\b"),
        '\x0c' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\x0b' => out.push_str("\\v"),
        _ if c < ' ' || c == '\x7f' => {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        }
        _ if u32::from(c) < 0x10000 => {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        }
        _ => {
            let _ = write!(out, "\\U{:08x}", u32::from(c));
        }
    }
}

/// Writes `bytes` in `format` followed by a newline (bbolt's `writelnBytes`).
pub fn writeln_bytes(w: &mut impl Write, bytes: &[u8], format: Format) -> io::Result<()> {
    write_bytes(w, bytes, format)?;
    w.write_all(b"\n")
}

/// Writes `bytes` in `format`.
pub fn write_bytes(w: &mut impl Write, bytes: &[u8], format: Format) -> io::Result<()> {
    match format {
        Format::Auto if is_printable(bytes) => w.write_all(bytes),
        Format::Auto | Format::Hex => write_hex(w, bytes),
        Format::Bytes => w.write_all(bytes),
        Format::AsciiEncoded => w.write_all(go_quote(bytes).as_bytes()),
        Format::Redacted => {
            write!(w, "<redacted len:{} sha256:", bytes.len())?;
            write_hex(w, &Sha256::digest(bytes))?;
            w.write_all(b">")
        }
    }
}

/// `bytes` in `format` as a string; raw bytes that are not UTF-8 are shown lossily.
pub fn format_bytes(bytes: &[u8], format: Format) -> String {
    let mut out = Vec::new();
    write_bytes(&mut out, bytes, format).expect("writing to a vector cannot fail");
    String::from_utf8_lossy(&out).into_owned()
}

/// Appends `bytes` as a JSON string the way Go's `encoding/json` writes a `string(bytes)`:
/// invalid UTF-8 becomes U+FFFD, `<`, `>` and `&` are escaped for HTML, and so are U+2028 and
/// U+2029.
pub fn push_go_json_string(out: &mut String, bytes: &[u8]) {
    out.push('"');
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\x08' => out.push_str("\\b"),
                '\x0c' => out.push_str("\\f"),
                '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                    let _ = write!(out, "\\u{:04x}", u32::from(c));
                }
                _ if c < ' ' => {
                    let _ = write!(out, "\\u{:04x}", u32::from(c));
                }
                _ => out.push(c),
            }
        }
        for _ in chunk.invalid() {
            out.push_str("\\ufffd");
        }
    }
    out.push('"');
}

/// Shortens `text` to at most `width` terminal columns, marking the cut with `…`. Columns are
/// display width: a CJK character or an emoji takes two, a combining mark none.
pub fn elide(text: &str, width: usize) -> std::borrow::Cow<'_, str> {
    console::truncate_str(text, width, "…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_quote_matches_go() {
        let check = |input: &[u8], expected: &str| assert_eq!(go_quote(input), expected);
        check(b"", r#""""#);
        check(b"hello", r#""hello""#);
        check(b"a\"b\\c", r#""a\"b\\c""#);
        check(b"\x00\x01\x7f", r#""\x00\x01\x7f""#);
        check(b"\x07\x08\x0c\n\r\t\x0b", r#""\a\b\f\n\r\t\v""#);
        check("héllo ☃".as_bytes(), "\"héllo ☃\"");
        check(b"\xff\xfe", r#""\xff\xfe""#);
        check(b"\xe2\x82A", r#""\xe2\x82A""#);
        check(
            "\u{85}\u{a0}\u{200b}\u{feff}".as_bytes(),
            r#""\u0085\u00a0\u200b\ufeff""#,
        );
        check(
            "\u{e0001}\u{10ffff}".as_bytes(),
            r#""\U000e0001\U0010ffff""#,
        );
    }

    #[test]
    fn printable_is_go_is_print() {
        assert!(is_printable(b"abc def ~"));
        assert!(is_printable("日本語 ünïcode".as_bytes()));
        assert!(is_printable(b""));
        assert!(!is_printable(b"tab\there"));
        assert!(!is_printable(b"\xff"));
        assert!(!is_printable("nbsp\u{a0}".as_bytes()));
        assert!(!is_printable("zero\u{200b}width".as_bytes()));
        assert!(!is_printable("private\u{e000}".as_bytes()));
    }

    #[test]
    fn formats() {
        let check = |bytes: &[u8], format: Format, expected: &str| {
            assert_eq!(format_bytes(bytes, format), expected, "{format:?}");
        };
        check(b"key", Format::Auto, "key");
        check(b"\x00\x01", Format::Auto, "0001");
        check(b"key", Format::Hex, "6b6579");
        check(b"key", Format::Bytes, "key");
        check(b"k\ney", Format::AsciiEncoded, r#""k\ney""#);
        // The redacted form: the length, then the SHA-256 digest in lowercase hex, in angle
        // brackets. The digest itself is the sha2 crate's, so only well-known digests here.
        check(
            b"abc",
            Format::Redacted,
            "<redacted len:3 sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad>",
        );
        check(
            b"",
            Format::Redacted,
            "<redacted len:0 sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855>",
        );
    }

    #[test]
    fn json_strings() {
        let go = |bytes: &[u8]| {
            let mut out = String::new();
            push_go_json_string(&mut out, bytes);
            out
        };
        assert_eq!(go(b"root"), r#""root""#);
        assert_eq!(go(b"a<b>&\"\\"), r#""a\u003cb\u003e\u0026\"\\""#);
        assert_eq!(go(b"\x00\n\x1f\x7f"), "\"\\u0000\\n\\u001f\x7f\"");
        assert_eq!(go(b"\x00\xff\x10"), r#""\u0000\ufffd\u0010""#);
    }

    #[test]
    fn elision() {
        assert_eq!(elide("short", 10), "short");
        assert_eq!(elide("0123456789abc", 10), "012345678…");
        assert_eq!(elide("0123456789", 10), "0123456789");
        assert_eq!(elide("abc", 0), "…");
        // Wide characters take two columns each: four of them fill eight.
        assert_eq!(elide("日本語日本語", 10), "日本語日…");
        assert_eq!(elide("日本語日本", 10), "日本語日本");
        // A combining mark takes no column of its own.
        assert_eq!(
            elide("e\u{301}e\u{301}e\u{301}", 3),
            "e\u{301}e\u{301}e\u{301}"
        );
    }
}
