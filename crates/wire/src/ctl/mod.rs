//! The authenticated control channel between `mpirun` (head) and node daemons, sans-IO.
//!
//! Wire format: frames of `len: u32 BE` (bytes that follow) · `kind: u8` · payload.
//!
//! Handshake (mutual HMAC-SHA256 challenge–response with the per-job [`Secret`]):
//!
//! ```text
//! client (daemon)                                   server (head)
//!   HELLO  magic "OXMPICTL", version, jobid, node, Nc  ->
//!                                                   <- CHALLENGE version, Ns, HMAC(K, "oxmpi-ctl server"|v|jobid|node|Nc|Ns)
//!   RESPONSE HMAC(K, "oxmpi-ctl client"|v|jobid|node|Ns|Nc) ->
//!                                                   <- ACCEPTED
//!   MESSAGE* <-> MESSAGE*
//! ```
//!
//! Each side proves knowledge of the secret over the other side's fresh nonce, so recorded
//! handshakes cannot be replayed and a server without the secret is detected by the client.
//! Frames before authentication are limited to [`HANDSHAKE_MAX_FRAME`] bytes. Any violation
//! (bad magic, version, job, MAC, unexpected or malformed frame) yields
//! [`Event::Dropped`] — the owner logs the reason and closes the transport; nothing panics.
//! Messages after authentication are not individually authenticated: the transport is a
//! Unix socket in a per-job 0700 directory locally, or TCP between nodes of a cluster.

pub mod codec;
pub mod conn;
pub mod msg;

pub use codec::DecodeError;
pub use conn::{
    random_nonce, ClosePhase, Config, Connection, CtlError, DropReason, Event, Secret, State,
    DEFAULT_MAX_FRAME, HANDSHAKE_MAX_FRAME, MAC_LEN, MAGIC, NONCE_LEN, PROTOCOL_VERSION,
};
pub use msg::{
    ExitStatus, IoStream, LaunchSpec, Msg, ProcSpec, LAUNCH_PREPEND_RANK, LAUNCH_TAG_OUTPUT,
    LAUNCH_TIMESTAMP_OUTPUT,
};
