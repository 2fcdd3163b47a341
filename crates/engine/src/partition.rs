//! The wire protocol of partitioned point-to-point communication (MPI 4.0 §4.2), sans IO:
//! tags, the sender's header and which send partitions hold a receive partition's bytes.
//! The C library (`oxmpi-capi`'s `part.rs`) and the safe Rust API (`oxmpi`'s `part.rs`)
//! drive it over the engine's point-to-point on a communicator's collective context.
//!
//! Each send partition travels as its own message, tagged [`part_tag`], as soon as it is
//! ready. The first round of a send also sends a [`Layout`] header ([`header_tag`]): the
//! sender's partition count and bytes per partition, so that the receiver, whose
//! partitioning may differ (the message is matched as a whole, its bytes fill the receive
//! partitions in order), posts one receive per send partition and knows which of them hold
//! each of its own partitions ([`Layout::overlapping`]).

use std::ops::Range;

/// First tag of partition messages on a collective context: above every tag the
/// collectives use (nonblocking schedules stay below 2^29 + 2^22).
const TAG_PART_BASE: i32 = (1 << 29) + (1 << 22);

/// Partitions per operation and side (the tag carries the index in 24 bits).
pub const MAX_PARTITIONS: usize = 1 << 24;

/// Bytes of the header: the sender's partition count and bytes per partition (`u64` LE).
pub const HEADER_LEN: usize = 16;

/// Tag of partition `i` (below [`MAX_PARTITIONS`]) of an operation with user tag `tag`.
/// Two operations between the same pair at once need user tags that differ modulo 16.
pub fn part_tag(tag: i32, i: usize) -> i32 {
    TAG_PART_BASE + ((tag & 0xf) << 24) + i as i32
}

/// Tag of the header of an operation with user tag `tag` (above every partition's).
pub fn header_tag(tag: i32) -> i32 {
    TAG_PART_BASE + (16 << 24) + (tag & 0xf)
}

/// How a sender partitions its data, as its header tells the receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Number of send partitions.
    pub partitions: usize,
    /// Bytes per partition.
    pub bytes: usize,
}

impl Layout {
    /// The header's bytes.
    pub fn encode(self) -> Vec<u8> {
        let mut v = Vec::with_capacity(HEADER_LEN);
        v.extend_from_slice(&(self.partitions as u64).to_le_bytes());
        v.extend_from_slice(&(self.bytes as u64).to_le_bytes());
        v
    }

    /// The layout a header carries; `None` if it is malformed (short, more than
    /// [`MAX_PARTITIONS`] partitions, or a total that overflows).
    pub fn decode(b: &[u8]) -> Option<Layout> {
        let word = |i: usize| {
            b.get(8 * i..8 * i + 8)
                .and_then(|w| <[u8; 8]>::try_from(w).ok())
                .map(u64::from_le_bytes)
                .and_then(|w| usize::try_from(w).ok())
        };
        let l = Layout {
            partitions: word(0)?,
            bytes: word(1)?,
        };
        (l.partitions <= MAX_PARTITIONS && l.partitions.checked_mul(l.bytes).is_some()).then_some(l)
    }

    /// Bytes of the whole message.
    pub fn total(self) -> usize {
        self.partitions * self.bytes
    }

    /// The send partitions (message indices) holding bytes `start..end` of the message:
    /// what a receive partition covering those bytes waits for (none beyond the message).
    pub fn overlapping(self, start: usize, end: usize) -> Range<usize> {
        let end = end.min(self.total());
        if start >= end || self.bytes == 0 {
            return 0..0;
        }
        start / self.bytes..end.div_ceil(self.bytes)
    }

    /// The send partitions that receive partition `j` (of `parts` partitions of `bytes`
    /// bytes each) waits for: those holding its bytes; for empty partitions, the send
    /// partition at the same relative place, so that an empty partition too arrives when
    /// the sender readies it (not at once).
    pub fn covering(self, j: usize, parts: usize, bytes: usize) -> Range<usize> {
        if bytes == 0 {
            if self.partitions == 0 || parts == 0 {
                return 0..0;
            }
            let k = (j * self.partitions / parts).min(self.partitions - 1);
            return k..k + 1;
        }
        self.overlapping(j * bytes, (j + 1) * bytes)
    }

