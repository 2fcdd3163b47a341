//! MPI engine: matching and protocols (`pml`) over transport components (`btl`: self,
//! shared memory, TCP), and progress.
//!
//! The engine moves **contiguous bytes** between ranks; datatypes are the caller's business
//! (the C ABI packs non-contiguous data before calling). One process has one [`Engine`],
//! created by [`init`] (bootstrap through PMI, or a singleton of one rank) and reached
//! afterwards through [`engine()`].
//!
//! # API summary
//!
//! ```text
//! init(required: ThreadLevel) -> Result<&'static Engine, Error>
//! init_with(bootstrap: Box<dyn Bootstrap>, required) -> Result<&'static Engine, Error>
//! engine() -> Option<&'static Engine>
//! expect_threads(who: &str)               (another thread will call: lock with atomics from now)
//! Engine::{rank, size, thread_level, yields_when_idle, comm_world, comm_self} -> plain values
//! Engine::{comm_rank, comm_size, comm_context, comm_group}(CommId) -> Result<_, Error>
//! Engine::comm_create(ctx: u32, group: Vec<i32 /*world ranks*/>) -> Result<CommId, Error>
//! Engine::comm_free(CommId) -> Result<(), Error>
//! unsafe Engine::isend(buf, len, dest, tag, comm, SendMode) -> Result<ReqId, Error>
//! unsafe Engine::irecv(buf, len, src, tag, comm) -> Result<ReqId, Error>
//! unsafe Engine::isend_started(..same..) -> Result<Started, Error>  (no request if done at once)
//! unsafe Engine::irecv_started(..same..) -> Result<Started, Error>
//! unsafe Engine::send(buf, len, dest, tag, comm, SendMode) -> Result<Status, Error>  (blocking)
//! unsafe Engine::recv(buf, len, src, tag, comm) -> Result<Status, Error>             (blocking)
//! Engine::test(ReqId) -> Option<Status>     (a completed request is freed)
//! Engine::wait(ReqId) -> Status             (unknown request: Status.error = Request)
//! Engine::request_status(ReqId) -> Option<Status>   (does not free: MPI_Request_get_status)
//! Engine::request_free(ReqId)               (completes in the background)
//! Engine::iprobe(src, tag, comm) -> Result<Option<Status>, Error>
//! Engine::probe(src, tag, comm) -> Result<Status, Error>
//! Engine::improbe(src, tag, comm) -> Result<Option<(MessageId, Status)>, Error>
//! Engine::mprobe(src, tag, comm) -> Result<(MessageId, Status), Error>
//! unsafe Engine::imrecv(buf, len, MessageId) -> Result<ReqId, Error>
//! Engine::{progress, cancel(ReqId), abort(code) -> !, finalize() -> Result<(), Error>}
//! PROVIDER: oxmpi_base::params::Provider    (btl self/sm/tcp, pml ox, osc sm/pt2pt, fcoll two_phase and their parameters)
//! ```
//!
//! Differences from the first contract sketch: the communicator queries and probes return
//! `Result` (an invalid communicator, rank or tag is an error with its class), `finalize`
//! returns `Result`, and `comm_create`/`comm_free`/`request_status`/`request_free` and the
//! blocking `send`/`recv` (one lock acquisition, no request for an eager send) were added.
//!
//! Wildcards and the null process use MPICH's values: [`ANY_SOURCE`] = -2, [`ANY_TAG`] = -1,
//! [`PROC_NULL`] = -1 (source/destination argument). Operations on [`PROC_NULL`] complete at
//! once with source [`PROC_NULL`], tag [`ANY_TAG`] and count 0.
//!
//! Errors carry an [`ErrorClass`] (MPI's error classes; the C ABI maps them onto MPICH
//! numbers). A message longer than the receive buffer completes the receive with
//! [`ErrorClass::Truncate`] in its [`Status`]: the buffer holds what fits, the rest is dropped
//! and the stream stays usable. A peer process that dies makes operations that depend on it
//! complete with [`ErrorClass::ProcFailed`] instead of hanging.
//!
//! # Layout
//!
//! ```text
//! lib.rs          this API: types, errors, constants, re-exports
//! engine.rs       Engine: init (bootstrap, btl selection, wire-up), the state lock,
//!                 blocking waits, the API methods (each locks and calls into pml)
//! bootstrap.rs    Bootstrap: key-value store and fence (PMI, file store, singleton)
//! sys.rs          every system call of the crate (memfd/mmap, /proc fds, pidfd, CMA,
//!                 sockets, interfaces), public for the library crates above
//! frameworks.rs   declarations of osc and fcoll (their components are in oxmpi-capi)
//! params.rs       PROVIDER: the components' parameters gathered (each component reads
//!                 its own with oxmpi_base::params::{size, int, list}, which fall back to
//!                 the declared default)
//! pml/            the protocol (pml ox)
//!   mod.rs          State: progress, record dispatch, peer liveness
//!   hdr.rs          record header (Hdr), kinds K_* and flags F_*
//!   matching.rs     the sans-IO Matcher (public as `matching`)
//!   request.rs      requests and the request table
//!   comm.rs         communicators
//!   peer.rs         per-peer state (link, outbound queue, single-copy choice)
//!   send.rs         sends: eager fast path, RTS, sends to oneself, CTS
//!   recv.rs         receives: posting, direct path, delivery, EAGER/RTS/DATA
//!   single_copy.rs  CMA read and cooperative copy
//!   params.rs       mpi_yield_when_idle
//! btl/            transports
//!   mod.rs          Link, LinkError, Caps (what the protocol may ask of a link),
//!                   REGISTRY (self, sm, tcp, ofi), Setup, wire_up
//!   self/           messages to oneself: the registry entry (the path itself is
//!                   pml/send.rs's send_self: it needs no link)
//!   sm/             shared memory: segment.rs (layout, publish, attach), ring.rs
//!                   (public as `ring`), bulk.rs, coop.rs (public as `coop`), link.rs
//!                   (SmLink), params.rs (btl_sm_*)
//!   tcp/            sockets: setup.rs (listen, publish, connect/accept), link.rs
//!                   (TcpLink, framer), params.rs (btl_tcp_*)
//!   ofi/            libfabric: fi.rs (FFI, dlopen), fabric.rs (provider, endpoint),
//!                   link.rs (Net, OfiLink), params.rs (mtl_ofi_provider_*, btl_ofi_*)
//!   fake/           in-process links for the protocol's unit tests (pml/tests.rs)
//! mtl/            matching transports (pml cm): ofi/ (tag.rs: the envelope in the
//!                 libfabric tag, wildcard ignore bits; completion.rs: completions as MPI
//!                 statuses, acks owed; select.rs: whether the offload runs), fake.rs (a
//!                 provider's tagged matching in-process, for tests)
//! ```
//!
//! A new transport is a folder under `btl/` with a `COMPONENT` (name, parameters, set-up
//! hook) and one line in `btl::REGISTRY`; its links implement `Link` and report `Caps`.
//!
//! # Thread safety
//!
//! [`Engine`] is `Sync`: its state sits behind one lock, so `MPI_THREAD_MULTIPLE` is provided
//! for point-to-point. Blocking calls poll the transports; they call `sched_yield` between
//! polls when `mpi_yield_when_idle` is true, or (when it is not set) when the node is
//! oversubscribed (see the parameter table), and in any case after about a millisecond of
//! polls that found nothing to do. The engine has no progress thread.
//!
//! # Transports
//!
//! * `self`: messages to one's own rank are matched in-process.
//! * `sm`: every rank creates one `memfd` segment that holds one single-producer /
//!   single-consumer ring (and bulk buffer) per sending peer; peers map it through
//!   `/proc/<pid>/fd/<fd>` (published through the bootstrap key-value store next to every
//!   rank's node and pid, `btl::wire_up`). Messages up to
//!   `btl_sm_eager_limit` bytes (default 8192) travel eagerly (header and payload in the ring;
//!   up to 16 bytes in one cache line). Larger ones use a rendezvous: the receiver answers a
//!   request-to-send after the match and the sender pipelines the data in fragments through
//!   a per-peer bulk buffer next to the ring (both sides copying; the ring carries one
//!   header line per fragment), or by a cooperative single copy ([`coop`] module: the receiver
//!   reads chunks of the sender's buffer from the front with `process_vm_readv` while the
//!   sender writes chunks from the back with `process_vm_writev`), chosen per peer by
//!   measured throughput (`btl_sm_single_copy_mechanism=auto`; while the receiver is
//!   sending to the same peer too, between the pipelined copy and the receiver reading the
//!   whole message alone, at every rendezvous size); with `cma` the receiver
//!   reads the whole message alone. CMA denied: back to the copy path, with a verbose note.
//! * `tcp`: for every peer without an `sm` link (another node, or `sm` excluded with
//!   `btl=self,tcp` / `btl=^sm`). Each rank listens on a TCP port and publishes
//!   `addresses,port,nonce` in the same fence as `sm` (addresses: `addr/prefix` of every
//!   interface that is up and matches `btl_tcp_if_include` (names, `name*`, addresses or
//!   subnets, in its order) or else is neither loopback nor matched by `btl_tcp_if_exclude`
//!   (default: the usual virtual bridges); none: the peer's host name resolves; peers on the
//!   same node use 127.0.0.1). The lower rank of a pair tries the peer's addresses on its
//!   own subnets first, then the routed ones (`btl_tcp_connect_timeout` each), and sends a
//!   hello with both ranks and the listener's nonce, anything else is refused. Records (u32 length, header, payload) move
//!   over non-blocking `TCP_NODELAY` sockets with user-space send/receive buffers; the same
//!   eager limit and rendezvous (data in DATA records, never CMA) as `sm`. A closed socket,
//!   or a peer host silent for `btl_tcp_link_timeout` (keepalive, `TCP_USER_TIMEOUT`),
//!   marks the peer failed, like an `sm` peer's exit seen through its pidfd.
//!   `OXMPI_ENGINE_NODE` overrides the node name (tests simulate several nodes with it).
//!
//! # How a send travels
//!
//! (Files: `engine.rs` → `pml/send.rs` → `btl/sm/link.rs` and `btl/sm/ring.rs`; on the
//! receiving side `pml/mod.rs` (progress) → `pml/recv.rs`.)
//!
//! 1. `isend(buf, len, dest, tag, comm, mode)` checks the arguments, turns `dest` into a
//!    world rank through the communicator's group and builds the envelope
//!    `(context id, my rank in comm, tag)`.
//! 2. **To oneself** (`self` path): the envelope goes straight to the [`matching`] engine. A
//!    posted receive takes the bytes at once; otherwise small non-synchronous data is copied
//!    into the unexpected queue (the send completes), and large or synchronous sends leave a
//!    reference to the sender's buffer that the matching receive copies from.
//! 3. **To a peer on the node** (`sm` btl): if `len <= btl_sm_eager_limit`, one record
//!    (8-byte frame word + header + payload, padded to 32-byte slots; a standard send's
//!    record carries only the header's 16-byte envelope part) is written into
//!    the peer's ring for us, which lives in the *receiver's* memfd segment; a standard send
//!    then completes (when nothing is queued for that peer, straight from `isend`, with no
//!    queue item). Larger messages send a request-to-send record (RTS: envelope, length,
//!    sender request id, buffer address). Records that do not fit wait in a per-peer FIFO, so
//!    order is kept.
//! 4. The receiver's progress loop polls the frame word at the head of each inbound ring (half
//!    a cache line per message of up to 8 bytes). An eager record is matched against the posted receives
//!    (earliest posted wins, wildcards included) and copied directly into the user buffer, or
//!    copied into the unexpected queue. A synchronous eager send is acknowledged (FIN) when
//!    it matches.
//! 5. A matched RTS is answered with a clear-to-send (CTS: the receiver request id and the
//!    number of bytes wanted, i.e. at most the buffer size, so truncation moves no excess
//!    data). The sender then streams DATA fragments (`btl_sm_fragment_size`, at most half of
//!    `btl_sm_bulk_size`) into the bulk buffer that sits next to the peer's ring for us,
//!    each announced by a one-line DATA record in the same ring (so it stays ordered with
//!    everything else), while the receiver copies them out and frees the space: both cores
//!    copy, pipelined. The bulk buffer is a plain byte FIFO (no frame words, nothing to
//!    clear per cache line), so large copies do not pay the ring's per-line protocol. With
//!    `btl_sm_bulk_size=0` the fragments travel inside the ring as before. For messages of
//!    at least `btl_sm_coop_min_size`, the receiver may instead send a cooperative CTS
//!    (flag `F_COOP`, its buffer address): both sides then claim runs of 32 KiB chunks (a
//!    quarter of what is left each time) through a
//!    control word in the receiver's segment and copy them with CMA (receiver from the
//!    front, sender from the back), and the receiver sends FIN when the sender has
//!    reported its chunks. Which protocol a peer's messages take is chosen per peer from
//!    the throughput each last measured (`auto`, the default); `coop` and `none` force
//!    one. With `btl_sm_single_copy_mechanism=cma` the receiver reads the whole sender's
//!    buffer with `process_vm_readv` and sends FIN. If the kernel refuses a CMA read, the
//!    receiver falls back to CTS (a refused write: the sender leaves its chunk to the
//!    receiver).
//! 6. The send request completes when its last fragment is in the ring (or on FIN); the
//!    receive request completes when all wanted bytes arrived, with [`ErrorClass::Truncate`]
//!    if the message was longer than the buffer. Because RTS and eager records share one
//!    ordered ring per peer and are matched in arrival order, non-overtaking holds across the
//!    eager/rendezvous boundary.
//! 7. Waiting (`wait`, `probe`, `finalize`) first checks the request (an eager send is
//!    already complete), then polls the links (re-checking the request only after a poll
//!    that found work, or after the lock was released): an idle poll reads only the frame word at the
//!    head of each inbound ring and drains a ring only when a record is there. Below
//!    `MPI_THREAD_MULTIPLE` the engine lock is held across up to 1024 polls (no other
//!    thread may call in); with `MPI_THREAD_MULTIPLE` it is released after every poll. Every
//!    1024 polls it checks the peers' pidfds, and operations that depend on a dead peer
//!    complete with [`ErrorClass::ProcFailed`].
//! 8. The blocking [`Engine::send`]/[`Engine::recv`] (what the C library's `MPI_Send`/
//!    `MPI_Recv` use) do the above under one lock acquisition; an eager send that goes
//!    straight into the ring returns without ever creating a request. Below
//!    `MPI_THREAD_MULTIPLE`, a blocking receive from a specific
//!    source on another rank,
//!    while the matcher holds nothing that concerns that source (no unexpected message from
//!    it, no posted receive for it or for `ANY_SOURCE`), polls that source's link itself and
//!    copies a matching eager record straight into the buffer, with no request and no
//!    matcher entry (the "direct path"); anything else on any link (another record, queued
//!    output, a rendezvous) sends it the general way above.
//!
//! # MCA parameters (declared in the `oxmpi-base` registry, see [`PROVIDER`])
//!
//! | parameter | default | meaning |
//! |---|---|---|
//! | `btl_sm_eager_limit` | 8192 | largest eager message (bytes) |
//! | `btl_sm_far_eager_limit` | 4096 | largest eager message to a peer on a far CPU; larger ones up to the eager limit go by a rendezvous the receiver reads alone |
//! | `btl_sm_far_stream_min` | 4096 | smallest eager message written into a far peer's ring with non-temporal stores (0: never) |
//! | `btl_sm_placement` | `auto` | `auto` (far or near per peer, sensed from timed copies of its eager messages), `near` or `far` |
//! | `btl_sm_fragment_size` | 128k | rendezvous fragment size (bytes) |
//! | `btl_sm_fragment_min_size` | 0 | when set, smallest fragment of a lone rendezvous message (cut in quarters; 0: not cut) |
//! | `btl_sm_ring_size` | 320k | bytes of each per-peer ring |
//! | `btl_sm_ring_hot` | 4k | a ping-pong's turn past this many ring bytes starts over at the ring's start (0: never) |
//! | `btl_sm_bulk_size` | 1m | bytes of each per-peer bulk buffer for fragments (0: none) |
//! | `btl_sm_single_copy_mechanism` | `auto` | `auto`, `coop`, `cma` or `none` |
//! | `btl_sm_coop_min_size` | 16k | smallest message for the cooperative copy |
//! | `btl_sm_coop_chunk_size` | 32k | unit of the cooperative copy's claims |
//! | `mpi_yield_when_idle` | false | yield while waiting |
//! | `btl_base_verbose` / `pml_base_verbose` | error | verbose level (10: set-up, fallbacks) |
//!
//! When `mpi_yield_when_idle` is not set explicitly, waiting yields if the launcher marks the
//! node as oversubscribed (`OXMPI_OVERSUBSCRIBED=1`) or the node has more ranks than online
//! CPUs; an explicit value (any source but the default) always wins.

