//! A job profile: the ranks' files (`rank-<r>.tsv`, written by the MPI library at
//! `MPI_Finalize`, format in `crates/capi/src/tools/profile.rs`) read back, and the views
//! the report shows (communication matrix, time per function, sizes, collectives, balance).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Problems reading a profile.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// A file or directory that cannot be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A line that does not follow the format.
    #[error("{}:{line}: malformed profile record \"{text}\"", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// The line.
        text: String,
    },
    /// A directory without rank files.
    #[error("{}: no rank-*.tsv files (was the job run with mpirun --profile?)", .0.display())]
    Empty(PathBuf),
    /// A plot that could not be drawn.
    #[error("drawing {file}: {msg}")]
    Draw {
        /// The output file.
        file: String,
        /// What went wrong.
        msg: String,
    },
}

/// Traffic from one rank to one peer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Link {
    /// The peer (world rank).
    pub peer: usize,
    /// Transport reaching it (`self`, `sm`, `tcp`).
    pub transport: String,
    /// Messages and bytes sent, received.
    pub msgs_sent: u64,
    /// Bytes sent.
    pub bytes_sent: u64,
    /// Messages received.
    pub msgs_recv: u64,
    /// Bytes received.
    pub bytes_recv: u64,
    /// Eager sends.
    pub eager: u64,
    /// Rendezvous sends.
    pub rndv: u64,
    /// Rendezvous receives by single copy.
    pub single_copy_recv: u64,
    /// Rendezvous receives by the pipelined copy.
    pub pipelined_recv: u64,
}

/// Calls of one MPI function on one rank.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Func {
    /// Calls.
    pub count: u64,
    /// Nanoseconds inside them.
    pub total_ns: u64,
    /// Calls per log2-nanosecond bucket.
    pub hist: Vec<u64>,
}

/// One rank's profile.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rank {
    /// World rank.
    pub rank: usize,
    /// Size of the job.
    pub size: usize,
    /// Host name.
    pub host: String,
    /// Nanoseconds from `MPI_Init` to `MPI_Finalize`.
    pub wall_ns: u64,
    /// Nanoseconds blocked in waits.
    pub wait_ns: u64,
    /// Eager limit in bytes.
    pub eager_limit: u64,
    /// Traffic per peer.
    pub links: Vec<Link>,
    /// Messages sent per log2 size bucket.
    pub sizes: Vec<u64>,
    /// Calls per function.
    pub funcs: BTreeMap<String, Func>,
    /// Runs per collective algorithm.
    pub colls: BTreeMap<String, u64>,
}

impl Rank {
    /// Nanoseconds inside MPI calls.
    pub fn mpi_ns(&self) -> u64 {
        self.funcs.values().map(|f| f.total_ns).sum()
    }
}

/// A whole job's profile.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Profile {
    /// The ranks, by rank.
    pub ranks: Vec<Rank>,
}

fn nums(s: &str) -> Option<Vec<u64>> {
    s.split(',').map(|x| x.parse().ok()).collect()
}

/// Parses one rank file's text.
pub fn parse_rank(text: &str, path: &Path) -> Result<Rank, ProfileError> {
    let mut r = Rank::default();
    for (i, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split('\t').collect();
        let bad = || ProfileError::Malformed {
            path: path.to_path_buf(),
            line: i + 1,
            text: line.to_string(),
        };
        let n = |k: usize| -> Result<u64, ProfileError> {
            f.get(k).and_then(|v| v.parse().ok()).ok_or_else(bad)
        };
        match (f[0], f.len()) {
            ("rank", 2) => r.rank = n(1)? as usize,
            ("size", 2) => r.size = n(1)? as usize,
            ("host", 2) => r.host = f[1].to_string(),
            ("wall_ns", 2) => r.wall_ns = n(1)?,
            ("wait_ns", 2) => r.wait_ns = n(1)?,
            ("eager_limit", 2) => r.eager_limit = n(1)?,
            ("peer", 11) => r.links.push(Link {
                peer: n(1)? as usize,
                transport: f[2].to_string(),
                msgs_sent: n(3)?,
                bytes_sent: n(4)?,
                msgs_recv: n(5)?,
                bytes_recv: n(6)?,
                eager: n(7)?,
                rndv: n(8)?,
                single_copy_recv: n(9)?,
                pipelined_recv: n(10)?,
            }),
            ("sizes", 2) => r.sizes = nums(f[1]).ok_or_else(bad)?,
            ("func", 5) => {
                let func = Func {
                    count: n(2)?,
                    total_ns: n(3)?,
                    hist: nums(f[4]).ok_or_else(bad)?,
                };
                r.funcs.insert(f[1].to_string(), func);
            }
            ("coll", 3) => {
                r.colls.insert(f[1].to_string(), n(2)?);
            }
            ("", 1) => {}
            _ => return Err(bad()),
        }
    }
    Ok(r)
}

