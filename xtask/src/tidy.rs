//! The tidy test: the house rules of `CONTRIBUTING.md` ("House style") and the invariants of
//! `docs/ARCHITECTURE.md` that a reviewer would otherwise have to check by eye, checked as a
//! `#[test]` (`cargo test -p xtask`, and so `cargo test --workspace`) over every `.rs` file of
//! the repository (found from this crate's folder, `..`, skipping `target` and hidden folders).
//!
//! The rules, each named in a failure as `path:line: rule-name: what is wrong; how to fix it`:
//! - `header`: a file opens with a `//!` paragraph saying what it owns.
//! - `files`: `std::fs`, `File::open`, `File::create`, `flock`, `mmap` and `memmap2` appear only
//!   in the storage layer (`crates/rbolt-storage/src/`), or in a place on [`FILES_ALLOWED`],
//!   each entry with its reason: only storage touches database files, the mapping and locks.
//! - `unsafe`: `unsafe` only in the storage layer and the test allocator (or [`UNSAFE_ALLOWED`]).
//! - `lint-reason`: a lint exception is `#[expect(lint, reason = "...")]`; an `#[allow(...)]`
//!   or `#[expect(...)]` without a `reason` fails.
//! - `length`: a file of more than [`FILE_LINES_MAX`] lines needs an entry in [`LONG_FILES`]
//!   saying why it stays whole.
//! - `format-offset`: the format's byte layout has one home, `rbolt-page`. Outside it, the
//!   code of `crates/*/src/` and `harness/*/src/` names none of the format's record sizes
//!   ([`FORMAT_SIZES`]), slices nothing with literal offsets (`buf[..8]`, `buf[12..16]`: a
//!   bound that is an integer literal, a non-zero multiple of 4, as every field of the format
//!   starts or ends at one), and assigns no byte at a literal offset (`page[8] = ...`),
//!   except where [`FORMAT_OFFSETS_ALLOWED`] says why. Tests (`tests/`, `tests.rs`,
//!   `#[cfg(test)]` modules) craft pages byte by byte on purpose and are not checked.
//! - `fn-length`: a function of the code of `crates/*/src/`, `harness/*/src/` and
//!   `xtask/src/` (tests aside) holds at most [`FN_LINES_MAX`] lines from its `fn` to its
//!   closing brace, blank lines and comment lines not counted, unless [`LONG_FUNCTIONS`] says
//!   why not.
//!
//! - `imports`: the modules of every library crate (`crates/*/src/` and `harness/*/src/` with a
//!   `lib.rs`, a file a module) import one another in one direction only: no circle of
//!   imports, through `crate::` paths, `use` groups, names `lib.rs` re-exports or `super::`
//!   (see `tidy/imports.rs`). A module's submodules are its own room. The facade's rooms and
//!   their order are `docs/ARCHITECTURE.md`'s map.
//!
//! - `manifest`: every member crate's `Cargo.toml` takes version, edition, `rust-version` and
//!   license from the workspace, has a `description`, and takes every dependency from
//!   `[workspace.dependencies]` (see `tidy/manifests.rs`), except [`MANIFESTS_ALLOWED`].
//! - `missing-docs`: a published library crate's `lib.rs` has `#![warn(missing_docs)]`.
//! - `allocation`: page allocation is decided in one place, `rbolt_freelist::Allocator`. In
//!   the facade, the calls that reserve, cut, pick a strategy or reach the allocator
//!   ([`ALLOCATION_WORDS`]) appear only in the commit, the vacuum and the transaction that
//!   hands the allocator to them ([`ALLOCATION_CALLERS`]); the freelist's own allocation
//!   calls appear nowhere there.
//!
//! An exception that is no longer needed fails too (`every_exception_is_still_needed`), so
//! the lists only shrink as the code gets tidier. Comments and string literals are not code:
//! the word rules read each file with both blanked out.

mod imports;
mod manifests;
mod scan;
#[cfg(test)]
mod tests;

use scan::{blank_non_code, functions, has_word, is_code_line, literal_offset, test_lines};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The longest a source file may be without an entry in [`LONG_FILES`].
const FILE_LINES_MAX: usize = 1000;

/// The longest a function may be without an entry in [`LONG_FUNCTIONS`] or
/// [`FUNCTIONS_TO_SPLIT`], in lines that hold code: the house style's (`CONTRIBUTING.md`)
/// 70, TigerBeetle's limit, not counting the comments the style asks for.
const FN_LINES_MAX: usize = 70;

