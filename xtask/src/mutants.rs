//! `cargo xtask mutants`: mutation testing of the lower crates (rbolt-page, rbolt-freelist,
//! rbolt-btree, rbolt-storage) with cargo-mutants, each mutant tested by its own crate's
//! tests only. A missed mutant fails the run unless `xtask/mutants-equivalent.txt` lists it
//! with the reason no test can tell it from the original. Not part of CI: run it before a
//! landing that touches those crates (`CONTRIBUTING.md`).

use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The crates mutated: the layers below the facade (`crates/<name>/`).
const LOWER_CRATES: &[&str] = &[
    "rbolt-page",
    "rbolt-freelist",
    "rbolt-btree",
    "rbolt-storage",
];

/// The list of missed mutants that are equivalent, from the repository root.
const EQUIVALENTS_PATH: &str = "xtask/mutants-equivalent.txt";

/// cargo-mutants' exit codes that still mean the run finished (0: every mutant caught,
/// 2: some missed, 3: some timed out); the others are a usage error, a failing baseline or
/// a crash, and the outcome files would not describe the tree.
const EXIT_CODES_FINISHED: &[i32] = &[0, 2, 3];

/// `cargo xtask mutants`, as typed.
#[derive(Debug, clap::Args)]
pub struct MutantsArgs {
    /// Mutate only this crate (repeatable). Default: rbolt-page, rbolt-freelist, rbolt-btree
    /// and rbolt-storage.
    #[arg(long = "crate", value_name = "NAME")]
    crates: Vec<String>,
    /// Mutate only this file, a path from the repository root such as
    /// `crates/rbolt-freelist/src/core.rs` (repeatable); its crate is implied.
    #[arg(long, value_name = "PATH")]
    file: Vec<String>,
    /// Test only the mutants whose name (as `--list` shows it) matches this regular
    /// expression (repeatable), such as a function's name: `--re 'fn release_range'`.
    #[arg(long, value_name = "REGEX")]
    re: Vec<String>,
    /// Seconds one mutant's tests may take before it counts as a timeout (default:
    /// cargo-mutants', a multiple of the unmutated tests' time).
    #[arg(long, value_name = "SECS")]
    timeout: Option<f64>,
    /// Mutants built and tested at once, each in its own copy of the tree.
    #[arg(short = 'j', long, value_name = "N", default_value_t = 1)]
    jobs: usize,
    /// List the mutants that would be tested, test none.
    #[arg(long)]
    list: bool,
}

/// Runs the mutation tests and checks every miss against the list of equivalents.
pub fn mutants(args: &MutantsArgs) -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let root = root.canonicalize().context("finding the repository root")?;
    let plan = plan(&args.crates, &args.file)?;
    // Read first: a list that does not parse fails now, not after an hour of mutants.
    let text = std::fs::read_to_string(root.join(EQUIVALENTS_PATH))
        .with_context(|| format!("reading {EQUIVALENTS_PATH}"))?;
    let equivalents = parse_equivalents(&text)?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out_root = out_dir(&root);
    let mut outcomes = Outcomes::default();
    for (krate, files) in &plan {
        let out = out_root.join(krate);
        std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
        let mut command = cargo_mutants(&cargo, &root, krate, files, &out, args);
        // cargo hashes a workspace member's path relative to the workspace root, so the
        // copies of the tree that cargo-mutants builds in have the tree's package ids: copies
        // sharing one target folder overwrite each other's test binaries, and a build of the
        // tree in that folder meanwhile would be tested in a mutant's place. One job gets a
        // target folder of its own, warm from run to run; several build each in its copy.
        if args.jobs == 1 {
            command.env("CARGO_TARGET_DIR", out_root.join("target"));
        } else {
            command.env_remove("CARGO_TARGET_DIR");
        }
        let status = command
            .status()
            .context("running cargo mutants (install it: cargo install cargo-mutants --locked)")?;
        if args.list {
            if !status.success() {
                bail!("cargo mutants --list for {krate} failed: {status}");
            }
            continue;
        }
        if !status
            .code()
            .is_some_and(|code| EXIT_CODES_FINISHED.contains(&code))
        {
            bail!(
                "cargo mutants for {krate} did not finish ({status}): a failing baseline, a \
                 usage error or a crash; see {}",
                out.join("mutants.out").display()
            );
        }
        outcomes.read(&out.join("mutants.out"))?;
    }
    if args.list {
        return Ok(());
    }
    let verdict = judge(&outcomes, &equivalents, args.re.is_empty());
    eprintln!("\n{}", summary(&outcomes, &verdict));
    if !verdict.unlisted.is_empty() || !verdict.stale.is_empty() {
        bail!("{}", failure(&verdict));
    }
    Ok(())
}

