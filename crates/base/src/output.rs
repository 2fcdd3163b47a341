//! Verbose output framework (Open MPI's `opal_output_verbose`, rebuilt).
//!
//! Each framework has a [`Stream`] whose verbosity comes from `<framework>_base_verbose`
//! (0–100 or `none`/`error`/`component`/`warn`/`info`/`trace`/`debug`/`max`). The
//! [`verbose!`](crate::verbose) macro checks the level with one relaxed atomic load **before**
//! formatting anything, so a disabled message costs a few nanoseconds:
//!
//! ```
//! use oxmpi_base::{output::Stream, verbose};
//! static BTL: Stream = Stream::new("btl");
//! BTL.set_verbosity(0);
//! verbose!(BTL, 40, "selected {} of {} interfaces", 1, 2); // verbosity 0 < 40: nothing happens
//! ```
//!
//! Lines look like `[host:pid] [jobid,rank] message` (the process name once
//! [`set_process_name`] was called). The sink is chosen by `mca_base_output`
//! (`stderr` (default), `stdout`, `syslog`, `file:PATH`) and the format by
//! `mca_base_output_format` (`text` or `json`, one JSON object per line). Errors and warnings
//! users must see go through [`error`] and [`warn`] (or [`warn_once!`](crate::warn_once)),
//! independent of any verbosity.

use crate::events;
use crate::params::registry::TryGlobal;
use crate::params::{self, ParamDecl, Registry};
use crate::sys::SyslogPriority;
use std::collections::BTreeSet;
use std::fmt::{self, Write as _};
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Verbosity value meaning "not read from the parameters yet".
const UNINIT: i32 = i32::MIN;

/// A framework's output stream with its verbosity.
#[derive(Debug)]
pub struct Stream {
    framework: &'static str,
    level: AtomicI32,
}

impl Stream {
    /// A stream for `framework`; its verbosity is read from `<framework>_base_verbose` in the
    /// global registry on first use unless [`Stream::set_verbosity`] was called before.
    pub const fn new(framework: &'static str) -> Self {
        Stream {
            framework,
            level: AtomicI32::new(UNINIT),
        }
    }

    /// The framework name.
    pub fn framework(&self) -> &'static str {
        self.framework
    }

    /// Whether a message at `level` would print. One relaxed atomic load on the fast path.
    #[inline(always)]
    pub fn enabled(&'static self, level: i32) -> bool {
        let v = self.level.load(Ordering::Relaxed);
        if v >= level {
            true
        } else if v == UNINIT {
            self.init_slow(level)
        } else {
            false
        }
    }

    #[cold]
    #[inline(never)]
    fn init_slow(&'static self, level: i32) -> bool {
        let v = match params::registry::try_global() {
            TryGlobal::Ready(mut r) => {
                let problems = verbosity_problems(&mut r, self.framework);
                let v = verbosity_from(&mut r, self.framework);
                drop(r);
                // Unlocked: printing may consult the registry.
                for p in problems {
                    warn(format_args!("{p}"));
                }
                v
            }
            TryGlobal::Failed => 0,
            // The registry is locked (possibly by this thread): decide with the default now
            // and read the parameter on a later call.
            TryGlobal::Busy => return level <= 0,
        };
        // Keep a value set concurrently by set_verbosity.
        if self
            .level
            .compare_exchange(UNINIT, v, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            READ_STREAMS
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(self);
        }
        self.level.load(Ordering::Relaxed) >= level
    }

    /// The current verbosity (reading the parameter if not done yet).
    pub fn verbosity(&'static self) -> i32 {
        if self.level.load(Ordering::Relaxed) == UNINIT {
            self.init_slow(0);
        }
        self.level.load(Ordering::Relaxed)
    }

    /// Sets the verbosity (-1..=100), overriding the parameter.
    pub fn set_verbosity(&self, v: i32) {
        self.level.store(v.clamp(-1, 100), Ordering::Relaxed);
    }

    /// Re-reads `<framework>_base_verbose` from `registry`.
    pub fn configure(&self, registry: &mut Registry) {
        self.set_verbosity(verbosity_from(registry, self.framework));
    }

    /// Formats and writes a message (call through [`verbose!`](crate::verbose), which checks
    /// [`Stream::enabled`] first).
    pub fn emit(&self, level: i32, args: fmt::Arguments<'_>) {
        write_record(Some(self.framework), level, args);
    }
}

/// The streams whose verbosity was read from their parameter (what [`reconfigure`]
/// updates; the others read it on first use).
static READ_STREAMS: Mutex<Vec<&'static Stream>> = Mutex::new(Vec::new());