/// Where the storage layer lives: the only place the `files` and `unsafe` rules allow by
/// default.
const STORAGE_DIR: &str = "crates/rbolt-storage/src/";

/// Where the format lives: the only place the `format-offset` rule allows.
const FORMAT_DIR: &str = "crates/rbolt-page/";

/// The folders of the workspace's crates: what ships (`crates/`) and the test support and
/// suites (`harness/`). The code rules hold in both.
const CRATE_DIRS: &[&str] = &["crates/", "harness/"];

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
        "build tooling: reads reports and the sources, writes charts and summaries, never a \
         database",
    ),
    (
        "fuzz/",
        "fuzz targets write the inputs they are given into scratch files",
    ),
    (
        "harness/rbolt-fixtures/src/",
        "test support: reads the fixture files of the repository and writes copies for tests",
    ),
    (
        "harness/rbolt-reliability/src/",
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
        "harness/rbolt-testkit/src/alloc.rs",
        "the one test allocator: a GlobalAlloc impl is unsafe by definition",
    ),
    (
        "benches/compare/src/engines/lmdb.rs",
        "heed marks opening an LMDB environment and switching NO_SYNC unsafe",
    ),
];

/// Files longer than [`FILE_LINES_MAX`] lines, and why each stays whole.
const LONG_FILES: &[(&str, &str)] = &[
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

/// The record sizes of the format, which only `rbolt-page` computes offsets with. (The
/// lengths a reader reads, `META_PAGE_LEN` and `META_PAGE_READ_LEN`, are how much to ask the
/// storage for, not offsets, and may be named anywhere.)
const FORMAT_SIZES: &[&str] = &[
    "PAGE_HEADER_SIZE",
    "LEAF_ELEMENT_SIZE",
    "BRANCH_ELEMENT_SIZE",
    "BUCKET_HEADER_SIZE",
    "META_SIZE",
    "META_CHECKSUM_OFFSET",
    "PGID_SIZE",
    "BOOT_ID_SIZE",
];

/// Member manifests that still name their own dependency versions, and why. The list only
/// shrinks.
const MANIFESTS_ALLOWED: &[(&str, &str)] = &[];

/// Library crates whose modules still import one another in a circle, and why. The list only
/// shrinks: an entry whose crate has no circle left fails `every_exception_is_still_needed`.
const IMPORT_CIRCLES_ALLOWED: &[(&str, &str)] = &[];

/// The calls of the facade that decide allocation other than by allocating: the allocator's
/// (reservations, the cut and the mark, the strategy, the end of the spill, the tail cut off,
/// the room check), the ways to reach it, and the freelist's own allocation calls.
const ALLOCATION_WORDS: &[&str] = &[
    "choose_strategy",
    "end_spill",
    "trim_tail",
    "ensure_room_for_freelist",
    "allocator_mut",
    "allocation_plan",
    "allocate_pages",
    "unallocate",
    "unallocate_pages",
    "record_allocation",
];

/// Where the facade may name [`ALLOCATION_WORDS`]: the commit, the vacuum (its step and its
/// planner), and the write transaction that defines the ways to reach the allocator.
const ALLOCATION_CALLERS: &[&str] = &[
    "crates/rbolt/src/engine/commit.rs",
    "crates/rbolt/src/vacuum/",
    "crates/rbolt/src/tx/mod.rs",
];

/// Code outside `rbolt-page` that may name a format size or use a literal offset, and why.
const FORMAT_OFFSETS_ALLOWED: &[(&str, &str)] = &[
    (
        "crates/rbolt-cli/src/cmd/bench.rs",
        "not the format: `buf[..4]` is a benchmark key's first bytes",
    ),
    (
        "crates/rbolt-storage/src/sim/mod.rs",
        "not the format: the bytes of a simulated boot id",
    ),
    (
        "harness/rbolt-reliability/src/",
        "the hostile-file and fuzz suites craft and read damaged page images byte by byte on \
         purpose, as tests do",
    ),
];

/// Functions longer than [`FN_LINES_MAX`] lines of code, and why each is still whole. An
/// entry is a file and a function name; split the function and remove its line.
/// The functions over [`FN_LINES_MAX`] lines of code when the limit came down from 100 to the
/// house style's 70 (issue 48), each to be split: the ratchet. The list only shrinks — an
/// entry no longer over the limit fails `every_exception_is_still_needed` — and nothing is
/// added to it: a new long function is split, or goes to [`LONG_FUNCTIONS`] with its reason.
const FUNCTIONS_TO_SPLIT: &[(&str, &str)] = &[
    ("crates/rbolt-btree/src/rebalance.rs", "merge"),
    ("crates/rbolt-btree/src/rebalance.rs", "merge_children"),
    ("crates/rbolt-btree/src/split.rs", "plan"),
    ("crates/rbolt-btree/src/split.rs", "split_with"),
    ("crates/rbolt-cli/src/cmd/bench.rs", "bench"),
    ("crates/rbolt-cli/src/cmd/check.rs", "check"),
    ("crates/rbolt-cli/src/cmd/pages.rs", "print_page"),
    ("crates/rbolt-cli/src/cmd/read.rs", "stats"),
    ("crates/rbolt-page/src/error.rs", "fmt"),
    ("crates/rbolt-raft-node/src/node.rs", "run"),
    ("crates/rbolt-raft-node/src/server.rs", "write"),
    ("crates/rbolt/src/db.rs", "open_storage"),
    ("crates/rbolt/src/engine/commit.rs", "commit_inner"),
    ("crates/rbolt/src/tx/mod.rs", "move_bucket"),
    ("harness/rbolt-reliability/src/failpoints.rs", "return_mode"),
    ("harness/rbolt-reliability/src/fuzz.rs", "ops"),
    ("harness/rbolt-reliability/src/hostile/case.rs", "evaluate"),
    (
        "harness/rbolt-reliability/src/hostile/crafted.rs",
        "crafted_files",
    ),
    ("harness/rbolt-reliability/src/hostile/crafted.rs", "cycles"),
    ("harness/rbolt-reliability/src/hostile/fields.rs", "fields"),
    ("harness/rbolt-reliability/src/hostile/shapes.rs", "shapes"),
    ("harness/rbolt-reliability/src/hostile/suite.rs", "make"),
    ("harness/rbolt-reliability/src/hostile/suite.rs", "plan"),
    (
        "harness/rbolt-reliability/src/hostile/suite.rs",
        "spawn_batch",
    ),
    (
        "harness/rbolt-reliability/src/interleave.rs",
        "run_schedule",
    ),
    ("harness/rbolt-reliability/src/kill.rs", "run"),
    ("harness/rbolt-reliability/src/power.rs", "run_seed"),
    ("harness/rbolt-reliability/src/scan.rs", "scan_buckets"),
    ("harness/rbolt-reliability/src/vacuum.rs", "run_seed"),
    ("harness/rbolt-reliability/src/workload.rs", "normal_op"),
    ("xtask/src/bench/compare.rs", "run"),
    ("xtask/src/bench/compare.rs", "run_engine"),
];

const LONG_FUNCTIONS: &[(&str, &str, &str)] = &[
    (
        "crates/rbolt/src/walk/page_walk.rs",
        "enter",
        "the walker's one step: a page's checks and what it queues, by page kind, kept in one \
         place so every walk sees the same rules in the same order",
    ),
    (
        "crates/rbolt/src/vacuum/plan.rs",
        "plan",
        "the step's plan in order: merges, then moves, each fitted by a binary search on the \
         allocator's planning face, then the freelist page's place; not split yet",
    ),
    (
        "crates/rbolt/src/db/open.rs",
        "read_metas",
        "meta 0, then meta 1 by probing and scanning, each with its own error to keep; not \
         split yet",
    ),
    (
        "xtask/src/bench/report/mod.rs",
        "comparison",
        "one markdown table written cell by cell, rows and notes in print order; not split yet",
    ),
    (
        "xtask/src/bench/chart.rs",
        "draw",
        "one chart drawn through plotters' builder chain, step by step; not split yet",
    ),
    (
        "harness/rbolt-reliability/src/io_errors.rs",
        "workload_run",
        "the I/O-error suite's workload, one step kind a match arm; not split yet",
    ),
    (
        "harness/rbolt-reliability/src/kill.rs",
        "kill_children",
        "spawns, times and reaps the children of one kill round; not split yet",
    ),
    (
        "crates/rbolt-raft-node/src/observe.rs",
        "new",
        "registers every metric of the node, one statement each",
    ),
    (
        "crates/rbolt-raft-node/src/main.rs",
        "run",
        "one match arm a subcommand of the command line",
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
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
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

/// One broken rule.
struct Violation {
    path: String,
    line: usize,
    rule: &'static str,
    message: String,
}

/// What the checks of one file report to.
struct Report<'a> {
    path: &'a str,
    out: &'a mut Vec<Violation>,
}

impl Report<'_> {
    fn push(&mut self, line: usize, rule: &'static str, message: String) {
        self.out.push(Violation {
            path: self.path.to_owned(),
            line,
            rule,
            message,
        });
    }
}

/// Checks one file's text, named `path`, against every rule.
fn check_file(path: &str, text: &str, out: &mut Vec<Violation>) {
    let mut report = Report { path, out };
    let lines: Vec<&str> = text.lines().collect();
    let blanked = blank_non_code(text);
    let code: Vec<&str> = blanked.lines().collect();
    check_header(&lines, &mut report);
    check_words(path, &code, &mut report);
    check_lint_reasons(&lines, &mut report);
    if lines.len() > FILE_LINES_MAX && !allowed(LONG_FILES, path) {
        report.push(
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
    let tests = test_lines(path, &code);
    if in_crate_sources(path) && !path.starts_with(FORMAT_DIR) {
        check_format_offsets(path, &code, &tests, &mut report);
    }
    if in_crate_sources(path) || path.starts_with("xtask/src/") {
        check_function_lengths(path, &lines, &code, &tests, &mut report);
    }
    if path.starts_with(imports::FACADE_SRC) {
        check_allocation(path, &code, &tests, &mut report);
    }
}

/// The `allocation` rule.
fn check_allocation(path: &str, code: &[&str], tests: &[bool], report: &mut Report<'_>) {
    if ALLOCATION_CALLERS
        .iter()
        .any(|caller| matches(caller, path))
    {
        return;
    }
    for (index, code) in code.iter().enumerate() {
        if tests.get(index).copied().unwrap_or(false) {
            continue;
        }
        if let Some(word) = ALLOCATION_WORDS.iter().find(|w| has_word(code, w)) {
            report.push(
                index + 1,
                "allocation",
                format!(
                    "`{word}` outside the commit and the vacuum; where pages go is                      `rbolt_freelist::Allocator`'s to decide: ask it there (a new kind of                      commit is a new input of `choose_strategy`), or add the path to                      ALLOCATION_CALLERS in {} with the reason",
                    file!()
                ),
            );
        }
    }
}

/// Whether `path` is in the sources of a crate of [`CRATE_DIRS`] (`crates/NAME/src/...`,
/// `harness/NAME/src/...`).
fn in_crate_sources(path: &str) -> bool {
    CRATE_DIRS
        .iter()
        .find_map(|dir| path.strip_prefix(dir))
        .and_then(|rest| rest.split_once('/'))
        .is_some_and(|(_, rest)| rest.starts_with("src/"))
}

fn check_header(lines: &[&str], report: &mut Report<'_>) {
    let first = lines.iter().position(|line| !line.trim().is_empty());
    if first.is_none_or(|at| !lines[at].trim_start().starts_with("//!")) {
        report.push(
            first.map_or(1, |at| at + 1),
            "header",
            "the file does not open with a `//!` paragraph; add one saying what the file \
             owns (and, for a crate root, what it must not do)"
                .to_owned(),
        );
    }
}

/// The `files` and `unsafe` rules.
fn check_words(path: &str, code: &[&str], report: &mut Report<'_>) {
    let in_storage = path.starts_with(STORAGE_DIR);
    let files_ok = in_storage || allowed(FILES_ALLOWED, path);
    let unsafe_ok = in_storage || allowed(UNSAFE_ALLOWED, path);
    for (index, code) in code.iter().enumerate() {
        if !files_ok && let Some(word) = FILE_WORDS.iter().find(|w| has_word(code, w)) {
            report.push(
                index + 1,
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
            report.push(
                index + 1,
                "unsafe",
                format!(
                    "`unsafe` outside `{STORAGE_DIR}` and the test allocator; move it into \
                     the storage layer behind a safe API, or add the path to UNSAFE_ALLOWED \
                     in {} with the reason",
                    file!()
                ),
            );
        }
    }
}

fn check_lint_reasons(lines: &[&str], report: &mut Report<'_>) {
    for (index, line) in lines.iter().enumerate() {
        let trimmed = line.split("//").next().unwrap_or_default().trim_start();
        let attribute = ["#[allow(", "#![allow(", "#[expect(", "#![expect("]
            .iter()
            .find(|start| trimmed.starts_with(*start));
        let Some(start) = attribute else {
            continue;
        };
        // The attribute's text, which may run over several lines, up to its `]`.
        let mut text = String::new();
        for continued in lines[index..].iter().take(12) {
            text.push_str(continued);
            if continued.trim_end().ends_with(']') {
                break;
            }
        }
        if !text.contains("reason") {
            report.push(
                index + 1,
                "lint-reason",
                format!(
                    "`{start}..)]` without a reason; write `#[expect(lint, reason = \"why\")]` \
                     (an `allow` only where the lint fires in some builds and not others, and \
                     then with a reason too)"
                ),
            );
        }
    }
}

fn check_format_offsets(path: &str, code: &[&str], tests: &[bool], report: &mut Report<'_>) {
    if allowed(FORMAT_OFFSETS_ALLOWED, path) {
        return;
    }
    for (index, found) in format_offsets(code, tests) {
        report.push(
            index + 1,
            "format-offset",
            format!(
                "{found} outside rbolt-page; ask a page view, `PageMut` or a size function of \
                 rbolt-page (add one there if none says it), or add this path to \
                 FORMAT_OFFSETS_ALLOWED in {} with the reason",
                file!()
            ),
        );
    }
}

/// The lines of `code` outside tests that name a format size or hold a literal offset, with
/// what they hold.
fn format_offsets(code: &[&str], tests: &[bool]) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (index, line) in code.iter().enumerate() {
        if tests[index] {
            continue;
        }
        let hit = FORMAT_SIZES
            .iter()
            .find(|size| has_word(line, size))
            .map(|size| format!("`{size}`"))
            .or_else(|| literal_offset(line).map(|text| format!("the literal offset `{text}`")));
        if let Some(hit) = hit {
            found.push((index, hit));
        }
    }
    found
}

fn check_function_lengths(
    path: &str,
    lines: &[&str],
    code: &[&str],
    tests: &[bool],
    report: &mut Report<'_>,
) {
    for function in functions(code) {
        if tests[function.first] {
            continue;
        }
        let length = lines[function.first..=function.last]
            .iter()
            .filter(|line| is_code_line(line))
            .count();
        let listed = LONG_FUNCTIONS
            .iter()
            .any(|&(file, name, _)| file == path && name == function.name)
            || FUNCTIONS_TO_SPLIT
                .iter()
                .any(|&(file, name)| file == path && name == function.name);
        if length > FN_LINES_MAX && !listed {
            report.push(
                function.first + 1,
                "fn-length",
                format!(
                    "`{}` holds {length} lines of code, more than {FN_LINES_MAX}; split it \
                     (its phase comments are the names of the functions it is missing), or \
                     add it to LONG_FUNCTIONS in {} with why it stays whole",
                    function.name,
                    file!()
                ),
            );
        }
    }
}

fn report(violations: &[Violation]) -> String {
    let mut text = String::new();
    for v in violations {
        let _ = writeln!(text, "{}:{}: {}: {}", v.path, v.line, v.rule, v.message);
    }
    text
}

/// Every file of the repository with its text.
fn repository() -> Vec<(String, String)> {
    let root = repo_root();
    let files = rust_files(&root);
    assert!(
        files.iter().any(|f| f == "crates/rbolt/src/lib.rs"),
        "the walk did not find the facade; is {} the repository?",
        root.display()
    );
    read_all(&root, files)
}

/// Each of `paths` (relative to `root`) with its text.
fn read_all(root: &Path, paths: Vec<String>) -> Vec<(String, String)> {
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(root.join(&path))
                .unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
            (path, text)
        })
        .collect()
}

/// The source folders of the library crates (`crates/NAME/src/` and `harness/NAME/src/` with
/// a `lib.rs`).
fn library_sources(files: &[(String, String)]) -> Vec<String> {
    let mut sources: Vec<String> = files
        .iter()
        .filter_map(|(path, _)| path.strip_suffix("lib.rs"))
        .filter(|src| {
            let parts: Vec<&str> = src.split('/').collect();
            matches!(parts.as_slice(), ["crates" | "harness", _, "src", ""])
        })
        .map(String::from)
        .collect();
    sources.sort();
    sources
}

/// The `imports` rule over the files of the repository: a violation for each edge of each
/// circle among the modules of each library crate.
fn check_imports(files: &[(String, String)], out: &mut Vec<Violation>) {
    for src in library_sources(files) {
        if allowed(IMPORT_CIRCLES_ALLOWED, &src) {
            continue;
        }
        for circle in imports::circles(&src, &crate_files(files, &src)) {
            report_circle(&src, &circle, out);
        }
    }
}

/// The files below `src` (paths relative to it) with their texts.
fn crate_files(files: &[(String, String)], src: &str) -> Vec<(String, String)> {
    files
        .iter()
        .filter_map(|(path, text)| Some((path.strip_prefix(src)?.to_owned(), text.clone())))
        .collect()
}

/// One violation for each edge of `circle`, among the modules of the crate at `src`.
fn report_circle(src: &str, circle: &[(String, usize, String, String)], out: &mut Vec<Violation>) {
    let names: std::collections::BTreeSet<&str> =
        circle.iter().map(|(_, _, from, _)| from.as_str()).collect();
    let names: Vec<&str> = names.into_iter().collect();
    for (file, line, from, to) in circle {
        out.push(Violation {
            path: format!("{src}{file}"),
            line: *line,
            rule: "imports",
            message: format!(
                "`{from}` imports `{to}`, and `{to}` reaches `{from}` back (the circle: {}); \
                 move what the lower module needs below it, or pass it in",
                names.join(", ")
            ),
        });
    }
}

/// The manifests of the workspace's member crates (`crates/*/`, `harness/*/`, `xtask/`), with
/// their texts.
fn member_manifests() -> Vec<(String, String)> {
    let root = repo_root();
    let mut found = vec!["xtask/Cargo.toml".to_owned()];
    for folder in ["crates", "harness"] {
        let Ok(entries) = std::fs::read_dir(root.join(folder)) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = format!(
                "{folder}/{}/Cargo.toml",
                entry.file_name().to_string_lossy()
            );
            if root.join(&path).is_file() {
                found.push(path);
            }
        }
    }
    found.sort();
    read_all(&root, found)
}

