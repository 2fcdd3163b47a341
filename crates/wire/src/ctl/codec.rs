//! Binary encoding of control-channel frames and messages (hand-rolled, big-endian).
//!
//! Frame: `len: u32` (bytes after this field) · `kind: u8` · payload. Strings and byte
//! strings are `u32` length + bytes; vectors are `u32` count + items. Decoding never trusts a
//! length beyond the bytes actually present, so hostile input cannot make it allocate more
//! than the frame it already holds.

/// Frame kinds.
pub(crate) mod kind {
    pub const HELLO: u8 = 1;
    pub const CHALLENGE: u8 = 2;
    pub const RESPONSE: u8 = 3;
    pub const ACCEPTED: u8 = 4;
    pub const MESSAGE: u8 = 16;
}

/// Size of the frame length field.
pub const LEN_FIELD: usize = 4;

/// Decoding errors (a malformed frame from the peer).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The payload ended before a field was complete.
    #[error("frame payload truncated while reading {what}")]
    Short {
        /// Field being read.
        what: &'static str,
    },
    /// Bytes left over after the last field.
    #[error("{0} unexpected trailing bytes in frame")]
    Trailing(usize),
    /// Unknown enum tag.
    #[error("unknown {what} tag {tag}")]
    BadTag {
        /// Which enum.
        what: &'static str,
        /// The tag.
        tag: u8,
    },
    /// A string is not UTF-8.
    #[error("string field {what} is not UTF-8")]
    BadUtf8 {
        /// Field.
        what: &'static str,
    },
    /// A frame of length zero (no kind byte).
    #[error("empty frame")]
    Empty,
}

/// Appends encoded fields to a buffer.
#[derive(Debug, Default)]
pub(crate) struct Enc {
    pub buf: Vec<u8>,
}

impl Enc {
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.u8(u8::from(v))
    }
    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.len(v.len());
        self.buf.extend_from_slice(v);
        self
    }
    pub fn raw(&mut self, v: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(v);
        self
    }
    pub fn str(&mut self, v: &str) -> &mut Self {
        self.bytes(v.as_bytes())
    }
    pub fn len(&mut self, n: usize) -> &mut Self {
        // Frames are bounded far below 4 GiB by the connection's limit.
        self.u32(u32::try_from(n).unwrap_or(u32::MAX))
    }
    pub fn strs(&mut self, v: &[String]) -> &mut Self {
        self.len(v.len());
        for s in v {
            self.str(s);
        }
        self
    }
    pub fn pairs(&mut self, v: &[(String, String)]) -> &mut Self {
        self.len(v.len());
        for (a, b) in v {
            self.str(a).str(b);
        }
        self
    }
    pub fn u32s(&mut self, v: &[u32]) -> &mut Self {
        self.len(v.len());
        for x in v {
            self.u32(*x);
        }
        self
    }
}

/// Reads fields from a frame payload.
#[derive(Debug)]
pub(crate) struct Dec<'a> {
    b: &'a [u8],
}

impl<'a> Dec<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        Dec { b }
    }
    pub fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        if self.b.len() < n {
            return Err(DecodeError::Short { what });
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    pub fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], DecodeError> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    pub fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(self.take(1, what)?[0])
    }
    pub fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }
    pub fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }
    pub fn i32(&mut self, what: &'static str) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array(what)?))
    }
    pub fn u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array(what)?))
    }
    pub fn bool(&mut self, what: &'static str) -> Result<bool, DecodeError> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            tag => Err(DecodeError::BadTag { what, tag }),
        }
    }
    pub fn bytes(&mut self, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let n = self.u32(what)? as usize;
        self.take(n, what)
    }
    pub fn string(&mut self, what: &'static str) -> Result<String, DecodeError> {
        let b = self.bytes(what)?;
        std::str::from_utf8(b)
            .map(str::to_string)
            .map_err(|_| DecodeError::BadUtf8 { what })
    }
    /// A count whose items take at least `min_item` bytes each: bounded by what remains.
    pub fn count(&mut self, min_item: usize, what: &'static str) -> Result<usize, DecodeError> {
        let n = self.u32(what)? as usize;
        if n.saturating_mul(min_item) > self.b.len() {
            return Err(DecodeError::Short { what });
        }
        Ok(n)
    }
    pub fn strs(&mut self, what: &'static str) -> Result<Vec<String>, DecodeError> {
        let n = self.count(4, what)?;
        (0..n).map(|_| self.string(what)).collect()
    }
    pub fn pairs(&mut self, what: &'static str) -> Result<Vec<(String, String)>, DecodeError> {
        let n = self.count(8, what)?;
        (0..n)
            .map(|_| Ok((self.string(what)?, self.string(what)?)))
            .collect()
    }
    pub fn u32s(&mut self, what: &'static str) -> Result<Vec<u32>, DecodeError> {
        let n = self.count(4, what)?;
        (0..n).map(|_| self.u32(what)).collect()
    }
    pub fn end(&self) -> Result<(), DecodeError> {
        if self.b.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::Trailing(self.b.len()))
        }
    }
}

/// Wraps a payload into a frame.
pub(crate) fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(LEN_FIELD + 1 + payload.len());
    let len = u32::try_from(payload.len() + 1).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.push(kind);
    out.extend_from_slice(payload);
    out
}
