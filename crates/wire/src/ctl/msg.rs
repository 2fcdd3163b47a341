//! Messages exchanged between the head (`mpirun`) and node daemons after authentication.

use super::codec::{Dec, DecodeError, Enc};
use crate::pmi::{SpawnCommand, SpawnRequest};

/// How a rank ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// Normal exit with this code.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

/// Which standard stream an IO chunk belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoStream {
    /// Rank's stdin (head → daemon).
    Stdin,
    /// Rank's stdout (daemon → head).
    Stdout,
    /// Rank's stderr (daemon → head).
    Stderr,
}

/// One process to start on a node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProcSpec {
    /// Global rank.
    pub rank: u32,
    /// Program and arguments (`argv[0]` is the program).
    pub argv: Vec<String>,
    /// Environment additions/overrides for this rank.
    pub env: Vec<(String, String)>,
    /// Working directory (empty: the daemon's).
    pub cwd: String,
    /// CPUs to bind to (empty: no binding).
    pub cpus: Vec<u32>,
    /// Executable to run (absolute path resolved by the head; `argv[0]` stays as typed).
    /// Empty: `argv[0]`.
    pub program: String,
    /// The rank reads stdin (forwarded by the head as [`Msg::Io`] with [`IoStream::Stdin`]).
    pub stdin: bool,
}

/// A job (or the part of it on one node) to launch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LaunchSpec {
    /// Job id / PMI kvsname.
    pub jobid: String,
    /// Number of ranks in the whole job.
    pub size: u32,
    /// Universe size for PMI.
    pub universe_size: u32,
    /// `PMI_process_mapping` value.
    pub process_mapping: String,
    /// Environment common to every rank of the job.
    pub env: Vec<(String, String)>,
    /// Processes to start on the receiving node.
    pub procs: Vec<ProcSpec>,
    /// Application context number of every rank of the job (PMI `appnum`), indexed by rank.
    pub appnums: Vec<u32>,
    /// Output options, a set of `LAUNCH_*` flag bits (e.g. [`LAUNCH_TAG_OUTPUT`]).
    pub flags: u32,
    /// `--output-filename` directory (empty: output is forwarded to the head).
    pub output_dir: String,
    /// Name of the receiving node as the head knows it (used in messages).
    pub host: String,
    /// Pairs every rank finds in its PMI key space from the start (a spawned job's
    /// `preput`; empty for `mpirun`'s own job).
    pub preput: Vec<(String, String)>,
}

/// [`LaunchSpec::flags`]: prefix output lines with `[job,rank]<stream>:`.
pub const LAUNCH_TAG_OUTPUT: u32 = 1;
/// [`LaunchSpec::flags`]: prefix output lines with the rank (`--prepend-rank`).
pub const LAUNCH_PREPEND_RANK: u32 = 2;
/// [`LaunchSpec::flags`]: prefix output lines with a timestamp.
pub const LAUNCH_TIMESTAMP_OUTPUT: u32 = 4;

