//! The `tcp` transport: a [`link::TcpLink`] per peer over a non-blocking TCP connection, for
//! ranks on different hosts (or any ranks when `sm` is excluded).

pub(crate) mod link;
pub(crate) mod setup;
