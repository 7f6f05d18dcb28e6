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
