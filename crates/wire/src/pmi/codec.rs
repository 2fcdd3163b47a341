//! PMI-1 and PMI-2 message representation, encoding and incremental decoding.
//!
//! The two wire formats (see the module documentation of [`crate::pmi`]):
//!
//! * PMI-1: one line `cmd=<name> key=value ...\n`, pairs separated by spaces, no escaping;
//!   the spawn command uses a multi-line block `mcmd=spawn\n key=value\n ... endcmd\n`.
//! * PMI-2: a 6-byte ASCII length header (space padded, either side) followed by a body
//!   `cmd=<name>;key=value;...` with `;` inside values doubled (`;;`).
//!
//! [`Decoder`] accepts bytes in arbitrary chunks and yields complete [`Frame`]s; it detects
//! the framing per message like Hydra does (a message starting with `cmd=`/`mcmd=` is PMI-1,
//! one starting with a digit is a PMI-2 length header).

use std::fmt;

/// Maximum PMI-1 line length including the trailing `\n` (MPICH's `PMIU_MAXLINE`).
pub const PMI1_MAX_LINE: usize = 1024;
/// Default maximum PMI-2 body length accepted by [`Decoder`].
pub const PMI2_MAX_BODY: usize = 64 * 1024;
/// Maximum total size of a PMI-1 multi-line (`mcmd=`) block accepted by [`Decoder`].
pub const PMI1_MAX_BLOCK: usize = 64 * 1024;
/// Length of the PMI-2 length header.
pub const PMI2_HEADER_LEN: usize = 6;

/// How a message is framed on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Framing {
    /// PMI-1 single line (`cmd=... k=v\n`).
    V1,
    /// PMI-1 multi-line block (`mcmd=<name>\n k=v\n ... endcmd\n`), used by `spawn`.
    V1Multi,
    /// PMI-2 length-prefixed frame (`<len:6>cmd=...;k=v;`).
    V2,
}

/// Errors found while decoding or encoding PMI messages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// A PMI-1 line (or multi-line block) is longer than the limit.
    #[error("PMI-1 line longer than {limit} bytes")]
    LineTooLong {
        /// The limit that was exceeded.
        limit: usize,
    },
    /// A PMI-2 length header announces a body longer than the limit.
    #[error("PMI-2 frame of {len} bytes exceeds the limit of {limit} bytes")]
    FrameTooLong {
        /// Announced body length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// A PMI-2 length header is not a space-padded decimal number.
    #[error("bad PMI-2 length header {header:?}")]
    BadHeader {
        /// The 6 header bytes (lossily decoded).
        header: String,
    },
    /// A message does not begin with `cmd=` (or `mcmd=` for PMI-1 blocks).
    #[error("message does not start with cmd=: {start:?}")]
    MissingCmd {
        /// The beginning of the offending message.
        start: String,
    },
    /// The byte at the start of a message fits neither framing.
    #[error("unexpected byte {byte:#04x} at the start of a PMI message")]
    UnexpectedStart {
        /// The offending byte.
        byte: u8,
    },
    /// A token is not of the form `key=value` or has an empty key.
    #[error("malformed key=value pair {token:?}")]
    MalformedPair {
        /// The offending token.
        token: String,
    },
    /// A message is not valid UTF-8 or contains a NUL byte.
    #[error("PMI message contains invalid UTF-8 or NUL bytes")]
    InvalidText,
    /// The peer closed the connection in the middle of a message.
    #[error("peer closed the connection mid-message ({buffered} bytes of an incomplete message buffered)")]
    Truncated {
        /// Number of bytes of the incomplete message.
        buffered: usize,
    },
    /// A key or value cannot be represented in the requested framing.
    #[error("cannot encode {what} {text:?} in {framing:?} framing")]
    Unencodable {
        /// `"key"`, `"value"` or `"command"`.
        what: &'static str,
        /// The offending text.
        text: String,
        /// The framing.
        framing: Framing,
    },
}

/// One PMI message: a command name and ordered `key=value` pairs (excluding `cmd`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Message {
    /// Command name (the value of `cmd=` or `mcmd=`).
    pub cmd: String,
    /// The other pairs in wire order. Duplicate keys are kept (spawn uses ordered pairs).
    pub pairs: Vec<(String, String)>,
}

