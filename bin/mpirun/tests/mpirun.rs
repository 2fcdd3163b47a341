//! End-to-end tests of `mpirun`: exit status rules, messages, signals, timeout, IO
//! forwarding, rank environment, bad input, and that nothing of a job is left behind
//! (processes checked through /proc, the job directory through a private TMPDIR).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

mod common;
use common::{sorted_lines, stderr, stdout, Scratch};
use std::time::{Duration, Instant};

impl Scratch {
    fn new(name: &str) -> Self {
        Scratch::with_tag("oxmpitest", name)
    }

    /// `mpirun` with TMPDIR pointing into the scratch dir and a marker variable that lets
    /// `leftovers` find any process of the job.
    fn mpirun(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_mpirun"));
        c.env("TMPDIR", self.dir.join("tmp"))
            .env("OXMPI_TEST_MARK", &self.mark)
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        let out = self.mpirun().args(args).output().unwrap();
        self.assert_clean();
        out
    }
}

#[test]
fn ranks_see_their_environment() {
    let s = Scratch::new("env");
    let o = s.run(&[
        "-np",
        "3",
        "sh",
        "-c",
        "echo $OMPI_COMM_WORLD_RANK $OMPI_COMM_WORLD_SIZE $OMPI_COMM_WORLD_LOCAL_RANK \
         $OMPI_COMM_WORLD_LOCAL_SIZE $OMPI_COMM_WORLD_NODE_RANK $PMI_RANK $PMI_SIZE \
         ${PMI_FD:+fd} ${PMI_JOBID:+job} ${OMPI_UNIVERSE_SIZE:+u}",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        sorted_lines(&stdout(&o)),
        [
            "0 3 0 3 0 0 3 fd job u",
            "1 3 1 3 1 1 3 fd job u",
            "2 3 2 3 2 2 3 fd job u"
        ]
    );
}

#[test]
fn job_directory_is_private_and_removed() {
    let s = Scratch::new("jobdir");
    let o = s.run(&[
        "-n",
        "2",
        "sh",
        "-c",
        "test -d \"$OXMPI_JOB_DIR\" && stat -c %a \"$OXMPI_JOB_DIR\"",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "700\n700\n");
}

#[test]
fn io_forwarding_delivers_every_line_exactly_once_in_order() {
    let s = Scratch::new("iof");
    const LINES: usize = 200_000;
    let script = format!(
        "awk -v r=$OMPI_COMM_WORLD_RANK 'BEGIN {{ for (i = 0; i < {LINES}; i++) print \"rank\" r \" line \" i }}'"
    );
    let o = s.run(&["-n", "4", "sh", "-c", &script]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let mut next = [0usize; 4];
    for line in out.lines() {
        let (r, i) = line
            .strip_prefix("rank")
            .and_then(|l| l.split_once(" line "))
            .unwrap_or_else(|| panic!("mangled line {line:?}"));
        let r: usize = r.parse().unwrap();
        let i: usize = i.parse().unwrap();
        assert_eq!(i, next[r], "rank {r}: line out of order or duplicated/lost");
        next[r] += 1;
    }
    assert_eq!(next, [LINES; 4]);
}

#[test]
fn tag_output_and_unterminated_last_line() {
    let s = Scratch::new("tag");
    let o = s.run(&[
        "--tag-output",
        "-n",
        "2",
        "sh",
        "-c",
        "echo out; echo err >&2; printf tail",
    ]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        sorted_lines(&stdout(&o)),
        [
            "[1,0]<stdout>:out",
            "[1,0]<stdout>:tail",
            "[1,1]<stdout>:out",
            "[1,1]<stdout>:tail"
        ]
    );
    assert_eq!(
        sorted_lines(&stderr(&o)),
        ["[1,0]<stderr>:err", "[1,1]<stderr>:err"]
    );
}

#[test]
fn timestamp_output_prefixes_each_line() {
    let s = Scratch::new("ts");
    let o = s.run(&["--timestamp-output", "-n", "1", "echo", "x"]);
    let out = stdout(&o);
    let line = out.trim_end();
    assert!(
        line.starts_with('[') && line.ends_with("]<stdout>:x"),
        "{line}"
    );
}

#[test]
fn output_filename_writes_per_rank_files() {
    let s = Scratch::new("ofile");
    let dir = s.dir.join("out");
    let o = s.run(&[
        "--output-filename",
        dir.to_str().unwrap(),
        "-n",
        "2",
        "sh",
        "-c",
        "echo o$OMPI_COMM_WORLD_RANK; echo e$OMPI_COMM_WORLD_RANK >&2",
    ]);
    assert_eq!(o.status.code(), Some(0));
    assert!(o.stdout.is_empty());
    for r in 0..2 {
        let d = dir.join("1").join(format!("rank.{r}"));
        assert_eq!(
            std::fs::read_to_string(d.join("stdout")).unwrap(),
            format!("o{r}\n")
        );
        assert_eq!(
            std::fs::read_to_string(d.join("stderr")).unwrap(),
            format!("e{r}\n")
        );
    }
}

#[test]
fn exit_status_is_lowest_failing_rank() {
    let s = Scratch::new("exit");
    let o = s.run(&["-n", "4", "sh", "-c", "exit $((OMPI_COMM_WORLD_RANK + 2))"]);
    // All ranks fail at about the same time; rank 0 is the lowest.
    let code = o.status.code().unwrap();
    assert!((2..=5).contains(&code), "{code}");
    let err = stderr(&o);
    assert!(err.contains(&format!("exited with status {code}")), "{err}");
    let o = s.run(&[
        "-n",
        "3",
        "sh",
        "-c",
        "test $OMPI_COMM_WORLD_RANK -ne 1 || exit 9",
    ]);
    assert_eq!(o.status.code(), Some(9));
    assert!(stderr(&o).contains("rank 1 (pid "), "{}", stderr(&o));
}

#[test]
fn failing_rank_tears_down_the_rest() {
    let s = Scratch::new("teardown");
    let start = Instant::now();
    let o = s.run(&[
        "-n",
        "3",
        "sh",
        "-c",
        "if [ $OMPI_COMM_WORLD_RANK = 2 ]; then exit 3; fi; sleep 600",
    ]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        start.elapsed() < Duration::from_secs(300),
        "the sleepers were not stopped"
    );
}

/// Ranks that ignore SIGTERM (inherited by their children) are killed after the grace period.
#[test]
fn teardown_escalates_to_sigkill() {
    let s = Scratch::new("escalate");
    let o = s.run(&[
        "-n",
        "2",
        "sh",
        "-c",
        "if [ $OMPI_COMM_WORLD_RANK = 0 ]; then \
           while [ ! -e $OXMPI_JOB_DIR/ready ]; do sleep 0.05; done; exit 6; fi; \
         trap '' TERM; touch $OXMPI_JOB_DIR/ready; while :; do sleep 1; done",
    ]);
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
}

/// A rank that cannot be exec'd ends the job; ranks already started are torn down.
#[test]
fn launch_failure_tears_down_started_ranks() {
    let s = Scratch::new("launchfail");
    let bad = s.dir.join("badinterp");
    std::fs::write(&bad, "#!/nonexistent/interpreter\n").unwrap();
    std::fs::set_permissions(&bad, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let o = s.run(&[
        "-n",
        "1",
        "sleep",
        "600",
        ":",
        "-n",
        "1",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("failed to start rank 1"),
        "{}",
        stderr(&o)
    );
}

/// `mpiexec` (installed as a symlink to mpirun) is the same program.
#[test]
fn mpiexec_symlink_behaves_like_mpirun() {
    let s = Scratch::new("mpiexec");
    let link = s.dir.join("mpiexec");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_mpirun"), &link).unwrap();
    let o = Command::new(&link)
        .env("TMPDIR", s.dir.join("tmp"))
        .env("OXMPI_TEST_MARK", &s.mark)
        .args(["-n", "2", "sh", "-c", "echo $OMPI_COMM_WORLD_SIZE"])
        .output()
        .unwrap();
    s.assert_clean();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "2\n2\n");
}

#[test]
fn signal_death_is_reported_and_ends_the_job() {
    let s = Scratch::new("signal");
    let start = Instant::now();
    let o = s.run(&[
        "-n",
        "3",
        "sh",
        "-c",
        "if [ $OMPI_COMM_WORLD_RANK = 1 ]; then kill -SEGV $$; fi; sleep 600",
    ]);
    assert_eq!(o.status.code(), Some(128 + 11));
    let err = stderr(&o);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let want = format!(
        "on host {} exited on signal 11 (Segmentation fault)",
        host.trim()
    );
    assert!(err.contains("rank 1 (pid "), "{err}");
    assert!(err.contains(&want), "{err}");
    assert!(start.elapsed() < Duration::from_secs(300));
}

#[test]
fn timeout_has_its_own_exit_code() {
    let s = Scratch::new("timeout");
    let o = s.run(&["--timeout", "1", "-n", "2", "sleep", "600"]);
    assert_eq!(o.status.code(), Some(124));
    assert!(stderr(&o).contains("time limit"), "{}", stderr(&o));
    // Open MPI 4.x's environment variable does the same.
    let o = s
        .mpirun()
        .env("MPIEXEC_TIMEOUT", "1")
        .args(["-n", "1", "sleep", "600"])
        .output()
        .unwrap();
    s.assert_clean();
    assert_eq!(o.status.code(), Some(124));
    let o = s
        .mpirun()
        .env("MPIEXEC_TIMEOUT", "later")
        .args(["-n", "1", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("MPIEXEC_TIMEOUT"), "{}", stderr(&o));
}

#[test]
fn sigterm_and_sigint_are_forwarded_and_the_job_torn_down() {
    for (sig, name) in [(libc_sigterm(), "TERM"), (2, "INT")] {
        let s = Scratch::new(&format!("fwd{name}"));
        let mut child = s
            .mpirun()
            .args([
                "-n",
                "2",
                "sh",
                "-c",
                "trap 'echo got$OMPI_COMM_WORLD_RANK; exit 0' TERM INT; echo ready; \
                 while :; do sleep 1; done",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        for _ in 0..2 {
            // Both ranks run (and have installed their trap) before the signal is sent.
            assert_eq!(lines.next().unwrap().unwrap(), "ready");
        }
        let rc = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(rc.success());
        let _rest: Vec<String> = lines.map(Result::unwrap).collect();
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(128 + sig), "{name}");
        let err = stderr(&o);
        assert!(err.contains(&format!("received signal {sig} (")), "{err}");
        s.assert_clean();
    }
}

/// SIGUSR1/SIGUSR2 are forwarded to every rank without ending the job.
#[test]
fn sigusr1_is_forwarded_without_ending_the_job() {
    let s = Scratch::new("usr1");
    let mut child = s
        .mpirun()
        .args([
            "-n",
            "2",
            "sh",
            "-c",
            "trap 'echo usr1; exit 0' USR1; echo ready; while :; do sleep 0.1; done",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for _ in 0..2 {
        assert_eq!(lines.next().unwrap().unwrap(), "ready");
    }
    let rc = Command::new("kill")
        .args(["-USR1", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(rc.success());
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    let o = child.wait_with_output().unwrap();
    s.assert_clean();
    assert_eq!(rest, ["usr1", "usr1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

fn libc_sigterm() -> i32 {
    15
}

#[test]
fn stdin_goes_to_rank_zero_only_by_default() {
    let s = Scratch::new("stdin");
    let mut child = s
        .mpirun()
        .args([
            "-n",
            "2",
            "sh",
            "-c",
            "echo $OMPI_COMM_WORLD_RANK:$(cat | wc -l)",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"a\nb\nc\n").unwrap();
    let o = child.wait_with_output().unwrap();
    s.assert_clean();
    assert_eq!(sorted_lines(&stdout(&o)), ["0:3", "1:0"]);
    let o = s
        .mpirun()
        .args([
            "--stdin",
            "all",
            "-n",
            "2",
            "sh",
            "-c",
            "echo $(cat | wc -l)",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(b"x\ny\n")?;
            c.wait_with_output()
        })
        .unwrap();
    assert_eq!(stdout(&o), "2\n2\n");
}

#[test]
fn mpmd_contexts_get_consecutive_ranks() {
    let s = Scratch::new("mpmd");
    let o = s.run(&[
        "-n",
        "1",
        "sh",
        "-c",
        "echo a$OMPI_COMM_WORLD_RANK/$OMPI_COMM_WORLD_SIZE",
        ":",
        "-np",
        "2",
        "sh",
        "-c",
        "echo b$OMPI_COMM_WORLD_RANK/$OMPI_COMM_WORLD_SIZE/$OXMPI_APPNUM",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(sorted_lines(&stdout(&o)), ["a0/3", "b1/3/1", "b2/3/1"]);
}

#[test]
fn exports_mca_prefix_and_wdir() {
    let s = Scratch::new("exports");
    let prefix = s.dir.join("pfx");
    std::fs::create_dir_all(&prefix).unwrap();
    let o = s
        .mpirun()
        .env("OXMPI_FWD_ME", "fwd")
        .args([
            "-x",
            "OXMPI_FWD_ME",
            "-x",
            "OXMPI_SET_ME=v=1",
            "-x",
            "PATH=/usr/bin:/bin",
            "--prefix",
            prefix.to_str().unwrap(),
            "-mca",
            "btl_base_verbose",
            "5",
            "--wdir",
            s.dir.to_str().unwrap(),
            "-n",
            "1",
            "sh",
            "-c",
            "echo $OXMPI_FWD_ME $OXMPI_SET_ME $OXMPI_MCA_btl_base_verbose; echo $PATH; \
             echo $LD_LIBRARY_PATH | cut -d: -f1; pwd",
        ])
        .output()
        .unwrap();
    s.assert_clean();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let p = prefix.display();
    assert_eq!(
        stdout(&o),
        format!(
            "fwd v=1 5\n{p}/bin:/usr/bin:/bin\n{p}/lib\n{}\n",
            s.dir.display()
        )
    );
}

#[test]
fn oversubscribed_ranks_are_told_to_yield_unless_the_user_chose() {
    let s = Scratch::new("yield");
    let cores = 64; // more ranks than cores on any test machine we run on
    let n = cores.to_string();
    let o = s.run(&[
        "-n",
        &n,
        "sh",
        "-c",
        "echo $OXMPI_OVERSUBSCRIBED ${OXMPI_MCA_mpi_yield_when_idle:-unset}",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).lines().all(|l| l == "1 1"), "{}", stdout(&o));
    let o = s
        .mpirun()
        .env("OMPI_MCA_mpi_yield_when_idle", "0")
        .args([
            "-n",
            &n,
            "sh",
            "-c",
            "echo ${OXMPI_MCA_mpi_yield_when_idle:-unset}",
        ])
        .output()
        .unwrap();
    s.assert_clean();
    assert!(stdout(&o).lines().all(|l| l == "unset"), "{}", stdout(&o));
    let o = s.run(&["-n", "1", "sh", "-c", "echo $OXMPI_OVERSUBSCRIBED"]);
    assert_eq!(stdout(&o), "0\n");
}

#[test]
fn report_bindings_and_core_binding() {
    let s = Scratch::new("bind");
    let o = s.run(&[
        "--bind-to",
        "core",
        "--report-bindings",
        "-n",
        "1",
        "sh",
        "-c",
        "grep Cpus_allowed_list /proc/self/status | tr -d '\\t '",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    let line = err
        .lines()
        .find(|l| l.contains("Rank 0 bound to cores "))
        .expect(&err);
    let cores = line.rsplit(' ').next().unwrap();
    assert_eq!(stdout(&o), format!("Cpus_allowed_list:{cores}\n"));
    let o = s.run(&["--report-bindings", "--bind-to", "none", "-n", "1", "true"]);
    assert!(stderr(&o).contains("Rank 0 is not bound"), "{}", stderr(&o));
    // Open MPI's default: jobs of at most 2 ranks are bound to cores, larger ones are not.
    let o = s.run(&["--report-bindings", "-n", "2", "true"]);
    assert!(
        stderr(&o).contains("Rank 1 bound to cores "),
        "{}",
        stderr(&o)
    );
    let o = s.run(&["--report-bindings", "--oversubscribe", "-n", "3", "true"]);
    assert!(stderr(&o).contains("Rank 2 is not bound"), "{}", stderr(&o));
}

/// Each case: one line on stderr, exit status ≠ 0, and the program never ran.
#[test]
fn bad_input_launches_nothing() {
    let s = Scratch::new("bad");
    let marker = s.dir.join("ran");
    let touch = format!("touch {}", marker.display());
    let hostfile = s.dir.join("hosts");
    std::fs::write(
        &hostfile,
        "# hosts\nlocalhost slots=2\nlocalhost slots=two\n",
    )
    .unwrap();
    let noexec = s.dir.join("noexec");
    std::fs::write(&noexec, "#!/bin/sh\n").unwrap();
    let hf = hostfile.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--bogus", "sh", "-c", &touch],
            "unknown option '--bogus'",
        ),
        (vec!["-n", "2"], "no program"),
        (
            vec!["-n", "2", "no-such-program-oxmpi"],
            "no-such-program-oxmpi",
        ),
        (
            vec!["-n", "1", noexec.to_str().unwrap()],
            "not an executable",
        ),
        (vec!["--hostfile", hf, "sh", "-c", &touch], ":3: "),
        (vec!["-n", "0", "sh", "-c", &touch], "'-n'"),
        (
            vec!["--nooversubscribe", "-n", "999", "sh", "-c", &touch],
            "not enough slots",
        ),
        (vec!["--timeout", "soon", "sh", "-c", &touch], "--timeout"),
        (vec!["--timeout", "0", "sh", "-c", &touch], "--timeout"),
        (
            vec!["--mca", "a", "1", "--mca", "a", "2", "sh", "-c", &touch],
            "conflicting",
        ),
        (
            vec!["--wdir", "/no/such/dir", "sh", "-c", &touch],
            "/no/such/dir",
        ),
        (
            vec![
                "--host",
                "far-away-node",
                "--mca",
                "plm_rsh_agent",
                "oxmpi-no-such-agent -x",
                "sh",
                "-c",
                &touch,
            ],
            "far-away-node",
        ),
        (
            vec!["--stdin", "5", "-n", "2", "sh", "-c", &touch],
            "--stdin",
        ),
        (vec!["--map-by", "socket", "sh", "-c", &touch], "--map-by"),
        (
            vec!["--bind-to", "l3cache", "sh", "-c", &touch],
            "--bind-to",
        ),
        // What every rank would find in MPI_Init is found once, up front.
        (
            vec!["--mca", "btl", "self,nosuchbtl", "sh", "-c", &touch],
            "component nosuchbtl",
        ),
        (
            vec![
                "--mca",
                "btl_tcp_if_include",
                "10.0.0.0/33",
                "sh",
                "-c",
                &touch,
            ],
            "btl_tcp_if_include: '10.0.0.0/33': the prefix length must be 0 to 32",
        ),
        (
            vec![
                "--mca",
                "btl_tcp_if_include",
                "eth0",
                "--mca",
                "btl_tcp_if_exclude",
                "lo",
                "sh",
                "-c",
                &touch,
            ],
            "set only one",
        ),
        (
            vec![
                "--mca",
                "mca_base_param_check",
                "error",
                "--mca",
                "btl_tcp_if_inclde",
                "eth0",
                "sh",
                "-c",
                &touch,
            ],
            "did you mean btl_tcp_if_include? (mca_base_param_check=error)",
        ),
    ];
    for (args, needle) in cases {
        let o = s.run(&args);
        let err = stderr(&o);
        assert_ne!(o.status.code(), Some(0), "{args:?}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!marker.exists(), "{args:?} launched the program");
    }
    let o = s.run(&["--nooversubscribe", "-n", "999", "true"]);
    assert!(stderr(&o).contains("slots found: "), "{}", stderr(&o));
    // Without mca_base_param_check=error an unknown name is a warning naming the closest
    // known one, from --mca and from OMPI_MCA_ alike, and the job runs.
    let o = s
        .mpirun()
        .env("OMPI_MCA_btl_tcp_if_exclud", "lo")
        .args(["--mca", "btl_tcp_if_inclde", "eth0", "true"])
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("warning: --mca names unknown MCA parameter \"btl_tcp_if_inclde\" (ignored); did you mean btl_tcp_if_include?"),
        "{err}"
    );
    assert!(
        err.contains("OMPI_MCA_btl_tcp_if_exclud names unknown MCA parameter \"btl_tcp_if_exclud\" (ignored); did you mean btl_tcp_if_exclude?"),
        "{err}"
    );
}

#[test]
fn osc_parameters_are_known() {
    // The one-sided framework's parameters (declared with the engine's, run by the C ABI)
    // pass mca_base_param_check=error from --mca and the environment alike, with no warning.
    let s = Scratch::new("osc-params");
    let o = s
        .mpirun()
        .env("OXMPI_MCA_osc", "pt2pt")
        .args([
            "--mca",
            "mca_base_param_check",
            "error",
            "--mca",
            "osc_pt2pt_idle_sleep_max",
            "100",
            "--mca",
            "osc_base_verbose",
            "1",
            "true",
        ])
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("unknown"), "{err}");
    // A misspelling is still caught, with the osc name as the suggestion.
    let o = s
        .mpirun()
        .args(["--mca", "osc_pt2pt_idle_sleep_mx", "100", "true"])
        .output()
        .unwrap();
    assert!(
        stderr(&o).contains("did you mean osc_pt2pt_idle_sleep_max?"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn hostfile_and_host_slots_are_honoured() {
    let s = Scratch::new("hostfile");
    let hostfile = s.dir.join("hosts");
    std::fs::write(&hostfile, "localhost slots=3 # three\n").unwrap();
    let o = s.run(&[
        "--hostfile",
        hostfile.to_str().unwrap(),
        "--nooversubscribe",
        "sh",
        "-c",
        "echo $OMPI_COMM_WORLD_SIZE",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "3\n3\n3\n");
    let o = s.run(&[
        "--host",
        "localhost,localhost",
        "--nooversubscribe",
        "-n",
        "2",
        "true",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = s.run(&[
        "--host",
        "localhost",
        "--nooversubscribe",
        "-n",
        "2",
        "true",
    ]);
    assert_ne!(o.status.code(), Some(0));
}

#[test]
fn help_and_version() {
    let s = Scratch::new("help");
    let o = s.run(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("--map-by"));
    let o = s.run(&["--version"]);
    assert!(stdout(&o).starts_with("mpirun (oxmpi) "));
}

/// Raw PMI-1 over the inherited fd: abort ends the job with the requested code.
#[test]
fn pmi_abort_ends_the_job_with_its_code() {
    let s = Scratch::new("pmiabort");
    let script = "exec 3<&$PMI_FD; \
        if [ $PMI_RANK = 1 ]; then \
          printf 'cmd=init pmi_version=1 pmi_subversion=1\\n' >&$PMI_FD; read -r reply <&3; \
          printf 'cmd=abort exitcode=5\\n' >&$PMI_FD; fi; sleep 600";
    let o = s.run(&["-n", "2", "sh", "-c", script]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(stderr(&o).contains("rank 1 (pid "), "{}", stderr(&o));
}

/// A rank that initialized PMI and exits without finalize aborts the job.
#[test]
fn exit_without_finalize_is_an_error() {
    let s = Scratch::new("nofin");
    let script = "exec 3<&$PMI_FD; \
        printf 'cmd=init pmi_version=1 pmi_subversion=1\\n' >&$PMI_FD; read -r reply <&3; \
        if [ $PMI_RANK = 0 ]; then exit 0; fi; sleep 600";
    let o = s.run(&["-n", "2", "sh", "-c", script]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("without calling finalize"),
        "{}",
        stderr(&o)
    );
    // Finalize makes it fine.
    let script = "exec 3<&$PMI_FD; \
        printf 'cmd=init pmi_version=1 pmi_subversion=1\\n' >&$PMI_FD; read -r reply <&3; \
        printf 'cmd=finalize\\n' >&$PMI_FD; read -r reply <&3; echo $reply";
    let o = s.run(&["-n", "2", "sh", "-c", script]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(
        out.lines().all(|l| l.starts_with("cmd=finalize_ack")),
        "{out}"
    );
}

fn mpich_programs(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c");
    let out = dir.join("bin");
    std::fs::create_dir_all(&out).unwrap();
    for p in ["hello", "ring", "allreduce", "abort"] {
        let st = Command::new("mpicc.mpich")
            .arg("-o")
            .arg(out.join(p))
            .arg(src.join(format!("{p}.c")))
            .status()
            .unwrap_or_else(|e| {
                panic!(
                    "mpicc.mpich could not be run ({e}); install MPICH: apt-get install mpich libmpich-dev"
                )
            });
        assert!(st.success(), "mpicc.mpich failed for {p}.c");
    }
    out
}

/// Programs built with Debian's MPICH run under our mpirun (PMI-1 over PMI_FD).
#[test]
fn mpich_programs_run_under_mpirun() {
    let s = Scratch::new("mpich");
    let bin = mpich_programs(&s.dir);
    let run = |p: &str| {
        let o = s.run(&["-n", "4", bin.join(p).to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{p}: {}", stderr(&o));
        stdout(&o)
    };
    assert_eq!(
        sorted_lines(&run("hello")),
        (0..4)
            .map(|r| format!("hello from rank {r} of 4"))
            .collect::<Vec<_>>()
    );
    assert_eq!(run("ring"), "ring total 18\n");
    assert_eq!(
        sorted_lines(&run("allreduce")),
        (0..4)
            .map(|r| format!("rank {r} sum 10"))
            .collect::<Vec<_>>()
    );
    let o = s.run(&["-n", "4", bin.join("abort").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("called abort with exit code 7"),
        "{}",
        stderr(&o)
    );
}

/// `--tune` files feed the parameter registry: their values and `-x` exports reach the
/// ranks, the command line wins over them, and a malformed file is a one-line error.
#[test]
fn tune_files_and_mca_reach_the_ranks() {
    let s = Scratch::new("tune");
    let tune = s.dir.join("tune.conf");
    std::fs::write(
        &tune,
        "--mca coll_tuned_x 1 --mca btl_sm_y 7\n-x TUNED_VAR=t # c\n",
    )
    .unwrap();
    let o = s.run(&[
        "--tune",
        tune.to_str().unwrap(),
        "--mca",
        "coll_tuned_x",
        "2",
        "-n",
        "1",
        "sh",
        "-c",
        "echo $OXMPI_MCA_coll_tuned_x $OXMPI_MCA_btl_sm_y $TUNED_VAR $OXMPI_MCA_SOURCE_coll_tuned_x",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "2 7 t command\n");
    std::fs::write(&tune, "--mca\n").unwrap();
    let o = s.run(&["--tune", tune.to_str().unwrap(), "true"]);
    assert_ne!(o.status.code(), Some(0));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("tune.conf"), "{}", stderr(&o));
}

/// `--mca <framework>_base_verbose` turns on mpirun's own verbose streams.
#[test]
fn verbose_streams_follow_mca_parameters() {
    let s = Scratch::new("verbose");
    let o = s.run(&["--mca", "odls_base_verbose", "10", "-n", "2", "true"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    for r in 0..2 {
        assert!(
            err.contains(&format!("odls: launched rank {r} pid ")),
            "{err}"
        );
    }
    assert!(!err.contains("rmaps:"), "{err}");
    let o = s.run(&["-n", "1", "true"]);
    assert!(o.stderr.is_empty(), "{}", stderr(&o));
}

/// Inside a Slurm allocation (simulated through its environment) the job's slots come from
/// Slurm; nodes other than this one cannot be reached by the local launch agent.
#[test]
fn slurm_allocation_sets_the_slots() {
    let s = Scratch::new("slurm");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let host = host.trim();
    let o = s
        .mpirun()
        .env("SLURM_JOB_ID", "42")
        .env("SLURM_JOB_NODELIST", host)
        .env("SLURM_TASKS_PER_NODE", "3")
        .args([
            "--nooversubscribe",
            "sh",
            "-c",
            "echo $OMPI_COMM_WORLD_SIZE",
        ])
        .output()
        .unwrap();
    s.assert_clean();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "3\n3\n3\n");
    let o = s
        .mpirun()
        .env("SLURM_JOB_ID", "42")
        .env("SLURM_JOB_NODELIST", format!("{host},oxnode[1-2]"))
        .env("SLURM_TASKS_PER_NODE", "1(x3)")
        .args(["-n", "3", "true"])
        .output()
        .unwrap();
    s.assert_clean();
    // Remote nodes of the allocation are reached with `srun` (not found → a one-line error
    // before launching; found but no real Slurm job → that node's daemon never connects).
    assert_ne!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains("host 'oxnode1'") || stderr(&o).contains("on host oxnode"),
        "{}",
        stderr(&o)
    );
}

/// A job needs about three descriptors per rank: mpirun raises its own soft limit and
/// gives the ranks the original one back.
#[test]
fn many_ranks_under_a_low_descriptor_limit() {
    let s = Scratch::new("nofile");
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -Sn 64 && exec '{}' -n 40 sh -c 'ulimit -Sn'",
            env!("CARGO_BIN_EXE_mpirun")
        ))
        .env("TMPDIR", s.dir.join("tmp"))
        .env("OXMPI_TEST_MARK", &s.mark)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    s.assert_clean();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "64\n".repeat(40));
}

/// MPICH users' habits: `-f`, `-ppn`, `-genv`, `-l`.
#[test]
fn hydra_spellings_work() {
    let s = Scratch::new("hydra");
    let hostfile = s.dir.join("hosts");
    std::fs::write(&hostfile, "localhost slots=4\n").unwrap();
    let o = s.run(&[
        "-f",
        hostfile.to_str().unwrap(),
        "-ppn",
        "3",
        "-genv",
        "GREETING",
        "hi",
        "-l",
        "sh",
        "-c",
        "echo $GREETING $OMPI_COMM_WORLD_SIZE",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        sorted_lines(&stdout(&o)),
        ["[0] hi 3", "[1] hi 3", "[2] hi 3"]
    );
}

/// `mpirun ... | head`: when the reader of mpirun's stdout goes away, the job ends (exit
/// status 128+SIGPIPE) instead of running forever.
#[test]
fn closed_stdout_ends_the_job() {
    let s = Scratch::new("epipe");
    let mut child = s
        .mpirun()
        .args(["-n", "2", "yes"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "y");
    drop(lines);
    let o = child.wait_with_output().unwrap();
    s.assert_clean();
    assert_eq!(o.status.code(), Some(128 + 13), "{}", stderr(&o));
}

/// `--restart N`: a job whose rank 1 fails on the first run (after rank 0 wrote a
/// checkpoint into the job directory) is relaunched once with `OXMPI_RESTART_COUNT=1` and
/// the same `OXMPI_JOB_DIR`, resumes from the checkpoint and succeeds; one line reports the
/// failure and one the restart.
#[test]
fn restart_relaunches_a_failed_job_in_the_same_job_directory() {
    let s = Scratch::new("restart");
    let script = r#"
        ck="$OXMPI_JOB_DIR/checkpoint"
        if [ "$OXMPI_RESTART_COUNT" = 0 ]; then
            if [ "$PMI_RANK" = 0 ]; then echo 5 > "$ck"; exit 0; fi
            while [ ! -s "$ck" ]; do sleep 0.01; done
            exit 3
        fi
        echo "rank $PMI_RANK run $OXMPI_RESTART_COUNT resumed from step $(cat "$ck")"
    "#;
    let o = s.run(&["--restart", "2", "-n", "2", "sh", "-c", script]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(
        sorted_lines(&stdout(&o)),
        [
            "rank 0 run 1 resumed from step 5",
            "rank 1 run 1 resumed from step 5"
        ]
    );
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].contains("rank 1 (pid ") && lines[0].contains("exited with status 3"),
        "{err}"
    );
    assert!(
        lines[1].contains("restarting it (1 of 2) with OXMPI_RESTART_COUNT=1"),
        "{err}"
    );
}

/// A job that keeps failing is restarted N times, then mpirun exits with its status;
/// without `--restart` the ranks get no `OXMPI_RESTART_COUNT`.
#[test]
fn restart_gives_up_after_n_attempts() {
    let s = Scratch::new("restart-fail");
    let o = s.run(&[
        "--restart",
        "1",
        "-n",
        "1",
        "sh",
        "-c",
        "echo run $OXMPI_RESTART_COUNT; exit 4",
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert_eq!(sorted_lines(&stdout(&o)), ["run 0", "run 1"]);
    assert_eq!(err.matches("restarting it").count(), 1, "{err}");
    let o = s.run(&[
        "-n",
        "1",
        "sh",
        "-c",
        "echo run ${OXMPI_RESTART_COUNT:-unset}",
    ]);
    assert_eq!(stdout(&o).trim(), "run unset");
}
