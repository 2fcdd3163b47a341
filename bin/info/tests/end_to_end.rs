//! End-to-end checks of the parameter and verbose-output system through an installed prefix:
//! `mpirun` delivering parameters from every source to ranks of a real MPI program (built with
//! the prefix's `mpicc`, linked to its `libmpi`), the engine's verbose lines, sinks, and the
//! installed `oxmpi-info`.
//!
//! Needs `OXMPI_TEST_PREFIX` (set by `cargo xtask test`). Each test works in its own temporary
//! directory with its own `$HOME`; tests that write `PREFIX/etc/` files use a private prefix
//! (copies of `mpirun` and `oxmpi-info`, the rest linked), never the shared one.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

const RING_C: &str = r#"
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size, x, y;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    x = rank;
    MPI_Sendrecv(&x, 1, MPI_INT, (rank + 1) % size, 0, &y, 1, MPI_INT,
                 (rank + size - 1) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("rank %d got %d\n", rank, y);
    MPI_Finalize();
    return 0;
}
"#;

/// The engine's level-10 `btl` line, printed once per rank at `btl_base_verbose >= 10`.
const BTL_LINE: &str = "btl self";

fn test_prefix() -> PathBuf {
    let p = std::env::var_os("OXMPI_TEST_PREFIX").expect(
        "OXMPI_TEST_PREFIX is not set: these tests need an installed prefix; run `cargo xtask test` \
         or `cargo xtask install --debug --prefix DIR` and set OXMPI_TEST_PREFIX=DIR",
    );
    let p = PathBuf::from(p);
    assert!(
        p.join("bin/mpirun").is_file(),
        "OXMPI_TEST_PREFIX={} has no bin/mpirun",
        p.display()
    );
    p.canonicalize().unwrap()
}

/// A scratch directory with `home/.oxmpi`, the compiled ring program and (optionally) a
/// private prefix; removed on drop.
struct Scratch {
    root: PathBuf,
    prefix: PathBuf,
    prog: PathBuf,
}

