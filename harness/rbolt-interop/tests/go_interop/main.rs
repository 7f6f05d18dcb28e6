//! rbolt and the real Go bbolt write the same files in turns. For every case
//! (`matrix.rs`): one side writes a round of seeded random transactions on the file and its
//! model; then the file is judged — rbolt's check (which includes what Go's writer assumes of
//! the pages it loads), rbolt's export against the writer's model, and, after an rbolt
//! round, Go's `tx.Check` and Go's dump against both — and the other side writes the next
//! round. Go writes with `StrictMode` (its check before every meta write) and checks and
//! dumps its own work too.
//!
//! Then the crash rounds (`crash.rs`): Go opens every state a killed rbolt process leaves,
//! with and without commits made without syncs, and writes on it or dies mid-transaction on
//! it; rbolt's next open must hold what was acknowledged. And one round with an rbolt reader
//! process beside the rbolt writer (`beside.rs`): Go is refused while the writer holds the
//! file, and writes once both rbolt processes have gone.
//!
//! Prints one line, `go-interop: seeds=.. rounds=.. files=.. go_check_failures=..
//! go_write_failures=.. dump_mismatches=..` (then rbolt's own counts, then `crash:` and each
//! crash round's outcomes and failures), and fails on any failure. Without Go (Debian's
//! `golang-go` and `golang-github-coreos-bbolt-dev`) it says it skipped and passes, unless
//! `RBOLT_GO_INTEROP=require` (what `.ci/run` sets).

mod beside;
mod crash;
mod go;
mod matrix;
mod rbolt_side;

use go::{GoInterop, Missing};
use matrix::{Case, Side};
use rbolt_fixtures::Bucket;
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

/// What the suite counts. Every count but the first four must be 0.
#[derive(Debug, Default)]
struct Summary {
    seeds: usize,
    rounds: usize,
    files: usize,
    rbolt_checks: usize,
    go_check_failures: usize,
    go_write_failures: usize,
    dump_mismatches: usize,
    rbolt_write_failures: usize,
    rbolt_check_failures: usize,
    /// Places where a file breaks what Go's writer assumes (rbolt's check), over every file
    /// after every round.
    separator_violations: usize,
    /// Failures of the round with an rbolt reader process beside the rbolt writer.
    beside_failures: usize,
    failures: Vec<String>,
    crash: crash::Counts,
    /// What the files held at their most: a suite that no longer makes what it claims to
    /// test fails.
    coverage: Coverage,
}

/// The extremes the judged files reached.
#[derive(Debug, Default)]
struct Coverage {
    /// The most ids on a freelist page written by rbolt, and by Go.
    freelist_ids_max: [usize; 2],
    nesting_max: usize,
    value_len_max: usize,
    page_sizes: std::collections::BTreeSet<usize>,
    /// Bytes rbolt's rounds wrote as copies into the file's writable mapping (rewrites by
    /// commits without a sync), and whether the files' filesystem takes such copies.
    copied_bytes: u64,
    copies_expected: bool,
}

impl Summary {
    fn line(&self) -> String {
        format!(
            "go-interop: seeds={} rounds={} files={} go_check_failures={} go_write_failures={} \
             dump_mismatches={} rbolt_write_failures={} rbolt_check_failures={} \
             separator_violations={} (over {} rbolt checks) beside_failures={} | {}",
            self.seeds,
            self.rounds,
            self.files,
            self.go_check_failures,
            self.go_write_failures,
            self.dump_mismatches,
            self.rbolt_write_failures,
            self.rbolt_check_failures,
            self.separator_violations,
            self.rbolt_checks,
            self.beside_failures,
            self.crash.line()
        )
    }

    /// What the suite claims to cover and did not, if anything.
    fn uncovered(&self) -> Vec<String> {
        let c = &self.coverage;
        let mut missing = Vec::new();
        if c.freelist_ids_max.iter().any(|&n| n <= 65_535) {
            missing.push(format!(
                "no freelist page past 65,535 ids by each side ({:?})",
                c.freelist_ids_max
            ));
        }
        if c.nesting_max < 200 {
            missing.push(format!("no buckets nested 200 deep ({})", c.nesting_max));
        }
        if c.value_len_max < 1 << 20 {
            missing.push(format!("no value of 1 MB ({} bytes)", c.value_len_max));
        }
        if c.page_sizes.len() < 8 {
            missing.push(format!("page sizes {:?} only", c.page_sizes));
        }
        if c.copies_expected && c.copied_bytes == 0 {
            missing.push("no rewrite before a sync made as a copy into the mapping".into());
        }
        missing.extend(self.crash.uncovered());
        missing
    }

    fn failed(&self) -> bool {
        self.go_check_failures
            + self.go_write_failures
            + self.dump_mismatches
            + self.rbolt_write_failures
            + self.rbolt_check_failures
            + self.separator_violations
            + self.beside_failures
            > 0
            || self.crash.failed()
    }
}