impl Profile {
    /// Reads every `rank-*.tsv` of `dir`.
    pub fn read(dir: &Path) -> Result<Profile, ProfileError> {
        let io = |source| ProfileError::Io {
            path: dir.to_path_buf(),
            source,
        };
        let mut ranks = Vec::new();
        for e in std::fs::read_dir(dir).map_err(io)? {
            let p = e.map_err(io)?.path();
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            if name.is_some_and(|n| n.starts_with("rank-") && n.ends_with(".tsv")) {
                let text = std::fs::read_to_string(&p).map_err(|source| ProfileError::Io {
                    path: p.clone(),
                    source,
                })?;
                ranks.push(parse_rank(&text, &p)?);
            }
        }
        if ranks.is_empty() {
            return Err(ProfileError::Empty(dir.to_path_buf()));
        }
        ranks.sort_by_key(|r| r.rank);
        Ok(Profile { ranks })
    }

    /// Bytes sent from each rank (row) to each rank (column).
    pub fn byte_matrix(&self) -> Vec<Vec<u64>> {
        let n = self.ranks.iter().map(|r| r.size).max().unwrap_or(0);
        let mut m = vec![vec![0; n]; n];
        for r in &self.ranks {
            for l in r.links.iter().filter(|l| l.peer < n && r.rank < n) {
                m[r.rank][l.peer] += l.bytes_sent;
            }
        }
        m
    }

    /// Messages sent per size bucket, summed over the ranks.
    pub fn sizes(&self) -> Vec<u64> {
        let mut s: Vec<u64> = Vec::new();
        for r in &self.ranks {
            if s.len() < r.sizes.len() {
                s.resize(r.sizes.len(), 0);
            }
            for (a, b) in s.iter_mut().zip(&r.sizes) {
                *a += b;
            }
        }
        s
    }

    /// Calls and nanoseconds per function, summed over the ranks.
    pub fn funcs(&self) -> BTreeMap<String, (u64, u64)> {
        let mut m: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for r in &self.ranks {
            for (name, f) in &r.funcs {
                let e = m.entry(name.clone()).or_default();
                e.0 += f.count;
                e.1 += f.total_ns;
            }
        }
        m
    }

    /// Runs per collective algorithm, summed over the ranks (those that ran at all).
    pub fn colls(&self) -> BTreeMap<String, u64> {
        let mut m: BTreeMap<String, u64> = BTreeMap::new();
        for r in &self.ranks {
            for (name, n) in r.colls.iter().filter(|(_, n)| **n > 0) {
                *m.entry(name.clone()).or_default() += n;
            }
        }
        m
    }

    /// Load imbalance: the largest time in MPI over the mean (1.0 = balanced).
    pub fn imbalance(&self) -> f64 {
        let t: Vec<f64> = self.ranks.iter().map(|r| r.mpi_ns() as f64).collect();
        let mean = t.iter().sum::<f64>() / t.len().max(1) as f64;
        let max = t.iter().copied().fold(0.0, f64::max);
        if mean > 0.0 {
            max / mean
        } else {
            1.0
        }
    }
}

/// The smallest size of bucket `b` (which holds `2^(b-1)..2^b` bytes; bucket 0 holds empty
/// messages), as text: `0`, `1`, `2`, `4`, ..., `1K`, ...
pub fn bucket_label(b: usize) -> String {
    fn sz(n: u64) -> String {
        match n {
            n if n >= 1 << 30 => format!("{}G", n >> 30),
            n if n >= 1 << 20 => format!("{}M", n >> 20),
            n if n >= 1 << 10 => format!("{}K", n >> 10),
            n => n.to_string(),
        }
    }
    match b {
        0 => "0".into(),
        b => sz(1 << (b - 1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RANK0: &str = "rank\t0\nsize\t2\nhost\th\nwall_ns\t1000\nwait_ns\t100\neager_limit\t4096\n\
peer\t0\tself\t0\t0\t0\t0\t0\t0\t0\t0\npeer\t1\tsm\t3\t300\t1\t8\t2\t1\t0\t1\n\
sizes\t0,0,0,0,0,0,0,2,1\nfunc\tMPI_Send\t3\t600\t0,0,0,0,0,0,0,0,0,3\ncoll\tcoll_sm_barrier_calls\t1\ncoll\tcoll_tuned_bcast_linear_calls\t0\n";

    #[test]
    fn parses_and_aggregates() {
        let r0 = parse_rank(RANK0, Path::new("rank-0.tsv")).unwrap();
        assert_eq!((r0.rank, r0.size, r0.host.as_str()), (0, 2, "h"));
        assert_eq!(r0.links[1].bytes_sent, 300);
        assert_eq!(r0.mpi_ns(), 600);
        let mut r1 = r0.clone();
        r1.rank = 1;
        r1.funcs.get_mut("MPI_Send").unwrap().total_ns = 200;
        let p = Profile {
            ranks: vec![r0, r1],
        };
        assert_eq!(p.byte_matrix(), vec![vec![0, 300], vec![0, 300]]);
        assert_eq!(p.sizes()[7], 4);
        assert_eq!(p.funcs()["MPI_Send"], (6, 800));
        assert_eq!(p.colls().len(), 1);
        assert!((p.imbalance() - 1.5).abs() < 1e-9);
        assert_eq!(
            (0..4)
                .chain([11, 21, 31])
                .map(bucket_label)
                .collect::<Vec<_>>(),
            ["0", "1", "2", "4", "1K", "1M", "1G"]
        );
    }

    #[test]
    fn malformed_lines_name_file_and_line() {
        let e = parse_rank("rank\t0\npeer\tx\n", Path::new("rank-0.tsv")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "rank-0.tsv:2: malformed profile record \"peer\tx\""
        );
    }
}
