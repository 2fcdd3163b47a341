//! The `sm` transport: ranks of one node exchange records through shared-memory rings in
//! `memfd` segments (`segment`: layout, publication, attaching), with bulk buffers for
//! rendezvous fragments (`bulk`) and a cooperative single copy (`coop`, CMA) for large
//! messages (`two_way`: the choice while both directions are busy; `one_way`: for streams
//! below 64 KiB while only the peer sends); `link` is the per-peer
//! [`link::SmLink`], `params` its `btl_sm_*` parameters.

pub(crate) mod bulk;
pub mod coop;
pub(crate) mod link;
pub(crate) mod one_way;
pub(crate) mod params;
pub(crate) mod place;
pub mod ring;
pub(crate) mod segment;
pub(crate) mod two_way;

use oxmpi_base::params::Component;

use crate::btl::Btl;

/// The `sm` entry of the transport registry.
pub(crate) const COMPONENT: Btl = Btl {
    info: Component {
        name: "sm",
        description: "shared memory between ranks of one node (memfd rings)",
    },
    params: &params::PARAMS,
    open: Some(segment::open),
};
