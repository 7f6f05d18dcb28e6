//! The command line itself: usage errors, versions, pipes.

use crate::support::{Dir, arg, command, rbolt};
use std::io::Read;
use std::process::Stdio;

#[test]
fn usage_errors_exit_2() {
    for args in [
        vec![],
        vec!["frobnicate"],
        vec!["info"],
        vec!["keys", "x.db"],
        vec!["get", "x.db", "bucket"],
        vec!["page", "x.db"],
        vec!["page", "x.db", "1", "--all"],
        vec!["page-item", "x.db", "1", "2", "--key-only", "--value-only"],
        vec!["info", "x.db", "--timeout", "soon"],
        vec!["keys", "x.db", "b", "--format", "base64"],
    ] {
        let run = rbolt(&args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(!run.stderr.contains("panicked"));
    }
}

#[test]
fn version_and_help() {
    let version = rbolt(["version"]).ok();
    assert!(version.starts_with(&format!("rbolt Version: {}\n", env!("CARGO_PKG_VERSION"))));
    assert!(version.contains("\nFile Format Version: 2\n"));
    assert!(rbolt(["--version"]).ok().starts_with("rbolt "));
    let help = rbolt(["--help"]).ok();
    for name in [
        "info",
        "check",
        "buckets",
        "keys",
        "get",
        "put",
        "delete",
        "stats",
        "pages",
        "page",
        "page-item",
        "dump",
        "inspect",
        "compact",
        "vacuum",
        "export",
        "import",
        "bench",
        "surgery",
    ] {
        assert!(
            help.contains(&format!("\n  {name} ")),
            "{name} missing from help"
        );
    }
}

#[test]
fn a_closed_pipe_ends_output_quietly() {
    let dir = Dir::new();
    let db = dir.fixture("deep");
    let mut child = command(["export", arg(&db)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 100];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(
        output.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Issue 49, item 7: an error printed to a closed stderr (`rbolt check x.db 2>&1 | head -1`,
/// the reader gone) ends with the failure's exit code, not a panic's 101.
#[test]
fn an_error_on_a_closed_stderr_is_an_exit_code_not_a_panic() {
    let dir = Dir::new();
    let missing = dir.path("missing.db");
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let status = command(["check", arg(&missing)])
        .stdout(Stdio::null())
        .stderr(writer)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(1));
}

#[test]
fn progress_can_be_turned_off_anywhere() {
    let dir = Dir::new();
    let db = dir.fixture("small");
    assert_eq!(rbolt(["check", arg(&db), "--no-progress"]).ok(), "OK\n");
    assert_eq!(rbolt(["--no-progress", "check", arg(&db)]).ok(), "OK\n");
}

/// Go bbolt's scripts spell long flags with one dash, as Go's `flag` package does, the value
/// after a space or an `=`; the double-dash spellings and the short flags go on working.
#[test]
fn go_style_single_dash_flags_work_as_the_double_dash_ones() {
    let dir = Dir::new();
    let db = dir.fixture("small");
    // The two lines of issue 25: `bench -count 1000` and `get -format=hex`.
    let bench = dir.path("bench.db");
    let out = rbolt([
        "bench",
        "-count",
        "1000",
        "-batch-size=500",
        "-no-sync",
        "-work",
        "-path",
        arg(&bench),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.out().contains("# Write\t1000(ops)\t"), "{}", out.out());
    assert_eq!(
        rbolt(["keys", arg(&bench), "bench"]).ok().lines().count(),
        1000
    );
    let hex = rbolt(["get", "-format=hex", arg(&db), "alpha", "alpha-01"]).ok();
    assert_eq!(
        hex,
        rbolt(["get", "--format", "hex", arg(&db), "alpha", "alpha-01"]).ok()
    );
    assert_eq!(
        hex,
        rbolt(["get", "-f", "hex", arg(&db), "alpha", "alpha-01"]).ok()
    );
    assert_eq!(
        hex,
        rbolt(["get", arg(&db), "alpha", "alpha-01", "-format", "hex"]).ok()
    );
    // Every kind of flag: a value, a boolean (also as Go's `=true`), a global one, an alias.
    let check = rbolt([
        "check",
        "-from-page",
        "19",
        "-json=true",
        arg(&db),
        "-no-progress",
    ]);
    assert_eq!(check.ok(), "{\"ok\":true,\"errors\":[]}\n");
    assert_eq!(
        rbolt(["info", "-timeout=1s", "-json=false", arg(&db)]).ok(),
        rbolt(["info", arg(&db)]).ok()
    );
    let out = dir.path("cleared.db");
    let cleared = rbolt([
        "surgery",
        "clear-page",
        arg(&db),
        "-output",
        arg(&out),
        "-page-id",
        "3",
    ]);
    assert_eq!(cleared.ok(), "The page (3) was cleared\n");
    let compacted = dir.path("compacted.db");
    rbolt([
        "compact",
        "-tx-max-size",
        "0",
        "-o",
        arg(&compacted),
        arg(&db),
    ])
    .ok();
    // A word that names no flag is still an error, which names the word (not `-f` with the
    // value `ormats=hex`) and the flag it resembles; a value spelled like a flag follows `--`.
    let typo = rbolt(["get", "-formats=hex", arg(&db), "alpha", "alpha-01"]);
    assert_eq!(typo.code, 2);
    assert!(
        typo.stderr.contains("unexpected argument '--formats'"),
        "{}",
        typo.stderr
    );
    assert!(
        typo.stderr.contains("similar argument exists: '--format'"),
        "{}",
        typo.stderr
    );
    let typo = rbolt(["bench", "-countt", "5"]);
    assert_eq!(typo.code, 2);
    assert!(typo.stderr.contains("'--countt'"), "{}", typo.stderr);
    let put = rbolt(["put", arg(&db), "alpha", "dash", "-format"]);
    assert_eq!(put.code, 2, "{}", put.stderr);
    let put = rbolt(["put", arg(&db), "alpha", "dash", "--", "-format"]);
    put.ok();
    assert_eq!(rbolt(["get", arg(&db), "alpha", "dash"]).ok(), "-format\n");
}
