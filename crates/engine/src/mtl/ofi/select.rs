//! Whether the matching offload runs (sans-IO): Open MPI's choice between `pml ob1` (our
//! `pml ox`: matching in the engine, over the btls) and `pml cm` + `mtl ofi` (matching in
//! the provider), made from the `pml` selection list and what the provider offers.
//!
//! Rules: `pml=ox` (or `^cm`) keeps the engine's matching. `pml=cm` asks for the offload:
//! a provider that cannot carry it is one line naming what it lacks (Open MPI fails the
//! same way). Left open, the offload runs only over a hardware provider that can carry
//! it; on the software ones (`tcp;ofi_rxm`, `udp;ofi_rxd`, `shm`) sm and tcp serve better.
//! Carrying it takes `FI_TAGGED`, matching in send order (`FI_ORDER_SAS`: MPI's
//! non-overtaking rule is then the provider's) and enough tag bits for a [`Layout`];
//! `FI_DIRECTED_RECV` is used where offered (the source also sits in the tag, so a
//! provider without it still matches sources, through the tag).

use super::tag::{Layout, LayoutError};

/// What the chosen provider offers the offload (from `fi_getinfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    /// The provider's name (`verbs;ofi_rxm`, `cxi`, `tcp;ofi_rxm`, ...).
    pub prov: String,
    /// One of libfabric's software providers.
    pub software: bool,
    /// `FI_TAGGED`.
    pub tagged: bool,
    /// `FI_DIRECTED_RECV`.
    pub directed: bool,
    /// `FI_ORDER_SAS` on both sides.
    pub ordered: bool,
    /// Tag bits it matches (from `mem_tag_format`; 64 for nearly all).
    pub tag_bits: u32,
}

/// The point-to-point layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pml {
    /// The engine's matching over the btls (Open MPI's `ob1`).
    Ox,
    /// Matching offloaded to the provider (`cm` + `mtl ofi`), with this layout and
    /// whether receives from one source are directed at its address.
    Cm {
        /// Where the envelope sits in the tag.
        layout: Layout,
        /// `FI_DIRECTED_RECV`.
        directed: bool,
    },
}

/// The `pml` selection list as it bears on the offload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// Not set (or naming both, `ox` first: Open MPI takes the first that opens).
    Open,
    /// `cm` named first, or `ox` excluded.
    Cm,
    /// `ox` only, or `cm` excluded.
    Ox,
}

impl Asked {
    /// From the `pml` list: `exclude` for `^a,b`, and the names.
    pub fn from_list(exclude: bool, names: &[String]) -> Asked {
        let has = |n: &str| names.iter().any(|x| x == n);
        match (exclude, names.first().map(String::as_str)) {
            (_, None) => Asked::Open,
            (true, _) if has("cm") => Asked::Ox,
            (true, _) if has("ox") => Asked::Cm,
            (true, _) => Asked::Open,
            (false, Some("cm")) => Asked::Cm,
            (false, _) if has("cm") => Asked::Open,
            (false, _) => Asked::Ox,
        }
    }
}

/// Providers whose tagged matching breaks MPI's order where a receive has ignore bits:
/// libfabric 1.17's `shm` lets a receive with `MPI_ANY_SOURCE` or `MPI_ANY_TAG` (three
/// ranks, each receiving from one sender) take that sender's next message instead of the
/// one sent first, which a ring of `MPI_Sendrecv` from any source shows at once.
const WILDCARD_MISORDER: [&str; 1] = ["shm"];

/// Providers that mishandle a receive shorter than its message (libfabric 1.17:
/// `ofi_rxm` places no data and then delivers nothing more from that sender, `ofi_rxd`
/// completes it as a success with the buffer's length).
const TRUNCATION_UNRELIABLE: [&str; 2] = ["ofi_rxm", "ofi_rxd"];

/// The size of the bounce buffer of short receives on those providers (`ofi_rxm`'s eager
/// buffers are 16 KiB): the provider receives the whole message into it and the offload
/// truncates itself ([`super::completion::Cq::capped`]).
pub const BOUNCE: usize = 16 << 10;

/// Providers that complete a receive shorter than its message as a success with the
/// buffer's length (libfabric 1.17's `ofi_rxd`, past the bounce buffer's size too).
const TRUNCATION_UNREPORTED: [&str; 1] = ["ofi_rxd"];

