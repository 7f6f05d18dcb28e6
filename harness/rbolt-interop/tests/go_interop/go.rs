//! The Go side: finding Go and Debian's bbolt sources, building `tests/go-interop/`, and
//! running it with a time limit.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian's `golang-github-coreos-bbolt-dev` puts bbolt (GOPATH layout).
const GOPATH_SYSTEM: &str = "/usr/share/gocode";

/// How long one run of the Go program may take before it counts as hung (the biggest file
/// of the suite takes a few seconds).
const RUN_TIME_MAX: Duration = Duration::from_secs(300);

/// Why the suite cannot run here.
pub struct Missing(pub String);

/// The built Go program.
pub struct GoInterop {
    binary: PathBuf,
    pub version: String,
}

/// What one run of the Go program did.
pub struct Run {
    /// The exit status (`None`: killed, or hung and killed).
    pub code: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Run {
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }

    /// One line for a failure report.
    pub fn describe(&self) -> String {
        let stdout = String::from_utf8_lossy(&self.stdout);
        let mut text = format!("exit {:?}", self.code);
        for part in [stdout.trim(), self.stderr.trim()] {
            if !part.is_empty() {
                let part: String = part.chars().take(2000).collect();
                text.push_str(&format!("; {part}"));
            }
        }
        text
    }
}

impl GoInterop {
    /// Builds the Go program into `work` (GOPATH mode, with Debian's bbolt), or says what is
    /// missing.
    pub fn build(work: &Path) -> Result<GoInterop, Missing> {
        let version = Command::new("go")
            .arg("version")
            .output()
            .map_err(|e| Missing(format!("`go version` failed: {e}")))?;
        if !version.status.success() {
            return Err(Missing("`go version` failed".into()));
        }
        let version = String::from_utf8_lossy(&version.stdout).trim().to_owned();
        let bbolt = Path::new(GOPATH_SYSTEM).join("src/go.etcd.io/bbolt");
        if !bbolt.join("db.go").is_file() {
            return Err(Missing(format!(
                "no Go bbolt sources in {}",
                bbolt.display()
            )));
        }
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/go-interop");
        let binary = work.join("go-interop");
        let gopath = work.join("gopath");
        let output = Command::new("go")
            .args(["build", "-o"])
            .arg(&binary)
            .arg(".")
            .current_dir(&source)
            .env("GO111MODULE", "off")
            .env("GOPATH", format!("{}:{GOPATH_SYSTEM}", gopath.display()))
            .env("GOCACHE", work.join("gocache"))
            .env("CGO_ENABLED", "0")
            .env("GOFLAGS", "")
            .output()
            .map_err(|e| Missing(format!("`go build` failed to start: {e}")))?;
        if !output.status.success() {
            // Go is there but the program does not build: that is a failure, not a skip.
            panic!(
                "go build of {} failed:\n{}",
                source.display(),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(GoInterop { binary, version })
    }

    /// Runs `go-interop COMMAND FILE ARGS...`.
    pub fn run(&self, command: &str, file: &Path, args: &[String]) -> Run {
        let mut child = Command::new(&self.binary)
            .arg(command)
            .arg(file)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the built Go program starts");
        let mut stdout_pipe = child.stdout.take().expect("piped");
        let mut stderr_pipe = child.stderr.take().expect("piped");
        // Read both pipes on threads, so a large dump cannot block the child.
        let stdout = std::thread::spawn(move || {
            let mut out = Vec::new();
            let _ = stdout_pipe.read_to_end(&mut out);
            out
        });
        let stderr = std::thread::spawn(move || {
            let mut out = String::new();
            let _ = stderr_pipe.read_to_string(&mut out);
            out
        });
        let started = Instant::now();
        let code = loop {
            match child.try_wait().expect("waiting for the Go program") {
                Some(status) => break status.code(),
                None if started.elapsed() > RUN_TIME_MAX => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                None => std::thread::sleep(Duration::from_millis(5)),
            }
        };
        Run {
            code,
            stdout: stdout.join().expect("the stdout reader"),
            stderr: stderr.join().expect("the stderr reader"),
        }
    }
}
