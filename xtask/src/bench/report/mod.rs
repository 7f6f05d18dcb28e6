//! `target/bench-report/summary.md`: engines as columns, workloads as rows, the best cell in
//! bold, rbolt against the best peer, the machine, the versions and the command. With several
//! runs per engine (`--repeat`), a cell is the median of the runs with their min-max, and
//! bests and ratios compare medians.

use super::compare::{Compare, EngineRun};
use super::machine::Machine;
use super::micro::Micro;
use super::{Args, ENGINES, Layout};
use anyhow::{Context, Result};
use serde_json::Value;
use std::fmt::Write as _;
use std::path::PathBuf;

mod doc;
pub(crate) mod metrics;
pub use doc::{DOC_TABLE_N_MIN, replace_between, write_doc};
pub use metrics::{FAMILIES, METRICS, Metric};
use metrics::{mib, phase};

/// The runs of one cell summed up: their median and range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stat {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// How many runs gave a value.
    pub n: usize,
}

/// The median (the mean of the middle two for an even count), min and max of `values`.
pub fn stat(values: impl IntoIterator<Item = f64>) -> Option<Stat> {
    let mut values: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let median = if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    };
    Some(Stat {
        median,
        min: values[0],
        max: values[n - 1],
        n,
    })
}

/// A metric over every run of one engine.
pub fn metric_stat(metric: &Metric, lines: &[&Value]) -> Option<Stat> {
    stat(lines.iter().filter_map(|line| (metric.get)(line)))
}

/// A cell: the median, and the range when the runs differ.
pub fn format_stat(stat: &Stat) -> String {
    if stat.n > 1 && stat.max > stat.min {
        format!(
            "{} ({}–{})",
            format_value(stat.median),
            format_value(stat.min),
            format_value(stat.max)
        )
    } else {
        format_value(stat.median)
    }
}

/// The phases whose file sizes the report lists, with their labels.
const SIZE_PHASES: &[(&str, &str)] = &[
    ("load_random", "(a) random load"),
    ("get_random", "(b) gets"),
    ("scan", "(c) scan"),
    ("commit_durable", "(d) 1,000 commits"),
    ("batch_nosync", "(e) 100,000 keys in batches"),
    ("delete_half", "(f) delete half"),
    ("read_write", "(g) read-write"),
    ("load_sorted", "(a2) sorted load (new file)"),
];

/// Three significant digits, thousands as k and millions as M for rates.
pub fn format_value(value: f64) -> String {
    let abs = value.abs();
    if abs >= 1e6 {
        format!("{:.2} M", value / 1e6)
    } else if abs >= 1e4 {
        format!("{:.0} k", value / 1e3)
    } else if abs >= 100.0 {
        format!("{value:.0}")
    } else if abs >= 10.0 {
        format!("{value:.1}")
    } else if abs >= 1.0 {
        format!("{value:.2}")
    } else if abs == 0.0 {
        "0".into()
    } else {
        format!("{value:.3}")
    }
}

fn format_ns(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.3} µs", ns / 1e3)
    } else {
        format!("{ns:.1} ns")
    }
}

/// rbolt's value over the best peer's, and which way that goes.
pub fn ratio(metric: &Metric, rbolt: Option<f64>, best_peer: Option<f64>) -> String {
    let (Some(ours), Some(theirs)) = (rbolt, best_peer) else {
        return "—".into();
    };
    if ours == theirs {
        return "1.00 (tie)".into();
    }
    if theirs == 0.0 {
        // rbolt is above a peer at zero: worse where lower is better, better otherwise.
        let way = if metric.higher_is_better {
            "better"
        } else {
            "worse"
        };
        return format!("∞ ({way})");
    }
    let ratio = ours / theirs;
    let better = (ratio < 1.0) != metric.higher_is_better;
    format!("{ratio:.2} ({})", if better { "better" } else { "worse" })
}

/// The best value of a row among `values` (None where an engine has none).
pub fn best(metric: &Metric, values: &[Option<f64>]) -> Option<f64> {
    let present = values.iter().flatten().copied();
    if metric.higher_is_better {
        present.reduce(f64::max)
    } else {
        present.reduce(f64::min)
    }
}

