//! `cargo xtask bench --scale` (issue 52): the comparison at growing N, loads in transactions
//! of 100,000 keys, with the rows that depend on the file's size (`benches/compare`'s
//! `--scale`). Writes `scale.json` (the command and every run's line), `scale.md` (each row's
//! cost per operation at each N for rbolt, its ratio to each peer, and how rbolt's cost grew
//! from the smallest N to the largest — the figure that says whether a cost follows the
//! data's logarithm or the file) and `scale.svg` (a panel per row, `scale_chart.rs`). With
//! `--replot` it writes the last two again from `scale.json`; with `--doc` it also writes the
//! table and the chart into the "At scale" section of `docs/BENCHMARKS.md`, between two
//! marker lines. A run and a replot share one path: both draw everything from the lines.

use super::report::metrics::phase;
use super::report::{Align, group_thousands, replace_between, table, utc_date, utc_now};
use super::{Args, Layout, compare, scale_chart};
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::path::Path;

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

/// What `scale.json` holds: the command that ran and one line per engine run at each N, as
/// the comparison printed it; a run that gave no result is `{"engine", "n", "error"}`. The
/// report, the chart and the document's section are all drawn from these lines, after a run
/// and on `--replot` alike.
pub struct ScaleRun {
    pub command: String,
    pub lines: Vec<Value>,
}

impl ScaleRun {
    /// The lines of the comparisons at each N, errors included.
    fn from_runs(command: &str, runs: &[(usize, compare::Compare)]) -> Self {
        let mut lines = Vec::new();
        for (n, compare) in runs {
            for run in &compare.runs {
                for result in &run.results {
                    lines.push(match result {
                        Ok(line) => line.clone(),
                        Err(error) => json!({ "engine": run.name, "n": n, "error": error }),
                    });
                }
            }
        }
        Self {
            command: command.to_string(),
            lines,
        }
    }

    /// Reads `scale.json`. A file of the first scale run is a bare array of the finished
    /// lines; its command is rebuilt from the engines and N of those lines.
    pub fn load(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let raw: Value =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let (command, lines) = match raw {
            Value::Array(lines) => (None, lines),
            mut raw => (
                raw["command"].as_str().map(String::from),
                raw["lines"].take().as_array().cloned().unwrap_or_default(),
            ),
        };
        let mut scale = Self {
            command: command.unwrap_or_default(),
            lines,
        };
        if scale.command.is_empty() {
            scale.command = scale.rebuilt_command();
        }
        Ok(scale)
    }

    fn to_json(&self) -> Value {
        json!({ "command": self.command, "lines": self.lines })
    }

    /// `cargo xtask bench --scale --scale-n ... --engines ...` for these lines.
    fn rebuilt_command(&self) -> String {
        let ns: Vec<String> = self.ns().iter().map(|n| short_n(*n as f64)).collect();
        let peers: Vec<&str> = self
            .engines()
            .into_iter()
            .filter(|e| *e != "rbolt")
            .collect();
        let mut command = format!("cargo xtask bench --scale --scale-n {}", ns.join(","));
        if !peers.is_empty() {
            write!(command, " --engines {}", peers.join(",")).ok();
        }
        command
    }

    /// The engines of the lines, rbolt first, then in the order they ran.
    fn engines(&self) -> Vec<&str> {
        let mut engines = vec!["rbolt"];
        for engine in self.lines.iter().filter_map(|l| l["engine"].as_str()) {
            if !engines.contains(&engine) {
                engines.push(engine);
            }
        }
        engines
    }

    /// The N of the lines, ascending.
    fn ns(&self) -> Vec<usize> {
        let mut ns: Vec<usize> = self
            .lines
            .iter()
            .filter_map(|l| l["n"].as_u64())
            .map(|n| n as usize)
            .collect();
        ns.sort_unstable();
        ns.dedup();
        ns
    }

    /// The first finished run's line of `engine` at `n`.
    fn line(&self, engine: &str, n: usize) -> Option<&Value> {
        self.lines.iter().find(|l| {
            l["engine"] == engine && l["n"].as_u64() == Some(n as u64) && l.get("error").is_none()
        })
    }

    /// `row`'s figure for `engine` at `n`.
    fn value(&self, row: &Row, engine: &str, n: usize) -> Option<f64> {
        self.line(engine, n).and_then(|v| (row.get)(v))
    }

