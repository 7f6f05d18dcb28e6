//! Buckets nested deeper than any fixed limit (Go bbolt has none), on a small stack: every
//! command that walks nested buckets must read, check, export, inspect and compact them
//! without recursion.

use crate::support::{Dir, Run, finish};
use std::process::{Command, Stdio};

/// Levels of the chain: past the 1,024 rbolt once refused, and deep enough that a recursive
/// walk would overflow the stack below.
const LEVELS: usize = 2000;

/// `rbolt ARGS` with a 256 KiB main-thread stack.
fn rbolt_small_stack(args: &[&std::ffi::OsStr]) -> Run {
    let output = Command::new("sh")
        .arg("-c")
        .arg("ulimit -s 256 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_rbolt"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run rbolt under sh");
    finish(output)
}

/// The manifest of a chain of `levels` buckets, each holding the next and one key, in export
/// order: a bucket's line, its nested bucket's subtree (`b…` sorts before `depth`), its key.
fn chain_manifest(levels: usize) -> String {
    let names: Vec<String> = (0..levels).map(|i| format!("\"b{i}\"")).collect();
    let mut text = String::new();
    for level in 1..=levels {
        text.push_str(&format!(
            "{{\"bucket\":[{}],\"sequence\":{level}}}\n",
            names[..level].join(",")
        ));
    }
    for level in (1..=levels).rev() {
        text.push_str(&format!(
            "{{\"bucket\":[{}],\"key\":\"6465707468\",\"value\":\"{level:08x}\"}}\n",
            names[..level].join(",")
        ));
    }
    text
}

#[test]
fn a_chain_of_2000_nested_buckets_imports_checks_exports_inspects_and_compacts() {
    let dir = Dir::new();
    let db = dir.path("deep.db");
    let manifest = chain_manifest(LEVELS);
    let input = dir.path("deep.jsonl");
    std::fs::write(&input, &manifest).unwrap();
    let arg = |p: &std::path::Path| p.as_os_str().to_owned();
    let run = |args: &[std::ffi::OsString]| {
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        rbolt_small_stack(&args)
    };
    run(&["import".into(), arg(&db), "-i".into(), arg(&input)]).ok();
    assert_eq!(run(&["check".into(), arg(&db)]).ok(), "OK\n");
    assert!(
        run(&["export".into(), arg(&db)]).ok() == manifest,
        "export differs"
    );
    let inspect = run(&["inspect".into(), arg(&db)]).ok();
    assert_eq!(inspect.matches("\"name\":").count(), LEVELS + 1);
    assert_eq!(inspect.matches("\"keyN\": 1").count(), LEVELS);
    let compacted = dir.path("compacted.db");
    run(&["compact".into(), "-o".into(), arg(&compacted), arg(&db)]).ok();
    assert_eq!(run(&["check".into(), arg(&compacted)]).ok(), "OK\n");
    assert!(
        run(&["export".into(), arg(&compacted)]).ok() == manifest,
        "the compacted copy exports differently"
    );
    // Deleting the chain from the top frees every page of it.
    run(&["delete".into(), "--bucket".into(), arg(&db), "b0".into()]).ok();
    assert_eq!(run(&["check".into(), arg(&db)]).ok(), "OK\n");
    assert_eq!(run(&["export".into(), arg(&db)]).ok(), "");
}
