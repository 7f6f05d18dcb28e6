//! One case: a file opened read-only and read-write, checked, scanned and walked (read-write:
//! its page statistics and every delete of many keys), and the outcome judged against what the
//! case expects.

use super::watch::{Watch, alloc_bound, map_bound};
use crate::model::Tree;
use crate::parallel::Report;
use crate::power::panic_message;
use crate::scan::{ScanError, entries_max, scan_db};
use crate::summary::Failures;
use rbolt::storage::{SimFile, Storage};
use rbolt::{Db, Options};
use rbolt_testkit::alloc;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

/// What a case's content must be.
#[derive(Clone, Debug)]
pub enum Expect {
    /// Anything, as long as every step ends in `Ok` or a typed error.
    Any,
    /// When a scan succeeds, its content is one of these states (a corrupt freelist page
    /// cannot change the data).
    Content(Arc<Vec<Tree>>),
    /// When the file opens, its check is clean and its content is one of these states (a
    /// damaged meta or a truncated tail may only make rbolt fall back to the other meta).
    Clean(Arc<Vec<Tree>>),
}

/// Counts over cases.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// Cases run (each opened read-only and read-write).
    pub cases: u64,
    /// Opens that succeeded.
    pub opened: u64,
    /// Opens that returned an error.
    pub open_errors: u64,
    /// Checks that reported problems (fine on a corrupt file).
    pub check_reported: u64,
    /// Scans that ended in an error from rbolt (fine on a corrupt file).
    pub scan_errors: u64,
    /// Scans stopped at bucket values pointing back at their ancestors (the scan's own bound).
    pub nesting_stops: u64,
    /// Panics.
    pub panics: u64,
    /// Cases that did not finish within the time limit.
    pub hangs: u64,
    /// Cases that killed their process: a stack overflow, an abort, a signal.
    pub crashes: u64,
    /// Buckets that yielded more entries than the file can hold.
    pub overruns: u64,
    /// Mappings larger than the file justifies.
    pub oversize_maps: u64,
    /// Allocations larger than the file justifies.
    pub oversize_allocs: u64,
    /// Cases whose content or check broke their expectation.
    pub wrong_content: u64,
    /// Descriptions of the failures.
    pub failures: Failures,
}

impl Report for Tally {
    fn merge(&mut self, other: Tally) {
        self.cases += other.cases;
        self.opened += other.opened;
        self.open_errors += other.open_errors;
        self.check_reported += other.check_reported;
        self.scan_errors += other.scan_errors;
        self.nesting_stops += other.nesting_stops;
        self.panics += other.panics;
        self.hangs += other.hangs;
        self.crashes += other.crashes;
        self.overruns += other.overruns;
        self.oversize_maps += other.oversize_maps;
        self.oversize_allocs += other.oversize_allocs;
        self.wrong_content += other.wrong_content;
        self.failures.extend(other.failures);
    }
}

impl Tally {
    /// Whether every case ended as it must.
    pub fn is_clean(&self) -> bool {
        self.panics == 0
            && self.hangs == 0
            && self.crashes == 0
            && self.overruns == 0
            && self.oversize_maps == 0
            && self.oversize_allocs == 0
            && self.wrong_content == 0
            && self.failures.is_empty()
    }

    pub(super) fn fail(&mut self, what: &str, message: String) {
        self.failures
            .push(format!("{what}: {message}").replace('\n', " "));
    }