/// The `manifest` rule over the member crates' manifests.
fn check_manifests(manifests: &[(String, String)], out: &mut Vec<Violation>) {
    for (path, text) in manifests {
        if allowed(MANIFESTS_ALLOWED, path) {
            continue;
        }
        for (line, message) in manifests::manifest_problems(text) {
            out.push(Violation {
                path: path.clone(),
                line,
                rule: "manifest",
                message,
            });
        }
    }
}

/// The `missing-docs` rule: a published library crate (no `publish = false`) warns on a public
/// item without documentation, which clippy's `-D warnings` makes an error.
fn check_missing_docs(
    manifests: &[(String, String)],
    files: &[(String, String)],
    out: &mut Vec<Violation>,
) {
    for (manifest, text) in manifests {
        let unpublished = text
            .lines()
            .any(|line| line.replace(' ', "") == "publish=false");
        let lib = manifest.replace("Cargo.toml", "src/lib.rs");
        let Some((_, lib_text)) = files.iter().find(|(path, _)| *path == lib) else {
            continue;
        };
        let warns = ["#![warn(missing_docs)]", "#![deny(missing_docs)]"]
            .iter()
            .any(|attribute| lib_text.lines().any(|line| line.trim() == *attribute));
        if !unpublished && !warns {
            out.push(Violation {
                path: lib,
                line: 1,
                rule: "missing-docs",
                message: "a published crate documents every public item: add \
                          `#![warn(missing_docs)]` after the crate's `//!` paragraph"
                    .to_owned(),
            });
        }
    }
}