impl Scratch {
    fn new(private_prefix: bool) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let shared = test_prefix();
        let root = std::env::temp_dir().join(format!(
            "oxmpi-e2e-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(root.join("home/.oxmpi")).unwrap();
        let prefix = if private_prefix {
            let p = root.join("prefix");
            std::fs::create_dir_all(p.join("bin")).unwrap();
            std::fs::create_dir_all(p.join("etc")).unwrap();
            // Copies (a symlink would resolve to the shared prefix): binaries find their
            // prefix from their own path, and mpirun hands it to the ranks.
            for b in ["mpirun", "oxmpi-info"] {
                std::fs::copy(shared.join("bin").join(b), p.join("bin").join(b)).unwrap();
            }
            for d in ["lib", "include", "share"] {
                if shared.join(d).exists() {
                    std::os::unix::fs::symlink(shared.join(d), p.join(d)).unwrap();
                }
            }
            p
        } else {
            shared.clone()
        };
        let src = root.join("ring.c");
        std::fs::write(&src, RING_C).unwrap();
        let prog = root.join("ring");
        let out = Command::new(shared.join("bin/mpicc"))
            .arg("-o")
            .arg(&prog)
            .arg(&src)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "mpicc failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Scratch { root, prefix, prog }
    }

    fn home(&self) -> PathBuf {
        self.root.join("home")
    }

    fn write(&self, path: &Path, text: &str) {
        std::fs::write(path, text).unwrap();
    }

    /// `PREFIX/bin/<tool>` with a clean environment plus `env`.
    fn cmd(&self, tool: &str, env: &[(&str, &str)]) -> Command {
        let mut c = Command::new(self.prefix.join("bin").join(tool));
        c.env_clear()
            .env("HOME", self.home())
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .current_dir(&self.root);
        for (k, v) in env {
            c.env(k, v);
        }
        c
    }

    /// `mpirun ARGS -n 2 ring`.
    fn mpirun(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let out = self
            .cmd("mpirun", env)
            .args(args)
            .args(["-n", "2"])
            .arg(&self.prog)
            .output()
            .unwrap();
        Run::from(out)
    }

    /// The parsable `oxmpi-info` lines of parameter `name` of framework `fw`.
    fn info_param(&self, fw: &str, name: &str, args: &[&str], env: &[(&str, &str)]) -> String {
        let out = self
            .cmd("oxmpi-info", env)
            .args(["--param", fw, "all", "--level", "9", "--parsable"])
            .args(args)
            .output()
            .unwrap();
        let run = Run::from(out);
        assert_eq!(run.code, 0, "oxmpi-info failed: {}", run.stderr);
        let value = format!(":param:{name}:value:");
        let source = format!(":param:{name}:source:");
        run.stdout
            .lines()
            .filter(|l| l.contains(&value) || l.contains(&source))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl From<Output> for Run {
    fn from(o: Output) -> Self {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

impl Run {
    fn ok(&self) -> &Self {
        assert_eq!(
            self.code, 0,
            "job failed\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        assert!(self.stdout.contains("rank 0 got 1") && self.stdout.contains("rank 1 got 0"));
        self
    }

    fn btl_lines(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| l.contains(BTL_LINE))
            .collect()
    }
}

/// Asserts that both ranks printed the engine's btl line (`verbose`) or none did.
fn assert_verbose(run: &Run, verbose: bool, what: &str) {
    run.ok();
    let n = run.btl_lines().len();
    assert_eq!(
        n,
        if verbose { 2 } else { 0 },
        "{what}: expected {} btl line(s), stderr:\n{}",
        if verbose { 2 } else { 0 },
        run.stderr
    );
}

#[test]
fn verbose_lines_carry_host_pid_and_jobid_rank() {
    let s = Scratch::new(false);
    let run = s.mpirun(&["--mca", "btl_base_verbose", "100"], &[]);
    assert_verbose(&run, true, "--mca btl_base_verbose 100");
    let mut ranks = Vec::new();
    for l in run.btl_lines() {
        // [host:pid] [jobid,rank] rank R/2: btl self...
        let (head, rest) = l.split_once("] ").expect(l);
        assert!(head.starts_with('[') && head.contains(':'), "{l}");
        let pid = head.rsplit(':').next().unwrap();
        assert!(pid.parse::<u32>().is_ok(), "pid in {l}");
        let (name, msg) = rest.split_once("] ").expect(l);
        let (_jobid, rank) = name.trim_start_matches('[').split_once(',').expect(l);
        assert!(msg.starts_with(&format!("rank {rank}/2: btl self")), "{l}");
        ranks.push(rank.to_string());
    }
    ranks.sort();
    assert_eq!(ranks, ["0", "1"]);
    // Default verbosity: silent.
    assert_verbose(&s.mpirun(&[], &[]), false, "default");
}

#[test]
fn environment_spellings_reach_ranks() {
    let s = Scratch::new(false);
    let ompi = [("OMPI_MCA_btl_base_verbose", "debug")];
    assert_verbose(&s.mpirun(&[], &ompi), true, "OMPI_MCA_ env");
    assert_verbose(
        &s.mpirun(&[], &[("OXMPI_MCA_btl_base_verbose", "component")]),
        true,
        "OXMPI_MCA_ env",
    );
    // OXMPI_MCA_ beats OMPI_MCA_.
    assert_verbose(
        &s.mpirun(
            &[],
            &[
                ("OXMPI_MCA_btl_base_verbose", "none"),
                ("OMPI_MCA_btl_base_verbose", "max"),
            ],
        ),
        false,
        "OXMPI_MCA_ over OMPI_MCA_",
    );
    // The command line beats the environment.
    assert_verbose(
        &s.mpirun(
            &["--mca", "btl_base_verbose", "10"],
            &[("OXMPI_MCA_btl_base_verbose", "none")],
        ),
        true,
        "--mca over env",
    );
    assert_eq!(
        s.info_param("btl", "btl_base_verbose", &[], &ompi),
        "mca:btl:base:param:btl_base_verbose:value:debug\n\
         mca:btl:base:param:btl_base_verbose:source:environment (OMPI_MCA_btl_base_verbose)"
    );
}

#[test]
fn tune_and_parameter_files_reach_ranks() {
    let s = Scratch::new(true);
    let tune = s.root.join("job.tune");
    s.write(&tune, "--mca btl_base_verbose 100\n");
    let tune_arg = tune.to_str().unwrap();
    assert_verbose(&s.mpirun(&["--tune", tune_arg], &[]), true, "--tune");
    // The environment beats a tune file.
    assert_verbose(
        &s.mpirun(
            &["--tune", tune_arg],
            &[("OXMPI_MCA_btl_base_verbose", "0")],
        ),
        false,
        "env over --tune",
    );

    let home_file = s.home().join(".oxmpi/mca-params.conf");
    let prefix_file = s.prefix.join("etc/oxmpi-mca-params.conf");
    s.write(&prefix_file, "# system\nbtl_base_verbose = 100\n");
    assert_verbose(&s.mpirun(&[], &[]), true, "PREFIX/etc file");
    assert_eq!(
        s.info_param("btl", "btl_base_verbose", &[], &[]),
        format!(
            "mca:btl:base:param:btl_base_verbose:value:max\n\
             mca:btl:base:param:btl_base_verbose:source:file ({}:2)",
            prefix_file.display()
        )
    );
    // $HOME's file is left of the prefix's: it wins.
    s.write(&home_file, "btl_base_verbose = none\n");
    assert_verbose(&s.mpirun(&[], &[]), false, "home file over prefix file");
    assert_eq!(
        s.info_param("btl", "btl_base_verbose", &[], &[]),
        format!(
            "mca:btl:base:param:btl_base_verbose:value:none\n\
             mca:btl:base:param:btl_base_verbose:source:file ({}:1)",
            home_file.display()
        )
    );
    // A tune file beats both parameter files.
    assert_verbose(
        &s.mpirun(&["--tune", tune_arg], &[]),
        true,
        "tune over files",
    );

    // mca_base_param_files replaces the list.
    let other = s.root.join("other.conf");
    s.write(&other, "btl_base_verbose = trace\n");
    let env = [("OXMPI_MCA_mca_base_param_files", other.to_str().unwrap())];
    assert_verbose(&s.mpirun(&[], &env), true, "mca_base_param_files");
    assert_eq!(
        s.info_param("btl", "btl_base_verbose", &[], &env),
        format!(
            "mca:btl:base:param:btl_base_verbose:value:trace\n\
             mca:btl:base:param:btl_base_verbose:source:file ({}:1)",
            other.display()
        )
    );
}

#[test]
fn override_file_locks_with_a_warning() {
    let s = Scratch::new(true);
    let ov = s.prefix.join("etc/oxmpi-mca-params-override.conf");
    s.write(&ov, "btl_base_verbose = 0\n");
    let run = s.mpirun(&["--mca", "btl_base_verbose", "100"], &[]);
    assert_verbose(&run, false, "override locks");
    let warnings: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| {
            l.contains(&format!(
                "warning: MCA parameter btl_base_verbose is locked by override ({}:1); value \"100\" from command line ignored",
                ov.display()
            ))
        })
        .collect();
    assert!(!warnings.is_empty(), "no lock warning in:\n{}", run.stderr);
    assert_eq!(
        s.info_param(
            "btl",
            "btl_base_verbose",
            &["--mca", "btl_base_verbose", "100"],
            &[]
        ),
        format!(
            "mca:btl:base:param:btl_base_verbose:value:error\n\
             mca:btl:base:param:btl_base_verbose:source:override ({}:1)",
            ov.display()
        )
    );
    // Suppressed on request.
    let run = s.mpirun(
        &[
            "--mca",
            "btl_base_verbose",
            "100",
            "--mca",
            "mca_base_suppress_override_warning",
            "1",
        ],
        &[],
    );
    assert_verbose(&run, false, "override locks (suppressed)");
    assert!(!run.stderr.contains("locked by override"), "{}", run.stderr);
}

#[test]
fn json_and_file_sinks() {
    let s = Scratch::new(false);
    let run = s.mpirun(
        &[
            "--mca",
            "btl_base_verbose",
            "10",
            "--mca",
            "mca_base_output_format",
            "json",
        ],
        &[],
    );
    run.ok();
    let json: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("\"framework\":\"btl\"") && l.contains("\"msg\":\"rank "))
        .collect();
    // One summary line per rank (other btl lines, such as ofi's verdict, may come too).
    assert_eq!(json.len(), 2, "{}", run.stderr);
    for l in json {
        assert!(l.starts_with("{\"host\":\"") && l.ends_with('}'), "{l}");
        assert!(
            l.contains("\"jobid\":") && l.contains("\"level\":10"),
            "{l}"
        );
        assert!(l.contains("\"rank\":0") || l.contains("\"rank\":1"), "{l}");
    }

    let log = s.root.join("verbose.log");
    let sink = format!("file:{}", log.display());
    let run = s.mpirun(
        &[
            "--mca",
            "btl_base_verbose",
            "10",
            "--mca",
            "mca_base_output",
            &sink,
        ],
        &[],
    );
    run.ok();
    assert!(run.btl_lines().is_empty(), "{}", run.stderr);
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        text.lines().filter(|l| l.contains(BTL_LINE)).count(),
        2,
        "{text}"
    );
}

#[test]
fn command_line_errors_stop_the_launch() {
    let s = Scratch::new(false);
    let run = s.mpirun(
        &[
            "--mca",
            "btl_sm_eager_limit",
            "4k",
            "--mca",
            "btl_sm_eager_limit",
            "8k",
        ],
        &[],
    );
    assert_ne!(run.code, 0);
    assert!(run.stdout.is_empty(), "nothing may run: {}", run.stdout);
    let line = run.stderr.lines().next().unwrap_or_default();
    assert!(
        line.contains("btl_sm_eager_limit") && line.contains("4k") && line.contains("8k"),
        "{}",
        run.stderr
    );
}

#[test]
fn bad_values_are_named_with_source_and_valid_values() {
    let s = Scratch::new(false);
    let run = s.mpirun(&["--mca", "btl_sm_eager_limit", "abc"], &[]);
    let expected = "invalid value \"abc\" for MCA parameter btl_sm_eager_limit from command line: expected a byte count like 4096, 4k, 1m or 2g";
    assert!(run.stderr.contains(expected), "{}", run.stderr);
    let run = s.mpirun(&["--mca", "btl", "sm,^self"], &[]);
    assert!(
        run.stderr.contains("invalid value \"sm,^self\" for MCA parameter btl from command line: '^' may only appear once, at the start of the list"),
        "{}",
        run.stderr
    );
    let run = s.mpirun(&["--mca", "btl_base_verbose", "loud"], &[]);
    assert!(
        run.stderr.contains("invalid value \"loud\" for MCA parameter btl_base_verbose from command line: unknown name, expected one of -1|none"),
        "{}",
        run.stderr
    );
    // mpirun's own frameworks too.
    let out = s
        .cmd("mpirun", &[])
        .args(["--mca", "ras_base_verbose", "loud", "-n", "1", "true"])
        .output()
        .unwrap();
    let run = Run::from(out);
    assert!(
        run.stderr.contains(
            "invalid value \"loud\" for MCA parameter ras_base_verbose from command line"
        ),
        "{}",
        run.stderr
    );
}

/// A bad value for one of the MPI library's parameters stops the launch (mpirun registers
/// the engine's parameters before launching): non-zero exit, nothing runs.
#[test]
fn bad_values_stop_the_launch() {
    let s = Scratch::new(false);
    for args in [
        ["--mca", "btl_sm_eager_limit", "abc"],
        ["--mca", "btl", "sm,^self"],
        ["--mca", "btl_base_verbose", "loud"],
    ] {
        let run = s.mpirun(&args, &[]);
        assert_ne!(run.code, 0, "{args:?}");
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
    }
}

#[test]
fn unknown_component_is_reported() {
    let s = Scratch::new(false);
    let run = s.mpirun(&["--mca", "btl", "foo"], &[]);
    assert_ne!(run.code, 0);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(
        run.stderr.contains("A requested component was not found")
            && run.stderr.contains("framework btl, component foo")
            && run.stderr.contains("available components: self, sm"),
        "{}",
        run.stderr
    );
}

/// mpirun knows every parameter the ranks read, so it warns about a misspelled one.
#[test]
fn unknown_oxmpi_mca_name_warns_in_ranks() {
    let s = Scratch::new(false);
    let run = s.mpirun(&[], &[("OXMPI_MCA_btl_sm_eagr_limit", "1k")]);
    run.ok();
    assert!(
        run.stderr.contains("OXMPI_MCA_btl_sm_eagr_limit")
            && run.stderr.contains("btl_sm_eager_limit"),
        "{}",
        run.stderr
    );
}

#[test]
fn installed_info_lists_every_crates_frameworks() {
    let s = Scratch::new(false);
    let out = s.cmd("oxmpi-info", &[]).output().unwrap();
    let run = Run::from(out);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for fw in [
        "btl", "pml", "mpi", "mca", "ras", "rmaps", "plm", "odls", "iof", "errmgr", "pmi",
    ] {
        assert!(
            run.stdout.contains(&format!("MCA {fw}: ")),
            "framework {fw} missing:\n{}",
            run.stdout
        );
    }
    let out = s
        .cmd("oxmpi-info", &[])
        .args(["--param", "all", "all", "--level", "9", "--parsable"])
        .output()
        .unwrap();
    let run = Run::from(out);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for p in [
        "mca:btl:sm:param:btl_sm_eager_limit:value:8192",
        "mca:ras:base:param:ras_base_verbose:value:error",
        "mca:mca:base:param:mca_base_param_files:value:",
    ] {
        assert!(run.stdout.contains(p), "{p} missing");
    }
    let out = s
        .cmd("oxmpi-info", &[])
        .args(["--param", "nosuch", "all"])
        .output()
        .unwrap();
    let run = Run::from(out);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .starts_with("oxmpi-info: unknown framework \"nosuch\"; known frameworks: "),
        "{}",
        run.stderr
    );
}