/// Providers whose messages longer than one packet must not stream into posted receives
/// (libfabric 1.17's `ofi_rxd`: a receive posted for a message that already arrived, while
/// a later message of the same peer streams into a receive posted before, leaves the
/// peer's "current receive" on the new one; the stream's next packets complete its freed
/// entry a second time, and the corrupted pool of receive entries loops `fi_cq_read`).
const STREAM_CORRUPTS: [&str; 1] = ["ofi_rxd"];

/// Messages up to this many bytes go in one packet of provider `prov` (for
/// [`rendezvous_above`]): its inject size less what a tagged message with remote data
/// adds (tag, data, and a margin for headers).
const ONE_PACKET_MARGIN: usize = 64;

/// On provider `prov` with inject size `inject`, `pml cm` sends messages longer than this
/// as a rendezvous (a descriptor the receiver reads the data with, `FI_RMA`); `None`:
/// never (the provider carries large tagged messages itself).
pub fn rendezvous_above(prov: &str, inject: usize) -> Option<usize> {
    prov.split(';')
        .any(|p| STREAM_CORRUPTS.iter().any(|q| p.eq_ignore_ascii_case(q)))
        .then(|| inject.saturating_sub(ONE_PACKET_MARGIN))
}

/// Whether receives on provider `prov` (those without a bounce buffer) get one spill byte
/// after the user's buffer: a message that fills it too is longer than the buffer, which
/// such a provider would not report.
pub fn spill_byte(prov: &str) -> bool {
    prov.split(';').any(|p| {
        TRUNCATION_UNREPORTED
            .iter()
            .any(|q| p.eq_ignore_ascii_case(q))
    })
}

/// Receives shorter than this go through a bounce buffer of that size on provider `prov`
/// (0: never).
pub fn bounce_below(prov: &str) -> usize {
    if prov.split(';').any(|p| {
        TRUNCATION_UNRELIABLE
            .iter()
            .any(|q| p.eq_ignore_ascii_case(q))
    }) {
        BOUNCE
    } else {
        0
    }
}

/// The layout over `offer` for `ranks` ranks, or why the provider cannot carry the offload.
fn unfit(offer: &Offer, ranks: usize, min_src_bits: u32) -> Result<Layout, String> {
    if !offer.tagged {
        return Err(format!(
            "provider {} has no tagged messages (FI_TAGGED)",
            offer.prov
        ));
    }
    if WILDCARD_MISORDER
        .iter()
        .any(|p| offer.prov.eq_ignore_ascii_case(p))
    {
        return Err(format!(
            "provider {} matches wildcard receives (MPI_ANY_SOURCE, MPI_ANY_TAG) out of send \
             order; use it with pml ox (--mca btl self,ofi)",
            offer.prov
        ));
    }
    if !offer.ordered {
        return Err(format!(
            "provider {} does not match messages in send order (FI_ORDER_SAS)",
            offer.prov
        ));
    }
    Layout::fit(offer.tag_bits, ranks, min_src_bits).map_err(|e: LayoutError| {
        format!(
            "provider {}: {e} ({} tag bits, {ranks} ranks)",
            offer.prov, offer.tag_bits
        )
    })
}

/// Chooses the point-to-point layer for a job of `ranks` ranks: `asked` from the `pml`
/// list, `offer` the provider `fi_getinfo` chose (`Err`: why there is none),
/// `min_src_bits` the smallest source field. `Ok((pml, why))`; `Err` (one line) when
/// `pml=cm` cannot be had.
pub fn choose(
    asked: Asked,
    offer: Result<&Offer, &str>,
    ranks: usize,
    min_src_bits: u32,
) -> Result<(Pml, String), String> {
    if asked == Asked::Ox {
        return Ok((Pml::Ox, "pml ox selected".into()));
    }
    let fit = offer
        .map_err(str::to_string)
        .and_then(|o| Ok((o, unfit(o, ranks, min_src_bits)?)));
    match (asked, fit) {
        (Asked::Cm, Err(why)) => Err(format!("pml cm: {why}")),
        (_, Ok((o, layout))) if asked == Asked::Cm || !o.software => Ok((
            Pml::Cm {
                layout,
                directed: o.directed,
            },
            format!(
                "provider {} matches ({} source bits, {} context bits{})",
                o.prov,
                layout.source_bits(),
                layout.context_bits(),
                if o.directed {
                    ", directed receives"
                } else {
                    ""
                }
            ),
        )),
        (_, Ok((o, _))) => Ok((
            Pml::Ox,
            format!(
                "provider {} is a software one: pml ox (name cm in the pml list to offload)",
                o.prov
            ),
        )),
        (_, Err(why)) => Ok((Pml::Ox, why)),
    }
}