/// The crates to run, each with the files to narrow it to (empty: all of the crate).
fn plan(crates: &[String], files: &[String]) -> Result<BTreeMap<String, Vec<String>>> {
    for krate in crates {
        if !LOWER_CRATES.contains(&krate.as_str()) {
            bail!("--crate {krate}: not one of {}", LOWER_CRATES.join(", "));
        }
    }
    let mut plan: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in files {
        let krate = LOWER_CRATES
            .iter()
            .find(|krate| file.starts_with(&format!("crates/{krate}/")))
            .with_context(|| {
                format!(
                    "--file {file}: not in a lower crate (a path such as \
                     crates/rbolt-freelist/src/core.rs)"
                )
            })?;
        if !crates.is_empty() && !crates.iter().any(|c| c == krate) {
            bail!("--file {file} is in {krate}, which --crate leaves out");
        }
        plan.entry((*krate).to_owned())
            .or_default()
            .push(file.clone());
    }
    if files.is_empty() {
        let chosen: Vec<&str> = if crates.is_empty() {
            LOWER_CRATES.to_vec()
        } else {
            crates.iter().map(String::as_str).collect()
        };
        for krate in chosen {
            plan.insert(krate.to_owned(), Vec::new());
        }
    } else {
        // A crate named without a file of its own is run whole.
        for krate in crates {
            plan.entry(krate.clone()).or_default();
        }
    }
    Ok(plan)
}

/// Where cargo-mutants writes its outcomes (`<crate>/mutants.out/`) and, with one job, builds
/// (`target/`): under the target folder (`CARGO_TARGET_DIR`, or `target/` of the
/// repository), which git ignores and the tidy test skips.
fn out_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("mutants")
}

/// The cargo-mutants command for one crate: its mutants, tested with its tests only.
fn cargo_mutants(
    cargo: &str,
    root: &Path,
    krate: &str,
    files: &[String],
    out: &Path,
    args: &MutantsArgs,
) -> Command {
    let mut command = Command::new(cargo);
    command
        .arg("mutants")
        .arg("--dir")
        .arg(root)
        .args(["--package", krate, "--test-package", krate])
        .arg("--output")
        .arg(out)
        .args(["--jobs", &args.jobs.to_string()])
        .args(["--jobserver-tasks", &args.jobs.to_string()]);
    for file in files {
        command.args(["--file", file]);
    }
    for re in &args.re {
        command.args(["--re", re]);
    }
    if let Some(timeout) = args.timeout {
        command.args(["--timeout", &timeout.to_string()]);
    }
    if args.list {
        command.arg("--list");
    }
    command
}

/// What cargo-mutants found, by outcome: `path:line:col: description` as it writes them.
#[derive(Debug, Default)]
struct Outcomes {
    caught: Vec<String>,
    missed: Vec<String>,
    timeout: Vec<String>,
    unviable: Vec<String>,
}

impl Outcomes {
    /// Adds the outcome files of one run (`caught.txt`, `missed.txt`, ...).
    fn read(&mut self, dir: &Path) -> Result<()> {
        for (name, list) in [
            ("caught.txt", &mut self.caught),
            ("missed.txt", &mut self.missed),
            ("timeout.txt", &mut self.timeout),
            ("unviable.txt", &mut self.unviable),
        ] {
            let path = dir.join(name);
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            list.extend(
                text.lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(str::to_owned),
            );
        }
        Ok(())
    }
}

/// A mutant's name split: its file, its position (`line:col`) and what it changes.
#[derive(Clone, Debug, PartialEq, Eq)]
struct MutantName {
    file: String,
    position: String,
    description: String,
}

impl MutantName {
    /// Splits `path:line:col: description`.
    fn parse(name: &str) -> Option<MutantName> {
        let (file, rest) = name.split_once(':')?;
        let (line, rest) = rest.split_once(':')?;
        let (col, description) = rest.split_once(": ")?;
        let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        (numeric(line) && numeric(col)).then(|| MutantName {
            file: file.to_owned(),
            position: format!("{line}:{col}"),
            description: description.to_owned(),
        })
    }

    fn whole(&self) -> String {
        format!("{}:{}: {}", self.file, self.position, self.description)
    }
}

/// One entry of the list of equivalents: a mutant and why no test can tell it apart.
#[derive(Debug)]
struct Equivalent {
    name: MutantName,
    reason: String,
}

