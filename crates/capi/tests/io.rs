//! MPI-IO of the installed `libmpi.so.12`: `tests/c/io.c` built with our `mpicc` and run
//! under our `mpirun` on 1, 2 and 3 ranks, each in its own scratch directory which must be
//! empty afterwards (the program deletes what it creates; the shared file pointer's
//! counter file is removed while the file is open).
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX` (set by `cargo xtask test`).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{prefix, Scratch};

#[test]
fn mpi_io_on_one_to_three_ranks() {
    let build = Scratch::new("io-build");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/io.c");
    let exe = build.0.join("io");
    let out = Command::new(prefix().join("bin/mpicc"))
        .arg("-Wall")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("run mpicc");
    assert!(
        out.status.success(),
        "building io.c failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for n in 1..=3 {
        let data = Scratch::new("io-data");
        let mut child = Command::new(prefix().join("bin/mpirun"))
            .arg("-n")
            .arg(n.to_string())
            .arg(&exe)
            .arg(&data.0)
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
            "io on {n} ranks failed ({:?}):\nstdout:\n{stdout}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(
            lines,
            [
                "io: errors ok",
                "io: views ok",
                "io: shared ok",
                "io: queries ok",
                "io: done"
            ],
            "io on {n} ranks"
        );
        let left: Vec<_> = std::fs::read_dir(&data.0)
            .expect("read scratch dir")
            .map(|e| e.expect("dir entry").file_name())
            .collect();
        assert!(left.is_empty(), "io on {n} ranks left files: {left:?}");
    }
}
