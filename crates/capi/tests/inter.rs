//! Intercommunicators of the installed `libmpi.so.12`: `tests/c/inter.c` built with our
//! `mpicc` and run under our `mpirun` on 2, 3 and 4 ranks (groups of equal and unequal
//! sizes; 3 and 4 ranks oversubscribe the machine's cores, which the launcher allows).
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX` (set by `cargo xtask test`).

use std::ffi::OsStr;
use std::path::Path;

mod common;
use common::{build, mpirun, success, Scratch};

/// Runs `exe` on `n` ranks under our mpirun; returns stdout. Panics on failure.
fn run(exe: &Path, n: usize) -> String {
    let out = mpirun(
        &[
            OsStr::new("-n"),
            OsStr::new(&n.to_string()),
            exe.as_os_str(),
        ],
        &[],
    );
    success(&out, &format!("{} on {n} ranks", exe.display()))
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
