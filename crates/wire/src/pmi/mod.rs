//! PMI-1 ("simple") and PMI-2 wire protocols, sans-IO.
//!
//! * [`codec`]: [`Message`], [`Frame`], [`Decoder`] — parse and format both framings, with
//!   incremental decoding (partial input, several messages per read, truncation, oversize).
//! * [`msg`]: constructors for every request and reply of the grammar (byte-exact with the
//!   Slurm/Hydra/MPICH transcripts).
//! * [`server`]: [`PmiServer`], the server core for one job.
//! * [`spawn`]: the typed `spawn` request ([`SpawnRequest`]) in both framings.
//! * [`mapping`]: `PMI_process_mapping` builder and parser.
//!
//! Wire summary. PMI-1: one `\n`-terminated line `cmd=<name> k=v ...` (no escaping, no
//! spaces inside values, lines ≤ 1024 bytes). PMI-2: the connection starts with the PMI-1
//! line `cmd=init pmi_version=2 pmi_subversion=0`, then every message is a 6-byte
//! space-padded decimal length followed by `cmd=<name>;k=v;...` with `;` doubled in values.

pub mod codec;
pub mod mapping;
pub mod msg;
pub mod server;
pub mod spawn;

pub use codec::{CodecError, Decoder, Frame, Framing, Message};
pub use mapping::{parse_process_mapping, process_mapping, process_mapping_from_nodes, Block};
pub use server::{Action, ConnId, FenceError, JobInfo, PmiServer, ServerError};
pub use spawn::{SpawnCommand, SpawnRequest};