impl Message {
    /// A message with command `cmd` and no pairs.
    pub fn new(cmd: impl Into<String>) -> Self {
        Message {
            cmd: cmd.into(),
            pairs: Vec::new(),
        }
    }

    /// Appends `key=value` (builder style).
    #[must_use]
    pub fn with(mut self, key: impl Into<String>, value: impl ToString) -> Self {
        self.pairs.push((key.into(), value.to_string()));
        self
    }

    /// Appends `key=value`.
    pub fn push(&mut self, key: impl Into<String>, value: impl ToString) {
        self.pairs.push((key.into(), value.to_string()));
    }

    /// The first value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The value of `rc` as an integer; absent means success (0). A non-numeric `rc` is -1.
    pub fn rc(&self) -> i32 {
        match self.get("rc") {
            None => 0,
            Some(v) => v.trim().parse().unwrap_or(-1),
        }
    }

    /// Encodes as a PMI-1 line `cmd=<cmd> k=v ...\n`.
    pub fn encode_v1(&self) -> Result<Vec<u8>, CodecError> {
        check_v1_token("command", &self.cmd, false)?;
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(b"cmd=");
        out.extend_from_slice(self.cmd.as_bytes());
        for (k, v) in &self.pairs {
            check_v1_token("key", k, true)?;
            check_v1_token("value", v, false)?;
            out.push(b' ');
            out.extend_from_slice(k.as_bytes());
            out.push(b'=');
            out.extend_from_slice(v.as_bytes());
        }
        out.push(b'\n');
        Ok(out)
    }

    /// Encodes as a PMI-1 multi-line block `mcmd=<cmd>\nk=v\n...endcmd\n`.
    /// Values may contain spaces here but not newlines.
    pub fn encode_v1_multi(&self) -> Result<Vec<u8>, CodecError> {
        let bad = |what, t: &str, is_key: bool| {
            if t.contains('\n') || t.contains('\0') || (is_key && (t.is_empty() || t.contains('=')))
            {
                Err(CodecError::Unencodable {
                    what,
                    text: t.to_string(),
                    framing: Framing::V1Multi,
                })
            } else {
                Ok(())
            }
        };
        bad("command", &self.cmd, false)?;
        let mut out = format!("mcmd={}\n", self.cmd).into_bytes();
        for (k, v) in &self.pairs {
            bad("key", k, true)?;
            bad("value", v, false)?;
            out.extend_from_slice(format!("{k}={v}\n").as_bytes());
        }
        out.extend_from_slice(b"endcmd\n");
        Ok(out)
    }

    /// Encodes as a PMI-2 frame: left-justified 6-byte length header (`%-6d`) and body
    /// `cmd=<cmd>;k=v;...`, with `;` in values doubled as MPICH's client does.
    pub fn encode_v2(&self) -> Result<Vec<u8>, CodecError> {
        let check_key = |what, t: &str| {
            if t.is_empty() || t.contains(['=', ';', '\0']) {
                Err(CodecError::Unencodable {
                    what,
                    text: t.to_string(),
                    framing: Framing::V2,
                })
            } else {
                Ok(())
            }
        };
        check_key("command", &self.cmd)?;
        let mut body = String::with_capacity(64);
        body.push_str("cmd=");
        body.push_str(&self.cmd);
        body.push(';');
        for (k, v) in &self.pairs {
            check_key("key", k)?;
            if v.contains('\0') {
                return Err(CodecError::Unencodable {
                    what: "value",
                    text: v.clone(),
                    framing: Framing::V2,
                });
            }
            body.push_str(k);
            body.push('=');
            body.push_str(&v.replace(';', ";;"));
            body.push(';');
        }
        if body.len() > 999_999 {
            return Err(CodecError::FrameTooLong {
                len: body.len(),
                limit: 999_999,
            });
        }
        let mut out = format!("{:<6}", body.len()).into_bytes();
        out.extend_from_slice(body.as_bytes());
        Ok(out)
    }

    /// Encodes in the given framing.
    pub fn encode(&self, framing: Framing) -> Result<Vec<u8>, CodecError> {
        match framing {
            Framing::V1 => self.encode_v1(),
            Framing::V1Multi => self.encode_v1_multi(),
            Framing::V2 => self.encode_v2(),
        }
    }

