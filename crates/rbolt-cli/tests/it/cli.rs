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

#[test]
fn progress_can_be_turned_off_anywhere() {
    let dir = Dir::new();
    let db = dir.fixture("small");
    assert_eq!(rbolt(["check", arg(&db), "--no-progress"]).ok(), "OK\n");
    assert_eq!(rbolt(["--no-progress", "check", arg(&db)]).ok(), "OK\n");
}