#![warn(missing_docs)]

#[cfg(not(loom))]
pub mod bootstrap;
#[cfg(not(loom))]
mod btl;
#[cfg(not(loom))]
mod engine;
#[cfg(not(loom))]
pub mod frameworks;
#[cfg(not(loom))]
mod mem;
/// Matching transports (`pml cm` + `mtl`): the libfabric matching offload's sans-IO
/// rules (envelope in the tag, completions as statuses, selection) and an in-process
/// model of a provider's tagged matching for their tests.
#[cfg(not(loom))]
pub mod mtl;
#[cfg(not(loom))]
mod params;
#[cfg(not(loom))]
pub mod partition;
#[cfg(not(loom))]
mod pml;
#[cfg(not(loom))]
mod pvar_reader;
#[cfg(not(loom))]
mod pvars;
/// The engine's system calls (memfd and mappings, peers' file descriptors, pidfds, CMA,
/// sockets), also used by the library crates above it (shared-memory collectives, RMA,
/// MPI-IO).
#[cfg(not(loom))]
pub mod sys;

/// One-sided operations over the `ofi` transport's endpoint (for the C library's `osc`
/// component `ofi`).
#[cfg(not(loom))]
pub use btl::ofi::link::osc::{osc as ofi_osc, Osc as OfiOsc, OscError as OfiOscError};
/// The libfabric providers the `ofi` transport could use here (for `oxmpi-info`).
#[cfg(not(loom))]
pub use btl::ofi::providers as ofi_providers;
/// The element types, operations and kinds of the `ofi` transport's atomics (libfabric's
/// `enum fi_datatype`, `enum fi_op`; for the C library's `osc` component `ofi`).
#[cfg(not(loom))]
pub use btl::ofi::{
    fabric::AtomicKind as OfiAtomicKind,
    fi::{AtomicOp as OfiAtomicOp, AtomicType as OfiAtomicType},
};
/// The `sm` transport's cooperative single copy (public for its loom model test).
#[cfg(not(loom))]
pub use btl::sm::coop;
/// The `sm` transport's shared-memory ring (public for its loom model test).
#[cfg(not(loom))]
pub use btl::sm::ring;
/// The context ids of a process's communicators (sans-IO; the C ABI's and the Rust API's
/// agreements share it).
#[cfg(not(loom))]
pub use pml::ctxid;
/// Message matching (sans-IO), public for tests and benchmarks.
#[cfg(not(loom))]
pub use pml::matching;

