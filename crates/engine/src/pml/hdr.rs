//! The record header every link carries, and the record kinds and flags of the protocol.

pub(crate) const K_EAGER: u8 = 1;
pub(crate) const K_RTS: u8 = 2;
pub(crate) const K_CTS: u8 = 3;
pub(crate) const K_DATA: u8 = 4;
pub(crate) const K_FIN: u8 = 5;
/// ULFM revoke notice: `a` = the revoked context id.
pub(crate) const K_REVOKE: u8 = 6;
/// ULFM: the receiver refuses a message sent on a context it knows revoked (a
/// request-to-send or a synchronous eager message, whose sender waits): `b` = the sender's
/// request, which fails with `ErrorClass::Revoked`.
pub(crate) const K_NACK: u8 = 7;
/// Finalize under fault tolerance: the sender reached `MPI_Finalize` with everything it
/// sends written; nothing more comes from it (the fault-tolerant replacement for the
/// bootstrap's final fence, see `crate::Engine::finalize`).
pub(crate) const K_BYE: u8 = 8;

/// `a` of a FIN that ends a rendezvous message the receiver read alone (CMA), without a
/// clear-to-send (`crate::btl::sm::two_way`: the sender then knows that its peer reads its
/// messages as they come).
pub(crate) const FIN_READ: u64 = 1;

pub(crate) const F_SYNC: u8 = 1;
pub(crate) const F_CMA: u8 = 2;
/// A DATA record whose payload lies in the link's bulk buffer (see `crate::btl::sm::link::SmLink`); set and
/// cleared by the sm link itself, never seen by the engine.
pub(crate) const F_BULK: u8 = 4;
/// A CTS that opens a cooperative single copy (see `crate::btl::sm::coop`).
pub(crate) const F_COOP: u8 = 8;
/// An RTS whose buffer the sender's link offers for a remote read (the `ofi` link
/// registers it and carries the key itself): the receiver may take the whole message with
/// `crate::btl::Link::read` and answer FIN.
pub(crate) const F_RMA: u8 = 16;
/// A DATA record whose payload the sm link found in its bulk buffer's first pass (pages
/// touched for the first time: the sender's and the receiver's page faults slow the
/// transfer down); set by the link on receipt, never sent. Such a transfer does not feed
/// the one-way [`Chooser`](crate::btl::sm::coop::Chooser).
pub(crate) const F_COLD: u8 = 32;
/// An RTS of a message the sender would have sent eagerly but for its peer's far CPU
/// ([`crate::btl::sm::place`]): the receiver reads it alone (`process_vm_readv`) whatever
/// its copy chooser says. Set only with [`F_CMA`].
pub(crate) const F_READ: u8 = 64;

/// Header in front of every record (40 bytes; the sm link sends a standard eager record with
/// only the first 16, see `crate::btl::sm::link::SHORT_HDR`).
///
/// | kind | ctx/src/tag | a | b | c |
/// |---|---|---|---|---|
/// | EAGER | envelope | - | sender request (sync) | - |
/// | RTS | envelope | total bytes | sender request | sender buffer address (CMA, RMA) |
/// | CTS | - | bytes wanted | sender request | receiver request |
/// | CTS + [`F_COOP`] | ctx = transfer sequence, tag = chunk bytes | bytes wanted | sender request | receiver buffer address |
/// | DATA | - | offset | - | receiver request |
/// | FIN | - | [`FIN_READ`] or 0 | sender request | - |
/// | REVOKE | - | revoked context | - | - |
/// | NACK | - | - | sender request | - |
/// | BYE | - | - | - | - |
///
/// On an sm link with a bulk buffer, a DATA record travels as a header-only ring record
/// with [`F_BULK`], `b` = the payload's position in the bulk buffer (bytes since its start,
/// never wrapping) and `ctx` = the payload length; the link turns it back into a plain DATA
/// record before the engine sees it.
///
/// `_r` is 0 for the engine. On an sm link a standard eager record of
/// `crate::btl::sm::link::ALIGN_MIN` to `ALIGN_MAX` bytes carries there the offset of its payload after the
/// compact header, which puts the payload on a cache line; the link sets and clears it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Hdr {
    pub kind: u8,
    pub flags: u8,
    pub _r: u16,
    pub ctx: u32,
    pub src: i32,
    pub tag: i32,
    pub a: u64,
    pub b: u64,
    pub c: u64,
}

/// Bytes of [`Hdr`].
pub(crate) const HDR: usize = std::mem::size_of::<Hdr>();
