//! Byte transfer layer: the transport components and the per-peer [`Link`]s the protocol
//! (`crate::pml`) runs over. Each component lives in its own folder: `sm` (shared-memory
//! rings, bulk buffers, cooperative single copy), `tcp` (sockets) and `ofi` (libfabric). Messages to oneself
//! never reach a link (the `self` path is handled by the protocol directly).

use oxmpi_base::output::Stream;
use oxmpi_base::params::{Component, ParamDecl};

use crate::bootstrap::Bootstrap;
use crate::btl::sm::coop::CoopMem;
use crate::btl::sm::ring::RingCorrupt;
use crate::pml::hdr::Hdr;
use crate::{sys, Error};

#[cfg(test)]
pub(crate) mod fake;
pub(crate) mod ofi;
/// `self` is a keyword, so the folder `btl/self` is the module `self_`.
#[path = "self/mod.rs"]
pub(crate) mod self_;
pub(crate) mod sm;
pub(crate) mod tcp;

/// `btl` verbose stream (`btl_base_verbose`).
pub(crate) static BTL: Stream = Stream::new("btl");

/// A transport component: its name and description (for `oxmpi-info` and the `btl`
/// selection list), its parameters and its set-up hook.
pub(crate) struct Btl {
    /// Name and one-line description.
    pub info: Component,
    /// The parameters it declares (`btl_<name>_*`).
    pub params: &'static [ParamDecl],
    /// Starts the component's wire-up before the bootstrap fence: creates what peers need
    /// to reach us (its [`Setup::section`] of our endpoint record says how). `None` for
    /// `self`, which needs no link; `Ok(None)` if the component cannot run here (it then
    /// publishes nothing and peers have no link to us through it).
    pub open: Option<Open>,
}

/// A component's set-up hook (see [`Btl::open`]).
pub(crate) type Open = fn(&Job) -> Result<Option<Box<dyn Setup>>, Error>;

/// The links a [`Setup`] made: world rank and link.
pub(crate) type Links = Vec<(usize, Box<dyn Link>)>;

/// The transport components, in order of preference: a peer gets its link from the first
/// one that reaches it. A new transport is a folder beside `sm` and `tcp` and one entry here.
pub(crate) static REGISTRY: [Btl; 4] = [
    self_::COMPONENT,
    sm::COMPONENT,
    tcp::COMPONENT,
    ofi::COMPONENT,
];

/// What a component's set-up knows of the job.
pub(crate) struct Job {
    /// Our world rank.
    pub me: i32,
    /// The endpoint of every rank (ours from the start, the others' after the fence).
    pub eps: Vec<Endpoint>,
}

impl Job {
    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.eps.len()
    }
    /// Whether rank `p` selected component `name`.
    pub fn uses(&self, p: usize, name: &str) -> bool {
        self.eps[p].btls.split('+').any(|c| c == name)
    }
    /// Whether rank `p` runs on our node.
    pub fn same_node(&self, p: usize) -> bool {
        self.eps[p].host == self.eps[self.me as usize].host
    }
    /// The section component `name` published in rank `p`'s endpoint record, which must
    /// have `n` fields; `None` if it published none (it did not select or could not open
    /// the component: we have no link to it through `name`).
    pub fn section(&self, p: usize, name: &'static str, n: usize) -> Result<Option<Record>, Error> {
        self.eps[p]
            .sections
            .iter()
            .find(|(c, _)| c == name)
            .map(|(_, fields)| Record::parse(self.me, name, p, fields.clone(), n))
            .transpose()
    }
    /// An [`Error::Sys`] maker for a failed `what` on our rank.
    pub fn sys_err(&self, what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        sys_err(self.me, what)
    }
}

/// An [`Error::Sys`] maker for a failed `what` on `rank`.
pub(crate) fn sys_err(rank: i32, what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Sys { rank, what, source }
}

/// Separates the sections of an endpoint record (PMI values may not hold `;` or spaces).
const SECTION_SEP: char = '|';
/// Separates a section's component name from its fields.
const NAME_SEP: char = ':';

/// What a rank publishes for its peers, in one key-value pair (`oxmpi-ep-<rank>`), so a
/// peer reads it with one bootstrap `get`: `host,pid,btls` (`btls` the selected
/// components, `+`-separated), then one `|name:fields` section per component that
/// published something, e.g. `n1,4242,self+sm+tcp|sm:5,4194304,262144,0|tcp:,40123,77`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Endpoint {
    /// The rank's node.
    pub host: String,
    /// Its process id.
    pub pid: i32,
    /// The components it selected, `+`-separated.
    pub btls: String,
    /// Component name and the fields of its section (comma-separated), in registry order.
    pub sections: Vec<(String, String)>,
}

impl Endpoint {
    /// The published form (see [`Endpoint`]).
    pub fn to_text(&self) -> String {
        let mut s = format!("{},{},{}", self.host, self.pid, self.btls);
        for (name, fields) in &self.sections {
            s.push(SECTION_SEP);
            s.push_str(name);
            s.push(NAME_SEP);
            s.push_str(fields);
        }
        s
    }

    /// Parses the record `text` published by `rank`: three header fields with a numeric
    /// pid, then sections with a name, each component at most once. Anything else is an
    /// [`Error::Bootstrap`] naming the rank; a section's own fields are checked by its
    /// component ([`Job::section`]).
    pub fn parse(me: i32, rank: usize, text: String) -> Result<Endpoint, Error> {
        let whole = Record {
            me,
            what: "endpoint",
            rank,
            text,
        };
        let mut parts = whole.text.trim().split(SECTION_SEP);
        let head: Vec<&str> = parts.next().unwrap_or("").split(',').collect();
        let [host, pid, btls] = head[..] else {
            return Err(whole.bad());
        };
        let mut ep = Endpoint {
            host: host.to_string(),
            pid: pid.parse().map_err(|_| whole.bad())?,
            btls: btls.to_string(),
            sections: Vec::new(),
        };
        for part in parts {
            match part.split_once(NAME_SEP) {
                Some((name, fields))
                    if !name.is_empty() && !ep.sections.iter().any(|(c, _)| c == name) =>
                {
                    ep.sections.push((name.to_string(), fields.to_string()));
                }
                _ => return Err(whole.bad()),
            }
        }
        Ok(ep)
    }
}

