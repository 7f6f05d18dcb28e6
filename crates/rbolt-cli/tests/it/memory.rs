//! Large outputs stream: on a 1,000,000-key file, `keys`, `export`, `pages` and `check` run
//! with their heap capped far below the size of what they print.

use crate::support::{Dir, arg, rbolt};
use std::io::Read;
use std::process::{Command, Stdio};

/// The cap on the data segment (`ulimit -d`, in KiB): heap and private anonymous memory. The
/// database's read-only shared mapping does not count against it.
const DATA_SEGMENT_KIB_MAX: u32 = 16 * 1024;

/// Runs `rbolt ARGS` under the cap, counting its output's bytes and lines without keeping it.
fn run_capped(args: &[&str]) -> (i32, u64, u64, String) {
    let mut script = format!("ulimit -d {DATA_SEGMENT_KIB_MAX} && exec \"$0\"");
    for i in 1..=args.len() {
        script.push_str(&format!(" \"${i}\""));
    }
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_rbolt"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sh");
    let mut stdout = child.stdout.take().expect("piped stdout");
    let (mut bytes, mut lines) = (0u64, 0u64);
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = stdout.read(&mut buf).expect("read stdout");
        if n == 0 {
            break;
        }
        bytes += n as u64;
        lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
    }
    let output = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code().unwrap_or(-1), bytes, lines, stderr)
}

#[test]
fn a_million_keys_stream_in_bounded_memory() {
    let dir = Dir::new();
    let db = dir.path("million.db");
    let run = rbolt([
        "bench",
        "--count",
        "1000000",
        "--no-sync",
        "--work",
        "--path",
        arg(&db),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);

    // The cap is real: a 100 MB value cannot even be allocated under it.
    let probe = dir.path("probe.db");
    let (code, ..) = run_capped(&[
        "bench",
        "--count",
        "1",
        "--no-sync",
        "--value-size",
        "100000000",
        "--path",
        arg(&probe),
    ]);
    assert_ne!(code, 0, "the data limit does not bite");

    // 1,000,000 keys of 8 bytes, not printable: 17 bytes a line in hex.
    let (code, bytes, lines, stderr) = run_capped(&["keys", arg(&db), "bench"]);
    assert_eq!((code, lines, bytes), (0, 1_000_000, 17_000_000), "{stderr}");
    // One line per bucket and per key: about 121 MB.
    let (code, bytes, lines, stderr) = run_capped(&["export", arg(&db)]);
    assert_eq!((code, lines), (0, 1_000_001), "{stderr}");
    assert!(
        bytes > 6 * u64::from(DATA_SEGMENT_KIB_MAX) * 1024,
        "{bytes}"
    );
    let (code, _, lines, stderr) = run_capped(&["pages", arg(&db)]);
    assert_eq!(code, 0, "{stderr}");
    assert!(lines > 20_000, "{lines}");
    let (code, _, _, stderr) = run_capped(&["check", arg(&db)]);
    assert_eq!(code, 0, "{stderr}");
}
