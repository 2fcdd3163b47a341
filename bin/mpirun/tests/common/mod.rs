//! Scratch directories for the `mpirun` end-to-end tests: a private directory per test that
//! is also the job's TMPDIR, a marker variable that finds every process of the job through
//! /proc, and the checks that nothing of a job is left behind.
// Each test file uses a subset of these helpers.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Output;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A private scratch directory per test, also used as the job's TMPDIR.
pub struct Scratch {
    pub dir: PathBuf,
    /// Value of `OXMPI_TEST_MARK` in the job's environment.
    pub mark: String,
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

impl Scratch {
    /// A fresh scratch directory named `<tag><pid>x<n>x<name>` (with an empty `tmp/`).
    pub fn with_tag(tag: &str, name: &str) -> Self {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let mark = format!("{tag}{}x{n}x{name}", std::process::id());
        let dir = std::env::temp_dir().join(&mark);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("tmp")).unwrap();
        Scratch { dir, mark }
    }

    /// Processes whose environment carries this test's marker.
    pub fn leftovers(&self) -> Vec<String> {
        let needle = format!("OXMPI_TEST_MARK={}", self.mark);
        let me = std::process::id().to_string();
        let mut found = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.chars().all(|c| c.is_ascii_digit()) || name == me {
                continue;
            }
            let Ok(env) = std::fs::read(e.path().join("environ")) else {
                continue;
            };
            // Zombies of already-reaped processes have an empty environ.
            if env.split(|&b| b == 0).any(|v| v == needle.as_bytes()) {
                let cmd = std::fs::read_to_string(e.path().join("cmdline")).unwrap_or_default();
                found.push(format!("{name}: {}", cmd.replace('\0', " ")));
            }
        }
        found
    }

    /// No process of the job and no job directory is left.
    pub fn assert_clean(&self) {
        let left = self.leftovers();
        assert!(
            left.is_empty(),
            "processes of the job left behind: {left:?}"
        );
        let dirs: Vec<_> = std::fs::read_dir(self.dir.join("tmp"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(dirs.is_empty(), "job directory left behind: {dirs:?}");
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn sorted_lines(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s.lines().map(str::to_string).collect();
    v.sort();
    v
}