    /// Parses one PMI-1 line (with or without its trailing `\n`).
    pub fn parse_v1_line(line: &[u8]) -> Result<Message, CodecError> {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let text = to_text(line)?;
        let mut tokens = text.split(' ').filter(|t| !t.is_empty());
        let first = tokens.next().unwrap_or("");
        let cmd = first
            .strip_prefix("cmd=")
            .ok_or_else(|| CodecError::MissingCmd {
                start: prefix(text),
            })?;
        let mut msg = Message::new(cmd);
        for tok in tokens {
            let (k, v) = split_pair(tok)?;
            msg.push(k, v);
        }
        Ok(msg)
    }

    /// Parses a PMI-1 multi-line block (`mcmd=...\n ... endcmd\n`).
    pub fn parse_v1_multi(block: &[u8]) -> Result<Message, CodecError> {
        let text = to_text(block)?;
        let mut lines = text.split('\n').map(|l| l.trim_start_matches(' '));
        let first = lines.next().unwrap_or("");
        let cmd = first
            .trim_end_matches(' ')
            .strip_prefix("mcmd=")
            .ok_or_else(|| CodecError::MissingCmd {
                start: prefix(text),
            })?;
        let mut msg = Message::new(cmd);
        for line in lines {
            if line.trim_end_matches(' ') == "endcmd" {
                return Ok(msg);
            }
            if line.is_empty() {
                continue;
            }
            let (k, v) = split_pair(line)?;
            msg.push(k, v);
        }
        Err(CodecError::MalformedPair {
            token: "missing endcmd".into(),
        })
    }

    /// Parses a PMI-2 body (without the length header), un-escaping `;;`.
    pub fn parse_v2_body(body: &[u8]) -> Result<Message, CodecError> {
        let text = to_text(body)?;
        let mut pairs = Vec::new();
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let rest = &text[i..];
            let eq = rest.find('=').ok_or_else(|| CodecError::MalformedPair {
                token: prefix(rest),
            })?;
            let key = &rest[..eq];
            if key.is_empty() || key.contains(';') {
                return Err(CodecError::MalformedPair {
                    token: prefix(rest),
                });
            }
            let mut j = i + eq + 1;
            let mut value = String::new();
            let mut start = j;
            while j < bytes.len() {
                if bytes[j] == b';' {
                    if bytes.get(j + 1) == Some(&b';') {
                        value.push_str(&text[start..=j]);
                        j += 2;
                        start = j;
                        continue;
                    }
                    break;
                }
                j += 1;
            }
            value.push_str(&text[start..j]);
            pairs.push((key.to_string(), value));
            i = j + 1;
        }
        let mut it = pairs.into_iter();
        match it.next() {
            Some((k, v)) if k == "cmd" => Ok(Message {
                cmd: v,
                pairs: it.collect(),
            }),
            _ => Err(CodecError::MissingCmd {
                start: prefix(text),
            }),
        }
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cmd={}", self.cmd)?;
        for (k, v) in &self.pairs {
            write!(f, " {k}={v}")?;
        }
        Ok(())
    }
}

fn to_text(b: &[u8]) -> Result<&str, CodecError> {
    if b.contains(&0) {
        return Err(CodecError::InvalidText);
    }
    std::str::from_utf8(b).map_err(|_| CodecError::InvalidText)
}

fn prefix(s: &str) -> String {
    s.chars().take(40).collect()
}

fn split_pair(tok: &str) -> Result<(&str, &str), CodecError> {
    match tok.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k, v)),
        _ => Err(CodecError::MalformedPair { token: prefix(tok) }),
    }
}

fn check_v1_token(what: &'static str, t: &str, is_key: bool) -> Result<(), CodecError> {
    let bad = t.contains([' ', '\n', '\0']) || (is_key && (t.is_empty() || t.contains('=')));
    if bad {
        Err(CodecError::Unencodable {
            what,
            text: t.to_string(),
            framing: Framing::V1,
        })
    } else {
        Ok(())
    }
}

/// A decoded message together with its framing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// How the message was framed (replies should use the same framing, except that the
    /// PMI-2 `init` handshake itself is PMI-1).
    pub framing: Framing,
    /// The message.
    pub msg: Message,
}

