//! What the head (`job`), the local daemon role (`daemon`) and the remote daemons (`remote`)
//! share: the launch of one node, what a daemon reports, and the job's timing and tagging
//! constants. It sits below all three so that none of them imports another for these.

use std::os::fd::RawFd;
use std::path::PathBuf;
use std::time::Duration;

/// Grace period between the polite signal and SIGKILL when tearing a job down.
pub const KILL_GRACE: Duration = Duration::from_millis(500);
/// How long output of already-exited ranks is still drained (pipes held by escaped
/// descendants are abandoned after this).
pub const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// Job number shown in `--tag-output` prefixes (`[1,rank]`), as Open MPI does.
pub const TAG_JOB: u32 = 1;

/// One rank to start on a node (planned by the head).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeProc {
    /// Global rank.
    pub rank: usize,
    /// Executable (resolved by the head).
    pub program: PathBuf,
    /// argv (`argv[0]` as typed).
    pub argv: Vec<String>,
    /// Variables added to (or replacing in) the daemon's environment, later entries win.
    /// `PMI_FD` is added by the daemon.
    pub env: Vec<(String, String)>,
    /// Working directory (`None`: the daemon's).
    pub cwd: Option<PathBuf>,
    /// CPUs to bind to.
    pub cpus: Option<Vec<usize>>,
    /// The rank reads stdin.
    pub stdin: bool,
}

/// What one node's daemon needs to run its part of a job: the head builds it from the
/// job plan; a remote `oxmpid` receives it as a control-channel `Launch`
/// ([`NodeLaunch::to_ctl`], [`NodeLaunch::from_ctl`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLaunch {
    /// Job id (PMI kvsname).
    pub jobid: String,
    /// Name of this node (in messages).
    pub host: String,
    /// Ranks in the job.
    pub size: usize,
    /// PMI universe size.
    pub universe_size: usize,
    /// Application context of every rank of the job.
    pub appnums: Vec<i32>,
    /// `PMI_process_mapping`.
    pub process_mapping: String,
    /// The job spans several daemons: PMI fences are completed through the head
    /// ([`DaemonEvent::FenceReady`],
    /// [`LocalDaemon::fence_complete`](crate::daemon::LocalDaemon::fence_complete)).
    pub distributed: bool,
    /// `--tag-output`.
    pub tag_output: bool,
    /// `--prepend-rank`.
    pub prepend_rank: bool,
    /// `--timestamp-output`.
    pub timestamp_output: bool,
    /// `--output-filename` directory.
    pub output_dir: Option<PathBuf>,
    /// This node's ranks, in rank order.
    pub procs: Vec<NodeProc>,
    /// Pairs in the job's PMI key space from the start (a spawned job's `preput`).
    pub preput: Vec<(String, String)>,
}

impl NodeLaunch {
    /// The control-channel form of this launch.
    pub fn to_ctl(&self) -> oxmpi_wire::ctl::LaunchSpec {
        use oxmpi_wire::ctl::{
            LaunchSpec, ProcSpec, LAUNCH_PREPEND_RANK, LAUNCH_TAG_OUTPUT, LAUNCH_TIMESTAMP_OUTPUT,
        };
        let mut flags = 0;
        for (on, bit) in [
            (self.tag_output, LAUNCH_TAG_OUTPUT),
            (self.prepend_rank, LAUNCH_PREPEND_RANK),
            (self.timestamp_output, LAUNCH_TIMESTAMP_OUTPUT),
        ] {
            if on {
                flags |= bit;
            }
        }
        LaunchSpec {
            jobid: self.jobid.clone(),
            size: self.size as u32,
            universe_size: self.universe_size as u32,
            process_mapping: self.process_mapping.clone(),
            env: Vec::new(),
            procs: self
                .procs
                .iter()
                .map(|p| ProcSpec {
                    rank: p.rank as u32,
                    argv: p.argv.clone(),
                    env: p.env.clone(),
                    cwd: p
                        .cwd
                        .as_ref()
                        .map_or(String::new(), |c| c.display().to_string()),
                    cpus: p
                        .cpus
                        .as_ref()
                        .map_or(Vec::new(), |c| c.iter().map(|&c| c as u32).collect()),
                    program: p.program.display().to_string(),
                    stdin: p.stdin,
                })
                .collect(),
            appnums: self.appnums.iter().map(|&a| a as u32).collect(),
            flags,
            output_dir: self
                .output_dir
                .as_ref()
                .map_or(String::new(), |d| d.display().to_string()),
            host: self.host.clone(),
            preput: self.preput.clone(),
        }
    }

