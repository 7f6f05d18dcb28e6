//! The tidy rules on small inputs: each can fail, and says where.

use super::scan::{blank_non_code, literal_offset};
use super::{FILE_LINES_MAX, FN_LINES_MAX, check_file};

/// The rules on small inputs: each can fail, and says where and how to fix it.
fn violations_of(path: &str, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    check_file(path, text, &mut out);
    out.iter()
        .map(|v| format!("{}:{}: {}", v.path, v.line, v.rule))
        .collect()
}

fn check(path: &str, text: &str, expected: &[&str]) {
    assert_eq!(violations_of(path, text), expected, "{path}: {text:?}");
}

#[test]
fn the_word_rules_fail_where_they_should() {
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
    // The storage layer may; a comment or a string may; a longer identifier is another word.
    check(
        "crates/rbolt-storage/src/file.rs",
        "//! File.\nuse std::fs::File;\n",
        &[],
    );
    check(
        "crates/rbolt/src/db.rs",
        "//! Db.\n// std::fs is not used here.\nlet initial_mmap_size = 0;\nRawFile::open(p);\n\
         let s = \"std::fs\";\n",
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
        "//! Db.\n#[allow(dead_code)]\n#[expect(dead_code)]\n#[expect(\n    dead_code,\n    \
         reason = \"why\"\n)]\n#[allow(dead_code, reason = \"some builds\")]\n",
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
    check("crates/rbolt-btree/tests/it/corrupt.rs", &long, &[]);
}

#[test]
fn the_format_offset_rule_fails_where_it_should() {
    let path = "crates/rbolt-btree/src/tree.rs";
    let at = |line: usize| format!("{path}:{line}: format-offset");
    check(
        path,
        "//! Tree.\nlet n = PAGE_HEADER_SIZE + 1;\nbuf[..8].fill(0);\nbuf[12..16].fill(0);\n\
         page[8] = 2;\nlet v = &value[rbolt_page::BUCKET_HEADER_SIZE..];\nx[16..=19].fill(0);\n",
        &[&at(2), &at(3), &at(4), &at(5), &at(6), &at(7)],
    );
    // Not offsets: reads of a single element, ranges of variables or of other literals, array
    // types and literals, comments, strings, a longer name, tests.
    check(
        path,
        "//! Tree.\nlet a = cuts[0] + pieces[8];\nlet b = &pieces[1..];\nlet c = &k[start..end];\n\
         let d = [0u8; 16];\nlet e = [8, 16];\nif page[8] == 2 {}\n// buf[..8] is the id\n\
         let s = \"buf[..8]\";\nlet f = &x[..3];\nconst MY_PAGE_HEADER_SIZE: usize = 1;\n\
         #[cfg(test)]\nmod tests {\n    fn t() { buf[..8].fill(0); }\n}\n",
        &[],
    );
    // The format's own crate, tests, and the listed exceptions may.
    let offsets = "//! X.\nbuf[..8].fill(PAGE_HEADER_SIZE as u8);\n";
    check("crates/rbolt-page/src/edit.rs", offsets, &[]);
    check("crates/rbolt-btree/tests/it/edits.rs", offsets, &[]);
    check("crates/rbolt-btree/src/node/tests.rs", offsets, &[]);
    check("crates/rbolt-storage/src/sim/mod.rs", offsets, &[]);
    assert_eq!(literal_offset("out[12..16]"), Some("[12..16]"));
    assert_eq!(literal_offset("f(x)[4..]"), Some("[4..]"));
    assert_eq!(literal_offset("x[1_6..]"), Some("[1_6..]"));
    assert_eq!(literal_offset("x[0..2]"), None);
}

#[test]
fn the_function_length_rule_fails_where_it_should() {
    let body = |lines: usize| "    let x = 1;\n".repeat(lines);
    // The signature and the braces count; blank lines, comments and a body-less declaration
    // do not.
    let fits = format!(
        "//! F.\nfn short(\n    a: [u8; 4],\n) {{\n{}\n\n    // why\n}}\ntrait T {{ fn g(); }}\n",
        body(FN_LINES_MAX - 4)
    );
    check("crates/rbolt/src/db.rs", &fits, &[]);
    let long = format!(
        "//! F.\nimpl A {{\n    pub(crate) fn long() -> [u8; 4] {{\n{}    }}\n}}\n",
        body(FN_LINES_MAX - 1)
    );
    check(
        "crates/rbolt/src/db.rs",
        &long,
        &["crates/rbolt/src/db.rs:3: fn-length"],
    );
    check("xtask/src/a.rs", &long, &["xtask/src/a.rs:3: fn-length"]);
    // Braces in strings and characters do not end a function early or late.
    let tricky = format!(
        "//! F.\nfn long() {{\n    let s = \"}}\";\n    let c = '{{';\n    let l: &'static str = s;\n{}}}\n",
        body(FN_LINES_MAX - 4)
    );
    check(
        "crates/rbolt/src/db.rs",
        &tricky,
        &["crates/rbolt/src/db.rs:2: fn-length"],
    );
    // Tests, listed functions and files outside the sources may be long.
    let test = format!("//! F.\n#[cfg(test)]\nmod tests {{\n{long}}}\n");
    check("crates/rbolt/src/db.rs", &test, &[]);
    check("crates/rbolt-btree/tests/it/edits.rs", &long, &[]);
    let listed = long.replace("fn long", "fn plan");
    check("crates/rbolt/src/vacuum/plan.rs", &listed, &[]);
}

#[test]
fn comments_and_literals_are_blanked_line_for_line() {
    // Each line as blanked, trailing spaces aside: the code stays where it was.
    let check = |text: &str, expected: &[&str]| {
        let blanked = blank_non_code(text);
        let lines: Vec<&str> = blanked.lines().map(str::trim_end).collect();
        assert_eq!(lines, expected, "{text:?}");
    };
    check("a // b\nc", &["a", "c"]);
    check("a /* b /* c */ d */ e", &["a                   e"]);
    check(
        r#"f("x // y", 'z', '\'', b'q', b"r")"#,
        &["f(        ,    ,     ,     ,     )"],
    );
    check(r##"r#"a " b"# c"##, &["           c"]);
    check("let r#type = 1;", &["let r#type = 1;"]);
    check("fn f<'a>(x: &'a str) {}", &["fn f<'a>(x: &'a str) {}"]);
    check("\"first\nsecond\" x", &["", "        x"]);
}

/// The `imports` rule on a small facade: the circles it reports, as `from -> to` pairs.
fn circles_of(files: &[(&str, &str)]) -> Vec<Vec<String>> {
    let files: Vec<(String, String)> = files
        .iter()
        .map(|(f, t)| ((*f).to_owned(), (*t).to_owned()))
        .collect();
    super::imports::circles(super::imports::FACADE_SRC, &files)
        .into_iter()
        .map(|c| {
            c.into_iter()
                .map(|(_, line, from, to)| format!("{from}:{line} -> {to}"))
                .collect()
        })
        .collect()
}

#[test]
fn the_imports_rule_finds_circles_through_every_kind_of_path() {
    let lib = "//! Root.\nmod a;\nmod b;\nmod c;\npub use b::Thing;\n";
    // Downward only: a -> b -> c.
    let downward = [
        ("lib.rs", lib),
        ("a.rs", "use crate::b::Thing;\n"),
        ("b.rs", "pub struct Thing(crate::c::Inner);\n"),
        ("c.rs", "pub struct Inner;\n"),
    ];
    assert!(circles_of(&downward).is_empty());
    // c reaches a back through a `use` group.
    let mut group = downward;
    group[3] = ("c.rs", "use crate::{a::f, b};\npub struct Inner;\n");
    let found = circles_of(&group);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains(&"c:1 -> a".to_owned()), "{found:?}");
    // ... through a name lib.rs re-exports (`crate::Thing` is b's).
    let mut reexport = downward;
    reexport[3] = ("c.rs", "\n\nfn f(_: &crate::Thing) {}\n");
    assert_eq!(circles_of(&reexport), [["b:1 -> c", "c:3 -> b"]]);
    // ... through `super::` from a submodule's file.
    let nested = [
        ("lib.rs", lib),
        ("a.rs", "use crate::b::x::Y;\n"),
        ("b/mod.rs", "mod x;\n"),
        ("b/x.rs", "pub struct Y(super::super::a::Z);\n"),
        ("c.rs", ""),
    ];
    assert_eq!(circles_of(&nested), [["a:1 -> b::x", "b::x:1 -> a"]]);
}

#[test]
fn the_imports_rule_ignores_comments_tests_and_the_modules_own_room() {
    let files = [
        ("lib.rs", "//! Root.\nmod a;\nmod b;\n"),
        ("a.rs", "use crate::b::f;\n"),
        // A doc comment, a string and a test module name `a`: none is an import.
        (
            "b.rs",
            "/// See [`crate::a`].\nfn f() { let _ = \"crate::a\"; }\n#[cfg(test)]\nmod tests {\n    use crate::a;\n}\n",
        ),
        // A submodule reading its parent is one room.
        ("a/inner.rs", "use super::g;\nuse crate::a::h;\n"),
    ];
    assert!(circles_of(&files).is_empty(), "{:?}", circles_of(&files));
}

#[test]
fn the_allocation_rule_fails_where_it_should() {
    let calls = "//! X.\nalloc.choose_strategy(true, false);\nfreelist.unallocate(txid, pgid);\n";
    check(
        "crates/rbolt/src/db.rs",
        calls,
        &[
            "crates/rbolt/src/db.rs:2: allocation",
            "crates/rbolt/src/db.rs:3: allocation",
        ],
    );
    // The commit and the vacuum may; other crates, tests and comments are not the rule's.
    check("crates/rbolt/src/engine/commit.rs", calls, &[]);
    check("crates/rbolt/src/vacuum/plan.rs", calls, &[]);
    check("crates/rbolt-freelist/src/allocator.rs", calls, &[]);
    check(
        "crates/rbolt/src/db.rs",
        "//! X.\n// end_spill is the commit's\n#[cfg(test)]\nmod tests {\n    fn t() { a.end_spill(); }\n}\n",
        &[],
    );
}

#[test]
fn the_manifest_rule_fails_where_it_should() {
    let good = "[package]\nname = \"a\"\ndescription = \"A.\"\nversion.workspace = true\n\
                edition.workspace = true\nrust-version.workspace = true\n\
                license.workspace = true\n\n[dependencies]\nrbolt-page.workspace = true\n\
                smallvec = { workspace = true, features = [\"union\"] }\n\n\
                [dev-dependencies]\na = { path = \".\", features = [\"sim\"] }\n";
    assert_eq!(super::manifests::manifest_problems(good), []);
    let bad = good
        .replace("description = \"A.\"\n", "")
        .replace("rust-version.workspace = true", "rust-version = \"1.80\"")
        .replace(
            "rbolt-page.workspace = true",
            "rbolt-page = { path = \"../rbolt-page\" }",
        )
        + "[target.'cfg(unix)'.dependencies]\nlibc = \"0.2\"\n";
    let lines: Vec<usize> = super::manifests::manifest_problems(&bad)
        .into_iter()
        .map(|(line, _)| line)
        .collect();
    // Two dependencies, then the package's missing description and local rust-version.
    assert_eq!(lines, [9, 15, 1, 1]);
}
