//! Runtime of oxmpi: what `mpirun`/`mpiexec` is made of.
//!
//! * [`cli`]: the command-line personality (Open MPI and Hydra habits) → [`cli::JobSpec`].
//! * [`alloc`]: allocation (`--host`, `--hostfile`, local cores) and mapping (`--map-by`,
//!   `-N`, `--bind-to`), oversubscription rules, `PMI_process_mapping`.
//! * [`env`](mod@env): the environment each rank sees (`OMPI_*`, `PMI_*`, `OXMPI_*`, `-x`, `--mca`,
//!   `--prefix`).
//! * [`iof`]: sans-IO line assembly for IO forwarding (tags, timestamps).
//! * [`proto`]: what the head, the local daemon and the remote daemons share (a node's
//!   launch, [`proto::DaemonEvent`], the job's grace periods); it imports none of them.
//! * [`daemon`]: the per-node daemon role (fork/exec, IO forwarding, PMI service, reaping),
//!   played in-process by the head on the local node; reports [`proto::DaemonEvent`]s.
//! * [`launch`]: launch agents (the head is the local node's daemon; `plm_rsh_agent` for the
//!   other nodes).
//! * [`remote`]: the head's side of remote daemons and the `oxmpid` daemon itself.
//! * [`session`]: the private job session directory.
//! * [`job`]: planning (validation, nothing launched on bad input) and the head: event loop,
//!   signals, timeout, exit-status rules and teardown.
//! * [`topo`]: local node facts.
//! * [`sys`]: the OS layer, every system call of the runtime; [`sys::spawn`]: fork/exec of one
//!   rank without waiting for its `exec`.
//!
//! The entry point used by the `mpirun` binary is [`main_with_args`].
//!
//! # How a job starts
//!
//! 1. **Parse** ([`cli::parse`]): argv becomes a [`cli::JobSpec`] (application contexts,
//!    placement options, `-x`, `--mca`, output options). Unknown options, missing programs,
//!    `-n 0`, bad `--timeout` or conflicting `--mca` values stop here.
//! 2. **Plan** ([`job::plan`]), still without side effects: the global MCA registry is built
//!    from `--mca`, `--tune`, the environment and parameter files; the allocation comes from
//!    `--hostfile`, `--host`, the enclosing Slurm job or the local cores ([`alloc::allocate`]);
//!    ranks are mapped onto it ([`alloc::map_job`], oversubscription rules, `--bind-to`); the
//!    launch agent checks that it reaches every node with ranks; each program is resolved in
//!    the rank's `PATH` and working directory. Any error is one line and nothing is launched.
//! 3. **Session** ([`job::run`]): signal handlers (a self-pipe) are installed, then the private
//!    job directory ([`session::SessionDir`], mode 0700, given to ranks as `OXMPI_JOB_DIR`).
//! 4. **Launch** ([`daemon::LocalDaemon::launch`]): the head plays the local node's daemon.
//!    For each rank: a socketpair for PMI (the child end is inherited as `PMI_FD`), pipes for
//!    stdout/stderr (and stdin for the `--stdin` target), the environment of [`env`](mod@env), then
//!    fork/exec with `setpgid`, `PR_SET_PDEATHSIG(SIGKILL)`, CPU affinity and the original
//!    descriptor limit. A `oxmpi_wire::pmi::PmiServer` serves every rank's PMI-1 or PMI-2.
//! 5. **Run** (the head's event loop, one `poll` over the signal pipe, output pipes and PMI
//!    sockets): output is reassembled into whole lines per rank and stream ([`iof`]) and
//!    written with one `write` per batch; PMI bytes go to the server and its actions are
//!    executed (replies, abort); exited ranks are reaped and reported to the head as
//!    [`proto::DaemonEvent`]s.
//! 6. **End**: the first failure decides (non-zero exit of the lowest rank in a batch, death
//!    by signal → `128+N` with a `rank R (pid P) on host H exited on signal N (Name)` line,
//!    PMI abort → its code, exit after PMI init without finalize → 1, `--timeout` → 124,
//!    SIGINT/SIGTERM/SIGHUP/SIGQUIT to mpirun → forwarded, then `128+N`). Remaining ranks get
//!    SIGTERM to their process groups, SIGKILL after [`proto::KILL_GRACE`]; once every rank is
//!    reaped, every rank's process group is killed, output is drained to end of file, and the
//!    job directory is removed.
//!
//! # Across machines
//!
//! When ranks are mapped onto nodes other than the one `mpirun` runs on, [`job::plan`]
//! picks a launch agent ([`launch::RshAgent`]): `plm_rsh_agent` (default `ssh`), or inside a
//! Slurm allocation `srun --nodes=1 --ntasks=1 ... --nodelist` ([`job::SLURM_AGENT`]). The
//! head listens on a TCP port, generates a per-job secret and runs
//! `<agent> <host> <prefix>/bin/oxmpid --head <addr> --node <i> --jobid <id>
//! --link-timeout <s>` per remote node (`mpirun --oxmpid` when `oxmpid` is not installed next
//! to it), writing the secret as one line on the agent's stdin. `<addr>` is
//! `plm_head_address:port`, or by default every usable address of the head
//! (`a/prefix+b/prefix:port`), which the daemon tries on its own subnets first. Each daemon
//! ([`remote::oxmpid_main`]) connects back,
//! authenticates with HMAC-SHA256 challenge–response (`oxmpi_wire::ctl`), receives its
//! `Launch` ([`proto::NodeLaunch`]) and plays [`daemon::LocalDaemon`] in forwarding and
//! distributed mode: whole output lines travel as `Io` messages, exits as `RankExited`,
//! aborts as `PmiAbort`, and its PMI server's fences as `FenceContribution`s that the head
//! gathers from every daemon (its own in-process one included, [`remote::FenceGather`])
//! before sending `FenceRelease` with the union of the pairs. Ending the job sends `Signal`
//! messages (polite signal, then SIGKILL after the grace period); when every node reported
//! its ranks done, the head sends `Shutdown` and reaps the agents. A daemon that loses its
//! head kills its ranks and removes its job directory. Peers that fail authentication or
//! send garbage are logged and dropped.