/// A record a rank published in the key-value store: comma-separated fields. A field that
/// is missing or does not parse is an [`Error::Bootstrap`] naming the record.
pub(crate) struct Record {
    /// Our rank (for the error).
    me: i32,
    /// What the record is (`endpoint`, or a component's section: `sm`, `tcp`).
    what: &'static str,
    /// The rank that published it.
    rank: usize,
    /// The text as published.
    text: String,
}

impl Record {
    /// The record `text` of `what` published by `rank`, which must have `n` fields.
    pub fn parse(
        me: i32,
        what: &'static str,
        rank: usize,
        text: String,
        n: usize,
    ) -> Result<Record, Error> {
        let r = Record {
            me,
            what,
            rank,
            text,
        };
        if r.text.trim().split(',').count() != n {
            return Err(r.bad());
        }
        Ok(r)
    }

    /// Field `i` as text.
    pub fn str(&self, i: usize) -> &str {
        self.text.trim().split(',').nth(i).unwrap_or("")
    }

    /// Field `i`, parsed.
    pub fn get<T: std::str::FromStr>(&self, i: usize) -> Result<T, Error> {
        self.str(i).parse().map_err(|_| self.bad())
    }

    /// The error for this record (well-formed fields with impossible values).
    pub fn bad(&self) -> Error {
        Error::Bootstrap {
            rank: self.me,
            msg: format!(
                "bad {} record of rank {}: {:?}",
                self.what, self.rank, self.text
            ),
        }
    }
}

/// A component's wire-up after the fence. It is dropped after the final fence of the
/// wire-up (so what peers open through it, like a segment's file descriptor or a listening
/// socket, lives until every rank is connected).
pub(crate) trait Setup {
    /// The fields of the component's section of our endpoint record (comma-separated,
    /// without `|` or `:`): what a peer needs to reach us through it. `None` (the
    /// default): the component publishes nothing.
    fn section(&self) -> Option<String> {
        None
    }
    /// Links to the peers it reaches among those that have no link yet (`linked[p]` false;
    /// never ourselves).
    fn connect(&mut self, job: &Job, linked: &[bool]) -> Result<Links, Error>;
}

/// What the protocol may ask of a link instead of its name.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Caps {
    /// The peer's memory can be read and written directly (cross-memory attach): a
    /// rendezvous may offer a single copy.
    pub single_copy: bool,
    /// Records the link accepted may still wait in its own user-space buffer
    /// ([`Link::sending`]); a send completes only when they are out.
    pub buffered: bool,
    /// The cooperative-copy control areas (its transfers to us, ours to it), if the link
    /// has them.
    pub coop: Option<(CoopMem, CoopMem)>,
    /// The link reads a rendezvous sender's buffer across the network ([`Link::read`]):
    /// a rendezvous may offer it ([`crate::pml::hdr::F_RMA`]).
    pub rma_read: bool,
}

impl Caps {
    /// A network link's: no single copy, records may wait in the link's own buffers.
    pub(crate) const NETWORK: Caps = Caps {
        single_copy: false,
        buffered: true,
        coop: None,
        rma_read: false,
    };
}

/// A rank's view of one peer after the wire-up.
#[derive(Debug, Default)]
pub(crate) struct PeerInfo {
    /// Its process id (meaningful when `local`).
    pub pid: i32,
    /// It runs on our node.
    pub local: bool,
    /// The link that reaches it, if any component does.
    pub link: Option<Box<dyn Link>>,
}

/// The bootstrap key of `rank`'s [`Endpoint`] record.
fn endpoint_key(rank: usize) -> String {
    format!("oxmpi-ep-{rank}")
}

/// Our node's name: `OXMPI_ENGINE_NODE`, else the host name. Tests simulate ranks on
/// several hosts with the variable (sm within a simulated node, tcp between them).
fn node_name() -> String {
    std::env::var("OXMPI_ENGINE_NODE").unwrap_or_else(|_| sys::hostname())
}

/// Wires this rank to its peers with the `selected` components (registry order): opens
/// every selected component, publishes our [`Endpoint`] (node, pid, selection and each
/// component's section) under `oxmpi-ep-<rank>`, fences, reads every peer's with one
/// `get` each, lets each component connect the peers that have no link yet, fences again.
/// Returns one [`PeerInfo`] per world rank (ours included, without a link).
pub(crate) fn wire_up(
    boot: &mut dyn Bootstrap,
    me: i32,
    size: usize,
    selected: &[&str],
) -> Result<Vec<PeerInfo>, Error> {
    wire_up_among(boot, me, size, selected, &vec![false; size])
}