/// Writes past the test harness's capture, so that a skip and the summary show in every run.
fn loud(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

#[test]
fn rbolt_and_go_bbolt_write_the_same_files_in_turns() {
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("go-interop");
    let _ = std::fs::remove_dir_all(work.join("files"));
    std::fs::create_dir_all(work.join("files")).unwrap();
    let require = std::env::var("RBOLT_GO_INTEROP").is_ok_and(|v| v == "require");
    let go = match GoInterop::build(&work) {
        Ok(go) => go,
        Err(Missing(why)) if !require => {
            loud(&format!(
                "\n*** go-interop: SKIPPED: {why}.\n*** The interop suite against Go bbolt did \
                 not run. Install Debian's golang-go and golang-github-coreos-bbolt-dev, or set \
                 RBOLT_GO_INTEROP=require to make this a failure.\n"
            ));
            return;
        }
        Err(Missing(why)) => panic!("go-interop: RBOLT_GO_INTEROP=require, but {why}"),
    };
    loud(&format!(
        "go-interop: {} with Debian's bbolt 1.3.6",
        go.version
    ));
    let mut summary = Summary::default();
    let files = work.join("files");
    let probe = rbolt::storage::FileStorage::open(
        files.join("copies-probe"),
        rbolt::storage::FileOptions::new(),
    )
    .expect("a probe file");
    summary.coverage.copies_expected = probe.copies_rewrites();
    drop(probe);
    for case in matrix::cases() {
        run_case(&go, &case, &files, &mut summary);
    }
    crash::run(&go, &files, &mut summary.crash, &mut summary.failures);
    if let Err(error) = beside::run(&go, &files) {
        summary.beside_failures += 1;
        summary.failures.push(format!("beside: {error}"));
    }
    for failure in &summary.failures {
        loud(&format!("go-interop FAILURE: {failure}"));
    }
    loud(&summary.line());
    let c = &summary.coverage;
    loud(&format!(
        "go-interop coverage: page sizes {:?}, freelist pages of {} ids (by rbolt) and {} (by \
         Go), buckets nested {} deep, values of up to {} bytes, {} bytes copied into the \
         mapping by rbolt (copies expected: {})",
        c.page_sizes,
        c.freelist_ids_max[0],
        c.freelist_ids_max[1],
        c.nesting_max,
        c.value_len_max,
        c.copied_bytes,
        c.copies_expected
    ));
    assert!(!summary.failed(), "{}", summary.line());
    let uncovered = summary.uncovered();
    assert!(
        uncovered.is_empty(),
        "the suite did not cover: {uncovered:?}"
    );
}

/// One case: rounds of writes by alternating sides, the file judged after each.
fn run_case(go: &GoInterop, case: &Case, dir: &Path, summary: &mut Summary) {
    summary.seeds += 1;
    summary.files += 1;
    summary.coverage.page_sizes.insert(case.page_size);
    let file = dir.join(format!("case-{}-{}.db", case.seed, case.page_size));
    let mut model = Bucket::default();
    let mut side = case.creator;
    for round in 0..case.rounds {
        let label = format!("seed {} round {round} ({side:?}) {case:?}", case.seed);
        summary.rounds += 1;
        let written = match side {
            Side::Rbolt => rbolt_round(go, case, round, &file, &mut model, &label, summary),
            Side::Go => go_round(go, case, round, &file, dir, &mut model, &label, summary),
        };
        if !written {
            keep_failed(&file);
            return;
        }
        side = match side {
            Side::Rbolt => Side::Go,
            Side::Go => Side::Rbolt,
        };
    }
    // Passed: the files go (some are tens of megabytes); a failed case's stay for a look.
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_file(model_path(dir, case));
}

/// Where the Go program writes its model of the file of `case`.
fn model_path(dir: &Path, case: &Case) -> PathBuf {
    dir.join(format!("case-{}.model.jsonl", case.seed))
}

/// rbolt writes a round; then rbolt and Go judge the file. Returns whether to go on.
fn rbolt_round(
    go: &GoInterop,
    case: &Case,
    round: usize,
    file: &Path,
    model: &mut Bucket,
    label: &str,
    summary: &mut Summary,
) -> bool {
    let written = catch_unwind(AssertUnwindSafe(|| {
        rbolt_side::write_round(file, case, round, model)
    }));
    match written {
        Ok(Ok(copied)) => summary.coverage.copied_bytes += copied,
        Ok(Err(error)) => return fail(summary, Count::RboltWrite, label, &error.to_string()),
        Err(_) => {
            return fail(
                summary,
                Count::RboltWrite,
                label,
                "panicked (printed above)",
            );
        }
    }
    let Some(export) = rbolt_judges(file, Side::Rbolt, &model.to_manifest(), label, summary) else {
        return false;
    };
    let checked = go.run("check", file, &go_open_args(case));
    if !checked.ok() {
        return fail(summary, Count::GoCheck, label, &checked.describe());
    }
    let dumped = go.run("dump", file, &go_open_args(case));
    if !dumped.ok() {
        return fail(summary, Count::GoCheck, label, &dumped.describe());
    }
    if dumped.stdout != export.as_bytes() {
        let what = first_difference(&String::from_utf8_lossy(&dumped.stdout), &export);
        return fail(
            summary,
            Count::Dump,
            label,
            &format!("Go's dump differs: {what}"),
        );
    }
    true
}

/// Go writes a round (and checks and dumps its own work); then rbolt judges the file.
#[expect(
    clippy::too_many_arguments,
    reason = "one round: the case, the file, the counts"
)]
fn go_round(
    go: &GoInterop,
    case: &Case,
    round: usize,
    file: &Path,
    dir: &Path,
    model: &mut Bucket,
    label: &str,
    summary: &mut Summary,
) -> bool {
    let model_out = model_path(dir, case);
    let mut args = go_open_args(case);
    args.extend([
        "--seed".into(),
        (case.seed * 100 + round as u64).to_string(),
        "--txs".into(),
        case.txs.to_string(),
        "--ops".into(),
        case.ops.to_string(),
        "--page-size".into(),
        case.page_size.to_string(),
        "--model-out".into(),
        model_out.display().to_string(),
    ]);
    if case.big {
        args.push("--big".into());
    }
    if round == 0 && case.deep > 0 {
        args.extend(["--deep".into(), case.deep.to_string()]);
    }
    if round == 0 && case.big_freelist {
        args.push("--big-freelist".into());
    }
    let written = go.run("write", file, &args);
    if !written.ok() {
        return fail(summary, Count::GoWrite, label, &written.describe());
    }
    let text = std::fs::read_to_string(&model_out).expect("the Go program wrote its model");
    *model = Bucket::from_manifest(&text);
    rbolt_judges(file, Side::Go, &text, label, summary).is_some()
}