#[test]
fn the_tree_is_tidy() {
    let mut violations = Vec::new();
    let files = repository();
    for (path, text) in &files {
        check_file(path, text, &mut violations);
    }
    check_imports(&files, &mut violations);
    let manifests = member_manifests();
    check_manifests(&manifests, &mut violations);
    check_missing_docs(&manifests, &files, &mut violations);
    assert!(
        violations.is_empty(),
        "{} house rule(s) broken (see {}):\n{}",
        violations.len(),
        file!(),
        report(&violations)
    );
}

#[test]
fn every_exception_is_still_needed() {
    // A stale entry would silently allow whatever later lands at that path; one that no
    // longer breaks its rule would let the code grow back.
    let files = repository();
    let lists = [
        FILES_ALLOWED,
        UNSAFE_ALLOWED,
        LONG_FILES,
        FORMAT_OFFSETS_ALLOWED,
        IMPORT_CIRCLES_ALLOWED,
    ];
    for (pattern, reason) in lists.into_iter().flatten() {
        assert!(!reason.is_empty(), "{pattern} has no reason");
        if pattern.starts_with("*/") || pattern.starts_with("benches/compare/") {
            continue;
        }
        assert!(
            files.iter().any(|(f, _)| matches(pattern, f)),
            "the exception {pattern} matches no file; remove it"
        );
    }
    manifest_exceptions_are_needed();
    format_offset_exceptions_are_needed(&files);
    import_circle_exceptions_are_needed(&files);
    for (path, _) in LONG_FILES {
        let (_, text) = files.iter().find(|(f, _)| f == path).expect("found above");
        assert!(
            text.lines().count() > FILE_LINES_MAX,
            "{path} is no longer than {FILE_LINES_MAX} lines; remove it from LONG_FILES"
        );
    }
    long_function_exceptions_are_needed(&files);
}

