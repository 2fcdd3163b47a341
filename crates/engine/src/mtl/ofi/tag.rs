//! The MPI envelope in a libfabric tag (sans-IO): where context id, source rank and MPI tag
//! sit in the 64-bit tag of `fi_tsend`/`fi_trecv`, and the ignore bits that make the
//! provider match `MPI_ANY_SOURCE` and `MPI_ANY_TAG`.
//!
//! ```text
//!  bits-1 .. bits-4   bits-5 .. 31+S   31+S-1 .. 31    30     29 .. 0
//! +--------------+-----------------+--------------+------+-----------+
//! | SYNC ACK RV 0 |   context (C)   |  source (S)  | MARK |  tag (30) |
//! +--------------+-----------------+--------------+------+-----------+
//! ```
//!
//! `bits` is what the provider matches (64 for nearly all; fewer where its
//! `mem_tag_format` says so), `S` is chosen per job ([`Layout::new`]) and the context
//! field takes the rest. The protocol field: [`Layout::sync`] marks a synchronous send
//! (the receiver acknowledges it; receives ignore the bit, so they take either kind),
//! [`Layout::ack`] marks an acknowledgement (never ignored: only the sender's receive
//! for that acknowledgement takes it), [`Layout::rndv`] marks a rendezvous request (the
//! message is a descriptor of the data for the receiver to read; receives ignore the bit),
//! the last bit is always zero (the btl's records set it). The tag
//! field holds the engine's whole tag range (`TAG_UB` = 2^30 - 1, so `MPI_TAG_UB` is the
//! same on every path, and the collectives' and the library's internal tags fit), and the
//! bit above it, [`Layout::mark`], is the engine's `TAG_MARK` (bit 30) where it stands on
//! the engine's tag: a marked message (the collectives' error markers and length headers)
//! carries it, receives ignore it (a receive of tag `t` takes `t` marked or not), and the
//! received tag keeps it, so the status shows it as on the engine's own path.
//!
//! Context ids: the engine's are 32 bits, handed out from 0 upwards; a communicator's
//! collective traffic sets the top bit (`ctx | 1 << 31`) and the library reserves ids just
//! below `u32::MAX` (ULFM's agreement uses `u32::MAX - 1`). The context field of `C` bits
//! has two halves: the lower one carries the ids from 0 up, except its last
//! [`RESERVED_CONTEXTS`] values, which carry `u32::MAX - k`; the upper half carries the
//! collective ids. An id outside that is an [`EncodeError::Context`]: the communicator
//! cannot use the offload (the caller says so in one line).

use std::fmt;

/// Bits of the protocol field, at the top of the matched bits.
pub const PROTO_BITS: u32 = 4;
/// Bits of the MPI tag field (the engine's `TAG_UB` is `2^30 - 1`).
pub const TAG_BITS: u32 = 30;
/// Bits of the mark, right above the tag field ([`Layout::mark`]).
pub const MARK_BITS: u32 = 1;
/// The mark bit: the engine's `TAG_MARK`.
const MARK: u64 = 1 << TAG_BITS;
const _: () = assert!(
    MARK == crate::TAG_MARK as u64,
    "the mark sits where the engine has it"
);
/// The smallest context field a layout accepts.
pub const MIN_CONTEXT_BITS: u32 = 8;
/// Context ids just below `u32::MAX` (`u32::MAX - k`, `k` below this) that a layout carries.
pub const RESERVED_CONTEXTS: u32 = 16;
/// The bit the collectives set in a communicator's context id.
const COLL_BIT: u32 = 1 << 31;

/// Why a layout cannot be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayoutError {
    /// The provider matches fewer bits than the protocol, tag and source fields and the
    /// smallest context field need.
    TooFewBits {
        /// Bits the provider matches.
        bits: u32,
        /// Bits needed.
        need: u32,
    },
    /// More tag bits than 64.
    TooManyBits(u32),
    /// A source field of 0 bits, or one too wide to leave a context field.
    SourceBits(u32),
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutError::TooFewBits { bits, need } => write!(
                f,
                "the provider matches {bits} tag bits; the MPI envelope needs at least {need}"
            ),
            LayoutError::TooManyBits(b) => write!(f, "{b} tag bits: at most 64"),
            LayoutError::SourceBits(s) => write!(
                f,
                "{s} source bits leave no room for a context field of {MIN_CONTEXT_BITS} bits"
            ),
        }
    }
}

impl std::error::Error for LayoutError {}

/// An envelope value that does not fit its field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodeError {
    /// The context id has no place in the context field.
    Context(u32),
    /// The rank does not fit the source field.
    Source(u32),
    /// The tag is negative (other than a wildcard) or above the tag field.
    Tag(i32),
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::Context(c) => write!(f, "context id {c:#x} does not fit the tag"),
            EncodeError::Source(s) => write!(f, "rank {s} does not fit the tag's source field"),
            EncodeError::Tag(t) => write!(f, "tag {t} does not fit the tag field"),
        }
    }
}

