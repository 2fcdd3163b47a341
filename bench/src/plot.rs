//! PNG plots with `plotters` (bitmap backend, text through `ab_glyph` from a
//! TrueType font found on the system; without a font the plots are skipped).

use crate::report::{num, size_label};
use crate::stats::{aggregate, summary, Row};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// Plot errors.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// No usable font.
    #[error(
        "no TrueType font found (looked for DejaVuSans/Liberation/any .ttf under /usr/share/fonts)"
    )]
    NoFont,
    /// plotters failed.
    #[error("drawing {file}: {msg}")]
    Draw {
        /// Output file.
        file: String,
        /// plotters' error.
        msg: String,
    },
}

fn find_font() -> Option<Vec<u8>> {
    let known = [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    ];
    for k in known {
        if let Ok(b) = std::fs::read(k) {
            return Some(b);
        }
    }
    fn walk(d: &Path, depth: u32) -> Option<Vec<u8>> {
        for e in std::fs::read_dir(d).ok()?.flatten() {
            let p = e.path();
            if p.is_dir() && depth < 4 {
                if let Some(b) = walk(&p, depth + 1) {
                    return Some(b);
                }
            } else if p.extension().is_some_and(|x| x == "ttf") {
                return std::fs::read(&p).ok();
            }
        }
        None
    }
    walk(Path::new("/usr/share/fonts"), 0)
}

/// Register a font as "sans-serif" once per process.
fn ensure_font() -> Result<(), PlotError> {
    use std::sync::OnceLock;
    static OK: OnceLock<bool> = OnceLock::new();
    let ok = *OK.get_or_init(|| match find_font() {
        Some(bytes) => {
            let leaked: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font("sans-serif", FontStyle::Normal, leaked).is_ok()
        }
        None => false,
    });
    if ok {
        Ok(())
    } else {
        Err(PlotError::NoFont)
    }
}

/// Fixed colour per implementation so that plots are comparable.
pub fn color(imp: &str) -> RGBColor {
    match imp {
        "oxmpi" => RGBColor(0, 140, 60),
        "oxmpi-pipe" => RGBColor(110, 200, 60),
        "ompi" => RGBColor(210, 40, 40),
        "ompi-nocma" => RGBColor(240, 140, 20),
        "mpich" => RGBColor(40, 80, 210),
        "limit" => RGBColor(0, 0, 0),
        "np=2" => RGBColor(0, 140, 60),
        "np=4" => RGBColor(40, 80, 210),
        "np=8" => RGBColor(210, 40, 40),
        // the placements of the oversubscribed rank counts (--placement)
        "np=4 block" => RGBColor(40, 80, 210),
        "np=4 cyclic" => RGBColor(120, 170, 250),
        "np=4 unpinned" => RGBColor(20, 30, 110),
        "np=8 block" => RGBColor(210, 40, 40),
        "np=8 cyclic" => RGBColor(250, 150, 120),
        "np=8 unpinned" => RGBColor(110, 20, 20),
        _ => RGBColor(120, 120, 120),
    }
}

/// Bar values of one implementation: per group, (median, min, max) if measured.
type BarSeries = (String, Vec<Option<(f64, f64, f64)>>);

/// One line of a log-log panel: points (x, median, min, max).
struct Series {
    name: String,
    color: RGBColor,
    pts: Vec<(f64, f64, f64, f64)>,
    dashed: bool,
}

fn err(file: &str) -> impl Fn(String) -> PlotError + '_ {
    move |msg| PlotError::Draw {
        file: file.to_string(),
        msg,
    }
}

fn short_size(x: f64) -> String {
    size_label(x.round() as u64)
        .replace(" KiB", "K")
        .replace(" MiB", "M")
        .replace(" B", "")
}

fn loglog<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    ylabel: &str,
    series: &[Series],
    legend: SeriesLabelPosition,
) -> Result<(), String> {
    loglog_x(area, title, "message size (bytes)", ylabel, series, legend)
}