/// Re-reads `<framework>_base_verbose` from `registry` for every stream that read it
/// before: after a write through the tools interface, the next message of the framework
/// uses the new level.
pub fn reconfigure(registry: &mut Registry) {
    let streams = READ_STREAMS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    for s in streams {
        s.configure(registry);
    }
}

/// What the user must hear about `<framework>_base_verbose` once it is registered: an
/// invalid value (kept at the default) and warnings such as a value ignored because the
/// override file locks it.
/// Registers it (so call this first; registering again is a no-op that reports nothing).
fn verbosity_problems(registry: &mut Registry, framework: &'static str) -> Vec<String> {
    let invalid = registry.register(&[ParamDecl::verbose(framework)]).err();
    let mut out: Vec<String> = registry
        .take_warnings()
        .iter()
        .map(ToString::to_string)
        .collect();
    if let Some(e) = invalid {
        out.push(format!("warning: {e}; using the default"));
    }
    out
}

/// Registers `<framework>_base_verbose` if needed and returns its value (0 on error).
fn verbosity_from(registry: &mut Registry, framework: &'static str) -> i32 {
    let _ = registry.register(&[ParamDecl::verbose(framework)]);
    let name = format!("{framework}_base_verbose");
    registry
        .get_int(&name)
        .map_or(0, |v| v.clamp(-1, 100) as i32)
}

/// Prints a message on a framework stream if the stream's verbosity is at least `level`;
/// the arguments are not evaluated or formatted otherwise.
#[macro_export]
macro_rules! verbose {
    ($stream:expr, $level:expr, $($arg:tt)+) => {{
        let stream: &$crate::output::Stream = &$stream;
        let level: i32 = $level;
        if stream.enabled(level) {
            stream.emit(level, ::core::format_args!($($arg)+));
        }
    }};
}

/// Prints a warning the first time this call site is reached; later calls are counted and
/// the count is reported by [`suppressed_warnings`].
#[macro_export]
macro_rules! warn_once {
    ($($arg:tt)+) => {{
        static ONCE: ::core::sync::atomic::AtomicBool = ::core::sync::atomic::AtomicBool::new(false);
        if !ONCE.swap(true, ::core::sync::atomic::Ordering::Relaxed) {
            $crate::output::warn(::core::format_args!($($arg)+));
        } else {
            $crate::output::count_suppressed();
        }
    }};
}

/// Where lines go.
#[derive(Debug, Clone)]
pub enum Sink {
    /// Standard error (the default).
    Stderr,
    /// Standard output.
    Stdout,
    /// The system log (`syslog(3)`, facility user, ident `oxmpi`).
    Syslog,
    /// A file, opened for appending on first write.
    File(PathBuf),
    /// An in-memory buffer (for tests and embedding).
    Memory(Arc<Mutex<Vec<String>>>),
}

impl Sink {
    /// Parses `stderr`, `stdout`, `syslog` or `file:PATH`.
    pub fn parse(text: &str) -> Option<Sink> {
        match text.trim() {
            "stderr" | "" => Some(Sink::Stderr),
            "stdout" => Some(Sink::Stdout),
            "syslog" => Some(Sink::Syslog),
            t => t
                .strip_prefix("file:")
                .filter(|p| !p.is_empty())
                .map(|p| Sink::File(PathBuf::from(p))),
        }
    }
}

/// Line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `[host:pid] [jobid,rank] message`.
    Text,
    /// `{"host":…,"pid":…,"jobid":…,"rank":…,"framework":…,"level":…,"msg":…}`.
    Json,
}

#[derive(Debug)]
struct State {
    sink: Sink,
    format: Format,
    file: Option<std::fs::File>,
    syslog_open: bool,
    warned_keys: BTreeSet<String>,
}

static STATE: Mutex<State> = Mutex::new(State {
    sink: Sink::Stderr,
    format: Format::Text,
    file: None,
    syslog_open: false,
    warned_keys: BTreeSet::new(),
});
static NAME: OnceLock<(String, i64)> = OnceLock::new();
static SUPPRESSED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static CONFIGURED: AtomicBool = AtomicBool::new(false);

fn state() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Selects the sink and format.
pub fn set_sink(sink: Sink, format: Format) {
    let mut s = state();
    s.sink = sink;
    s.format = format;
    s.file = None;
    CONFIGURED.store(true, Ordering::Relaxed);
}

/// Reads `mca_base_output` and `mca_base_output_format` from `registry` and applies them.
/// An unknown sink falls back to stderr with an error line.
pub fn configure(registry: &mut Registry) {
    let text = registry
        .get_string("mca_base_output")
        .unwrap_or_else(|| "stderr".into());
    let format = match registry.get_int("mca_base_output_format") {
        Some(1) => Format::Json,
        _ => Format::Text,
    };
    match Sink::parse(&text) {
        Some(sink) => set_sink(sink, format),
        None => {
            set_sink(Sink::Stderr, format);
            error(format_args!(
                "invalid value \"{text}\" for MCA parameter mca_base_output: expected stderr, stdout, syslog or file:PATH; using stderr"
            ));
        }
    }
}

