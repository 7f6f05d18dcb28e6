//! What the numbers were measured on: CPU, cores, memory, the filesystem of the data
//! directory, kernel, compiler, and how busy the machine was.

use std::path::Path;
use std::process::Command;

pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub memory_gib: f64,
    pub filesystem: String,
    pub kernel: String,
    pub rustc: String,
    pub load_average: String,
}

impl Machine {
    /// Reads /proc and asks `rustc`; `data_dir` is where the engines' files go.
    pub fn probe(data_dir: &Path) -> Machine {
        let cpuinfo = read("/proc/cpuinfo");
        let cpu = cpuinfo
            .lines()
            .find_map(|line| line.strip_prefix("model name"))
            .and_then(|rest| rest.split_once(':'))
            .map(|(_, model)| model.trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
        let memory_kib: f64 = read("/proc/meminfo")
            .lines()
            .find_map(|line| line.strip_prefix("MemTotal:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0.0);
        Machine {
            cpu,
            cores,
            memory_gib: memory_kib / (1 << 20) as f64,
            filesystem: filesystem(data_dir),
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
            rustc: output("rustc", &["-V"]),
            load_average: read("/proc/loadavg")
                .split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn output(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// The filesystem type and mount point holding `dir`, from /proc/mounts (the longest mount
/// point that is a prefix of the directory), e.g. "ext4 on / (/dev/vda)".
fn filesystem(dir: &Path) -> String {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    read("/proc/mounts")
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (device, mount, kind) = (fields.next()?, fields.next()?, fields.next()?);
            dir.starts_with(mount)
                .then(|| (mount.len(), format!("{kind} on {mount} ({device})")))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, found)| found)
        .unwrap_or_else(|| output("stat", &["-f", "-c", "%T", &dir.to_string_lossy()]))
}
