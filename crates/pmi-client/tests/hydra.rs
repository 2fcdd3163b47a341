//! The client against MPICH's Hydra process manager (`mpiexec.hydra`, Debian package `mpich`):
//! the `oxmpi-pmi-exchange` program is launched on several ranks in each wire mode.

use std::path::PathBuf;
use std::process::Command;

fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_oxmpi-pmi-exchange"))
}

fn hydra(args: &[&str], n: u32, version: &str) {
    let out = Command::new("mpiexec.hydra")
        .args(args)
        .arg("-n")
        .arg(n.to_string())
        .arg(example())
        .env("OXMPI_PMI_VERSION", version)
        // Safety net so that a protocol bug cannot hang the test suite forever.
        .env("MPIEXEC_TIMEOUT", "120")
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run mpiexec.hydra ({e}); install it with `apt-get install mpich`")
        });
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "mpiexec.hydra {args:?} -n {n} failed: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    for r in 0..n {
        let want = format!("pmi_exchange OK rank {r} of {n} (version Some(V{version})");
        assert!(
            stdout.lines().any(|l| l.starts_with(&want)),
            "missing {want:?} in:\n{stdout}\nstderr:\n{stderr}"
        );
    }
}

#[test]
fn hydra_pmi1_fd() {
    hydra(&[], 3, "1");
}

#[test]
fn hydra_pmi2_fd() {
    hydra(&[], 3, "2");
}

#[test]
fn hydra_pmi1_port() {
    hydra(&["-pmi-port"], 2, "1");
}

#[test]
fn hydra_pmi2_port() {
    hydra(&["-pmi-port"], 2, "2");
}
