//! An in-process model of a libfabric endpoint's tagged matching, for deterministic tests
//! of the offload's rules (like `btl/fake` for the protocol): posted receives and
//! unexpected messages matched by libfabric's rules, `FI_DIRECTED_RECV`, `FI_PEEK` and
//! `FI_CLAIM`, `fi_cancel`, truncation, and a completion queue the test drains in any
//! order it likes (providers complete operations out of order: a large message matched
//! first may complete after a small one matched later).
//!
//! Semantics modelled (`fi_tagged(3)`, with `FI_ORDER_SAS`): a message that arrives is
//! matched against the posted receives in the order they were posted, else kept as
//! unexpected; a receive that is posted is matched against the unexpected messages in
//! their arrival order, else kept posted; messages of one sender arrive in the order sent.
//! A receive matches when its tag equals the message's outside its ignore bits and, if it
//! names a source, the message comes from there.

use std::collections::VecDeque;

use super::ofi::completion::{Cq, FI_ECANCELED, FI_ETRUNC};
use super::ofi::tag::Pattern;

/// A message kept unexpected.
#[derive(Debug, Clone)]
struct Msg {
    from: u32,
    bits: u64,
    data: Vec<u8>,
    /// Claimed by a peek with `FI_CLAIM` (hidden from every other receive).
    claimed: Option<u64>,
}

/// A posted receive.
#[derive(Debug, Clone)]
struct Posted {
    id: u64,
    from: Option<u32>,
    pat: Pattern,
    cap: usize,
}

/// A completion the test reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The receive's id (its operation context).
    pub id: u64,
    /// The entry.
    pub cq: Cq,
    /// The bytes placed in its buffer.
    pub data: Vec<u8>,
    /// The sender's address.
    pub from: Option<u32>,
}

/// A peek's answer (`FI_PEEK`): the first message a receive would take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peeked {
    /// Its tag bits.
    pub bits: u64,
    /// Its length.
    pub len: usize,
    /// The sender's address.
    pub from: u32,
}

/// One endpoint's receive side.
#[derive(Debug, Default)]
pub struct FakeTagged {
    posted: Vec<Posted>,
    unexpected: VecDeque<Msg>,
    done: Vec<Completion>,
    /// Matches so far, in match order: (receive id, sender, the message's first 8 bytes
    /// as a little-endian number, by which tests number their messages).
    pub matches: Vec<(u64, u32, u64)>,
}

fn takes(from: Option<u32>, pat: &Pattern, msg_from: u32, bits: u64) -> bool {
    from.is_none_or(|f| f == msg_from) && pat.matches(bits)
}

impl FakeTagged {
    /// An endpoint with nothing posted.
    pub fn new() -> FakeTagged {
        FakeTagged::default()
    }

    /// Completes receive `p` with message `m`.
    fn deliver(&mut self, p: Posted, m: Msg) {
        let n = m.data.len().min(p.cap);
        let cq = if m.data.len() > p.cap {
            Cq::Err {
                errno: FI_ETRUNC,
                tag: m.bits,
                len: n,
                olen: m.data.len() - n,
            }
        } else {
            Cq::Ok {
                tag: m.bits,
                len: n,
            }
        };
        let idx = u64::from_le_bytes(
            m.data
                .get(..8)
                .map_or([0; 8], |b| b.try_into().expect("8 bytes")),
        );
        self.matches.push((p.id, m.from, idx));
        self.done.push(Completion {
            id: p.id,
            cq,
            data: m.data[..n].to_vec(),
            from: Some(m.from),
        });
    }

    /// A message `data` with tag `bits` from address `from` arrives.
    pub fn arrive(&mut self, from: u32, bits: u64, data: &[u8]) {
        let m = Msg {
            from,
            bits,
            data: data.to_vec(),
            claimed: None,
        };
        match self
            .posted
            .iter()
            .position(|p| takes(p.from, &p.pat, from, bits))
        {
            Some(i) => {
                let p = self.posted.remove(i);
                self.deliver(p, m);
            }
            None => self.unexpected.push_back(m),
        }
    }

    /// Posts receive `id` (`fi_trecv`) of at most `cap` bytes from `from` (`None`:
    /// `FI_ADDR_UNSPEC`) matching `pat`.
    pub fn recv(&mut self, id: u64, from: Option<u32>, pat: Pattern, cap: usize) {
        let p = Posted { id, from, pat, cap };
        match self
            .unexpected
            .iter()
            .position(|m| m.claimed.is_none() && takes(from, &pat, m.from, m.bits))
        {
            Some(i) => {
                let m = self.unexpected.remove(i).expect("found");
                self.deliver(p, m);
            }
            None => self.posted.push(p),
        }
    }

    /// `FI_PEEK` (with `FI_CLAIM` when `claim` is `Some(id)`, the claim's context):
    /// the first unexpected message the receive would take, left in place (claimed: hidden
    /// from other receives until [`FakeTagged::claimed_recv`] takes it).
    pub fn peek(&mut self, from: Option<u32>, pat: Pattern, claim: Option<u64>) -> Option<Peeked> {
        let m = self
            .unexpected
            .iter_mut()
            .find(|m| m.claimed.is_none() && takes(from, &pat, m.from, m.bits))?;
        m.claimed = claim;
        Some(Peeked {
            bits: m.bits,
            len: m.data.len(),
            from: m.from,
        })
    }

    /// The receive (`FI_CLAIM`) of the message claimed under `claim`, into receive `id`.
    pub fn claimed_recv(&mut self, id: u64, claim: u64, cap: usize) -> bool {
        let Some(i) = self
            .unexpected
            .iter()
            .position(|m| m.claimed == Some(claim))
        else {
            return false;
        };
        let m = self.unexpected.remove(i).expect("found");
        let p = Posted {
            id,
            from: Some(m.from),
            pat: Pattern {
                bits: m.bits,
                ignore: 0,
            },
            cap,
        };
        self.deliver(p, m);
        true
    }

    /// `fi_cancel` of receive `id`: `true` if it was still posted (it completes with
    /// `FI_ECANCELED`), `false` if it had matched.
    pub fn cancel(&mut self, id: u64) -> bool {
        let Some(i) = self.posted.iter().position(|p| p.id == id) else {
            return false;
        };
        self.posted.remove(i);
        self.done.push(Completion {
            id,
            cq: Cq::Err {
                errno: FI_ECANCELED,
                tag: 0,
                len: 0,
                olen: 0,
            },
            data: Vec::new(),
            from: None,
        });
        true
    }

    /// Takes the completions so far, in the order `perm` gives (a permutation seed:
    /// `0` keeps match order, others shuffle deterministically).
    pub fn completions(&mut self, perm: u64) -> Vec<Completion> {
        let mut out = std::mem::take(&mut self.done);
        if perm != 0 {
            let mut x = perm;
            for i in (1..out.len()).rev() {
                // xorshift64: deterministic, no dependency.
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                out.swap(i, (x % (i as u64 + 1)) as usize);
            }
        }
        out
    }

    /// Receives still posted.
    pub fn posted(&self) -> usize {
        self.posted.len()
    }

    /// Messages still unexpected.
    pub fn unexpected(&self) -> usize {
        self.unexpected.len()
    }
}
