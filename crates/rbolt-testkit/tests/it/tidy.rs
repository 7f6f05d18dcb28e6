//! The tidy test: the house rules of docs/ARCHITECTURE.md and STYLE.md that a reviewer would
//! otherwise have to check by eye, checked over every `.rs` file of the repository (found from
//! this crate's folder, `../..`, skipping `target` and hidden folders).
//!
//! The rules, each named in a failure as `path:line: rule-name: what is wrong; how to fix it`:
//! - `header`: a file opens with a `//!` paragraph saying what it owns.
//! - `files`: `std::fs`, `File::open`, `File::create`, `flock`, `mmap` and `memmap2` appear only
//!   in the storage layer (the `rbolt-storage` crate, `crates/rbolt-storage/src/`), or in a place on
//!   [`FILES_ALLOWED`], each entry with its reason: only the facade touches database files,
//!   the mapping and the locks.
//! - `unsafe`: `unsafe` only in the storage layer and the test allocator (or [`UNSAFE_ALLOWED`]).
//! - `lint-reason`: a lint exception is `#[expect(lint, reason = "...")]`; an `#[allow(...)]`
//!   or `#[expect(...)]` without a `reason` fails.
//! - `length`: a file of more than [`FILE_LINES_MAX`] lines needs an entry in [`LONG_FILES`]
//!   saying why it stays whole.
//!
//! Comments are not code: the `files` and `unsafe` rules read each line up to its `//`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The longest a source file may be without an entry in [`LONG_FILES`].
const FILE_LINES_MAX: usize = 1000;

/// Where the storage layer lives: the only place the `files` and `unsafe` rules allow by
/// default.
const STORAGE_DIR: &str = "crates/rbolt-storage/src/";

/// Places outside the storage layer that may touch files, and why. An entry ending in `/` is
/// a folder; an entry starting with `*/` matches that folder anywhere (`*/tests/` is every
/// crate's tests).
const FILES_ALLOWED: &[(&str, &str)] = &[
    (
        "*/tests/",
        "tests make, damage and inspect database files on purpose",
    ),
    (
        "*/benches/",
        "benchmarks make scratch files, and the comparison drives other engines' files",
    ),
    (
        "*/examples/",
        "examples are applications, which own the files beside their database",
    ),
    (
        "benches/compare/",
        "the comparison harness drives other engines, which know nothing of rbolt's storage",
    ),
    (
        "xtask/",
        "build tooling: reads reports, writes charts and summaries, never a database",
    ),
    (
        "fuzz/",
        "fuzz targets write the inputs they are given into scratch files",
    ),
    (
        "crates/rbolt-testkit/",
        "this test: it reads the repository's sources",
    ),
    (
        "crates/rbolt-fixtures/src/",
        "test support: reads the fixture files of the repository and writes copies for tests",
    ),
    (
        "crates/rbolt-reliability/src/",
        "the crash, kill and hostile-file suites copy, tear and corrupt database images on purpose",
    ),
    (
        "crates/rbolt-raft/src/",
        "the raft log's snapshot and state files are not databases; they are replaced by \
         atomic rename and hard link, which the storage layer has no form for",
    ),
    (
        "crates/rbolt-raft-node/src/",
        "the HTTP node's node-id file and streamed snapshot files are not databases",
    ),
    (
        "crates/rbolt-cli/src/open.rs",
        "stat only: whether a path exists and is a file, and whether two paths are one file",
    ),
    (
        "crates/rbolt-cli/src/new_file.rs",
        "the files commands make are written through FileStorage (or as JSON lines); only \
         putting one in place (link, rename), stat of its destination and the removal of an \
         unpublished one use std::fs",
    ),
    (
        "crates/rbolt-cli/src/cmd/compact.rs",
        "stat of the source and the output for the sizes it reports, the source's permissions \
         copied onto the copy",
    ),
    (
        "crates/rbolt-cli/src/cmd/transfer.rs",
        "export and import read and write JSON-lines files, not databases; stat of import's \
         target",
    ),
    (
        "crates/rbolt-cli/src/cmd/read.rs",
        "stat for the file size `info` prints",
    ),
    (
        "crates/rbolt-cli/src/cmd/bench.rs",
        "removes the scratch database it made",
    ),
];

/// Places outside the storage layer that may hold `unsafe`, and why.
const UNSAFE_ALLOWED: &[(&str, &str)] = &[
    (
        "crates/rbolt-testkit/src/alloc.rs",
        "the one test allocator: a GlobalAlloc impl is unsafe by definition",
    ),
    (
        "crates/rbolt-testkit/tests/it/tidy.rs",
        "this test names the word it looks for",
    ),
    (
        "benches/compare/src/engines/lmdb.rs",
        "heed marks opening an LMDB environment and switching NO_SYNC unsafe",
    ),
];

