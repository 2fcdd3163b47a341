//! Typed MCA parameter registry with provenance (Open MPI's `mca_base_var`, rebuilt).
//!
//! # Declaring parameters
//! Each crate declares its parameters statically and exposes them as a [`Provider`]:
//!
//! ```
//! use oxmpi_base::params::{Component, Framework, ParamDecl, ParamType, Provider};
//! pub static MCA: Provider = Provider {
//!     name: "oxmpi-engine",
//!     frameworks: &[Framework {
//!         name: "btl",
//!         description: "Byte transfer layer",
//!         components: &[Component { name: "sm", description: "shared memory" }],
//!     }],
//!     params: &[ParamDecl::new("btl", "sm", "fifo_size", ParamType::Size, "64k",
//!         "Size of each shared-memory FIFO").level(4)],
//! };
//! ```
//! Registering a provider also registers, for every framework, its selection list (the bare
//! framework name, e.g. `btl=^tcp`) and `<framework>_base_verbose`.
//!
//! # Where values come from (highest first)
//! 1. the override file `PREFIX/etc/oxmpi-mca-params-override.conf` (locks the value);
//! 2. the command line (`--mca k v`; delivered to ranks as `OXMPI_MCA_k` with
//!    `OXMPI_MCA_SOURCE_k=command`, see [`Registry::child_env`]);
//! 3. the environment: `OXMPI_MCA_<name>`, then `OMPI_MCA_<name>`;
//! 4. `--tune` files (lines of `--mca k v` and `-x VAR[=value]`);
//! 5. parameter files listed by `mca_base_param_files` (default
//!    `$HOME/.oxmpi/mca-params.conf,PREFIX/etc/oxmpi-mca-params.conf`; the left-most file wins);
//! 6. the registered default.
//!
//! Every resolved value carries its [`Source`]. All inputs come from a [`Sources`] value, so
//! tests build one by hand instead of touching the process environment or the file system.

pub(crate) mod registry;
mod report;
mod sources;
pub mod tools;
mod value;

pub use registry::{
    global, init_global, resolve, with_global, Entry, EnvReport, ParamWarning, Registry,
    UnknownParam,
};
pub use report::{declared, explicit, flag, int, list, register_global, size, value};
pub use sources::{
    prefix_from_exe, Files, Sources, ENV_PREFIX, ENV_PREFIX_COMPAT, PREFIX_ENV, SOURCE_PREFIX,
};
pub use value::{
    level_name, parse_bool, parse_enum, parse_int, parse_list, parse_selection, parse_size,
    ParamType, Selection, Value, ValueError,
};

use std::fmt;
use std::path::PathBuf;

/// The named verbosity levels of `<framework>_base_verbose` (Open MPI's `MCA_BASE_VERBOSE_*`).
pub const VERBOSE_LEVELS: &[(i64, &str)] = &[
    (-1, "none"),
    (0, "error"),
    (10, "component"),
    (20, "warn"),
    (40, "info"),
    (60, "trace"),
    (80, "debug"),
    (100, "max"),
];

/// The type of `<framework>_base_verbose`: a named level or any integer 0–100.
pub const VERBOSE_TYPE: ParamType = ParamType::Enum {
    values: VERBOSE_LEVELS,
    range: Some((0, 100)),
};

/// A statically declared parameter.
///
/// The full name is `<framework>_<component>_<param>`; framework-wide parameters use the
/// component `base`; the selection list of a framework has an empty component and parameter
/// (its name is the bare framework name). `default` is parsed with the same parser as any other
/// source; in it `${HOME}` and `${PREFIX}` are replaced by the home directory and install prefix.
/// In `help`, `{framework}` is replaced by the framework name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamDecl {
    /// Framework, e.g. `btl`.
    pub framework: &'static str,
    /// Component, e.g. `tcp`, or `base` for framework-wide parameters, or empty for the
    /// selection list.
    pub component: &'static str,
    /// Parameter name within the component, e.g. `if_include`.
    pub param: &'static str,
    /// Type and validation.
    pub ty: ParamType,
    /// Default value as text.
    pub default: &'static str,
    /// One-paragraph help text.
    pub help: &'static str,
    /// Level 1–9 (1–3 user, 4–6 tuner, 7–9 developer; basic/detail/all).
    pub level: u8,
    /// Read-only parameters keep their default; attempts to set them warn.
    pub read_only: bool,
    /// The library re-reads it while running: a write after `MPI_Init` (`MPI_T_cvar_write`)
    /// takes effect when the write returns. Every other parameter is read once, at
    /// `MPI_Init`, and is fixed from then on (see [`tools::CvarScope`]).
    pub runtime: bool,
}