/// Incremental decoder for one connection (either direction).
///
/// Feed received bytes with [`Decoder::feed`], then call [`Decoder::next_frame`] until it
/// returns `Ok(None)`. When the peer closes, call [`Decoder::finish`] to learn whether it
/// closed in the middle of a message. After an error the decoder is poisoned: every further
/// call returns the same error (the connection should be dropped).
#[derive(Debug, Clone)]
pub struct Decoder {
    buf: Vec<u8>,
    pos: usize,
    max_line: usize,
    max_body: usize,
    error: Option<CodecError>,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder {
    /// A decoder with the default limits ([`PMI1_MAX_LINE`], [`PMI2_MAX_BODY`]).
    pub fn new() -> Self {
        Self::with_limits(PMI1_MAX_LINE, PMI2_MAX_BODY)
    }

    /// A decoder with explicit limits: `max_line` for PMI-1 lines (including `\n`),
    /// `max_body` for PMI-2 bodies.
    pub fn with_limits(max_line: usize, max_body: usize) -> Self {
        Decoder {
            buf: Vec::new(),
            pos: 0,
            max_line,
            max_body,
            error: None,
        }
    }

    /// Appends received bytes.
    pub fn feed(&mut self, data: &[u8]) {
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > 4096 && self.pos * 2 > self.buf.len() {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(data);
    }

    /// Number of buffered bytes not yet decoded.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Decodes the next complete message, `Ok(None)` if more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, CodecError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        let r = self.decode();
        if let Err(e) = &r {
            self.error = Some(e.clone());
        }
        r
    }

    /// Called when the peer closed: an error if an incomplete message is buffered.
    /// (Blank lines and padding spaces do not count as a message.)
    pub fn finish(&self) -> Result<(), CodecError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        let rest = &self.buf[self.pos..];
        if rest.iter().all(|&b| b == b' ' || b == b'\n') {
            Ok(())
        } else {
            Err(CodecError::Truncated {
                buffered: rest.len(),
            })
        }
    }

    fn decode(&mut self) -> Result<Option<Frame>, CodecError> {
        loop {
            let rest = &self.buf[self.pos..];
            // Skip blank lines between PMI-1 messages.
            let Some(first) = rest.iter().position(|&b| b != b' ') else {
                return Ok(None);
            };
            let b = rest[first];
            if b == b'\n' {
                self.pos += first + 1;
                continue;
            }
            if b.is_ascii_digit() {
                return self.decode_v2();
            }
            if b == b'c' || b == b'm' {
                // Need enough bytes to tell "cmd=" from "mcmd=".
                let tail = &rest[first..];
                let is_multi = tail.starts_with(b"mcmd=");
                let ok = tail.starts_with(b"cmd=") || is_multi;
                if !ok {
                    let need = if b == b'c' { 4 } else { 5 };
                    let pat: &[u8] = if b == b'c' { b"cmd=" } else { b"mcmd=" };
                    if tail.len() < need && pat.starts_with(tail) {
                        return Ok(None);
                    }
                    return Err(CodecError::MissingCmd {
                        start: String::from_utf8_lossy(&tail[..tail.len().min(40)]).into(),
                    });
                }
                return if is_multi {
                    self.decode_v1_multi()
                } else {
                    self.decode_v1()
                };
            }
            return Err(CodecError::UnexpectedStart { byte: b });
        }
    }

    fn decode_v1(&mut self) -> Result<Option<Frame>, CodecError> {
        let rest = &self.buf[self.pos..];
        match rest.iter().position(|&b| b == b'\n') {
            Some(nl) if nl < self.max_line => {
                let msg = Message::parse_v1_line(&rest[..nl])?;
                self.pos += nl + 1;
                Ok(Some(Frame {
                    framing: Framing::V1,
                    msg,
                }))
            }
            Some(_) => Err(CodecError::LineTooLong {
                limit: self.max_line,
            }),
            None if rest.len() >= self.max_line => Err(CodecError::LineTooLong {
                limit: self.max_line,
            }),
            None => Ok(None),
        }
    }

