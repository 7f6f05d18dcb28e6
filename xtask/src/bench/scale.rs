//! `cargo xtask bench --scale` (issue 52): the comparison at growing N, loads in transactions
//! of 100,000 keys, with the rows that depend on the file's size (`benches/compare`'s
//! `--scale`). Writes `scale.json` (every run's line) and `scale.md`: each row's cost per
//! operation at each N for rbolt, its ratio to each peer, and how rbolt's cost grew from the
//! smallest N to the largest — the figure that says whether a cost follows the data's
//! logarithm or the file.

use super::report::metrics::phase;
use super::report::{Align, group_thousands, table, utc_now};
use super::{Args, Layout, compare};
use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::fmt::Write as _;

/// Seconds an engine's run at one N may take: 50M keys load, churn and copy about 10 GB.
pub const TIMEOUT_SECS: u64 = 4 * 3600;

/// Parses `1m,10m,50m` (or plain counts, `_` and `,` not allowed inside one) into ascending
/// N of at least 20,000 each.
pub fn parse_ns(list: &str) -> Result<Vec<usize>> {
    let mut ns = Vec::new();
    for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let lower = item.to_ascii_lowercase();
        let (digits, scale) = match lower.as_bytes().last() {
            Some(b'm') => (&lower[..lower.len() - 1], 1_000_000),
            Some(b'k') => (&lower[..lower.len() - 1], 1_000),
            _ => (&lower[..], 1),
        };
        let n: usize = digits
            .parse()
            .with_context(|| format!("--scale-n: {item:?} is not a count"))?;
        let n = n
            .checked_mul(scale)
            .with_context(|| format!("--scale-n: {item:?} is too large"))?;
        if n < 20_000 {
            bail!("--scale-n: {item:?} is below 20,000 (the delete phase's transactions)");
        }
        ns.push(n);
    }
    if ns.is_empty() {
        bail!("--scale-n names no N");
    }
    if ns.windows(2).any(|w| w[0] >= w[1]) {
        bail!("--scale-n must ascend: {list}");
    }
    Ok(ns)
}

/// One row of the scale table: its label, unit, which way is better, and how to read it.
struct Row {
    label: &'static str,
    unit: &'static str,
    higher_is_better: bool,
    get: fn(&Value) -> Option<f64>,
}

fn per_key_ns(v: &Value, name: &str) -> Option<f64> {
    Some(phase(v, name, "secs")? / v["n"].as_f64()? * 1e9)
}

fn per_tx_us(v: &Value, name: &str) -> Option<f64> {
    let txs = phase(v, name, "txs").filter(|&t| t > 0.0)?;
    Some(phase(v, name, "secs")? / txs * 1e6)
}

fn mib(bytes: Option<f64>) -> Option<f64> {
    bytes.map(|b| b / f64::from(1u32 << 20))
}