/// [`loglog`] with another x axis description.
fn loglog_x<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    xdesc: &str,
    ylabel: &str,
    series: &[Series],
    legend: SeriesLabelPosition,
) -> Result<(), String> {
    let pts: Vec<&(f64, f64, f64, f64)> = series.iter().flat_map(|s| s.pts.iter()).collect();
    let pos = |v: f64| v > 0.0 && v.is_finite();
    let xs: Vec<f64> = pts.iter().map(|p| p.0).filter(|v| pos(*v)).collect();
    let ys: Vec<f64> = pts
        .iter()
        .flat_map(|p| [p.1, p.2, p.3])
        .filter(|v| pos(*v))
        .collect();
    let (Some(x), Some(y)) = (summary(&xs), summary(&ys)) else {
        area.titled(&format!("{title}: no data"), ("sans-serif", 18))
            .map_err(|e| e.to_string())?;
        return Ok(());
    };
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(
            (x.min / 1.5..x.max * 1.5).log_scale(),
            (y.min / 1.5..y.max * 1.5).log_scale(),
        )
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc(xdesc)
        .y_desc(ylabel)
        .x_label_formatter(&|v| short_size(*v))
        .y_label_formatter(&|v| num(*v))
        .draw()
        .map_err(|e| e.to_string())?;
    for s in series {
        let line: Vec<(f64, f64)> = s
            .pts
            .iter()
            .filter(|p| pos(p.0) && pos(p.1))
            .map(|p| (p.0, p.1))
            .collect();
        if line.is_empty() {
            continue;
        }
        let c = s.color;
        let style = c.stroke_width(2);
        let anno = if s.dashed {
            chart.draw_series(DashedLineSeries::new(line.clone(), 6, 5, style))
        } else {
            chart.draw_series(LineSeries::new(line.clone(), style))
        }
        .map_err(|e| e.to_string())?;
        anno.label(s.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
        if !s.dashed {
            chart
                .draw_series(line.iter().map(|p| Circle::new(*p, 3, c.filled())))
                .map_err(|e| e.to_string())?;
            chart
                .draw_series(
                    s.pts
                        .iter()
                        .filter(|p| pos(p.0) && pos(p.2) && pos(p.3))
                        .map(|p| PathElement::new(vec![(p.0, p.2), (p.0, p.3)], c)),
                )
                .map_err(|e| e.to_string())?;
        }
    }
    chart
        .configure_series_labels()
        .position(legend)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(|e| e.to_string())?;
    Ok(())
}

fn series_for(rows: &[Row], imps: &[String], test: &str, np: u32, with_limit: bool) -> Vec<Series> {
    let mut out = Vec::new();
    for i in imps {
        let pts: Vec<(f64, f64, f64, f64)> = aggregate(rows, i)
            .into_iter()
            .filter(|(k, _)| k.0 == test && k.1 == np && k.2 > 0)
            .map(|(k, s)| (k.2 as f64, s.median, s.min, s.max))
            .collect();
        if !pts.is_empty() {
            out.push(Series {
                name: i.clone(),
                color: color(i),
                pts,
                dashed: false,
            });
        }
    }
    if with_limit {
        let mut by: std::collections::BTreeMap<u64, Vec<f64>> = Default::default();
        for r in rows
            .iter()
            .filter(|r| r.test == test && r.np == np && r.size > 0)
        {
            if let Some(l) = r.limit {
                by.entry(r.size).or_default().push(l);
            }
        }
        let pts: Vec<_> = by
            .into_iter()
            .filter_map(|(s, v)| summary(&v).map(|m| (s as f64, m.median, m.median, m.median)))
            .collect();
        if !pts.is_empty() {
            out.push(Series {
                name: "physical limit".into(),
                color: color("limit"),
                pts,
                dashed: true,
            });
        }
    }
    out
}

/// Grouped bars: one group per label, one bar per implementation (median),
/// with a min–max whisker and the value written above.
fn bars<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    ylabel: &str,
    groups: &[String],
    series: &[BarSeries],
) -> Result<(), String> {
    // implementations without any value here get no (empty) bar slot
    let series: Vec<&BarSeries> = series
        .iter()
        .filter(|s| s.1.iter().any(Option::is_some))
        .collect();
    let ymax = series
        .iter()
        .flat_map(|s| s.1.iter().flatten().map(|v| v.2))
        .fold(0.0f64, f64::max);
    if groups.is_empty() || ymax <= 0.0 {
        area.titled(&format!("{title}: no data"), ("sans-serif", 18))
            .map_err(|e| e.to_string())?;
        return Ok(());
    }
    let n = groups.len() as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(10)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..n, 0f64..ymax * 1.45)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc(ylabel)
        .y_label_formatter(&|v| num(*v))
        .draw()
        .map_err(|e| e.to_string())?;
    let k = series.len().max(1) as f64;
    let w = 0.8 / k;
    for (si, (name, vals)) in series.iter().enumerate() {
        let c = color(name);
        let mut rects = Vec::new();
        let mut whiskers = Vec::new();
        let mut texts = Vec::new();
        for (g, v) in vals.iter().enumerate() {
            if let Some((med, lo, hi)) = v {
                let x0 = g as f64 + 0.1 + si as f64 * w;
                rects.push(Rectangle::new(
                    [(x0, 0.0), (x0 + w * 0.9, *med)],
                    c.filled(),
                ));
                let xm = x0 + w * 0.45;
                whiskers.push(PathElement::new(vec![(xm, *lo), (xm, *hi)], BLACK));
                texts.push(Text::new(
                    num(*med),
                    (x0, hi * 1.02 + ymax * 0.02),
                    ("sans-serif", 12),
                ));
            }
        }
        chart
            .draw_series(rects)
            .map_err(|e| e.to_string())?
            .label(name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
        chart.draw_series(whiskers).map_err(|e| e.to_string())?;
        chart.draw_series(texts).map_err(|e| e.to_string())?;
    }
    chart
        .draw_series(groups.iter().enumerate().map(|(g, label)| {
            Text::new(
                label.clone(),
                (g as f64 + 0.1, ymax * 1.15),
                ("sans-serif", 15),
            )
        }))
        .map_err(|e| e.to_string())?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(|e| e.to_string())?;
    Ok(())
}

