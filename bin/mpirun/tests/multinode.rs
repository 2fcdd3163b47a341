//! Jobs over several nodes, simulated on one machine: `--host a:2,b:2` with
//! `--mca plm_rsh_agent <script>` where the script ignores the host and runs the daemon
//! command here, so each "node" is one `oxmpid` (or `mpirun --oxmpid`) process connected to
//! the head over the authenticated control channel. Checks MPI jobs (PMI fences across
//! daemons), IO forwarding, failures on a remote node, rejection of wrong secrets and
//! garbage peers, and that nothing is left behind (processes through /proc, job directories
//! through a private TMPDIR).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

mod common;
use common::{sorted_lines, stderr, stdout, Scratch};

/// The fake agent: drop the host argument, run the rest here.
const LOCAL_AGENT: &str = "#!/bin/sh\nshift\nexec \"$@\"\n";

impl Scratch {
    fn new(name: &str) -> Self {
        Scratch::with_tag("oxmpimn", name)
    }

    /// Write an executable agent script; returns its path.
    fn script(&self, name: &str, body: &str) -> PathBuf {
        let p = self.dir.join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    fn mpirun_at(&self, exe: &Path) -> Command {
        let mut c = Command::new(exe);
        c.env("TMPDIR", self.dir.join("tmp"))
            .env("OXMPI_TEST_MARK", &self.mark)
            .stdin(Stdio::null());
        c
    }

    /// Run `mpirun` (this build) with `agent` as launch agent; checks nothing is left.
    fn run_with(&self, exe: &Path, agent: &Path, args: &[&str]) -> Output {
        let out = self
            .mpirun_at(exe)
            .arg("--mca")
            .arg("plm_rsh_agent")
            .arg(agent)
            .args(args)
            .output()
            .unwrap();
        self.assert_clean();
        out
    }

    fn run(&self, args: &[&str]) -> Output {
        let agent = self.script("agent.sh", LOCAL_AGENT);
        self.run_with(Path::new(env!("CARGO_BIN_EXE_mpirun")), &agent, args)
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

fn build(compiler: &Path, dir: &Path, progs: &[&str]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c");
    let out = dir.join("bin");
    std::fs::create_dir_all(&out).unwrap();
    for p in progs {
        let st = Command::new(compiler)
            .arg("-o")
            .arg(out.join(p))
            .arg(src.join(format!("{p}.c")))
            .status()
            .unwrap_or_else(|e| panic!("{} could not be run: {e}", compiler.display()));
        assert!(st.success(), "{} failed for {p}.c", compiler.display());
    }
    out
}

fn hello_lines(n: usize) -> Vec<String> {
    (0..n)
        .map(|r| format!("hello from rank {r} of {n}"))
        .collect()
}

/// Check hello, ring and allreduce over two daemon-only nodes and over the head's node plus
/// one remote node.
fn check_mpi_programs(run: &dyn Fn(&[&str]) -> Output, bin: &Path, with_allreduce: bool) {
    let local = format!("{}:2,b:2", hostname());
    for hosts in ["a:2,b:2", local.as_str()] {
        let hello = bin.join("hello");
        let o = run(&["--host", hosts, "-n", "4", hello.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{hosts}: {}", stderr(&o));
        assert_eq!(sorted_lines(&stdout(&o)), hello_lines(4), "{hosts}");
        let ring = bin.join("ring");
        let o = run(&["--host", hosts, "-n", "4", ring.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{hosts}: {}", stderr(&o));
        assert_eq!(stdout(&o), "ring total 18\n", "{hosts}");
        if with_allreduce {
            let ar = bin.join("allreduce");
            let o = run(&["--host", hosts, "-n", "4", ar.to_str().unwrap()]);
            assert_eq!(o.status.code(), Some(0), "{hosts}: {}", stderr(&o));
            let want: Vec<String> = (0..4).map(|r| format!("rank {r} sum 10")).collect();
            assert_eq!(sorted_lines(&stdout(&o)), want, "{hosts}");
        }
    }
}

/// Debian's MPICH (PMI-1 over PMI_FD; its nemesis transports between the "nodes") across
/// two daemons: the fences of MPI_Init go through the head.
#[test]
fn mpich_programs_across_two_nodes() {
    let s = Scratch::new("mpich");
    let bin = build(
        Path::new("mpicc.mpich"),
        &s.dir,
        &["hello", "ring", "allreduce", "abort"],
    );
    check_mpi_programs(&|a| s.run(a), &bin, true);
    // MPI_Abort on a remote node (rank 1 is on node a) ends the job with its code.
    let abort = bin.join("abort");
    let o = s.run(&["--host", "a:2,b:2", "-n", "4", abort.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("rank 1 on host a called abort with exit code 7"),
        "{}",
        stderr(&o)
    );
}

/// Our own MPI library (built with our mpicc from the installed prefix) across two daemons.
/// The fake nodes share this host, so the engine's shared-memory transport connects them.
#[test]
fn oxmpi_programs_across_two_nodes() {
    let prefix = std::env::var_os("OXMPI_TEST_PREFIX")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!(
                "OXMPI_TEST_PREFIX is not set: this test needs an installed oxmpi prefix \
             (run `cargo xtask test`, or `cargo xtask install --debug --prefix DIR` and set \
             OXMPI_TEST_PREFIX=DIR)"
            )
        });
    let s = Scratch::new("oxmpi");
    let bin = build(&prefix.join("bin/mpicc"), &s.dir, &["hello", "ring"]);
    let agent = s.script("agent.sh", LOCAL_AGENT);
    let mpirun = prefix.join("bin/mpirun");
    check_mpi_programs(&|a| s.run_with(&mpirun, &agent, a), &bin, false);
}

/// Our own MPI library across two nodes that do not share memory: the agent gives each fake
/// node its own name for the engine (`OXMPI_ENGINE_NODE`), so ranks on different "nodes"
/// cannot use the shared-memory transport and must reach each other with the `tcp` btl
/// (over loopback, `btl_tcp_if_include lo`), while ranks of one node still use `sm`.
#[test]
fn oxmpi_programs_across_two_nodes_over_tcp() {
    let prefix = std::env::var_os("OXMPI_TEST_PREFIX")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!(
                "OXMPI_TEST_PREFIX is not set: this test needs an installed oxmpi prefix \
             (run `cargo xtask test`, or `cargo xtask install --debug --prefix DIR` and set \
             OXMPI_TEST_PREFIX=DIR)"
            )
        });
    let s = Scratch::new("oxmpitcp");
    let bin = build(
        &prefix.join("bin/mpicc"),
        &s.dir,
        &["hello", "ring", "allreduce"],
    );
    let agent = s.script(
        "node-agent.sh",
        "#!/bin/sh\nnode=$1\nshift\nOXMPI_ENGINE_NODE=$node exec \"$@\"\n",
    );
    let mpirun = prefix.join("bin/mpirun");
    let run = |a: &[&str]| {
        let mut args = vec![
            "--mca",
            "btl_tcp_if_include",
            "lo",
            "--mca",
            "btl_base_verbose",
            "20",
        ];
        args.extend_from_slice(a);
        s.run_with(&mpirun, &agent, &args)
    };
    check_mpi_programs(&run, &bin, true);
    // The engine says which transport reaches each peer: tcp across the two nodes.
    let ring = bin.join("ring");
    let o = run(&["--host", "a:2,b:2", "-n", "4", ring.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("reached by tcp"), "{err}");
    assert!(err.contains("reached by sm"), "{err}");
}

/// Every line of every rank arrives exactly once and whole, with the tag of its rank.
#[test]
fn output_is_forwarded_exactly_once() {
    let s = Scratch::new("iof");
    let script = "i=0; while [ $i -lt 3000 ]; do echo \"line $OMPI_COMM_WORLD_RANK $i\"; \
                  echo \"err $OMPI_COMM_WORLD_RANK $i\" >&2; i=$((i+1)); done";
    let o = s.run(&[
        "--host",
        "a:2,b:2",
        "-n",
        "4",
        "--tag-output",
        "sh",
        "-c",
        script,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut want = Vec::new();
    for r in 0..4 {
        for i in 0..3000 {
            want.push(format!("[1,{r}]<stdout>:line {r} {i}"));
        }
    }
    want.sort();
    assert_eq!(sorted_lines(&stdout(&o)), want);
    let errs: Vec<String> = stderr(&o)
        .lines()
        .filter(|l| l.contains("<stderr>:"))
        .map(str::to_string)
        .collect();
    assert_eq!(errs.len(), 4 * 3000);
    // Per-rank order is kept.
    for r in 0..4 {
        let seq: Vec<&String> = errs
            .iter()
            .filter(|l| l.starts_with(&format!("[1,{r}]")))
            .collect();
        for (i, l) in seq.iter().enumerate() {
            assert_eq!(**l, format!("[1,{r}]<stderr>:err {r} {i}"));
        }
    }
}

/// A rank killed on a remote node ends the job with 128+9 and names rank, pid and host;
/// a non-zero exit gives that status.
#[test]
fn remote_rank_failure_ends_the_job() {
    let s = Scratch::new("fail");
    let o = s.run(&[
        "--host",
        "a:2,b:2",
        "-n",
        "4",
        "sh",
        "-c",
        "if [ $OMPI_COMM_WORLD_RANK = 3 ]; then kill -9 $$; fi; sleep 60",
    ]);
    assert_eq!(o.status.code(), Some(137), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("rank 3 (pid "), "{err}");
    assert!(
        err.contains("on host b exited on signal 9 (Killed)"),
        "{err}"
    );
    let o = s.run(&[
        "--host",
        "a:2,b:2",
        "-n",
        "4",
        "sh",
        "-c",
        "if [ $OMPI_COMM_WORLD_RANK = 2 ]; then exit 5; fi; sleep 60",
    ]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("on host b exited with status 5"),
        "{}",
        stderr(&o)
    );
}

/// A daemon that presents the wrong secret is rejected by the head (logged), never gets a
/// launch, and the job fails cleanly.
#[test]
fn wrong_secret_is_rejected() {
    let s = Scratch::new("secret");
    let bad = "ab".repeat(32);
    let agent = s.script(
        "bad-agent.sh",
        &format!("#!/bin/sh\nshift\nread secret\necho {bad} | exec \"$@\"\n"),
    );
    let o = s.run_with(
        Path::new(env!("CARGO_BIN_EXE_mpirun")),
        &agent,
        &["--host", "a:1,b:1", "-n", "2", "sh", "-c", "echo ran"],
    );
    assert_ne!(o.status.code(), Some(0));
    assert_eq!(stdout(&o), "", "a rank ran: {}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("dropped a control connection"), "{err}");
    assert!(err.contains("authentication failed"), "{err}");
    assert!(err.contains("never connected back"), "{err}");
}

/// Garbage sent to the head's control port is dropped and logged; the job still runs.
#[test]
fn garbage_peer_is_dropped() {
    let s = Scratch::new("garbage");
    // The agent first sends junk to the head's first address (`--head HOST:PORT` or
    // `--head ADDR/PREFIX+ADDR/PREFIX...:PORT` argument).
    let agent = s.script(
        "junk-agent.sh",
        "#!/bin/bash\nshift\nprev=\nfor a in \"$@\"; do [ \"$prev\" = --head ] && head=$a; \
         prev=$a; done\nh=${head%:*}; h=${h%%+*}; h=${h%%/*}\n\
         exec 3<>/dev/tcp/$h/${head##*:} && printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3 \
         && sleep 0.2; exec 3>&-\nexec \"$@\"\n",
    );
    let o = s.run_with(
        Path::new(env!("CARGO_BIN_EXE_mpirun")),
        &agent,
        &["--host", "a:1,b:1", "-n", "2", "sh", "-c", "echo ran"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "ran\nran\n");
    assert!(
        stderr(&o).contains("dropped a control connection"),
        "{}",
        stderr(&o)
    );
}

/// Start `mpirun` over two fake nodes with ranks that print `up` then sleep; returns the
/// child once every rank is up.
fn start_sleepers(
    s: &Scratch,
) -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStdout>,
) {
    use std::io::BufRead;
    let agent = s.script("agent.sh", LOCAL_AGENT);
    let mut child = s
        .mpirun_at(Path::new(env!("CARGO_BIN_EXE_mpirun")))
        .arg("--mca")
        .arg("plm_rsh_agent")
        .arg(&agent)
        .args([
            "--host",
            "a:2,b:2",
            "-n",
            "4",
            "sh",
            "-c",
            "echo up; exec sleep 60",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    for _ in 0..4 {
        line.clear();
        out.read_line(&mut line).unwrap();
        assert_eq!(line, "up\n");
    }
    (child, out)
}

/// SIGINT to mpirun is forwarded to the remote ranks; the job ends with 128+2 and nothing
/// is left on any node.
#[test]
fn sigint_tears_down_remote_ranks() {
    let s = Scratch::new("sigint");
    let (mut child, _out) = start_sleepers(&s);
    let st = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    s.assert_clean();
}

/// If the head dies without a word (SIGKILL), each daemon notices the closed control
/// connection, kills its ranks and removes its job directory.
#[test]
fn daemons_clean_up_when_the_head_dies() {
    let s = Scratch::new("headdeath");
    let (mut child, _out) = start_sleepers(&s);
    child.kill().unwrap();
    child.wait().unwrap();
    // The daemons react to end of stream on their connection; wait for them (bounded).
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !s.leftovers().is_empty() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(s.leftovers().is_empty(), "left behind: {:?}", s.leftovers());
    // Only the head's own job directory may remain (it was killed); the daemons' are gone.
    let dirs: Vec<_> = std::fs::read_dir(s.dir.join("tmp"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let head = format!("-{}-", child.id());
    assert!(
        dirs.iter().all(|d| d.contains(&head)),
        "daemon job directories left: {dirs:?}"
    );
}

/// mpirun's stdin reaches ranks on remote nodes (rank 0 by default, every rank with
/// `--stdin all`), completely and with end of file.
#[test]
fn stdin_reaches_remote_ranks() {
    let s = Scratch::new("stdin");
    let input = s.dir.join("input.txt");
    let text: String = (0..50_000).map(|i| format!("{i}\n")).collect();
    std::fs::write(&input, &text).unwrap();
    let agent = s.script("agent.sh", LOCAL_AGENT);
    let run = |extra: &[&str]| {
        let o = s
            .mpirun_at(Path::new(env!("CARGO_BIN_EXE_mpirun")))
            .arg("--mca")
            .arg("plm_rsh_agent")
            .arg(&agent)
            .args(["--host", "a:1,b:1", "-n", "2"])
            .args(extra)
            .args(["sh", "-c", "echo \"$OMPI_COMM_WORLD_RANK $(cksum)\""])
            .stdin(std::fs::File::open(&input).unwrap())
            .output()
            .unwrap();
        s.assert_clean();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        sorted_lines(&stdout(&o))
    };
    let sum = Command::new("cksum")
        .stdin(std::fs::File::open(&input).unwrap())
        .output()
        .unwrap();
    let sum = String::from_utf8_lossy(&sum.stdout).trim().to_string();
    let empty = Command::new("cksum").stdin(Stdio::null()).output().unwrap();
    let empty = String::from_utf8_lossy(&empty.stdout).trim().to_string();
    assert_eq!(run(&[]), [format!("0 {sum}"), format!("1 {empty}")]);
    assert_eq!(
        run(&["--stdin", "all"]),
        [format!("0 {sum}"), format!("1 {sum}")]
    );
}

/// A daemon that never connects back (e.g. an agent waiting for a password) is given up
/// after `plm_daemon_timeout` seconds; its agent is killed and the job fails cleanly.
#[test]
fn daemon_that_never_connects_is_given_up() {
    let s = Scratch::new("noconnect");
    let agent = s.script("hang-agent.sh", "#!/bin/sh\nexec sleep 120\n");
    let o = s.run_with(
        Path::new(env!("CARGO_BIN_EXE_mpirun")),
        &agent,
        &[
            "--mca",
            "plm_daemon_timeout",
            "0.5",
            "--host",
            "a:1",
            "-n",
            "1",
            "true",
        ],
    );
    assert_ne!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains("on host a was not started or never connected back"),
        "{}",
        stderr(&o)
    );
    let o = s.run(&[
        "--mca",
        "plm_daemon_timeout",
        "soon",
        "--host",
        "a:1",
        "true",
    ]);
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("plm_daemon_timeout"), "{}", stderr(&o));
}

/// Strangers on the head's control port delay nobody: before its daemon, the first node's
/// agent opens 500 connections that stay idle, one that sends a valid-looking start and
/// holds, and one that sends a byte every 100 ms; the ranks still start within 1 s (plus
/// the start-up time of a run without strangers) of the strangers being connected, and the
/// strangers are dropped once `plm_handshake_timeout` is over.
#[test]
fn hostile_control_connections_delay_nobody() {
    let s = Scratch::new("hostile");
    let args = ["--host", "a:1,b:1", "-n", "2", "sh", "-c", "echo ran"];
    let plain = s.script("agent.sh", LOCAL_AGENT);
    let t0 = std::time::Instant::now();
    let o = s.run_with(Path::new(env!("CARGO_BIN_EXE_mpirun")), &plain, &args);
    let normal = t0.elapsed();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let pids = s.dir.join("strangers.pid");
    let strangers = s.dir.join("strangers.py");
    // 500 idle connections, one stuck mid-header, and a drip that announces a 64-byte frame
    // and sends its body a byte per 0.1 s: all stay in their handshake until
    // plm_handshake_timeout (a drip of header bytes alone would be dropped as an oversized
    // frame after 4 bytes, and its end would race the timeout).
    std::fs::write(
        &strangers,
        "import socket, sys, time\n\
         host, port = sys.argv[1], int(sys.argv[2])\n\
         idle = [socket.create_connection((host, port)) for _ in range(500)]\n\
         holder = socket.create_connection((host, port)); holder.sendall(b'\\x00\\x00')\n\
         drip = socket.create_connection((host, port)); drip.sendall(b'\\x00\\x00\\x00\\x40')\n\
         open(sys.argv[3], 'w').write(repr(time.time()))\n\
         end = time.time() + 10\n\
         while time.time() < end:\n\
         \x20   try: drip.send(b'\\x01')\n\
         \x20   except OSError: break\n\
         \x20   time.sleep(0.1)\n",
    )
    .unwrap();
    // Node 0's agent starts the strangers (without the test mark, so that they are not
    // mistaken for the job's processes) and waits until they are connected.
    let agent = s.script(
        "hostile-agent.sh",
        &format!(
            "#!/bin/bash\nshift\nprev=\nfor a in \"$@\"; do [ \"$prev\" = --head ] && head=$a; \
             [ \"$prev\" = --node ] && node=$a; prev=$a; done\n\
             if [ \"$node\" = 0 ]; then h=${{head%:*}}; h=${{h%%+*}}; h=${{h%%/*}}\n\
             env -u OXMPI_TEST_MARK python3 {py} \"$h\" \"${{head##*:}}\" {ready} & echo $! > {pids}\n\
             for i in $(seq 1 100); do [ -e {ready} ] && break; sleep 0.05; done; fi\n\
             exec \"$@\"\n",
            py = strangers.display(),
            ready = s.dir.join("ready").display(),
            pids = pids.display(),
        ),
    );
    let o = s.run_with(
        Path::new(env!("CARGO_BIN_EXE_mpirun")),
        &agent,
        &[
            "--mca",
            "plm_handshake_timeout",
            "0.5",
            "--host",
            "a:1,b:1",
            "-n",
            "2",
            "sh",
            "-c",
            "date +%s.%N; sleep 2",
        ],
    );
    if let Ok(pid) = std::fs::read_to_string(&pids) {
        let _ = Command::new("kill").arg(pid.trim()).status();
    }
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let ready: f64 = std::fs::read_to_string(s.dir.join("ready"))
        .unwrap_or_else(|_| panic!("the strangers did not connect: {err}"))
        .trim()
        .parse()
        .unwrap();
    let started: Vec<f64> = stdout(&o)
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(started.len(), 2, "{}", stdout(&o));
    let late = started.iter().fold(0f64, |a, &b| a.max(b)) - ready;
    assert!(
        late < normal.as_secs_f64() + 1.0,
        "ranks started {late:.3} s after the strangers connected (a run without: {normal:?})"
    );
    assert!(
        err.contains("no authentication within plm_handshake_timeout"),
        "{err}"
    );
}
