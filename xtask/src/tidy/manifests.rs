//! The `manifest` rule: every member crate's `Cargo.toml` takes its version, edition,
//! `rust-version` and license from the workspace, says what it is in a `description`, and
//! takes every dependency from the root's `[workspace.dependencies]` (`name.workspace = true`),
//! so one version of each dependency is chosen in one place. A crate's dependency on itself
//! (`name = { path = ".", features = [...] }`, for its tests' features) is the exception.

/// The `[package]` keys a member must take from the workspace.
const FROM_WORKSPACE: &[&str] = &["version", "edition", "rust-version", "license"];

/// What is wrong with the manifest `text`: (line, message), lines counted from 1.
pub(super) fn manifest_problems(text: &str) -> Vec<(usize, String)> {
    let mut problems = Vec::new();
    let mut section = String::new();
    let mut package_keys: Vec<String> = Vec::new();
    let mut package_line = 1;
    for (index, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.trim().to_owned();
            if section == "package" {
                package_line = index + 1;
            }
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        if section == "package" {
            package_keys.push(key.to_owned());
        } else if is_dependency_section(&section) && !from_workspace(key, value) {
            problems.push((
                index + 1,
                format!(
                    "the dependency `{key}` names its own version or path; declare it in the \
                     root Cargo.toml's [workspace.dependencies] and write \
                     `{key}.workspace = true` here (features may be added: \
                     `{key} = {{ workspace = true, features = [...] }}`)"
                ),
            ));
        }
    }
    if !package_keys.iter().any(|k| k == "description") {
        problems.push((
            package_line,
            "no `description`: say in one line what the crate is".to_owned(),
        ));
    }
    for key in FROM_WORKSPACE {
        if !package_keys
            .iter()
            .any(|k| k == &format!("{key}.workspace"))
        {
            problems.push((
                package_line,
                format!("`{key}` is not the workspace's: write `{key}.workspace = true`"),
            ));
        }
    }
    problems
}

/// Whether `section` lists dependencies (`dependencies`, `dev-dependencies`,
/// `build-dependencies`, or one of them for a target).
fn is_dependency_section(section: &str) -> bool {
    let last = section.rsplit('.').next().unwrap_or(section);
    matches!(
        last,
        "dependencies" | "dev-dependencies" | "build-dependencies"
    ) && !section.starts_with("workspace")
}

/// Whether the dependency line `key = value` takes the dependency from the workspace (or is
/// the crate's own path, `"."`).
fn from_workspace(key: &str, value: &str) -> bool {
    if key.ends_with(".workspace") {
        return value == "true";
    }
    let compact: String = value.chars().filter(|c| !c.is_whitespace()).collect();
    compact.starts_with('{')
        && (compact.contains("workspace=true") || compact.contains("path=\".\""))
}