/// rbolt checks the file (every problem, and every place Go's writer could not continue)
/// and exports it; the export must be `expected`. Returns the export, or `None` on a
/// failure (counted).
fn rbolt_judges(
    file: &Path,
    writer: Side,
    expected: &str,
    label: &str,
    summary: &mut Summary,
) -> Option<String> {
    summary.rbolt_checks += 1;
    match rbolt_side::check(file) {
        Err(error) => {
            fail(summary, Count::RboltCheck, label, &format!("open: {error}"));
            return None;
        }
        Ok(rbolt_side::Checked {
            hazards,
            other,
            freelist_ids,
        }) => {
            let most = &mut summary.coverage.freelist_ids_max[writer as usize];
            *most = (*most).max(freelist_ids.unwrap_or(0));
            summary.separator_violations += hazards.len();
            if !hazards.is_empty() {
                fail(
                    summary,
                    Count::None,
                    label,
                    &format!("Go writer hazards: {hazards:?}"),
                );
            }
            if !other.is_empty() {
                fail(
                    summary,
                    Count::RboltCheck,
                    label,
                    &format!("check: {other:?}"),
                );
            }
            if !hazards.is_empty() || !other.is_empty() {
                return None;
            }
        }
    }
    let export = match rbolt_side::export(file) {
        Ok(export) => export,
        Err(error) => {
            fail(
                summary,
                Count::RboltCheck,
                label,
                &format!("export: {error}"),
            );
            return None;
        }
    };
    let (nesting, value_len) = rbolt_side::shape(&Bucket::from_manifest(expected));
    let coverage = &mut summary.coverage;
    coverage.nesting_max = coverage.nesting_max.max(nesting);
    coverage.value_len_max = coverage.value_len_max.max(value_len);
    if export != expected {
        let what = first_difference(&export, expected);
        fail(
            summary,
            Count::Dump,
            label,
            &format!("rbolt's export differs from the writer's model: {what}"),
        );
        return None;
    }
    Some(export)
}

/// The options the Go program opens the file with.
fn go_open_args(case: &Case) -> Vec<String> {
    let mut args = vec!["--freelist".to_owned(), case.go_freelist.to_owned()];
    if case.go_no_freelist_sync {
        args.push("--no-freelist-sync".into());
    }
    args
}

/// Which count a failure adds to.
enum Count {
    GoCheck,
    GoWrite,
    Dump,
    RboltWrite,
    RboltCheck,
    /// Counted by the caller already.
    None,
}

fn fail(summary: &mut Summary, count: Count, label: &str, what: &str) -> bool {
    match count {
        Count::GoCheck => summary.go_check_failures += 1,
        Count::GoWrite => summary.go_write_failures += 1,
        Count::Dump => summary.dump_mismatches += 1,
        Count::RboltWrite => summary.rbolt_write_failures += 1,
        Count::RboltCheck => summary.rbolt_check_failures += 1,
        Count::None => {}
    }
    summary.failures.push(format!("{label}: {what}"));
    false
}

/// The first line where two manifests differ, shortened.
fn first_difference(a: &str, b: &str) -> String {
    let short = |line: &str| line.chars().take(300).collect::<String>();
    for (number, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            return format!("line {}: {:?} vs {:?}", number + 1, short(x), short(y));
        }
    }
    format!("{} lines vs {} lines", a.lines().count(), b.lines().count())
}

/// Says where the file of a failed case stays (its directory is cleared at the next run).
fn keep_failed(file: &Path) {
    loud(&format!(
        "go-interop: the failed file stays at {}",
        file.display()
    ));
}
