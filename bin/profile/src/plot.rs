//! The report's PNG plots with `plotters` (bitmap backend; text through `ab_glyph` from a
//! TrueType font: `OXMPI_PROFILE_FONT`, else what fontconfig's `fc-match` names, else
//! DejaVu Sans where Debian puts it).

use crate::model::{bucket_label, Profile, ProfileError};
use plotters::prelude::*;
use std::path::Path;

/// Registers a sans-serif font once; `false` when there is none (no plots then).
pub fn have_font() -> bool {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OK.get_or_init(|| {
        let fc = || {
            let o = std::process::Command::new("fc-match")
                .args(["--format=%{file}", "sans-serif"])
                .output()
                .ok()?;
            Some(String::from_utf8_lossy(&o.stdout).into_owned())
        };
        let path = std::env::var("OXMPI_PROFILE_FONT")
            .ok()
            .or_else(fc)
            .filter(|p| p.ends_with(".ttf"))
            .unwrap_or_else(|| "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf".into());
        match std::fs::read(path) {
            Ok(b) => plotters::style::register_font(
                "sans-serif",
                FontStyle::Normal,
                Box::leak(b.into_boxed_slice()),
            )
            .is_ok(),
            Err(_) => false,
        }
    })
}

fn draw_err(file: &Path, e: impl std::fmt::Display) -> ProfileError {
    ProfileError::Draw {
        file: file.display().to_string(),
        msg: e.to_string(),
    }
}

/// Bytes between every pair of ranks, log-scaled colour.
pub fn matrix(p: &Profile, file: &Path) -> Result<(), ProfileError> {
    let m = p.byte_matrix();
    let n = m.len().max(1) as f64;
    let max = m.iter().flatten().copied().max().unwrap_or(0).max(1);
    let root = BitMapBackend::new(file, (640, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| draw_err(file, e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("Bytes sent (darkest: {max} B, log scale)"),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(44)
        .build_cartesian_2d(-0.5..n - 0.5, -0.5..n - 0.5)
        .map_err(|e| draw_err(file, e))?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("receiver rank")
        .y_desc("sender rank")
        .x_labels(n as usize + 1)
        .y_labels(n as usize + 1)
        .x_label_formatter(&rank_label)
        .y_label_formatter(&rank_label)
        .draw()
        .map_err(|e| draw_err(file, e))?;
    let max = max as f64;
    chart
        .draw_series(m.iter().enumerate().flat_map(|(s, row)| {
            row.iter().enumerate().map(move |(d, &b)| {
                let t = if b == 0 {
                    0.0
                } else {
                    (b as f64).ln_1p() / max.ln_1p()
                };
                let c = RGBColor(
                    255 - (200.0 * t) as u8,
                    255 - (120.0 * t) as u8,
                    255 - (30.0 * t) as u8,
                );
                let (x, y) = (d as f64, s as f64);
                Rectangle::new([(x - 0.5, y - 0.5), (x + 0.5, y + 0.5)], c.filled())
            })
        }))
        .map_err(|e| draw_err(file, e))?;
    root.present().map_err(|e| draw_err(file, e))
}

/// An axis label at whole numbers only (rank or bucket positions).
fn rank_label(v: &f64) -> String {
    if (v - v.round()).abs() < 1e-6 && *v >= 0.0 {
        format!("{}", v.round() as i64)
    } else {
        String::new()
    }
}

/// Per rank: time computing and time in MPI (blocked in waits part of it), stacked.
pub fn times(p: &Profile, file: &Path) -> Result<(), ProfileError> {
    let n = p.ranks.len().max(1) as f64;
    let secs = |ns: u64| ns as f64 / 1e9;
    let top = p.ranks.iter().map(|r| secs(r.wall_ns)).fold(0.0, f64::max) * 1.45 + 1e-6;
    let root = BitMapBackend::new(file, (720, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| draw_err(file, e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Time per rank: compute and MPI", ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5..n - 0.5, 0.0..top)
        .map_err(|e| draw_err(file, e))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc("rank")
        .y_desc("seconds")
        .x_labels(n as usize + 1)
        .x_label_formatter(&rank_label)
        .draw()
        .map_err(|e| draw_err(file, e))?;
    let parts: [(&str, RGBColor); 3] = [
        ("compute", RGBColor(120, 170, 220)),
        ("MPI (not waiting)", RGBColor(240, 160, 60)),
        ("MPI, blocked in waits", RGBColor(210, 60, 50)),
    ];
    for (k, (label, color)) in parts.into_iter().enumerate() {
        chart
            .draw_series(p.ranks.iter().enumerate().map(|(i, r)| {
                let (wall, mpi, wait) = (secs(r.wall_ns), secs(r.mpi_ns()), secs(r.wait_ns));
                let wait = wait.min(mpi);
                let compute = (wall - mpi).max(0.0);
                let (lo, hi) = match k {
                    0 => (0.0, compute),
                    1 => (compute, compute + mpi - wait),
                    _ => (compute + mpi - wait, compute + mpi),
                };
                let x = i as f64;
                Rectangle::new([(x - 0.35, lo), (x + 0.35, hi)], color.filled())
            }))
            .map_err(|e| draw_err(file, e))?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| draw_err(file, e))?;
    root.present().map_err(|e| draw_err(file, e))
}

/// Messages sent per power-of-two size bucket, all ranks (log scale: small counts show).
pub fn sizes(p: &Profile, file: &Path) -> Result<(), ProfileError> {
    let s = p.sizes();
    let used: Vec<(usize, u64)> = s
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, c)| *c > 0)
        .collect();
    let (lo, hi) = match (used.first(), used.last()) {
        (Some(a), Some(b)) => (a.0 as f64, b.0 as f64),
        _ => (0.0, 1.0),
    };
    let top = used.iter().map(|u| u.1).max().unwrap_or(1) as f64 * 3.0;
    let root = BitMapBackend::new(file, (720, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| draw_err(file, e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Messages sent by size", ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(lo - 0.5..hi + 0.5, (0.5f64..top).log_scale())
        .map_err(|e| draw_err(file, e))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc("message size in bytes (from; each bar up to twice that)")
        .y_desc("messages (log scale)")
        .x_labels((hi - lo) as usize + 2)
        .x_label_formatter(&|v: &f64| match rank_label(v).parse::<usize>() {
            Ok(b) => bucket_label(b),
            Err(_) => String::new(),
        })
        .y_label_formatter(&|v: &f64| format!("{v:.0}"))
        .draw()
        .map_err(|e| draw_err(file, e))?;
    chart
        .draw_series(used.iter().map(|&(b, c)| {
            let x = b as f64;
            Rectangle::new(
                [(x - 0.4, 0.5), (x + 0.4, c as f64)],
                RGBColor(90, 150, 90).filled(),
            )
        }))
        .map_err(|e| draw_err(file, e))?;
    root.present().map_err(|e| draw_err(file, e))
}