const ROWS: &[Row] = &[
    Row {
        label: "(a) random load, 100k-key txs",
        unit: "ns/key",
        higher_is_better: false,
        get: |v| per_key_ns(v, "load_random"),
    },
    Row {
        label: "(a2) sorted load, 100k-key txs",
        unit: "ns/key",
        higher_is_better: false,
        get: |v| per_key_ns(v, "load_sorted"),
    },
    Row {
        label: "(b) random get",
        unit: "ns/get",
        higher_is_better: false,
        get: |v| per_key_ns(v, "get_random"),
    },
    Row {
        label: "(b) disk reads per get (cold pages)",
        unit: "bytes/get",
        higher_is_better: false,
        get: |v| Some(phase(v, "get_random", "read_bytes")? / v["n"].as_f64()?),
    },
    Row {
        label: "(c) full scan",
        unit: "ns/entry",
        higher_is_better: false,
        get: |v| per_key_ns(v, "scan"),
    },
    Row {
        label: "(d) durable 1-key commit, p50",
        unit: "µs",
        higher_is_better: false,
        get: |v| phase(v, "commit_durable", "p50_us"),
    },
    Row {
        label: "(e) 100-key tx, no sync",
        unit: "µs/tx",
        higher_is_better: false,
        get: |v| per_tx_us(v, "batch_nosync"),
    },
    Row {
        label: "(f) delete half, 10k-key durable txs",
        unit: "µs/tx",
        higher_is_better: false,
        get: |v| per_tx_us(v, "delete_half"),
    },
    Row {
        label: "(g) 2 readers beside a writer",
        unit: "gets/s",
        higher_is_better: true,
        get: |v| phase(v, "read_write", "reads_per_sec"),
    },
    Row {
        label: "(g) the writer beside them",
        unit: "keys/s",
        higher_is_better: true,
        get: |v| phase(v, "read_write", "writes_per_sec"),
    },
    Row {
        label: "file after the load",
        unit: "MiB",
        higher_is_better: false,
        get: |v| mib(phase(v, "load_random", "file_bytes")),
    },
    Row {
        label: "file after churn",
        unit: "MiB",
        higher_is_better: false,
        get: |v| mib(phase(v, "read_write", "file_bytes")),
    },
    Row {
        label: "peak resident memory",
        unit: "MiB",
        higher_is_better: false,
        get: |v| Some(v["rss_kib"]["peak"].as_f64()? / 1024.0),
    },
    Row {
        label: "open after a clean close",
        unit: "ms",
        higher_is_better: false,
        get: |v| Some(phase(v, "open_clean", "secs")? * 1e3),
    },
    Row {
        label: "open after a kill (100 unsynced commits)",
        unit: "ms",
        higher_is_better: false,
        get: |v| Some(phase(v, "open_after_kill", "secs")? * 1e3),
    },
    Row {
        label: "check",
        unit: "s",
        higher_is_better: false,
        get: |v| phase(v, "check", "secs"),
    },
    Row {
        label: "hot backup",
        unit: "s",
        higher_is_better: false,
        get: |v| phase(v, "backup", "secs"),
    },
    Row {
        label: "compacting copy",
        unit: "s",
        higher_is_better: false,
        get: |v| phase(v, "compact", "secs"),
    },
    Row {
        label: "vacuum after deleting half, beside a writer",
        unit: "s",
        higher_is_better: false,
        get: |v| phase(v, "vacuum", "secs"),
    },
    Row {
        label: "the writer alone",
        unit: "keys/s",
        higher_is_better: true,
        get: |v| phase(v, "write_alone", "writes_per_sec"),
    },
    Row {
        label: "the writer during the vacuum",
        unit: "keys/s",
        higher_is_better: true,
        get: |v| phase(v, "vacuum", "writes_per_sec"),
    },
    Row {
        label: "the writer's 100-key tx p99, alone",
        unit: "µs",
        higher_is_better: false,
        get: |v| phase(v, "write_alone", "tx_p99_us"),
    },
    Row {
        label: "the writer's 100-key tx p99, during the vacuum",
        unit: "µs",
        higher_is_better: false,
        get: |v| phase(v, "vacuum", "tx_p99_us"),
    },
];

/// A number as the table shows it: three significant figures, thousands grouped.
fn cell(value: Option<f64>) -> String {
    match value {
        None => "—".into(),
        Some(v) if v.abs() >= 1000.0 => group_thousands(v.round() as usize),
        Some(v) if v.abs() >= 100.0 => format!("{v:.0}"),
        Some(v) if v.abs() >= 10.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.2}"),
    }
}

/// rbolt's value over a peer's, or "—".
fn ratio(rbolt: Option<f64>, peer: Option<f64>) -> String {
    match (rbolt, peer) {
        (Some(r), Some(p)) if p > 0.0 => format!("{:.2}", r / p),
        _ => "—".into(),
    }
}

/// The first finished run's line of `engine` in `compare`.
fn line<'a>(compare: &'a compare::Compare, engine: &str) -> Option<&'a Value> {
    compare
        .runs
        .iter()
        .find(|run| run.name == engine)
        .and_then(|run| run.ok().first().copied())
}

