//! The `tcp` transport's parameters (`btl_tcp_*`).

use oxmpi_base::params::{ParamDecl, ParamType};

/// `btl_tcp_if_include`.
pub(crate) static IF_INCLUDE: ParamDecl = ParamDecl::new(
    "btl",
    "tcp",
    "if_include",
    ParamType::List,
    "",
    "Interfaces (names, name* prefixes, IPv4 addresses or subnets a.b.c.d/n) whose addresses \
     the tcp transport publishes for other hosts to connect to, preferred in this order; \
     empty: every interface that is up and not excluded by btl_tcp_if_exclude",
)
.level(4);

/// `btl_tcp_if_exclude`.
pub(crate) static IF_EXCLUDE: ParamDecl = ParamDecl::new(
    "btl",
    "tcp",
    "if_exclude",
    ParamType::List,
    oxmpi_base::net::DEFAULT_IF_EXCLUDE,
    "Interfaces (names, name* prefixes, IPv4 addresses or subnets a.b.c.d/n) the tcp \
     transport does not publish (loopback never is, unless included by name); setting it \
     explicitly together with btl_tcp_if_include is an error",
)
.level(4);

/// `btl_tcp_port_min_v4`.
pub(crate) static PORT_MIN: ParamDecl = ParamDecl::new(
    "btl",
    "tcp",
    "port_min_v4",
    ParamType::Int { min: 0, max: 65535 },
    "0",
    "Lowest TCP port the tcp transport listens on (0: any free port)",
)
.level(5);

/// `btl_tcp_port_range_v4`.
pub(crate) static PORT_RANGE: ParamDecl = ParamDecl::new(
    "btl",
    "tcp",
    "port_range_v4",
    ParamType::Int { min: 1, max: 65535 },
    "64511",
    "Number of ports tried from btl_tcp_port_min_v4 upwards",
)
.level(5);

/// `btl_tcp_connect_timeout`.
pub(crate) static CONNECT_TIMEOUT: ParamDecl = ParamDecl::new(
    "btl",
    "tcp",
    "connect_timeout",
    ParamType::Int { min: 1, max: 3600 },
    "5",
    "Seconds a connection to one of a peer's addresses may take before the next address is \
     tried",
)
.level(5);

/// `btl_tcp_link_timeout`.
pub(crate) static LINK_TIMEOUT: ParamDecl = ParamDecl::new(
    "btl",
    "tcp",
    "link_timeout",
    ParamType::Int { min: 0, max: 86400 },
    "20",
    "Seconds a peer's host may leave the tcp link unanswered (TCP keepalive probes, \
     unacknowledged data) before the peer counts as failed and the operations that depend \
     on it end with MPI_ERR_PROC_FAILED (0: never); a busy peer process is not affected",
)
.level(5);

/// `btl_tcp_handshake_timeout`.
pub(crate) static HANDSHAKE_TIMEOUT: ParamDecl = ParamDecl::new(
    "btl",
    "tcp",
    "handshake_timeout",
    ParamType::Int {
        min: 1,
        max: 600_000,
    },
    "2000",
    "Milliseconds a connection to a rank's tcp listener has to present its hello before it \
     is closed (connections are served side by side, so a slow or silent one delays nobody)",
)
.level(5);

/// `btl_tcp_links`.
pub(crate) static LINKS: ParamDecl = ParamDecl::new(
    "btl",
    "tcp",
    "links",
    ParamType::Int { min: 1, max: 16 },
    "1",
    "TCP connections per paired interface to each peer on another host; large messages are \
     striped over all of a peer's connections (every pair of interfaces on a common subnet \
     gets its own)",
)
.level(4);

/// Every `btl_tcp_*` parameter, in `oxmpi-info` order.
pub(crate) static PARAMS: [ParamDecl; 8] = [
    IF_INCLUDE,
    IF_EXCLUDE,
    PORT_MIN,
    PORT_RANGE,
    CONNECT_TIMEOUT,
    LINK_TIMEOUT,
    HANDSHAKE_TIMEOUT,
    LINKS,
];
