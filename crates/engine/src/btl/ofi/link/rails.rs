//! Rails (`btl_ofi_rails`): more endpoints on the rank's domain, each with its own
//! completion queue and address vector, so that on a connection-based provider
//! (`tcp;ofi_rxm`) every pair of ranks has one connection per rail. A rendezvous read of
//! at least [`RAIL_MIN`] bytes is cut into one piece per endpoint: the first is read over
//! the main endpoint as before, the others are posted at once over the rails, and the
//! read completes only when every piece has (a failed piece fails it). Records, the
//! matching offload and the one-sided operations stay on the main endpoint, so message
//! order is the main endpoint's; the sender learns nothing of the rails (its buffer's
//! registration belongs to the domain, which every rail shares). A manual-progress
//! provider serves reads of a rank's memory only while that rank reads the rail's queue:
//! [`Net::poll_rails`] runs while this rank has buffers offered for a read or a striped
//! read in flight, so the latency path reads the main queue only.

use std::ffi::c_void;

use super::{fi, LinkError, Net, Op, CQ_BATCH, READ};

/// Reads shorter than this are not striped.
pub(super) const RAIL_MIN: usize = 256 << 10;

/// The rails' state in [`Net`].
#[derive(Debug, Default)]
pub(super) struct Rails {
    /// One read context per rail (boxed: the provider holds their addresses).
    #[allow(clippy::vec_box)]
    ops: Vec<Box<Op>>,
    /// Each rail's piece of the striped read: `None` in flight (or none), `Some(None)`
    /// done, `Some(Some(message))` failed.
    done: Vec<Option<Option<String>>>,
    /// A striped read is in flight.
    busy: bool,
    /// Striped reads done, for verbose output at close.
    pub(super) striped: u64,
}

/// The pieces of an `n`-byte read over `1 + rails` endpoints: `(offset, length)` of each,
/// the main endpoint's first; empty pieces are left out.
pub(super) fn pieces(n: usize, rails: usize) -> Vec<(usize, usize)> {
    let k = rails + 1;
    // Whole pages per piece, so pieces do not share a page's cache lines.
    let chunk = n.div_ceil(k).next_multiple_of(4096);
    (0..k)
        .map(|i| (i * chunk, chunk.min(n.saturating_sub(i * chunk))))
        .filter(|&(_, len)| len > 0)
        .collect()
}

impl Net {
    /// Reads every rail's completion queue (the provider's progress there) and records
    /// the completions of the striped read's pieces.
    pub(super) fn poll_rails(&mut self) {
        let rails = self.fab.rails();
        let mut es = [fi::fi_cq_tagged_entry {
            op_context: std::ptr::null_mut(),
            flags: 0,
            len: 0,
            buf: std::ptr::null_mut(),
            data: 0,
            tag: 0,
        }; CQ_BATCH];
        for i in 0..rails {
            let n = self.fab.read_on(i + 1, &mut es);
            let got: Vec<(*mut c_void, Option<String>)> = if n == -fi::FI_EAVAIL {
                self.fab
                    .read_error_on(i + 1)
                    .map(|(e, msg)| (e.op_context, Some(msg)))
                    .into_iter()
                    .collect()
            } else if n < 0 {
                vec![(
                    std::ptr::null_mut(),
                    Some(format!(
                        "fi_cq_read (rail {}): {}",
                        i + 1,
                        self.fab.error(n)
                    )),
                )]
            } else {
                es[..n as usize]
                    .iter()
                    .map(|e| (e.op_context, None))
                    .collect()
            };
            for (ctx, err) in got {
                // A queue's own error fails the piece of its rail.
                let rail = if ctx.is_null() {
                    i
                } else {
                    // SAFETY: the rails' only operations are our reads, whose contexts
                    // are the boxed `Op`s in `self.rails.ops`.
                    unsafe { (*ctx.cast::<Op>()).idx as usize }
                };
                if let Some(d) = self.rails.done.get_mut(rail) {
                    *d = Some(err);
                }
            }
        }
    }

    /// Whether the rails need their queues read now.
    pub(super) fn rails_active(&self) -> bool {
        self.fab.rails() > 0 && (self.rails.busy || !self.offered.is_empty())
    }