    fn decode_v1_multi(&mut self) -> Result<Option<Frame>, CodecError> {
        let rest = &self.buf[self.pos..];
        // Find a line equal to "endcmd" (ignoring surrounding spaces).
        let mut line_start = 0;
        while let Some(off) = rest[line_start..].iter().position(|&b| b == b'\n') {
            let line = &rest[line_start..line_start + off];
            if line.len() >= self.max_line {
                return Err(CodecError::LineTooLong {
                    limit: self.max_line,
                });
            }
            let trimmed: &[u8] = trim_spaces(line);
            let end = line_start + off + 1;
            if trimmed == b"endcmd" {
                let msg = Message::parse_v1_multi(&rest[..end])?;
                self.pos += end;
                return Ok(Some(Frame {
                    framing: Framing::V1Multi,
                    msg,
                }));
            }
            line_start = end;
        }
        if rest.len() >= PMI1_MAX_BLOCK || rest.len() - line_start >= self.max_line {
            return Err(CodecError::LineTooLong {
                limit: self.max_line,
            });
        }
        Ok(None)
    }

    fn decode_v2(&mut self) -> Result<Option<Frame>, CodecError> {
        let rest = &self.buf[self.pos..];
        // A Hydra-style right-justified header starts with spaces: the header is the 6 bytes
        // starting at the first byte of this message, i.e. at self.pos.
        if rest.len() < PMI2_HEADER_LEN {
            // Validate what we have so far so that garbage fails early.
            if !rest.iter().all(|b| b.is_ascii_digit() || *b == b' ') {
                return Err(bad_header(rest));
            }
            return Ok(None);
        }
        let header = &rest[..PMI2_HEADER_LEN];
        let trimmed = trim_spaces(header);
        if trimmed.is_empty() || !trimmed.iter().all(u8::is_ascii_digit) {
            return Err(bad_header(header));
        }
        let len: usize = std::str::from_utf8(trimmed)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad_header(header))?;
        if len > self.max_body {
            return Err(CodecError::FrameTooLong {
                len,
                limit: self.max_body,
            });
        }
        if rest.len() < PMI2_HEADER_LEN + len {
            return Ok(None);
        }
        let msg = Message::parse_v2_body(&rest[PMI2_HEADER_LEN..PMI2_HEADER_LEN + len])?;
        self.pos += PMI2_HEADER_LEN + len;
        Ok(Some(Frame {
            framing: Framing::V2,
            msg,
        }))
    }
}

fn bad_header(h: &[u8]) -> CodecError {
    CodecError::BadHeader {
        header: String::from_utf8_lossy(h).into_owned(),
    }
}

