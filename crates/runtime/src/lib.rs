//! Runtime of oxmpi: what `mpirun`/`mpiexec` is made of.
//!
//! * [`cli`]: the command-line personality (Open MPI and Hydra habits) → [`cli::JobSpec`].
//! * [`alloc`]: allocation (`--host`, `--hostfile`, local cores) and mapping (`--map-by`,
//!   `-N`, `--bind-to`), oversubscription rules, `PMI_process_mapping`.
//! * [`env`]: the environment each rank sees (`OMPI_*`, `PMI_*`, `OXMPI_*`, `-x`, `--mca`,
//!   `--prefix`).
//! * [`iof`]: sans-IO line assembly for IO forwarding (tags, timestamps).
//! * [`daemon`]: the per-node daemon role (fork/exec, IO forwarding, PMI service, reaping),
//!   played in-process by the head on the local node; reports [`daemon::DaemonEvent`]s.
//! * [`launch`]: launch agents (the head is the local node's daemon; remote agents later).
//! * [`session`]: the private job session directory.
//! * [`job`]: planning (validation, nothing launched on bad input) and the head: event loop,
//!   signals, timeout, exit-status rules and teardown.
//! * [`topo`], [`sys`]: local node facts and thin OS helpers.
//!
//! The entry point used by the `mpirun` binary is [`main_with_args`].

#![warn(missing_docs)]

pub mod alloc;
pub mod cli;
pub mod daemon;
pub mod env;
pub mod error;
pub mod iof;
pub mod job;
pub mod launch;
pub mod session;
pub mod sys;
pub mod topo;

pub use error::{Result, RuntimeError};

/// Run `mpirun` with `args` (without the program name); returns the process exit status.
/// Errors are printed as one line on stderr (`mpirun: ...`) and give status 1 (nothing
/// launched).
pub fn main_with_args(args: Vec<String>) -> i32 {
    let cmd = match cli::parse(args) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    match cmd {
        cli::Command::Help => {
            print!("{}", cli::HELP);
            0
        }
        cli::Command::Version => {
            println!("mpirun (oxmpi) {}", env!("CARGO_PKG_VERSION"));
            0
        }
        cli::Command::Run(spec) => {
            let plan = match job::plan(*spec) {
                Ok(p) => p,
                Err(e) => return fail(&e),
            };
            match job::run(&plan) {
                Ok(code) => code,
                Err(e) => fail(&e),
            }
        }
    }
}

fn fail(e: &RuntimeError) -> i32 {
    eprintln!("mpirun: error: {e}");
    1
}
