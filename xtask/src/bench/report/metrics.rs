//! The rows of the comparison: where each number comes from in an engine's JSON line, its
//! unit, which way is better, and the chart it goes in.

use serde_json::Value;

/// One row of the comparison: where its number comes from and which way is better.
pub struct Metric {
    /// The chart it belongs to (`<family>.svg`).
    pub family: &'static str,
    pub label: &'static str,
    /// Short title for the chart panel.
    pub short: &'static str,
    pub unit: &'static str,
    pub higher_is_better: bool,
    /// False (no best, no ratio) for measurements of the machine rather than the engine, and
    /// for figures some engines hide from the measurement: bytes written through a mapping or
    /// deferred past the phase never reach `wchar`.
    pub comparable: bool,
    /// Reads the number from an engine's JSON line.
    pub get: fn(&Value) -> Option<f64>,
}

pub(crate) fn phase(v: &Value, name: &str, field: &str) -> Option<f64> {
    v["phases"][name][field].as_f64()
}

fn per_key_ns(v: &Value, name: &str) -> Option<f64> {
    Some(phase(v, name, "secs")? / v["n"].as_f64()? * 1e9)
}

/// A phase's `field` divided by the write transactions the phase committed (`txs`); `None`
/// for a phase that committed none and for lines written before phases recorded `txs`.
fn per_tx(v: &Value, name: &str, field: &str) -> Option<f64> {
    let txs = phase(v, name, "txs").filter(|&txs| txs > 0.0)?;
    Some(phase(v, name, field)? / txs)
}

/// Bytes written per transaction (`wchar`, see `per_tx`) in KiB.
fn kib_per_tx(v: &Value, name: &str) -> Option<f64> {
    Some(per_tx(v, name, "written_bytes")? / 1024.0)
}

/// Bytes written per transaction over the engine's page size: the pages a transaction would
/// write if every byte went to a whole page. Write system calls do not count pages, so this
/// is a conversion, not a count; `None` for an engine with no page size (sled).
fn pages_per_tx(v: &Value, name: &str) -> Option<f64> {
    let page_size = v["page_size"].as_f64().filter(|&size| size > 0.0)?;
    Some(per_tx(v, name, "written_bytes")? / page_size)
}

/// A phase's seconds field per transaction, in µs.
fn us_per_tx(v: &Value, name: &str, field: &str) -> Option<f64> {
    Some(per_tx(v, name, field)? * 1e6)
}

pub(super) fn mib(bytes: Option<f64>) -> Option<f64> {
    bytes.map(|b| b / (1u64 << 20) as f64)
}

/// The chart families, in report order, with their titles.
pub const FAMILIES: &[(&str, &str)] = &[
    ("load", "Bulk loads (one transaction, durable)"),
    ("read", "Reads"),
    ("write", "Writes"),
    ("concurrent", "Readers and a writer at once"),
    ("footprint", "File size and memory"),
    ("written", "Bytes written and heap allocations"),
    ("pertx", "Bytes and pages written per write transaction"),
    ("cpu", "Wall and CPU time per write transaction"),
];