    fn counters(&mut self) -> [(&'static str, &mut u64); 13] {
        [
            ("cases", &mut self.cases),
            ("opened", &mut self.opened),
            ("open_errors", &mut self.open_errors),
            ("check_reported", &mut self.check_reported),
            ("scan_errors", &mut self.scan_errors),
            ("nesting_stops", &mut self.nesting_stops),
            ("panics", &mut self.panics),
            ("hangs", &mut self.hangs),
            ("crashes", &mut self.crashes),
            ("overruns", &mut self.overruns),
            ("oversize_maps", &mut self.oversize_maps),
            ("oversize_allocs", &mut self.oversize_allocs),
            ("wrong_content", &mut self.wrong_content),
        ]
    }

    /// The tally as lines a child process prints: `tally k=v ...`, then `failure ...` lines.
    pub fn to_lines(&self) -> String {
        let mut copy = self.clone();
        let mut line = String::from("tally");
        for (key, value) in copy.counters() {
            line.push_str(&format!(" {key}={value}"));
        }
        for failure in self.failures.to_string().lines().skip(1) {
            line.push_str("\nfailure ");
            line.push_str(failure.trim_start_matches("  - "));
        }
        line
    }

    /// Parses what [`to_lines`](Tally::to_lines) printed (the failures it shows).
    pub fn from_lines(text: &str) -> Option<Tally> {
        let mut tally = Tally::default();
        let line = text.lines().find(|l| l.starts_with("tally "))?;
        for word in line.split_whitespace().skip(1) {
            let (key, value) = word.split_once('=')?;
            let value: u64 = value.parse().ok()?;
            for (name, counter) in tally.counters() {
                if name == key {
                    *counter = value;
                }
            }
        }
        for failure in text.lines().filter_map(|l| l.strip_prefix("failure ")) {
            tally.failures.push(failure);
        }
        Some(tally)
    }
}

/// What one open-check-scan did.
enum Run {
    OpenError,
    Opened {
        check: Result<usize, rbolt::Error>,
        scan: Result<crate::scan::Scan, ScanError>,
    },
}

/// Opens `image` read-only and read-write, checks and scans it (and, read-write, computes the
/// page statistics), and judges the outcome.
pub fn evaluate(image: &[u8], expect: &Expect, what: &str) -> Tally {
    let mut tally = Tally {
        cases: 1,
        ..Tally::default()
    };
    let tracking = alloc::installed();
    for read_only in [true, false] {
        let what = format!(
            "{what} ({})",
            if read_only { "read-only" } else { "read-write" }
        );
        let sim = SimFile::from_image(image.to_vec()).expect("memfd");
        let watch = Arc::new(Watch::new(sim.clone()));
        alloc::reset_peak();
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let options = Options::default().read_only(read_only);
            let Ok(db) = Db::open_storage(watch.clone(), options) else {
                return Run::OpenError;
            };
            let check = db.view(|tx| Ok(tx.check().len()));
            let file_len = db.file_len().unwrap_or(image.len() as u64);
            let scan = scan_db(&db, entries_max(file_len));
            if !read_only {
                // The page statistics walk every page and nested bucket too (last: on some
                // files they overflow the stack). Only their errors matter here.
                let _ = db.view(|tx| tx.root().stats());
                // The deletes of many keys (issue 49) walk every page they delete from.
                let _ = delete_everywhere(&db);
            }
            Run::Opened { check, scan }
        }));
        let peak = alloc::peak();
        let file_len = Storage::len(&sim).unwrap_or(image.len() as u64);
        if watch.map_len_max() > map_bound(file_len) {
            tally.oversize_maps += 1;
            tally.fail(
                &what,
                format!(
                    "mapped {} bytes of a {file_len}-byte file",
                    watch.map_len_max()
                ),
            );
        }
        // A panic's own report allocates (a backtrace); the panic is the failure then.
        if tracking && outcome.is_ok() && peak > alloc_bound(file_len) {
            tally.oversize_allocs += 1;
            tally.fail(
                &what,
                format!("allocated {peak} bytes at once for a {file_len}-byte file"),
            );
        }
        match outcome {
            Err(panic) => {
                tally.panics += 1;
                tally.fail(&what, format!("panic: {}", panic_message(&panic)));
            }
            Ok(Run::OpenError) => tally.open_errors += 1,
            Ok(Run::Opened { check, scan }) => {
                tally.opened += 1;
                let check_clean = matches!(check, Ok(0));
                if !check_clean {
                    tally.check_reported += 1;
                }
                let content = match scan {
                    Ok(scan) => Some(scan),
                    Err(ScanError::Db(_)) => {
                        tally.scan_errors += 1;
                        None
                    }
                    Err(ScanError::Nesting) => {
                        tally.nesting_stops += 1;
                        None
                    }
                    Err(ScanError::Overrun { entries_max }) => {
                        tally.overruns += 1;
                        tally.fail(
                            &what,
                            format!("a bucket yielded more than {entries_max} entries"),
                        );
                        None
                    }
                };
                judge(&mut tally, &what, expect, check_clean, content);
            }
        }
    }
    tally
}

/// Runs each delete of many keys on every top-level bucket (the first 64) of a write
/// transaction that is then dropped: only a panic, an overrun or an outsize allocation or
/// mapping matters here; an error is a fine end for a corrupt file.
fn delete_everywhere(db: &Db) -> rbolt::Result<()> {
    let mut tx = db.begin_write()?;
    let names: Vec<Vec<u8>> = tx
        .buckets()
        .take(64)
        .map(|entry| entry.map(|e| e.key().to_vec()))
        .collect::<rbolt::Result<_>>()?;
    for name in names {
        let Some(mut bucket) = tx.bucket_mut(&name)? else {
            continue;
        };
        let _ = bucket.pop_first();
        let _ = bucket.pop_last();
        let _ = bucket.retain(|key, _| key.first().is_some_and(|b| b % 2 == 0));
        let _ = bucket.extract_if(&[0x40u8][..].., |_, value| value.len() % 2 == 0);
        let _ = bucket.delete_prefix([0x20]);
        let _ = bucket.delete_range(&[0x10u8][..]..&[0x30u8][..]);
        let _ = bucket.clear();
    }
    Ok(())
}

fn judge(
    tally: &mut Tally,
    what: &str,
    expect: &Expect,
    check_clean: bool,
    content: Option<crate::scan::Scan>,
) {
    match expect {
        Expect::Any => {}
        Expect::Content(states) => {
            if let Some(scan) = content
                && !states.contains(&scan.tree)
            {
                tally.wrong_content += 1;
                tally.fail(what, "the content is neither committed state".into());
            }
        }
        Expect::Clean(states) => {
            let ok = check_clean
                && content.is_some_and(|scan| scan.consistent && states.contains(&scan.tree));
            if !ok {
                tally.wrong_content += 1;
                tally.fail(
                    what,
                    format!(
                        "opened, but check clean {check_clean} and the content is not one of the committed states"
                    ),
                );
            }
        }
    }
}