/// [`wire_up`] for a group whose members may already be linked: member `me` of `size`
/// links to each member `p` with `known[p]` false (a process of another job met after
/// start-up) and leaves the others alone (`known` must agree across the group: two members
/// know each other or neither does). The bootstrap is the group's exchange of endpoint
/// records (each member's is its business card: node, pid, selection and one section per
/// component, as at start-up); known members' records are not read. Returns one
/// [`PeerInfo`] per member, with a link for each unknown member that a component reaches.
pub(crate) fn wire_up_among(
    boot: &mut dyn Bootstrap,
    me: i32,
    size: usize,
    selected: &[&str],
    known: &[bool],
) -> Result<Vec<PeerInfo>, Error> {
    if known.len() != size || !(0..size as i32).contains(&me) {
        return Err(Error::Bootstrap {
            rank: me,
            msg: format!(
                "group wire-up as member {me} of {size} with {} known members",
                known.len()
            ),
        });
    }
    let mut job = Job {
        me,
        eps: vec![Endpoint::default(); size],
    };
    job.eps[me as usize] = Endpoint {
        host: node_name(),
        pid: sys::getpid(),
        btls: selected.join("+"),
        sections: Vec::new(),
    };
    let mut setups = Vec::new();
    for c in REGISTRY.iter().filter(|c| selected.contains(&c.info.name)) {
        if let Some(open) = c.open {
            if let Some(s) = open(&job)? {
                if let Some(fields) = s.section() {
                    let own = &mut job.eps[me as usize];
                    own.sections.push((c.info.name.to_string(), fields));
                }
                setups.push(s);
            }
        }
    }
    boot.put(&endpoint_key(me as usize), &job.eps[me as usize].to_text())?;
    boot.fence()?;
    let unknown = |p: &usize| *p != me as usize && !known[*p];
    for p in (0..size).filter(unknown) {
        let v = boot.get(p as i32, &endpoint_key(p))?;
        job.eps[p] = Endpoint::parse(me, p, v)?;
    }
    let mut peers: Vec<PeerInfo> = (0..size)
        .map(|p| PeerInfo {
            pid: job.eps[p].pid,
            local: unknown(&p) && job.same_node(p),
            link: None,
        })
        .collect();
    for s in &mut setups {
        let linked: Vec<bool> = peers
            .iter()
            .enumerate()
            .map(|(p, i)| !unknown(&p) || i.link.is_some())
            .collect();
        for (p, link) in s.connect(&job, &linked)? {
            peers[p].link = Some(link);
        }
    }
    if oxmpi_base::events::wanted(oxmpi_base::events::Kind::Transport) {
        for (p, i) in peers.iter().enumerate() {
            let transport = match &i.link {
                Some(l) => l.name(),
                None if p == me as usize => "self",
                None => "none",
            };
            oxmpi_base::events::raise(&oxmpi_base::events::Event::Transport {
                peer: p as i32,
                transport,
            });
        }
    }
    for (p, ep) in job.eps.iter().enumerate() {
        if unknown(&p) {
            oxmpi_base::verbose!(
                BTL,
                20,
                "rank {me}: rank {p} on {} reached by {}",
                ep.host,
                peers[p].link.as_ref().map_or("no btl", |l| l.name())
            );
        }
    }
    // Everyone has opened every segment (and accepted every connection): what the set-ups
    // hold for that can go (the mappings keep the memory).
    boot.fence()?;
    drop(setups);
    Ok(peers)
}

/// A bidirectional, ordered, reliable record link to one peer.
pub(crate) trait Link: Send + std::fmt::Debug {
    /// Component name (`sm`, `tcp`), for messages only: the protocol asks [`Link::caps`].
    fn name(&self) -> &'static str;
    /// What the link can do.
    fn caps(&self) -> Caps;
    /// Largest payload one record may carry.
    fn max_payload(&self) -> usize;
    /// Largest payload of one DATA record (rendezvous fragment); by default
    /// [`Link::max_payload`].
    fn max_data(&self) -> usize {
        self.max_payload()
    }
    /// Says that the next record is a blocking send's, which may answer a record just
    /// received (a ping-pong's turn: `sm` then hands its lines to the shared cache). A hint.
    fn answer_next(&mut self) {}
    /// Says that the next record's payload is best written with non-temporal stores (its
    /// reader's CPU is far: `sm` then writes its whole lines to memory instead of taking
    /// each one back from the reader's cache first). A hint; the record is the same.
    fn stream_next(&mut self) {}
    /// Sends one record (header + `len` payload bytes) if there is room; `false` otherwise.
    ///
    /// # Safety
    /// `payload` must be valid for reads of `len` bytes (or `len == 0`).
    unsafe fn try_send(&mut self, hdr: &Hdr, payload: *const u8, len: usize) -> bool;
    /// The next inbound record: header, payload pointer and length. The payload stays valid
    /// until [`Link::release`].
    fn poll(&mut self) -> Result<Option<(Hdr, *const u8, usize)>, LinkError>;
    /// Frees the record returned by the last [`Link::poll`].
    fn release(&mut self);
    /// `true` if [`Link::poll`] may return a record; a cheap check for idle polling (a
    /// `false` here means there is nothing to read now).
    fn ready(&self) -> bool;
    /// `true` while records accepted by [`Link::try_send`] still wait in the link's own
    /// buffers for the peer to take them (only progress moves them on; finalize waits).
    fn sending(&self) -> bool {
        false
    }
    /// Called by finalize, once nothing is queued, until it returns `true`: the link
    /// finishes what the peer may still need from this process before it stops
    /// progressing (the `ofi` link exchanges a goodbye, since a provider's delivery may
    /// need both sides' progress). By default there is nothing to do.
    fn closing(&mut self) -> bool {
        true
    }
    /// Reads the first `n` bytes of the buffer that the peer's rendezvous `sreq` (an RTS
    /// with [`crate::pml::hdr::F_RMA`] this link returned) offered into `buf`, and returns
    /// when they are there: `Ok(true)`; `Ok(false)` if the link cannot (the caller asks
    /// for the pipelined copy). By default it cannot.
    ///
    /// # Safety
    /// `buf` must be valid for writes of `n` bytes.
    unsafe fn read(&mut self, buf: *mut u8, n: usize, sreq: u64) -> Result<bool, LinkError> {
        let _ = (buf, n, sreq);
        Ok(false)
    }
    /// The peer failed and the link is dropped: nothing more is exchanged with it, but the
    /// transport may release what it holds for it (the `ofi` link counts the peer as
    /// closed, so the shared fabric is closed once every other link has closed too, at
    /// finalize or at once: the `shm` provider removes its shared-memory file then). By
    /// default there is nothing to do.
    fn abandon(&mut self) {}
    /// The application frees `len` bytes at `addr` (`MPI_Free_mem`): the link drops what
    /// it keeps of that memory (the `ofi` link's cached registrations). By default it
    /// keeps nothing.
    fn memory_freed(&mut self, addr: usize, len: usize) {
        let _ = (addr, len);
    }
    /// How a thread with nothing to do can sleep until this link has something for the
    /// protocol (`Engine::wait_message`): [`Wake::Now`] if a record or an event is already
    /// buffered in user space, [`Wake::Fds`] after pushing the file descriptors whose
    /// readiness tells (with `true` when writability matters too: `sending` is true, or the
    /// protocol has records queued for the peer, `queued`), [`Wake::Opaque`] when nothing a
    /// thread can block in tells (shared-memory rings, libfabric queues). By default opaque.
    fn wait_fds(&self, queued: bool, fds: &mut Vec<(std::os::fd::RawFd, bool)>) -> Wake {
        let _ = (queued, fds);
        Wake::Opaque
    }
    /// The shared-memory link itself, if this is one: the drain calls its `poll` and
    /// `release` directly (inlined) instead of through the trait object.
    fn as_sm(&mut self) -> Option<&mut sm::link::SmLink> {
        None
    }
}