/// The markdown report of the runs at each N.
fn report(args: &Args, runs: &[(usize, compare::Compare)]) -> Result<String> {
    let mut md = String::new();
    writeln!(md, "# rbolt at scale\n")?;
    writeln!(md, "`{}`, {}.\n", args.command, utc_now())?;
    writeln!(
        md,
        "Per operation at each N (16-byte keys, 100-byte values; loads in transactions of \
         100,000 keys). A ratio is rbolt's figure over the peer's, so below 1 is rbolt ahead \
         where lower is better and behind where higher is better (marked ↑). \"growth\" is \
         rbolt's figure at the largest N over the smallest.\n"
    )?;
    let peers: Vec<&str> = args
        .engines
        .iter()
        .map(String::as_str)
        .filter(|e| *e != "rbolt")
        .collect();
    let mut header: Vec<String> = vec!["row".into(), "unit".into()];
    for (n, _) in runs {
        header.push(format!("rbolt {}", group_thousands(*n)));
        for peer in &peers {
            header.push(format!("÷{peer} {}", group_thousands(*n)));
        }
    }
    header.push("growth".into());
    let mut rows = Vec::new();
    for row in ROWS {
        let mut cells = vec![
            format!(
                "{}{}",
                row.label,
                if row.higher_is_better { " ↑" } else { "" }
            ),
            row.unit.to_string(),
        ];
        let mut rbolt_values = Vec::new();
        for (_, compare) in runs {
            let rbolt = line(compare, "rbolt").and_then(|v| (row.get)(v));
            rbolt_values.push(rbolt);
            cells.push(cell(rbolt));
            for peer in &peers {
                cells.push(ratio(rbolt, line(compare, peer).and_then(|v| (row.get)(v))));
            }
        }
        let growth = ratio(
            rbolt_values.last().copied().flatten(),
            rbolt_values.first().copied().flatten(),
        );
        cells.push(if runs.len() > 1 { growth } else { "—".into() });
        rows.push(cells);
    }
    let header: Vec<(&str, Align)> = header
        .iter()
        .enumerate()
        .map(|(i, h)| (h.as_str(), if i == 0 { Align::Left } else { Align::Right }))
        .collect();
    table(&mut md, &header, &rows)?;
    for (n, compare) in runs {
        for run in &compare.runs {
            for error in run.errors() {
                writeln!(md, "\n{} at N = {}: no result: {error}", run.name, n)?;
            }
        }
    }
    Ok(md)
}

/// Runs the comparison with `--scale` at each N of `args.scale`, then writes the report.
pub fn run(layout: &Layout, args: &Args) -> Result<()> {
    let mut runs = Vec::new();
    for &n in &args.scale {
        eprintln!("== scale: N = {}", group_thousands(n));
        let at_n = Args { n, ..args.clone() };
        runs.push((n, compare::run(layout, &at_n)?));
    }
    let lines: Vec<Value> = runs
        .iter()
        .flat_map(|(_, compare)| compare.runs.iter())
        .flat_map(|run| run.ok().into_iter().cloned())
        .collect();
    let json = layout.report.join("scale.json");
    std::fs::write(&json, serde_json::to_string_pretty(&lines)?)
        .with_context(|| format!("writing {}", json.display()))?;
    let md = layout.report.join("scale.md");
    std::fs::write(&md, report(args, &runs)?)
        .with_context(|| format!("writing {}", md.display()))?;
    eprintln!("wrote {} and {}", md.display(), json.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_lists() {
        assert_eq!(
            parse_ns("1m,10m,50M").unwrap(),
            [1_000_000, 10_000_000, 50_000_000]
        );
        assert_eq!(parse_ns("100k, 2000000").unwrap(), [100_000, 2_000_000]);
        assert!(parse_ns("10m,1m").is_err(), "not ascending");
        assert!(parse_ns("10k").is_err(), "below 20,000");
        assert!(parse_ns("x").is_err());
        assert!(parse_ns("").is_err());
    }

    #[test]
    fn cells_and_ratios() {
        assert_eq!(cell(None), "—");
        assert_eq!(cell(Some(1234.4)), "1,234");
        assert_eq!(cell(Some(12.345)), "12.3");
        assert_eq!(cell(Some(0.5)), "0.50");
        assert_eq!(ratio(Some(1.0), Some(2.0)), "0.50");
        assert_eq!(ratio(Some(1.0), Some(0.0)), "—");
        assert_eq!(ratio(None, Some(1.0)), "—");
    }
}
