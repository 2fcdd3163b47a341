//! Where `cargo xtask test`'s time goes: every stage is timed, and a table (stage, wall
//! seconds, CPU seconds of its processes) is printed at the end, also when a stage fails.
//! CPU well below twice the wall time on the 2-CPU CI machine means idle CPUs (downloads,
//! timeouts, sleeps). `cargo test`'s run is timed per test binary from the `Running ...` /
//! `Doc-tests ...` lines cargo prints on stderr.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// A stage's name, wall time, CPU seconds and whether it passed.
type Stage = (String, Duration, f64, bool);

/// The stages run so far.
pub struct Stages {
    start: Instant,
    done: Vec<Stage>,
    /// `cargo test`'s build and each test binary, with their wall time.
    binaries: Vec<(String, Duration)>,
}

impl Stages {
    pub fn new() -> Self {
        Stages {
            start: Instant::now(),
            done: Vec::new(),
            binaries: Vec::new(),
        }
    }

    /// Runs stage `name` and records its time.
    pub fn run<T>(
        &mut self,
        name: &str,
        f: impl FnOnce() -> Result<T, String>,
    ) -> Result<T, String> {
        let t = Instant::now();
        let cpu = children_cpu();
        eprintln!("xtask: stage {name}");
        let r = f();
        let d = t.elapsed();
        let cpu = children_cpu() - cpu;
        let ok = r.is_ok();
        eprintln!(
            "xtask: stage {name} {} in {:.1} s (CPU {cpu:.1} s)",
            if ok { "done" } else { "FAILED" },
            d.as_secs_f64()
        );
        self.done.push((name.to_string(), d, cpu, ok));
        r
    }

    /// Runs `cmd` (a `cargo test`) as stage `name`, its stderr passed through and read for
    /// the time of each test binary.
    pub fn cargo_test(&mut self, name: &str, cmd: &mut Command) -> Result<(), String> {
        let mut binaries = Vec::new();
        let r = self.run(name, || run_timed(cmd, &mut binaries));
        self.binaries = binaries;
        r
    }

    /// The table of stages (and of `cargo test`'s binaries), slowest binaries first.
    pub fn summary(&self) -> String {
        let mut s = String::from("xtask: time per stage (seconds)\n     wall      CPU  stage\n");
        for (name, d, cpu, ok) in &self.done {
            let mark = if *ok { "" } else { "  FAILED" };
            s += &format!("  {:>7.1}  {cpu:>7.1}  {name}{mark}\n", d.as_secs_f64());
        }
        let cpu: f64 = self.done.iter().map(|x| x.2).sum();
        s += &format!(
            "  {:>7.1}  {cpu:>7.1}  total\n",
            self.start.elapsed().as_secs_f64()
        );
        if !self.binaries.is_empty() {
            let mut b = self.binaries.clone();
            b.sort_by_key(|x| std::cmp::Reverse(x.1));
            s += "xtask: cargo test, time per test binary (wall, seconds; those above 1 s)\n";
            for (name, d) in b.iter().filter(|(_, d)| d.as_secs_f64() >= 1.0) {
                s += &format!("  {:>7.1}  {name}\n", d.as_secs_f64());
            }
        }
        s
    }
}

/// CPU seconds (user and system) used so far by this process's waited-for children and
/// theirs (`/proc/self/stat`'s cutime and cstime, in USER_HZ = 100 ticks a second on
/// Linux); 0 where that cannot be read.
fn children_cpu() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name's closing parenthesis, from field 3 (state) on:
    // cutime and cstime are fields 16 and 17.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| {
        f.get(i - 3)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (tick(16) + tick(17)) / 100.0
}

