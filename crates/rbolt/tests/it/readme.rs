//! The workspace README's quick start is the crate README's, which runs as a doctest
//! (`ReadmeDoctests` in lib.rs): this keeps the one not packaged with the crate true too.

/// The first ```rust block of a Markdown text.
fn first_rust_block(markdown: &str) -> &str {
    let start = markdown.find("```rust\n").expect("a ```rust block") + "```rust\n".len();
    let len = markdown[start..].find("```").expect("the block's end");
    &markdown[start..start + len]
}

#[test]
fn the_workspace_readme_shows_the_crate_readmes_quick_start() {
    let workspace = include_str!("../../../../README.md");
    let crate_readme = include_str!("../../README.md");
    let quick_start = first_rust_block(crate_readme);
    assert!(quick_start.contains("fn main()"), "{quick_start}");
    assert_eq!(
        first_rust_block(workspace),
        quick_start,
        "README.md's example differs from crates/rbolt/README.md's, which is the tested one"
    );
}

/// Issue 49, item 2: the crate README's "Debug builds" section names, for the `dev` profile,
/// rbolt and every rbolt crate it depends on, and nothing else.
#[test]
fn the_debug_build_advice_names_every_crate_rbolt_runs_on() {
    let readme = include_str!("../../README.md");
    let manifest = include_str!("../../Cargo.toml");
    let named: std::collections::BTreeSet<&str> = readme
        .lines()
        .filter_map(|line| {
            line.strip_prefix("[profile.dev.package.")?
                .strip_suffix(']')
        })
        .collect();
    let dependencies = manifest
        .split("[dependencies]")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .expect("a [dependencies] table");
    let mut expected: std::collections::BTreeSet<&str> = dependencies
        .lines()
        .filter_map(|line| line.split(['.', ' ', '=']).next())
        .filter(|name| name.starts_with("rbolt-"))
        .collect();
    expected.insert("rbolt");
    assert_eq!(named, expected);
}
