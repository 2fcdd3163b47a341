//! `oxmpi-profile`: renders the job profile that `mpirun --profile[=DIR]` (or the parameter
//! `mpi_profile`) had the ranks write, or compares two.
//!
//! * `oxmpi-profile DIR` writes into DIR: `profile.json`, `matrix.csv`, `functions.csv`,
//!   `sizes.csv`, `ranks.csv`, `collectives.csv`, the plots `matrix.png`, `times.png`,
//!   `sizes.png` (when a TrueType font is found) and `index.html` (self-contained: the
//!   plots are embedded), and prints a summary.
//! * `oxmpi-profile compare A B` prints, per MPI function and in total, the calls and
//!   time of both and their ratio, and the bytes moved.
//!
//! Exit status: 0 on success, 1 for unreadable or malformed profiles, 2 for a usage error.

mod model;
mod plot;
mod write;

use model::{Profile, ProfileError};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "usage: oxmpi-profile DIR            render the profile in DIR
       oxmpi-profile compare DIR_A DIR_B  compare two profiles
";

fn save(path: PathBuf, text: impl AsRef<[u8]>) -> Result<(), ProfileError> {
    std::fs::write(&path, text).map_err(|source| ProfileError::Io { path, source })
}

/// Writes every output file into `dir`; returns the summary to print.
fn render(dir: &Path) -> Result<String, ProfileError> {
    let p = Profile::read(dir)?;
    save(dir.join("profile.json"), write::json(&p))?;
    for (name, text) in write::csvs(&p) {
        save(dir.join(name), text)?;
    }
    let mut images = Vec::new();
    if plot::have_font() {
        type Plot = fn(&Profile, &Path) -> Result<(), ProfileError>;
        let plots: [(&str, &str, Plot); 3] = [
            ("matrix.png", "Communication matrix", plot::matrix),
            ("times.png", "Time per rank", plot::times),
            ("sizes.png", "Message sizes", plot::sizes),
        ];
        for (file, title, f) in plots {
            let path = dir.join(file);
            f(&p, &path)?;
            let png = std::fs::read(&path).map_err(|source| ProfileError::Io {
                path: path.clone(),
                source,
            })?;
            images.push((title, write::base64(&png)));
        }
    } else {
        eprintln!("oxmpi-profile: no TrueType font found (set OXMPI_PROFILE_FONT): no plots");
    }
    save(dir.join("index.html"), html(&p, &images))?;
    Ok(summary(&p, dir))
}

/// The one-page report.
fn html(p: &Profile, images: &[(&str, String)]) -> String {
    let mut h = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>oxmpi job profile</title>\
         <style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}\
         td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}th{background:#eee}\
         td:first-child{text-align:left}</style></head><body>\n<h1>oxmpi job profile</h1>\n",
    );
    let _ = writeln!(
        h,
        "<p>{} ranks; load imbalance (largest time in MPI over the mean): {:.2}</p>",
        p.ranks.len(),
        p.imbalance()
    );
    for (title, b64) in images {
        let _ = writeln!(
            h,
            "<h2>{title}</h2>\n<img alt=\"{title}\" src=\"data:image/png;base64,{b64}\">"
        );
    }
    h.push_str("<h2>Ranks</h2>\n<table><tr><th>rank</th><th>host</th><th>wall s</th><th>MPI s</th><th>blocked s</th><th>bytes sent</th></tr>\n");
    for r in &p.ranks {
        let sent: u64 = r.links.iter().map(|l| l.bytes_sent).sum();
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{:.6}</td><td>{:.6}</td><td>{:.6}</td><td>{sent}</td></tr>",
            r.rank,
            r.host,
            r.wall_ns as f64 / 1e9,
            r.mpi_ns() as f64 / 1e9,
            r.wait_ns as f64 / 1e9
        );
    }
    h.push_str("</table>\n<h2>MPI functions (all ranks)</h2>\n<table><tr><th>function</th><th>calls</th><th>total s</th><th>mean µs</th></tr>\n");
    for (name, (n, ns)) in p.funcs() {
        let _ = writeln!(
            h,
            "<tr><td>{name}</td><td>{n}</td><td>{:.6}</td><td>{:.2}</td></tr>",
            ns as f64 / 1e9,
            ns as f64 / 1e3 / n.max(1) as f64
        );
    }
    h.push_str("</table>\n<h2>Collective algorithms (runs, all ranks)</h2>\n<table><tr><th>algorithm</th><th>runs</th></tr>\n");
    for (name, n) in p.colls() {
        let _ = writeln!(h, "<tr><td>{name}</td><td>{n}</td></tr>");
    }
    h.push_str("</table>\n<p>Data: profile.json and the CSV files next to this page.</p>\n</body></html>\n");
    h
}

