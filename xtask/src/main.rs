//! Project automation: `cargo xtask <install|demo|check-arch|test|wheel|deb|bench>`.
//!
//! Plain std only, so that it builds in seconds on a fresh machine.

mod arch;
mod fortran;
mod install;
mod libmpi;
mod package;
mod stages;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The workspace root (the parent of this crate's directory).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

/// Default install prefix used by `demo` and `test`.
pub fn default_prefix() -> PathBuf {
    workspace_root().join("target").join("oxmpi")
}

/// Run a command, echoing it, and fail with its status.
pub fn run(cmd: &mut Command) -> Result<(), String> {
    eprintln!("xtask: running {cmd:?}");
    let status = cmd
        .status()
        .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{:?} failed: {status}", cmd.get_program()))
    }
}

fn usage() -> String {
    "usage: cargo xtask <command>\n\
     \n\
     commands:\n\
     \x20 install [--prefix DIR] [--debug]   build and install bin/, lib/, include/, etc/ into DIR\n\
     \x20                                    (default: target/oxmpi)\n\
     \x20 demo                               install, then run the ring demo with mpirun -n 4\n\
     \x20 check-arch                         the crate graph equals ARCHITECTURE.md's; no import circle\n\
     \x20                                    between the files of a library crate; no OS call\n\
     \x20                                    outside a crate's sys module\n\
     \x20 test                               fmt, check-arch, clippy, unit tests and the integration\n\
     \x20                                    suite\n\
     \x20 wheel [--prefix DIR | --debug] [--out DIR]\n\
     \x20                                    the manylinux wheel `oxmpi` (default out: target/packages)\n\
     \x20 deb [--prefix DIR | --debug] [--out DIR]\n\
     \x20                                    the Debian package `oxmpi` (installs into /usr)\n\
     \x20 bench [ARGS]                       benchmark harness (oxmpi vs Open MPI vs MPICH)\n"
        .to_string()
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("install") => install::cmd_install(&args[1..]),
        Some("demo") => install::cmd_demo(&args[1..]),
        Some("test") => install::cmd_test(&args[1..]),
        Some("wheel") => package::cmd_wheel(&args[1..]),
        Some("deb") => package::cmd_deb(&args[1..]),
        Some("check-arch") => arch::cmd_check_arch(&args[1..]),
        Some("bench") => run(Command::new(
            std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()),
        )
        .current_dir(workspace_root())
        .args(["run", "--release", "--quiet", "-p", "oxmpi-bench", "--"])
        .args(&args[1..])),
        Some("-h") | Some("--help") | None => {
            print!("{}", usage());
            Ok(())
        }
        Some(other) => Err(format!("unknown command '{other}'\n{}", usage())),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}
