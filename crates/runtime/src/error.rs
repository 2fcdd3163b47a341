//! Typed errors of the runtime. Every variant carries the context a user needs
//! (which option, file and line, host, rank, program).

use std::path::PathBuf;

/// Everything that can stop `mpirun` before or while launching a job.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// An option that `mpirun` does not know.
    #[error("unknown option '{0}' (see mpirun --help)")]
    UnknownOption(String),
    /// An option was given without its argument(s).
    #[error("option '{0}' needs an argument")]
    MissingArgument(String),
    /// An option argument has the wrong form.
    #[error("invalid value '{value}' for option '{option}': {reason}")]
    BadValue {
        /// The option, as the user spelled it.
        option: String,
        /// The offending value.
        value: String,
        /// Why it was rejected.
        reason: String,
    },
    /// No program to run in (one context of) the command line.
    #[error("no program to run was given{0}")]
    NoProgram(String),
    /// The same MCA parameter was given twice with different values.
    #[error("MCA parameter '{key}' given more than once with conflicting values '{first}' and '{second}'")]
    ConflictingMca {
        /// Parameter name.
        key: String,
        /// The first value seen.
        first: String,
        /// The conflicting value.
        second: String,
    },
    /// A hostfile line that cannot be parsed (reported as `file:line`).
    #[error("{}:{line}: {reason}", file.display())]
    Hostfile {
        /// The hostfile.
        file: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with the line.
        reason: String,
    },
    /// A file named on the command line could not be read.
    #[error("cannot read {what} '{}': {source}", path.display())]
    ReadFile {
        /// What kind of file (hostfile, tune file...).
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The MCA parameter registry rejected the command line, a `--tune` file or a
    /// parameter file.
    #[error(transparent)]
    Params(#[from] oxmpi_base::params::ParamError),
    /// A parameter value or name the ranks would reject (checked once, up front).
    #[error("{0}")]
    BadParameter(String),
    /// More ranks than slots with `--nooversubscribe`.
    #[error("There are not enough slots available in the system to satisfy the {requested} slots that were requested by the application: {program}; slots found: {found}")]
    NotEnoughSlots {
        /// Ranks requested.
        requested: usize,
        /// The (first) program.
        program: String,
        /// Slots per host, e.g. `vm:2`.
        found: String,
    },
    /// The program does not exist or is not executable.
    #[error("program '{program}' {reason}")]
    BadProgram {
        /// Program as given.
        program: String,
        /// Why it cannot be run.
        reason: String,
    },
    /// The working directory does not exist.
    #[error("working directory '{}' is not a directory", .0.display())]
    BadWdir(PathBuf),
    /// A host that the available launch agents cannot reach.
    #[error("host '{host}' is not the local node and the {agent} launch agent cannot reach it (remote launch agents are not implemented yet)")]
    UnreachableHost {
        /// Host name.
        host: String,
        /// Launch agent name.
        agent: &'static str,
    },
    /// An OS call failed.
    #[error("{what}: {source}")]
    Os {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A rank could not be started.
    #[error("failed to start rank {rank} ('{program}') on host {host}: {source}")]
    Spawn {
        /// Rank number.
        rank: usize,
        /// Program path.
        program: String,
        /// Host.
        host: String,
        /// The OS error.
        source: std::io::Error,
    },
}

impl RuntimeError {
    /// Wrap the last OS error with a description of what failed.
    pub fn last_os(what: impl Into<String>) -> Self {
        RuntimeError::Os {
            what: what.into(),
            source: std::io::Error::last_os_error(),
        }
    }
}

/// Result alias of the runtime.
pub type Result<T> = std::result::Result<T, RuntimeError>;
