//! Point-to-point helpers of the algorithms, on the collective context.

use super::comm::{arg_err, CollComm, Result};
use oxmpi_engine::{ReqId, SendMode, Status};

impl CollComm {
    // ---- point-to-point helpers on the shadow ----

    /// # Safety
    /// `p` valid for `len` bytes until the request completes.
    pub(crate) unsafe fn isend_raw(
        &self,
        p: *const u8,
        len: usize,
        dest: i32,
        tag: i32,
    ) -> Result<ReqId> {
        // SAFETY: forwarded caller guarantee.
        unsafe {
            self.e
                .isend(p, len, dest, tag, self.shadow, SendMode::Standard)
        }
    }

    /// [`CollComm::isend_raw`] of a marked message (an error marker, a scan's length
    /// header): its receiver's status shows [`oxmpi_engine::TAG_MARK`] on the tag, so it
    /// tells the message from data of the same length.
    ///
    /// # Safety
    /// `p` valid for `len` bytes until the request completes.
    pub(crate) unsafe fn isend_marked_raw(
        &self,
        p: *const u8,
        len: usize,
        dest: i32,
        tag: i32,
    ) -> Result<ReqId> {
        // SAFETY: forwarded caller guarantee.
        unsafe { self.e.isend_marked(p, len, dest, tag, self.shadow) }
    }

    /// # Safety
    /// `p` valid for writes of `len` bytes until the request completes.
    pub(crate) unsafe fn irecv_raw(
        &self,
        p: *mut u8,
        len: usize,
        src: i32,
        tag: i32,
    ) -> Result<ReqId> {
        // SAFETY: forwarded caller guarantee.
        unsafe { self.e.irecv(p, len, src, tag, self.shadow) }
    }

    pub(crate) fn check(&self, st: Status, what: &str, peer: i32) -> Result<usize> {
        match st.error {
            None => Ok(st.count_bytes),
            Some(class) => Err(arg_err(
                class,
                format!(
                    "collective {what} with rank {peer} failed on rank {} (of {})",
                    self.rank, self.size
                ),
            )),
        }
    }

    /// Waits for every request (all of them, even after an error); the first error wins.
    pub(crate) fn waitall(&self, reqs: &[(ReqId, i32)], what: &str) -> Result<()> {
        let mut res = Ok(());
        for &(r, peer) in reqs {
            let st = self.e.wait(r);
            if res.is_ok() {
                res = self.check(st, what, peer).map(|_| ());
            }
        }
        res
    }

    /// Sends each `(bytes, dest)` of `sends` with `tag`, all posted before any is waited
    /// for; on a failed post, those already posted are abandoned and the error returned.
    pub(crate) fn send_each<'a>(
        &self,
        sends: impl IntoIterator<Item = (&'a [u8], i32)>,
        tag: i32,
        what: &str,
    ) -> Result<()> {
        let mut reqs = Vec::new();
        for (data, dest) in sends {
            // SAFETY: `data` is borrowed for `'a`, which outlives this call, and every
            // request completes (waitall or abandon) before it returns.
            match unsafe { self.isend_raw(data.as_ptr(), data.len(), dest, tag) } {
                Ok(q) => reqs.push((q, dest)),
                Err(e) => {
                    self.abandon(&reqs);
                    return Err(e);
                }
            }
        }
        self.waitall(&reqs, what)
    }

    /// Posts a nonblocking send on `tag` to every rank but `skip`, in rank order, of its
    /// block (`block(i)` for rank `i`; `marked`: marked messages, error markers), and
    /// returns the requests; a failed post abandons those already posted
    /// ([`CollComm::abandon`]) and is returned.
    ///
    /// # Safety
    /// Every block stays valid and unchanged until the requests are waited for.
    pub(crate) unsafe fn isend_blocks<'b>(
        &self,
        skip: i32,
        tag: i32,
        marked: bool,
        block: impl Fn(usize) -> &'b [u8],
    ) -> Result<Vec<(ReqId, i32)>> {
        let mut reqs = Vec::new();
        for i in (0..self.size).filter(|&i| i != skip) {
            let b = block(i as usize);
            // SAFETY: the caller keeps `b` valid and unchanged until the requests are
            // waited for.
            let sent = unsafe {
                if marked {
                    self.isend_marked_raw(b.as_ptr(), b.len(), i, tag)
                } else {
                    self.isend_raw(b.as_ptr(), b.len(), i, tag)
                }
            };
            match sent {
                Ok(q) => reqs.push((q, i)),
                Err(e) => {
                    self.abandon(&reqs);
                    return Err(e);
                }
            }
        }
        Ok(reqs)
    }

    /// Cancels posted receives and waits for all requests (error path).
    pub(crate) fn abandon(&self, reqs: &[(ReqId, i32)]) {
        for &(r, _) in reqs {
            self.e.cancel(r);
        }
        for &(r, _) in reqs {
            self.e.wait(r);
        }
    }

    /// Cancels a posted receive and waits for it (completed cancelled, or matched before
    /// the cancel and then received).
    pub(crate) fn cancel_wait(&self, r: ReqId) {
        self.e.cancel(r);
        self.e.wait(r);
    }

    pub(crate) fn send(&self, buf: &[u8], dest: i32, tag: i32) -> Result<()> {
        // SAFETY: `buf` outlives the wait.
        let r = unsafe { self.isend_raw(buf.as_ptr(), buf.len(), dest, tag) }?;
        let st = self.e.wait(r);
        self.check(st, "send", dest).map(|_| ())
    }

    pub(crate) fn recv(&self, buf: &mut [u8], src: i32, tag: i32) -> Result<usize> {
        // SAFETY: `buf` outlives the wait.
        let r = unsafe { self.irecv_raw(buf.as_mut_ptr(), buf.len(), src, tag) }?;
        let st = self.e.wait(r);
        self.check(st, "receive", src)
    }

    /// # Safety
    /// `s` readable for `slen` bytes, `r` writable for `rlen` bytes, not overlapping.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn sendrecv_raw(
        &self,
        s: *const u8,
        slen: usize,
        dest: i32,
        r: *mut u8,
        rlen: usize,
        src: i32,
        tag: i32,
    ) -> Result<usize> {
        // SAFETY: caller guarantee; both requests are waited for below.
        let rr = unsafe { self.irecv_raw(r, rlen, src, tag) }?;
        // SAFETY: as above.
        let sr = match unsafe { self.isend_raw(s, slen, dest, tag) } {
            Ok(x) => x,
            Err(e) => {
                self.abandon(&[(rr, src)]);
                return Err(e);
            }
        };
        let rst = self.e.wait(rr);
        let sst = self.e.wait(sr);
        let n = self.check(rst, "receive", src)?;
        self.check(sst, "send", dest)?;
        Ok(n)
    }

    pub(crate) fn sendrecv(
        &self,
        s: &[u8],
        dest: i32,
        r: &mut [u8],
        src: i32,
        tag: i32,
    ) -> Result<usize> {
        // SAFETY: distinct borrows, both outlive the call.
        unsafe { self.sendrecv_raw(s.as_ptr(), s.len(), dest, r.as_mut_ptr(), r.len(), src, tag) }
    }

    pub(crate) fn modp(&self, x: i32) -> i32 {
        x.rem_euclid(self.size)
    }
}