#![warn(missing_docs)]

pub mod alloc;
pub mod cli;
pub mod daemon;
pub mod env;
pub mod error;
pub mod iof;
pub mod job;
pub mod launch;
pub mod names;
pub mod params;
pub mod proto;
pub mod remote;
pub mod session;
pub mod sys;
pub mod topo;

pub use error::{Result, RuntimeError};
pub use params::PROVIDER;

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
///
/// With [`job::DAEMON_FLAG`] as first argument, it runs as the node daemon `oxmpid`
/// instead ([`remote::oxmpid_main`]), for builds where `oxmpid` is not installed.
pub fn main_with_args(args: Vec<String>) -> i32 {
    main_with_providers(args, &[])
}

/// [`main_with_args`], also validating the parameters of `rank_providers` (the MPI
/// library's crates, which the ranks will read) before anything is launched: a bad value
/// for one of them (`--mca btl_sm_eager_limit abc`) stops the launch with one line.
pub fn main_with_providers(
    args: Vec<String>,
    rank_providers: &[&'static oxmpi_base::params::Provider],
) -> i32 {
    main_with_checks(args, rank_providers, &[])
}

/// [`main_with_providers`], also running `checks` of the ranks' parameters once before
/// anything is launched (see [`job::plan_checked`]).
pub fn main_with_checks(
    args: Vec<String>,
    rank_providers: &[&'static oxmpi_base::params::Provider],
    checks: &[job::ParamCheck],
) -> i32 {
    if args.first().map(String::as_str) == Some(job::DAEMON_FLAG) {
        return remote::oxmpid_main(args[1..].to_vec());
    }
    sys::ensure_std_fds();
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
        cli::Command::Run(mut spec) => {
            // The ranks may run elsewhere (--wdir): they get the profile directory absolute.
            let profile = spec
                .profile
                .as_ref()
                .map(|d| std::path::absolute(d).unwrap_or(d.clone()));
            if let Some(d) = &profile {
                for (k, v) in &mut spec.mca {
                    if k == "mpi_profile" {
                        *v = d.display().to_string();
                    }
                }
            }
            let plan = match job::plan_checked(*spec, rank_providers, checks) {
                Ok(p) => p,
                Err(e) => return fail(&e),
            };
            let code = match job::run(&plan) {
                Ok(code) => code,
                Err(e) => fail(&e),
            };
            if let Some(d) = profile {
                render_profile(&d);
            }
            code
        }
    }
}

/// After a `--profile` job: `oxmpi-profile DIR` (installed next to `mpirun`) turns the
/// ranks' files into the report; without it the files stay as they are.
fn render_profile(dir: &std::path::Path) {
    let tool = std::env::current_exe()
        .ok()
        .and_then(|e| Some(e.parent()?.join("oxmpi-profile")))
        .filter(|t| t.is_file());
    let Some(tool) = tool else {
        eprintln!(
            "mpirun: profile files in {} (oxmpi-profile, which renders them, is not installed next to mpirun)",
            dir.display()
        );
        return;
    };
    match std::process::Command::new(&tool).arg(dir).status() {
        Ok(s) if s.success() => {}
        Ok(s) => eprintln!("mpirun: oxmpi-profile {} failed ({s})", dir.display()),
        Err(e) => eprintln!("mpirun: cannot run {}: {e}", tool.display()),
    }
}

fn fail(e: &RuntimeError) -> i32 {
    eprintln!("mpirun: error: {e}");
    1
}
