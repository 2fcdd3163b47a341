//! Runs the `ring`, `pingpong` and `sessions` examples under the installed `mpirun`.
//!
//! Needs `OXMPI_TEST_PREFIX` (set by `cargo xtask test`) pointing at an installed prefix, and the
//! example binaries, which `cargo test` builds next to this test (`target/<profile>/examples`).

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Safety net only: a hung job is killed after this long so the test fails instead of hanging.
const HANG_LIMIT: Duration = Duration::from_secs(300);

fn mpirun() -> PathBuf {
    let prefix = std::env::var_os("OXMPI_TEST_PREFIX").unwrap_or_else(|| {
        panic!(
            "OXMPI_TEST_PREFIX is not set: these tests need an installed oxmpi prefix \
             (run `cargo xtask test`, or `cargo xtask install --prefix DIR` and set \
             OXMPI_TEST_PREFIX=DIR)"
        )
    });
    let p = PathBuf::from(prefix).join("bin").join("mpirun");
    assert!(p.exists(), "no mpirun at {}", p.display());
    p
}

fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/<this test> -> target/<profile>/examples/<name>
    let dir = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("test binary in target/<profile>/deps")
        .join("examples");
    let p = dir.join(name);
    assert!(
        p.exists(),
        "example {name} not built at {} (run `cargo build -p oxmpi --examples`, or plain \
         `cargo test -p oxmpi`, which builds the examples)",
        p.display()
    );
    p
}

struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

fn read_all(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        s
    })
}

fn wait_bounded(mut child: Child, what: &str) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            return st;
        }
        if start.elapsed() > HANG_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {HANG_LIMIT:?}; killed");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One job at a time: the machine may have fewer cores than the ranks of parallel tests.
static ONE_JOB: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn run(np: u32, name: &str, args: &[&str]) -> Run {
    let _one = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
    let mut cmd = Command::new(mpirun());
    cmd.arg("-n")
        .arg(np.to_string())
        .arg(example(name))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let what = format!("{cmd:?}");
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {what}: {e}"));
    let out = read_all(child.stdout.take().expect("stdout"));
    let err = read_all(child.stderr.take().expect("stderr"));
    let status = wait_bounded(child, &what);
    Run {
        status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

fn check_ok(r: &Run, what: &str) {
    assert!(
        r.status.success(),
        "{what} failed: {}\n--- stdout\n{}--- stderr\n{}",
        r.status,
        r.stdout,
        r.stderr
    );
}

#[test]
fn ring_on_four_ranks() {
    let r = run(4, "ring", &[]);
    check_ok(&r, "mpirun -n 4 ring");
    assert!(
        r.stdout
            .contains("ring complete: token came back from rank 3 after 3 hops, sum 6"),
        "{}",
        r.stdout
    );
    for rank in 1..4 {
        assert!(
            r.stdout.contains(&format!(
                "rank {rank} of 4: got the token from rank {}",
                rank - 1
            )),
            "{}",
            r.stdout
        );
    }
    for rank in 0..4 {
        assert!(
            r.stdout
                .contains(&format!("rank {rank}: neighbour exchange ok")),
            "{}",
            r.stdout
        );
    }
}

#[test]
fn ring_on_one_rank() {
    let r = run(1, "ring", &[]);
    check_ok(&r, "mpirun -n 1 ring");
    assert!(r.stdout.contains("sum 0 (expected 0)"), "{}", r.stdout);
}

#[test]
fn pingpong_on_two_ranks() {
    // Up to 256 KiB: crosses the eager/rendezvous boundary; every round trip is checked.
    let r = run(2, "pingpong", &["262144", "5"]);
    check_ok(&r, "mpirun -n 2 pingpong");
    assert!(r.stdout.contains("pingpong ok"), "{}", r.stdout);
    let sizes: Vec<usize> = r
        .stdout
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    let expected: Vec<usize> = std::iter::once(0)
        .chain((0..=18).map(|k| 1usize << k))
        .collect();
    assert_eq!(sizes, expected, "{}", r.stdout);
}

#[test]
fn sessions_on_three_ranks() {
    // Sessions only (the library goes down at exit), then next to the World Model.
    for args in [&[][..], &["world"][..]] {
        let r = run(3, "sessions", args);
        check_ok(&r, &format!("mpirun -n 3 sessions {args:?}"));
        for rank in 0..3 {
            assert!(
                r.stdout.contains(&format!("rank {rank}: sessions ok")),
                "{}",
                r.stdout
            );
        }
    }
}

#[test]
fn pingpong_alone_fails_cleanly() {
    let r = run(1, "pingpong", &[]);
    assert!(!r.status.success(), "pingpong on one rank must fail");
    assert!(
        r.stderr.contains("pingpong needs at least 2 ranks"),
        "stderr: {}",
        r.stderr
    );
}

#[test]
fn oxbench_reports_every_test() {
    let tests = [
        "lat",
        "bw",
        "bibw",
        "allreduce",
        "bcast",
        "alltoall",
        "barrier",
    ];
    let r = run(
        2,
        "oxbench",
        &[&tests.join(","), "2", "0.01", "0", "8", "65536"],
    );
    check_ok(&r, "mpirun -n 2 oxbench");
    let results: Vec<(String, usize, usize)> = r
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("RESULT "))
        .map(|l| {
            let field = |k: &str| {
                l.split_whitespace()
                    .find_map(|f| f.strip_prefix(&format!("{k}=")))
                    .unwrap_or_else(|| panic!("no {k} in {l}"))
                    .to_string()
            };
            let values = field("values");
            assert_eq!(values.split(';').count(), 2, "two samples: {l}");
            assert!(
                values
                    .split(';')
                    .all(|v| v.parse::<f64>().is_ok_and(|x| x >= 0.0)),
                "{l}"
            );
            (
                field("test"),
                field("size").parse().expect("size"),
                field("np").parse().expect("np"),
            )
        })
        .collect();
    let expect: Vec<(String, usize, usize)> = [
        ("lat", vec![0, 8, 65536]),
        ("bw", vec![8, 65536]),
        ("bibw", vec![8, 65536]),
        ("allreduce", vec![8, 65536]),
        ("bcast", vec![8, 65536]),
        ("alltoall", vec![8, 65536]),
        ("barrier", vec![0]),
    ]
    .into_iter()
    .flat_map(|(t, sizes)| sizes.into_iter().map(move |s| (t.to_string(), s, 2)))
    .collect();
    assert_eq!(results, expect, "{}", r.stdout);
    for rank in 0..2 {
        assert!(
            r.stdout.contains(&format!("BIND rank={rank} cpus=")),
            "{}",
            r.stdout
        );
        assert!(
            r.stdout
                .contains(&format!("RSS prog=oxbench-rs rank={rank} kb=")),
            "{}",
            r.stdout
        );
    }
}
