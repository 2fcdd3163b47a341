//! Applications built by Debian against MPICH, timed under MPICH and under oxmpi.
//!
//! The programs are the MPICH-built ones that oxmpi's tests run on oxmpi's libraries
//! (`crates/fortran/tests/fortran_programs.rs`): ScaLAPACK's testers from
//! `scalapack-mpi-test` (LU, Cholesky, QR; Fortran over BLACS over MPI) and a parallel
//! HDF5 Fortran program built with Debian's `h5pfc.mpich` (HDF5's MPICH-built Fortran
//! library, collective MPI-IO). Each runs at np = 2, pinned, never oversubscribed, under
//! MPICH's own launcher and library, and under oxmpi's `mpirun` with oxmpi's
//! `libmpi.so.12`/`libmpichfort.so.12` first in `LD_LIBRARY_PATH`: the same binary, only
//! the MPI underneath changes. Within a repetition the two run back to back per program,
//! in alternating order; a row is the wall time of one whole launch.

use crate::config::{Config, Mode};
use crate::runner;
use crate::suite::{cores, Prepared, Runner};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Debian's MPICH-built ScaLAPACK testers with their input files.
pub const SCALAPACK_TESTS: &str = "/usr/lib/x86_64-linux-gnu/scalapack/mpich-tests";

/// The ScaLAPACK testers timed (binary, input file).
pub const TESTERS: [(&str, &str); 3] =
    [("xdlu", "LU.dat"), ("xdllt", "LLT.dat"), ("xdqr", "QR.dat")];

/// The ranks every application runs on.
pub const NP: u32 = 2;

/// The parallel HDF5 program (relative to the workspace).
const HDF5_SOURCE: &str = "crates/fortran/tests/hdf5/ph5_rows.f90";

/// Implementations that run the applications (their binaries are MPICH's).
pub const IMPLS: [&str; 2] = ["mpich", "oxmpi"];

/// One application run: the program, its arguments and working directory, and a line
/// its output must contain for the run to count.
#[derive(Debug, Clone)]
pub struct App {
    /// Name in the report (`xdlu`, `ph5_rows`).
    pub name: String,
    /// Working directory (input files).
    pub dir: PathBuf,
    /// The program.
    pub exe: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Text its standard output must contain.
    pub expect: String,
}

impl App {
    /// The CSV test name of the application.
    pub fn test(&self) -> String {
        format!("app_{}", self.name)
    }
}

/// A ScaLAPACK tester input file with its process grids replaced by the grids of
/// [`NP`] ranks (1x1, 1x2, 2x1): Debian's files ask for grids of up to 8 ranks, which
/// the testers skip when fewer ranks run. `None` if the file has no grid lines.
pub fn two_rank_grids(text: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let i = lines
        .iter()
        .position(|l| l.contains("number of process grids"))?;
    if i + 2 >= lines.len() {
        return None;
    }
    let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    out[i] = "3\t\t\tnumber of process grids (ordered pairs of P & Q)".into();
    out[i + 1] = "1 1 2\t\t\tvalues of P".into();
    out[i + 2] = "1 2 1\t\t\tvalues of Q".into();
    Some(out.join("\n") + "\n")
}

fn copy_dir(src: &Path, dst: &Path) -> Result<(), String> {
    let _ = std::fs::remove_dir_all(dst);
    let o = runner::run(
        Command::new("cp").arg("-rL").arg(src).arg(dst),
        Duration::from_secs(120),
    )
    .map_err(|e| e.to_string())?;
    if o.ok() {
        Ok(())
    } else {
        Err(format!("cp -rL {}: {}", src.display(), o.failure()))
    }
}