impl ParamDecl {
    /// A settable parameter at level 1.
    pub const fn new(
        framework: &'static str,
        component: &'static str,
        param: &'static str,
        ty: ParamType,
        default: &'static str,
        help: &'static str,
    ) -> Self {
        ParamDecl {
            framework,
            component,
            param,
            ty,
            default,
            help,
            level: 1,
            read_only: false,
            runtime: false,
        }
    }

    /// The same declaration at `level` (clamped to 1–9 when used).
    pub const fn level(mut self, level: u8) -> Self {
        self.level = level;
        self
    }

    /// The same declaration, read-only.
    pub const fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// The same declaration, re-read by the library while it runs (the field `runtime`):
    /// only for parameters whose readers really pick up a new value.
    pub const fn runtime(mut self) -> Self {
        self.runtime = true;
        self
    }

    /// The selection list of `framework` (named like the framework, e.g. `btl=self,sm`).
    pub const fn selection(framework: &'static str) -> Self {
        ParamDecl::new(
            framework,
            "",
            "",
            ParamType::Selection,
            "",
            "Default selection set of components for the {framework} framework (<none> means use all components that can be found)",
        )
        .level(2)
    }

    /// `<framework>_base_verbose`.
    pub const fn verbose(framework: &'static str) -> Self {
        ParamDecl::new(
            framework,
            "base",
            "verbose",
            VERBOSE_TYPE,
            "error",
            "Verbosity level for the {framework} framework (default: 0)",
        )
        .level(8)
        .runtime()
    }

    /// The full parameter name (`btl_tcp_if_include`, `btl_base_verbose`, `btl`).
    pub fn full_name(&self) -> String {
        match (self.component.is_empty(), self.param.is_empty()) {
            (true, true) => self.framework.to_string(),
            (true, false) => format!("{}_{}", self.framework, self.param),
            (false, true) => format!("{}_{}", self.framework, self.component),
            (false, false) => format!("{}_{}_{}", self.framework, self.component, self.param),
        }
    }

    /// The component group this parameter is listed under (`base` for the selection list).
    pub fn group(&self) -> &'static str {
        if self.component.is_empty() {
            "base"
        } else {
            self.component
        }
    }

    /// The help text with `{framework}` filled in.
    pub fn help_text(&self) -> String {
        self.help.replace("{framework}", self.framework)
    }
}

/// A framework (a kind of pluggable piece, e.g. `btl`) and its compiled-in components.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framework {
    /// Framework name.
    pub name: &'static str,
    /// One-line description.
    pub description: &'static str,
    /// The components compiled in.
    pub components: &'static [Component],
}

/// A component of a framework, compiled in as a Rust type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Component {
    /// Component name.
    pub name: &'static str,
    /// One-line description.
    pub description: &'static str,
}

/// Everything a crate declares: its frameworks (with components) and parameters.
#[derive(Debug, Clone, Copy)]
pub struct Provider {
    /// The crate (shown by `oxmpi-info`).
    pub name: &'static str,
    /// Frameworks this crate defines.
    pub frameworks: &'static [Framework],
    /// Parameters this crate declares (of its own or of other crates' frameworks).
    pub params: &'static [ParamDecl],
}

/// Where a parameter value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The registered default.
    Default,
    /// A parameter file (`mca_base_param_files`), with line number.
    File {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: u32,
    },
    /// A `--tune` file, with line number.
    Tune {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: u32,
    },
    /// An environment variable.
    Environment {
        /// The variable, e.g. `OMPI_MCA_btl_base_verbose`.
        var: String,
    },
    /// `--mca` on the command line (of this process, or of the `mpirun` that started it).
    CommandLine,
    /// The override file, which locks the value.
    Override {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: u32,
    },
    /// Set through the API ([`Registry::set`]).
    Api,
}

impl Source {
    /// The short Open MPI source kind: `default`, `file`, `environment`, `command line`,
    /// `override` or `set` (tune files count as `file`).
    pub fn kind(&self) -> &'static str {
        match self {
            Source::Default => "default",
            Source::File { .. } | Source::Tune { .. } => "file",
            Source::Environment { .. } => "environment",
            Source::CommandLine => "command line",
            Source::Override { .. } => "override",
            Source::Api => "set",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::File { path, line } => write!(f, "file ({}:{line})", path.display()),
            Source::Tune { path, line } => write!(f, "tune file ({}:{line})", path.display()),
            Source::Environment { var } => write!(f, "environment ({var})"),
            Source::CommandLine => f.write_str("command line"),
            Source::Override { path, line } => {
                write!(f, "override ({}:{line})", path.display())
            }
            Source::Api => f.write_str("set"),
        }
    }
}

