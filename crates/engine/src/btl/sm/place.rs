//! Whether a peer's CPU is near ours or far, sensed from our eager copies to it.
//!
//! On a VM the two vCPUs of a pair may share a core complex (a cache-line round trip of
//! about 50-130 ns) or not (400-600 ns), and the hypervisor moves them during a run; the
//! guest's CPU topology (`/sys/devices/system/cpu/*/topology`: one package, one L3 for
//! both vCPUs here) says nothing of it. Far, an eager message of 8 KiB costs about three
//! times as much as near, mostly in the sender's copy into the ring: it writes lines the
//! receiver's core read last (about 0.35 us a KiB far, against 0.065 us a KiB for the
//! receiver's copy out). A rendezvous whose receiver reads the send buffer alone
//! (`process_vm_readv`) costs about the same near and far.
//!
//! So the sender times some of its copies of eager messages of at least [`SENSE_MIN`]
//! bytes into the link (one in [`EVERY`], every probe, below, and the next `2 * FLIP`
//! after the belief changed to near): a copy slower than [`FAR_NS_PER_KIB`] a KiB says
//! far, and [`FLIP`] such samples in a row change the belief. While far, a message above
//! `btl_sm_far_eager_limit` and up to the eager limit goes by a rendezvous that the
//! receiver reads alone (a lone one or one of a window alike), except one in
//! [`PROBE_EVERY`], which still goes eagerly and is timed, so that a return to near is
//! seen. Nothing needs the peer's cooperation: a sender that never sends eager messages of
//! that size leaves the belief at near.

/// Eager copies of at least this many bytes are timed.
pub const SENSE_MIN: usize = 4096;

/// A copy into the ring slower than this many nanoseconds a KiB says far.
pub const FAR_NS_PER_KIB: u64 = 200;

/// Samples in a row against the belief that change it.
pub const FLIP: u8 = 2;

/// One eager copy of at least [`SENSE_MIN`] bytes in this many is timed (and every probe).
pub const EVERY: u32 = 16;

/// While far, one send in this many that the belief would turn into a rendezvous goes
/// eagerly (a probe for the peer's sensor).
pub const PROBE_EVERY: u32 = 32;

/// `btl_sm_placement`: whether sends of eager size to a far peer go by rendezvous.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Sensed per peer (this module).
    Auto,
    /// Every peer near: eager up to the eager limit (no timing).
    Near,
    /// Every peer far: rendezvous above `btl_sm_far_eager_limit` (no timing, no probes).
    Far,
}

impl Placement {
    /// The placement of `btl_sm_placement`'s number.
    pub fn from_int(v: i64) -> Placement {
        match v {
            1 => Placement::Near,
            2 => Placement::Far,
            _ => Placement::Auto,
        }
    }
}

/// One peer's sensed placement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Place {
    far: bool,
    /// Samples in a row against `far`.
    against: u8,
    /// Eager copies of at least [`SENSE_MIN`] bytes made.
    copies: u32,
    /// Sends the belief turned into a rendezvous or probed, while far.
    sends: u32,
    /// Samples recorded.
    samples: u32,
    /// Copies still to time after the belief changed to near (a probe's ring lines are
    /// cold, so probes may read near while far: the eager copies that follow tell at
    /// once).
    confirm: u8,
}

impl Place {
    /// Whether the peer is believed far.
    #[inline(always)]
    pub fn far(&self) -> bool {
        self.far
    }

    /// Samples recorded so far.
    pub fn samples(&self) -> u32 {
        self.samples
    }

    /// Whether to time our copy of an eager message of `n` bytes to this peer: one in
    /// [`EVERY`] of at least [`SENSE_MIN`] bytes, and every probe (an eager send of a size
    /// that goes by a read while far: `probe`).
    #[inline(always)]
    pub fn wants(&mut self, n: usize, probe: bool) -> bool {
        if n < SENSE_MIN {
            return false;
        }
        if self.confirm > 0 {
            self.confirm -= 1;
            return true;
        }
        self.copies = self.copies.wrapping_add(1);
        probe || self.copies % EVERY == 0
    }

