//! The `imports` rule: a library crate's modules import one another in one direction only.
//! Each file of its `src/` (the facade's `crates/rbolt/src/`, and every other crate's) is a node (a folder's `mod.rs` is the folder's module); a path
//! of its code that names another module — `crate::a::b`, a `use crate::{...}` group, a name
//! re-exported by `lib.rs` (`crate::Db` is `db`'s), `super::x` — is an edge to the longest
//! module that path starts with. A module's own submodules and ancestors are the same room
//! (a file reads its parent's items as `super::`), so those edges do not count. Any circle
//! left is reported, one edge of it per line, with where the import is.

use super::scan::{blank_non_code, is_ident, test_lines};
use std::collections::{BTreeMap, BTreeSet};

/// The facade's sources (where the `allocation` rule looks too).
pub(super) const FACADE_SRC: &str = "crates/rbolt/src/";

/// One import of one module by another: where it is.
#[derive(Clone, Debug)]
struct Edge {
    to: String,
    line: usize,
}

/// The module a file of the facade holds: `tx/commit.rs` is `tx::commit`, `tx/mod.rs` is
/// `tx`, `lib.rs` is the crate root (`""`).
fn module_of(file: &str) -> String {
    let stem = file.strip_suffix(".rs").unwrap_or(file);
    let stem = stem
        .strip_suffix("/mod")
        .or_else(|| (stem == "lib").then_some(""))
        .unwrap_or(stem);
    stem.replace('/', "::")
}

/// Reads the path that starts at `chars[at]`: segments joined by `::`, a `{...}` group
/// expanded into one path per member (nested groups too). Returns the paths and where the
/// path ends.
fn paths_at(chars: &[char], mut at: usize, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let mut segments = prefix.to_vec();
    loop {
        while chars.get(at).is_some_and(|c| c.is_whitespace()) {
            at += 1;
        }
        if chars.get(at) == Some(&'{') {
            at += 1;
            loop {
                while chars
                    .get(at)
                    .is_some_and(|c| c.is_whitespace() || *c == ',')
                {
                    at += 1;
                }
                match chars.get(at) {
                    None => return at,
                    Some('}') => return at + 1,
                    _ => {
                        let before = at;
                        at = paths_at(chars, at, &segments, out);
                        if at == before {
                            at += 1;
                        }
                    }
                }
            }
        }
        let start = at;
        while chars.get(at).is_some_and(|c| is_ident(*c)) {
            at += 1;
        }
        if at == start {
            break;
        }
        segments.push(chars[start..at].iter().collect());
        if chars.get(at) == Some(&':') && chars.get(at + 1) == Some(&':') {
            at += 2;
        } else {
            break;
        }
    }
    if segments.len() > prefix.len() {
        out.push(segments);
    }
    at
}

/// Every path of `code` that starts with `crate::` or `super::`, with its line, as absolute
/// segments (a `super::` path resolved from `module`).
fn crate_paths(module: &str, code: &[&str], tests: &[bool]) -> Vec<(Vec<String>, usize)> {
    let here: Vec<String> = module
        .split("::")
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    // `super` of `a::b` is `a`, whether the file is `a/b.rs` or `a/b/mod.rs`.
    let parent: Vec<String> = here[..here.len().saturating_sub(1)].to_vec();
    let mut found = Vec::new();
    for (index, line) in code.iter().enumerate() {
        if tests.get(index).copied().unwrap_or(false) {
            continue;
        }
        let chars: Vec<char> = line.chars().collect();
        let mut at = 0;
        while at < chars.len() {
            let starts_word = at == 0 || !is_ident(chars[at - 1]) && chars[at - 1] != ':';
            let rest: String = chars[at..chars.len().min(at + 7)].iter().collect();
            let base = if !starts_word {
                None
            } else if rest.starts_with("crate::") {
                Some((7, Vec::new()))
            } else if rest.starts_with("super::") {
                // `super::super::...` climbs once per `super`.
                let mut base = parent.clone();
                let mut skip = 7;
                while chars[at + skip..].starts_with(&['s', 'u', 'p', 'e', 'r', ':', ':']) {
                    base.pop();
                    skip += 7;
                }
                Some((skip, base))
            } else {
                None
            };
            let Some((skip, base)) = base else {
                at += 1;
                continue;
            };
            let mut paths = Vec::new();
            at = paths_at(&chars, at + skip, &base, &mut paths);
            found.extend(paths.into_iter().map(|p| (p, index + 1)));
        }
    }
    found
}