/// Each manifest of [`MANIFESTS_ALLOWED`] still breaks the manifest rule.
#[cfg(test)]
fn manifest_exceptions_are_needed() {
    let manifests = member_manifests();
    for (path, _) in MANIFESTS_ALLOWED {
        let (_, text) = manifests
            .iter()
            .find(|(f, _)| f == path)
            .unwrap_or_else(|| panic!("the exception {path} matches no manifest; remove it"));
        assert!(
            !manifests::manifest_problems(text).is_empty(),
            "{path} breaks the manifest rule no more; remove it from MANIFESTS_ALLOWED"
        );
    }
}

/// Each place of [`FORMAT_OFFSETS_ALLOWED`] still names a format size or a literal offset.
#[cfg(test)]
fn format_offset_exceptions_are_needed(files: &[(String, String)]) {
    for (pattern, _) in FORMAT_OFFSETS_ALLOWED {
        let needed = files.iter().any(|(path, text)| {
            let blanked = blank_non_code(text);
            let code: Vec<&str> = blanked.lines().collect();
            matches(pattern, path)
                && in_crate_sources(path)
                && !format_offsets(&code, &test_lines(path, &code)).is_empty()
        });
        assert!(
            needed,
            "nothing at {pattern} names a format size or a literal offset any more; remove it \
             from FORMAT_OFFSETS_ALLOWED"
        );
    }
}