fn summary(p: &Profile, dir: &Path) -> String {
    let bytes: u64 = p.byte_matrix().iter().flatten().sum();
    let calls: u64 = p.funcs().values().map(|f| f.0).sum();
    format!(
        "oxmpi-profile: {} ranks, {calls} MPI calls, {bytes} bytes sent, imbalance {:.2}; report in {}\n",
        p.ranks.len(),
        p.imbalance(),
        dir.join("index.html").display()
    )
}

/// The comparison table of two profiles.
fn compare(a: &Path, b: &Path) -> Result<String, ProfileError> {
    let (pa, pb) = (Profile::read(a)?, Profile::read(b)?);
    let (fa, fb) = (pa.funcs(), pb.funcs());
    let mut names: Vec<&String> = fa.keys().chain(fb.keys()).collect();
    names.sort();
    names.dedup();
    let mut o = format!(
        "{:<28} {:>10} {:>12} {:>10} {:>12} {:>8}\n",
        "function", "calls A", "time A s", "calls B", "time B s", "B/A"
    );
    let row = |o: &mut String, name: &str, x: (u64, u64), y: (u64, u64)| {
        let ratio = if x.1 > 0 {
            format!("{:.2}", y.1 as f64 / x.1 as f64)
        } else {
            "-".into()
        };
        let _ = writeln!(
            o,
            "{name:<28} {:>10} {:>12.6} {:>10} {:>12.6} {ratio:>8}",
            x.0,
            x.1 as f64 / 1e9,
            y.0,
            y.1 as f64 / 1e9
        );
    };
    for n in names {
        let x = fa.get(n).copied().unwrap_or_default();
        let y = fb.get(n).copied().unwrap_or_default();
        row(&mut o, n, x, y);
    }
    let total = |f: &std::collections::BTreeMap<String, (u64, u64)>| {
        f.values().fold((0, 0), |s, v| (s.0 + v.0, s.1 + v.1))
    };
    row(&mut o, "total", total(&fa), total(&fb));
    let bytes = |p: &Profile| -> u64 { p.byte_matrix().iter().flatten().sum() };
    let _ = writeln!(o, "bytes sent: A {}, B {}", bytes(&pa), bytes(&pb));
    Ok(o)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["-h" | "--help"] => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        ["compare", a, b] => compare(Path::new(a), Path::new(b)),
        [dir] if !dir.starts_with('-') => render(Path::new(dir)),
        _ => {
            eprint!("oxmpi-profile: bad arguments\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("oxmpi-profile: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Renders a small two-rank profile; the plots need a TrueType font (scripts/deps.sh
    /// installs fonts-dejavu-core).
    #[test]
    fn renders_every_file_and_the_plots() {
        let dir = std::env::temp_dir().join(format!("oxmpi-profile-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for r in 0..2 {
            let text = format!(
                "rank\t{r}\nsize\t2\nhost\th\nwall_ns\t2000000\nwait_ns\t500000\neager_limit\t4096\n\
                 peer\t{}\tsm\t5\t{}\t5\t4000\t4\t1\t0\t1\nsizes\t0,0,0,4,0,0,0,0,0,0,0,0,0,0,0,0,0,1\n\
                 func\tMPI_Send\t5\t1000000\t0,0,5\ncoll\tcoll_sm_barrier_calls\t2\n",
                1 - r,
                4000 + 1000 * r
            );
            std::fs::write(dir.join(format!("rank-{r}.tsv")), text).unwrap();
        }
        let result = render(&dir);
        let files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        let pngs: Vec<Vec<u8>> = ["matrix.png", "times.png", "sizes.png"]
            .iter()
            .filter_map(|f| std::fs::read(dir.join(f)).ok())
            .collect();
        let html = std::fs::read_to_string(dir.join("index.html")).unwrap_or_default();
        let cmp = compare(&dir, &dir);
        std::fs::remove_dir_all(&dir).unwrap();
        let summary = result.unwrap();
        assert!(
            summary.contains("2 ranks, 10 MPI calls, 9000 bytes sent"),
            "{summary}"
        );
        for f in [
            "profile.json",
            "matrix.csv",
            "functions.csv",
            "sizes.csv",
            "ranks.csv",
        ] {
            assert!(files.iter().any(|x| x == f), "{f} missing: {files:?}");
        }
        assert!(
            plot::have_font(),
            "NO TRUETYPE FONT: the plots were not drawn (scripts/deps.sh installs fonts-dejavu-core)"
        );
        assert_eq!(pngs.len(), 3);
        assert!(pngs.iter().all(|p| p.starts_with(b"\x89PNG")));
        assert_eq!(html.matches("data:image/png;base64,").count(), 3);
        assert!(cmp.unwrap().contains("MPI_Send"));
    }
}