fn bar_values(rows: &[Row], imps: &[String], keys: &[(&str, u32)]) -> Vec<BarSeries> {
    imps.iter()
        .map(|i| {
            let a = aggregate(rows, i);
            let vals = keys
                .iter()
                .map(|(t, np)| {
                    a.iter()
                        .find(|(k, _)| k.0 == *t && k.1 == *np)
                        .map(|(_, s)| (s.median, s.min, s.max))
                })
                .collect();
            (i.clone(), vals)
        })
        .collect()
}

/// Draw all plots into `dir`; returns the file names written.
pub fn draw_all(dir: &Path, rows: &[Row], imps: &[String]) -> Result<Vec<String>, PlotError> {
    ensure_font()?;
    let mut files = Vec::new();

    let f = "latency.png";
    {
        let p = dir.join(f);
        let root = BitMapBackend::new(&p, (1800, 700)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(f)(e.to_string()))?;
        let halves = root.split_evenly((1, 2));
        loglog(
            &halves[0],
            "Ping-pong latency (C), one way, np=2 (median, min-max over repetitions)",
            "us",
            &series_for(rows, imps, "lat", 2, true),
            SeriesLabelPosition::UpperLeft,
        )
        .map_err(err(f))?;
        loglog(
            &halves[1],
            "mpi4py.bench pingpong, one way (mean), np=2",
            "us",
            &series_for(rows, imps, "mpi4py_lat", 2, true),
            SeriesLabelPosition::UpperLeft,
        )
        .map_err(err(f))?;
        root.present().map_err(|e| err(f)(e.to_string()))?;
    }
    files.push(f.to_string());

    let f = "bandwidth.png";
    {
        let p = dir.join(f);
        let root = BitMapBackend::new(&p, (1600, 650)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(f)(e.to_string()))?;
        let halves = root.split_evenly((1, 2));
        loglog(
            &halves[0],
            "Unidirectional bandwidth, window 64",
            "MB/s",
            &series_for(rows, imps, "bw", 2, true),
            SeriesLabelPosition::LowerRight,
        )
        .map_err(err(f))?;
        loglog(
            &halves[1],
            "Bidirectional bandwidth, window 64",
            "MB/s",
            &series_for(rows, imps, "bibw", 2, true),
            SeriesLabelPosition::LowerRight,
        )
        .map_err(err(f))?;
        root.present().map_err(|e| err(f)(e.to_string()))?;
    }
    files.push(f.to_string());

    let f = "collectives.png";
    {
        let p = dir.join(f);
        let root = BitMapBackend::new(&p, (1800, 1000)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(f)(e.to_string()))?;
        let cells = root.split_evenly((2, 3));
        let mut i = 0;
        for np in [2, 4] {
            for t in ["allreduce", "bcast", "alltoall"] {
                let title = format!(
                    "{t}, np={np}{}",
                    if np > 2 { " (oversubscribed)" } else { "" }
                );
                loglog(
                    &cells[i],
                    &title,
                    "us per call",
                    &series_for(rows, imps, t, np, np == 2),
                    SeriesLabelPosition::UpperLeft,
                )
                .map_err(err(f))?;
                i += 1;
            }
        }
        root.present().map_err(|e| err(f)(e.to_string()))?;
    }
    files.push(f.to_string());

    let f = "startup.png";
    {
        let p = dir.join(f);
        let root = BitMapBackend::new(&p, (1800, 650)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(f)(e.to_string()))?;
        let (left, right) = root.split_horizontally(900);
        let halves = right.split_evenly((1, 2));
        let su = [("startup", 2), ("startup", 16)];
        bars(
            &left,
            "Job start-up: mpirun + MPI_Init + MPI_Finalize (wall)",
            "ms",
            &["np=2".to_string(), "np=16".to_string()],
            &bar_values(rows, imps, &su),
        )
        .map_err(err(f))?;
        for (i, np) in [2u32, 4].into_iter().enumerate() {
            let title = format!(
                "Barrier, np={np}{}",
                if np > 2 { " (oversubscribed)" } else { "" }
            );
            bars(
                &halves[i],
                &title,
                "us per call",
                &[format!("np={np}")],
                &bar_values(rows, imps, &[("barrier", np)]),
            )
            .map_err(err(f))?;
        }
        root.present().map_err(|e| err(f)(e.to_string()))?;
    }
    files.push(f.to_string());
    Ok(files)
}