/// See [`Link::wait_fds`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wake {
    /// Something is there now: do not sleep.
    Now,
    /// The descriptors pushed tell when something comes.
    Fds,
    /// No descriptor tells: a sleeper can only poll.
    Opaque,
}

/// A broken link (corrupt data from the peer).
#[derive(Debug, thiserror::Error)]
pub(crate) enum LinkError {
    /// The shared ring held an impossible frame.
    #[error(transparent)]
    Ring(#[from] RingCorrupt),
    /// A record too short to hold a header.
    #[error("record of {0} bytes is shorter than a header")]
    Short(usize),
    /// A line-aligned eager record whose payload offset does not fit in it (corrupt
    /// shared memory).
    #[error("record of {len} bytes with its payload {pad} bytes after the header")]
    Pad {
        /// The announced offset.
        pad: usize,
        /// The record's length.
        len: usize,
    },
    /// A record length beyond what the link allows (corrupt or foreign stream).
    #[error("record of {len} bytes exceeds the link's maximum of {max}")]
    TooLong {
        /// The announced length.
        len: usize,
        /// The largest allowed.
        max: usize,
    },
    /// The peer closed the connection (`partial` bytes of an unfinished record were left).
    #[error("connection closed by the peer ({partial} bytes of an unfinished record)")]
    Closed {
        /// Bytes of a record cut short.
        partial: usize,
    },
    /// The network lost the peer (the provider's message).
    #[error("peer lost: {0}")]
    PeerLost(String),
    /// A libfabric operation failed (the provider's message).
    #[error("libfabric: {0}")]
    Fabric(String),
    /// A socket error.
    #[error("socket error: {0}")]
    Io(#[from] std::io::Error),
    /// A bulk-buffer reference outside the buffer (corrupt shared memory).
    #[error(
        "fragment of {len} bytes at bulk position {pos} lies outside the {cap}-byte bulk buffer"
    )]
    Bulk {
        /// The announced position.
        pos: u64,
        /// The announced length.
        len: usize,
        /// The bulk buffer's size.
        cap: usize,
    },
}

impl LinkError {
    /// Whether the error is the peer process going away (its connection closed or reset),
    /// rather than a corrupt stream.
    pub(crate) fn is_peer_gone(&self) -> bool {
        match self {
            LinkError::Closed { .. } | LinkError::PeerLost(_) => true,
            LinkError::Io(e) => matches!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::BrokenPipe
                    | std::io::ErrorKind::ConnectionAborted
                    | std::io::ErrorKind::TimedOut
            ),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::{Arc, Barrier, Mutex};

    use super::*;
    use crate::pml::hdr::K_EAGER;

    /// The store of an in-memory job: `(publisher, key)` to value.
    type Kv = Arc<Mutex<HashMap<(i32, String), String>>>;
    /// Bootstrap `get`s made: `(reader, publisher)` to count.
    type Gets = Arc<Mutex<HashMap<(i32, i32), usize>>>;

    /// A key-value store shared by threads that play the ranks of one job; it counts the
    /// `get`s (each one a round trip to the PMI server in a real job).
    struct MemBoot {
        rank: i32,
        size: i32,
        kv: Kv,
        gets: Gets,
        fence: Arc<Barrier>,
    }

    impl MemBoot {
        /// Rank `rank` of `size` over `kv`, fencing with `fence`.
        fn new(rank: i32, size: i32, kv: &Kv, gets: &Gets, fence: &Arc<Barrier>) -> MemBoot {
            MemBoot {
                rank,
                size,
                kv: kv.clone(),
                gets: gets.clone(),
                fence: fence.clone(),
            }
        }
    }

    impl Bootstrap for MemBoot {
        fn rank(&self) -> i32 {
            self.rank
        }
        fn size(&self) -> i32 {
            self.size
        }
        fn put(&mut self, key: &str, value: &str) -> Result<(), Error> {
            let mut kv = self.kv.lock().unwrap();
            kv.insert((self.rank, key.to_string()), value.to_string());
            Ok(())
        }
        fn fence(&mut self) -> Result<(), Error> {
            self.fence.wait();
            Ok(())
        }
        fn get(&mut self, rank: i32, key: &str) -> Result<String, Error> {
            *self
                .gets
                .lock()
                .unwrap()
                .entry((self.rank, rank))
                .or_default() += 1;
            let kv = self.kv.lock().unwrap();
            kv.get(&(rank, key.to_string()))
                .cloned()
                .ok_or_else(|| Error::Bootstrap {
                    rank: self.rank,
                    msg: format!("no {key} of rank {rank}"),
                })
        }
        fn abort(&mut self, _code: i32, _msg: &str) {}
        fn finalize(&mut self) -> Result<(), Error> {
            Ok(())
        }
    }

    /// A wired-up in-memory job: every rank's peers, what was published, the gets made.
    struct Wired {
        ranks: Vec<Vec<PeerInfo>>,
        kv: HashMap<(i32, String), String>,
        gets: HashMap<(i32, i32), usize>,
    }

    /// Wires up ranks (threads of this process), rank `r` with the components
    /// `selected[r]`.
    fn wire(selected: &[&'static [&'static str]]) -> Wired {
        let n = selected.len();
        oxmpi_base::params::register_global(&crate::PROVIDER).unwrap();
        let kv = Kv::default();
        let gets = Gets::default();
        let fence = Arc::new(Barrier::new(n));
        let threads: Vec<_> = (0..n)
            .map(|r| {
                let mut boot = MemBoot::new(r as i32, n as i32, &kv, &gets, &fence);
                let sel = selected[r];
                std::thread::spawn(move || wire_up(&mut boot, r as i32, n, sel))
            })
            .collect();
        let ranks = threads
            .into_iter()
            .map(|t| t.join().unwrap().expect("wire-up"))
            .collect();
        let kv = kv.lock().unwrap().clone();
        let gets = gets.lock().unwrap().clone();
        Wired { ranks, kv, gets }
    }