// The loom model build (`--cfg loom`, tests/loom_*.rs) compiles only these three, with
// loom's atomics, at the same public paths.
#[cfg(loom)]
#[path = "btl/sm/coop.rs"]
pub mod coop;
#[cfg(loom)]
#[path = "pml/matching.rs"]
pub mod matching;
#[cfg(loom)]
#[path = "btl/sm/ring.rs"]
pub mod ring;

#[cfg(not(loom))]
pub use bootstrap::Bootstrap;
#[cfg(not(loom))]
pub use engine::{engine, expect_threads, init, init_with, Engine, Serving, Wait, SLEEP_MAX};
/// The engine's MCA frameworks (`btl`: self, sm, tcp; `pml`: ox; `osc`: sm, pt2pt; `fcoll`:
/// two_phase, declared for the C ABI's components) and parameters, for the registry, `mpirun` and
/// `oxmpi-info`.
#[cfg(not(loom))]
pub use params::{check as check_params, PROVIDER};
/// `mpi_ft_enable`, fault tolerance (ULFM) on (`mpirun --with-ft ulfm`).
#[cfg(not(loom))]
pub use pml::params::FT_ENABLE;
/// `mpi_profile`, the job profile's directory.
#[cfg(not(loom))]
pub use pml::params::PROFILE;
/// The protocol's counters (traffic per peer and transport, matching queues, wait time).
#[cfg(not(loom))]
pub use pml::stats::{
    set_wait_timing, size_bucket, timing_sampled, timing_scale, CommBinding, CommStats, MatchStats,
    PeerStats, Pvar, PvarClass, Stats, SIZE_BUCKETS, TIMING_EXACT, TIMING_SAMPLE_EVERY,
};
/// A reader of one performance variable (what a tools-interface handle keeps).
#[cfg(not(loom))]
pub use pvar_reader::{PvarOpError, PvarReader};
/// The engine's performance variables.
#[cfg(not(loom))]
pub use pvars::pvars;
/// Cross-memory-attach copies, for one-sided communication over user memory.
#[cfg(not(loom))]
pub use sys::{cma_copy, Cma};