/// One panel of [`draw_grid`]: its title and its lines, each a name
/// and points (x, median, min, max).
pub type RatioPanel = (String, Vec<(String, Vec<(f64, f64, f64, f64)>)>);

/// A grid of log-log panels (4 per row) into `dir/file`: one line per
/// name (colour by name) with min-max whiskers, and with `par` a dashed
/// line at 1.0 (for speed ratios).
pub fn draw_grid(
    dir: &Path,
    file: &str,
    xdesc: &str,
    ylabel: &str,
    panels: &[RatioPanel],
    par: bool,
) -> Result<String, PlotError> {
    ensure_font()?;
    let p = dir.join(file);
    let cols = panels.len().clamp(1, 4);
    let nrows = panels.len().div_ceil(cols).max(1);
    let root = BitMapBackend::new(&p, (450 * cols as u32, 420 * nrows as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(file)(e.to_string()))?;
    let cells = root.split_evenly((nrows, cols));
    for (cell, (title, lines)) in cells.iter().zip(panels) {
        let mut series: Vec<Series> = lines
            .iter()
            .filter(|l| !l.1.is_empty())
            .map(|(name, pts)| Series {
                name: name.clone(),
                color: color(name),
                pts: pts.clone(),
                dashed: false,
            })
            .collect();
        let xs: Vec<f64> = series
            .iter()
            .flat_map(|s| s.pts.iter().map(|p| p.0))
            .collect();
        if let (true, Some(x)) = (par, summary(&xs)) {
            series.push(Series {
                name: "1.0 (par)".into(),
                color: color("limit"),
                pts: vec![
                    (x.min, 1.0, 1.0, 1.0),
                    (x.max.max(x.min * 2.0), 1.0, 1.0, 1.0),
                ],
                dashed: true,
            });
        }
        loglog_x(
            cell,
            title,
            xdesc,
            ylabel,
            &series,
            SeriesLabelPosition::UpperLeft,
        )
        .map_err(err(file))?;
    }
    root.present().map_err(|e| err(file)(e.to_string()))?;
    Ok(file.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_sizes() {
        assert_eq!(short_size(1.0), "1");
        assert_eq!(short_size(65536.0), "64K");
        assert_eq!(short_size(4194304.0), "4M");
    }

    #[test]
    fn series_skip_size_zero_and_add_limit() {
        let mk = |imp: &str, size: u64, v: f64| Row {
            rep: 0,
            imp: imp.into(),
            test: "lat".into(),
            np: 2,
            size,
            median: v,
            min: v,
            max: v,
            unit: "us".into(),
            load1: 0.0,
            busy_pct: 0.0,
            probe_rtt_ns: None,
            probe_near_ns: None,
            limit: Some(v / 4.0),
            unix_time: 0,
            values: vec![v],
            iters: 0,
        };
        let rows = vec![mk("ompi", 0, 0.2), mk("ompi", 8, 0.25), mk("mpich", 8, 0.3)];
        let s = series_for(
            &rows,
            &["ompi".into(), "mpich".into(), "oxmpi".into()],
            "lat",
            2,
            true,
        );
        let names: Vec<&str> = s.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(
            names,
            vec!["ompi", "mpich", "physical limit"],
            "no empty oxmpi series"
        );
        assert_eq!(s[0].pts, vec![(8.0, 0.25, 0.25, 0.25)]);
        assert!(s[2].dashed);
    }
}