    /// One record from `a` arrives at `b`, intact.
    fn exchange(a: &mut dyn Link, b: &mut dyn Link, tag: i32) {
        let hdr = Hdr {
            kind: K_EAGER,
            tag,
            ..Hdr::default()
        };
        let payload = [tag as u8; 100];
        // SAFETY: payload holds 100 readable bytes.
        assert!(unsafe { a.try_send(&hdr, payload.as_ptr(), payload.len()) });
        for _ in 0..100_000 {
            if let Some((h, p, n)) = b.poll().expect("poll") {
                assert_eq!((h.kind, h.tag, n), (K_EAGER, tag, 100));
                // SAFETY: the record's payload is readable until the release.
                assert_eq!(unsafe { std::slice::from_raw_parts(p, n) }, &payload[..]);
                b.release();
                return;
            }
            // Moves what a buffering link still holds.
            let _ = a.poll();
            std::thread::yield_now();
        }
        panic!("record {tag} did not arrive");
    }

    /// Checks rank `r`'s published endpoint record field by field: node, pid, selection,
    /// and a section for each component that publishes one (sm: its segment's layout; tcp:
    /// its port and nonce), nothing else.
    fn check_published(kv: &HashMap<(i32, String), String>, r: usize, selected: &[&str]) {
        let mine: Vec<&String> = kv
            .keys()
            .filter(|(p, _)| *p == r as i32)
            .map(|(_, k)| k)
            .collect();
        assert_eq!(mine, [&endpoint_key(r)], "rank {r} publishes one key");
        let text = kv[&(r as i32, endpoint_key(r))].clone();
        let ep = Endpoint::parse(0, r, text.clone()).unwrap();
        assert_eq!(ep.to_text(), text, "round trip");
        assert_eq!(ep.host, node_name());
        assert_eq!(ep.pid, sys::getpid());
        assert_eq!(ep.btls, selected.join("+"));
        let names: Vec<&str> = ep.sections.iter().map(|(c, _)| c.as_str()).collect();
        let expect: Vec<&str> = selected.iter().copied().filter(|&c| c != "self").collect();
        assert_eq!(names, expect, "rank {r}: {text}");
        let job = Job {
            me: 0,
            eps: vec![ep; r + 1],
        };
        if let Some(sm) = job.section(r, "sm", 4).unwrap() {
            let set = crate::btl::sm::params::Settings::read();
            assert!(sm.get::<i32>(0).unwrap() >= 0, "fd");
            // A job of 3 ranks: bulk buffers with a stream area.
            let bulk = sm::bulk::bulk_bytes(set.bulk, 3);
            assert_eq!(bulk, set.bulk * sm::bulk::STREAM_FACTOR);
            let stride = sm::segment::Layout {
                ring: set.ring,
                bulk,
            }
            .slot();
            assert_eq!(sm.get::<usize>(1).unwrap(), 3 * stride, "length");
            assert_eq!(sm.get::<usize>(2).unwrap(), set.ring);
            assert_eq!(sm.get::<usize>(3).unwrap(), bulk);
        }
        if let Some(tcp) = job.section(r, "tcp", 3).unwrap() {
            let usable = oxmpi_base::net::select(
                &oxmpi_base::net::interfaces(),
                &[],
                &oxmpi_base::params::list(&tcp::params::IF_EXCLUDE),
            );
            assert_eq!(
                tcp.str(0),
                oxmpi_base::net::encode(&usable),
                "every usable interface (none: the host name)"
            );
            let (ports, _lo) = tcp::setup::parse_ports(tcp.str(1), usable.len())
                .expect("a port per published address, then the loopback one");
            assert_eq!(ports.len(), usable.len());
            tcp.get::<u64>(2).unwrap();
        }
    }