/// The names `lib.rs` re-exports, each with the module it comes from (`Db` → `db`).
fn reexports(lib_code: &[&str], modules: &BTreeSet<String>) -> BTreeMap<String, String> {
    let text = lib_code.join("\n");
    let mut names = BTreeMap::new();
    for (at, _) in text.match_indices("pub use ") {
        let chars: Vec<char> = text[at + 8..].chars().collect();
        let mut paths = Vec::new();
        paths_at(&chars, 0, &[], &mut paths);
        for path in paths {
            if path.len() >= 2 && modules.contains(&path[0]) {
                names.insert(path[path.len() - 1].clone(), path[0].clone());
            }
        }
    }
    names
}

/// The module a path names: the longest module it starts with, a re-exported name read as
/// its module's.
fn resolve(
    path: &[String],
    modules: &BTreeSet<String>,
    names: &BTreeMap<String, String>,
) -> Option<String> {
    let mut path = path.to_vec();
    if let Some(first) = path.first()
        && !modules.contains(first)
        && let Some(module) = names.get(first)
    {
        path.insert(0, module.clone());
    }
    (1..=path.len())
        .rev()
        .map(|n| path[..n].join("::"))
        .find(|candidate| modules.contains(candidate))
}

/// Whether `a` and `b` are one room: the same module, or one inside the other.
fn same_room(a: &str, b: &str) -> bool {
    a == b || a.starts_with(&format!("{b}::")) || b.starts_with(&format!("{a}::"))
}

/// The circles among one library crate's modules, given its source folder `src` (as
/// `crates/NAME/src/`) and its files (paths below it, and their texts): for each circle, its
/// edges as (file, line, from, to).
pub(super) fn circles(
    src: &str,
    files: &[(String, String)],
) -> Vec<Vec<(String, usize, String, String)>> {
    let modules: BTreeSet<String> = files.iter().map(|(f, _)| module_of(f)).collect();
    let blanked: Vec<(String, String)> = files
        .iter()
        .map(|(f, t)| (f.clone(), blank_non_code(t)))
        .collect();
    let lib = blanked.iter().find(|(f, _)| f == "lib.rs");
    let names = lib
        .map(|(_, t)| reexports(&t.lines().collect::<Vec<_>>(), &modules))
        .unwrap_or_default();
    let mut graph: BTreeMap<String, (String, Vec<Edge>)> = BTreeMap::new();
    for (file, text) in &blanked {
        let module = module_of(file);
        let code: Vec<&str> = text.lines().collect();
        let tests = test_lines(&format!("{src}{file}"), &code);
        let mut edges: Vec<Edge> = Vec::new();
        for (path, line) in crate_paths(&module, &code, &tests) {
            if let Some(to) = resolve(&path, &modules, &names)
                && !to.is_empty()
                && !module.is_empty()
                && !same_room(&module, &to)
                && !edges.iter().any(|e| e.to == to)
            {
                edges.push(Edge { to, line });
            }
        }
        graph.insert(module, (file.clone(), edges));
    }
    strongly_connected(&graph)
        .into_iter()
        .filter(|scc| scc.len() > 1)
        .map(|scc| {
            let mut out = Vec::new();
            for module in &scc {
                let (file, edges) = &graph[module];
                for edge in edges.iter().filter(|e| scc.contains(&e.to)) {
                    out.push((file.clone(), edge.line, module.clone(), edge.to.clone()));
                }
            }
            out
        })
        .collect()
}

/// The strongly connected components of `graph` (Tarjan's algorithm, iterated over the
/// modules in order so that a report is stable).
fn strongly_connected(graph: &BTreeMap<String, (String, Vec<Edge>)>) -> Vec<BTreeSet<String>> {
    struct State<'g> {
        graph: &'g BTreeMap<String, (String, Vec<Edge>)>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'g>(state: &mut State<'g>, node: &'g str) {
        let n = state.index.len();
        state.index.insert(node, n);
        state.low.insert(node, n);
        state.stack.push(node);
        state.on_stack.insert(node);
        let graph = state.graph;
        for edge in &graph[node].1 {
            let Some((to, _)) = graph.get_key_value(&edge.to) else {
                continue;
            };
            let to = to.as_str();
            if !state.index.contains_key(to) {
                visit(state, to);
                let low = state.low[node].min(state.low[to]);
                state.low.insert(node, low);
            } else if state.on_stack.contains(to) {
                let low = state.low[node].min(state.index[to]);
                state.low.insert(node, low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut scc = BTreeSet::new();
            while let Some(top) = state.stack.pop() {
                state.on_stack.remove(top);
                scc.insert(top.to_owned());
                if top == node {
                    break;
                }
            }
            state.out.push(scc);
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for node in graph.keys() {
        if !state.index.contains_key(node.as_str()) {
            visit(&mut state, node);
        }
    }
    state.out
}
