//! Byte transfer layer: the transport components and the per-peer [`Link`]s the protocol
//! (`crate::pml`) runs over. Each component lives in its own folder: `sm` (shared-memory
//! rings, bulk buffers, cooperative single copy) and `tcp` (sockets). Messages to oneself
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
    /// Starts the component's wire-up before the bootstrap fence: creates and publishes
    /// what peers need to reach us. `None` for `self`, which needs no link; `Ok(None)` if
    /// the component cannot run here (peers then have no link to us through it).
    pub open: Option<Open>,
}

/// A component's set-up hook (see [`Btl::open`]).
pub(crate) type Open = fn(&mut Job<'_>) -> Result<Option<Box<dyn Setup>>, Error>;

/// The links a [`Setup`] made: world rank and link.
pub(crate) type Links = Vec<(usize, Box<dyn Link>)>;

/// The transport components, in order of preference: a peer gets its link from the first
/// one that reaches it. A new transport is a folder beside `sm` and `tcp` and one line here.
pub(crate) static REGISTRY: [Btl; 3] = [
    Btl {
        info: Component {
            name: "self",
            description: "messages to the own rank",
        },
        params: &[],
        open: None,
    },
    sm::COMPONENT,
    tcp::COMPONENT,
];

/// What a component's set-up knows of the job.
pub(crate) struct Job<'a> {
    /// Our world rank.
    pub me: i32,
    /// The bootstrap key-value store.
    pub boot: &'a mut dyn Bootstrap,
    /// The node of every rank (ours from the start, the others' after the fence).
    pub hosts: Vec<String>,
    /// The process id of every rank (ours from the start, the others' after the fence).
    pub pids: Vec<i32>,
    /// The components every rank selected, `+`-separated (ours from the start, the
    /// others' after the fence).
    pub btls: Vec<String>,
}