    /// The registry's components wire ranks up in-process: with sm selected the ranks of one
    /// node get sm links (single copy, cooperative areas), with sm excluded tcp links
    /// (buffered), and a rank that excluded sm reaches the others by tcp while they use sm
    /// between themselves; every pair exchanges records. Each rank publishes one endpoint
    /// record and reads each peer's with exactly one `get`.
    #[test]
    fn wire_up_links_every_pair_by_the_first_component_that_reaches_it() {
        const ALL: &[&str] = &["self", "sm", "tcp"];
        const TCP: &[&str] = &["self", "tcp"];
        for (selected, names) in [
            ([ALL, ALL, ALL], ["sm", "sm", "sm"]),
            ([TCP, TCP, TCP], ["tcp", "tcp", "tcp"]),
            // Links 0-1, 0-2, 1-2.
            ([TCP, ALL, ALL], ["tcp", "tcp", "sm"]),
        ] {
            let name_of = |a: usize, b: usize| names[a + b - 1];
            let Wired {
                mut ranks,
                kv,
                gets,
            } = wire(&selected);
            for (r, peers) in ranks.iter().enumerate() {
                check_published(&kv, r, selected[r]);
                assert_eq!(peers.len(), 3);
                assert!(peers[r].link.is_none(), "no link to oneself");
                for (p, info) in peers.iter().enumerate().filter(|&(p, _)| p != r) {
                    assert_eq!(gets.get(&(r as i32, p as i32)), Some(&1), "{r} reads {p}");
                    assert!(info.local, "rank {p} shares our node");
                    assert_eq!(info.pid, sys::getpid());
                    let link = info.link.as_ref().expect("linked");
                    let name = name_of(r, p);
                    assert_eq!(link.name(), name, "rank {r} to {p}");
                    let caps = link.caps();
                    assert_eq!(caps.single_copy, name == "sm");
                    assert_eq!(caps.buffered, name == "tcp");
                    assert_eq!(caps.coop.is_some(), name == "sm");
                }
            }
            assert_eq!(gets.len(), 6, "no get of one's own record: {gets:?}");
            for (a, b) in [(0, 1), (1, 0), (0, 2), (2, 1)] {
                let mut la = ranks[a][b].link.take().unwrap();
                let mut lb = ranks[b][a].link.take().unwrap();
                exchange(&mut *la, &mut *lb, (10 * a + b) as i32);
                ranks[a][b].link = Some(la);
                ranks[b][a].link = Some(lb);
            }
        }
    }

    /// With `ofi` selected (libfabric's first provider, `tcp;ofi_rxm` without hardware),
    /// every pair gets an ofi link (buffered, no single copy) and records cross it both
    /// ways, many more than a receive window holds, in order; each rank publishes an `ofi`
    /// section (provider and address). Skipped, loudly, without libfabric.
    #[test]
    fn ofi_links_every_pair_and_keeps_order() {
        const OFI: &[&str] = &["self", "ofi"];
        if let Err(e) = ofi::providers() {
            eprintln!("SKIPPED: no libfabric provider ({e}); scripts/deps.sh installs libfabric");
            return;
        }
        // Named in the btl list: the software provider is used (else the policy leaves
        // it to sm and tcp). No other test of this process reads the list.
        oxmpi_base::params::with_global(|r| {
            let _ = r.register(&[oxmpi_base::params::ParamDecl::selection("btl")]);
            r.set("btl", "self,ofi")
        })
        .unwrap()
        .unwrap();
        let Wired { mut ranks, kv, .. } = wire(&[OFI, OFI, OFI]);
        for (r, peers) in ranks.iter().enumerate() {
            let ep = Endpoint::parse(0, r, kv[&(r as i32, endpoint_key(r))].clone()).unwrap();
            assert_eq!(ep.sections.len(), 1, "{ep:?}");
            assert_eq!(ep.sections[0].0, "ofi");
            for (p, info) in peers.iter().enumerate().filter(|&(p, _)| p != r) {
                let link = info.link.as_ref().expect("linked");
                assert_eq!(link.name(), "ofi", "rank {r} to {p}");
                assert!(link.caps().buffered && !link.caps().single_copy);
            }
        }
        for (a, b) in [(0, 1), (1, 0), (0, 2), (2, 1)] {
            let mut la = ranks[a][b].link.take().unwrap();
            let mut lb = ranks[b][a].link.take().unwrap();
            // A burst of small and full records (the provider may refuse a send while it
            // connects: the link then says "no room" and the send is retried).
            let hdr = |tag| Hdr {
                kind: K_EAGER,
                tag,
                ..Hdr::default()
            };
            let big: Vec<u8> = (0..la.max_payload()).map(|i| i as u8).collect();
            let size = |k: i32| if k % 2 == 0 { 3 } else { big.len() };
            let mut sent = 0;
            let mut got = 0;
            for _ in 0..1_000_000 {
                // SAFETY: big holds max_payload readable bytes.
                if sent < 50 && unsafe { la.try_send(&hdr(sent), big.as_ptr(), size(sent)) } {
                    sent += 1;
                }
                if let Some((h, p, n)) = lb.poll().expect("poll") {
                    assert_eq!((h.tag, n), (got, size(got)), "in order");
                    // SAFETY: the record's payload is readable until the release.
                    assert_eq!(unsafe { std::slice::from_raw_parts(p, n) }, &big[..n]);
                    lb.release();
                    got += 1;
                    if got == 50 {
                        break;
                    }
                }
                let _ = la.poll();
            }
            assert_eq!(got, 50);
            for _ in 0..1_000_000 {
                if !la.sending() {
                    break;
                }
            }
            assert!(!la.sending(), "every send completed");
            ranks[a][b].link = Some(la);
            ranks[b][a].link = Some(lb);
        }
    }