    /// The rows that have a figure for some engine at some N.
    fn measured_rows(&self) -> impl Iterator<Item = &'static Row> {
        let (engines, ns) = (self.engines(), self.ns());
        ROWS.iter().filter(move |row| {
            engines
                .iter()
                .any(|e| ns.iter().any(|&n| self.value(row, e, n).is_some()))
        })
    }

    /// Each run that gave no result: engine, N and why.
    fn errors(&self) -> impl Iterator<Item = (&str, u64, &str)> {
        self.lines.iter().filter_map(|l| {
            Some((
                l["engine"].as_str()?,
                l["n"].as_u64()?,
                l["error"].as_str()?,
            ))
        })
    }
}

/// N as the chart's axis writes it: `1M`, `10M`, `500k`.
pub fn short_n(n: f64) -> String {
    let (value, suffix) = if n >= 1e6 {
        (n / 1e6, "m")
    } else if n >= 1e3 {
        (n / 1e3, "k")
    } else {
        (n, "")
    };
    let digits = if (value - value.round()).abs() < 1e-9 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    };
    format!("{digits}{suffix}")
}

/// A row's title: its label, with "↑" when higher is better.
fn title(row: &Row) -> String {
    format!(
        "{}{}",
        row.label,
        if row.higher_is_better { " ↑" } else { "" }
    )
}

/// The table of `scale`: each measured row's figure for rbolt at each N, its ratio to each
/// peer's, and its growth from the smallest N to the largest; then the runs with no result.
fn table_md(scale: &ScaleRun) -> Result<String> {
    let peers: Vec<&str> = scale.engines().into_iter().skip(1).collect();
    let ns = scale.ns();
    let mut header: Vec<String> = vec!["row".into(), "unit".into()];
    for n in &ns {
        header.push(format!("rbolt {}", group_thousands(*n)));
        for peer in &peers {
            header.push(format!("÷{peer} {}", group_thousands(*n)));
        }
    }
    header.push("growth".into());
    let mut rows = Vec::new();
    for row in scale.measured_rows() {
        let mut cells = vec![title(row), row.unit.to_string()];
        for &n in &ns {
            let rbolt = scale.value(row, "rbolt", n);
            cells.push(cell(rbolt));
            for peer in &peers {
                cells.push(ratio(rbolt, scale.value(row, peer, n)));
            }
        }
        let growth = match (ns.first(), ns.last()) {
            (Some(&low), Some(&high)) if low < high => ratio(
                scale.value(row, "rbolt", high),
                scale.value(row, "rbolt", low),
            ),
            _ => "—".into(),
        };
        cells.push(growth);
        rows.push(cells);
    }
    let header: Vec<(&str, Align)> = header
        .iter()
        .enumerate()
        .map(|(i, h)| (h.as_str(), if i == 0 { Align::Left } else { Align::Right }))
        .collect();
    let mut md = String::new();
    table(&mut md, &header, &rows)?;
    for (engine, n, error) in scale.errors() {
        writeln!(
            md,
            "\n{engine} at N = {}: no result: {error}",
            group_thousands(n as usize)
        )?;
    }
    Ok(md)
}

/// What a cell of the table holds.
const READING: &str = "Per operation at each N (16-byte keys, 100-byte values; loads in \
    transactions of 100,000 keys). A ratio is rbolt's figure over the peer's, so below 1 is \
    rbolt ahead where lower is better and behind where higher is better (marked ↑). \
    \"growth\" is rbolt's figure at the largest N over the smallest.";

/// The markdown report of the runs at each N: `scale.md`.
fn report(scale: &ScaleRun, date: &str) -> Result<String> {
    let mut md = String::new();
    writeln!(md, "# rbolt at scale\n")?;
    writeln!(md, "`{}`, {date}.\n", scale.command)?;
    writeln!(md, "{READING} Chart: [scale.svg](scale.svg).\n")?;
    md.push_str(&table_md(scale)?);
    Ok(md)
}

/// The line before the scale section's table in `docs/BENCHMARKS.md`; up to [`DOC_END`] is
/// the generator's.
const DOC_BEGIN: &str =
    "<!-- scale:begin (written by `cargo xtask bench --scale --doc`; do not edit) -->";
/// The line after it.
const DOC_END: &str = "<!-- scale:end -->";
/// Where the document's chart goes, from the workspace root, and how the document links it.
const DOC_CHART: &str = "docs/bench/scale.svg";
const DOC_CHART_LINK: &str = "bench/scale.svg";

/// The section written around the markers when the document has none, before its "Logs".
const DOC_SECTION: &str = "## At scale\n\nThe comparison at growing N with the rows that \
    depend on the file's size, written by\n`cargo xtask bench --scale --doc` (or `--scale \
    --replot --doc`, from the last `scale.json`).\n\n";