fn trim_spaces(b: &[u8]) -> &[u8] {
    let start = b.iter().position(|&c| c != b' ').unwrap_or(b.len());
    let end = b.iter().rposition(|&c| c != b' ').map_or(start, |e| e + 1);
    &b[start..end.max(start)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(dec: &mut Decoder) -> Vec<Frame> {
        let mut v = Vec::new();
        while let Some(f) = dec.next_frame().unwrap() {
            v.push(f);
        }
        v
    }

    #[test]
    fn v1_roundtrip_and_exact_bytes() {
        let m = Message::new("put")
            .with("kvsname", "7.0")
            .with("key", "addr-0")
            .with("value", "tcp://10.0.0.1:5000");
        assert_eq!(
            m.encode_v1().unwrap(),
            b"cmd=put kvsname=7.0 key=addr-0 value=tcp://10.0.0.1:5000\n"
        );
        let p =
            Message::parse_v1_line(b"cmd=put kvsname=7.0 key=addr-0 value=tcp://10.0.0.1:5000\n")
                .unwrap();
        assert_eq!(p, m);
    }

    #[test]
    fn v1_parse_extra_spaces_and_equals_in_value() {
        let p = Message::parse_v1_line(b"  cmd=get_result   rc=0 value=a=b=c  ").unwrap();
        assert_eq!(p.cmd, "get_result");
        assert_eq!(p.get("rc"), Some("0"));
        assert_eq!(p.get("value"), Some("a=b=c"));
        assert_eq!(p.rc(), 0);
        let e = Message::parse_v1_line(b"cmd=x rc=-1 msg=key_k_not_found value=unknown").unwrap();
        assert_eq!(e.rc(), -1);
        let empty = Message::parse_v1_line(b"cmd=put key=k value=").unwrap();
        assert_eq!(empty.get("value"), Some(""));
    }

    #[test]
    fn v1_rejects_bad_lines_and_values() {
        assert!(matches!(
            Message::parse_v1_line(b"put key=a\n"),
            Err(CodecError::MissingCmd { .. })
        ));
        assert!(matches!(
            Message::parse_v1_line(b"cmd=put space\n"),
            Err(CodecError::MalformedPair { .. })
        ));
        assert!(matches!(
            Message::parse_v1_line(b"cmd=put =v\n"),
            Err(CodecError::MalformedPair { .. })
        ));
        assert!(matches!(
            Message::new("put").with("value", "has space").encode_v1(),
            Err(CodecError::Unencodable { what: "value", .. })
        ));
        assert!(Message::parse_v1_line(b"cmd=a k=\xff\n").is_err());
    }

    #[test]
    fn v2_exact_bytes_and_header_paddings() {
        let m = Message::new("fullinit")
            .with("pmijobid", "6.0")
            .with("pmirank", 0)
            .with("threaded", "FALSE");
        assert_eq!(
            m.encode_v2().unwrap(),
            b"51    cmd=fullinit;pmijobid=6.0;pmirank=0;threaded=FALSE;"
        );
        let mut d = Decoder::new();
        d.feed(b"51    cmd=fullinit;pmijobid=6.0;pmirank=0;threaded=FALSE;");
        d.feed(b"    59cmd=job-getid-response;jobid=kvs_1084_0_1990651075_vm;rc=0;");
        let f = all(&mut d);
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].msg, m);
        assert_eq!(f[0].framing, Framing::V2);
        assert_eq!(f[1].msg.cmd, "job-getid-response");
        assert_eq!(f[1].msg.get("jobid"), Some("kvs_1084_0_1990651075_vm"));
        assert_eq!(f[1].msg.rc(), 0);
        d.finish().unwrap();
    }

    #[test]
    fn v2_semicolon_escaping_roundtrip() {
        let m = Message::new("kvs-put")
            .with("key", "k")
            .with("value", "a;b;;c=d e");
        let enc = m.encode_v2().unwrap();
        assert_eq!(&enc[6..], b"cmd=kvs-put;key=k;value=a;;b;;;;c=d e;");
        let mut d = Decoder::new();
        d.feed(&enc);
        assert_eq!(d.next_frame().unwrap().unwrap().msg, m);
        // Missing final ';' is tolerated, empty values are kept.
        let p = Message::parse_v2_body(b"cmd=kvs-get-response;rc=0;found=FALSE;value=").unwrap();
        assert_eq!(p.get("found"), Some("FALSE"));
        assert_eq!(p.get("value"), Some(""));
        assert!(matches!(
            Message::parse_v2_body(b"key=v;cmd=x;"),
            Err(CodecError::MissingCmd { .. })
        ));
        assert!(Message::parse_v2_body(b"cmd=x;novalue;").is_err());
    }

    #[test]
    fn decoder_byte_by_byte_mixed_framings() {
        let mut stream = Vec::new();
        stream.extend_from_slice(b"cmd=init pmi_version=2 pmi_subversion=0\n");
        stream.extend_from_slice(b"14    cmd=kvs-fence;");
        stream.extend_from_slice(b"\ncmd=barrier_in\n");
        stream.extend_from_slice(b"mcmd=spawn\nnprocs=2\nexecname=/bin/a b\nendcmd\n");
        stream.extend_from_slice(b"   113cmd=fullinit-response;pmi-version=2;pmi-subversion=0;rank=0;size=2;appnum=0;debugged=FALSE;pmiverbose=FALSE;rc=0;");
        let mut d = Decoder::new();
        let mut got = Vec::new();
        for b in &stream {
            d.feed(std::slice::from_ref(b));
            got.extend(all(&mut d));
        }
        let kinds: Vec<_> = got
            .iter()
            .map(|f| (f.framing, f.msg.cmd.as_str()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (Framing::V1, "init"),
                (Framing::V2, "kvs-fence"),
                (Framing::V1, "barrier_in"),
                (Framing::V1Multi, "spawn"),
                (Framing::V2, "fullinit-response"),
            ]
        );
        assert_eq!(got[3].msg.get("execname"), Some("/bin/a b"));
        assert_eq!(got[4].msg.get("size"), Some("2"));
        d.finish().unwrap();
    }

    #[test]
    fn decoder_truncation_is_reported() {
        let mut d = Decoder::new();
        d.feed(b"cmd=barrier_in\ncmd=put key=a");
        assert_eq!(d.next_frame().unwrap().unwrap().msg.cmd, "barrier_in");
        assert_eq!(d.next_frame().unwrap(), None);
        assert_eq!(d.finish(), Err(CodecError::Truncated { buffered: 13 }));
        let mut d = Decoder::new();
        d.feed(b"20    cmd=kvs");
        assert_eq!(d.next_frame().unwrap(), None);
        assert_eq!(d.finish(), Err(CodecError::Truncated { buffered: 13 }));
        let mut d = Decoder::new();
        d.feed(b"20 ");
        assert_eq!(d.next_frame().unwrap(), None);
        assert!(d.finish().is_err());
    }

    #[test]
    fn decoder_oversize_and_garbage() {
        let mut d = Decoder::new();
        let mut long = b"cmd=put key=k value=".to_vec();
        long.extend(std::iter::repeat_n(b'A', 2000));
        d.feed(&long);
        assert_eq!(
            d.next_frame(),
            Err(CodecError::LineTooLong {
                limit: PMI1_MAX_LINE
            })
        );
        // Poisoned afterwards.
        d.feed(b"\ncmd=barrier_in\n");
        assert!(d.next_frame().is_err());

        let mut d = Decoder::with_limits(1024, 100);
        d.feed(b"101   ");
        assert_eq!(
            d.next_frame(),
            Err(CodecError::FrameTooLong {
                len: 101,
                limit: 100
            })
        );
        for garbage in [
            &b"GET / HTTP/1.1\r\n"[..],
            b"\x16\x03\x01",
            b"12a456cmd",
            b"cmx=1\n",
            b"m\x00",
        ] {
            let mut d = Decoder::new();
            d.feed(garbage);
            assert!(d.next_frame().is_err(), "{garbage:?}");
        }
        // A prefix of "cmd=" is not an error yet.
        let mut d = Decoder::new();
        d.feed(b"cm");
        assert_eq!(d.next_frame().unwrap(), None);
    }

    #[test]
    fn multi_block_roundtrip() {
        let m = Message::new("spawn")
            .with("nprocs", 2)
            .with("execname", "/bin/x")
            .with("arg1", "hello world")
            .with("argcnt", 1);
        let enc = m.encode_v1_multi().unwrap();
        assert!(enc.starts_with(b"mcmd=spawn\nnprocs=2\n"));
        assert!(enc.ends_with(b"argcnt=1\nendcmd\n"));
        let mut d = Decoder::new();
        d.feed(&enc);
        let f = d.next_frame().unwrap().unwrap();
        assert_eq!(f.framing, Framing::V1Multi);
        assert_eq!(f.msg, m);
    }
}

