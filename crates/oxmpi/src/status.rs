//! Completion information of receives and probes.

use crate::datatype::Equivalence;

/// What a completed receive or probe tells: source, tag and size of the message.
///
/// ```
/// # fn main() -> oxmpi::Result<()> {
/// let universe = oxmpi::init()?;
/// let world = universe.world();
/// let me = world.rank();
/// let mut got = [0u16; 4];
/// let status = oxmpi::request::scope(|s| -> oxmpi::Result<_> {
///     let r = world.irecv_scoped(s, &mut got[..], me, 5)?;
///     world.send(&[1u16, 2, 3][..], me, 5)?;
///     r.wait()
/// })?;
/// assert_eq!((status.source(), status.tag()), (me, 5));
/// assert_eq!(status.count::<u16>(), Some(3));
/// assert_eq!(status.count_bytes(), 6);
/// assert_eq!(status.count::<u32>(), None); // 6 bytes are not whole u32s
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    source: i32,
    tag: i32,
    count_bytes: usize,
    cancelled: bool,
}

impl Status {
    pub(crate) fn from_engine(s: &oxmpi_engine::Status) -> Status {
        Status {
            source: s.source,
            tag: s.tag,
            count_bytes: s.count_bytes,
            cancelled: s.cancelled,
        }
    }

    /// Rank of the sender in the communicator ([`crate::PROC_NULL`] for a receive from it).
    pub fn source(&self) -> i32 {
        self.source
    }

    /// Tag of the message ([`crate::ANY_TAG`] for a receive from [`crate::PROC_NULL`]).
    pub fn tag(&self) -> i32 {
        self.tag
    }

    /// Size of the message in bytes (on the wire, i.e. packed).
    pub fn count_bytes(&self) -> usize {
        self.count_bytes
    }

    /// Number of whole `T` elements in the message (`MPI_Get_count`), or `None` when the size
    /// is not a multiple of `T`'s size (`MPI_UNDEFINED`).
    pub fn count<T: Equivalence>(&self) -> Option<usize> {
        if T::PACKED_SIZE == 0 {
            return (self.count_bytes == 0).then_some(0);
        }
        (self.count_bytes % T::PACKED_SIZE == 0).then_some(self.count_bytes / T::PACKED_SIZE)
    }

    /// Whether the operation was cancelled (`MPI_Test_cancelled`).
    pub fn cancelled(&self) -> bool {
        self.cancelled
    }
}
