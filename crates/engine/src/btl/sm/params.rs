//! The `sm` transport's parameters (`btl_sm_*`) and the settings read from them.

use oxmpi_base::params::{ParamDecl, ParamType};

use oxmpi_base::params::{declared, int, size};

pub use super::place::Placement;

/// `btl_sm_eager_limit`.
pub(crate) static EAGER_LIMIT: ParamDecl = ParamDecl::new(
    "btl",
    "sm",
    "eager_limit",
    ParamType::Size,
    "8192",
    "Largest message (bytes) the sm transport sends eagerly; larger ones use a rendezvous",
)
.level(4)
.runtime();

/// `btl_sm_fragment_size`.
pub(crate) static FRAGMENT_SIZE: ParamDecl = ParamDecl::new(
    "btl",
    "sm",
    "fragment_size",
    ParamType::Size,
    "128k",
    "Fragment size (bytes) of the rendezvous copy pipeline: at most half of \
     btl_sm_bulk_size (of the ring when the bulk buffer is 0)",
)
.level(5);

/// `btl_sm_fragment_min_size`.
pub(crate) static FRAGMENT_MIN: ParamDecl = ParamDecl::new(
    "btl",
    "sm",
    "fragment_min_size",
    ParamType::Size,
    "0",
    "When not 0: a rendezvous message with nothing queued behind it for the same peer \
     (ping-pong traffic) is cut into quarters (rounded up to 4 KiB, at most \
     btl_sm_fragment_size) so that the receiver copies one fragment out while the sender \
     copies the next one in, but into no fragments smaller than this (e.g. 16k: faster \
     64-256 KiB ping-pongs at best, but slower ones in the median on a loaded machine, \
     so off by default until measured on a quiet one); 0: always fragments of \
     btl_sm_fragment_size",
)
.level(6);

/// `btl_sm_ring_size`.
pub(crate) static RING_SIZE: ParamDecl = ParamDecl::new(
    "btl",
    "sm",
    "ring_size",
    ParamType::Size,
    "320k",
    "Bytes of each per-peer shared-memory ring (rounded down to 64 bytes, at least 4096)",
)
.level(5);

/// `btl_sm_ring_hot`.
pub(crate) static RING_HOT: ParamDecl = ParamDecl::new(
    "btl",
    "sm",
    "ring_hot",
    ParamType::Size,
    "4k",
    "When a record would start past this many bytes of a per-peer ring and the peer has \
     consumed everything sent (a ping-pong's turn), the sender starts over at the ring's \
     first bytes, whose cache lines are hot, rather than walking the whole ring; streams \
     still use all of it. 0 or the ring size: never",
)
.level(6);

/// `btl_sm_bulk_size`.
pub(crate) static BULK_SIZE: ParamDecl = ParamDecl::new(
    "btl",
    "sm",
    "bulk_size",
    ParamType::Size,
    "1m",
    "Bytes of each per-peer shared buffer that carries the rendezvous fragments of the \
     pipelined copy next to the ring (rounded down to 64 bytes; fragments are at most half \
     of it); 0: fragments travel inside the ring",
)
.level(5);

/// `btl_sm_single_copy_mechanism`.
pub(crate) static SINGLE_COPY: ParamDecl = ParamDecl::new(
    "btl",
    "sm",
    "single_copy_mechanism",
    ParamType::Enum {
        values: &[(0, "none"), (1, "cma"), (2, "coop"), (3, "auto")],
        range: None,
    },
    "auto",
    "How large messages move between ranks on a node: none (pipelined copy through shared \
     memory, both sides copying), cma (the receiver reads the sender's buffer with \
     process_vm_readv), coop (cooperative single copy: the receiver reads from the front \
     while the sender writes from the back, both with CMA), auto (per peer, whichever of \
     none and coop measured faster lately; the placement of the two CPUs decides). CMA \
     modes fall back to none if the kernel denies it",
)
.level(4);

/// `btl_sm_coop_chunk_size`.
pub(crate) static COOP_CHUNK: ParamDecl = ParamDecl::new(
    "btl",
    "sm",
    "coop_chunk_size",
    ParamType::Size,
    "16k",
    "Smallest unit of the cooperative single copy's claims: a message is cut in halves \
     (up to 1 MiB; larger ones in 512 KiB chunks), into no chunk smaller than this; each \
     side claims a quarter of what is left, at least one chunk, per process_vm_readv/writev \
     call; rounded up to 4 KiB",
)
.level(6);

/// `btl_sm_coop_min_size`.
pub(crate) static COOP_MIN: ParamDecl = ParamDecl::new(
    "btl",
    "sm",
    "coop_min_size",
    ParamType::Size,
    "16k",
    "Smallest message that may use the cooperative single copy (single_copy_mechanism coop \
     or auto); smaller rendezvous messages use the pipelined copy. With auto the chooser \
     still measures both per size class, so this only bounds what it may try",
)
.level(5)
.runtime();