/// Wildcard source for receives and probes (MPICH's `MPI_ANY_SOURCE`).
pub const ANY_SOURCE: i32 = -2;
/// Wildcard tag for receives and probes (MPICH's `MPI_ANY_TAG`).
pub const ANY_TAG: i32 = -1;
/// The null process (MPICH's `MPI_PROC_NULL`): sends and receives to it complete at once.
pub const PROC_NULL: i32 = -1;
/// Largest tag value accepted (`MPI_TAG_UB`).
pub const TAG_UB: i32 = (1 << 30) - 1;
/// A bit above [`TAG_UB`] that the library's own messages may carry on their tag
/// ([`Engine::isend_marked`]; the collectives' error markers and length headers): a
/// receive of tag `t` (or [`ANY_TAG`]) matches a message of tag `t | TAG_MARK` as one of
/// `t`, and its status shows the bit, so the receiver tells such a message from data of
/// the same length. No user message carries it (a user's tag is at most [`TAG_UB`]). Under
/// `pml cm` it is the bit above the tag field of the provider's tag (`mtl::ofi::tag`).
pub const TAG_MARK: i32 = 1 << 30;

/// MPI thread support levels, ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ThreadLevel {
    /// `MPI_THREAD_SINGLE`
    Single,
    /// `MPI_THREAD_FUNNELED`
    Funneled,
    /// `MPI_THREAD_SERIALIZED`
    Serialized,
    /// `MPI_THREAD_MULTIPLE`
    Multiple,
}

