//! Where `cargo xtask test`'s time goes: every stage is timed, and a table (stage, wall
//! seconds, CPU seconds of its processes) is printed at the end, also when a stage fails.
//! CPU well below twice the wall time on the 2-CPU CI machine means idle CPUs (downloads,
//! timeouts, sleeps). `cargo test`'s run is timed per test binary from the `Running ...` /
//! `Doc-tests ...` lines cargo prints on stderr.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
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

/// A build started early in the background, at the lowest CPU priority (`chrt --idle 0`:
/// it runs only on CPUs the stages leave idle, such as while tests wait on timeouts or
/// downloads), its output in a log file; [`Background::finish`] waits for it. Dropped
/// unfinished (a stage before failed), it is killed with its process group.
pub struct Background {
    what: String,
    log: PathBuf,
    child: Option<Child>,
    started: Instant,
}

impl Background {
    /// Starts `cmd` (its program and arguments run under `chrt --idle 0` where `chrt`
    /// exists) with stdout and stderr into `log`.
    pub fn start(what: &str, cmd: &Command, log: &Path) -> Result<Background, String> {
        let mut c = if Command::new("chrt").arg("--help").output().is_ok() {
            let mut c = Command::new("chrt");
            c.args(["--idle", "0"]).arg(cmd.get_program());
            c
        } else {
            Command::new(cmd.get_program())
        };
        c.args(cmd.get_args());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        if let Some(d) = cmd.get_current_dir() {
            c.current_dir(d);
        }
        let out = File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("cannot share {}: {e}", log.display()))?;
        eprintln!(
            "xtask: started in the background ({what}, idle priority, log {}): {c:?}",
            log.display()
        );
        let child = c
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start {:?}: {e}", c.get_program()))?;
        Ok(Background {
            what: what.to_string(),
            log: log.to_path_buf(),
            child: Some(child),
            started: Instant::now(),
        })
    }

    /// Waits for the build; on failure its log is printed and the error returned.
    pub fn finish(mut self) -> Result<(), String> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let status = child
            .wait()
            .map_err(|e| format!("cannot wait for {}: {e}", self.what))?;
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        eprintln!(
            "xtask: background {} ended ({status}) {:.1} s after its start",
            self.what,
            self.started.elapsed().as_secs_f64()
        );
        if status.success() {
            Ok(())
        } else {
            eprint!("{log}");
            Err(format!("{} failed: {status}", self.what))
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Its own process group (process_group(0) above): the compilers it started go
            // with it.
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.kill();
            let _ = child.wait();
        }
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
    use super::{binary_name, children_cpu, Background};
    use std::process::Command;
    use std::time::{Duration, Instant};

    #[test]
    fn a_background_build_reports_its_status_and_is_killed_when_dropped() {
        let dir = std::env::temp_dir().join(format!("xtask-bg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("log");
        let ok = Background::start("ok", Command::new("sh").args(["-c", "echo hi"]), &log);
        assert_eq!(ok.unwrap().finish(), Ok(()));
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "hi\n");
        let bad = Background::start("bad", Command::new("sh").args(["-c", "exit 3"]), &log);
        assert!(bad.unwrap().finish().unwrap_err().starts_with("bad failed"));
        // A grandchild too: the whole process group goes.
        let mark = dir.join("mark");
        let script = format!("(sleep 3; touch {}) & wait", mark.display());
        let long = Background::start("long", Command::new("sh").args(["-c", &script]), &log);
        // Time for sh to start its subshell.
        std::thread::sleep(Duration::from_millis(500));
        let t = Instant::now();
        drop(long.unwrap());
        assert!(t.elapsed() < Duration::from_secs(2));
        std::thread::sleep(Duration::from_secs(4));
        assert!(!mark.exists(), "the grandchild survived");
        std::fs::remove_dir_all(&dir).unwrap();
    }

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
