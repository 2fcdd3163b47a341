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

/// Verbose output streams of the runtime's frameworks (Open MPI's names). Each is enabled by
/// `--mca <framework>_base_verbose N` (or `OXMPI_MCA_<framework>_base_verbose`); level 10
/// prints the main steps, 20 per-rank details, 40 per-message traffic.
pub mod streams {
    use oxmpi_base::output::Stream;
    /// Resource allocation (`--host`, `--hostfile`, local cores).
    pub static RAS: Stream = Stream::new("ras");
    /// Mapping of ranks to nodes and cores.
    pub static RMAPS: Stream = Stream::new("rmaps");
    /// Launch agents (process lifecycle management of daemons).
    pub static PLM: Stream = Stream::new("plm");
    /// Local launch and reaping of ranks by the node daemon.
    pub static ODLS: Stream = Stream::new("odls");
    /// IO forwarding.
    pub static IOF: Stream = Stream::new("iof");
    /// Error manager: why and how the job ends.
    pub static ERRMGR: Stream = Stream::new("errmgr");
    /// The PMI server plumbing.
    pub static PMI: Stream = Stream::new("pmi");
}

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
