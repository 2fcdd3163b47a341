//! The whole oxmpi stack under the installed launcher: C programs built with the installed
//! `mpicc` (libmpi.so.12 over the engine and the oxmpi-pmi client) run under the installed
//! `mpiexec` (the symlink to `mpirun`). Needs `OXMPI_TEST_PREFIX` (set by `cargo xtask test`).

use std::path::{Path, PathBuf};
use std::process::Command;

fn prefix() -> PathBuf {
    std::env::var_os("OXMPI_TEST_PREFIX")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!(
                "OXMPI_TEST_PREFIX is not set: this test needs an installed oxmpi prefix \
             (run `cargo xtask test`, or `cargo xtask install --prefix DIR` and set \
             OXMPI_TEST_PREFIX=DIR)"
            )
        })
}

fn build(prefix: &Path, out: &Path, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(format!("{name}.c"));
    let exe = out.join(name);
    let st = Command::new(prefix.join("bin/mpicc"))
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("running the installed mpicc");
    assert!(st.success(), "mpicc failed for {}", src.display());
    exe
}

#[test]
fn oxmpi_programs_run_under_installed_mpiexec() {
    let prefix = prefix();
    let dir = std::env::temp_dir().join(format!("oxmpi-stack-test-{}", std::process::id()));
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let run = |exe: &Path| {
        Command::new(prefix.join("bin/mpiexec"))
            .env("TMPDIR", &tmp)
            .args(["-n", "4"])
            .arg(exe)
            .output()
            .unwrap()
    };
    let hello = build(&prefix, &dir, "hello");
    let o = run(&hello);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{err}");
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort_unstable();
    let want: Vec<String> = (0..4)
        .map(|r| format!("hello from rank {r} of 4"))
        .collect();
    assert_eq!(lines, want);
    let ring = build(&prefix, &dir, "ring");
    let o = run(&ring);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout), "ring total 18\n");
    // The job directory of every run is gone.
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}