/// Control-channel messages (both directions; each variant says who sends it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg {
    /// daemon → head: the daemon is ready (after authentication).
    DaemonReady {
        /// Node index.
        node: u32,
        /// Host name.
        host: String,
        /// Daemon pid.
        pid: u32,
        /// Usable CPU count.
        cpus: u32,
    },
    /// head → daemon: start these processes.
    Launch(LaunchSpec),
    /// daemon → head: a rank was started.
    RankStarted {
        /// Rank.
        rank: u32,
        /// Its pid on the node.
        pid: u32,
    },
    /// daemon → head: a rank ended.
    RankExited {
        /// Rank.
        rank: u32,
        /// Its pid.
        pid: u32,
        /// How it ended.
        status: ExitStatus,
        /// It initialized PMI but never called finalize.
        missing_finalize: bool,
    },
    /// IO forwarding chunk (stdout/stderr daemon → head, stdin head → daemon).
    Io {
        /// Rank.
        rank: u32,
        /// Stream.
        stream: IoStream,
        /// Bytes (may be empty with `eof`).
        data: Vec<u8>,
        /// No more data on this stream.
        eof: bool,
    },
    /// daemon → head: all local ranks entered PMI fence `epoch`; pairs put locally.
    FenceContribution {
        /// Fence epoch.
        epoch: u64,
        /// Pairs.
        puts: Vec<(String, String)>,
    },
    /// head → daemon: fence `epoch` complete; the union of all nodes' pairs.
    FenceRelease {
        /// Fence epoch.
        epoch: u64,
        /// Pairs.
        puts: Vec<(String, String)>,
    },
    /// daemon → head: a rank asked to abort the job (PMI abort).
    PmiAbort {
        /// Rank.
        rank: u32,
        /// Exit code requested.
        code: i32,
        /// Message.
        message: String,
    },
    /// head → daemon: deliver a signal to every local rank.
    Signal {
        /// Signal number.
        signal: i32,
    },
    /// head → daemon: kill the job's local ranks (job is ending with `code`).
    Abort {
        /// Job exit code.
        code: i32,
        /// Why.
        reason: String,
    },
    /// head → daemon: clean up and exit; daemon → head: acknowledged, exiting.
    Shutdown,
    /// Either direction, every `plm_heartbeat_interval`: I am alive (a side that hears
    /// nothing from the other for `plm_heartbeat_timeout` counts it as lost).
    Heartbeat,
    /// Either direction: a fatal error the peer should report.
    Error {
        /// Text.
        message: String,
    },
    /// Either direction: `msg` is about spawned job `job` (1, 2, ...: the head's numbering
    /// of the jobs `MPI_Comm_spawn` started; `mpirun`'s own job is never wrapped). Head →
    /// daemon: `Launch` (start this node's part), `FenceRelease`, `Signal`; daemon → head:
    /// `RankExited`, `Io`, `FenceContribution`, `PmiAbort`, `Error`, `Shutdown` (this
    /// node's part is done). Never nested.
    ForJob {
        /// The spawned job.
        job: u32,
        /// The message.
        msg: Box<Msg>,
    },
    /// daemon → head: rank `rank` of job `job` (0: `mpirun`'s own) asked to start a new
    /// job (PMI `spawn`); answered by [`Msg::SpawnDone`].
    Spawn {
        /// The asking rank's job.
        job: u32,
        /// The asking rank.
        rank: u32,
        /// The request came in PMI-2 framing.
        v2: bool,
        /// What to start.
        request: SpawnRequest,
    },
    /// head → daemon: the answer to [`Msg::Spawn`]: the new job's id and one error code
    /// per child, or why nothing was started (one line).
    SpawnDone {
        /// The asking rank's job.
        job: u32,
        /// The asking rank.
        rank: u32,
        /// The request came in PMI-2 framing.
        v2: bool,
        /// `Ok((jobid, errcodes))` or the reason.
        result: Result<(String, Vec<i32>), String>,
    },
}

const T_READY: u8 = 1;
const T_LAUNCH: u8 = 2;
const T_STARTED: u8 = 3;
const T_EXITED: u8 = 4;
const T_IO: u8 = 5;
const T_FENCE_C: u8 = 6;
const T_FENCE_R: u8 = 7;
const T_PMI_ABORT: u8 = 8;
const T_SIGNAL: u8 = 9;
const T_ABORT: u8 = 10;
const T_SHUTDOWN: u8 = 11;
const T_ERROR: u8 = 12;
const T_HEARTBEAT: u8 = 13;
const T_FOR_JOB: u8 = 14;
const T_SPAWN: u8 = 15;
const T_SPAWN_DONE: u8 = 16;

fn enc_request(e: &mut Enc, r: &SpawnRequest) {
    e.pairs(&r.preput).len(r.commands.len());
    for c in &r.commands {
        e.str(&c.program)
            .strs(&c.argv)
            .u32(c.maxprocs)
            .pairs(&c.info);
    }
}

fn dec_request(d: &mut Dec<'_>) -> Result<SpawnRequest, DecodeError> {
    let preput = d.pairs("preput")?;
    let n = d.count(4 + 4 + 4 + 4, "commands")?;
    let mut commands = Vec::with_capacity(n);
    for _ in 0..n {
        commands.push(SpawnCommand {
            program: d.string("program")?,
            argv: d.strs("argv")?,
            maxprocs: d.u32("maxprocs")?,
            info: d.pairs("info")?,
        });
    }
    Ok(SpawnRequest { commands, preput })
}