/// Each crate of [`IMPORT_CIRCLES_ALLOWED`] still has a circle.
#[cfg(test)]
fn import_circle_exceptions_are_needed(files: &[(String, String)]) {
    for (src, _) in IMPORT_CIRCLES_ALLOWED {
        assert!(
            !imports::circles(src, &crate_files(files, src)).is_empty(),
            "the modules of {src} import one another in no circle any more; remove it from \
             IMPORT_CIRCLES_ALLOWED"
        );
    }
}

/// Each function of [`LONG_FUNCTIONS`] and [`FUNCTIONS_TO_SPLIT`] is still over the limit.
#[cfg(test)]
fn long_function_exceptions_are_needed(files: &[(String, String)]) {
    let listed = LONG_FUNCTIONS
        .iter()
        .map(|&(path, name, reason)| (path, name, reason))
        .chain(
            FUNCTIONS_TO_SPLIT
                .iter()
                .map(|&(path, name)| (path, name, "to split")),
        );
    for (path, name, reason) in listed {
        assert!(!reason.is_empty(), "{path} {name} has no reason");
        let (_, text) = files
            .iter()
            .find(|(f, _)| f == path)
            .unwrap_or_else(|| panic!("LONG_FUNCTIONS names {path}, which does not exist"));
        let lines: Vec<&str> = text.lines().collect();
        let blanked = blank_non_code(text);
        let code: Vec<&str> = blanked.lines().collect();
        let longest = functions(&code)
            .iter()
            .filter(|f| f.name == *name)
            .map(|f| {
                lines[f.first..=f.last]
                    .iter()
                    .filter(|l| is_code_line(l))
                    .count()
            })
            .max();
        assert!(
            longest.is_some_and(|length| length > FN_LINES_MAX),
            "{path} `{name}` is no longer than {FN_LINES_MAX} lines of code ({longest:?}); \
             remove it from LONG_FUNCTIONS or FUNCTIONS_TO_SPLIT"
        );
    }
}