/// Send modes of MPI point-to-point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SendMode {
    /// `MPI_Send`/`MPI_Isend`: completes when the buffer may be reused.
    Standard,
    /// `MPI_Ssend`/`MPI_Issend`: completes only after the receiver matched the message.
    Sync,
    /// `MPI_Rsend`/`MPI_Irsend`: like standard here.
    Ready,
    /// `MPI_Bsend`/`MPI_Ibsend`: the engine copies the data and the request is complete on
    /// return (buffer-space accounting for attach/detach is done by the caller).
    Buffered,
}

/// MPI error classes the engine produces. The C ABI maps them onto MPICH's numbers
/// (`ProcFailed` has no MPI-3.1 class; map it to `MPI_ERR_OTHER` or MPIX_ERR_PROC_FAILED).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// `MPI_ERR_BUFFER`: invalid buffer pointer.
    Buffer,
    /// `MPI_ERR_COUNT`: invalid count.
    Count,
    /// `MPI_ERR_TAG`: invalid tag.
    Tag,
    /// `MPI_ERR_COMM`: invalid communicator.
    Comm,
    /// `MPI_ERR_RANK`: invalid rank.
    Rank,
    /// `MPI_ERR_GROUP`: invalid group (e.g. the caller is not a member).
    Group,
    /// `MPI_ERR_REQUEST`: invalid request.
    Request,
    /// `MPI_ERR_TRUNCATE`: message truncated on receive.
    Truncate,
    /// `MPI_ERR_OTHER`: other error (bootstrap, system call).
    Other,
    /// `MPI_ERR_INTERN`: internal error.
    Intern,
    /// `MPI_ERR_NO_MEM`: out of memory / resources.
    NoMem,
    /// `MPI_ERR_UNSUPPORTED_OPERATION`: not supported (e.g. a peer on another node and no
    /// network transport yet).
    Unsupported,
    /// A peer process failed (ULFM's `MPI_ERR_PROC_FAILED`).
    ProcFailed,
    /// The communicator was revoked (ULFM's `MPI_ERR_REVOKED`, see [`Engine::comm_revoke`]).
    Revoked,
    /// A nonblocking receive from any source could not complete yet because a member of
    /// its communicator failed (ULFM's `MPI_ERR_PROC_FAILED_PENDING`): the request stays
    /// pending; see [`Engine::comm_failure_ack`].
    ProcFailedPending,
    /// `MPI_ERR_ARG`: an invalid argument of no other class (e.g. a partition index).
    Arg,
}