/// Parses the list: a mutant's name as cargo-mutants writes it, on a line of its own, then
/// its reason on the indented lines below. `#` lines are comments.
fn parse_equivalents(text: &str) -> Result<Vec<Equivalent>> {
    let mut entries: Vec<Equivalent> = Vec::new();
    for (at, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with(char::is_whitespace) {
            let entry = entries.last_mut().with_context(|| {
                format!("{EQUIVALENTS_PATH}:{}: a reason before any mutant", at + 1)
            })?;
            if !entry.reason.is_empty() {
                entry.reason.push(' ');
            }
            entry.reason.push_str(line.trim());
            continue;
        }
        let name = MutantName::parse(line).with_context(|| {
            format!(
                "{EQUIVALENTS_PATH}:{}: not `path:line:col: description`",
                at + 1
            )
        })?;
        entries.push(Equivalent {
            name,
            reason: String::new(),
        });
    }
    if let Some(entry) = entries.iter().find(|entry| entry.reason.is_empty()) {
        bail!(
            "{EQUIVALENTS_PATH}: {} has no reason; say on the indented lines below it why no \
             test can tell it from the original",
            entry.name.whole()
        );
    }
    Ok(entries)
}

/// The missed mutants sorted against the list.
#[derive(Debug, Default)]
struct Verdict {
    /// Missed and listed: `(mutant, where the list has it when the line moved)`.
    listed: Vec<(String, Option<String>)>,
    /// Missed and not listed: a test is missing, or a reason.
    unlisted: Vec<String>,
    /// Listed for a file this run mutated whole, but not missed: caught now, or no longer
    /// made, so the entry should go.
    stale: Vec<String>,
}

/// Matches each missed mutant to an entry: the same name, or else (the code around it moved)
/// the same file and description at another position, each entry used once. With
/// `whole_files`, the run made every mutant of the files it touched, and an entry of those
/// files that was not missed is stale.
fn judge(outcomes: &Outcomes, equivalents: &[Equivalent], whole_files: bool) -> Verdict {
    let mut used = vec![false; equivalents.len()];
    let mut verdict = Verdict::default();
    let missed: Vec<MutantName> = outcomes
        .missed
        .iter()
        .filter_map(|name| MutantName::parse(name))
        .collect();
    let mut moved = Vec::new();
    for mutant in &missed {
        match equivalents.iter().position(|e| e.name == *mutant) {
            Some(at) if !used[at] => {
                used[at] = true;
                verdict.listed.push((mutant.whole(), None));
            }
            _ => moved.push(mutant),
        }
    }
    for mutant in moved {
        let at = equivalents.iter().enumerate().position(|(at, e)| {
            !used[at] && e.name.file == mutant.file && e.name.description == mutant.description
        });
        match at {
            Some(at) => {
                used[at] = true;
                let was = equivalents[at].name.position.clone();
                verdict.listed.push((mutant.whole(), Some(was)));
            }
            None => verdict.unlisted.push(mutant.whole()),
        }
    }
    if !whole_files {
        return verdict;
    }
    let all = [
        &outcomes.caught,
        &outcomes.missed,
        &outcomes.timeout,
        &outcomes.unviable,
    ];
    let files: Vec<String> = all
        .iter()
        .flat_map(|list| list.iter())
        .filter_map(|name| MutantName::parse(name).map(|n| n.file))
        .collect();
    let timed_out: Vec<MutantName> = outcomes
        .timeout
        .iter()
        .filter_map(|name| MutantName::parse(name))
        .collect();
    for (at, entry) in equivalents.iter().enumerate() {
        // A listed mutant that timed out this time is neither caught nor gone.
        if !used[at] && files.contains(&entry.name.file) && !timed_out.contains(&entry.name) {
            verdict.stale.push(entry.name.whole());
        }
    }
    verdict
}

/// The figures per file (caught, missed, timeout, unviable), then the listed misses.
fn summary(outcomes: &Outcomes, verdict: &Verdict) -> String {
    let mut per_file: BTreeMap<String, [usize; 4]> = BTreeMap::new();
    let lists = [
        &outcomes.caught,
        &outcomes.missed,
        &outcomes.timeout,
        &outcomes.unviable,
    ];
    for (column, list) in lists.iter().enumerate() {
        for name in list.iter() {
            let file = MutantName::parse(name).map_or_else(|| name.clone(), |n| n.file);
            per_file.entry(file).or_default()[column] += 1;
        }
    }
    let mut out = String::from("mutants: file caught missed timeout unviable\n");
    for (file, [caught, missed, timeout, unviable]) in &per_file {
        let _ = writeln!(
            out,
            "mutants: {file} {caught} {missed} {timeout} {unviable}"
        );
    }
    let _ = writeln!(
        out,
        "mutants: {} missed, {} of them listed as equivalent in {EQUIVALENTS_PATH}",
        outcomes.missed.len(),
        verdict.listed.len()
    );
    for (name, was) in &verdict.listed {
        if let Some(was) = was {
            let _ = writeln!(
                out,
                "note: {name} is listed at {was}; update its position in {EQUIVALENTS_PATH}"
            );
        }
    }
    out
}