    /// A launch received over the control channel (always distributed). Job-wide variables
    /// of `l.env` come before each rank's own.
    pub fn from_ctl(l: oxmpi_wire::ctl::LaunchSpec) -> NodeLaunch {
        use oxmpi_wire::ctl::{LAUNCH_PREPEND_RANK, LAUNCH_TAG_OUTPUT, LAUNCH_TIMESTAMP_OUTPUT};
        let nonempty = |s: String| (!s.is_empty()).then(|| PathBuf::from(s));
        NodeLaunch {
            jobid: l.jobid,
            host: l.host,
            size: l.size as usize,
            universe_size: l.universe_size as usize,
            appnums: l.appnums.iter().map(|&a| a as i32).collect(),
            process_mapping: l.process_mapping,
            distributed: true,
            tag_output: l.flags & LAUNCH_TAG_OUTPUT != 0,
            prepend_rank: l.flags & LAUNCH_PREPEND_RANK != 0,
            timestamp_output: l.flags & LAUNCH_TIMESTAMP_OUTPUT != 0,
            output_dir: nonempty(l.output_dir),
            procs: l
                .procs
                .into_iter()
                .map(|p| {
                    let program = if p.program.is_empty() {
                        PathBuf::from(p.argv.first().cloned().unwrap_or_default())
                    } else {
                        PathBuf::from(p.program)
                    };
                    let mut env = l.env.clone();
                    env.extend(p.env);
                    NodeProc {
                        rank: p.rank as usize,
                        program,
                        argv: p.argv,
                        env,
                        cwd: nonempty(p.cwd),
                        cpus: (!p.cpus.is_empty())
                            .then(|| p.cpus.iter().map(|&c| c as usize).collect()),
                        stdin: p.stdin,
                    }
                })
                .collect(),
            preput: l.preput,
        }
    }
}

/// How a rank's process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankExit {
    /// Normal exit with this status.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

/// What a node daemon reports to the head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DaemonEvent {
    /// A rank's process ended (its PMI messages sent before have been processed).
    RankExited {
        /// Rank.
        rank: usize,
        /// Process id.
        pid: i32,
        /// How it ended.
        exit: RankExit,
        /// It initialized PMI but never called finalize.
        missing_finalize: bool,
    },
    /// A rank asked for the job to be aborted (PMI abort / MPI_Abort).
    Abort {
        /// Rank, if known.
        rank: Option<usize>,
        /// Its pid, if known.
        pid: Option<i32>,
        /// Requested exit code.
        code: i32,
        /// Message given by the rank.
        message: String,
    },
    /// A rank's program could not be executed (it exits with status 127 next).
    LaunchFailed {
        /// Rank.
        rank: usize,
        /// Why `exec` failed.
        message: String,
    },
    /// The reader of mpirun's stdout (fd 1) or stderr (fd 2) went away.
    OutputClosed {
        /// The descriptor.
        fd: RawFd,
    },
    /// A rank violated the PMI protocol (its connection is closed).
    PmiError {
        /// Rank, if known.
        rank: Option<usize>,
        /// What went wrong.
        message: String,
    },
    /// Forwarding mode only: whole output lines of a rank (already tagged as asked).
    Output {
        /// Rank.
        rank: usize,
        /// 0 = stdout, 1 = stderr.
        stream: usize,
        /// The bytes.
        data: Vec<u8>,
    },
    /// Distributed mode only: every live local rank entered PMI fence `epoch`; the head
    /// gathers every node's `puts` and completes it
    /// ([`LocalDaemon::fence_complete`](crate::daemon::LocalDaemon::fence_complete)).
    FenceReady {
        /// Fence epoch.
        epoch: u64,
        /// Pairs put by local ranks since the previous fence.
        puts: Vec<(String, String)>,
    },
    /// A rank asked to start a new job (PMI `spawn`); the head answers with
    /// [`LocalDaemon::spawn_done`](crate::daemon::LocalDaemon::spawn_done).
    Spawn {
        /// The rank that asked.
        rank: usize,
        /// The request was PMI-2.
        v2: bool,
        /// What to start.
        request: oxmpi_wire::pmi::SpawnRequest,
    },
    /// A child that is not one of the ranks was reaped (e.g. a launch agent of the head).
    OtherChildExited {
        /// Its pid.
        pid: i32,
        /// How it ended.
        exit: RankExit,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_launch_survives_the_control_channel() {
        let l = NodeLaunch {
            jobid: "oxmpi-1.0".into(),
            host: "n1".into(),
            size: 4,
            universe_size: 8,
            appnums: vec![0, 0, 1, 1],
            process_mapping: "(vector,(0,2,2))".into(),
            distributed: true,
            tag_output: true,
            prepend_rank: false,
            timestamp_output: true,
            output_dir: Some(PathBuf::from("out")),
            procs: vec![
                NodeProc {
                    rank: 2,
                    program: PathBuf::from("/bin/b"),
                    argv: vec!["b".into(), "-x".into()],
                    env: vec![("K".into(), "V".into())],
                    cwd: Some(PathBuf::from("/tmp")),
                    cpus: Some(vec![1, 3]),
                    stdin: true,
                },
                NodeProc {
                    rank: 3,
                    program: PathBuf::from("/bin/b"),
                    argv: vec!["b".into()],
                    env: vec![],
                    cwd: None,
                    cpus: None,
                    stdin: false,
                },
            ],
            preput: vec![("oxmpi_parent_port".into(), "p".into())],
        };
        let bytes = oxmpi_wire::ctl::Msg::Launch(l.to_ctl()).encode();
        let oxmpi_wire::ctl::Msg::Launch(back) = oxmpi_wire::ctl::Msg::decode(&bytes).unwrap()
        else {
            panic!("not a launch")
        };
        assert_eq!(NodeLaunch::from_ctl(back), l);
    }
}