/// Engine errors: an [`ErrorClass`] and a human-readable context.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A bad argument (rank, tag, count, communicator, request).
    #[error("{class:?}: {msg}")]
    Arg {
        /// MPI error class.
        class: ErrorClass,
        /// What was wrong.
        msg: String,
    },
    /// Bootstrap (PMI / key-value store) failure.
    #[error("bootstrap failed on rank {rank}: {msg}")]
    Bootstrap {
        /// Our rank (or -1 before it is known).
        rank: i32,
        /// What failed.
        msg: String,
    },
    /// A system call failed.
    #[error("{what} failed on rank {rank}: {source}")]
    Sys {
        /// Our rank.
        rank: i32,
        /// Which operation.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The peer (world rank) died.
    #[error("peer rank {peer} (pid {pid}) failed")]
    PeerFailed {
        /// World rank of the peer.
        peer: i32,
        /// Its process id.
        pid: i32,
    },
    /// `init` was called twice, or the engine is finalized.
    #[error("engine state: {0}")]
    State(String),
}

impl Error {
    /// The MPI error class of this error.
    pub fn class(&self) -> ErrorClass {
        match self {
            Error::Arg { class, .. } => *class,
            Error::Bootstrap { .. } | Error::Sys { .. } | Error::State(_) => ErrorClass::Other,
            Error::PeerFailed { .. } => ErrorClass::ProcFailed,
        }
    }