/// Files longer than [`FILE_LINES_MAX`] lines, and why each stays whole.
const LONG_FILES: &[(&str, &str)] = &[
    (
        "crates/rbolt-btree/src/node.rs",
        "one type, the page image a node edits in place: its two layouts, the edits that keep \
         them, and the checks every edit relies on belong together (its unit tests are the last 200 \
         lines)",
    ),
    (
        "crates/rbolt-btree/tests/it/corrupt.rs",
        "one corrupt-descent case a function, each a few lines; split by page kind it would \
         repeat the same setup in every file",
    ),
    (
        "crates/rbolt-page/tests/it/fuzz.rs",
        "the page decoders' property tests over one shared generator of page images",
    ),
];

/// Folders never walked: build output, version control, fuzzing's generated data.
const SKIPPED_DIRS: &[&str] = &["target", "corpus", "artifacts", "node_modules"];

/// The words the `files` rule looks for.
const FILE_WORDS: &[&str] = &[
    "std::fs",
    "File::open",
    "File::create",
    "flock",
    "mmap",
    "memmap2",
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file below `root`, as a path relative to it with `/` separators, sorted.
fn rust_files(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    // An explicit stack: the repository's depth is not ours to bound by recursion.
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot read folder {}: {e}", dir.display()));
        for entry in entries {
            let entry = entry.expect("folder entry");
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            let kind = entry.file_type().expect("file type");
            if kind.is_dir() {
                if !name.starts_with('.') && !SKIPPED_DIRS.contains(&name.as_str()) {
                    stack.push(path);
                }
            } else if kind.is_file() && name.ends_with(".rs") {
                let relative = path.strip_prefix(root).expect("below the root");
                files.push(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    files.sort();
    files
}

/// Whether `path` matches `pattern` as the allow-lists describe.
fn matches(pattern: &str, path: &str) -> bool {
    match pattern.strip_prefix("*/") {
        Some(folder) => path.starts_with(folder) || path.contains(&format!("/{folder}")),
        None => path == pattern || (pattern.ends_with('/') && path.starts_with(pattern)),
    }
}

fn allowed(list: &[(&str, &str)], path: &str) -> bool {
    list.iter().any(|(pattern, _)| matches(pattern, path))
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `word` stands in `code` as a whole word (not inside a longer identifier).
fn has_word(code: &str, word: &str) -> bool {
    code.match_indices(word).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + word.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// The code of a line: what comes before a `//` comment.
fn code_of(line: &str) -> &str {
    line.find("//").map_or(line, |at| &line[..at])
}

/// One broken rule.
struct Violation {
    path: String,
    line: usize,
    rule: &'static str,
    message: String,
}

/// Checks one file's text, named `path`, against every rule.
fn check_file(path: &str, text: &str, out: &mut Vec<Violation>) {
    let mut push = |line: usize, rule: &'static str, message: String| {
        out.push(Violation {
            path: path.to_owned(),
            line,
            rule,
            message,
        });
    };
    let lines: Vec<&str> = text.lines().collect();

    let first = lines.iter().position(|line| !line.trim().is_empty());
    if first.is_none_or(|at| !lines[at].trim_start().starts_with("//!")) {
        push(
            first.map_or(1, |at| at + 1),
            "header",
            "the file does not open with a `//!` paragraph; add one saying what the file \
             owns (and, for a crate root, what it must not do)"
                .to_owned(),
        );
    }

    let in_storage = path.starts_with(STORAGE_DIR);
    let files_ok = in_storage || allowed(FILES_ALLOWED, path);
    let unsafe_ok = in_storage || allowed(UNSAFE_ALLOWED, path);
    for (index, line) in lines.iter().enumerate() {
        let number = index + 1;
        let code = code_of(line);
        if !files_ok && let Some(word) = FILE_WORDS.iter().find(|w| has_word(code, w)) {
            push(
                number,
                "files",
                format!(
                    "`{word}` outside the storage layer; open database files through \
                     `rbolt::storage::FileStorage` (or `rbolt::Db`), or, for a file that is \
                     not a database, add this path to FILES_ALLOWED in {} with the reason",
                    file!()
                ),
            );
        }
        if !unsafe_ok && has_word(code, "unsafe") {
            push(
                number,
                "unsafe",
                format!(
                    "`unsafe` outside `{STORAGE_DIR}` and the test allocator; move it into \
                     the storage layer behind a safe API, or add the path to UNSAFE_ALLOWED \
                     in {} with the reason",
                    file!()
                ),
            );
        }
        let trimmed = code.trim_start();
        let attribute = ["#[allow(", "#![allow(", "#[expect(", "#![expect("]
            .iter()
            .find(|start| trimmed.starts_with(*start));
        if let Some(start) = attribute {
            // The attribute's text, which may run over several lines, up to its `]`.
            let mut text = String::new();
            for continued in lines[index..].iter().take(12) {
                text.push_str(continued);
                if continued.trim_end().ends_with(']') {
                    break;
                }
            }
            if !text.contains("reason") {
                push(
                    number,
                    "lint-reason",
                    format!(
                        "`{start}..)]` without a reason; write \
                         `#[expect(lint, reason = \"why\")]` (an `allow` only where the lint \
                         fires in some builds and not others, and then with a reason too)"
                    ),
                );
            }
        }
    }

    if lines.len() > FILE_LINES_MAX && !allowed(LONG_FILES, path) {
        push(
            FILE_LINES_MAX + 1,
            "length",
            format!(
                "{} lines, more than {FILE_LINES_MAX}; split it into modules (a folder with \
                 one file a part), or add it to LONG_FILES in {} with why it stays whole",
                lines.len(),
                file!()
            ),
        );
    }
}

fn report(violations: &[Violation]) -> String {
    let mut text = String::new();
    for v in violations {
        let _ = writeln!(text, "{}:{}: {}: {}", v.path, v.line, v.rule, v.message);
    }
    text
}

#[test]
fn the_tree_is_tidy() {
    let root = repo_root();
    let files = rust_files(&root);
    assert!(
        files.iter().any(|f| f == "crates/rbolt/src/lib.rs"),
        "the walk did not find the facade; is {} the repository?",
        root.display()
    );
    let mut violations = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(root.join(path))
            .unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
        check_file(path, &text, &mut violations);
    }
    assert!(
        violations.is_empty(),
        "{} house rule(s) broken (see crates/rbolt-testkit/tests/it/tidy.rs):\n{}",
        violations.len(),
        report(&violations)
    );
}

#[test]
fn every_allow_list_entry_names_a_place_that_exists() {
    // A stale entry would silently allow whatever later lands at that path.
    let root = repo_root();
    let files = rust_files(&root);
    for (pattern, reason) in FILES_ALLOWED.iter().chain(UNSAFE_ALLOWED).chain(LONG_FILES) {
        assert!(!reason.is_empty(), "{pattern} has no reason");
        if pattern.starts_with("*/") || pattern.starts_with("benches/compare/") {
            continue;
        }
        assert!(
            files.iter().any(|f| matches(pattern, f)),
            "the allow-list entry {pattern} matches no file; remove it"
        );
    }
}

/// The rules on small inputs: each can fail, and says where and how to fix it.
fn violations_of(path: &str, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    check_file(path, text, &mut out);
    out.iter()
        .map(|v| format!("{}:{}: {}", v.path, v.line, v.rule))
        .collect()
}

#[test]
fn each_rule_fails_where_it_should() {
    let check = |path: &str, text: &str, expected: &[&str]| {
        assert_eq!(violations_of(path, text), expected, "{path}: {text:?}");
    };
    let good = "//! A module.\n\nfn f() {}\n";
    check("crates/rbolt-page/src/a.rs", good, &[]);
    check(
        "crates/rbolt-page/src/a.rs",
        "\n// A comment.\nfn f() {}\n",
        &["crates/rbolt-page/src/a.rs:2: header"],
    );
    check(
        "crates/rbolt-page/src/a.rs",
        "",
        &["crates/rbolt-page/src/a.rs:1: header"],
    );
    check(
        "crates/rbolt/src/db.rs",
        "//! Db.\nuse std::fs::File;\nlet f = File::open(p);\n",
        &[
            "crates/rbolt/src/db.rs:2: files",
            "crates/rbolt/src/db.rs:3: files",
        ],
    );
    // The storage layer may; a comment may; a longer identifier is another word.
    check(
        "crates/rbolt-storage/src/file.rs",
        "//! File.\nuse std::fs::File;\n",
        &[],
    );
    check(
        "crates/rbolt/src/db.rs",
        "//! Db.\n// std::fs is not used here.\nlet initial_mmap_size = 0;\nRawFile::open(p);\n",
        &[],
    );
    check(
        "crates/rbolt-cli/tests/it/x.rs",
        "//! T.\nstd::fs::write(p, b);\n",
        &[],
    );
    check(
        "crates/rbolt/src/db.rs",
        "//! Db.\nlet x = unsafe { f() };\n#![forbid(unsafe_code)]\n",
        &["crates/rbolt/src/db.rs:2: unsafe"],
    );
    check(
        "crates/rbolt/src/db.rs",
        "//! Db.\n#[allow(dead_code)]\n#[expect(dead_code)]\n#[expect(\n    dead_code,\n    reason = \"why\"\n)]\n#[allow(dead_code, reason = \"some builds\")]\n",
        &[
            "crates/rbolt/src/db.rs:2: lint-reason",
            "crates/rbolt/src/db.rs:3: lint-reason",
        ],
    );
    let long = format!("//! Long.\n{}", "fn f() {}\n".repeat(FILE_LINES_MAX));
    check(
        "crates/rbolt/src/db.rs",
        &long,
        &["crates/rbolt/src/db.rs:1001: length"],
    );
    check("crates/rbolt-btree/src/node.rs", &long, &[]);
}