impl std::error::Error for EncodeError {}

/// An MPI envelope: the communicator's context id, the sender's rank in it, the tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope {
    /// The communicator's context id (the engine's, collective bit included).
    pub ctx: u32,
    /// The sender's rank in the communicator (in its own group for an intercommunicator).
    pub src: u32,
    /// The MPI tag, `0..=TAG_UB`; a marked message's also has `TAG_MARK` (bit 30,
    /// [`Layout::mark`]).
    pub tag: i32,
}

/// What a receive takes: the tag bits and the ignore bits of `fi_trecv`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pattern {
    /// The tag to match.
    pub bits: u64,
    /// Bits the match ignores.
    pub ignore: u64,
}

impl Pattern {
    /// Whether a message sent with tag `bits` matches, by libfabric's rule: equal outside
    /// the ignored bits.
    pub fn matches(&self, bits: u64) -> bool {
        (bits | self.ignore) == (self.bits | self.ignore)
    }
}

/// A tag taken apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decoded {
    /// The envelope.
    pub env: Envelope,
    /// A synchronous send: the receiver owes an acknowledgement.
    pub sync: bool,
    /// An acknowledgement.
    pub ack: bool,
    /// A rendezvous request ([`Layout::rndv`]).
    pub rndv: bool,
}

/// Where the fields sit: `bits` matched bits, `src_bits` of source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    bits: u32,
    src_bits: u32,
}

/// A mask of the low `n` bits.
fn mask(n: u32) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// Bits needed to number `n` things (at least 1).
pub fn bits_for(n: usize) -> u32 {
    (usize::BITS - n.saturating_sub(1).leading_zeros()).max(1)
}

impl Layout {
    /// A layout over the `bits` low bits the provider matches, with `src_bits` bits of
    /// source rank; the context field takes what is left.
    pub fn new(bits: u32, src_bits: u32) -> Result<Layout, LayoutError> {
        if bits > 64 {
            return Err(LayoutError::TooManyBits(bits));
        }
        let need = PROTO_BITS + TAG_BITS + MARK_BITS + 1 + MIN_CONTEXT_BITS;
        if bits < need {
            return Err(LayoutError::TooFewBits { bits, need });
        }
        if src_bits == 0 || PROTO_BITS + TAG_BITS + MARK_BITS + src_bits + MIN_CONTEXT_BITS > bits {
            return Err(LayoutError::SourceBits(src_bits));
        }
        Ok(Layout { bits, src_bits })
    }

    /// The layout for a job whose communicators have at most `ranks` members, over `bits`
    /// matched bits: the source field as wide as `min_src_bits` or as `ranks` needs,
    /// whichever is wider, the context field the rest.
    pub fn fit(bits: u32, ranks: usize, min_src_bits: u32) -> Result<Layout, LayoutError> {
        Layout::new(bits, bits_for(ranks).max(min_src_bits))
    }

    /// Bits of the context field.
    pub fn context_bits(&self) -> u32 {
        self.bits - PROTO_BITS - TAG_BITS - MARK_BITS - self.src_bits
    }

    /// Bits of the source field.
    pub fn source_bits(&self) -> u32 {
        self.src_bits
    }

    /// The largest tag (`MPI_TAG_UB`).
    pub fn tag_ub(&self) -> i32 {
        mask(TAG_BITS) as i32
    }

    /// How many ranks a communicator may have.
    pub fn max_ranks(&self) -> u64 {
        1u64 << self.src_bits
    }

    /// User context ids `0..` this layout carries (the collective ids as many).
    pub fn max_contexts(&self) -> u32 {
        (1u32 << (self.context_bits() - 1)) - RESERVED_CONTEXTS
    }

    /// The synchronous-send bit.
    pub fn sync(&self) -> u64 {
        1 << (self.bits - 1)
    }

    /// The acknowledgement bit.
    pub fn ack(&self) -> u64 {
        1 << (self.bits - 2)
    }

    /// The rendezvous bit: the message describes data the receiver reads.
    pub fn rndv(&self) -> u64 {
        1 << (self.bits - 3)
    }

    /// The mark bit (right above the tag field, where the engine's `TAG_MARK` is): a
    /// marked message carries it, every receive ignores it, a received tag keeps it.
    pub fn mark(&self) -> u64 {
        MARK
    }

    fn src_shift(&self) -> u32 {
        TAG_BITS + MARK_BITS
    }

    fn ctx_shift(&self) -> u32 {
        TAG_BITS + MARK_BITS + self.src_bits
    }

