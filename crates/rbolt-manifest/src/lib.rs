//! The manifest format: the logical content of a bbolt database as JSON lines, one line per
//! bucket (its sequence) and one per key (its value), depth-first in key order.
//!
//! ```text
//! {"bucket":["top"],"sequence":0}
//! {"bucket":["top"],"key":"6b6579","value":"76616c7565"}
//! {"bucket":["top","child"],"sequence":42}
//! ```
//!
//! `rbolt export` writes it and `rbolt import` reads it, and the Go bbolt fixtures in
//! `tests/data/bbolt` come with their content in it (their README defines it). This crate is
//! the one place that knows the format: the lines as bytes, a bucket name's two spellings, and
//! the spellings of keys and values. It knows nothing of databases and does no I/O beyond
//! the writer it is given; it is a crate of its own so that the shipped `rbolt` binary and the
//! test-support crate share it without either depending on the other.
//!
//! The bytes are fixed by the fixtures (written by a Go program): a line is compact JSON with
//! its keys in the order shown. Lines are written by hand rather than serialised, so that
//! `export` streams a value of any size into its line without building the line first.
//!
//! Two extensions, which the fixtures' lines never use, so every line written before them
//! still reads the same:
//!
//! - **Text keys and values.** A key or value is lowercase hex (a JSON string), or
//!   `{"text":"..."}` holding bytes that are UTF-8 as a JSON string (every character kept;
//!   `"`, `\` and control characters escaped), or `{"hex":"..."}`. Any of the three reads back
//!   to the same bytes. [`write_value_line_as`] writes them.
//! - **The root bucket's sequence.** `{"bucket":[],"sequence":N}`: the root bucket has a
//!   sequence too, which only files of other tools set. A writer puts it first, and only when
//!   it is not 0, so a manifest of a file without one is unchanged.
//!
//! ```text
//! {"bucket":[],"sequence":7}
//! {"bucket":["top"],"sequence":0}
//! {"bucket":["top"],"key":{"text":"name"},"value":{"text":"ünï \"quoted\"\n"}}
//! {"bucket":["top"],"key":"00ff","value":"76616c7565"}
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

use serde::Deserialize;
use std::borrow::Cow;
use std::io::{self, Write};

const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    push_hex(&mut out, bytes);
    out
}

/// Appends the lowercase hex of `bytes` to `out`.
pub fn push_hex(out: &mut String, bytes: &[u8]) {
    out.reserve(bytes.len() * 2);
    for &byte in bytes {
        out.push(char::from(HEX_DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(HEX_DIGITS[usize::from(byte & 0xf)]));
    }
}

/// Writes the lowercase hex of `bytes` to `w` without building a string first (values may be
/// megabytes long).
pub fn write_hex<W: Write + ?Sized>(w: &mut W, bytes: &[u8]) -> io::Result<()> {
    let mut buf = [0u8; 1024];
    for chunk in bytes.chunks(buf.len() / 2) {
        for (i, &byte) in chunk.iter().enumerate() {
            buf[2 * i] = HEX_DIGITS[usize::from(byte >> 4)];
            buf[2 * i + 1] = HEX_DIGITS[usize::from(byte & 0xf)];
        }
        w.write_all(&buf[..2 * chunk.len()])?;
    }
    Ok(())
}

/// Why text is not hex.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HexError {
    /// An odd number of digits.
    #[error("odd length hex string {text:?}")]
    OddLength {
        /// The text.
        text: String,
    },
    /// A character that is no hex digit.
    #[error("invalid hex digit {digit:?} in {text:?}")]
    Digit {
        /// The character.
        digit: char,
        /// The text.
        text: String,
    },
}