    /// A timed copy of `n` bytes took `ns` nanoseconds: `true` if the belief changed.
    pub fn record(&mut self, n: usize, ns: u64) -> bool {
        self.samples = self.samples.wrapping_add(1);
        let far = ns.saturating_mul(1024) > FAR_NS_PER_KIB.saturating_mul(n as u64);
        if far == self.far {
            self.against = 0;
            return false;
        }
        self.against += 1;
        if self.against < FLIP {
            return false;
        }
        *self = Place {
            far,
            samples: self.samples,
            confirm: if far { 0 } else { 2 * FLIP },
            ..Place::default()
        };
        true
    }

    /// While far: whether this send of eager size goes by rendezvous (`false` for one in
    /// [`PROBE_EVERY`], the probe). `false` while near.
    pub fn by_read(&mut self) -> bool {
        if !self.far {
            return false;
        }
        self.sends = self.sends.wrapping_add(1);
        self.sends % PROBE_EVERY != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Far after [`FLIP`] slow copies in a row, not after one; a fast one in between
    /// resets the count; near again after [`FLIP`] fast ones.
    #[test]
    fn the_belief_flips_after_samples_in_a_row() {
        let mut p = Place::default();
        let n = 8192;
        let slow = FAR_NS_PER_KIB * 8 + 1;
        let fast = FAR_NS_PER_KIB * 8;
        assert!(!p.record(n, slow));
        assert!(!p.far());
        assert!(!p.record(n, fast), "a fast copy resets the count");
        assert!(!p.record(n, slow));
        assert!(p.record(n, slow), "the second slow copy in a row");
        assert!(p.far());
        assert!(!p.record(n, slow));
        assert!(!p.record(n, fast));
        assert!(p.far());
        assert!(p.record(n, fast));
        assert!(!p.far());
    }

    /// One copy in [`EVERY`] of at least [`SENSE_MIN`] bytes is timed, near and far, none
    /// below; every probe.
    #[test]
    fn copies_are_timed_one_in_n_and_every_probe() {
        let mut p = Place::default();
        assert!(!p.wants(SENSE_MIN - 1, false));
        let timed = (0..EVERY * 4).filter(|_| p.wants(SENSE_MIN, false)).count();
        assert_eq!(timed, 4);
        let slow = FAR_NS_PER_KIB * 4 + 1;
        p.record(SENSE_MIN, slow);
        p.record(SENSE_MIN, slow);
        assert!(p.far());
        let timed = (0..EVERY * 2).filter(|_| p.wants(SENSE_MIN, false)).count();
        assert_eq!(timed, 2);
        assert!((0..10).all(|_| p.wants(SENSE_MIN, true)));
        assert!(!p.wants(SENSE_MIN - 1, true));
        // Near again (two fast probes): the next 2 * FLIP copies are timed, then one in
        // EVERY.
        p.record(SENSE_MIN, 1);
        assert!(p.record(SENSE_MIN, 1));
        assert!(!p.far());
        assert!((0..2 * FLIP).all(|_| p.wants(SENSE_MIN, false)));
        let timed = (0..EVERY * 2).filter(|_| p.wants(SENSE_MIN, false)).count();
        assert_eq!(timed, 2);
    }

    /// Far: every send but one in [`PROBE_EVERY`] goes by rendezvous; near: none.
    #[test]
    fn far_sends_go_by_read_but_for_the_probes() {
        let mut p = Place::default();
        assert!(!(0..100).any(|_| p.by_read()));
        let slow = FAR_NS_PER_KIB * 8 + 1;
        p.record(8192, slow);
        p.record(8192, slow);
        let eager = (0..PROBE_EVERY * 3).filter(|_| !p.by_read()).count();
        assert_eq!(eager, 3);
    }
}