impl Msg {
    /// Encodes the message body (without frame header).
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Enc::default();
        match self {
            Msg::DaemonReady {
                node,
                host,
                pid,
                cpus,
            } => {
                e.u8(T_READY).u32(*node).str(host).u32(*pid).u32(*cpus);
            }
            Msg::Launch(l) => {
                e.u8(T_LAUNCH)
                    .str(&l.jobid)
                    .u32(l.size)
                    .u32(l.universe_size)
                    .str(&l.process_mapping)
                    .pairs(&l.env)
                    .len(l.procs.len());
                for p in &l.procs {
                    e.u32(p.rank)
                        .strs(&p.argv)
                        .pairs(&p.env)
                        .str(&p.cwd)
                        .u32s(&p.cpus)
                        .str(&p.program)
                        .bool(p.stdin);
                }
                e.u32s(&l.appnums)
                    .u32(l.flags)
                    .str(&l.output_dir)
                    .str(&l.host)
                    .pairs(&l.preput);
            }
            Msg::RankStarted { rank, pid } => {
                e.u8(T_STARTED).u32(*rank).u32(*pid);
            }
            Msg::RankExited {
                rank,
                pid,
                status,
                missing_finalize,
            } => {
                e.u8(T_EXITED).u32(*rank).u32(*pid);
                match status {
                    ExitStatus::Code(c) => e.u8(0).i32(*c),
                    ExitStatus::Signal(s) => e.u8(1).i32(*s),
                };
                e.bool(*missing_finalize);
            }
            Msg::Io {
                rank,
                stream,
                data,
                eof,
            } => {
                let s = match stream {
                    IoStream::Stdin => 0,
                    IoStream::Stdout => 1,
                    IoStream::Stderr => 2,
                };
                e.u8(T_IO).u32(*rank).u8(s).bytes(data).bool(*eof);
            }
            Msg::FenceContribution { epoch, puts } => {
                e.u8(T_FENCE_C).u64(*epoch).pairs(puts);
            }
            Msg::FenceRelease { epoch, puts } => {
                e.u8(T_FENCE_R).u64(*epoch).pairs(puts);
            }
            Msg::PmiAbort {
                rank,
                code,
                message,
            } => {
                e.u8(T_PMI_ABORT).u32(*rank).i32(*code).str(message);
            }
            Msg::Signal { signal } => {
                e.u8(T_SIGNAL).i32(*signal);
            }
            Msg::Abort { code, reason } => {
                e.u8(T_ABORT).i32(*code).str(reason);
            }
            Msg::Heartbeat => {
                e.u8(T_HEARTBEAT);
            }
            Msg::Shutdown => {
                e.u8(T_SHUTDOWN);
            }
            Msg::Error { message } => {
                e.u8(T_ERROR).str(message);
            }
            Msg::ForJob { job, msg } => {
                e.u8(T_FOR_JOB).u32(*job).raw(&msg.encode());
            }
            Msg::Spawn {
                job,
                rank,
                v2,
                request,
            } => {
                e.u8(T_SPAWN).u32(*job).u32(*rank).bool(*v2);
                enc_request(&mut e, request);
            }
            Msg::SpawnDone {
                job,
                rank,
                v2,
                result,
            } => {
                e.u8(T_SPAWN_DONE).u32(*job).u32(*rank).bool(*v2);
                match result {
                    Ok((jobid, codes)) => {
                        let codes: Vec<u32> = codes.iter().map(|&c| c as u32).collect();
                        e.u8(0).str(jobid).u32s(&codes)
                    }
                    Err(why) => e.u8(1).str(why),
                };
            }
        }
        e.buf
    }

    /// Decodes a message body; the whole slice must be consumed.
    pub fn decode(b: &[u8]) -> Result<Msg, DecodeError> {
        let mut d = Dec::new(b);
        let tag = d.u8("message tag")?;
        let m = match tag {
            T_READY => Msg::DaemonReady {
                node: d.u32("node")?,
                host: d.string("host")?,
                pid: d.u32("pid")?,
                cpus: d.u32("cpus")?,
            },
            T_LAUNCH => {
                let jobid = d.string("jobid")?;
                let size = d.u32("size")?;
                let universe_size = d.u32("universe_size")?;
                let process_mapping = d.string("process_mapping")?;
                let env = d.pairs("env")?;
                let n = d.count(4 + 4 + 4 + 4 + 4 + 4 + 1, "procs")?;
                let mut procs = Vec::with_capacity(n);
                for _ in 0..n {
                    procs.push(ProcSpec {
                        rank: d.u32("rank")?,
                        argv: d.strs("argv")?,
                        env: d.pairs("proc env")?,
                        cwd: d.string("cwd")?,
                        cpus: d.u32s("cpus")?,
                        program: d.string("program")?,
                        stdin: d.bool("stdin")?,
                    });
                }
                Msg::Launch(LaunchSpec {
                    jobid,
                    size,
                    universe_size,
                    process_mapping,
                    env,
                    procs,
                    appnums: d.u32s("appnums")?,
                    flags: d.u32("flags")?,
                    output_dir: d.string("output_dir")?,
                    host: d.string("host")?,
                    preput: d.pairs("preput")?,
                })
            }
            T_STARTED => Msg::RankStarted {
                rank: d.u32("rank")?,
                pid: d.u32("pid")?,
            },
            T_EXITED => {
                let rank = d.u32("rank")?;
                let pid = d.u32("pid")?;
                let status = match d.u8("exit kind")? {
                    0 => ExitStatus::Code(d.i32("code")?),
                    1 => ExitStatus::Signal(d.i32("signal")?),
                    tag => {
                        return Err(DecodeError::BadTag {
                            what: "exit kind",
                            tag,
                        })
                    }
                };
                Msg::RankExited {
                    rank,
                    pid,
                    status,
                    missing_finalize: d.bool("missing_finalize")?,
                }
            }
            T_IO => {
                let rank = d.u32("rank")?;
                let stream = match d.u8("stream")? {
                    0 => IoStream::Stdin,
                    1 => IoStream::Stdout,
                    2 => IoStream::Stderr,
                    tag => {
                        return Err(DecodeError::BadTag {
                            what: "stream",
                            tag,
                        })
                    }
                };
                Msg::Io {
                    rank,
                    stream,
                    data: d.bytes("data")?.to_vec(),
                    eof: d.bool("eof")?,
                }
            }
            T_FENCE_C => Msg::FenceContribution {
                epoch: d.u64("epoch")?,
                puts: d.pairs("puts")?,
            },
            T_FENCE_R => Msg::FenceRelease {
                epoch: d.u64("epoch")?,
                puts: d.pairs("puts")?,
            },
            T_PMI_ABORT => Msg::PmiAbort {
                rank: d.u32("rank")?,
                code: d.i32("code")?,
                message: d.string("message")?,
            },
            T_SIGNAL => Msg::Signal {
                signal: d.i32("signal")?,
            },
            T_ABORT => Msg::Abort {
                code: d.i32("code")?,
                reason: d.string("reason")?,
            },
            T_SHUTDOWN => Msg::Shutdown,
            T_HEARTBEAT => Msg::Heartbeat,
            T_ERROR => Msg::Error {
                message: d.string("message")?,
            },
            T_FOR_JOB => {
                let job = d.u32("job")?;
                let inner = d.take(b.len() - 5, "wrapped message")?;
                let msg = Msg::decode(inner)?;
                if matches!(msg, Msg::ForJob { .. }) {
                    return Err(DecodeError::BadTag {
                        what: "wrapped message",
                        tag: T_FOR_JOB,
                    });
                }
                Msg::ForJob {
                    job,
                    msg: Box::new(msg),
                }
            }
            T_SPAWN => Msg::Spawn {
                job: d.u32("job")?,
                rank: d.u32("rank")?,
                v2: d.bool("v2")?,
                request: dec_request(&mut d)?,
            },
            T_SPAWN_DONE => {
                let job = d.u32("job")?;
                let rank = d.u32("rank")?;
                let v2 = d.bool("v2")?;
                let result = match d.u8("spawn result")? {
                    0 => {
                        let jobid = d.string("jobid")?;
                        let codes = d.u32s("errcodes")?.iter().map(|&c| c as i32).collect();
                        Ok((jobid, codes))
                    }
                    1 => Err(d.string("reason")?),
                    tag => {
                        return Err(DecodeError::BadTag {
                            what: "spawn result",
                            tag,
                        })
                    }
                };
                Msg::SpawnDone {
                    job,
                    rank,
                    v2,
                    result,
                }
            }
            tag => {
                return Err(DecodeError::BadTag {
                    what: "message",
                    tag,
                })
            }
        };
        d.end()?;
        Ok(m)
    }
}