/// The message of a failed run: each unlisted miss and each stale entry, by name.
fn failure(verdict: &Verdict) -> String {
    let mut out = String::new();
    if !verdict.unlisted.is_empty() {
        let _ = writeln!(
            out,
            "{} missed mutants are not listed as equivalent: kill each with a test of its \
             crate, or add it to {EQUIVALENTS_PATH} with the reason no test can:",
            verdict.unlisted.len()
        );
        for name in &verdict.unlisted {
            let _ = writeln!(out, "  {name}");
        }
    }
    if !verdict.stale.is_empty() {
        let _ = writeln!(
            out,
            "{} entries of {EQUIVALENTS_PATH} were not missed (caught now, or no longer made): \
             remove them:",
            verdict.stale.len()
        );
        for name in &verdict.stale {
            let _ = writeln!(out, "  {name}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn equivalents(text: &str) -> Vec<Equivalent> {
        parse_equivalents(text).unwrap()
    }

    fn outcomes(caught: &[&str], missed: &[&str]) -> Outcomes {
        Outcomes {
            caught: caught.iter().map(|&s| s.to_owned()).collect(),
            missed: missed.iter().map(|&s| s.to_owned()).collect(),
            ..Outcomes::default()
        }
    }

    const LIST: &str = "# comment\n\
        a/b.rs:10:5: replace < with <= in f\n    \
        the ids are never equal\n    here.\n\
        a/b.rs:20:5: replace < with <= in f\n    also never equal\n";

    #[test]
    fn names_split_into_file_position_and_description() {
        let name =
            MutantName::parse("crates/x/src/a.rs:38:15: replace < with <= in merge").unwrap();
        assert_eq!(name.file, "crates/x/src/a.rs");
        assert_eq!(name.position, "38:15");
        assert_eq!(name.description, "replace < with <= in merge");
        assert_eq!(MutantName::parse("no position: here"), None);
    }

    #[test]
    fn an_entry_needs_a_reason() {
        let entries = equivalents(LIST);
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].reason, "the ids are never equal here.");
        assert!(parse_equivalents("a/b.rs:1:1: replace f with ()\n").is_err());
        assert!(parse_equivalents("   a reason first\n").is_err());
        assert!(parse_equivalents("not a name\n  reason\n").is_err());
    }

    #[test]
    fn listed_misses_pass_and_unlisted_ones_fail() {
        let list = equivalents(LIST);
        let run = outcomes(
            &["a/b.rs:30:1: replace g -> bool with true"],
            &[
                "a/b.rs:10:5: replace < with <= in f",
                "a/b.rs:40:5: replace == with != in f",
            ],
        );
        let verdict = judge(&run, &list, true);
        assert_eq!(verdict.unlisted, ["a/b.rs:40:5: replace == with != in f"]);
        assert_eq!(verdict.stale, ["a/b.rs:20:5: replace < with <= in f"]);
    }

    #[test]
    fn a_moved_mutant_matches_its_entry_once() {
        let list = equivalents(LIST);
        let run = outcomes(
            &[],
            &[
                "a/b.rs:12:5: replace < with <= in f",
                "a/b.rs:22:5: replace < with <= in f",
                "a/b.rs:32:5: replace < with <= in f",
            ],
        );
        let verdict = judge(&run, &list, true);
        assert_eq!(verdict.listed.len(), 2);
        assert_eq!(verdict.unlisted, ["a/b.rs:32:5: replace < with <= in f"]);
        assert!(verdict.stale.is_empty());
    }

    #[test]
    fn entries_of_files_not_run_are_not_stale() {
        let list = equivalents(LIST);
        let run = outcomes(&["c/d.rs:1:1: replace g -> bool with true"], &[]);
        let verdict = judge(&run, &list, true);
        assert!(verdict.stale.is_empty() && verdict.unlisted.is_empty());
    }

    #[test]
    fn files_imply_their_crates() {
        let one = plan(&[], &["crates/rbolt-page/src/view/search.rs".to_owned()]).unwrap();
        assert_eq!(
            one.into_iter().collect::<Vec<_>>(),
            [(
                "rbolt-page".to_owned(),
                vec!["crates/rbolt-page/src/view/search.rs".to_owned()]
            )]
        );
        assert!(plan_err(&["rbolt".to_owned()], &[]));
        assert!(plan_err(&[], &["crates/rbolt/src/lib.rs".to_owned()]));
        assert!(plan_err(
            &["rbolt-btree".to_owned()],
            &["crates/rbolt-page/src/lib.rs".to_owned()]
        ));
        assert_eq!(plan(&[], &[]).unwrap().len(), LOWER_CRATES.len());
    }

    fn plan_err(crates: &[String], files: &[String]) -> bool {
        plan(crates, files).is_err()
    }
}