    /// The context field's value for context id `ctx`.
    fn context(&self, ctx: u32) -> Result<u64, EncodeError> {
        let half = 1u32 << (self.context_bits() - 1);
        let k = u32::MAX - ctx;
        if k < RESERVED_CONTEXTS {
            return Ok(u64::from(half - RESERVED_CONTEXTS + k));
        }
        if ctx & COLL_BIT == 0 {
            return if ctx < half - RESERVED_CONTEXTS {
                Ok(u64::from(ctx))
            } else {
                Err(EncodeError::Context(ctx))
            };
        }
        match ctx & !COLL_BIT {
            low if low < half => Ok(u64::from(half + low)),
            _ => Err(EncodeError::Context(ctx)),
        }
    }

    /// The context id of a context field's value.
    fn context_id(&self, field: u64) -> u32 {
        let half = 1u64 << (self.context_bits() - 1);
        if field >= half {
            COLL_BIT | (field - half) as u32
        } else if field >= half - u64::from(RESERVED_CONTEXTS) {
            u32::MAX - (field - (half - u64::from(RESERVED_CONTEXTS))) as u32
        } else {
            field as u32
        }
    }

    fn source(&self, src: u32) -> Result<u64, EncodeError> {
        if u64::from(src) < self.max_ranks() {
            Ok(u64::from(src) << self.src_shift())
        } else {
            Err(EncodeError::Source(src))
        }
    }

    /// A receive's tag: `0..=TAG_UB`, no mark.
    fn tag(&self, tag: i32) -> Result<u64, EncodeError> {
        if (0..=self.tag_ub()).contains(&tag) {
            Ok(tag as u64)
        } else {
            Err(EncodeError::Tag(tag))
        }
    }

    /// A message's tag: `0..=TAG_UB`, with the mark or without (every non-negative
    /// `i32`: the mark is bit 30, the tag field the bits below).
    fn sent_tag(&self, tag: i32) -> Result<u64, EncodeError> {
        u64::try_from(tag).map_err(|_| EncodeError::Tag(tag))
    }

    /// The envelope's fields, without protocol bits (the mark with the tag).
    fn fields(&self, env: &Envelope) -> Result<u64, EncodeError> {
        Ok((self.context(env.ctx)? << self.ctx_shift())
            | self.source(env.src)?
            | self.sent_tag(env.tag)?)
    }

    /// The tag of a send of `env` (marked if `env.tag` has `TAG_MARK`); `sync` for a
    /// synchronous send (the receiver acknowledges it).
    pub fn send(&self, env: &Envelope, sync: bool) -> Result<u64, EncodeError> {
        Ok(self.fields(env)? | if sync { self.sync() } else { 0 })
    }

    /// The receive of context `ctx` from `src` (`None`: any source) with `tag` (`None`:
    /// any tag). It takes synchronous and standard sends and rendezvous requests alike,
    /// marked or not, never acknowledgements.
    pub fn recv(
        &self,
        ctx: u32,
        src: Option<u32>,
        tag: Option<i32>,
    ) -> Result<Pattern, EncodeError> {
        let mut bits = self.context(ctx)? << self.ctx_shift();
        let mut ignore = self.sync() | self.rndv() | self.mark();
        match src {
            Some(s) => bits |= self.source(s)?,
            None => ignore |= mask(self.src_bits) << self.src_shift(),
        }
        match tag {
            Some(t) => bits |= self.tag(t)?,
            None => ignore |= mask(TAG_BITS),
        }
        Ok(Pattern { bits, ignore })
    }

    /// The acknowledgement of a synchronous send received with envelope `got` by the rank
    /// `me` (its rank as the sender addresses it): same context and tag, our rank as its
    /// source. The sender posts [`Layout::ack_recv`] for it before it sends.
    pub fn ack_send(&self, got: &Envelope, me: u32) -> Result<u64, EncodeError> {
        Ok(self.fields(&Envelope { src: me, ..*got })? | self.ack())
    }

    /// What a synchronous send of `env` to `dest` waits for: the acknowledgement from
    /// `dest`, matched exactly.
    pub fn ack_recv(&self, env: &Envelope, dest: u32) -> Result<Pattern, EncodeError> {
        Ok(Pattern {
            bits: self.ack_send(env, dest)?,
            ignore: 0,
        })
    }

    /// Takes a received tag apart (`env.tag` keeps the mark).
    pub fn decode(&self, bits: u64) -> Decoded {
        let ctx = (bits >> self.ctx_shift()) & mask(self.context_bits());
        Decoded {
            env: Envelope {
                ctx: self.context_id(ctx),
                src: ((bits >> self.src_shift()) & mask(self.src_bits)) as u32,
                tag: (bits & (mask(TAG_BITS) | MARK)) as i32,
            },
            sync: bits & self.sync() != 0,
            ack: bits & self.ack() != 0,
            rndv: bits & self.rndv() != 0,
        }
    }
}