impl Job<'_> {
    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.hosts.len()
    }
    /// Whether rank `p` selected component `name` (and so published what it needs).
    pub fn uses(&self, p: usize, name: &str) -> bool {
        self.btls[p].split('+').any(|c| c == name)
    }
    /// Whether rank `p` runs on our node.
    pub fn same_node(&self, p: usize) -> bool {
        self.hosts[p] == self.hosts[self.me as usize]
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

/// A record a rank published in the key-value store: comma-separated fields. A field that
/// is missing or does not parse is an [`Error::Bootstrap`] naming the record.
pub(crate) struct Record {
    /// Our rank (for the error).
    me: i32,
    /// What the record is (`sm`, `tcp`, `node`).
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
    /// Links to the peers it reaches among those that have no link yet (`linked[p]` false;
    /// never ourselves).
    fn connect(&mut self, job: &mut Job<'_>, linked: &[bool]) -> Result<Links, Error>;
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

/// Wires this rank to its peers with the `selected` components (registry order): publishes
/// our node, pid and selection (`oxmpi-node-<rank>` = `host,pid,self+sm+tcp`), opens every
/// selected component, fences, learns every peer's, lets each component connect the peers
/// that have no link yet and selected it too, fences again. Returns
/// one [`PeerInfo`] per world rank (ours included, without a link).
pub(crate) fn wire_up(
    boot: &mut dyn Bootstrap,
    me: i32,
    size: usize,
    selected: &[&str],
) -> Result<Vec<PeerInfo>, Error> {
    // OXMPI_ENGINE_NODE names the node instead of the host name: tests simulate ranks on
    // several hosts with it (sm within a simulated node, tcp between them).
    let host = std::env::var("OXMPI_ENGINE_NODE").unwrap_or_else(|_| sys::hostname());
    let pid = sys::getpid();
    let mut job = Job {
        me,
        boot,
        hosts: vec![String::new(); size],
        pids: vec![0; size],
        btls: vec![String::new(); size],
    };
    let btls = selected.join("+");
    job.boot
        .put(&format!("oxmpi-node-{me}"), &format!("{host},{pid},{btls}"))?;
    job.hosts[me as usize] = host;
    job.pids[me as usize] = pid;
    job.btls[me as usize] = btls;
    let mut setups = Vec::new();
    for c in REGISTRY.iter().filter(|c| selected.contains(&c.info.name)) {
        if let Some(open) = c.open {
            if let Some(s) = open(&mut job)? {
                setups.push(s);
            }
        }
    }
    job.boot.fence()?;
    for p in (0..size).filter(|&p| p != me as usize) {
        let v = job.boot.get(p as i32, &format!("oxmpi-node-{p}"))?;
        let r = Record::parse(me, "node", p, v, 3)?;
        job.pids[p] = r.get(1)?;
        job.hosts[p] = r.str(0).to_string();
        job.btls[p] = r.str(2).to_string();
    }
    let mut peers: Vec<PeerInfo> = (0..size)
        .map(|p| PeerInfo {
            pid: job.pids[p],
            local: p != me as usize && job.same_node(p),
            link: None,
        })
        .collect();
    for s in &mut setups {
        let linked: Vec<bool> = peers
            .iter()
            .enumerate()
            .map(|(p, i)| p == me as usize || i.link.is_some())
            .collect();
        for (p, link) in s.connect(&mut job, &linked)? {
            peers[p].link = Some(link);
        }
    }
    for (p, h) in job.hosts.iter().enumerate() {
        if p as i32 != me {
            oxmpi_base::verbose!(
                BTL,
                20,
                "rank {me}: rank {p} on {h} reached by {}",
                peers[p].link.as_ref().map_or("no btl", |l| l.name())
            );
        }
    }
    // Everyone has opened every segment (and accepted every connection): what the set-ups
    // hold for that can go (the mappings keep the memory).
    job.boot.fence()?;
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::{Arc, Barrier, Mutex};

    use super::*;
    use crate::pml::hdr::K_EAGER;

    /// A key-value store shared by threads that play the ranks of one job.
    struct MemBoot {
        rank: i32,
        size: i32,
        kv: Arc<Mutex<HashMap<(i32, String), String>>>,
        fence: Arc<Barrier>,
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

    /// Wires up ranks (threads of this process), rank `r` with the components
    /// `selected[r]`.
    fn wire(selected: &[&'static [&'static str]]) -> Vec<Vec<PeerInfo>> {
        let n = selected.len();
        oxmpi_base::params::register_global(&crate::PROVIDER).unwrap();
        let kv = Arc::new(Mutex::new(HashMap::new()));
        let fence = Arc::new(Barrier::new(n));
        let threads: Vec<_> = (0..n)
            .map(|r| {
                let mut boot = MemBoot {
                    rank: r as i32,
                    size: n as i32,
                    kv: kv.clone(),
                    fence: fence.clone(),
                };
                let sel = selected[r];
                std::thread::spawn(move || wire_up(&mut boot, r as i32, n, sel))
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().unwrap().expect("wire-up"))
            .collect()
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

    /// The registry's components wire ranks up in-process: with sm selected the ranks of one
    /// node get sm links (single copy, cooperative areas), with sm excluded tcp links
    /// (buffered), and a rank that excluded sm reaches the others by tcp while they use sm
    /// between themselves; every pair exchanges records; the node records are read back.
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
            let mut ranks = wire(&selected);
            for (r, peers) in ranks.iter().enumerate() {
                assert_eq!(peers.len(), 3);
                assert!(peers[r].link.is_none(), "no link to oneself");
                for (p, info) in peers.iter().enumerate().filter(|&(p, _)| p != r) {
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
            for (a, b) in [(0, 1), (1, 0), (0, 2), (2, 1)] {
                let mut la = ranks[a][b].link.take().unwrap();
                let mut lb = ranks[b][a].link.take().unwrap();
                exchange(&mut *la, &mut *lb, (10 * a + b) as i32);
                ranks[a][b].link = Some(la);
                ranks[b][a].link = Some(lb);
            }
        }
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
        let r = Record::parse(1, "node", 0, "host,x,self+sm".into(), 3).unwrap();
        assert!(matches!(
            r.get::<i32>(1),
            Err(Error::Bootstrap { rank: 1, .. })
        ));
    }
}
