//! Command-line tests of `oxmpi-info`: exact output, sources as a rank sees them, and every
//! bad-input case with its message and exit status. Each test runs a copy of the binary inside
//! its own temporary prefix (so the prefix is found from the executable path, as installed),
//! with a cleared environment and its own `$HOME`; the directory is removed afterwards.

use assert_cmd::Command;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::RwLock;

/// Copying an executable while another thread forks can hand the child the open write
/// descriptor, and exec then fails with ETXTBSY: copies take this lock for writing, spawns
/// for reading.
static EXEC_LOCK: RwLock<()> = RwLock::new(());

struct Prefix {
    root: PathBuf,
}

impl Prefix {
    fn new() -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let root = std::env::temp_dir().join(format!(
            "oxmpi-info-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        for d in ["bin", "etc", "home/.oxmpi"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        {
            let _w = EXEC_LOCK.write().unwrap_or_else(|p| p.into_inner());
            std::fs::copy(
                env!("CARGO_BIN_EXE_oxmpi-info"),
                root.join("bin/oxmpi-info"),
            )
            .unwrap();
        }
        let root = root.canonicalize().unwrap();
        Prefix { root }
    }

    fn write(&self, rel: &str, text: &str) {
        std::fs::write(self.root.join(rel), text).unwrap();
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new(self.root.join("bin/oxmpi-info"));
        c.env_clear().env("HOME", self.root.join("home"));
        c
    }

    fn path(&self) -> &Path {
        &self.root
    }
}

impl Drop for Prefix {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(c: &mut Command, args: &[&str]) -> Out {
    let o = {
        let _r = EXEC_LOCK.read().unwrap_or_else(|p| p.into_inner());
        c.args(args).output().unwrap()
    };
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8(o.stdout).unwrap(),
        stderr: String::from_utf8(o.stderr).unwrap(),
    }
}

const V: &str = env!("CARGO_PKG_VERSION");

#[test]
fn summary_without_arguments() {
    let p = Prefix::new();
    let o = run(&mut p.cmd(), &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let pre = p.path().display();
    let build = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let arch = format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS);
    let header = format!(
        "                 Package: oxmpi {V}
                   oxmpi: {V}
                  Prefix: {pre}
 Configured architecture: {arch}
              Build mode: {build}
              C bindings: yes (libmpi.so.12, MPICH ABI)
         Parameter files: {pre}/home/.oxmpi/mca-params.conf,{pre}/etc/oxmpi-mca-params.conf
"
    );
    assert!(o.stdout.starts_with(&header), "{}", o.stdout);
    // Then one line per framework component (from every crate oxmpi-info links), sorted by
    // framework, ours among them.
    let rest: Vec<&str> = o.stdout[header.len()..].lines().collect();
    assert!(rest.contains(&format!("                 MCA mca: base (oxmpi v{V})").as_str()));
    // The one-sided framework, run by the C ABI, declared with the engine's.
    assert!(rest.contains(&format!("                 MCA osc: pt2pt (oxmpi v{V})").as_str()));
    assert!(rest
        .iter()
        .all(|l| l.len() > 26 && l[..24].trim_start().starts_with("MCA ") && &l[24..26] == ": "));
    let fws: Vec<&str> = rest.iter().map(|l| l[..24].trim_start()).collect();
    let mut sorted = fws.clone();
    sorted.sort();
    assert_eq!(fws, sorted);
    assert_eq!(o.stderr, "");
}

