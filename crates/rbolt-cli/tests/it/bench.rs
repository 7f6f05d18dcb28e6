//! `bench`: bbolt's flags and result lines.

use crate::support::{Dir, arg, rbolt};

/// Checks one `# Write` / `# Read` line: `# NAME\tN(ops)\tDURATION\t(DURATION/op)\t(N op/sec)`.
#[track_caller]
fn check_line(line: &str, name: &str) -> u64 {
    let fields: Vec<&str> = line.split('\t').collect();
    assert_eq!(fields.len(), 5, "{line:?}");
    assert_eq!(fields[0], format!("# {name}"));
    let ops: u64 = fields[1].strip_suffix("(ops)").unwrap().parse().unwrap();
    assert!(fields[2].ends_with('s'), "{line:?}");
    assert!(
        fields[3].starts_with('(') && fields[3].ends_with("/op)"),
        "{line:?}"
    );
    let per_sec = fields[4]
        .strip_prefix('(')
        .unwrap()
        .strip_suffix(" op/sec)")
        .unwrap();
    per_sec.parse::<u64>().unwrap();
    ops
}

#[test]
fn bench_prints_both_lines() {
    let dir = Dir::new();
    // Every write mode, and each read mode with both a flat and a nested layout; reads run
    // for a second each (bbolt's rule), so not every pair.
    let pairs = [
        ("seq", "seq"),
        ("rnd", "rnd"),
        ("seq-nest", "seq"),
        ("rnd-nest", "rnd"),
        ("seq-del", "rnd"),
    ];
    for (mode, read) in pairs {
        {
            let path = dir.path(&format!("bench-{mode}-{read}.db"));
            let run = rbolt([
                "bench",
                "--count",
                "2000",
                "--batch-size",
                "500",
                "--write-mode",
                mode,
                "--read-mode",
                read,
                "--no-sync",
                "--path",
                arg(&path),
            ]);
            let out = run.ok();
            let lines: Vec<&str> = out.lines().collect();
            assert_eq!(lines.len(), 4, "{out}");
            // What was measured, then what it measured.
            assert_eq!(
                lines[0],
                format!(
                    "# Setup\t2000 keys of 8 bytes, values of 32 bytes\t\
                     4 write transactions of 500 keys, syncs off\t\
                     write-mode {mode}, read-mode {read}\tpage size 4096, fill percent 0.5"
                )
            );
            assert_eq!(check_line(lines[1], "Write"), 2000, "{mode}");
            let reads = check_line(lines[2], "Read");
            assert!(reads >= 1000, "{mode}/{read}: reads repeat for a second");
            assert_eq!(lines[3], "");
            assert!(!path.exists(), "the file is removed afterwards");
        }
    }
}

#[test]
fn bench_keeps_its_file_with_work_and_prints_gobench() {
    let dir = Dir::new();
    let path = dir.path("kept.db");
    let run = rbolt([
        "bench",
        "--count=1000",
        "--no-sync=true",
        "--work",
        "--gobench-output",
        "--key-size",
        "16",
        "--value-size",
        "100",
        "--page-size",
        "8192",
        "--path",
        arg(&path),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stderr, format!("work: {}\n", path.display()));
    let out = run.out();
    let lines: Vec<&str> = out.lines().collect();
    // Go's configuration lines first (benchstat reads them as the run's settings).
    let settings = [
        "count: 1000",
        "key-size: 16",
        "value-size: 100",
        "batch-size: 1000",
        "write-mode: seq",
        "read-mode: seq",
        "sync: off",
        "page-size: 8192",
        "fill-percent: 0.5",
    ];
    assert_eq!(lines[..settings.len()], settings, "{out}");
    let lines = &lines[settings.len()..];
    assert!(lines[0].starts_with("BenchmarkWrite\t    1000\t"), "{out}");
    assert!(lines[0].ends_with(" ns/op"), "{out}");
    assert!(lines[1].starts_with("BenchmarkRead \t"), "{out}");
    assert!(path.exists());
    assert!(
        rbolt(["info", arg(&path)])
            .ok()
            .starts_with("Page Size: 8192\n")
    );
    assert_eq!(
        rbolt(["keys", arg(&path), "bench"]).ok().lines().count(),
        1000
    );
    // bench refuses a file that exists, since it deletes its file afterwards.
    rbolt(["bench", "--count", "10", "--path", arg(&path)]).fails_with("already exists");
}

/// The header says when syncs were on (the default), and a batch size of 0 is one transaction.
#[test]
fn bench_names_syncs_and_one_transaction() {
    let dir = Dir::new();
    let path = dir.path("synced.db");
    let args = [
        "bench",
        "--count",
        "100",
        "--key-size",
        "4",
        "--value-size",
        "0",
    ];
    let out = rbolt(args.into_iter().chain(["--path", arg(&path)])).ok();
    let header = out.lines().next().unwrap();
    assert_eq!(
        header,
        "# Setup\t100 keys of 4 bytes, values of 0 bytes\t1 write transaction of 100 keys, \
         syncs on\twrite-mode seq, read-mode seq\tpage size 4096, fill percent 0.5"
    );
}

#[test]
fn bench_validates_its_flags() {
    rbolt(["bench", "--count", "10", "--batch-size", "3"])
        .fails_with("divisible by the batch size");
    rbolt(["bench", "--count", "10", "--key-size", "2"]).fails_with("at least 4");
    assert_eq!(rbolt(["bench", "--write-mode", "sideways"]).code, 2);
}
