//! The `tcp` transport's parameters (`btl_tcp_*`).

use oxmpi_base::params::{ParamDecl, ParamType};

/// `btl_tcp_if_include`.
pub(crate) static IF_INCLUDE: ParamDecl = ParamDecl::new(
    "btl",
    "tcp",
    "if_include",
    ParamType::List,
    "",
    "Interfaces (names, IPv4 addresses or subnets a.b.c.d/n) whose address the tcp \
     transport publishes for other hosts to connect to (the first in the system's order); \
     empty: the address of the host name",
)
.level(4);

/// `btl_tcp_if_exclude`.
pub(crate) static IF_EXCLUDE: ParamDecl = ParamDecl::new(
    "btl",
    "tcp",
    "if_exclude",
    ParamType::List,
    "",
    "Interfaces (names, IPv4 addresses or subnets a.b.c.d/n) the tcp transport must not \
     publish: it publishes the address of the first other non-loopback interface; exclusive \
     with btl_tcp_if_include",
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

/// Every `btl_tcp_*` parameter, in `oxmpi-info` order.
pub(crate) static PARAMS: [ParamDecl; 4] = [IF_INCLUDE, IF_EXCLUDE, PORT_MIN, PORT_RANGE];