/// `btl_sm_placement`.
pub(crate) static PLACEMENT: ParamDecl = ParamDecl::new(
    "btl",
    "sm",
    "placement",
    ParamType::Enum {
        values: &[(0, "auto"), (1, "near"), (2, "far")],
        range: None,
    },
    "auto",
    "Whether messages above btl_sm_far_eager_limit and up to btl_sm_eager_limit go to a \
     peer on a far CPU (another core complex: copying through the ring costs several times \
     more) by a rendezvous that the receiver reads alone with CMA: auto (per peer, sensed by \
     timing some of our copies of eager messages into its ring; while far, one such send \
     in 32 still goes eagerly, timed, so that a return to near is seen), near \
     (never), far (always, for every peer). Only with a single copy mechanism other than \
     none; a lone send and every send of a window alike",
)
.level(5);

/// `btl_sm_far_eager_limit`.
pub(crate) static FAR_EAGER_LIMIT: ParamDecl = ParamDecl::new(
    "btl",
    "sm",
    "far_eager_limit",
    ParamType::Size,
    "4096",
    "Largest message (bytes) sent eagerly to a peer that btl_sm_placement takes to be far; \
     larger ones up to btl_sm_eager_limit go by a rendezvous the receiver reads alone",
)
.level(5);

/// `btl_sm_far_stream_min`.
pub(crate) static FAR_STREAM_MIN: ParamDecl = ParamDecl::new(
    "btl",
    "sm",
    "far_stream_min",
    ParamType::Size,
    "4096",
    "Smallest eager message whose payload is written into the ring of a peer that \
     btl_sm_placement takes to be far with non-temporal stores (to memory, not taking each \
     line back from the far reader's cache first); 0: never. The copies timed for the \
     placement stay plain stores",
)
.level(9);

/// Every `btl_sm_*` parameter, in `oxmpi-info` order.
pub(crate) static PARAMS: [ParamDecl; 12] = [
    EAGER_LIMIT,
    FAR_EAGER_LIMIT,
    FAR_STREAM_MIN,
    PLACEMENT,
    FRAGMENT_SIZE,
    FRAGMENT_MIN,
    RING_SIZE,
    RING_HOT,
    BULK_SIZE,
    SINGLE_COPY,
    COOP_MIN,
    COOP_CHUNK,
];

/// The large-message mechanism `btl_sm_single_copy_mechanism` selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SingleCopy {
    /// Pipelined copy only.
    None,
    /// The receiver reads the whole message with CMA.
    Cma,
    /// Cooperative single copy for messages of at least `btl_sm_coop_min_size`.
    Coop,
    /// Per peer, pipelined or cooperative by measured throughput.
    Auto,
}

impl SingleCopy {
    /// The mechanism of `btl_sm_single_copy_mechanism`'s number.
    fn from_int(v: i64) -> SingleCopy {
        match v {
            0 => SingleCopy::None,
            1 => SingleCopy::Cma,
            2 => SingleCopy::Coop,
            _ => SingleCopy::Auto,
        }
    }
}

/// The `sm` settings, as the parameters give them (values clamped to what works).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Settings {
    /// Bytes of each per-peer ring (a multiple of 64, at least 4096).
    pub ring: usize,
    /// Bytes of a ring a ping-pong keeps to (`btl_sm_ring_hot`; 0: the whole ring).
    pub ring_hot: usize,
    /// Bytes of each per-peer bulk buffer (a multiple of 64; 0: none).
    pub bulk: usize,
    /// Largest eager message (before the ring's own limit).
    pub eager_limit: usize,
    /// Rendezvous fragment size (each link caps it further: `Link::max_data`).
    pub frag: usize,
    /// Smallest fragment a lone rendezvous message is cut into (0: not cut below `frag`).
    pub frag_min: usize,
    /// The large-message mechanism.
    pub single_copy: SingleCopy,
    /// Smallest message for the cooperative copy.
    pub coop_min: usize,
    /// Unit of the cooperative copy's claims.
    pub coop_chunk: usize,
    /// Whether eager-size sends to far peers go by rendezvous.
    pub placement: Placement,
    /// Largest eager message to a far peer.
    pub far_eager: usize,
    /// Smallest eager message to a far peer written with non-temporal stores (0: none).
    pub far_stream_min: usize,
}

impl Settings {
    /// The settings of the current parameter values.
    pub fn read() -> Settings {
        Settings::with(size, int)
    }

    /// The settings of the declared defaults.
    pub fn declared() -> Settings {
        Settings::with(
            |d| declared(d).as_size().unwrap_or(0) as usize,
            |d| declared(d).as_int().unwrap_or(0),
        )
    }

    /// The settings of the values `size` and `int` give.
    fn with(size: impl Fn(&ParamDecl) -> usize, int: impl Fn(&ParamDecl) -> i64) -> Settings {
        Settings {
            ring: size(&RING_SIZE).max(4096) / 64 * 64,
            ring_hot: size(&RING_HOT),
            bulk: size(&BULK_SIZE) / 64 * 64,
            eager_limit: size(&EAGER_LIMIT),
            frag: size(&FRAGMENT_SIZE).clamp(64, 1 << 30),
            frag_min: size(&FRAGMENT_MIN),
            single_copy: SingleCopy::from_int(int(&SINGLE_COPY)),
            coop_min: size(&COOP_MIN).max(1),
            coop_chunk: size(&COOP_CHUNK).max(4096),
            placement: Placement::from_int(int(&PLACEMENT)),
            far_eager: size(&FAR_EAGER_LIMIT),
            far_stream_min: size(&FAR_STREAM_MIN),
        }
    }
}