    /// Reads the first `n` bytes that peer `p` offered (registration `key`, remote
    /// address `raddr`) into `buf`, striped over the main endpoint (at `src`) and the
    /// rails both sides opened.
    ///
    /// # Safety
    /// `buf` (with `desc`) must be valid for writes of `n` bytes.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn read_striped(
        &mut self,
        p: usize,
        buf: *mut u8,
        n: usize,
        desc: *mut c_void,
        src: fi::FiAddr,
        raddr: u64,
        key: u64,
    ) -> Result<(), LinkError> {
        let addrs = self.peers[p]
            .as_ref()
            .map(|q| q.rails.clone())
            .unwrap_or_default();
        if addrs.is_empty() || n < RAIL_MIN {
            return self.read_pieces(p, buf, n, desc, src, raddr, key);
        }
        while self.rails.ops.len() < addrs.len() {
            let idx = self.rails.ops.len() as u32;
            self.rails.ops.push(Box::new(Op {
                kind: READ,
                idx,
                ..Op::default()
            }));
        }
        self.rails.done = vec![None; addrs.len()];
        self.rails.busy = true;
        let parts = pieces(n, addrs.len());
        let res = self.read_rails(p, buf, desc, &addrs, &parts[1..], raddr, key);
        let res = res.and_then(|()| {
            let (_, first) = parts[0];
            self.read_pieces(p, buf, first, desc, src, raddr, key)
        });
        let res = res.and_then(|()| self.wait_rails(p, parts.len() - 1));
        self.rails.busy = false;
        if res.is_ok() {
            self.rails.striped += 1;
        }
        res
    }

    /// Posts the rails' pieces `parts` (`(offset, length)`, one per rail in order).
    #[allow(clippy::too_many_arguments)]
    fn read_rails(
        &mut self,
        p: usize,
        buf: *mut u8,
        desc: *mut c_void,
        addrs: &[fi::FiAddr],
        parts: &[(usize, usize)],
        raddr: u64,
        key: u64,
    ) -> Result<(), LinkError> {
        for (i, &(off, len)) in parts.iter().enumerate() {
            self.rails.ops[i].peer = p as u32;
            let ctx = std::ptr::addr_of_mut!(*self.rails.ops[i]).cast::<c_void>();
            // SAFETY: buf + off has len writable bytes (the caller's promise); the context
            // is boxed in self; the read is waited for in `wait_rails`.
            unsafe {
                self.post_read(
                    p,
                    i + 1,
                    buf.wrapping_add(off),
                    len,
                    desc,
                    addrs[i],
                    raddr + off as u64,
                    key,
                    ctx,
                )
            }?;
        }
        Ok(())
    }

    /// Waits until the first `k` rails' pieces completed.
    fn wait_rails(&mut self, p: usize, k: usize) -> Result<(), LinkError> {
        loop {
            self.poll_rails();
            if let Some(m) = self.rails.done[..k]
                .iter()
                .find_map(|d| d.as_ref().and_then(Clone::clone))
            {
                return Err(match self.peers[p].as_mut().and_then(|q| q.err.take()) {
                    Some((true, m)) => LinkError::PeerLost(m),
                    _ => LinkError::Fabric(format!("fi_read from rank {p}: {m}")),
                });
            }
            if self.rails.done[..k].iter().all(Option::is_some) {
                return Ok(());
            }
            self.wait_step(p)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_the_read_once_in_whole_pages() {
        for (n, rails) in [
            (RAIL_MIN, 1),
            (1 << 20, 1),
            (1 << 20, 3),
            ((1 << 20) + 13, 2),
            (4097, 3),
        ] {
            let ps = pieces(n, rails);
            assert!(ps.len() <= rails + 1);
            let mut next = 0;
            for &(off, len) in &ps {
                assert_eq!(off, next, "{n} over {rails}: contiguous, in order");
                assert!(len > 0);
                next = off + len;
            }
            assert_eq!(next, n, "{n} over {rails}: every byte once");
            for &(off, _) in &ps {
                assert_eq!(off % 4096, 0);
            }
        }
        assert_eq!(
            pieces(1 << 20, 1),
            vec![(0, 512 << 10), (512 << 10, 512 << 10)]
        );
        // Small reads leave rails out rather than making empty pieces.
        assert_eq!(pieces(4097, 3), vec![(0, 4096), (4096, 1)]);
    }
}