pub fn write(
    layout: &Layout,
    args: &Args,
    machine: &Machine,
    micro: Option<&Micro>,
    compare: Option<&Compare>,
) -> Result<PathBuf> {
    let mut md = String::new();
    let now = utc_now();
    writeln!(md, "# rbolt benchmark report\n")?;
    writeln!(md, "- date: {now}")?;
    writeln!(md, "- command: `{}`", args.command)?;
    writeln!(
        md,
        "- machine: {}, {} cores, {:.1} GiB memory; data on {}; Linux {}; {}",
        machine.cpu,
        machine.cores,
        machine.memory_gib,
        machine.filesystem,
        machine.kernel,
        machine.rustc
    )?;
    if args.replot {
        writeln!(
            md,
            "- rewritten from compare.json by `cargo xtask bench --replot` (the machine line \
             is where it was rewritten)"
        )?;
    } else {
        writeln!(
            md,
            "- load average when it started: {} (engines run one after the other, so ratios \
             hold better than absolute numbers on a busy machine)",
            machine.load_average
        )?;
    }
    if let Some(compare) = compare {
        comparison(&mut md, compare)?;
    }
    if let Some(micro) = micro {
        micro_section(&mut md, micro)?;
    }
    let path = layout.report.join("summary.md");
    std::fs::write(&path, md).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

fn comparison(md: &mut String, compare: &Compare) -> Result<()> {
    let engines: Vec<(&str, Vec<&Value>)> = compare.ok().collect();
    writeln!(md, "\n## rbolt and its peers\n")?;
    let runs = if compare.repeat > 1 {
        format!(
            " Each engine ran {} times, the engines taking turns; a cell is the median of its \
             runs with the lowest and highest in brackets, and the best and the ratio compare \
             medians.",
            compare.repeat
        )
    } else {
        String::new()
    };
    writeln!(
        md,
        "N = {} keys of 16 random bytes with 100-byte values, one fixed seed, every engine \
         in its own process; the read-write phase ran {} s. Lower is better except where the \
         unit is per second. **Bold**: the best of the row. Last column: rbolt's value over \
         the best peer's.{runs}\n",
        group_thousands(compare.n),
        compare.rw_secs
    )?;
    let (header, rows) = comparison_rows(&engines);
    table(md, &header, &rows)?;
    let baseline_mib = engines
        .iter()
        .flat_map(|(_, lines)| lines.iter())
        .filter_map(|v| v["rss_kib"]["baseline"].as_f64())
        .fold(0.0, f64::max)
        / 1024.0;
    let page_sizes = page_sizes(&engines);
    writeln!(
        md,
        "\n¹ LMDB allocates in C, which the counting allocator does not see.\n\n\
         Bytes written are what the process passed to write system calls (`wchar`), background \
         threads included, plus what rbolt copied into its file through a writable mapping \
         (its storage counts them: a page written again before a sync is copied, not passed \
         to `pwrite`). An engine that defers writes (redb with `Durability::None` writes \
         nothing until a durable commit) shows less, so these rows have no best and no ratio. \
         The floor row measures the disk, not the engine.\n\n\
         Per transaction means over the write transactions the phase committed: (d) its \
         1,000 commits, (e) its 1,000 transactions, (f) N/2 keys in transactions of 10,000 \
         (rounded up), (g) however many the writer committed in the time. Pages written are \
         bytes written over the engine's page size ({page_sizes}): write calls do not count \
         pages, so 2.5 pages is 2.5 pages' worth of bytes, and an engine without fixed pages \
         has none. CPU time is the process's user and system time over the phase, every \
         thread's (`/proc/self/stat`, in 10 ms ticks: about ±20 µs a transaction over the \
         1,000 of (d) or (e)); in (g) that includes the readers, so the writer thread's own \
         time (its schedstat, in ns) is beside it, without any background thread of the \
         engine's, with the time the writer was runnable but waiting for a CPU (schedstat's \
         run-queue time: three busy threads share two cores here) and the rest of its wall \
         time, when it was blocked (a lock, a sync, a page fault's read). The system time \
         alone (`stime`, same ticks) is the kernel's share: for these phases mostly the \
         write system calls, the syncs' writeback and page faults; write system calls are \
         `syscw` of /proc/self/io, one per `write`, `pwrite` or `pwritev` whatever its size. \
         Wall time beside CPU time shows what the commit spent waiting, mostly on the disk.\n\n\
         RSS counts the resident pages of a mapped file too (rbolt, LMDB, jammdb and bbolt-rs \
         map theirs); about {baseline_mib:.0} MiB of it is the workload's own key arrays, the \
         same in every process (the peak before the store was opened)."
    )?;
    writeln!(
        md,
        "\n### File size after each phase (MiB, as `ls -l` shows; medians)\n"
    )?;
    let mut header = vec![("after", Align::Left)];
    header.extend(engines.iter().map(|(name, _)| (*name, Align::Right)));
    let rows: Vec<Vec<String>> = SIZE_PHASES
        .iter()
        .map(|(phase_name, label)| {
            let mut row = vec![label.to_string()];
            for (_, lines) in &engines {
                let sizes = lines
                    .iter()
                    .filter_map(|v| mib(phase(v, phase_name, "file_bytes")));
                row.push(stat(sizes).map_or("—".into(), |s| format_value(s.median)));
            }
            row
        })
        .collect();
    table(md, &header, &rows)?;

    writeln!(md, "\n### Charts\n")?;
    for (family, title) in FAMILIES {
        writeln!(md, "- [{title}]({family}.svg)")?;
    }

    writeln!(md, "\n### What each engine used\n")?;
    let header = [
        "engine",
        "version",
        "durable commit",
        "durability off, (e), (g0) and (g)",
        "sorted load (a2)",
    ]
    .map(|title| (title, Align::Left));
    let rows: Vec<Vec<String>> = compare
        .runs
        .iter()
        .map(|run| {
            let notes = run.ok().first().map(|v| &v["notes"]);
            let note = |key: &str| {
                notes
                    .and_then(|n| n[key].as_str())
                    .unwrap_or("—")
                    .to_owned()
            };
            vec![
                run.name.clone(),
                run.version.clone(),
                note("durable"),
                note("sync_off"),
                note("sorted_load"),
            ]
        })
        .collect();
    table(md, &header, &rows)?;
    writeln!(
        md,
        "\nEvery engine: the same keys in the same order; one bucket/table/database; \
         values checked on every read; (f) and (d) durable; readers in (g0) and (g) use \
         read transactions of 1,000 gets. The writer of (g0) rewrites surviving keys at \
         200 transactions a second for every engine, so that its readers' rate compares read \
         paths beside the same writer work and the same keys; (g)'s writer puts new keys as \
         fast as the engine takes them."
    )?;

    let failed: Vec<&EngineRun> = compare
        .runs
        .iter()
        .filter(|r| !r.errors().is_empty())
        .collect();
    let not_asked: Vec<&str> = ENGINES
        .iter()
        .copied()
        .filter(|e| !compare.runs.iter().any(|r| r.name == *e))
        .collect();
    if !failed.is_empty() || !not_asked.is_empty() {
        writeln!(md, "\n### Left out\n")?;
        for run in failed {
            let errors = run.errors();
            let count = if run.results.len() > 1 {
                format!("{} of {} runs: ", errors.len(), run.results.len())
            } else {
                String::new()
            };
            if run.wall_secs > 0.0 {
                writeln!(
                    md,
                    "- {}: {count}{} (after {:.0} s in all)",
                    run.name, errors[0], run.wall_secs
                )?;
            } else {
                writeln!(md, "- {}: {count}{}", run.name, errors[0])?;
            }
        }
        for name in not_asked {
            writeln!(md, "- {name}: not in --engines")?;
        }
    }
    Ok(())
}

/// The comparison's main table: its header (workload, unit, one column an engine, the ratio)
/// and one row a metric of [`METRICS`], each cell the median (and range) of that engine's runs.
fn comparison_rows<'a>(
    engines: &[(&'a str, Vec<&Value>)],
) -> (Vec<(&'a str, Align)>, Vec<Vec<String>>) {
    let mut header = vec![("workload", Align::Left), ("unit", Align::Left)];
    header.extend(engines.iter().map(|(name, _)| (*name, Align::Right)));
    header.push(("rbolt / best peer", Align::Left));
    let mut rows = Vec::new();
    for metric in METRICS {
        let stats: Vec<Option<Stat>> = engines
            .iter()
            .map(|(_, lines)| metric_stat(metric, lines))
            .collect();
        let values: Vec<Option<f64>> = stats.iter().map(|s| s.map(|s| s.median)).collect();
        let best_value = best(metric, &values).filter(|_| metric.comparable);
        let mut row = vec![metric.label.to_owned(), metric.unit.to_owned()];
        for ((_, lines), (stat, value)) in engines.iter().zip(stats.iter().zip(&values)) {
            let mut cell = stat.as_ref().map_or("—".into(), format_stat);
            if metric.unit == "allocs"
                && lines.first().map(|line| &line["notes"]["rust_heap_only"])
                    == Some(&Value::Bool(false))
            {
                cell.push_str(" ¹");
            }
            if value.is_some() && *value == best_value && engines.len() > 1 {
                cell = format!("**{cell}**");
            }
            row.push(cell);
        }
        let rbolt = engines
            .iter()
            .zip(&values)
            .find(|((name, _), _)| *name == "rbolt")
            .and_then(|(_, v)| *v);
        let peers: Vec<Option<f64>> = engines
            .iter()
            .zip(&values)
            .filter(|((name, _), _)| *name != "rbolt")
            .map(|(_, v)| *v)
            .collect();
        let ratio = if metric.comparable {
            ratio(metric, rbolt, best(metric, &peers))
        } else {
            "—".into()
        };
        row.push(ratio);
        rows.push(row);
    }
    (header, rows)
}

/// "rbolt 4096, sled none": each engine's page size as its first line gives it; "not
/// recorded" for lines from before the engines reported one.
fn page_sizes(engines: &[(&str, Vec<&Value>)]) -> String {
    engines
        .iter()
        .map(|(name, lines)| {
            let size = match lines.first().and_then(|v| v.get("page_size")) {
                None => "not recorded".to_string(),
                Some(Value::Null) => "none".to_string(),
                Some(size) => size.to_string(),
            };
            format!("{name} {size}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn micro_section(md: &mut String, micro: &Micro) -> Result<()> {
    writeln!(md, "\n## Micro benchmarks (criterion medians)\n")?;
    writeln!(
        md,
        "Named after the bbolt benchmarks they mirror; full reports in `target/criterion/`.\n"
    )?;
    let with_change = micro.benches.iter().any(|b| b.change.is_some());
    let mut header = vec![
        ("benchmark", Align::Left),
        ("median", Align::Right),
        ("throughput", Align::Right),
    ];
    if with_change {
        header.push(("change vs baseline", Align::Right));
    }
    let mut rows = Vec::new();
    for bench in &micro.benches {
        let throughput = bench.throughput.map_or("—".into(), |(amount, unit)| {
            format!(
                "{} {unit}/s",
                format_value(amount / (bench.median_ns / 1e9))
            )
        });
        let mut row = vec![bench.id.clone(), format_ns(bench.median_ns), throughput];
        if with_change {
            row.push(
                bench
                    .change
                    .map_or("—".into(), |c| format!("{:+.1}%", c * 100.0)),
            );
        }
        rows.push(row);
    }
    table(md, &header, &rows)?;
    if !micro.allocs.is_empty() {
        writeln!(
            md,
            "\nAllocations per operation, as the benchmarks count them:\n"
        )?;
        writeln!(md, "```")?;
        for line in &micro.allocs {
            writeln!(md, "{line}")?;
        }
        writeln!(md, "```")?;
    }
    Ok(())
}

pub fn group_thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The current UTC time as `YYYY-MM-DD HH:MM UTC`.
pub fn utc_now() -> String {
    utc_date(std::time::SystemTime::now())
}

/// `time` as the report writes dates: `2026-01-01 00:00 UTC`.
pub fn utc_date(time: std::time::SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(time)
        .format("%Y-%m-%d %H:%M UTC")
        .to_string()
}

/// How a column's cells line up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Align {
    Left,
    Right,
}

/// Writes a markdown table: the header row, the alignment row, then one line a row. A `|` in
/// a cell is escaped, so no text can break the table.
pub(crate) fn table(
    md: &mut String,
    header: &[(&str, Align)],
    rows: &[Vec<String>],
) -> std::fmt::Result {
    let line = |md: &mut String, cells: &mut dyn Iterator<Item = String>| {
        md.push('|');
        for cell in cells {
            write!(md, " {} |", cell.replace('|', "\\|"))?;
        }
        md.push('\n');
        Ok(())
    };
    line(md, &mut header.iter().map(|(title, _)| title.to_string()))?;
    md.push('|');
    for (_, align) in header {
        md.push_str(match align {
            Align::Left => "---|",
            Align::Right => "---:|",
        });
    }
    md.push('\n');
    for row in rows {
        debug_assert_eq!(row.len(), header.len(), "a row has one cell a column");
        line(md, &mut row.iter().cloned())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::metrics::tests::line_with_txs;
    use super::*;

    #[test]
    fn values() {
        for (value, expected) in [
            (0.0, "0"),
            (0.01234, "0.012"),
            (1.234, "1.23"),
            (12.34, "12.3"),
            (1234.0, "1234"),
            (123_456.0, "123 k"),
            (1_234_567.0, "1.23 M"),
        ] {
            assert_eq!(format_value(value), expected);
        }
        assert_eq!(group_thousands(1_000_000), "1,000,000");
        assert_eq!(group_thousands(100), "100");
    }

    #[test]
    fn ratios() {
        let time = &METRICS[0];
        let rate = METRICS.iter().find(|m| m.higher_is_better).unwrap();
        assert_eq!(ratio(time, Some(1.0), Some(2.0)), "0.50 (better)");
        assert_eq!(ratio(time, Some(3.0), Some(2.0)), "1.50 (worse)");
        assert_eq!(ratio(rate, Some(3.0), Some(2.0)), "1.50 (better)");
        assert_eq!(ratio(rate, Some(1.0), Some(2.0)), "0.50 (worse)");
        assert_eq!(ratio(time, Some(0.0), Some(0.0)), "1.00 (tie)");
        assert_eq!(ratio(time, None, Some(1.0)), "—");
        assert_eq!(best(time, &[Some(2.0), None, Some(1.0)]), Some(1.0));
        assert_eq!(best(rate, &[Some(2.0), None, Some(1.0)]), Some(2.0));
    }

    #[test]
    fn stats_of_runs() {
        let s = stat([3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        let s = stat([4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.5, 1.0, 4.0, 4));
        assert_eq!(stat([f64::NAN]), None);
        assert_eq!(stat(std::iter::empty()), None);
        assert_eq!(format_stat(&stat([1.5]).unwrap()), "1.50");
        assert_eq!(format_stat(&stat([1.5, 1.5]).unwrap()), "1.50");
        assert_eq!(
            format_stat(&stat([1.2, 1.5, 1.9]).unwrap()),
            "1.50 (1.20–1.90)"
        );
    }

    #[test]
    fn tables() {
        let mut md = String::new();
        table(
            &mut md,
            &[("name", Align::Left), ("value", Align::Right)],
            &[vec!["a".into(), "1".into()], vec!["b|c".into(), "—".into()]],
        )
        .unwrap();
        assert_eq!(
            md,
            "| name | value |\n|---|---:|\n| a | 1 |\n| b\\|c | — |\n"
        );
    }

    #[test]
    fn page_sizes_as_the_lines_give_them() {
        let rbolt = line_with_txs("rbolt", Value::from(4096));
        let sled = line_with_txs("sled", Value::Null);
        let mut old = line_with_txs("lmdb", Value::Null);
        old.as_object_mut().unwrap().remove("page_size");
        assert_eq!(
            page_sizes(&[
                ("rbolt", vec![&rbolt]),
                ("sled", vec![&sled]),
                ("lmdb", vec![&old])
            ]),
            "rbolt 4096, sled none, lmdb not recorded"
        );
    }

    #[test]
    fn the_comparison_prints_the_new_rows() {
        let run = |name: &str, line: Value| EngineRun {
            name: name.into(),
            version: String::new(),
            results: vec![Ok(line)],
            wall_secs: 1.0,
        };
        let mut sled = line_with_txs("sled", Value::Null);
        sled["phases"]["commit_durable"]["cpu_secs"] = Value::from(0.08);
        let compare = Compare {
            command: "cargo xtask bench".into(),
            n: 100_000,
            rw_secs: 1.0,
            repeat: 1,
            runs: vec![
                run("rbolt", line_with_txs("rbolt", Value::from(4096))),
                run("sled", sled),
            ],
        };
        let mut md = String::new();
        comparison(&mut md, &compare).unwrap();
        for row in [
            "| (d) CPU time per durable 1-key commit | µs | **40.0** | 80.0 | 0.50 (better) |",
            "| (d) pages written per 1-key commit (bytes / page size) | pages | 2.00 | — | — |",
            "| (f) bytes written per 10,000-key delete transaction | KiB | 400 | 400 | — |",
            "| (g) the writer thread's own CPU time per transaction | µs | **2000** | **2000** | \
             1.00 (tie) |",
        ] {
            assert!(md.contains(row), "no row {row} in\n{md}");
        }
        assert!(md.contains("page size (rbolt 4096, sled none)"), "{md}");
    }

    #[test]
    fn date() {
        let now = utc_now();
        assert_eq!(now.len(), "2026-01-01 00:00 UTC".len(), "{now}");
        assert!(now.starts_with("20"), "{now}");
    }
}
