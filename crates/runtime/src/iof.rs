//! IO forwarding core (sans-IO): turns the byte stream of one rank's stdout or stderr into
//! whole, optionally tagged/timestamped lines. The event loop feeds bytes in and writes the
//! produced lines with one `write` per batch, so two ranks' bytes never share a line.

/// Which output stream of a rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

impl Stream {
    /// `stdout` / `stderr`.
    pub fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// Lines longer than this are forwarded in pieces (each piece ends with a newline).
pub const MAX_LINE: usize = 1 << 20;

/// Reassembles lines of one (rank, stream) and formats them.
#[derive(Debug)]
pub struct LineAssembler {
    partial: Vec<u8>,
    /// `[jobid,rank]<stream>:` (empty without `--tag-output` and `--timestamp-output`).
    tag: Vec<u8>,
    timestamp: bool,
}

impl LineAssembler {
    /// `tag`: `Some((jobid, rank))` for `--tag-output`; `timestamp` for `--timestamp-output`.
    pub fn new(stream: Stream, tag: Option<(u32, usize)>, timestamp: bool) -> Self {
        let tag = match (tag, timestamp) {
            (Some((job, rank)), _) => format!("[{job},{rank}]<{}>:", stream.name()).into_bytes(),
            (None, true) => format!("<{}>:", stream.name()).into_bytes(),
            (None, false) => Vec::new(),
        };
        LineAssembler {
            partial: Vec::new(),
            tag,
            timestamp,
        }
    }

    fn prefix(&self, out: &mut Vec<u8>, now: Option<&str>) {
        if let Some(ts) = now {
            out.push(b'[');
            out.extend_from_slice(ts.as_bytes());
            out.push(b']');
        }
        out.extend_from_slice(&self.tag);
    }

    /// Hydra's `-l` / `-prepend-rank` style: every line starts with `[rank] `.
    pub fn with_rank_prefix(rank: usize, timestamp: bool) -> Self {
        LineAssembler {
            partial: Vec::new(),
            tag: format!("[{rank}] ").into_bytes(),
            timestamp,
        }
    }

    /// Feed bytes read from the rank; complete lines are appended to `out`.
    pub fn push(&mut self, data: &[u8], out: &mut Vec<u8>) {
        if self.tag.is_empty() && !self.timestamp {
            // Fast path: pass whole lines through untouched.
            match data.iter().rposition(|&b| b == b'\n') {
                Some(last) => {
                    out.extend_from_slice(&self.partial);
                    self.partial.clear();
                    out.extend_from_slice(&data[..=last]);
                    self.partial.extend_from_slice(&data[last + 1..]);
                }
                None => self.partial.extend_from_slice(data),
            }
        } else {
            let ts = self.timestamp.then(now_utc);
            let mut rest = data;
            while let Some(pos) = rest.iter().position(|&b| b == b'\n') {
                self.prefix(out, ts.as_deref());
                out.extend_from_slice(&self.partial);
                self.partial.clear();
                out.extend_from_slice(&rest[..=pos]);
                rest = &rest[pos + 1..];
            }
            self.partial.extend_from_slice(rest);
        }
        if self.partial.len() >= MAX_LINE {
            self.flush_partial(out);
        }
    }

    fn flush_partial(&mut self, out: &mut Vec<u8>) {
        if self.partial.is_empty() {
            return;
        }
        let ts = self.timestamp.then(now_utc);
        self.prefix(out, ts.as_deref());
        out.extend_from_slice(&self.partial);
        out.push(b'\n');
        self.partial.clear();
    }

    /// End of stream: an unterminated last line is forwarded with a newline added.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        self.flush_partial(out);
    }
}

/// Current UTC time as `YYYY-MM-DDTHH:MM:SS.uuuuuuZ`.
pub fn now_utc() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format_utc(d.as_secs() as i64, d.subsec_micros())
}

/// Format seconds since the epoch (UTC) with microseconds.
pub fn format_utc(secs: i64, micros: u32) -> String {
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{micros:06}Z",
        sod / 3600,
        (sod / 60) % 60,
        sod % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lines_pass_through_and_partials_wait() {
        let mut a = LineAssembler::new(Stream::Stdout, None, false);
        let mut out = Vec::new();
        a.push(b"one\ntw", &mut out);
        assert_eq!(out, b"one\n");
        a.push(b"o\nthr", &mut out);
        assert_eq!(out, b"one\ntwo\n");
        a.push(b"ee", &mut out);
        assert_eq!(out, b"one\ntwo\n");
        a.finish(&mut out);
        assert_eq!(out, b"one\ntwo\nthree\n");
        a.finish(&mut out);
        assert_eq!(out, b"one\ntwo\nthree\n");
    }

    #[test]
    fn tagged_lines() {
        let mut a = LineAssembler::new(Stream::Stderr, Some((1, 3)), false);
        let mut out = Vec::new();
        a.push(b"x\ny", &mut out);
        a.push(b"z\n\n", &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "[1,3]<stderr>:x\n[1,3]<stderr>:yz\n[1,3]<stderr>:\n"
        );
    }

    #[test]
    fn hydra_rank_prefix() {
        let mut a = LineAssembler::with_rank_prefix(12, false);
        let mut out = Vec::new();
        a.push(b"a\nb", &mut out);
        a.finish(&mut out);
        assert_eq!(out, b"[12] a\n[12] b\n");
    }

    #[test]
    fn timestamped_lines_have_a_bracketed_time() {
        let mut a = LineAssembler::new(Stream::Stdout, Some((1, 0)), true);
        let mut out = Vec::new();
        a.push(b"hi\n", &mut out);
        let s = String::from_utf8(out).unwrap();
        assert!(s.starts_with('['), "{s}");
        let (ts, rest) = s[1..].split_once(']').unwrap();
        assert_eq!(ts.len(), "2026-11-30T05:25:07.000000Z".len(), "{ts}");
        assert_eq!(rest, "[1,0]<stdout>:hi\n");
    }

    #[test]
    fn very_long_lines_are_split() {
        let mut a = LineAssembler::new(Stream::Stdout, None, false);
        let mut out = Vec::new();
        a.push(&vec![b'a'; MAX_LINE + 5], &mut out);
        assert_eq!(out.len(), MAX_LINE + 6);
        assert_eq!(out.last(), Some(&b'\n'));
    }

    #[test]
    fn utc_formatting() {
        assert_eq!(format_utc(0, 0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(
            format_utc(951_782_400 + 3661, 42),
            "2000-02-29T01:01:01.000042Z"
        );
        assert_eq!(format_utc(1_796_016_307, 5), "2026-11-30T05:25:07.000005Z");
    }
}
