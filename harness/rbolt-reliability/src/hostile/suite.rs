//! The suite: every case planned in a fixed order, run in batches by worker threads, each
//! batch in a child process (`rbolt-crash-child hostile-batch`) so that a case that kills its
//! process is named and the batch goes on after it.

use super::crafted::{crafted_files, cycles, not_databases, random_mutation};
use super::fields::{
    Field, field_values, fields, fix_meta_checksum, high_water, read_field, u64_at, write_field,
};
use super::shapes::{Shape, shapes};
use super::{Expect, Runner, Tally, evaluate};
use crate::model::Tree;
use crate::parallel::{Report, run_units};
use crate::summary::Summary;
use rbolt_fixtures::rng::Rng;
use rbolt_page::PGID_NO_FREELIST;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How big a hostile-file run is.
#[derive(Clone, Debug)]
pub struct HostileConfig {
    /// Random multi-byte mutations.
    pub random_cases: u64,
    /// Worker threads (each drives one child process at a time).
    pub threads: usize,
    /// The longest one case may take.
    pub case_limit: Duration,
    /// Run the shapes with 4 KiB pages too.
    pub with_4k: bool,
    /// The seed of the random mutations.
    pub seed: u64,
    /// `rbolt-crash-child`: cases run in child processes, a batch each, so that a case that
    /// overflows the stack or aborts kills only its child; the batch is then split until the
    /// case is found. Without it cases run in this process.
    pub child: Option<PathBuf>,
    /// Cases per child process.
    pub batch: usize,
}