    /// Rank 0 of 2 wires up with `selected` against rank 1's record `theirs` (published
    /// beforehand); the error it ends with, as text.
    fn wire_against(selected: &'static [&'static str], theirs: String) -> String {
        oxmpi_base::params::register_global(&crate::PROVIDER).unwrap();
        let kv = Kv::default();
        kv.lock().unwrap().insert((1, endpoint_key(1)), theirs);
        let gets = Gets::default();
        let mut boot = MemBoot::new(0, 2, &kv, &gets, &Arc::new(Barrier::new(1)));
        let e = wire_up(&mut boot, 0, 2, selected).expect_err("a bad record");
        assert_eq!(gets.lock().unwrap()[&(0, 1)], 1, "one get");
        e.to_string()
    }

    /// A malformed endpoint record (header or a section) stops the wire-up with a one-line
    /// error naming the rank that published it and what it published.
    #[test]
    fn wire_up_rejects_a_malformed_record_naming_the_rank() {
        const ALL: &[&str] = &["self", "sm", "tcp"];
        const TCP: &[&str] = &["self", "tcp"];
        let pid = sys::getpid();
        let head = format!("{},{pid},self+sm+tcp", node_name());
        let fail = |what: &str, text: &str| {
            format!("bootstrap failed on rank 0: bad {what} record of rank 1: {text:?}")
        };
        // A section with a field missing: sm on one node, tcp without sm.
        let bad_sm = format!("{head}|sm:5,4096|tcp:,4000,1");
        assert_eq!(wire_against(ALL, bad_sm), fail("sm", "5,4096"));
        let bad_tcp = format!("{head}|sm:5,4096|tcp:,port,1");
        assert_eq!(wire_against(TCP, bad_tcp), fail("tcp", ",port,1"));
        // The header, a section without a name, a component twice.
        for text in [
            format!("{},x,self+sm", node_name()),
            format!("{},{pid}", node_name()),
            format!("{head}|5,4096,262144,0"),
            format!("{head}|:1,2,3"),
            format!("{head}|tcp:,4000,1|tcp:,4001,1"),
        ] {
            assert_eq!(wire_against(ALL, text.clone()), fail("endpoint", &text));
        }
    }

    /// A record round trip: the sections come back in order and a component without one
    /// (not selected, or it could not open) has none.
    #[test]
    fn endpoint_record_round_trip() {
        let ep = Endpoint {
            host: "n1".into(),
            pid: 4242,
            btls: "self+sm+tcp".into(),
            sections: vec![
                ("sm".into(), "5,4096,262144,0".into()),
                ("tcp".into(), "10.0.0.1,40123,77".into()),
            ],
        };
        let text = ep.to_text();
        assert_eq!(
            text,
            "n1,4242,self+sm+tcp|sm:5,4096,262144,0|tcp:10.0.0.1,40123,77"
        );
        assert_eq!(Endpoint::parse(0, 1, text).unwrap(), ep);
        let bare = Endpoint::parse(0, 1, "n1,7,self+tcp\n".into()).unwrap();
        assert_eq!((bare.pid, bare.sections.len()), (7, 0));
        let job = Job {
            me: 0,
            eps: vec![ep, bare],
        };
        assert_eq!(
            job.section(0, "tcp", 3).unwrap().unwrap().str(0),
            "10.0.0.1"
        );
        assert!(job.section(1, "tcp", 3).unwrap().is_none());
        assert!(job.uses(1, "tcp") && !job.uses(1, "sm"));
    }

    /// A published record with a wrong field count or a field that does not parse is an
    /// error naming the record, not a panic.
    #[test]
    fn records_are_checked() {
        let r = Record::parse(0, "sm", 3, "5,4096,262144,0".into(), 4).unwrap();
        assert_eq!(r.get::<i32>(0).unwrap(), 5);
        assert_eq!(r.str(2), "262144");
        assert!(r.get::<u16>(2).is_err(), "out of range for u16");
        let e = Record::parse(0, "tcp", 2, "1,2".into(), 3).err().unwrap();
        assert_eq!(
            e.to_string(),
            "bootstrap failed on rank 0: bad tcp record of rank 2: \"1,2\""
        );
        let r = Record::parse(1, "endpoint", 0, "host,x,self+sm".into(), 3).unwrap();
        assert!(matches!(
            r.get::<i32>(1),
            Err(Error::Bootstrap { rank: 1, .. })
        ));
    }

    /// The sm settings of the late-wiring tests (the registry set up).
    fn late_settings() -> crate::btl::sm::params::Settings {
        oxmpi_base::params::register_global(&crate::PROVIDER).unwrap();
        crate::btl::sm::params::Settings::read()
    }

    /// The process `rank` of `job`.
    fn name(job: &str, rank: i32) -> crate::ProcName {
        crate::ProcName {
            job: job.into(),
            rank,
        }
    }

    /// Engines of two jobs meet after start-up: job A (ranks 0 and 1, linked at start by a
    /// fake wire) and job B (one rank) run [`crate::Engine::connect_group`] over a shared
    /// store. The members of the other job get the next peer indices and a real link (sm on
    /// this node, tcp when A did not select sm), A's own pair keeps its link, nobody reads
    /// a known member's card, an intercommunicator carries messages both ways, and a second
    /// connect of the same processes reuses the links (no card read).
    #[test]
    fn engines_of_two_jobs_connect_after_start_up() {
        use crate::{CommId, Engine, SendMode};
        let set = late_settings();
        let members = [name("A", 0), name("A", 1), name("B", 0)];
        for (a_btls, link) in [
            (&["self", "sm", "tcp"][..], "sm"),
            (&["self", "tcp"], "tcp"),
        ] {
            let (l0, l1, _w) = fake::pair(4096, 4096, 64);
            let engines = [
                Engine::with_links(0, vec![None, Some(Box::new(l0))], &set).with_btls(a_btls),
                Engine::with_links(1, vec![Some(Box::new(l1)), None], &set).with_btls(a_btls),
                Engine::with_links(0, vec![None], &set).with_btls(&["self", "sm", "tcp"]),
            ];
            let jobs = ["A", "A", "B"];
            let kv = Kv::default();
            let gets = Gets::default();
            let fence = Arc::new(Barrier::new(3));
            let connect = |m: usize| {
                let mut boot = MemBoot::new(m as i32, 3, &kv, &gets, &fence);
                engines[m].connect_group(&mut boot, jobs[m], &members)
            };
            let idx: Vec<Vec<i32>> = std::thread::scope(|s| {
                let t: Vec<_> = (0..3).map(|m| s.spawn(move || connect(m))).collect();
                t.into_iter().map(|t| t.join().unwrap().unwrap()).collect()
            });
            assert_eq!(idx, [vec![0, 1, 2], vec![0, 1, 2], vec![1, 2, 0]]);
            let g = gets.lock().unwrap().clone();
            assert_eq!(g.get(&(0, 1)), None, "A0 does not read A1's card: {g:?}");
            assert_eq!(g.len(), 4, "A0 and A1 read B0's, B0 reads both: {g:?}");
            for (m, p) in [(0, 2), (1, 2), (2, 1), (2, 2)] {
                let (l, _) = engines[m].link_name(p as usize);
                assert_eq!(l, Some(link), "member {m} to peer {p}");
            }
            assert_eq!(engines[0].link_name(1).0, Some("fake"));
            // Intercommunicator: A's two ranks against B's one.
            let ctx = 9;
            let ia: Vec<CommId> = (0..2)
                .map(|m| engines[m].comm_create_inter(ctx, vec![0, 1], Some(vec![2])))
                .collect::<Result<_, _>>()
                .unwrap();
            let ib = engines[2]
                .comm_create_inter(ctx, vec![0], Some(vec![1, 2]))
                .unwrap();
            let big: Vec<u8> = (0..300_000).map(|i| (i % 251) as u8).collect();
            std::thread::scope(|s| {
                for m in 0..2 {
                    let (e, c, big) = (&engines[m], ia[m], &big);
                    s.spawn(move || {
                        let mut got = vec![0u8; big.len()];
                        // SAFETY: `got` and `big` outlive the waits.
                        let r = unsafe { e.irecv(got.as_mut_ptr(), got.len(), 0, 3, c) }.unwrap();
                        assert_eq!(e.wait(r).error, None);
                        assert_eq!(&got, big, "to A{m}");
                        // SAFETY: as above.
                        let r =
                            unsafe { e.isend(big.as_ptr(), 1000 + m, 0, 4, c, SendMode::Standard) }
                                .unwrap();
                        assert_eq!(e.wait(r).error, None);
                    });
                }
                let e = &engines[2];
                for p in 0..2 {
                    // SAFETY: `big` outlives the wait.
                    let r =
                        unsafe { e.isend(big.as_ptr(), big.len(), p, 3, ib, SendMode::Standard) }
                            .unwrap();
                    assert_eq!(e.wait(r).error, None);
                }
                for p in 0..2 {
                    let mut got = vec![0u8; 2000];
                    // SAFETY: `got` outlives the wait.
                    let r = unsafe { e.irecv(got.as_mut_ptr(), got.len(), p, 4, ib) }.unwrap();
                    let st = e.wait(r);
                    assert_eq!((st.error, st.count_bytes), (None, 1000 + p as usize));
                    assert_eq!(got[..1000], big[..1000]);
                }
            });
            // Met again: the same indices, no card read, no new peer.
            gets.lock().unwrap().clear();
            let again: Vec<Vec<i32>> = std::thread::scope(|s| {
                let t: Vec<_> = (0..3).map(|m| s.spawn(move || connect(m))).collect();
                t.into_iter().map(|t| t.join().unwrap().unwrap()).collect()
            });
            assert_eq!(again, idx);
            assert!(gets.lock().unwrap().is_empty());
            assert_eq!(engines[2].link_name(0).1, 3);
        }
    }

    /// A group member that no transport of ours reaches (it selected `self` alone, so it
    /// publishes no section) ends the connect with a one-line error naming it, on both
    /// sides, without a hang; so does a group that does not hold us or holds a member twice.
    #[test]
    fn a_member_no_transport_reaches_is_an_error() {
        use crate::Engine;
        let set = late_settings();
        let members = [name("A", 0), name("B", 0)];
        let engines = [
            Engine::with_links(0, vec![None], &set).with_btls(&["self", "sm", "tcp"]),
            Engine::with_links(0, vec![None], &set).with_btls(&["self"]),
        ];
        let jobs = ["A", "B"];
        let kv = Kv::default();
        let gets = Gets::default();
        let fence = Arc::new(Barrier::new(2));
        let errs: Vec<String> = std::thread::scope(|s| {
            let t: Vec<_> = (0..2)
                .map(|m| {
                    let mut boot = MemBoot::new(m as i32, 2, &kv, &gets, &fence);
                    let (e, job, members) = (&engines[m], jobs[m], &members);
                    s.spawn(move || e.connect_group(&mut boot, job, members).unwrap_err())
                })
                .collect();
            t.into_iter()
                .map(|t| t.join().unwrap().to_string())
                .collect()
        });
        assert_eq!(
            errs,
            [
                "bootstrap failed on rank 0: no transport (btl self,sm,tcp) reaches rank 0 of job B",
                "bootstrap failed on rank 0: no transport (btl self) reaches rank 0 of job A",
            ]
        );
        let mut boot = MemBoot::new(0, 1, &kv, &gets, &Arc::new(Barrier::new(1)));
        let e = engines[0]
            .connect_group(&mut boot, "C", &members)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "bootstrap failed on rank 0: rank 0 of job C is not in the group"
        );
        let twice = [name("A", 0), name("B", 0), name("B", 0)];
        let e = engines[0]
            .connect_group(&mut boot, "A", &twice)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "bootstrap failed on rank 0: rank 0 of job B is twice in the group"
        );
    }
}
