//! The `tcp` transport: a [`link::TcpLink`] per peer over a non-blocking TCP connection, for
//! ranks on different hosts (or any ranks when `sm` is excluded), or a [`stripe::StripedLink`]
//! over several when interfaces pair up or `btl_tcp_links` asks for more; `setup` connects
//! them, `params` declares `btl_tcp_*`.

pub(crate) mod link;
pub(crate) mod params;
pub(crate) mod setup;
pub(crate) mod stripe;

use oxmpi_base::params::Component;

use crate::btl::Btl;

/// The `tcp` entry of the transport registry.
pub(crate) const COMPONENT: Btl = Btl {
    info: Component {
        name: "tcp",
        description: "TCP sockets between ranks on different hosts (or without sm)",
    },
    params: &params::PARAMS,
    open: Some(setup::open),
};
