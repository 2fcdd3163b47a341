//! The report's data files: `profile.json` (everything, per rank) and CSV tables
//! (`matrix.csv`, `functions.csv`, `sizes.csv`, `ranks.csv`, `collectives.csv`).

use crate::model::{bucket_label, Profile};
use std::fmt::Write as _;

/// A JSON string literal.
fn js(s: &str) -> String {
    let mut o = String::new();
    oxmpi_base::output::json_str(&mut o, s);
    o
}

fn list(v: &[u64]) -> String {
    let items: Vec<String> = v.iter().map(u64::to_string).collect();
    format!("[{}]", items.join(","))
}

/// `profile.json`.
pub fn json(p: &Profile) -> String {
    let mut o = String::from("{\"ranks\":[");
    for (i, r) in p.ranks.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        let _ = write!(
            o,
            "{{\"rank\":{},\"size\":{},\"host\":{},\"wall_ns\":{},\"mpi_ns\":{},\"wait_ns\":{},\"eager_limit\":{},\"sizes\":{},\"links\":[",
            r.rank,
            r.size,
            js(&r.host),
            r.wall_ns,
            r.mpi_ns(),
            r.wait_ns,
            r.eager_limit,
            list(&r.sizes)
        );
        for (j, l) in r.links.iter().enumerate() {
            if j > 0 {
                o.push(',');
            }
            let _ = write!(
                o,
                "{{\"peer\":{},\"transport\":{},\"msgs_sent\":{},\"bytes_sent\":{},\"msgs_recv\":{},\"bytes_recv\":{},\"eager\":{},\"rendezvous\":{},\"single_copy_recv\":{},\"pipelined_recv\":{}}}",
                l.peer,
                js(&l.transport),
                l.msgs_sent,
                l.bytes_sent,
                l.msgs_recv,
                l.bytes_recv,
                l.eager,
                l.rndv,
                l.single_copy_recv,
                l.pipelined_recv
            );
        }
        o.push_str("],\"functions\":{");
        for (j, (name, f)) in r.funcs.iter().enumerate() {
            if j > 0 {
                o.push(',');
            }
            let _ = write!(
                o,
                "{}:{{\"count\":{},\"total_ns\":{},\"histogram_log2_ns\":{}}}",
                js(name),
                f.count,
                f.total_ns,
                list(&f.hist)
            );
        }
        o.push_str("},\"collectives\":{");
        for (j, (name, n)) in r.colls.iter().enumerate() {
            if j > 0 {
                o.push(',');
            }
            let _ = write!(o, "{}:{n}", js(name));
        }
        o.push_str("}}");
    }
    let _ = writeln!(o, "],\"imbalance\":{:.4}}}", p.imbalance());
    o
}

/// The CSV tables, as (file name, text).
pub fn csvs(p: &Profile) -> Vec<(&'static str, String)> {
    let mut matrix = String::from("src,dst,transport,msgs,bytes\n");
    let mut funcs = String::from("rank,function,count,total_s\n");
    let mut ranks = String::from("rank,host,wall_s,mpi_s,compute_s,wait_s\n");
    let mut colls = String::from("rank,algorithm,runs\n");
    for r in &p.ranks {
        for l in r.links.iter().filter(|l| l.msgs_sent > 0) {
            let _ = writeln!(
                matrix,
                "{},{},{},{},{}",
                r.rank, l.peer, l.transport, l.msgs_sent, l.bytes_sent
            );
        }
        for (name, f) in &r.funcs {
            let _ = writeln!(
                funcs,
                "{},{name},{},{:.9}",
                r.rank,
                f.count,
                f.total_ns as f64 / 1e9
            );
        }
        let (wall, mpi) = (r.wall_ns as f64 / 1e9, r.mpi_ns() as f64 / 1e9);
        let _ = writeln!(
            ranks,
            "{},{},{wall:.9},{mpi:.9},{:.9},{:.9}",
            r.rank,
            r.host,
            (wall - mpi).max(0.0),
            r.wait_ns as f64 / 1e9
        );
        for (name, n) in r.colls.iter().filter(|(_, n)| **n > 0) {
            let _ = writeln!(colls, "{},{name},{n}", r.rank);
        }
    }
    let mut sizes = String::from("bucket_min_bytes,messages\n");
    for (b, n) in p.sizes().iter().enumerate().filter(|(_, n)| **n > 0) {
        let _ = writeln!(sizes, "{},{n}", bucket_label(b));
    }
    vec![
        ("matrix.csv", matrix),
        ("functions.csv", funcs),
        ("sizes.csv", sizes),
        ("ranks.csv", ranks),
        ("collectives.csv", colls),
    ]
}

/// Standard base64 of `data` (for the page's embedded images).
pub fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut o = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= c.len() {
                o.push(A[(n >> shift & 63) as usize] as char);
            } else {
                o.push('=');
            }
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_and_json_strings() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(js("a\"b\\\n"), "\"a\\\"b\\\\\\n\"");
    }
}