/// The block between the scale markers: the command and day, the table and the chart.
fn doc_block(scale: &ScaleRun, date: &str) -> Result<String> {
    let day = date.get(..10).unwrap_or(date);
    let mut md = String::new();
    writeln!(md, "`{}`, results of {day}. {READING}\n", scale.command)?;
    md.push_str(&table_md(scale)?);
    writeln!(
        md,
        "\n![rbolt and its peers against N, a panel per row]({DOC_CHART_LINK})"
    )?;
    Ok(md)
}

/// `text` with `block` between its scale markers, adding the "At scale" section (before
/// "## Logs", or at the end) when they are missing.
fn with_doc_block(text: &str, block: &str) -> Result<String> {
    if text.contains(DOC_BEGIN) {
        return replace_between(text, DOC_BEGIN, DOC_END, block);
    }
    let section = format!("{DOC_SECTION}{DOC_BEGIN}\n{block}{DOC_END}\n");
    Ok(match text.find("\n## Logs\n") {
        Some(at) => format!("{}{section}\n{}", &text[..=at], &text[at + 1..]),
        None => format!("{}\n\n{section}", text.trim_end()),
    })
}

/// Writes scale.md and scale.svg from `scale`, and with `--doc` the section of
/// docs/BENCHMARKS.md and its chart.
fn write_outputs(layout: &Layout, args: &Args, scale: &ScaleRun, date: &str) -> Result<()> {
    let md = layout.report.join("scale.md");
    std::fs::write(&md, report(scale, date)?)
        .with_context(|| format!("writing {}", md.display()))?;
    let svg = layout.report.join("scale.svg");
    scale_chart::write(&svg, &panels(scale), &scale.engines())?;
    eprintln!("wrote {} and {}", md.display(), svg.display());
    if !args.doc {
        return Ok(());
    }
    let chart = layout.workspace.join(DOC_CHART);
    if let Some(dir) = chart.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::copy(&svg, &chart).with_context(|| format!("copying to {}", chart.display()))?;
    let doc = layout.workspace.join("docs/BENCHMARKS.md");
    let text =
        std::fs::read_to_string(&doc).with_context(|| format!("reading {}", doc.display()))?;
    let new = with_doc_block(&text, &doc_block(scale, date)?)
        .with_context(|| format!("the scale markers in {}", doc.display()))?;
    std::fs::write(&doc, new).with_context(|| format!("writing {}", doc.display()))?;
    eprintln!(
        "wrote the scale section of {} and {}",
        doc.display(),
        chart.display()
    );
    Ok(())
}

/// The chart's panels: a measured row each, with each engine's figures against N.
fn panels(scale: &ScaleRun) -> Vec<scale_chart::Panel> {
    let ns = scale.ns();
    scale
        .measured_rows()
        .map(|row| scale_chart::Panel {
            title: format!("{} ({})", title(row), row.unit),
            series: scale
                .engines()
                .iter()
                .map(|engine| {
                    ns.iter()
                        .filter_map(|&n| Some((n as f64, scale.value(row, engine, n)?)))
                        .collect()
                })
                .collect(),
        })
        .collect()
}

/// Runs the comparison with `--scale` at each N of `args.scale`, then writes the report.
pub fn run(layout: &Layout, args: &Args) -> Result<()> {
    let mut runs = Vec::new();
    for &n in &args.scale {
        eprintln!("== scale: N = {}", group_thousands(n));
        let at_n = Args { n, ..args.clone() };
        runs.push((n, compare::run(layout, &at_n)?));
    }
    let scale = ScaleRun::from_runs(&args.command, &runs);
    let json = layout.report.join("scale.json");
    std::fs::write(&json, serde_json::to_string_pretty(&scale.to_json())?)
        .with_context(|| format!("writing {}", json.display()))?;
    eprintln!("wrote {}", json.display());
    write_outputs(layout, args, &scale, &utc_now())
}