fn ensure_configured() {
    if !CONFIGURED.load(Ordering::Relaxed) {
        // Mark first so that a failure below cannot recurse.
        CONFIGURED.store(true, Ordering::Relaxed);
        match params::registry::try_global() {
            TryGlobal::Ready(mut r) => configure(&mut r),
            TryGlobal::Failed => {}
            // Locked right now: try again on the next line.
            TryGlobal::Busy => CONFIGURED.store(false, Ordering::Relaxed),
        }
    }
}

/// The stream of the `mca` framework itself (`mca_base_verbose`): parameter and component
/// selection messages.
pub static MCA: Stream = Stream::new("mca");

/// Prints what users must know about the parameters of `registry`: its warnings (values
/// ignored because locked or read-only, unreadable files) and `OXMPI_MCA_` variables naming
/// unknown parameters (with the nearest names); `OMPI_MCA_` variables naming parameters we do
/// not implement are listed at `mca_base_verbose` 40 (info). Call once every parameter of the
/// process is registered.
pub fn report_problems(registry: &mut Registry) {
    let _ = check_problems(registry);
}

/// [`report_problems`], and with `mca_base_param_check=error` an unknown parameter name is
/// an error instead of a warning: `Err` with the first one (as one line), after printing
/// the others.
pub fn check_problems(registry: &mut Registry) -> Result<(), String> {
    MCA.configure(registry);
    for w in registry.take_warnings() {
        warn(format_args!("{w}"));
    }
    let strict = registry
        .get_int(&crate::params::PARAM_CHECK.full_name())
        .unwrap_or(0)
        == 1;
    let report = registry.check_environment();
    let mut first = None;
    for u in &report.unknown {
        if !strict {
            warn(format_args!("warning: {u}"));
        } else if first.is_none() {
            first = Some(format!("{} (mca_base_param_check=error)", u.as_error()));
        } else {
            error(format_args!("error: {}", u.as_error()));
        }
    }
    for var in &report.ignored_compat {
        crate::verbose!(
            MCA,
            40,
            "mca: base: ignoring {var}: not a parameter of oxmpi"
        );
    }
    first.map_or(Ok(()), Err)
}

/// Sets the process name printed after `[host:pid] ` (`[jobid,rank]`). Only the first call
/// has an effect.
pub fn set_process_name(jobid: &str, rank: i64) {
    let _ = NAME.set((jobid.to_string(), rank));
}

/// The process name of this process: the one given to [`set_process_name`], else the one a
/// launcher put in the environment (see [`name_from_env`]), else none.
fn process_name() -> Option<(&'static str, i64)> {
    static FROM_ENV: OnceLock<Option<(String, i64)>> = OnceLock::new();
    NAME.get()
        .or_else(|| {
            FROM_ENV
                .get_or_init(|| name_from_env(|v| std::env::var(v).ok()))
                .as_ref()
        })
        .map(|(j, r)| (j.as_str(), *r))
}

/// The `[jobid,rank]` name a launcher gives a rank through its environment, read with `get`:
/// `OXMPI_JOBID` (from `mpirun`) or `PMI_JOBID`, with `OMPI_COMM_WORLD_RANK` or `PMI_RANK`.
/// Used until the process calls [`set_process_name`], so verbose output of a launched rank
/// carries its name from the first line. `None` if either part is missing or the rank is not
/// a number.
pub fn name_from_env(get: impl Fn(&str) -> Option<String>) -> Option<(String, i64)> {
    let jobid = get("OXMPI_JOBID")
        .or_else(|| get("PMI_JOBID"))
        .filter(|j| !j.is_empty())?;
    let rank = get("OMPI_COMM_WORLD_RANK")
        .or_else(|| get("PMI_RANK"))?
        .trim()
        .parse()
        .ok()?;
    Some((jobid, rank))
}

/// This host's name (cached).
pub fn hostname() -> &'static str {
    static HOST: OnceLock<String> = OnceLock::new();
    HOST.get_or_init(|| crate::sys::hostname().unwrap_or_else(|| "localhost".to_string()))
}

/// Formats a text line: `[host:pid] ` + `[jobid,rank] ` (if known) + message.
pub fn format_text(host: &str, pid: u32, name: Option<(&str, i64)>, msg: &str) -> String {
    let mut s = format!("[{host}:{pid:05}] ");
    if let Some((job, rank)) = name {
        let _ = write!(s, "[{job},{rank}] ");
    }
    s.push_str(msg);
    s
}