    /// Where a receive partition's bytes `start..end` lie in send partition `k`'s message
    /// (empty if they do not overlap it).
    pub fn within(self, k: usize, start: usize, end: usize) -> Range<usize> {
        let at = k * self.bytes;
        let (lo, hi) = (start.max(at), end.min(self.total()).min(at + self.bytes));
        if lo >= hi {
            return 0..0;
        }
        lo - at..hi - at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_tags_stay_above_the_collectives_and_below_tag_ub() {
        let lo = part_tag(0, 0);
        let hi = part_tag(0xf, MAX_PARTITIONS - 1);
        assert!(lo > (1 << 21) + (8191 << 16) + 0xffff);
        assert!(hi <= crate::TAG_UB);
        assert_ne!(part_tag(1, 0), part_tag(2, 0));
        assert_eq!(part_tag(3, 5) - part_tag(3, 4), 1);
    }

    #[test]
    fn header_tags_are_above_every_partition_tag_and_below_tag_ub() {
        let top = part_tag(0xf, MAX_PARTITIONS - 1);
        for t in [0, 5, 0xf, 1 << 20] {
            assert!(header_tag(t) > top);
            assert!(header_tag(t) <= crate::TAG_UB);
        }
        assert_ne!(header_tag(1), header_tag(2));
    }

    #[test]
    fn header_round_trips_and_rejects_garbage() {
        let l = Layout {
            partitions: 7,
            bytes: 3 << 33,
        };
        assert_eq!(Layout::decode(&l.encode()), Some(l));
        assert_eq!(Layout::decode(&[1, 2, 3]), None);
        let too_many = Layout {
            partitions: MAX_PARTITIONS + 1,
            bytes: 1,
        };
        assert_eq!(Layout::decode(&too_many.encode()), None);
        let overflow = Layout {
            partitions: 1 << 20,
            bytes: usize::MAX >> 4,
        };
        assert_eq!(Layout::decode(&overflow.encode()), None);
    }

    #[test]
    fn receive_partitions_map_to_the_send_partitions_holding_their_bytes() {
        // The sender has 3 partitions of 40 bytes, the receiver 4 of 30 (120 bytes each).
        let s = Layout {
            partitions: 3,
            bytes: 40,
        };
        let got: Vec<_> = (0..4)
            .map(|j| s.overlapping(30 * j, 30 * (j + 1)))
            .collect();
        assert_eq!(got, [0..1, 0..2, 1..3, 2..3]);
        assert_eq!(s.within(0, 30, 60), 30..40);
        assert_eq!(s.within(1, 30, 60), 0..20);
        // Receiver coarser than the sender: 2 partitions of 60 over the 3 of 40.
        assert_eq!(s.overlapping(0, 60), 0..2);
        assert_eq!(s.overlapping(60, 120), 1..3);
        // Beyond a shorter message, or an empty one: nothing to wait for.
        assert_eq!(s.overlapping(120, 150), 0..0);
        assert_eq!(s.overlapping(110, 150), 2..3);
        assert_eq!(s.within(2, 110, 150), 30..40);
        let empty = Layout {
            partitions: 4,
            bytes: 0,
        };
        assert_eq!(empty.overlapping(0, 10), 0..0);
        assert_eq!(s.overlapping(5, 5), 0..0);
        assert_eq!(s.within(2, 0, 0), 0..0);
    }

    #[test]
    fn empty_receive_partitions_wait_for_the_send_partition_at_their_place() {
        let s = Layout {
            partitions: 3,
            bytes: 0,
        };
        let same: Vec<_> = (0..3).map(|j| s.covering(j, 3, 0)).collect();
        assert_eq!(same, [0..1, 1..2, 2..3]);
        let fewer: Vec<_> = (0..6).map(|j| s.covering(j, 6, 0)).collect();
        assert_eq!(fewer, [0..1, 0..1, 1..2, 1..2, 2..3, 2..3]);
        let none = Layout {
            partitions: 0,
            bytes: 0,
        };
        assert_eq!(none.covering(0, 2, 0), 0..0);
        // Non-empty partitions: the bytes decide.
        let t = Layout {
            partitions: 3,
            bytes: 40,
        };
        assert_eq!(t.covering(1, 4, 30), 0..2);
    }
}