/// Runs `cmd` with its stderr read line by line (and copied to ours): each `Running X` /
/// `Doc-tests X` line starts binary X's time, which the next such line (or the end)
/// stops; the time before the first is the build's (`(build)`).
fn run_timed(cmd: &mut Command, binaries: &mut Vec<(String, Duration)>) -> Result<(), String> {
    eprintln!("xtask: running {cmd:?}");
    let start = Instant::now();
    let mut child = cmd
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
    let stderr = child.stderr.take().ok_or("no stderr pipe")?;
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut times = Vec::new();
        let mut current: Option<(String, Instant)> = None;
        let mut package = String::new();
        let mut err = std::io::stderr();
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = writeln!(err, "{line}");
            let t = line.trim_start();
            let name = if let Some(rest) = t.strip_prefix("Running ") {
                Some(binary_name(rest, &mut package))
            } else {
                t.strip_prefix("Doc-tests ")
                    .map(|c| format!("{c} doc-tests"))
            };
            if let Some(name) = name {
                let now = Instant::now();
                match current.take() {
                    Some((prev, since)) => times.push((prev, now - since)),
                    None => times.push(("(build)".to_string(), now - start)),
                }
                current = Some((name, now));
            }
        }
        if let Some((prev, since)) = current {
            times.push((prev, since.elapsed()));
        }
        let _ = tx.send(times);
    });
    let status = child
        .wait()
        .map_err(|e| format!("cannot wait for {:?}: {e}", cmd.get_program()))?;
    // A process left behind by a test could keep the pipe open: do not wait for it.
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(times) => *binaries = times,
        Err(_) => eprintln!(
            "xtask: a process still holds {:?}'s stderr open (left behind by a test?)",
            cmd.get_program()
        ),
    }
    if status.success() {
        Ok(())
    } else {
        Err(format!("{:?} failed: {status}", cmd.get_program()))
    }
}

/// The name of a test binary from the rest of its `Running` line, `SRC (PATH/FILE-HASH)`:
/// `FILE SRC` for unit tests (`oxmpi_engine src/lib.rs`), `PACKAGE SRC` for integration
/// tests (`oxmpi_capi tests/coll.rs`). Cargo does not print the package, but runs a
/// package's unit tests (which set `package`) before its integration tests.
fn binary_name(rest: &str, package: &mut String) -> String {
    let (src, file) = match rest.split_once(" (") {
        Some((src, bin)) => {
            let bin = bin.trim_end_matches(')');
            let file = bin.rsplit('/').next().unwrap_or(bin);
            (src, file.rsplit_once('-').map_or(file, |(f, _)| f))
        }
        None => (rest, ""),
    };
    match src.strip_prefix("unittests ") {
        Some(src) => {
            if src == "src/lib.rs" || src == "src/main.rs" {
                *package = file.to_string();
            }
            format!("{file} {src}")
        }
        None => format!("{package} {src}"),
    }
}

#[cfg(test)]
mod tests {
    use super::{binary_name, children_cpu};

    #[test]
    fn a_busy_child_counts_in_the_cpu_seconds() {
        let before = children_cpu();
        let status = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"])
            .status()
            .expect("sh runs");
        assert!(status.success());
        assert!(children_cpu() > before, "{before} -> {}", children_cpu());
    }

    #[test]
    fn test_binaries_are_named_by_package_and_source() {
        let mut package = String::new();
        let lines = [
            (
                "unittests src/lib.rs (target/debug/deps/oxmpi_capi-3ce1e170c77ef111)",
                "oxmpi_capi src/lib.rs",
            ),
            (
                "tests/coll.rs (target/debug/deps/coll-ad900ba5a1b7d9cf)",
                "oxmpi_capi tests/coll.rs",
            ),
            (
                "unittests src/bin/oxmpi-pmi-exchange.rs (target/debug/deps/oxmpi_pmi_exchange-c2)",
                "oxmpi_pmi_exchange src/bin/oxmpi-pmi-exchange.rs",
            ),
            (
                "tests/multiproc.rs (target/debug/deps/multiproc-a72067ace09d2fde)",
                "oxmpi_capi tests/multiproc.rs",
            ),
        ];
        for (line, want) in lines {
            assert_eq!(binary_name(line, &mut package), want);
        }
    }
}