#[cfg(test)]
mod prop {
    use super::*;
    use proptest::prelude::*;

    fn message(value_chars: &'static str) -> impl Strategy<Value = Message> {
        (
            "[a-z_-]{1,12}",
            proptest::collection::vec(("[a-zA-Z0-9_-]{1,10}", value_chars), 0..6),
        )
            .prop_map(|(cmd, pairs)| Message { cmd, pairs })
    }

    proptest! {
        /// Encode → decode is the identity for PMI-1 and PMI-2, for any chunking.
        #[test]
        fn roundtrip_any_chunking(
            m1 in message("[!-~&&[^ ]]{0,20}"),
            m2 in message("[ -~]{0,20}"),
            chunk in 1usize..40,
        ) {
            let mut stream = m1.encode_v1().unwrap();
            stream.extend(m2.encode_v2().unwrap());
            let mut d = Decoder::new();
            let mut got = Vec::new();
            for c in stream.chunks(chunk) {
                d.feed(c);
                while let Some(f) = d.next_frame().unwrap() {
                    got.push(f);
                }
            }
            d.finish().unwrap();
            prop_assert_eq!(got.len(), 2);
            prop_assert_eq!(&got[0].msg, &m1);
            prop_assert_eq!(got[0].framing, Framing::V1);
            prop_assert_eq!(&got[1].msg, &m2);
            prop_assert_eq!(got[1].framing, Framing::V2);
        }

        /// Arbitrary bytes never panic the decoder; an error is sticky.
        #[test]
        fn arbitrary_bytes(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut d = Decoder::new();
            d.feed(&data);
            loop {
                match d.next_frame() {
                    Ok(Some(_)) => continue,
                    Ok(None) => break,
                    Err(e) => {
                        prop_assert_eq!(d.next_frame(), Err(e));
                        break;
                    }
                }
            }
            let _ = d.finish();
        }
    }
}