#[test]
fn param_listing_in_open_mpi_layout() {
    let p = Prefix::new();
    let o = run(&mut p.cmd(), &["--param", "mca", "all", "--level", "9"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let pre = p.path().display();
    assert_eq!(
        o.stdout,
        format!(
            r#"                 MCA mca: base (oxmpi v{V})
            MCA mca base: ---------------------------------------------------
            MCA mca base: parameter "mca_base_output" (current value: "stderr", data source: default, level: 2 user/detail, type: string)
                          Where verbose output goes: stderr, stdout, syslog or file:PATH
            MCA mca base: parameter "mca_base_output_format" (current value: "text", data source: default, level: 2 user/detail, type: int)
                          Format of verbose output lines: text ([host:pid] message) or json (one JSON object per line)
                          Valid values: 0|text, 1|json
            MCA mca base: parameter "mca_base_param_check" (current value: "warn", data source: default, level: 2 user/detail, type: int)
                          An unknown parameter name given with --mca, OXMPI_MCA_ (or a near miss in OMPI_MCA_): warn (with the closest known names) or error (mpirun stops)
                          Valid values: 0|warn, 1|error
            MCA mca base: parameter "mca_base_param_files" (current value: "{pre}/home/.oxmpi/mca-params.conf,{pre}/etc/oxmpi-mca-params.conf", data source: default, level: 2 user/detail, type: string)
                          Path(s) of parameter files to read, comma-separated; the left-most file wins
            MCA mca base: parameter "mca_base_suppress_override_warning" (current value: "false", data source: default, level: 2 user/detail, type: bool)
                          Do not warn when a value set elsewhere is ignored because the override file locks the parameter
                          Valid values: 0|f|false|disabled|no|n|off, 1|t|true|enabled|yes|y|on
            MCA mca base: parameter "mca_base_verbose" (current value: "error", data source: default, level: 8 dev/detail, type: int)
                          Verbosity level for the mca framework (default: 0)
                          Valid values: -1|none, 0|error, 10|component, 20|warn, 40|info, 60|trace, 80|debug, 100|max, 0-100
"#
        )
    );
}

#[test]
fn level_filters_parameters() {
    let p = Prefix::new();
    let o = run(&mut p.cmd(), &["--param", "mca", "base", "--level", "2"]);
    assert_eq!(o.code, 0);
    assert!(o.stdout.contains("\"mca_base_output\""));
    assert!(!o.stdout.contains("mca_base_verbose"));
    let o = run(&mut p.cmd(), &["--param", "mca", "base"]);
    assert_eq!(
        o.stdout,
        format!("                 MCA mca: base (oxmpi v{V})\n")
    );
}

#[test]
fn parsable_lines() {
    let p = Prefix::new();
    let o = run(
        p.cmd().env("OMPI_MCA_mca_base_verbose", "trace"),
        &["--param", "mca", "all", "--level", "9", "--parsable"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let lines: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| l.starts_with("mca:mca:base:param:mca_base_verbose:"))
        .collect();
    assert_eq!(
        lines,
        vec![
            "mca:mca:base:param:mca_base_verbose:value:trace",
            "mca:mca:base:param:mca_base_verbose:source:environment (OMPI_MCA_mca_base_verbose)",
            "mca:mca:base:param:mca_base_verbose:status:writeable",
            "mca:mca:base:param:mca_base_verbose:level:8",
            "mca:mca:base:param:mca_base_verbose:help:Verbosity level for the mca framework (default: 0)",
            "mca:mca:base:param:mca_base_verbose:enumerator:value:-1:none",
            "mca:mca:base:param:mca_base_verbose:enumerator:value:0:error",
            "mca:mca:base:param:mca_base_verbose:enumerator:value:10:component",
            "mca:mca:base:param:mca_base_verbose:enumerator:value:20:warn",
            "mca:mca:base:param:mca_base_verbose:enumerator:value:40:info",
            "mca:mca:base:param:mca_base_verbose:enumerator:value:60:trace",
            "mca:mca:base:param:mca_base_verbose:enumerator:value:80:debug",
            "mca:mca:base:param:mca_base_verbose:enumerator:value:100:max",
            "mca:mca:base:param:mca_base_verbose:deprecated:no",
            "mca:mca:base:param:mca_base_verbose:type:int",
            "mca:mca:base:param:mca_base_verbose:disabled:false",
        ]
    );
    assert!(o
        .stdout
        .lines()
        .all(|l| l.starts_with("mca:mca:base:param:")));
    assert_eq!(o.stdout.lines().count(), 6 * 8 + 2 + 2 + 2 + 8);
}

fn value_line(out: &str, name: &str) -> String {
    out.lines()
        .find(|l| l.contains(&format!("parameter \"{name}\"")))
        .map(|l| l.trim_start().to_string())
        .unwrap_or_default()
}

#[test]
fn shows_values_from_every_source_like_a_rank() {
    let p = Prefix::new();
    let pre = p.path().display().to_string();
    let args = ["--param", "mca", "base", "--level", "9"];
    p.write(
        "etc/oxmpi-mca-params.conf",
        "# system\nmca_base_verbose = debug\n",
    );
    let o = run(&mut p.cmd(), &args);
    assert_eq!(
        value_line(&o.stdout, "mca_base_verbose"),
        format!("MCA mca base: parameter \"mca_base_verbose\" (current value: \"debug\", data source: file ({pre}/etc/oxmpi-mca-params.conf:2), level: 8 dev/detail, type: int)")
    );
    p.write("home/.oxmpi/mca-params.conf", "mca_base_verbose = 15\n");
    let o = run(&mut p.cmd(), &args);
    assert!(value_line(&o.stdout, "mca_base_verbose").contains(&format!(
        "(current value: \"15\", data source: file ({pre}/home/.oxmpi/mca-params.conf:1)"
    )));
    p.write("tune.conf", "--mca mca_base_verbose info\n");
    let o = run(p.cmd().env("OXMPI_MCA_mca_base_output", "stdout"), &args);
    assert!(value_line(&o.stdout, "mca_base_output").contains(
        "(current value: \"stdout\", data source: environment (OXMPI_MCA_mca_base_output)"
    ));
    // What mpirun --mca hands a rank: the value plus its source marker.
    let o = run(
        p.cmd()
            .env("OXMPI_MCA_mca_base_verbose", "max")
            .env("OXMPI_MCA_SOURCE_mca_base_verbose", "command"),
        &args,
    );
    assert!(value_line(&o.stdout, "mca_base_verbose")
        .contains("(current value: \"max\", data source: command line"));
    let o = run(
        p.cmd().env("OXMPI_MCA_mca_base_verbose", "max"),
        &[
            "--mca",
            "mca_base_verbose",
            "component",
            "--param",
            "mca",
            "base",
            "--level",
            "9",
        ],
    );
    assert!(value_line(&o.stdout, "mca_base_verbose")
        .contains("(current value: \"component\", data source: command line"));
}

#[test]
fn override_file_locks_and_warns() {
    let p = Prefix::new();
    let pre = p.path().display().to_string();
    p.write(
        "etc/oxmpi-mca-params-override.conf",
        "mca_base_verbose = warn\n",
    );
    let o = run(
        p.cmd().env("OXMPI_MCA_mca_base_verbose", "max"),
        &["--param", "mca", "base", "--level", "9"],
    );
    assert_eq!(o.code, 0);
    assert!(value_line(&o.stdout, "mca_base_verbose").contains(&format!(
        "(current value: \"warn\", data source: override ({pre}/etc/oxmpi-mca-params-override.conf:1)"
    )));
    assert_eq!(
        o.stderr,
        format!("oxmpi-info: warning: MCA parameter mca_base_verbose is locked by override ({pre}/etc/oxmpi-mca-params-override.conf:1); value \"max\" from environment (OXMPI_MCA_mca_base_verbose) ignored\n")
    );
}

// ---------- bad input ----------

#[test]
fn unknown_framework() {
    let p = Prefix::new();
    let o = run(&mut p.cmd(), &["--param", "nosuch", "all"]);
    assert_eq!(o.code, 1);
    assert_eq!(o.stdout, "");
    assert!(
        o.stderr
            .starts_with("oxmpi-info: unknown framework \"nosuch\"; known frameworks: "),
        "{}",
        o.stderr
    );
    assert!(o.stderr.ends_with("\n") && o.stderr.lines().count() == 1);
    assert!(o.stderr.contains(" mca"));
}

#[test]
fn unknown_component() {
    let p = Prefix::new();
    let o = run(&mut p.cmd(), &["--param", "mca", "tcp"]);
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "oxmpi-info: unknown component \"tcp\" of framework mca; known components: base\n"
    );
}

#[test]
fn duplicate_command_line_key() {
    let p = Prefix::new();
    let o = run(
        &mut p.cmd(),
        &[
            "--mca",
            "mca_base_verbose",
            "1",
            "--mca",
            "mca_base_verbose",
            "2",
        ],
    );
    assert_eq!(o.code, 1);
    assert_eq!(o.stderr, "oxmpi-info: MCA parameter mca_base_verbose given twice on the command line with different values (\"1\" and \"2\"); give it once\n");
}

#[test]
fn unparsable_and_out_of_range_values() {
    let p = Prefix::new();
    let o = run(
        p.cmd()
            .env("OXMPI_MCA_mca_base_suppress_override_warning", "perhaps"),
        &[],
    );
    assert_eq!(o.code, 1);
    assert_eq!(o.stderr, "oxmpi-info: invalid value \"perhaps\" for MCA parameter mca_base_suppress_override_warning from environment (OXMPI_MCA_mca_base_suppress_override_warning): expected true|false (or 1|0, yes|no, on|off, enabled|disabled)\n");
    let o = run(&mut p.cmd(), &["--mca", "mca_base_verbose", "101"]);
    assert_eq!(o.code, 1);
    assert_eq!(o.stderr, "oxmpi-info: invalid value \"101\" for MCA parameter mca_base_verbose from command line: out of range, expected -1|none, 0|error, 10|component, 20|warn, 40|info, 60|trace, 80|debug, 100|max, 0-100\n");
}

#[test]
fn unknown_enum_name() {
    let p = Prefix::new();
    let o = run(p.cmd().env("OMPI_MCA_mca_base_verbose", "chatty"), &[]);
    assert_eq!(o.code, 1);
    assert_eq!(o.stderr, "oxmpi-info: invalid value \"chatty\" for MCA parameter mca_base_verbose from environment (OMPI_MCA_mca_base_verbose): unknown name, expected one of -1|none, 0|error, 10|component, 20|warn, 40|info, 60|trace, 80|debug, 100|max, 0-100\n");
}

#[test]
fn malformed_parameter_file_line() {
    let p = Prefix::new();
    let pre = p.path().display().to_string();
    p.write(
        "home/.oxmpi/mca-params.conf",
        "mca_base_verbose = 1\nverbose please\n",
    );
    let o = run(&mut p.cmd(), &[]);
    assert_eq!(o.code, 1);
    assert_eq!(o.stderr, format!("oxmpi-info: malformed line 2 in parameter file {pre}/home/.oxmpi/mca-params.conf: \"verbose please\"; expected `name = value`\n"));
}

#[test]
fn unknown_env_names_warn_with_suggestions_and_compat_names_are_ignored() {
    let p = Prefix::new();
    let o = run(
        p.cmd()
            .env("OXMPI_MCA_mca_base_verbos", "1")
            .env("OMPI_MCA_btl_openib_warn_no_device_params_found", "0"),
        &[],
    );
    assert_eq!(o.code, 0);
    assert_eq!(o.stderr, "oxmpi-info: warning: environment variable OXMPI_MCA_mca_base_verbos names unknown MCA parameter \"mca_base_verbos\" (ignored); did you mean mca_base_verbose?\n");
}

#[test]
fn ignored_compat_names_are_listed_at_info_verbosity() {
    let p = Prefix::new();
    let o = run(
        p.cmd()
            .env("OMPI_MCA_mca_base_verbose", "info")
            .env("OMPI_MCA_btl_openib_warn_no_device_params_found", "0"),
        &[],
    );
    assert_eq!(o.code, 0);
    assert_eq!(
        o.stderr,
        "oxmpi-info: ignoring OMPI_MCA_btl_openib_warn_no_device_params_found: not a parameter of oxmpi\n"
    );
}

#[test]
fn usage_errors() {
    let p = Prefix::new();
    let o = run(&mut p.cmd(), &["--level", "10"]);
    assert_eq!(o.code, 2);
    assert!(o
        .stderr
        .starts_with("oxmpi-info: invalid --level \"10\": expected 1-9\nusage: oxmpi-info"));
    let o = run(&mut p.cmd(), &["--frobnicate"]);
    assert_eq!(o.code, 2);
    assert!(o
        .stderr
        .starts_with("oxmpi-info: unknown argument \"--frobnicate\"\n"));
    let o = run(&mut p.cmd(), &["--param", "mca"]);
    assert_eq!(o.code, 2);
    assert!(o
        .stderr
        .starts_with("oxmpi-info: --param needs 2 argument(s)\n"));
    let o = run(&mut p.cmd(), &["--version"]);
    assert_eq!((o.code, o.stdout), (0, format!("oxmpi-info (oxmpi) {V}\n")));
}

// These use the btl framework declared by oxmpi-engine.

#[test]
fn negation_not_at_start_of_selection_list() {
    let p = Prefix::new();
    let o = run(&mut p.cmd(), &["--mca", "btl", "self,^sm"]);
    assert_eq!(o.code, 1);
    assert_eq!(o.stderr, "oxmpi-info: invalid value \"self,^sm\" for MCA parameter btl from command line: '^' may only appear once, at the start of the list (e.g. ^tcp,openib)\n");
}

#[test]
fn open_mpi_spellings_of_framework_verbosity() {
    let p = Prefix::new();
    let args = ["--param", "btl", "base", "--level", "9"];
    let o = run(p.cmd().env("OMPI_MCA_btl_base_verbose", "debug"), &args);
    assert!(value_line(&o.stdout, "btl_base_verbose").contains(
        "(current value: \"debug\", data source: environment (OMPI_MCA_btl_base_verbose)"
    ));
    let mut c = p.cmd();
    let o = run(
        &mut c,
        &[
            "--mca",
            "btl_base_verbose",
            "100",
            "--param",
            "btl",
            "base",
            "--level",
            "9",
        ],
    );
    assert!(value_line(&o.stdout, "btl_base_verbose")
        .contains("(current value: \"max\", data source: command line"));
    let o = run(
        &mut p.cmd(),
        &[
            "--mca", "btl", "^sm", "--param", "btl", "sm", "--level", "9",
        ],
    );
    assert_eq!(o.code, 0);
    assert!(
        o.stdout
            .lines()
            .skip(1)
            .all(|l| l.starts_with("          MCA (-) btl sm: ")
                || l.starts_with("                          ")),
        "{}",
        o.stdout
    );
}