/// The bytes of hex text (either case).
pub fn parse_hex(text: &str) -> Result<Vec<u8>, HexError> {
    if !text.len().is_multiple_of(2) {
        return Err(HexError::OddLength {
            text: text.to_owned(),
        });
    }
    let digit = |c: u8| -> Result<u8, HexError> {
        char::from(c)
            .to_digit(16)
            .map(|d| d as u8)
            .ok_or_else(|| HexError::Digit {
                digit: char::from(c),
                text: text.to_owned(),
            })
    };
    text.as_bytes()
        .chunks(2)
        .map(|pair| Ok(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

/// Appends a bucket name as a manifest writes it: a JSON string when the name is UTF-8 with no
/// control character (only `"` and `\` escaped, everything else raw), else `{"hex":"..."}`.
fn push_name(out: &mut String, name: &[u8]) {
    match std::str::from_utf8(name) {
        Ok(text) if !text.chars().any(char::is_control) => {
            out.push('"');
            for c in text.chars() {
                if c == '"' || c == '\\' {
                    out.push('\\');
                }
                out.push(c);
            }
            out.push('"');
        }
        _ => {
            out.push_str("{\"hex\":\"");
            push_hex(out, name);
            out.push_str("\"}");
        }
    }
}

/// The start of every line of the bucket at `path` (top-level name first):
/// `{"bucket":[NAME,...]`. Writers keep it while they write the bucket's lines.
pub fn line_prefix<N: AsRef<[u8]>>(path: &[N]) -> String {
    let mut prefix = String::from("{\"bucket\":[");
    for (i, name) in path.iter().enumerate() {
        if i > 0 {
            prefix.push(',');
        }
        push_name(&mut prefix, name.as_ref());
    }
    prefix.push(']');
    prefix
}

/// Writes the line of a bucket with `sequence`, whose [`line_prefix`] is `prefix`.
pub fn write_sequence_line<W: Write + ?Sized>(
    w: &mut W,
    prefix: &str,
    sequence: u64,
) -> io::Result<()> {
    writeln!(w, "{prefix},\"sequence\":{sequence}}}")
}

/// Writes the line of `key` = `value` in the bucket whose [`line_prefix`] is `prefix`.
pub fn write_value_line<W: Write + ?Sized>(
    w: &mut W,
    prefix: &str,
    key: &[u8],
    value: &[u8],
) -> io::Result<()> {
    w.write_all(prefix.as_bytes())?;
    w.write_all(b",\"key\":\"")?;
    write_hex(w, key)?;
    w.write_all(b"\",\"value\":\"")?;
    write_hex(w, value)?;
    w.write_all(b"\"}\n")
}

/// A key or value as a line spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spelled<'a> {
    /// Lowercase hex, a JSON string: the fixtures' spelling, for any bytes.
    Hex(&'a [u8]),
    /// `{"text":"..."}`: bytes that are UTF-8, as a JSON string.
    Text(&'a str),
}

/// Writes the line of `key` = `value` in the bucket whose [`line_prefix`] is `prefix`, each
/// spelled as given. With both `Hex`, the line is [`write_value_line`]'s.
pub fn write_value_line_as<W: Write + ?Sized>(
    w: &mut W,
    prefix: &str,
    key: Spelled<'_>,
    value: Spelled<'_>,
) -> io::Result<()> {
    w.write_all(prefix.as_bytes())?;
    w.write_all(b",\"key\":")?;
    write_spelled(w, key)?;
    w.write_all(b",\"value\":")?;
    write_spelled(w, value)?;
    w.write_all(b"}\n")
}

fn write_spelled<W: Write + ?Sized>(w: &mut W, bytes: Spelled<'_>) -> io::Result<()> {
    match bytes {
        Spelled::Hex(bytes) => {
            w.write_all(b"\"")?;
            write_hex(w, bytes)?;
            w.write_all(b"\"")
        }
        Spelled::Text(text) => {
            w.write_all(b"{\"text\":")?;
            write_json_string(w, text)?;
            w.write_all(b"}")
        }
    }
}

/// Writes `text` as a JSON string: `"` and `\` escaped, control characters below U+0020 as
/// `\n`, `\t`, ... or `\u00XX`, everything else as it is (JSON needs no more). Streams runs of
/// plain bytes, so a value of any size is written without a copy.
fn write_json_string<W: Write + ?Sized>(w: &mut W, text: &str) -> io::Result<()> {
    w.write_all(b"\"")?;
    let bytes = text.as_bytes();
    let mut plain_from = 0;
    for (at, &byte) in bytes.iter().enumerate() {
        let escape: &[u8] = match byte {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0..0x20 => b"",
            _ => continue,
        };
        w.write_all(&bytes[plain_from..at])?;
        if escape.is_empty() {
            write!(w, "\\u{byte:04x}")?;
        } else {
            w.write_all(escape)?;
        }
        plain_from = at + 1;
    }
    w.write_all(&bytes[plain_from..])?;
    w.write_all(b"\"")
}

/// One manifest line, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// The bucket's path, top-level name first.
    pub bucket: Vec<Vec<u8>>,
    /// What the line says of it.
    pub entry: Entry,
}

/// What a line says of its bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// The bucket exists and has this sequence (for an empty path: the root bucket has it).
    Sequence(u64),
    /// The bucket holds `key` = `value`.
    Value {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
    },
}

/// Why a line is not a manifest line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LineError {
    /// Not JSON, or not an object of the manifest's fields.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A bucket name, key or value that is not hex where hex is due.
    #[error("{what}: {error}")]
    Hex {
        /// `bucket name`, `key` or `value`.
        what: &'static str,
        /// What is wrong with the digits.
        error: HexError,
    },
    /// Neither a sequence nor a key and a value, or both.
    #[error("expected either \"sequence\" or both \"key\" and \"value\"")]
    Shape,
}

/// A bucket name as a line spells it: a string, or `{"hex": "..."}`.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawName<'a> {
    Text(#[serde(borrow)] Cow<'a, str>),
    Hex {
        #[serde(borrow)]
        hex: Cow<'a, str>,
    },
}

/// A key or value as a line spells it: a hex string, `{"text": "..."}` or `{"hex": "..."}`.
#[derive(Deserialize)]
#[serde(
    untagged,
    expecting = "a hex string, {\"text\": \"...\"} or {\"hex\": \"...\"}"
)]
enum RawBytes<'a> {
    Hex(#[serde(borrow)] Cow<'a, str>),
    Text(#[serde(borrow)] TextForm<'a>),
    Tagged(#[serde(borrow)] HexForm<'a>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TextForm<'a> {
    #[serde(borrow)]
    text: Cow<'a, str>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HexForm<'a> {
    #[serde(borrow)]
    hex: Cow<'a, str>,
}

impl RawBytes<'_> {
    fn bytes(&self, what: &'static str) -> Result<Vec<u8>, LineError> {
        let hex = match self {
            RawBytes::Text(form) => return Ok(form.text.as_bytes().to_vec()),
            RawBytes::Hex(hex) | RawBytes::Tagged(HexForm { hex }) => hex,
        };
        parse_hex(hex).map_err(|error| LineError::Hex { what, error })
    }
}

/// A line as JSON gives it, before its names and hex are decoded.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLine<'a> {
    #[serde(borrow)]
    bucket: Vec<RawName<'a>>,
    sequence: Option<u64>,
    #[serde(borrow)]
    key: Option<RawBytes<'a>>,
    #[serde(borrow)]
    value: Option<RawBytes<'a>>,
}

impl RawName<'_> {
    fn bytes(&self) -> Result<Vec<u8>, LineError> {
        match self {
            RawName::Text(text) => Ok(text.as_bytes().to_vec()),
            RawName::Hex { hex } => parse_hex(hex).map_err(|error| LineError::Hex {
                what: "bucket name",
                error,
            }),
        }
    }
}

/// Parses one line (without its newline).
pub fn parse_line(text: &str) -> Result<Line, LineError> {
    let raw: RawLine<'_> = serde_json::from_str(text)?;
    let bucket = raw
        .bucket
        .iter()
        .map(RawName::bytes)
        .collect::<Result<Vec<_>, _>>()?;
    let entry = match (raw.sequence, raw.key, raw.value) {
        (Some(sequence), None, None) => Entry::Sequence(sequence),
        (None, Some(key), Some(value)) => Entry::Value {
            key: key.bytes("key")?,
            value: value.bytes("value")?,
        },
        _ => return Err(LineError::Shape),
    };
    Ok(Line { bucket, entry })
}

/// Parses a bucket name as a JSON document spells it (a string or `{"hex": "..."}`); the
/// fixtures' summaries name buckets this way too.
pub fn parse_name(value: &serde_json::Value) -> Option<Vec<u8>> {
    match value {
        serde_json::Value::String(text) => Some(text.as_bytes().to_vec()),
        serde_json::Value::Object(map) => parse_hex(map.get("hex")?.as_str()?).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
