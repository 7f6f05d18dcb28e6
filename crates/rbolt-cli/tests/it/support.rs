//! Running the `rbolt` binary and preparing files for it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// What a run of `rbolt` produced.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Run {
    /// Standard output as text.
    pub fn out(&self) -> String {
        String::from_utf8(self.stdout.clone()).expect("stdout is UTF-8")
    }

    /// Asserts success (exit 0, nothing on stderr) and returns stdout as text.
    #[track_caller]
    pub fn ok(&self) -> String {
        assert_eq!(self.code, 0, "expected success; stderr: {}", self.stderr);
        assert!(self.stderr.is_empty(), "unexpected stderr: {}", self.stderr);
        self.out()
    }

    /// Asserts a failure reported as one `rbolt: ...` line that mentions `needle`, with no
    /// panic or backtrace.
    #[track_caller]
    pub fn fails_with(&self, needle: &str) -> &Run {
        assert_eq!(self.code, 1, "expected exit 1; stderr: {}", self.stderr);
        assert_one_error_line(&self.stderr);
        assert!(
            self.stderr.contains(needle),
            "stderr {:?} does not mention {needle:?}",
            self.stderr
        );
        self
    }
}

/// Asserts that `stderr` is exactly one line of the form `rbolt: ...`.
#[track_caller]
pub fn assert_one_error_line(stderr: &str) {
    assert!(!stderr.contains("panicked"), "a panic: {stderr}");
    assert!(
        !stderr.contains("RUST_BACKTRACE"),
        "a backtrace hint: {stderr}"
    );
    assert!(
        stderr.starts_with("rbolt: "),
        "not an rbolt error line: {stderr:?}"
    );
    assert_eq!(stderr.lines().count(), 1, "more than one line: {stderr:?}");
}

/// The command for `rbolt ARGS`.
pub fn command<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut command = Command::new(env!("CARGO_BIN_EXE_rbolt"));
    command.args(args).stdin(Stdio::null());
    command
}

/// Runs `rbolt ARGS`.
pub fn rbolt<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    finish(command(args).output().expect("run rbolt"))
}

/// Runs `rbolt ARGS` with `input` on stdin.
pub fn rbolt_with_input<I, S>(args: I, input: &[u8]) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    use std::io::Write;
    let mut child = command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rbolt");
    let mut stdin = child.stdin.take().expect("piped stdin");
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let output = child.wait_with_output().expect("wait for rbolt");
    writer.join().expect("stdin writer");
    finish(output)
}

pub fn finish(output: Output) -> Run {
    Run {
        code: output
            .status
            .code()
            .expect("rbolt exited (not killed by a signal)"),
        stdout: output.stdout,
        stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    }
}

/// A temporary directory holding fixture copies.
pub struct Dir {
    pub dir: tempfile::TempDir,
}

impl Dir {
    pub fn new() -> Dir {
        Dir {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    /// A path in the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A fresh copy of fixture `name` (`NAME.db`).
    pub fn fixture(&self, name: &str) -> PathBuf {
        rbolt_fixtures::write_db(name, self.dir.path())
    }

    /// A copy of fixture `name` under `file`, changed by `damage`.
    pub fn damaged(&self, name: &str, file: &str, damage: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
        let mut bytes = rbolt_fixtures::db_bytes(name);
        damage(&mut bytes);
        let path = self.path(file);
        std::fs::write(&path, bytes).expect("write damaged copy");
        path
    }
}

/// The file's bytes, to compare before and after a command that must not change it.
pub fn contents(path: &Path) -> Vec<u8> {
    std::fs::read(path).expect("read file")
}

/// Runs `f` and asserts that the file at `path` is byte for byte what it was.
#[track_caller]
pub fn unchanged<T>(path: &Path, f: impl FnOnce() -> T) -> T {
    let before = contents(path);
    let result = f();
    assert!(contents(path) == before, "{} was modified", path.display());
    result
}

/// The page size of a fixture, from its summary.
pub fn page_size(name: &str) -> usize {
    rbolt_fixtures::summary(name)["page_size"]
        .as_u64()
        .expect("page_size") as usize
}

/// `path` as an argument.
pub fn arg(path: &Path) -> &str {
    path.to_str().expect("temp paths are UTF-8")
}