/// Formats a JSON line (no trailing newline).
pub fn format_json(
    host: &str,
    pid: u32,
    name: Option<(&str, i64)>,
    framework: Option<&str>,
    level: i32,
    msg: &str,
) -> String {
    let mut s = String::from("{\"host\":");
    json_str(&mut s, host);
    let _ = write!(s, ",\"pid\":{pid}");
    if let Some((job, rank)) = name {
        s.push_str(",\"jobid\":");
        json_str(&mut s, job);
        let _ = write!(s, ",\"rank\":{rank}");
    }
    if let Some(fw) = framework {
        s.push_str(",\"framework\":");
        json_str(&mut s, fw);
    }
    let _ = write!(s, ",\"level\":{level},\"msg\":");
    json_str(&mut s, msg);
    s.push('}');
    s
}

/// Appends `s` to `out` as a JSON string literal (quotes, escapes).
pub fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Level used for [`error`] lines in JSON output and syslog priority.
pub const LEVEL_ERROR: i32 = 0;
/// Level used for [`warn`] lines.
pub const LEVEL_WARN: i32 = 20;

/// Writes a line users must see, whatever the verbosity: to the configured sink, and also to
/// stderr when the sink is a file, syslog or memory.
pub fn error(args: fmt::Arguments<'_>) {
    write_record(None, LEVEL_ERROR, args);
}

/// Writes a warning users must see (like [`error`]).
pub fn warn(args: fmt::Arguments<'_>) {
    write_record(None, LEVEL_WARN, args);
}

/// Warns once per `key` for the life of the process (e.g. once per peer); later calls with the
/// same key are counted in [`suppressed_warnings`].
pub fn warn_once_key(key: &str, args: fmt::Arguments<'_>) {
    let first = state().warned_keys.insert(key.to_string());
    if first {
        warn(args);
    } else {
        count_suppressed();
    }
}

/// Counts a suppressed repeated warning (used by [`warn_once!`](crate::warn_once)).
pub fn count_suppressed() {
    SUPPRESSED.fetch_add(1, Ordering::Relaxed);
}

/// How many repeated warnings were suppressed so far.
pub fn suppressed_warnings() -> u64 {
    SUPPRESSED.load(Ordering::Relaxed)
}

fn write_record(framework: Option<&str>, level: i32, args: fmt::Arguments<'_>) {
    ensure_configured();
    let msg = match args.as_str() {
        Some(s) => s.to_string(),
        None => args.to_string(),
    };
    let msg = msg.strip_suffix('\n').unwrap_or(&msg);
    if let Some(framework) = framework.filter(|_| events::wanted(events::Kind::VerboseLine)) {
        events::raise(&events::Event::VerboseLine {
            framework,
            level,
            text: msg,
        });
    }
    let name = process_name();
    let pid = std::process::id();
    let host = hostname();
    let mut st = state();
    let line = match st.format {
        Format::Text => format_text(host, pid, name, msg),
        Format::Json => format_json(host, pid, name, framework, level, msg),
    };
    let user_facing = framework.is_none();
    match st.sink.clone() {
        Sink::Stderr => {
            let _ = writeln!(std::io::stderr().lock(), "{line}");
        }
        Sink::Stdout => {
            let _ = writeln!(std::io::stdout().lock(), "{line}");
        }
        Sink::Memory(buf) => {
            buf.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(line.clone());
            if user_facing {
                let _ = writeln!(std::io::stderr().lock(), "{line}");
            }
        }
        Sink::File(path) => {
            if st.file.is_none() {
                st.file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .ok();
            }
            // One write(2) per line: with O_APPEND, lines of several processes sharing the
            // file never interleave (`writeln!` on a File may split the text and the newline).
            let ok = match st.file.as_mut() {
                Some(f) => f.write_all(format!("{line}\n").as_bytes()).is_ok(),
                None => false,
            };
            if user_facing || !ok {
                let _ = writeln!(std::io::stderr().lock(), "{line}");
            }
        }
        Sink::Syslog => {
            syslog_line(&mut st, level, &line);
            if user_facing {
                let _ = writeln!(std::io::stderr().lock(), "{line}");
            }
        }
    }
}

fn syslog_line(st: &mut State, level: i32, line: &str) {
    if !st.syslog_open {
        crate::sys::syslog_open();
        st.syslog_open = true;
    }
    let priority = match level {
        LEVEL_ERROR => SyslogPriority::Error,
        l if l <= LEVEL_WARN => SyslogPriority::Warning,
        _ => SyslogPriority::Info,
    };
    crate::sys::syslog(priority, line);
}