/// What a hostile-file run found, per class of case and in all.
#[derive(Clone, Debug, Default)]
pub struct HostileReport {
    /// Shapes mutated.
    pub shapes: u64,
    /// Cases per class.
    pub classes: Vec<(&'static str, u64)>,
    /// All cases.
    pub tally: Tally,
}

impl HostileReport {
    /// The suite's summary line.
    pub fn summary(&self) -> Summary {
        let t = &self.tally;
        let mut summary = Summary::new("hostile").field("shapes", self.shapes);
        for (class, n) in &self.classes {
            summary = summary.field(class, n);
        }
        summary
            .field("cases", t.cases)
            .field("opened", t.opened)
            .field("open_errors", t.open_errors)
            .field("check_reported", t.check_reported)
            .field("scan_errors", t.scan_errors)
            .field("nesting_stops", t.nesting_stops)
            .field("panics", t.panics)
            .field("hangs", t.hangs)
            .field("crashes", t.crashes)
            .field("overruns", t.overruns)
            .field("oversize_maps", t.oversize_maps)
            .field("oversize_allocs", t.oversize_allocs)
            .field("wrong_content", t.wrong_content)
    }
}

/// A case before its image is made.
#[derive(Clone, Debug)]
pub(super) enum Spec {
    Flip {
        shape: usize,
        byte: usize,
        bit: u8,
    },
    Truncate {
        shape: usize,
        len: usize,
    },
    Field {
        shape: usize,
        field: usize,
        value: u64,
    },
    Cycle {
        shape: usize,
        index: usize,
    },
    NotDatabase(usize),
    Crafted(usize),
    Random {
        shape: usize,
        seed: u64,
    },
}

/// Everything the cases are made from.
pub(super) struct Material {
    shapes: Vec<Shape>,
    fields: Vec<Vec<Field>>,
    cycles: Vec<Vec<(String, Vec<u8>)>>,
    not_databases: Vec<(String, Vec<u8>)>,
    crafted: Vec<(String, Vec<u8>)>,
}

impl Material {
    pub(super) fn make(&self, spec: &Spec) -> (String, Vec<u8>, Expect) {
        match *spec {
            Spec::Flip { shape, byte, bit } => {
                let s = &self.shapes[shape];
                let mut image = s.image.clone();
                image[byte] ^= 1 << bit;
                let page = byte / s.page_size;
                let expect = if page < 2 {
                    Expect::Clean(s.states.clone())
                } else {
                    Expect::Content(Arc::new(s.states[..1].to_vec()))
                };
                (
                    format!("{}: bit {bit} of byte {byte} (page {page}) flipped", s.name),
                    image,
                    expect,
                )
            }
            Spec::Truncate { shape, len } => {
                let s = &self.shapes[shape];
                let mut states = s.states.to_vec();
                if len < rbolt_page::META_PAGE_LEN {
                    // An empty file is a new database to a read-write open; so is a file cut to
                    // less than a meta page whose bytes are what creation writes there (the
                    // start of every meta page is a new file's): it holds nothing, and is what
                    // a creation cut short leaves.
                    states.push(Tree::default());
                }
                (
                    format!("{}: truncated to {len} of {} bytes", s.name, s.image.len()),
                    s.image[..len].to_vec(),
                    Expect::Clean(Arc::new(states)),
                )
            }
            Spec::Field {
                shape,
                field,
                value,
            } => {
                let s = &self.shapes[shape];
                let f = &self.fields[shape][field];
                let mut image = s.image.clone();
                write_field(&mut image, f.offset, f.width, value);
                if let Some(m) = f.meta {
                    fix_meta_checksum(&mut image, s.page_size, m);
                }
                (
                    format!("{}: {} set to {value:#x}", s.name, f.what),
                    image,
                    Expect::Any,
                )
            }
            Spec::Cycle { shape, index } => {
                let (what, image) = &self.cycles[shape][index];
                (what.clone(), image.clone(), Expect::Any)
            }
            Spec::NotDatabase(index) => {
                let (what, image) = &self.not_databases[index];
                (what.clone(), image.clone(), Expect::Any)
            }
            Spec::Crafted(index) => {
                let (what, image) = &self.crafted[index];
                (what.clone(), image.clone(), Expect::Any)
            }
            Spec::Random { shape, seed } => {
                let s = &self.shapes[shape];
                let mut rng = Rng::new(seed);
                let (what, image) = random_mutation(&s.image, s.page_size, &mut rng);
                (
                    format!("{}: random mutation {seed:#x} ({what})", s.name),
                    image,
                    Expect::Any,
                )
            }
        }
    }
}

/// Every case of a run, in a fixed order: a child process given the same parameters makes
/// the same list and runs a range of it.
pub(super) struct Plan {
    pub(super) material: Arc<Material>,
    pub(super) specs: Vec<Spec>,
    classes: Vec<(&'static str, u64)>,
}

pub(super) fn plan(seed: u64, random_cases: u64, with_4k: bool) -> Plan {
    let shapes = shapes(with_4k);
    let material = Material {
        fields: shapes
            .iter()
            .map(|s| fields(&s.image, s.page_size))
            .collect(),
        cycles: shapes.iter().map(cycles).collect(),
        not_databases: not_databases(seed),
        crafted: crafted_files(),
        shapes,
    };
    let mut classes: Vec<(&'static str, Vec<Spec>)> = vec![
        ("flips", Vec::new()),
        ("truncations", Vec::new()),
        ("fields", Vec::new()),
        ("cycles", Vec::new()),
        ("not_databases", Vec::new()),
        ("crafted", Vec::new()),
        ("random", Vec::new()),
    ];
    for (shape, s) in material.shapes.iter().enumerate() {
        let mut pages = vec![0, 1];
        let newest = (0..2)
            .max_by_key(|&m| u64_at(&s.image, m * s.page_size + 16 + 48).unwrap_or(0))
            .unwrap_or(0);
        let freelist = u64_at(&s.image, newest * s.page_size + 16 + 32).unwrap_or(u64::MAX);
        if freelist != PGID_NO_FREELIST.0 {
            pages.push(freelist as usize);
        }
        for page in pages {
            for byte in page * s.page_size..(page + 1) * s.page_size {
                for bit in 0..8 {
                    classes[0].1.push(Spec::Flip { shape, byte, bit });
                }
            }
        }
        let n_pages = s.image.len() / s.page_size;
        let mut lens: Vec<usize> = (0..=n_pages)
            .flat_map(|p| {
                let at = p * s.page_size;
                [at.saturating_sub(1), at, at + 1]
            })
            .filter(|&len| len < s.image.len())
            .collect();
        lens.dedup();
        for len in lens {
            classes[1].1.push(Spec::Truncate { shape, len });
        }
        let hwm = high_water(&s.image, s.page_size);
        for (index, f) in material.fields[shape].iter().enumerate() {
            let original = read_field(&s.image, f.offset, f.width).unwrap_or(0);
            for value in field_values(original, f.width, hwm, s.page_size) {
                classes[2].1.push(Spec::Field {
                    shape,
                    field: index,
                    value,
                });
            }
        }
        for index in 0..material.cycles[shape].len() {
            classes[3].1.push(Spec::Cycle { shape, index });
        }
    }
    for index in 0..material.not_databases.len() {
        classes[4].1.push(Spec::NotDatabase(index));
    }
    for index in 0..material.crafted.len() {
        classes[5].1.push(Spec::Crafted(index));
    }
    let mut rng = Rng::derive(seed, 0x4A2D);
    for _ in 0..random_cases {
        let shape = rng.index(material.shapes.len());
        classes[6].1.push(Spec::Random {
            shape,
            seed: rng.next_u64(),
        });
    }
    Plan {
        material: Arc::new(material),
        classes: classes
            .iter()
            .map(|(name, specs)| (*name, specs.len() as u64))
            .collect(),
        specs: classes.into_iter().flat_map(|(_, specs)| specs).collect(),
    }
}

/// Runs cases `range` of `plan` in this process, each with the watchdog.
pub(super) fn run_range(plan: &Plan, range: std::ops::Range<usize>, limit: Duration) -> Tally {
    let mut runner = Runner::new(limit);
    let mut tally = Tally::default();
    for spec in &plan.specs[range] {
        let (what, image, expect) = plan.material.make(spec);
        let what_job = what.clone();
        match runner.run(Box::new(move || evaluate(&image, &expect, &what_job))) {
            Some(one) => tally.merge(one),
            None => {
                tally.cases += 1;
                tally.hangs += 1;
                tally.fail(&what, format!("did not finish within {limit:?}"));
            }
        }
    }
    tally
}

/// Runs the hostile-file suite.
pub fn run(config: &HostileConfig) -> HostileReport {
    let plan = plan(config.seed, config.random_cases, config.with_4k);
    let n = plan.specs.len();
    let batch = config.batch.max(1);
    let tally = run_units(n.div_ceil(batch) as u64, config.threads, |index| {
        let start = index as usize * batch;
        let range = start..(start + batch).min(n);
        match &config.child {
            Some(child) => run_in_child(child, config, &plan, range),
            None => run_range(&plan, range, config.case_limit),
        }
    });
    HostileReport {
        shapes: plan.material.shapes.len() as u64,
        classes: plan.classes,
        tally,
    }
}

/// Runs cases `range` in child processes. A child reports each case as it starts and ends;
/// when one dies, the case it had started is the culprit, and a new child goes on after it.
fn run_in_child(
    child: &Path,
    config: &HostileConfig,
    plan: &Plan,
    range: std::ops::Range<usize>,
) -> Tally {
    let mut tally = Tally::default();
    let mut start = range.start;
    while start < range.end {
        // Generous: a hung case is reported by the child's own watchdog after `case_limit`.
        let limit = 3 * config.case_limit + Duration::from_millis(50) * (range.end - start) as u32;
        let run = match spawn_batch(child, config, start..range.end, limit) {
            Ok(run) => run,
            Err(error) => {
                tally.failures.push(error);
                return tally;
            }
        };
        tally.merge(run.tally);
        match run.died {
            None => match run.last_finished {
                Some(last) if last + 1 < range.end => start = last + 1,
                Some(_) => break,
                None => {
                    tally.failures.push(format!(
                        "a hostile-batch child ran none of cases {start}..{}",
                        range.end
                    ));
                    break;
                }
            },
            Some(died) => {
                // The case the child had started and not finished killed it.
                let culprit = run.last_started.unwrap_or(start);
                let (what, _, _) = plan.material.make(&plan.specs[culprit]);
                let what = format!("#{culprit} {what}");
                tally.cases += 1;
                tally.crashes += 1;
                tally.fail(&what, died);
                start = culprit + 1;
            }
        }
    }
    tally
}

/// What one child process reported.
struct ChildBatch {
    /// The cases it finished.
    tally: Tally,
    /// The last case it finished.
    last_finished: Option<usize>,
    /// The case it started last and did not finish, if it died.
    last_started: Option<usize>,
    /// How it died, if it did.
    died: Option<String>,
}

fn spawn_batch(
    child: &Path,
    config: &HostileConfig,
    range: std::ops::Range<usize>,
    limit: Duration,
) -> Result<ChildBatch, String> {
    let mut process = std::process::Command::new(child)
        .arg("hostile-batch")
        .args([
            config.seed.to_string(),
            config.random_cases.to_string(),
            u8::from(config.with_4k).to_string(),
            config.case_limit.as_millis().to_string(),
            range.start.to_string(),
            range.end.to_string(),
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn {}: {e}", child.display()))?;
    let mut stdout = process.stdout.take().expect("piped");
    let mut stderr = process.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut text);
        text
    });
    // Keep only the end of stderr: panics print backtraces.
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with(' ') && !l.is_empty())
            .collect();
        lines[lines.len().saturating_sub(2)..].join(" | ")
    });
    let started = Instant::now();
    let status = loop {
        match process.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() < limit => {
                std::thread::sleep(Duration::from_millis(5));
            }
            _ => {
                let _ = process.kill();
                let _ = process.wait();
                break None;
            }
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    let mut batch = ChildBatch {
        tally: Tally::default(),
        last_finished: None,
        last_started: None,
        died: None,
    };
    for line in stdout.lines() {
        if let Some(index) = line.strip_prefix("start ") {
            batch.last_started = index.parse().ok();
        } else if line.starts_with("tally ") {
            if let Some(one) = Tally::from_lines(line) {
                batch.tally.merge(one);
            }
            batch.last_finished = batch.last_started;
        } else if let Some(failure) = line.strip_prefix("failure ") {
            batch.tally.failures.push(failure);
        }
    }
    if batch.last_finished == batch.last_started {
        batch.last_started = None;
    }
    match status {
        Some(status) if status.success() => {}
        Some(status) => batch.died = Some(format!("the child process died ({status}): {stderr}")),
        None => batch.died = Some(format!("the child process took more than {limit:?}")),
    }
    if batch.died.is_some() && batch.last_started.is_none() {
        return Err(format!(
            "a hostile-batch child died outside any case: {}",
            batch.died.unwrap_or_default()
        ));
    }
    Ok(batch)
}
