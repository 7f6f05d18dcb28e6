//! The current table of `docs/BENCHMARKS.md`: the comparison's main table, written between
//! two marker comments by every full run (N of at least [`DOC_TABLE_N_MIN`]) and by
//! `--replot` of a full run's saved `compare.json`, so that the table is never typed by hand.
//! A smaller run writes it only when asked (`--doc`).

use super::super::compare::Compare;
use super::{comparison_rows, group_thousands, table};
use anyhow::{Context, Result, bail};
use std::fmt::Write as _;
use std::path::Path;

/// The smallest N whose results replace the document's table without `--doc`: the full run's.
pub const DOC_TABLE_N_MIN: usize = 1_000_000;

/// The line before the table. Everything up to [`END`] is the generator's.
const BEGIN: &str = "<!-- bench-table:begin (written by `cargo xtask bench`; do not edit) -->";
/// The line after it.
const END: &str = "<!-- bench-table:end -->";

/// The block between the markers: the command and the day of the results, what a cell
/// holds, the table (rows no engine measured left out) and its footnote.
pub fn block(compare: &Compare, date: &str) -> Result<String> {
    let engines: Vec<_> = compare.ok().collect();
    let mut md = String::new();
    // The day is enough: the log of the run (`docs/bench-log/`) has the rest.
    let day = date.get(..10).unwrap_or(date);
    writeln!(md, "`{}`, results of {day}.", compare.command)?;
    let runs = if compare.repeat > 1 {
        format!(
            " Each engine ran {} times, the engines taking turns: a cell is the median of its \
             runs with the lowest and highest in brackets; the best and the ratio compare \
             medians.",
            compare.repeat
        )
    } else {
        String::new()
    };
    writeln!(
        md,
        "N = {} keys, read-write phases of {} s. Lower is better except per second. \
         **Bold**: the best of the row. Last column: rbolt over the best peer.{runs}\n",
        group_thousands(compare.n),
        compare.rw_secs
    )?;
    let (header, rows) = comparison_rows(&engines);
    let measured: Vec<Vec<String>> = rows
        .into_iter()
        .filter(|row| row[2..row.len() - 1].iter().any(|cell| cell != "—"))
        .collect();
    table(&mut md, &header, &measured)?;
    if md.contains(" ¹") {
        writeln!(
            md,
            "\n¹ LMDB allocates in C, which the counting allocator does not see."
        )?;
    }
    Ok(md)
}

/// Replaces what lies between the markers of `text` with `block`.
pub fn replace_block(text: &str, block: &str) -> Result<String> {
    replace_between(text, BEGIN, END, block)
}

/// Replaces what lies between the lines `begin_line` and `end_line` of `text` with `block`
/// (the scale section of `--scale --doc` has its own markers).
pub fn replace_between(
    text: &str,
    begin_line: &str,
    end_line: &str,
    block: &str,
) -> Result<String> {
    let Some(begin) = text.find(begin_line) else {
        bail!("no line {begin_line}");
    };
    let after_begin = begin + begin_line.len();
    let Some(end) = text[after_begin..]
        .find(end_line)
        .map(|at| after_begin + at)
    else {
        bail!("no line {end_line} after {begin_line}");
    };
    Ok(format!(
        "{}\n{}{}",
        &text[..after_begin],
        block,
        &text[end..]
    ))
}

/// Writes `compare`'s table into the document at `path`, between its markers.
pub fn write_doc(path: &Path, compare: &Compare, date: &str) -> Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let new = replace_block(&text, &block(compare, date)?)
        .with_context(|| format!("the table's markers in {}", path.display()))?;
    std::fs::write(path, new).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::super::super::compare::EngineRun;
    use super::super::metrics::tests::line_with_txs;
    use super::*;
    use serde_json::Value;

    #[test]
    fn the_block_goes_between_the_markers_and_only_there() {
        let text = format!("# Doc\n\nbefore\n{BEGIN}\nold table\n{END}\nafter\n");
        let new = replace_block(&text, "new table\n").unwrap();
        assert_eq!(
            new,
            format!("# Doc\n\nbefore\n{BEGIN}\nnew table\n{END}\nafter\n")
        );
        assert_eq!(replace_block(&new, "new table\n").unwrap(), new);
        assert!(replace_block("no markers", "x").is_err());
        assert!(replace_block(&format!("{END}\n{BEGIN}\n"), "x").is_err());
    }

    #[test]
    fn the_block_holds_the_measured_rows_only() {
        let run = |name: &str, line: Value| EngineRun {
            name: name.into(),
            version: String::new(),
            results: vec![Ok(line)],
            wall_secs: 1.0,
        };
        // Lines without (g0) and without several phases: those rows stay out.
        let compare = Compare {
            command: "cargo xtask bench --only compare".into(),
            n: 1_000_000,
            rw_secs: 5.0,
            repeat: 1,
            runs: vec![
                run("rbolt", line_with_txs("rbolt", Value::from(4096))),
                run("lmdb", line_with_txs("lmdb", Value::Null)),
            ],
        };
        let block = block(&compare, "2026-12-01").unwrap();
        assert!(
            block.starts_with("`cargo xtask bench --only compare`, results of 2026-12-01.\n"),
            "{block}"
        );
        assert!(block.contains("N = 1,000,000 keys"), "{block}");
        assert!(
            block.contains("| workload | unit | rbolt | lmdb | rbolt / best peer |"),
            "{block}"
        );
        assert!(
            block.contains("| (d) CPU time per durable 1-key commit | µs |"),
            "{block}"
        );
        for line in block.lines().filter(|l| l.starts_with("| (")) {
            let cells: Vec<&str> = line.split(" | ").collect();
            assert!(
                cells[2..cells.len() - 1].iter().any(|c| *c != "—"),
                "a row no engine measured: {line}"
            );
        }
    }
}