    // Unused only in the loom model build, which compiles the ring alone.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn arg(class: ErrorClass, msg: impl Into<String>) -> Error {
        Error::Arg {
            class,
            msg: msg.into(),
        }
    }
}

/// Completion information of a receive (or send) request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    /// Source rank in the communicator (`PROC_NULL` for a null receive).
    pub source: i32,
    /// Message tag.
    pub tag: i32,
    /// `Some(class)` if the operation failed (e.g. [`ErrorClass::Truncate`]).
    pub error: Option<ErrorClass>,
    /// Bytes delivered into the receive buffer (for a truncated message: what fit).
    pub count_bytes: usize,
    /// The request was cancelled.
    pub cancelled: bool,
}

impl Status {
    /// Status of an operation on [`PROC_NULL`].
    pub const PROC_NULL: Status = Status {
        source: PROC_NULL,
        tag: ANY_TAG,
        error: None,
        count_bytes: 0,
        cancelled: false,
    };
}

/// A process among jobs: its job's name (as the launcher names it) and its rank in that
/// job's `MPI_COMM_WORLD`. Peers of other jobs are known by it ([`Engine::connect_group`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcName {
    /// The job.
    pub job: String,
    /// The world rank in that job.
    pub rank: i32,
}

impl std::fmt::Display for ProcName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rank {} of job {}", self.rank, self.job)
    }
}

/// A communicator handle of the engine's communicator table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CommId(pub u32);

/// A request handle (nonblocking operation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReqId(pub u64);

/// How a nonblocking operation started ([`Engine::isend_started`],
/// [`Engine::irecv_started`]): finished at once, with no request to test, wait for or free,
/// or pending as a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Started {
    /// Complete; the status of the finished operation.
    Complete(Status),
    /// In progress: test or wait for this request.
    Pending(ReqId),
}

/// A matched-probe message handle (`MPI_Message`), consumed by [`Engine::imrecv`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageId(pub u64);

impl MessageId {
    /// The message matched by a probe for [`PROC_NULL`] (`MPI_MESSAGE_NO_PROC`).
    pub const NO_PROC: MessageId = MessageId(u64::MAX);
}