/// Copy the ScaLAPACK testers into `dir` with two-rank input files; the first `n` of
/// [`TESTERS`] are timed.
fn scalapack(dir: &Path, n: usize) -> Result<Vec<App>, String> {
    let src = Path::new(SCALAPACK_TESTS);
    if !src.join("xdlu").is_file() {
        return Err(format!(
            "{SCALAPACK_TESTS} is missing (scripts/deps.sh installs Debian's scalapack-mpi-test)"
        ));
    }
    let dst = dir.join("scalapack");
    copy_dir(src, &dst)?;
    let mut apps = Vec::new();
    for (exe, dat) in TESTERS.into_iter().take(n) {
        let p = dst.join(dat);
        let text =
            std::fs::read_to_string(&p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
        let two = two_rank_grids(&text)
            .ok_or_else(|| format!("{}: no process grid lines", p.display()))?;
        std::fs::write(&p, two).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        apps.push(App {
            name: exe.into(),
            dir: dst.clone(),
            exe: dst.join(exe),
            args: vec![],
            expect: " 0 tests completed and failed residual checks.".into(),
        });
    }
    Ok(apps)
}

/// Build the parallel HDF5 program with Debian's `h5pfc.mpich` in `dir`.
fn hdf5(root: &Path, dir: &Path) -> Result<App, String> {
    let d = dir.join("hdf5");
    let data = dir.join("hdf5-data");
    for x in [&d, &data] {
        std::fs::create_dir_all(x).map_err(|e| format!("cannot create {}: {e}", x.display()))?;
    }
    let exe = d.join("ph5_rows");
    // h5pfc leaves its object file in the current directory.
    let mut c = Command::new("h5pfc.mpich");
    c.current_dir(&d)
        .arg("-shlib")
        .arg(format!("-J{}", d.display()))
        .arg(root.join(HDF5_SOURCE))
        .arg("-o")
        .arg(&exe);
    let o = runner::run(&mut c, Duration::from_secs(300)).map_err(|e| {
        format!("{e} (scripts/deps.sh installs Debian's libhdf5-mpich-dev, which has h5pfc.mpich)")
    })?;
    if !o.ok() {
        return Err(format!("h5pfc.mpich {HDF5_SOURCE}: {}", o.failure()));
    }
    Ok(App {
        name: "ph5_rows".into(),
        dir: d,
        exe,
        args: vec![data.to_string_lossy().into_owned()],
        expect: "ph5: read back ok".into(),
    })
}

/// The applications, prepared under `cfg.build_dir/apps`; what could not be prepared is
/// noted (the run goes on without it).
pub fn prepare(cfg: &Config, root: &Path, notes: &mut Vec<String>) -> Vec<App> {
    let dir = cfg.build_dir.join("apps");
    if let Err(e) = std::fs::create_dir_all(&dir) {
        notes.push(format!(
            "applications skipped: cannot create {}: {e}",
            dir.display()
        ));
        return vec![];
    }
    if cores() < NP {
        notes.push(format!(
            "applications skipped: they run on {NP} ranks without oversubscription, and this machine has {} CPU(s)",
            cores()
        ));
        return vec![];
    }
    let mut apps = Vec::new();
    // The smoke run (CI) checks the harness with one tester.
    let testers = if cfg.mode == Mode::Smoke {
        1
    } else {
        TESTERS.len()
    };
    match scalapack(&dir, testers) {
        Ok(a) => apps.extend(a),
        Err(e) => notes.push(format!("ScaLAPACK testers skipped: {e}")),
    }
    match hdf5(root, &dir) {
        Ok(a) => apps.push(a),
        Err(e) => notes.push(format!("parallel HDF5 program skipped: {e}")),
    }
    apps
}

/// The order in which the implementations run an application in repetition `rep`
/// (alternating, so that neither always runs first).
pub fn order(rep: u32, app_index: usize, n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    if (rep as usize + app_index) % 2 == 1 {
        v.reverse();
    }
    v
}

impl Runner<'_> {
    /// One repetition of the applications: each application under every implementation
    /// of [`IMPLS`] that is ready, back to back.
    pub fn applications(&mut self, rep: u32, ready: &[Prepared], apps: &[App]) {
        let impls: Vec<&Prepared> = ready
            .iter()
            .filter(|p| IMPLS.contains(&p.imp.name.as_str()))
            .collect();
        for (i, app) in apps.iter().enumerate() {
            for k in order(rep, i, impls.len()) {
                self.application(rep, impls[k], app);
            }
        }
    }

    /// One launch of `app` under `p`, recorded as a row in seconds (or a failure).
    fn application(&mut self, rep: u32, p: &Prepared, app: &App) {
        eprintln!("bench: rep {}: {} under {}", rep + 1, app.name, p.imp.name);
        let (load, busy) = crate::suite::machine_state(Duration::ZERO);
        let mut c = p.imp.command(NP, cores(), &app.exe, &app.args);
        c.current_dir(&app.dir);
        let what = format!("rep {rep} {} {} np={NP}", p.imp.name, app.name);
        let o = match runner::run_idle(&mut c, self.cfg.timeout, None) {
            Ok(o) => o,
            Err(e) => {
                self.res.failures.push(format!("{what}: {e}"));
                return;
            }
        };
        if !o.ok() || !o.stdout.contains(&app.expect) {
            let why = if o.ok() {
                format!("its output lacks '{}'", app.expect.trim())
            } else {
                o.failure()
            };
            self.res.failures.push(format!("{what}: {why}"));
            return;
        }
        let s = o.wall.as_secs_f64();
        let mut r = self.row(rep, &p.imp.name, &app.test(), NP, 0, "s");
        (r.median, r.min, r.max) = (s, s, s);
        (r.load1, r.busy_pct) = (load, busy);
        r.values = vec![s];
        self.res.rows.push(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_become_those_of_two_ranks() {
        let dat = "'LU'\n4\t\t\tnumber of process grids (ordered pairs of P & Q)\n\
                   1 2 1 4 2 3 8\t\tvalues of P\n1 2 4 1 3 2 1 \t\tvalues of Q\n1.0\t\tthreshold\n";
        let two = two_rank_grids(dat).expect("grid lines");
        let l: Vec<&str> = two.lines().collect();
        assert_eq!(l.len(), 5);
        assert!(
            l[1].starts_with("3\t") && l[2].starts_with("1 1 2\t") && l[3].starts_with("1 2 1\t")
        );
        assert_eq!((l[0], l[4]), ("'LU'", "1.0\t\tthreshold"));
        assert!(two_rank_grids("'LU'\nno grids here\n").is_none());
        assert!(two_rank_grids("x\n4 number of process grids\n1 2\n").is_none());
    }

    #[test]
    fn order_alternates_between_repetitions_and_programs() {
        assert_eq!(order(0, 0, 2), vec![0, 1]);
        assert_eq!(order(1, 0, 2), vec![1, 0]);
        assert_eq!(order(0, 1, 2), vec![1, 0]);
        assert_eq!(order(3, 1, 2), vec![0, 1]);
        assert_eq!(order(1, 0, 1), vec![0]);
    }

    #[test]
    fn test_names_are_prefixed() {
        let a = App {
            name: "xdlu".into(),
            dir: PathBuf::from("d"),
            exe: PathBuf::from("d/xdlu"),
            args: vec![],
            expect: String::new(),
        };
        assert_eq!(a.test(), "app_xdlu");
    }
}
