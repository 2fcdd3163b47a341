//! Intercommunicators of the installed `libmpi.so.12`: `tests/c/inter.c` built with our
//! `mpicc` and run under our `mpirun` on 2, 3 and 4 ranks (groups of equal and unequal
//! sizes; 3 and 4 ranks oversubscribe the machine's cores, which the launcher allows).
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX` (set by `cargo xtask test`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{prefix, Scratch};

fn build(name: &str, dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(name);
    let exe = dir.join(name.trim_end_matches(".c"));
    let out = Command::new(prefix().join("bin/mpicc"))
        .arg("-Wall")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("run mpicc");
    assert!(
        out.status.success(),
        "building {name} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Runs `exe` on `n` ranks under our mpirun; returns stdout. Panics on failure.
fn run(exe: &Path, n: usize) -> String {
    let mut child = Command::new(prefix().join("bin/mpirun"))
        .arg("-n")
        .arg(n.to_string())
        .arg(exe)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mpirun");
    // Safety net against a hang (not a timing assertion).
    let start = Instant::now();
    while child.try_wait().expect("poll mpirun").is_none() {
        if start.elapsed() > Duration::from_secs(180) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("collect mpirun output");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{} on {n} ranks failed ({:?}):\nstdout:\n{stdout}\nstderr:\n{}",
        exe.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn intercommunicators_np2_to_4() {
    let dir = Scratch::new("inter-build");
    let exe = build("inter.c", &dir.0);
    for n in 2..=4 {
        let out = run(&exe, n);
        for line in [
            "halves: ok".to_string(),
            "one-vs-rest: ok".to_string(),
            format!("inter: all ok on {n} ranks"),
        ] {
            assert!(
                out.lines().any(|l| l == line),
                "inter.c on {n} ranks: missing '{line}':\n{out}"
            );
        }
    }
}