pub const METRICS: &[Metric] = &[
    Metric {
        family: "load",
        label: "(a) load N random keys, 1 tx",
        short: "(a) random load",
        unit: "s",
        higher_is_better: false,
        comparable: true,
        get: |v| phase(v, "load_random", "secs"),
    },
    Metric {
        family: "load",
        label: "(a2) load N sorted keys, append path",
        short: "(a2) sorted load",
        unit: "s",
        higher_is_better: false,
        comparable: true,
        get: |v| phase(v, "load_sorted", "secs"),
    },
    Metric {
        family: "read",
        label: "(b) random get, 1 read tx",
        short: "(b) random get",
        unit: "ns/get",
        higher_is_better: false,
        comparable: true,
        get: |v| per_key_ns(v, "get_random"),
    },
    Metric {
        family: "read",
        label: "(c) full forward scan",
        short: "(c) full scan",
        unit: "ns/entry",
        higher_is_better: false,
        comparable: true,
        get: |v| per_key_ns(v, "scan"),
    },
    Metric {
        family: "write",
        label: "(d) durable 1-key commit, p50",
        short: "(d) commit p50",
        unit: "µs",
        higher_is_better: false,
        comparable: true,
        get: |v| phase(v, "commit_durable", "p50_us"),
    },
    Metric {
        family: "write",
        label: "(d) durable 1-key commit, p99",
        short: "(d) commit p99",
        unit: "µs",
        higher_is_better: false,
        comparable: true,
        get: |v| phase(v, "commit_durable", "p99_us"),
    },
    Metric {
        family: "write",
        label: "(d) durable 1-key commit, max",
        short: "(d) commit max",
        unit: "µs",
        higher_is_better: false,
        comparable: true,
        get: |v| phase(v, "commit_durable", "max_us"),
    },
    Metric {
        family: "write",
        label: "(d) floor: one 4 KiB pwrite + fdatasync, p50",
        short: "pwrite+fdatasync p50",
        unit: "µs",
        higher_is_better: false,
        comparable: false,
        get: |v| phase(v, "commit_durable", "sync_p50_us"),
    },
    Metric {
        family: "write",
        label: "(d) commit p50 over that floor (the disk's speed divided out)",
        short: "(d) p50 / floor",
        unit: "× floor",
        higher_is_better: false,
        comparable: true,
        get: |v| {
            Some(phase(v, "commit_durable", "p50_us")? / phase(v, "commit_durable", "sync_p50_us")?)
        },
    },
    Metric {
        family: "write",
        label: "(e) 1,000 tx × 100 random keys, sync off",
        short: "(e) batches, sync off",
        unit: "s",
        higher_is_better: false,
        comparable: true,
        get: |v| phase(v, "batch_nosync", "secs"),
    },
    Metric {
        family: "write",
        label: "(f) delete N/2 keys, tx of 10,000",
        short: "(f) delete half",
        unit: "s",
        higher_is_better: false,
        comparable: true,
        get: |v| phase(v, "delete_half", "secs"),
    },
    Metric {
        family: "concurrent",
        label: "(g0) gets/s, 2 readers beside 1 writer held to 200 tx/s of rewrites",
        short: "(g0) gets/s",
        unit: "gets/s",
        higher_is_better: true,
        comparable: true,
        get: |v| phase(v, "read_write_paced", "reads_per_sec"),
    },
    Metric {
        family: "concurrent",
        label: "(g0) keys rewritten/s beside 2 readers (the pace: 20 k)",
        short: "(g0) keys rewritten/s",
        unit: "keys/s",
        higher_is_better: true,
        comparable: true,
        get: |v| phase(v, "read_write_paced", "writes_per_sec"),
    },
    Metric {
        family: "concurrent",
        label: "(g) gets/s, 2 readers beside 1 writer",
        short: "(g) gets/s",
        unit: "gets/s",
        higher_is_better: true,
        comparable: true,
        get: |v| phase(v, "read_write", "reads_per_sec"),
    },
    Metric {
        family: "concurrent",
        label: "(g) keys written/s beside 2 readers",
        short: "(g) keys written/s",
        unit: "keys/s",
        higher_is_better: true,
        comparable: true,
        get: |v| phase(v, "read_write", "writes_per_sec"),
    },
    Metric {
        family: "footprint",
        label: "file size after (a)",
        short: "file after (a)",
        unit: "MiB",
        higher_is_better: false,
        comparable: true,
        get: |v| mib(phase(v, "load_random", "file_bytes")),
    },
    Metric {
        family: "footprint",
        label: "file size after (a2)",
        short: "file after (a2)",
        unit: "MiB",
        higher_is_better: false,
        comparable: true,
        get: |v| mib(phase(v, "load_sorted", "file_bytes")),
    },
    Metric {
        family: "footprint",
        label: "file size after (g)",
        short: "file after (g)",
        unit: "MiB",
        higher_is_better: false,
        comparable: true,
        get: |v| mib(phase(v, "read_write", "file_bytes")),
    },
    Metric {
        family: "written",
        label: "(a) bytes written by the load",
        short: "(a) written",
        unit: "MiB",
        higher_is_better: false,
        comparable: false,
        get: |v| mib(phase(v, "load_random", "written_bytes")),
    },
    Metric {
        family: "written",
        label: "(d) bytes written per 1-key commit",
        short: "(d) written/commit",
        unit: "KiB",
        higher_is_better: false,
        comparable: false,
        get: |v| Some(phase(v, "commit_durable", "written_bytes")? / 1000.0 / 1024.0),
    },
    Metric {
        family: "written",
        label: "(e) bytes written per 100-key transaction",
        short: "(e) written/tx",
        unit: "KiB",
        higher_is_better: false,
        comparable: false,
        get: |v| Some(phase(v, "batch_nosync", "written_bytes")? / 1000.0 / 1024.0),
    },
    Metric {
        family: "pertx",
        label: "(f) bytes written per 10,000-key delete transaction",
        short: "(f) written/tx",
        unit: "KiB",
        higher_is_better: false,
        comparable: false,
        get: |v| kib_per_tx(v, "delete_half"),
    },
    Metric {
        family: "pertx",
        label: "(g) bytes written per writer transaction beside 2 readers",
        short: "(g) written/tx",
        unit: "KiB",
        higher_is_better: false,
        comparable: false,
        get: |v| kib_per_tx(v, "read_write"),
    },
    Metric {
        family: "pertx",
        label: "(d) pages written per 1-key commit (bytes / page size)",
        short: "(d) pages/commit",
        unit: "pages",
        higher_is_better: false,
        comparable: false,
        get: |v| pages_per_tx(v, "commit_durable"),
    },
    Metric {
        family: "pertx",
        label: "(e) pages written per 100-key transaction (bytes / page size)",
        short: "(e) pages/tx",
        unit: "pages",
        higher_is_better: false,
        comparable: false,
        get: |v| pages_per_tx(v, "batch_nosync"),
    },
    Metric {
        family: "pertx",
        label: "(f) pages written per delete transaction (bytes / page size)",
        short: "(f) pages/tx",
        unit: "pages",
        higher_is_better: false,
        comparable: false,
        get: |v| pages_per_tx(v, "delete_half"),
    },
    Metric {
        family: "pertx",
        label: "(g) pages written per writer transaction (bytes / page size)",
        short: "(g) pages/tx",
        unit: "pages",
        higher_is_better: false,
        comparable: false,
        get: |v| pages_per_tx(v, "read_write"),
    },
    Metric {
        family: "pertx",
        label: "(e) write system calls per 100-key transaction",
        short: "(e) write calls/tx",
        unit: "calls",
        higher_is_better: false,
        comparable: false,
        get: |v| per_tx(v, "batch_nosync", "write_calls"),
    },
    Metric {
        family: "pertx",
        label: "(f) write system calls per delete transaction",
        short: "(f) write calls/tx",
        unit: "calls",
        higher_is_better: false,
        comparable: false,
        get: |v| per_tx(v, "delete_half", "write_calls"),
    },
    Metric {
        family: "cpu",
        label: "(d) wall time per durable 1-key commit (mean)",
        short: "(d) wall/commit",
        unit: "µs",
        higher_is_better: false,
        comparable: true,
        get: |v| us_per_tx(v, "commit_durable", "secs"),
    },
    Metric {
        family: "cpu",
        label: "(d) CPU time per durable 1-key commit",
        short: "(d) CPU/commit",
        unit: "µs",
        higher_is_better: false,
        comparable: true,
        get: |v| us_per_tx(v, "commit_durable", "cpu_secs"),
    },
    Metric {
        family: "cpu",
        label: "(e) wall time per 100-key transaction, sync off",
        short: "(e) wall/tx",
        unit: "µs",
        higher_is_better: false,
        comparable: true,
        get: |v| us_per_tx(v, "batch_nosync", "secs"),
    },
    Metric {
        family: "cpu",
        label: "(e) CPU time per 100-key transaction, sync off",
        short: "(e) CPU/tx",
        unit: "µs",
        higher_is_better: false,
        comparable: true,
        get: |v| us_per_tx(v, "batch_nosync", "cpu_secs"),
    },
    Metric {
        family: "cpu",
        label: "(e) of that CPU time, the kernel's (system time: writes, faults)",
        short: "(e) system CPU/tx",
        unit: "µs",
        higher_is_better: false,
        comparable: true,
        get: |v| us_per_tx(v, "batch_nosync", "sys_cpu_secs"),
    },
    Metric {
        family: "cpu",
        label: "(f) wall time per 10,000-key delete transaction",
        short: "(f) wall/tx",
        unit: "µs",
        higher_is_better: false,
        comparable: true,
        get: |v| us_per_tx(v, "delete_half", "secs"),
    },
    Metric {
        family: "cpu",
        label: "(f) CPU time per 10,000-key delete transaction",
        short: "(f) CPU/tx",
        unit: "µs",
        higher_is_better: false,
        comparable: true,
        get: |v| us_per_tx(v, "delete_half", "cpu_secs"),
    },
    Metric {
        family: "cpu",
        label: "(f) of that CPU time, the kernel's (system time: writes, syncs, faults)",
        short: "(f) system CPU/tx",
        unit: "µs",
        higher_is_better: false,
        comparable: true,
        get: |v| us_per_tx(v, "delete_half", "sys_cpu_secs"),
    },
    Metric {
        family: "cpu",
        label: "(g) wall time per writer transaction beside 2 readers",
        short: "(g) wall/tx",
        unit: "µs",
        higher_is_better: false,
        comparable: true,
        get: |v| us_per_tx(v, "read_write", "secs"),
    },
    Metric {
        family: "cpu",
        label: "(g) process CPU time per writer transaction (the 2 readers' included)",
        short: "(g) process CPU/tx",
        unit: "µs",
        higher_is_better: false,
        comparable: true,
        get: |v| us_per_tx(v, "read_write", "cpu_secs"),
    },
    Metric {
        family: "cpu",
        label: "(g) the writer thread's own CPU time per transaction",
        short: "(g) writer CPU/tx",
        unit: "µs",
        higher_is_better: false,
        comparable: true,
        get: |v| us_per_tx(v, "read_write", "writer_cpu_secs"),
    },
    Metric {
        family: "cpu",
        label: "(g) the writer thread's wait for a CPU per transaction (runnable, not running)",
        short: "(g) writer run-queue wait/tx",
        unit: "µs",
        higher_is_better: false,
        comparable: true,
        get: |v| us_per_tx(v, "read_write", "writer_runq_secs"),
    },
    Metric {
        family: "cpu",
        label: "(g) the writer thread blocked per transaction (neither running nor runnable)",
        short: "(g) writer blocked/tx",
        unit: "µs",
        higher_is_better: false,
        comparable: true,
        get: |v| us_per_tx(v, "read_write", "writer_blocked_secs"),
    },
    Metric {
        family: "footprint",
        label: "peak RSS up to the end of (a)",
        short: "RSS after (a)",
        unit: "MiB",
        higher_is_better: false,
        comparable: true,
        get: |v| v["rss_kib"]["after_load"].as_f64().map(|k| k / 1024.0),
    },
    Metric {
        family: "footprint",
        label: "peak RSS, whole run",
        short: "peak RSS",
        unit: "MiB",
        higher_is_better: false,
        comparable: true,
        get: |v| v["rss_kib"]["peak"].as_f64().map(|k| k / 1024.0),
    },
    Metric {
        family: "written",
        label: "heap allocations per get in (b)",
        short: "allocs/get",
        unit: "allocs",
        higher_is_better: false,
        comparable: true,
        get: |v| phase(v, "get_random", "allocs_per_op"),
    },
    Metric {
        family: "written",
        label: "heap allocations per put in (e)",
        short: "allocs/put (e)",
        unit: "allocs",
        higher_is_better: false,
        comparable: true,
        get: |v| phase(v, "batch_nosync", "allocs_per_op"),
    },
];

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// An engine's line with the fields phases record since issue 26, numbers chosen so that
    /// every per-transaction figure comes out round.
    pub(in crate::bench::report) fn line_with_txs(engine: &str, page_size: Value) -> Value {
        serde_json::json!({
            "engine": engine,
            "n": 100_000,
            "page_size": page_size,
            "phases": {
                "get_random": { "secs": 0.1, "written_bytes": 0, "cpu_secs": 0.1, "txs": 0 },
                "commit_durable": {
                    "secs": 0.5, "written_bytes": 8_192_000, "write_calls": 3000,
                    "cpu_secs": 0.04, "txs": 1000, "p50_us": 450.0,
                },
                "batch_nosync": {
                    "secs": 1.0, "written_bytes": 40_960_000, "write_calls": 1000,
                    "cpu_secs": 0.8, "sys_cpu_secs": 0.5, "txs": 1000,
                },
                "delete_half": {
                    "secs": 2.0, "written_bytes": 2_048_000, "write_calls": 10,
                    "cpu_secs": 1.5, "sys_cpu_secs": 1.0, "txs": 5,
                },
                "read_write": {
                    "secs": 1.0, "written_bytes": 5_120_000, "write_calls": 250,
                    "cpu_secs": 2.0, "writer_cpu_secs": 0.5, "writer_runq_secs": 0.25,
                    "writer_blocked_secs": 0.05, "txs": 250,
                },
            },
        })
    }

    /// The same line as an older run wrote it: no transactions, CPU time or page size.
    fn line_before_txs() -> Value {
        let mut line = line_with_txs("rbolt", Value::Null);
        line.as_object_mut().unwrap().remove("page_size");
        for phase in line["phases"].as_object_mut().unwrap().values_mut() {
            let phase = phase.as_object_mut().unwrap();
            for field in [
                "txs",
                "cpu_secs",
                "sys_cpu_secs",
                "writer_cpu_secs",
                "writer_runq_secs",
                "writer_blocked_secs",
                "write_calls",
            ] {
                phase.remove(field);
            }
        }
        line
    }

    /// The rows issue 26 added: every row of these two families.
    fn per_tx_rows() -> impl Iterator<Item = &'static Metric> {
        METRICS
            .iter()
            .filter(|m| m.family == "pertx" || m.family == "cpu")
    }

    fn value_of(short: &str, line: &Value) -> Option<f64> {
        let metric = METRICS.iter().find(|m| m.short == short).expect(short);
        (metric.get)(line)
    }

    #[test]
    fn per_transaction_rows_compute_from_a_phase_line() {
        let line = line_with_txs("rbolt", Value::from(4096));
        let expected = [
            ("(f) written/tx", 400.0),
            ("(g) written/tx", 20.0),
            ("(d) pages/commit", 2.0),
            ("(e) pages/tx", 10.0),
            ("(f) pages/tx", 100.0),
            ("(g) pages/tx", 5.0),
            ("(e) write calls/tx", 1.0),
            ("(f) write calls/tx", 2.0),
            ("(d) wall/commit", 500.0),
            ("(d) CPU/commit", 40.0),
            ("(e) wall/tx", 1000.0),
            ("(e) CPU/tx", 800.0),
            ("(e) system CPU/tx", 500.0),
            ("(f) wall/tx", 400_000.0),
            ("(f) CPU/tx", 300_000.0),
            ("(f) system CPU/tx", 200_000.0),
            ("(g) wall/tx", 4000.0),
            ("(g) process CPU/tx", 8000.0),
            ("(g) writer CPU/tx", 2000.0),
            ("(g) writer run-queue wait/tx", 1000.0),
            ("(g) writer blocked/tx", 200.0),
        ];
        assert_eq!(
            expected.len(),
            per_tx_rows().count(),
            "a value for every new row"
        );
        for (short, want) in expected {
            let got = value_of(short, &line).unwrap_or_else(|| panic!("{short}: none"));
            assert!(
                (got - want).abs() < 1e-9 * want,
                "{short}: {got}, want {want}"
            );
        }
        // The rows that were there before read the same line as they always did.
        assert_eq!(value_of("(d) written/commit", &line), Some(8.0));
        // Bytes are not comparable (mappings and deferred writes hide them), time is.
        for metric in per_tx_rows() {
            assert_eq!(metric.comparable, metric.unit == "µs", "{}", metric.label);
        }
        // The kernel's share is part of the CPU time, never more.
        for (all, system) in [
            ("(e) CPU/tx", "(e) system CPU/tx"),
            ("(f) CPU/tx", "(f) system CPU/tx"),
        ] {
            assert!(value_of(system, &line) <= value_of(all, &line), "{system}");
        }
        // The writer's time on a CPU, waiting for one and blocked fit in the phase's wall time.
        let writer: f64 = [
            "(g) writer CPU/tx",
            "(g) writer run-queue wait/tx",
            "(g) writer blocked/tx",
        ]
        .iter()
        .map(|short| value_of(short, &line).unwrap())
        .sum();
        assert!(
            writer <= value_of("(g) wall/tx", &line).unwrap(),
            "{writer}"
        );
        // A phase without write transactions has no per-transaction figures.
        assert_eq!(per_tx(&line, "get_random", "cpu_secs"), None);
    }

    #[test]
    fn per_transaction_rows_are_absent_from_older_lines() {
        let line = line_before_txs();
        for metric in per_tx_rows() {
            assert_eq!((metric.get)(&line), None, "{}", metric.label);
        }
        assert_eq!(value_of("(d) written/commit", &line), Some(8.0));
        assert_eq!(value_of("(e) written/tx", &line), Some(40.0));
    }

    #[test]
    fn an_engine_without_pages_has_bytes_but_no_pages() {
        let line = line_with_txs("sled", Value::Null);
        assert_eq!(value_of("(f) written/tx", &line), Some(400.0));
        assert_eq!(value_of("(d) pages/commit", &line), None);
        assert_eq!(value_of("(g) pages/tx", &line), None);
        assert_eq!(value_of("(d) CPU/commit", &line), Some(40.0));
    }

    #[test]
    fn every_row_has_a_chart() {
        for metric in METRICS {
            assert!(
                FAMILIES.iter().any(|(family, _)| *family == metric.family),
                "{}: family {}",
                metric.label,
                metric.family
            );
        }
    }
}