/// `--scale --replot`: rewrites the report and the chart (and with `--doc` the document's
/// section) from the last `scale.json`; runs nothing.
pub fn replot(layout: &Layout, args: &Args) -> Result<()> {
    let json = layout.report.join("scale.json");
    let scale = ScaleRun::load(&json)?;
    let written = std::fs::metadata(&json)
        .and_then(|m| m.modified())
        .map_or_else(|_| utc_now(), utc_date);
    write_outputs(layout, args, &scale, &written)
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

    /// A line of `engine` at `n` with a random load of `load_secs` and a check of
    /// `check_secs` (the other rows' phases absent).
    fn line(engine: &str, n: u64, load_secs: f64, check_secs: Option<f64>) -> Value {
        let mut phases = json!({ "load_random": { "secs": load_secs } });
        if let Some(secs) = check_secs {
            phases["check"] = json!({ "secs": secs });
        }
        json!({ "engine": engine, "n": n, "phases": phases })
    }

    fn sample() -> ScaleRun {
        ScaleRun {
            command: "cargo xtask bench --scale --scale-n 1m,10m --engines lmdb".into(),
            lines: vec![
                line("lmdb", 1_000_000, 4.0, None),
                line("rbolt", 1_000_000, 2.0, Some(0.5)),
                line("rbolt", 10_000_000, 30.0, Some(10.0)),
                json!({ "engine": "lmdb", "n": 10_000_000, "error": "timed out" }),
            ],
        }
    }

    #[test]
    fn the_table_from_the_lines() {
        let scale = sample();
        assert_eq!(scale.engines(), ["rbolt", "lmdb"]);
        assert_eq!(scale.ns(), [1_000_000, 10_000_000]);
        let md = table_md(&scale).unwrap();
        let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| ")).collect();
        assert_eq!(
            rows,
            [
                "| row | unit | rbolt 1,000,000 | ÷lmdb 1,000,000 | rbolt 10,000,000 | \
                 ÷lmdb 10,000,000 | growth |",
                "| (a) random load, 100k-key txs | ns/key | 2,000 | 0.50 | 3,000 | — | 1.50 |",
                "| check | s | 0.50 | — | 10.0 | — | 20.00 |",
            ],
            "{md}"
        );
        assert!(
            md.contains("lmdb at N = 10,000,000: no result: timed out"),
            "{md}"
        );
        // With one N there is no growth.
        let one = ScaleRun {
            command: String::new(),
            lines: scale.lines[1..2].to_vec(),
        };
        let md = table_md(&one).unwrap();
        assert!(
            md.contains("| (a) random load, 100k-key txs | ns/key | 2,000 | — |\n"),
            "{md}"
        );
        // The chart has the same rows, each engine's points at the N it has.
        let panels = panels(&scale);
        assert_eq!(panels.len(), 2);
        assert_eq!(panels[0].title, "(a) random load, 100k-key txs (ns/key)");
        assert_eq!(
            panels[0].series,
            [vec![(1e6, 2000.0), (1e7, 3000.0)], vec![(1e6, 4000.0)]]
        );
        assert_eq!(panels[1].series[1], []);
    }

    #[test]
    fn scale_json_round_trips_and_the_first_format_reads() {
        let scale = sample();
        let dir = std::env::temp_dir().join(format!("xtask-scale-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("scale.json");
        std::fs::write(&path, scale.to_json().to_string()).unwrap();
        let back = ScaleRun::load(&path).unwrap();
        assert_eq!(back.command, scale.command);
        assert_eq!(back.lines, scale.lines);
        // The first run's file: a bare array of the finished lines.
        let bare = Value::Array(scale.lines[..3].to_vec());
        std::fs::write(&path, bare.to_string()).unwrap();
        let old = ScaleRun::load(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            old.command,
            "cargo xtask bench --scale --scale-n 1m,10m --engines lmdb"
        );
        assert_eq!(short_n(500_000.0), "500k");
        assert_eq!(short_n(2_500_000.0), "2.5m");
    }

    #[test]
    fn the_section_goes_between_its_markers_or_before_the_logs() {
        let doc = "# B\n\n## Current figures\n\nx\n\n## Logs\n\nlogs\n";
        let new = with_doc_block(doc, "table 1\n").unwrap();
        assert_eq!(
            new,
            format!(
                "# B\n\n## Current figures\n\nx\n\n{DOC_SECTION}{DOC_BEGIN}\ntable 1\n\
                 {DOC_END}\n\n## Logs\n\nlogs\n"
            )
        );
        // Once there, only what lies between the markers changes.
        let again = with_doc_block(&new, "table 2\n").unwrap();
        assert_eq!(again, new.replace("table 1", "table 2"));
        assert_eq!(with_doc_block(&again, "table 2\n").unwrap(), again);
        // A document without "## Logs" gets the section at its end.
        let end = with_doc_block("# B\n\ntext\n\n", "t\n").unwrap();
        assert_eq!(
            end,
            format!("# B\n\ntext\n\n{DOC_SECTION}{DOC_BEGIN}\nt\n{DOC_END}\n")
        );
        // A begin marker without its end is an error, not a section appended twice.
        assert!(with_doc_block(&format!("{DOC_BEGIN}\nx\n"), "t\n").is_err());
        let block = doc_block(&sample(), "2026-12-07 19:35 UTC").unwrap();
        assert!(block.starts_with("`cargo xtask bench --scale --scale-n 1m,10m --engines lmdb`, results of 2026-12-07. "), "{block}");
        assert!(block.ends_with(&format!("({DOC_CHART_LINK})\n")), "{block}");
    }
}