/// Errors of the parameter system; each renders as one line naming parameter, value, source
/// and what is valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    /// A value that does not parse, is out of range, or names an unknown enum value.
    #[error("invalid value \"{value}\" for MCA parameter {name} from {origin}: {reason}")]
    InvalidValue {
        /// Full parameter name.
        name: String,
        /// The offending text.
        value: String,
        /// Where it came from.
        origin: Source,
        /// What is wrong and what is valid.
        reason: ValueError,
    },
    /// The same key twice on the command line with different values.
    #[error("MCA parameter {name} given twice on the command line with different values (\"{first}\" and \"{second}\"); give it once")]
    DuplicateCommandLine {
        /// Full parameter name.
        name: String,
        /// First value given.
        first: String,
        /// Conflicting later value.
        second: String,
    },
    /// A line of a parameter, override or tune file that cannot be understood.
    #[error("malformed line {line} in {kind} {}: \"{text}\"; expected {expected}", path.display())]
    MalformedLine {
        /// Which kind of file (`parameter file`, `override file`, `tune file`).
        kind: &'static str,
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: u32,
        /// The line as written.
        text: String,
        /// What a valid line looks like.
        expected: &'static str,
    },
    /// A file the user named explicitly (a `--tune` file) cannot be read.
    #[error("cannot read {kind} {}: {reason}", path.display())]
    UnreadableFile {
        /// Which kind of file.
        kind: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        reason: String,
    },
    /// Two different declarations for the same full name.
    #[error("MCA parameter {name} registered twice with different declarations")]
    DuplicateRegistration {
        /// Full parameter name.
        name: String,
    },
    /// A name that is not registered.
    #[error("unknown MCA parameter {name}")]
    Unknown {
        /// Full parameter name.
        name: String,
    },
    /// An attempt to set a value locked by the override file.
    #[error("MCA parameter {name} is locked by override ({}:{line}); value \"{value}\" from {attempted_by} ignored", path.display())]
    Locked {
        /// Full parameter name.
        name: String,
        /// The rejected value.
        value: String,
        /// Who tried to set it.
        attempted_by: Source,
        /// The override file.
        path: PathBuf,
        /// Its line.
        line: u32,
    },
    /// An attempt to set a read-only parameter.
    #[error("MCA parameter {name} is read-only; value \"{value}\" from {attempted_by} ignored")]
    ReadOnly {
        /// Full parameter name.
        name: String,
        /// The rejected value.
        value: String,
        /// Who tried to set it.
        attempted_by: Source,
    },
}

/// `mca_base_param_files`: the parameter files to read (resolved before every other
/// parameter, since the files are sources).
pub const PARAM_FILES: ParamDecl = ParamDecl::new(
    "mca",
    "base",
    "param_files",
    ParamType::List,
    "${HOME}/.oxmpi/mca-params.conf,${PREFIX}/etc/oxmpi-mca-params.conf",
    "Path(s) of parameter files to read, comma-separated; the left-most file wins",
)
.level(2);

/// The parameters of the MCA base itself (`mca_base_*`, including the output sink and format),
/// registered by every [`Registry`].
pub static BASE_PARAMS: &[ParamDecl] = &[
    PARAM_FILES,
    ParamDecl::new(
        "mca",
        "base",
        "suppress_override_warning",
        ParamType::Bool,
        "false",
        "Do not warn when a value set elsewhere is ignored because the override file locks the parameter",
    )
    .level(2),
    ParamDecl::new(
        "mca",
        "base",
        "output",
        ParamType::String,
        "stderr",
        "Where verbose output goes: stderr, stdout, syslog or file:PATH",
    )
    .level(2),
    ParamDecl::new(
        "mca",
        "base",
        "output_format",
        ParamType::Enum {
            values: &[(0, "text"), (1, "json")],
            range: None,
        },
        "text",
        "Format of verbose output lines: text ([host:pid] message) or json (one JSON object per line)",
    )
    .level(2),
    PARAM_CHECK,
    ParamDecl::verbose("mca"),
];

/// `mca_base_param_check`: what an unknown parameter name is.
pub const PARAM_CHECK: ParamDecl = ParamDecl::new(
    "mca",
    "base",
    "param_check",
    ParamType::Enum {
        values: &[(0, "warn"), (1, "error")],
        range: None,
    },
    "warn",
    "An unknown parameter name given with --mca, OXMPI_MCA_ (or a near miss in OMPI_MCA_): warn (with the closest known names) or error (mpirun stops)",
)
.level(2);
