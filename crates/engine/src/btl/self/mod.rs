//! The `self` transport: messages a rank sends to itself. It has no link and nothing to
//! set up: the protocol matches such a message against the rank's own posted receives at
//! once (`pml/send.rs`, `send_self`), copying small data into the unexpected queue and
//! leaving a reference to the sender's buffer for large or synchronous sends. It is listed
//! in the registry so that `btl=self,...` selections and `oxmpi-info` name it like the
//! other components; it declares no parameters.

use oxmpi_base::params::Component;

use crate::btl::Btl;

/// The `self` entry of the transport registry.
pub(crate) const COMPONENT: Btl = Btl {
    info: Component {
        name: "self",
        description: "messages to the own rank",
    },
    params: &[],
    open: None,
};
