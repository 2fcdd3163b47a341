//! One rank's libfabric objects ([`Fabric`]): the chosen provider's fabric, domain,
//! completion queue, address vector (`FI_AV_TABLE`) and reliable-datagram endpoint
//! (`FI_EP_RDM`, `FI_TAGGED`), with safe methods for the few operations the transport
//! needs. Every call goes through the ops tables of `super::fi`; the objects are closed in
//! reverse order on drop.

use std::ffi::{c_int, c_void};
use std::ptr::null_mut;

use super::fi::{self, Lib};
use super::iface::{self, Offer};

/// What the transport asks of `fi_getinfo`.
const CAPS: u64 = fi::FI_TAGGED | fi::FI_SEND | fi::FI_RECV;

/// What it asks for without tagged messages (providers that lack them, or
/// `btl_ofi_tagged=false`): plain messages, receives that name their source, and (asked
/// of the hints) send-after-send order.
const CAPS_MSG: u64 = fi::FI_MSG | fi::FI_DIRECTED_RECV | fi::FI_SEND | fi::FI_RECV;

/// What it asks for on top: reads of other endpoints' registered memory, for the
/// rendezvous of large messages ([`Fabric::rma_read`]).
const RMA: u64 = fi::FI_RMA | fi::FI_READ | fi::FI_REMOTE_READ;

/// What it asks for on top of [`RMA`] where the provider has it: writes into other
/// endpoints' registered memory, for one-sided operations ([`Fabric::rma_write`]).
const RMA_WRITE: u64 = fi::FI_WRITE | fi::FI_REMOTE_WRITE;

/// What it asks for on top of [`RMA_WRITE`] where the provider has it and atomics are
/// wanted: atomic operations on other endpoints' registered memory, for the one-sided
/// accumulates ([`Fabric::atomic_write`]).
const ATOMIC: u64 = fi::FI_ATOMIC;

/// Providers whose atomics are not used, from libfabric 1.17 running `rma_atomics.c`
/// (every rank, the target itself among them, running atomics on one target at once),
/// which `tcp;ofi_rxm` passes: `shm` got wrong values (a fetch returned another field's
/// bytes, byte-wise `FI_BAND` left zeros) and hung; `ofi_rxd` (`udp;ofi_rxd`) crashed
/// with `SIGSEGV` inside the provider's progress (`fi_cq_read`) in every run on a loaded
/// machine, though each kind of operation alone passed.
const ATOMICS_WRONG: [&str; 2] = ["shm", "ofi_rxd"];

/// Whether provider `prov`'s atomics may serve MPI accumulates ([`ATOMICS_WRONG`]).
pub(crate) fn atomics_trusted(prov: &str) -> bool {
    !prov
        .split(';')
        .any(|p| ATOMICS_WRONG.iter().any(|w| p.eq_ignore_ascii_case(w)))
}

/// What the transport asks beyond messages: reads of remote memory (`rma`), and with them
/// writes and atomics (`atomic`) where the provider has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Want {
    /// `FI_RMA` reads (and writes where offered).
    pub rma: bool,
    /// `FI_ATOMIC` too.
    pub atomic: bool,
}

/// The memory registration modes the hints accept: local registration, virtual
/// addresses, registered memory only, provider keys, and registrations bound to an
/// endpoint (`cxi`). Not `FI_MR_RAW`, `FI_MR_HMEM`, `FI_MR_RMA_EVENT` or
/// `FI_MR_MMU_NOTIFY`: a provider that needs those is not offered.
pub(crate) const MR_MODES: c_int = fi::FI_MR_LOCAL
    | fi::FI_MR_VIRT_ADDR
    | fi::FI_MR_ALLOCATED
    | fi::FI_MR_PROV_KEY
    | fi::FI_MR_ENDPOINT;

/// What the chosen provider's `mr_mode` asks of the transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct MrModes {
    /// Local buffers must be registered (`FI_MR_LOCAL`).
    pub local: bool,
    /// Remote addresses are virtual addresses, else offsets (`FI_MR_VIRT_ADDR`).
    pub virt: bool,
    /// The provider picks the keys (`FI_MR_PROV_KEY`).
    pub prov_key: bool,
    /// Each registration is bound to the endpoint and enabled before use
    /// (`FI_MR_ENDPOINT`: `fi_mr_bind`, `fi_mr_enable`).
    pub endpoint: bool,
}

impl MrModes {
    /// The modes of `mr_mode` as `fi_getinfo` returned it.
    pub(crate) fn of(mr_mode: c_int) -> MrModes {
        MrModes {
            local: mr_mode & fi::FI_MR_LOCAL != 0,
            virt: mr_mode & fi::FI_MR_VIRT_ADDR != 0,
            prov_key: mr_mode & fi::FI_MR_PROV_KEY != 0,
            endpoint: mr_mode & fi::FI_MR_ENDPOINT != 0,
        }
    }
}

/// Which atomic operation a validity query is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicKind {
    /// `fi_atomic` (no result).
    Write,
    /// `fi_fetch_atomic` (the previous value comes back).
    Fetch,
    /// `fi_compare_atomic`.
    Compare,
}

/// Whether provider `prov` (as `fi_info` names it, e.g. `tcp;ofi_rxm`) matches `spec`: the
/// whole name or one of its `;`-separated parts, ignoring case.
pub(crate) fn provider_matches(spec: &str, prov: &str) -> bool {
    prov.eq_ignore_ascii_case(spec) || prov.split(';').any(|p| p.eq_ignore_ascii_case(spec))
}

/// The first of `provs` (in `fi_getinfo`'s order, best first) that `include` allows (any,
/// when empty) and `exclude` does not name.
pub(crate) fn choose_provider(
    provs: &[String],
    include: &[String],
    exclude: &[String],
) -> Option<usize> {
    provs.iter().position(|p| {
        (include.is_empty() || include.iter().any(|s| provider_matches(s, p)))
            && !exclude.iter().any(|s| provider_matches(s, p))
    })
}

/// The providers that run over the host's own sockets or memory: there `sm` and `tcp`
/// serve as well, so `ofi` is used only when the `btl` list names it.
const SOFTWARE: [&str; 5] = ["tcp", "udp", "sockets", "shm", "net"];

/// Whether provider `prov` is one of libfabric's software providers (any part of
/// `core;utility` is, e.g. `tcp;ofi_rxm`).
pub(crate) fn software(prov: &str) -> bool {
    prov.split(';')
        .any(|p| SOFTWARE.iter().any(|s| p.eq_ignore_ascii_case(s)))
}

/// A provider as published in an endpoint record, where `;` may not appear.
pub(crate) fn provider_field(prov: &str) -> String {
    prov.replace(';', "+")
}

/// The `FI_EP_RDM` providers `fi_getinfo` offers with tagged messages, in its order (one
/// name per provider and fabric, as `fi_info -l` would list them); for `oxmpi-info`.
pub(crate) fn providers(lib: &Lib) -> Result<Vec<(String, String)>, String> {
    let list = getinfo(lib, CAPS)?;
    let mut out = Vec::new();
    let mut p = list;
    while !p.is_null() {
        // SAFETY: p is a node of the list fi_getinfo returned, freed below.
        let info = unsafe { &*p };
        // SAFETY: fabric_attr and its strings belong to the node.
        let (prov, fabric) = unsafe {
            let fa = &*info.fabric_attr;
            (fi::text(fa.prov_name), fi::text(fa.name))
        };
        if !out.contains(&(prov.clone(), fabric.clone())) {
            out.push((prov, fabric));
        }
        p = info.next;
    }
    // SAFETY: the list came from fi_getinfo and is not used after this.
    unsafe { (lib.freeinfo)(list) };
    Ok(out)
}

/// `fi_getinfo` with our hints: `caps` on a reliable-datagram endpoint, an address table,
/// one thread per domain at a time, and the operation-context and memory registration
/// modes we support. The caller frees the list.
fn getinfo(lib: &Lib, caps: u64) -> Result<*mut fi::fi_info, String> {
    // SAFETY: fi_dupinfo(NULL) (fi_allocinfo) returns a zeroed fi_info with every
    // attribute structure allocated, or NULL.
    let hints = unsafe { (lib.dupinfo)(std::ptr::null()) };
    if hints.is_null() {
        return Err("fi_allocinfo failed".into());
    }
    // SAFETY: hints and its attribute structures were just allocated by libfabric.
    unsafe {
        (*hints).caps = caps;
        if caps & fi::FI_TAGGED == 0 {
            (*(*hints).tx_attr).msg_order = fi::FI_ORDER_SAS;
            (*(*hints).rx_attr).msg_order = fi::FI_ORDER_SAS;
        }
        (*hints).mode = fi::FI_CONTEXT | fi::FI_CONTEXT2;
        (*(*hints).ep_attr).type_ = fi::FI_EP_RDM;
        let d = &mut *(*hints).domain_attr;
        d.av_type = fi::FI_AV_TABLE;
        d.threading = fi::FI_THREAD_DOMAIN;
        d.mr_mode = MR_MODES;
    }
    let mut list = null_mut();
    // SAFETY: valid hints; list receives a list we free later.
    let ret = unsafe {
        (lib.getinfo)(
            fi::API_VERSION,
            std::ptr::null(),
            std::ptr::null(),
            0,
            hints,
            &mut list,
        )
    };
    // SAFETY: hints came from fi_dupinfo and are no longer used.
    unsafe { (lib.freeinfo)(hints) };
    if ret != 0 {
        return Err(format!("fi_getinfo: {}", lib.error(ret as isize)));
    }
    Ok(list)
}

/// The nodes of a `fi_getinfo` list and their providers' names.
fn list_nodes(list: *mut fi::fi_info) -> (Vec<*mut fi::fi_info>, Vec<String>) {
    let mut nodes = Vec::new();
    let mut names = Vec::new();
    let mut p = list;
    while !p.is_null() {
        nodes.push(p);
        // SAFETY: p is a node of the list, its fabric_attr and name owned by it.
        names.push(unsafe { fi::text((*(*p).fabric_attr).prov_name) });
        // SAFETY: as above.
        p = unsafe { (*p).next };
    }
    (nodes, names)
}

/// The domain and fabric names of a `fi_getinfo` node.
fn offer_of(node: *mut fi::fi_info) -> Offer {
    // SAFETY: a node of a live list; its attribute structures and names belong to it.
    unsafe {
        Offer {
            domain: fi::text((*(*node).domain_attr).name),
            fabric: fi::text((*(*node).fabric_attr).name),
        }
    }
}

/// The tag bits a provider matches, from its `mem_tag_format`: all 64 for the generic
/// format (`FI_TAG_GENERIC`, alternating bits) or none given, else up to its highest bit.
pub(crate) fn tag_bits(format: u64) -> u32 {
    const GENERIC: u64 = 0xaaaa_aaaa_aaaa_aaaa;
    if format == 0 || format == GENERIC {
        64
    } else {
        64 - format.leading_zeros()
    }
}

/// One rank's libfabric objects; closed in reverse order on drop.
#[derive(Debug)]
pub(crate) struct Fabric {
    lib: &'static Lib,
    list: *mut fi::fi_info,
    info: *mut fi::fi_info,
    fabric: *mut fi::fid_fabric,
    domain: *mut fi::fid_domain,
    cq: *mut fi::fid_cq,
    av: *mut fi::fid_av,
    ep: *mut fi::fid_ep,
    /// More endpoints on the same domain (`btl_ofi_rails`), each with its own completion
    /// queue, address vector and, on connection-based providers, connections: rendezvous
    /// reads are striped over them ([`Fabric::rail_read`]).
    rails: Vec<Rail>,
    mrs: Vec<*mut fi::fid_mr>,
    /// The provider's name (`tcp;ofi_rxm`).
    pub prov: String,
    /// Buffers must be registered (`FI_MR_LOCAL`): [`Fabric::register`] them.
    pub mr_local: bool,
    /// Largest message the endpoint sends.
    pub max_msg: usize,
    /// Largest message `fi_inject` takes.
    pub inject: usize,
    /// The provider moves data only when its completion queue is read.
    pub manual_progress: bool,
    /// The endpoint reads registered memory of its peers ([`Fabric::rma_read`]).
    pub rma: bool,
    /// It also writes it ([`Fabric::rma_write`]).
    pub rma_write: bool,
    /// And runs atomic operations on it ([`Fabric::atomic_write`]).
    pub atomic: bool,
    /// Atomics to one target apply in the order issued, and those that read see the
    /// earlier writes (`FI_ORDER_ATOMIC_RAW` and `_WAW`).
    pub atomic_ordered: bool,
    /// Registrations are bound to the endpoint and enabled (`FI_MR_ENDPOINT`).
    pub mr_endpoint: bool,
    /// Records travel as tagged messages; else as plain ones (`FI_MSG`) into receives
    /// directed at their source, in send order (`FI_ORDER_SAS`).
    pub tagged: bool,
    /// Remote addresses are virtual addresses (`FI_MR_VIRT_ADDR`), not offsets into the
    /// registration.
    pub mr_virt: bool,
    /// The provider picks registration keys (`FI_MR_PROV_KEY`); else ours are used.
    pub mr_prov_key: bool,
    /// The offer opened (domain and fabric names).
    pub offer: Offer,
    /// The network interface it runs on, where the provider offers one per interface
    /// ([`iface::choose`]).
    pub iface: Option<oxmpi_base::net::Iface>,
    /// Tag bits the provider matches (`mem_tag_format`; 64 for the generic format).
    pub tag_bits: u32,
    /// Tagged messages of one sender match in the order sent (`FI_ORDER_SAS` both ways).
    pub ordered: bool,
    /// The next key we request for a registration.
    next_key: u64,
}

/// An endpoint with its completion queue and address vector.
#[derive(Debug)]
struct Rail {
    cq: *mut fi::fid_cq,
    av: *mut fi::fid_av,
    ep: *mut fi::fid_ep,
}

/// A registration of user memory for one transfer ([`Fabric::register_user`]); closed
/// with [`Fabric::deregister`].
#[derive(Debug)]
pub(crate) struct Mr {
    mr: *mut fi::fid_mr,
    /// The descriptor for local operations on it.
    pub desc: *mut c_void,
    /// The key a peer reads it with.
    pub key: u64,
}

/// A failed libfabric call `what` with return code `ret`.
fn fail(lib: &Lib, what: &str, ret: isize) -> String {
    format!("{what}: {} ({ret})", lib.error(ret))
}

/// `Err` for a negative return code of `what`.
fn check(lib: &Lib, what: &str, ret: c_int) -> Result<(), String> {
    if ret < 0 {
        return Err(fail(lib, what, ret as isize));
    }
    Ok(())
}

impl Fabric {
    /// Opens the first provider `include`/`exclude` allow and an enabled endpoint on it
    /// with room for `ranks` addresses; a one-line reason if there is none, if it is a
    /// [`software`] one and `hardware_only`, or if a step fails.
    pub(crate) fn open(
        lib: &'static Lib,
        include: &[String],
        exclude: &[String],
        ranks: usize,
        hardware_only: bool,
        tagged: bool,
        want: Want,
    ) -> Result<Fabric, String> {
        // Tagged messages if wanted and an allowed provider has them, else plain ones.
        let mut caps = if tagged { CAPS } else { CAPS_MSG };
        let mut list = getinfo(lib, caps).unwrap_or(null_mut());
        if caps == CAPS && choose_provider(&list_nodes(list).1, include, exclude).is_none() {
            if !list.is_null() {
                // SAFETY: the list from fi_getinfo, not used after this.
                unsafe { (lib.freeinfo)(list) };
            }
            caps = CAPS_MSG;
            list = null_mut();
        }
        if list.is_null() {
            list = getinfo(lib, caps)?;
        }
        let mut f = Fabric {
            lib,
            list,
            info: null_mut(),
            fabric: null_mut(),
            domain: null_mut(),
            cq: null_mut(),
            av: null_mut(),
            ep: null_mut(),
            rails: Vec::new(),
            mrs: Vec::new(),
            prov: String::new(),
            mr_local: false,
            max_msg: 0,
            inject: 0,
            manual_progress: false,
            rma: false,
            rma_write: false,
            atomic: false,
            atomic_ordered: false,
            mr_endpoint: false,
            tagged: caps == CAPS,
            mr_virt: false,
            mr_prov_key: false,
            offer: Offer::default(),
            iface: None,
            tag_bits: 64,
            ordered: false,
            next_key: 1,
        };
        let (nodes, names) = list_nodes(list);
        let Some(k) = choose_provider(&names, include, exclude) else {
            let mut seen = names.clone();
            seen.dedup();
            return Err(format!(
                "no provider allowed (offered: {}; include [{}], exclude [{}])",
                if seen.is_empty() {
                    "none".to_string()
                } else {
                    seen.join(", ")
                },
                include.join(","),
                exclude.join(",")
            ));
        };
        if hardware_only && software(&names[k]) {
            return Err(format!(
                "only the software provider {} here (sm and tcp serve better); name ofi in \
                 the btl list to use it",
                names[k]
            ));
        }
        // Among the provider's offers (one per interface for the socket providers), the
        // one on an interface peers on other nodes reach.
        let same: Vec<usize> = (0..nodes.len()).filter(|&i| names[i] == names[k]).collect();
        let offers: Vec<Offer> = same.iter().map(|&i| offer_of(nodes[i])).collect();
        let (j, on) = if offers.len() > 1 {
            iface::choose(&offers, &iface::usable())
        } else {
            (0, None)
        };
        let k = same[j];
        f.info = nodes[k];
        f.prov = names[k].clone();
        f.offer = offers[j].clone();
        f.iface = on;
        // The same provider and offer with reads, writes and atomics of remote memory,
        // reads and writes, or reads only, if it has them.
        let extras = [RMA | RMA_WRITE | ATOMIC, RMA | RMA_WRITE, RMA];
        let atomic = want.atomic && atomics_trusted(&f.prov);
        let wanted = |x: &u64| want.rma && (atomic || x & ATOMIC == 0);
        for extra in extras.into_iter().filter(wanted) {
            let Ok(rlist) = getinfo(lib, caps | extra) else {
                continue;
            };
            let (rnodes, rnames) = list_nodes(rlist);
            let same = |i: usize| rnames[i] == f.prov && offer_of(rnodes[i]) == f.offer;
            match (0..rnodes.len()).find(|&i| same(i)) {
                Some(i) => {
                    // SAFETY: the first list is no longer referred to (f.info moves on).
                    unsafe { (lib.freeinfo)(f.list) };
                    f.list = rlist;
                    f.info = rnodes[i];
                    f.rma = true;
                    f.rma_write = extra & fi::FI_WRITE != 0;
                    f.atomic = extra & ATOMIC != 0;
                    break;
                }
                // SAFETY: the list from fi_getinfo, not used after this.
                None => unsafe { (lib.freeinfo)(rlist) },
            }
        }
        // SAFETY: every pointer below is either the chosen fi_info node (owned by `list`,
        // alive until drop) or an object libfabric returned through the previous call;
        // each call goes through the object's own ops table, as the header's inline
        // wrapper would.
        unsafe {
            let info = &*f.info;
            let modes = MrModes::of((*info.domain_attr).mr_mode);
            f.mr_local = modes.local;
            f.mr_endpoint = modes.endpoint;
            let order = fi::FI_ORDER_ATOMIC_RAW | fi::FI_ORDER_ATOMIC_WAW;
            f.atomic_ordered = (*info.tx_attr).msg_order & order == order;
            f.max_msg = (*info.ep_attr).max_msg_size;
            f.inject = (*info.tx_attr).inject_size;
            f.manual_progress = (*info.domain_attr).data_progress == fi::FI_PROGRESS_MANUAL;
            f.mr_virt = modes.virt;
            f.mr_prov_key = modes.prov_key;
            f.tag_bits = tag_bits((*info.ep_attr).mem_tag_format);
            f.ordered = (*info.tx_attr).msg_order & fi::FI_ORDER_SAS != 0
                && (*info.rx_attr).msg_order & fi::FI_ORDER_SAS != 0;
            check(
                lib,
                "fi_fabric",
                (lib.fabric)(info.fabric_attr, &mut f.fabric, null_mut()),
            )?;
            let fab = &*f.fabric;
            check(
                lib,
                "fi_domain",
                ((*fab.ops).domain)(f.fabric, f.info, &mut f.domain, null_mut()),
            )?;
            let main = f.open_endpoint(ranks)?;
            (f.cq, f.av, f.ep) = (main.cq, main.av, main.ep);
        }
        Ok(f)
    }

    /// Opens an enabled endpoint on the domain with its own completion queue and address
    /// vector (room for `ranks` addresses).
    fn open_endpoint(&mut self, ranks: usize) -> Result<Rail, String> {
        let lib = self.lib;
        let mut r = Rail {
            cq: null_mut(),
            av: null_mut(),
            ep: null_mut(),
        };
        let mut open = || -> Result<(), String> {
            // SAFETY: the domain and the chosen fi_info node are alive until drop; every
            // other pointer is an object libfabric returned through the previous call; each
            // call goes through the object's own ops table, as the header's inline wrapper
            // would.
            unsafe {
                let dom = &*self.domain;
                let mut cq_attr = fi::fi_cq_attr {
                    size: 0,
                    flags: 0,
                    format: fi::FI_CQ_FORMAT_TAGGED,
                    wait_obj: fi::FI_WAIT_NONE,
                    signaling_vector: 0,
                    wait_cond: 0,
                    wait_set: null_mut(),
                };
                check(
                    lib,
                    "fi_cq_open",
                    ((*dom.ops).cq_open)(self.domain, &mut cq_attr, &mut r.cq, null_mut()),
                )?;
                let mut av_attr = fi::fi_av_attr {
                    type_: fi::FI_AV_TABLE,
                    rx_ctx_bits: 0,
                    count: ranks,
                    ep_per_node: 0,
                    name: std::ptr::null(),
                    map_addr: null_mut(),
                    flags: 0,
                };
                check(
                    lib,
                    "fi_av_open",
                    ((*dom.ops).av_open)(self.domain, &mut av_attr, &mut r.av, null_mut()),
                )?;
                check(
                    lib,
                    "fi_endpoint",
                    ((*dom.ops).endpoint)(self.domain, self.info, &mut r.ep, null_mut()),
                )?;
                let ep = &mut (*r.ep).fid;
                check(
                    lib,
                    "fi_ep_bind(av)",
                    ((*ep.ops).bind)(ep, &mut (*r.av).fid, 0),
                )?;
                check(
                    lib,
                    "fi_ep_bind(cq)",
                    ((*ep.ops).bind)(ep, &mut (*r.cq).fid, fi::FI_SEND | fi::FI_RECV),
                )?;
                check(
                    lib,
                    "fi_enable",
                    ((*ep.ops).control)(ep, fi::FI_ENABLE, null_mut()),
                )?;
            }
            Ok(())
        };
        if let Err(e) = open() {
            close_objects(&[r.ep.cast(), r.av.cast(), r.cq.cast()]);
            return Err(e);
        }
        Ok(r)
    }

    /// Opens `n` more endpoints on the domain (rails) with room for `ranks` addresses
    /// each; how many opened (the first failure ends it, with its reason).
    pub(crate) fn open_rails(&mut self, n: usize, ranks: usize) -> (usize, Option<String>) {
        for _ in 0..n {
            match self.open_endpoint(ranks) {
                Ok(r) => self.rails.push(r),
                Err(e) => return (self.rails.len(), Some(e)),
            }
        }
        (self.rails.len(), None)
    }

    /// Endpoint `i`: 0 the main one, then the rails.
    fn endpoint(&self, i: usize) -> Rail {
        match i.checked_sub(1) {
            None => Rail {
                cq: self.cq,
                av: self.av,
                ep: self.ep,
            },
            Some(k) => Rail {
                cq: self.rails[k].cq,
                av: self.rails[k].av,
                ep: self.rails[k].ep,
            },
        }
    }

    /// The rails opened ([`Fabric::open_rails`]).
    pub(crate) fn rails(&self) -> usize {
        self.rails.len()
    }

    /// The main endpoint's address (`fi_getname`).
    pub(crate) fn name(&self) -> Result<Vec<u8>, String> {
        self.name_on(0)
    }

    /// Endpoint `i`'s address (0: the main one, then the rails).
    pub(crate) fn name_on(&self, i: usize) -> Result<Vec<u8>, String> {
        let e = self.endpoint(i);
        let mut buf = vec![0u8; 256];
        for _ in 0..2 {
            let mut len = buf.len();
            // SAFETY: an enabled endpoint; buf holds len writable bytes.
            let ret = unsafe {
                let ep = &mut (*e.ep).fid;
                ((*(*e.ep).cm).getname)(ep, buf.as_mut_ptr().cast(), &mut len)
            };
            if ret == 0 {
                buf.truncate(len);
                return Ok(buf);
            }
            if len <= buf.len() {
                return Err(fail(self.lib, "fi_getname", ret as isize));
            }
            buf.resize(len, 0);
        }
        Err("fi_getname: the address keeps growing".into())
    }

    /// Inserts a peer's address into the main address vector; its `fi_addr_t`.
    pub(crate) fn insert(&mut self, addr: &[u8]) -> Result<fi::FiAddr, String> {
        self.insert_on(0, addr)
    }

    /// Inserts a peer's address into endpoint `i`'s address vector; its `fi_addr_t`.
    pub(crate) fn insert_on(&mut self, i: usize, addr: &[u8]) -> Result<fi::FiAddr, String> {
        let av = self.endpoint(i).av;
        let mut out: fi::FiAddr = fi::FI_ADDR_UNSPEC;
        // SAFETY: an open address vector; addr holds one address of the provider's format.
        let ret =
            unsafe { ((*(*av).ops).insert)(av, addr.as_ptr().cast(), 1, &mut out, 0, null_mut()) };
        if ret != 1 {
            return Err(if ret < 0 {
                fail(self.lib, "fi_av_insert", ret as isize)
            } else {
                "fi_av_insert: address rejected".to_string()
            });
        }
        Ok(out)
    }

    /// Registers `len` bytes at `buf` for local sends and receives (`FI_MR_LOCAL`
    /// providers); the descriptor to pass with them. The registration lives until drop.
    ///
    /// # Safety
    /// `buf` must stay valid (and not move) until the fabric is dropped.
    pub(crate) unsafe fn register(
        &mut self,
        buf: *const u8,
        len: usize,
    ) -> Result<*mut c_void, String> {
        // SAFETY: the caller keeps the buffer alive as long as the fabric.
        let m = unsafe { self.register_user(buf, len, fi::FI_SEND | fi::FI_RECV)? };
        self.mrs.push(m.mr);
        Ok(m.desc)
    }

    /// Registers `len` bytes of memory at `buf` for `access` ([`fi::FI_REMOTE_READ`] on
    /// the sending side of a read, [`fi::FI_READ`] for its local buffer), under a key of
    /// ours unique in the domain (or the provider's, `FI_MR_PROV_KEY`).
    ///
    /// # Safety
    /// `buf` must stay valid until [`Fabric::deregister`].
    pub(crate) unsafe fn register_user(
        &mut self,
        buf: *const u8,
        len: usize,
        access: u64,
    ) -> Result<Mr, String> {
        let mut mr: *mut fi::fid_mr = null_mut();
        let key = self.next_key;
        self.next_key += 1;
        // SAFETY: an open domain; the caller keeps the buffer alive.
        let ret = unsafe {
            let dom = &mut *self.domain;
            ((*dom.mr).reg)(
                &mut dom.fid,
                buf.cast(),
                len,
                access,
                0,
                key,
                0,
                &mut mr,
                null_mut(),
            )
        };
        check(self.lib, "fi_mr_reg", ret)?;
        if self.mr_endpoint {
            if let Err(e) = self.bind_to_endpoint(mr) {
                // SAFETY: the registration just made, used by nobody.
                unsafe { ((*(*mr).fid.ops).close)(&mut (*mr).fid) };
                return Err(e);
            }
        }
        // SAFETY: a registration libfabric just returned (enabled, where it must be).
        let (desc, key) = unsafe { ((*mr).mem_desc, (*mr).key) };
        Ok(Mr { mr, desc, key })
    }

    /// `FI_MR_ENDPOINT`: binds registration `mr` to our endpoint (`fi_mr_bind`) and
    /// enables it (`fi_mr_enable`), after which its key is valid.
    fn bind_to_endpoint(&mut self, mr: *mut fi::fid_mr) -> Result<(), String> {
        // SAFETY: a registration of this domain and our enabled endpoint; each call goes
        // through the registration's generic ops table, as the header's inline wrappers do.
        unsafe {
            let ops = &*(*mr).fid.ops;
            check(
                self.lib,
                "fi_mr_bind",
                (ops.bind)(&mut (*mr).fid, &mut (*self.ep).fid, 0),
            )?;
            check(
                self.lib,
                "fi_mr_enable",
                (ops.control)(&mut (*mr).fid, fi::FI_ENABLE, null_mut()),
            )
        }
    }

    /// Closes a registration of [`Fabric::register_user`].
    pub(crate) fn deregister(&mut self, mr: Mr) {
        if !mr.mr.is_null() && !self.domain.is_null() {
            // SAFETY: a registration of this (open) domain nobody uses any more.
            unsafe { ((*(*mr.mr).fid.ops).close)(&mut (*mr.mr).fid) };
        }
    }

    /// Starts reading `len` bytes of `src`'s memory registered under `key` at `addr` (a
    /// virtual address or an offset, see [`Fabric::mr_virt`]) into `buf`; the raw return
    /// code.
    ///
    /// # Safety
    /// `buf` (with `desc`) and `ctx` must stay valid until the completion is read.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn rma_read(
        &self,
        buf: *mut u8,
        len: usize,
        desc: *mut c_void,
        src: fi::FiAddr,
        addr: u64,
        key: u64,
        ctx: *mut c_void,
    ) -> isize {
        // SAFETY: the caller's promise.
        unsafe { self.rma_read_on(0, buf, len, desc, src, addr, key, ctx) }
    }

    /// [`Fabric::rma_read`] on endpoint `i` (0: the main one, then the rails), `src` an
    /// address of that endpoint's vector.
    ///
    /// # Safety
    /// As for [`Fabric::rma_read`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn rma_read_on(
        &self,
        i: usize,
        buf: *mut u8,
        len: usize,
        desc: *mut c_void,
        src: fi::FiAddr,
        addr: u64,
        key: u64,
        ctx: *mut c_void,
    ) -> isize {
        let ep = self.endpoint(i).ep;
        // SAFETY: an enabled endpoint of the domain opened with FI_RMA; the caller's promise.
        unsafe { ((*(*ep).rma).read)(ep, buf.cast(), len, desc, src, addr, key, ctx) }
    }

    /// Starts writing `len` bytes at `buf` into `dest`'s memory registered under `key` at
    /// `addr` (virtual address or offset), completing only once the data is visible there
    /// (`FI_DELIVERY_COMPLETE`); the raw return code.
    ///
    /// # Safety
    /// `buf` (with `desc`) and `ctx` must stay valid until the completion is read.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn rma_write(
        &self,
        buf: *const u8,
        len: usize,
        desc: *mut c_void,
        dest: fi::FiAddr,
        addr: u64,
        key: u64,
        ctx: *mut c_void,
    ) -> isize {
        let iov = libc::iovec {
            iov_base: buf as *mut c_void,
            iov_len: len,
        };
        let mut desc = desc;
        let rma = fi::fi_rma_iov { addr, len, key };
        let msg = fi::fi_msg_rma {
            msg_iov: &iov,
            desc: &mut desc,
            iov_count: 1,
            addr: dest,
            rma_iov: &rma,
            rma_iov_count: 1,
            context: ctx,
            data: 0,
        };
        // SAFETY: an enabled endpoint opened with FI_WRITE; the message and its vectors
        // live during the call (the provider copies them); the caller's promise for the
        // buffer and context.
        unsafe {
            ((*(*self.ep).rma).writemsg)(
                self.ep,
                &msg,
                fi::FI_COMPLETION | fi::FI_DELIVERY_COMPLETE,
            )
        }
    }

    /// The most elements one atomic operation of `kind` with `op` on `dt` takes, if the
    /// provider runs it (`fi_atomicvalid`, `fi_fetch_atomicvalid`,
    /// `fi_compare_atomicvalid`); `None` without `FI_ATOMIC`.
    pub(crate) fn atomic_valid(
        &self,
        kind: AtomicKind,
        dt: fi::AtomicType,
        op: fi::AtomicOp,
    ) -> Option<usize> {
        if !self.atomic || self.ep.is_null() {
            return None;
        }
        let mut count = 0usize;
        // SAFETY: an enabled endpoint opened with FI_ATOMIC; count is writable.
        let ret = unsafe {
            let ops = &*(*self.ep).atomic;
            let f = match kind {
                AtomicKind::Write => ops.writevalid,
                AtomicKind::Fetch => ops.readwritevalid,
                AtomicKind::Compare => ops.compwritevalid,
            };
            f(self.ep, dt as c_int, op as c_int, &mut count)
        };
        (ret == 0 && count > 0).then_some(count)
    }

    /// Starts `op` of the `count` elements of `dt` at `buf` into `dest`'s memory
    /// registered under `key` at `addr`, completing once applied there
    /// (`FI_DELIVERY_COMPLETE`); the raw return code.
    ///
    /// # Safety
    /// `buf` (with `desc`) and `ctx` must stay valid until the completion is read.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn atomic_write(
        &self,
        buf: *const u8,
        count: usize,
        desc: *mut c_void,
        dest: fi::FiAddr,
        addr: u64,
        key: u64,
        dt: fi::AtomicType,
        op: fi::AtomicOp,
        ctx: *mut c_void,
    ) -> isize {
        let ioc = fi::fi_ioc {
            addr: buf as *mut c_void,
            count,
        };
        let rma = fi::fi_rma_ioc { addr, count, key };
        let mut desc = desc;
        let msg = fi::fi_msg_atomic {
            msg_iov: &ioc,
            desc: &mut desc,
            iov_count: 1,
            addr: dest,
            rma_iov: &rma,
            rma_iov_count: 1,
            datatype: dt as c_int,
            op: op as c_int,
            context: ctx,
            data: 0,
        };
        // SAFETY: an enabled endpoint opened with FI_ATOMIC; the message and its vectors
        // live during the call (the provider copies them); the caller's promise for the
        // buffer and context.
        unsafe {
            ((*(*self.ep).atomic).writemsg)(
                self.ep,
                &msg,
                fi::FI_COMPLETION | fi::FI_DELIVERY_COMPLETE,
            )
        }
    }

    /// Starts `op` of the `count` elements of `dt` at `buf` (with `compare`: a
    /// compare-and-swap against the elements there) into `dest`'s memory registered under
    /// `key` at `addr`, the previous elements coming back into `result`; the raw return
    /// code. `descs`: the local descriptors of `buf`, `compare` and `result`.
    ///
    /// # Safety
    /// `buf`, `compare`, `result` (with their descriptors) and `ctx` must stay valid until
    /// the completion is read.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn atomic_fetch(
        &self,
        buf: *const u8,
        compare: Option<*const u8>,
        result: *mut u8,
        count: usize,
        descs: [*mut c_void; 3],
        dest: fi::FiAddr,
        addr: u64,
        key: u64,
        dt: fi::AtomicType,
        op: fi::AtomicOp,
        ctx: *mut c_void,
    ) -> isize {
        // SAFETY: an enabled endpoint opened with FI_ATOMIC; the caller's promise for the
        // buffers and the context.
        unsafe {
            let ops = &*(*self.ep).atomic;
            match compare {
                None => (ops.readwrite)(
                    self.ep,
                    buf.cast(),
                    count,
                    descs[0],
                    result.cast(),
                    descs[2],
                    dest,
                    addr,
                    key,
                    dt as c_int,
                    op as c_int,
                    ctx,
                ),
                Some(cmp) => (ops.compwrite)(
                    self.ep,
                    buf.cast(),
                    count,
                    descs[0],
                    cmp.cast(),
                    descs[1],
                    result.cast(),
                    descs[2],
                    dest,
                    addr,
                    key,
                    dt as c_int,
                    op as c_int,
                    ctx,
                ),
            }
        }
    }

    /// Posts a receive from `src` (tagged: of exactly `tag`, from anyone) into `len` bytes
    /// at `buf`; the raw return code (0, `-FI_EAGAIN`, or an error).
    ///
    /// # Safety
    /// `buf` (with `desc`) and `ctx` must stay valid until the completion is read.
    pub(crate) unsafe fn trecv(
        &self,
        buf: *mut u8,
        len: usize,
        desc: *mut c_void,
        src: fi::FiAddr,
        tag: u64,
        ctx: *mut c_void,
    ) -> isize {
        if !self.tagged {
            // SAFETY: an enabled endpoint opened with FI_MSG and FI_DIRECTED_RECV; the
            // caller's promise for the buffer and context.
            return unsafe { ((*(*self.ep).msg).recv)(self.ep, buf.cast(), len, desc, src, ctx) };
        }
        // SAFETY: an enabled tagged endpoint; the caller's promise for the buffer and
        // context (an exact tag: no ignore bits, no flags).
        unsafe { self.trecv_match(buf, len, desc, tag, 0, ctx, 0) }
    }

    /// Posts a tagged receive into `len` bytes at `buf` of a message from anyone whose
    /// tag equals `tag` outside the `ignore` bits; with `flags` ([`fi::FI_PEEK`],
    /// [`fi::FI_CLAIM`]) through `fi_trecvmsg`. The raw return code.
    ///
    /// # Safety
    /// `buf` (with `desc`) and `ctx` must stay valid until the completion is read.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn trecv_match(
        &self,
        buf: *mut u8,
        len: usize,
        desc: *mut c_void,
        tag: u64,
        ignore: u64,
        ctx: *mut c_void,
        flags: u64,
    ) -> isize {
        if flags == 0 {
            // SAFETY: an enabled tagged endpoint; the caller's promise.
            return unsafe {
                ((*(*self.ep).tagged).recv)(
                    self.ep,
                    buf.cast(),
                    len,
                    desc,
                    fi::FI_ADDR_UNSPEC,
                    tag,
                    ignore,
                    ctx,
                )
            };
        }
        let iov = libc::iovec {
            iov_base: buf.cast(),
            iov_len: len,
        };
        let mut desc = desc;
        let msg = fi::fi_msg_tagged {
            msg_iov: &iov,
            desc: &mut desc,
            iov_count: usize::from(!buf.is_null() || len > 0),
            addr: fi::FI_ADDR_UNSPEC,
            tag,
            ignore,
            context: ctx,
            data: 0,
        };
        // SAFETY: an enabled tagged endpoint; the message lives during the call (the
        // provider copies it); the caller's promise for the buffer and context.
        unsafe { ((*(*self.ep).tagged).recvmsg)(self.ep, &msg, flags | fi::FI_COMPLETION) }
    }

    /// Posts a tagged receive as [`Fabric::trecv_match`] (no flags) into `len` bytes at
    /// `buf` followed by one byte at `spill`: a message longer than `len` places `len + 1`
    /// bytes, so a provider that completes a truncated receive as a success with the
    /// buffer's length (libfabric 1.17's `ofi_rxd`) still shows the truncation. Only on
    /// providers without `FI_MR_LOCAL` (the spill byte is not registered).
    ///
    /// # Safety
    /// `buf` (with `desc`), `spill` and `ctx` must stay valid until the completion is read.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn trecv_spill(
        &self,
        buf: *mut u8,
        len: usize,
        desc: *mut c_void,
        spill: *mut u8,
        tag: u64,
        ignore: u64,
        ctx: *mut c_void,
    ) -> isize {
        let iov = [
            libc::iovec {
                iov_base: buf.cast(),
                iov_len: len,
            },
            libc::iovec {
                iov_base: spill.cast(),
                iov_len: 1,
            },
        ];
        let mut descs = [desc, std::ptr::null_mut()];
        let msg = fi::fi_msg_tagged {
            msg_iov: iov.as_ptr(),
            desc: descs.as_mut_ptr(),
            iov_count: 2,
            addr: fi::FI_ADDR_UNSPEC,
            tag,
            ignore,
            context: ctx,
            data: 0,
        };
        // SAFETY: an enabled tagged endpoint; the message lives during the call (the
        // provider copies it); the caller's promise for the buffers and context.
        unsafe { ((*(*self.ep).tagged).recvmsg)(self.ep, &msg, fi::FI_COMPLETION) }
    }

    /// Cancels the operation whose context is `ctx` (`fi_cancel`); it then completes with
    /// `FI_ECANCELED`, unless it completed already. The raw return code.
    pub(crate) fn cancel(&self, ctx: *mut c_void) -> isize {
        // SAFETY: an enabled endpoint; ctx is only compared by the provider.
        unsafe { ((*(*self.ep).ops).cancel)(std::ptr::addr_of_mut!((*self.ep).fid), ctx) }
    }

    /// Sends `len` bytes at `buf` to `dest` with `tag`; the raw return code.
    ///
    /// # Safety
    /// `buf` (with `desc`) and `ctx` must stay valid until the completion is read.
    pub(crate) unsafe fn tsend(
        &self,
        buf: *const u8,
        len: usize,
        desc: *mut c_void,
        dest: fi::FiAddr,
        tag: u64,
        ctx: *mut c_void,
    ) -> isize {
        if !self.tagged {
            // SAFETY: an enabled endpoint opened with FI_MSG; the caller's promise.
            return unsafe { ((*(*self.ep).msg).send)(self.ep, buf.cast(), len, desc, dest, ctx) };
        }
        // SAFETY: an enabled endpoint; the caller's promise for the buffer and context.
        unsafe { ((*(*self.ep).tagged).send)(self.ep, buf.cast(), len, desc, dest, tag, ctx) }
    }

    /// [`Fabric::tsend`] of a tagged message carrying `data` as its remote completion data
    /// (`fi_tsenddata`: the receiver's completion, and a peek's, has it); the raw return
    /// code.
    ///
    /// # Safety
    /// As for [`Fabric::tsend`]; the endpoint has tagged messages.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn tsenddata(
        &self,
        buf: *const u8,
        len: usize,
        desc: *mut c_void,
        data: u64,
        dest: fi::FiAddr,
        tag: u64,
        ctx: *mut c_void,
    ) -> isize {
        // SAFETY: an enabled tagged endpoint; the caller's promise for buffer and context.
        unsafe {
            ((*(*self.ep).tagged).senddata)(self.ep, buf.cast(), len, desc, data, dest, tag, ctx)
        }
    }

    /// Sends `len` bytes at `buf` (at most [`Fabric::inject`]) to `dest` with `tag`
    /// without a completion (`fi_tinject`): the buffer is free again when it returns; the
    /// raw return code.
    ///
    /// # Safety
    /// `buf` must be valid for reads of `len` bytes during the call.
    pub(crate) unsafe fn tinject(
        &self,
        buf: *const u8,
        len: usize,
        dest: fi::FiAddr,
        tag: u64,
    ) -> isize {
        if !self.tagged {
            // SAFETY: an enabled endpoint opened with FI_MSG; the caller's promise.
            return unsafe { ((*(*self.ep).msg).inject)(self.ep, buf.cast(), len, dest) };
        }
        // SAFETY: an enabled endpoint; the caller's promise for the buffer.
        unsafe { ((*(*self.ep).tagged).inject)(self.ep, buf.cast(), len, dest, tag) }
    }

    /// Reads up to `out.len()` completions: how many, 0 if none, or a negative code
    /// (`-FI_EAVAIL`: an error completion waits for [`Fabric::read_error`]).
    pub(crate) fn read(&self, out: &mut [fi::fi_cq_tagged_entry]) -> isize {
        self.read_on(0, out)
    }

    /// [`Fabric::read`] of endpoint `i`'s completion queue (0: the main one, then the
    /// rails).
    pub(crate) fn read_on(&self, i: usize, out: &mut [fi::fi_cq_tagged_entry]) -> isize {
        let cq = self.endpoint(i).cq;
        // SAFETY: an open CQ of the tagged format; out has room for out.len() entries.
        let ret = unsafe { ((*(*cq).ops).read)(cq, out.as_mut_ptr().cast(), out.len()) };
        if ret == -fi::FI_EAGAIN {
            0
        } else {
            ret
        }
    }

    /// The waiting error completion with the provider's message, if any.
    pub(crate) fn read_error(&self) -> Option<(fi::fi_cq_err_entry, String)> {
        self.read_error_on(0)
    }

    /// [`Fabric::read_error`] of endpoint `i` (0: the main one, then the rails).
    pub(crate) fn read_error_on(&self, i: usize) -> Option<(fi::fi_cq_err_entry, String)> {
        let cq = self.endpoint(i).cq;
        // SAFETY: plain data; zero is a valid "no error data buffer" request.
        let mut e: fi::fi_cq_err_entry = unsafe { std::mem::zeroed() };
        // SAFETY: an open CQ; e is a writable error entry.
        let ret = unsafe { ((*(*cq).ops).readerr)(cq, &mut e, 0) };
        if ret < 1 {
            return None;
        }
        let mut buf = vec![0u8; 256];
        // SAFETY: the entry's error data is valid until the next CQ read; buf is writable.
        let msg = unsafe {
            let s = ((*(*cq).ops).strerror)(
                cq,
                e.prov_errno,
                e.err_data,
                buf.as_mut_ptr().cast(),
                buf.len(),
            );
            fi::text(s)
        };
        let generic = self.lib.error(-(e.err as isize));
        let text = if msg.is_empty() || msg == generic {
            generic
        } else {
            format!("{generic}: {msg}")
        };
        Some((e, text))
    }

    /// `fi_strerror` of a negative return code.
    pub(crate) fn error(&self, ret: isize) -> String {
        self.lib.error(ret)
    }
}

/// Closes libfabric objects, in order (null ones are skipped).
fn close_objects(objs: &[*mut fi::fid]) {
    for &f in objs {
        if !f.is_null() {
            // SAFETY: an object libfabric opened and nobody uses any more.
            unsafe { ((*(*f).ops).close)(f) };
        }
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        self.close();
    }
}

impl Fabric {
    /// Closes every object (the endpoint first: it cancels the posted receives; the `shm`
    /// provider removes its shared-memory file then); idempotent. No other method may be
    /// called afterwards.
    pub(crate) fn close(&mut self) {
        for r in self.rails.drain(..) {
            close_objects(&[r.ep.cast(), r.av.cast(), r.cq.cast()]);
        }
        close_objects(&[self.ep.cast()]);
        let mrs: Vec<*mut fi::fid> = self.mrs.iter().map(|&m| m.cast()).collect();
        close_objects(&mrs);
        close_objects(&[
            self.av.cast(),
            self.cq.cast(),
            self.domain.cast(),
            self.fabric.cast(),
        ]);
        if !self.list.is_null() {
            // SAFETY: the list from fi_getinfo; nothing refers to it any more.
            unsafe { (self.lib.freeinfo)(self.list) };
        }
        self.mrs.clear();
        self.ep = null_mut();
        self.av = null_mut();
        self.cq = null_mut();
        self.domain = null_mut();
        self.fabric = null_mut();
        self.list = null_mut();
        self.info = null_mut();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(l: &[&str]) -> Vec<String> {
        l.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn provider_choice_by_full_name_part_and_exclusion() {
        let provs = v(&["psm3", "tcp;ofi_rxm", "shm", "udp;ofi_rxd"]);
        assert_eq!(choose_provider(&provs, &[], &[]), Some(0));
        assert_eq!(choose_provider(&provs, &v(&["tcp"]), &[]), Some(1));
        assert_eq!(choose_provider(&provs, &v(&["TCP;OFI_RXM"]), &[]), Some(1));
        assert_eq!(
            choose_provider(&provs, &v(&["ofi_rxd", "shm"]), &[]),
            Some(2),
            "fi_getinfo's order"
        );
        assert_eq!(choose_provider(&provs, &[], &v(&["psm3", "tcp"])), Some(2));
        assert_eq!(choose_provider(&provs, &v(&["verbs"]), &[]), None);
        assert_eq!(choose_provider(&provs, &v(&["shm"]), &v(&["shm"])), None);
        assert!(!provider_matches("rxm", "tcp;ofi_rxm"));
        for p in ["tcp;ofi_rxm", "udp;ofi_rxd", "shm", "sockets"] {
            assert!(software(p), "{p}");
        }
        for p in ["verbs;ofi_rxm", "efa", "cxi", "psm3", "opx"] {
            assert!(!software(p), "{p}");
        }
        assert!(!atomics_trusted("shm") && !atomics_trusted("SHM"));
        assert!(!atomics_trusted("udp;ofi_rxd"));
        for p in ["tcp;ofi_rxm", "verbs;ofi_rxm", "cxi", "efa"] {
            assert!(atomics_trusted(p), "{p}");
        }
        assert_eq!(provider_field("tcp;ofi_rxm"), "tcp+ofi_rxm");
    }

    /// The hints accept cxi's endpoint-bound registrations next to the other modes we
    /// handle (and nothing we do not), and the read-back says what each mode asks.
    #[test]
    fn mr_modes_in_the_hints_and_read_back() {
        for m in [
            fi::FI_MR_LOCAL,
            fi::FI_MR_VIRT_ADDR,
            fi::FI_MR_ALLOCATED,
            fi::FI_MR_PROV_KEY,
            fi::FI_MR_ENDPOINT,
        ] {
            assert_ne!(MR_MODES & m, 0, "{m:#x} offered");
        }
        // FI_MR_RAW, FI_MR_MMU_NOTIFY, FI_MR_RMA_EVENT, FI_MR_HMEM: not handled, not offered.
        for bit in [3, 7, 8, 10] {
            assert_eq!(MR_MODES & (1 << bit), 0, "bit {bit} not offered");
        }
        // cxi's modes (FI_MR_ENDPOINT | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR):
        // registrations bound to the endpoint, provider keys, virtual addresses.
        let cxi = MrModes::of(
            fi::FI_MR_ENDPOINT | fi::FI_MR_ALLOCATED | fi::FI_MR_PROV_KEY | fi::FI_MR_VIRT_ADDR,
        );
        assert_eq!(
            cxi,
            MrModes {
                local: false,
                virt: true,
                prov_key: true,
                endpoint: true
            }
        );
        // verbs: local registration, no endpoint binding.
        let verbs = MrModes::of(
            fi::FI_MR_LOCAL | fi::FI_MR_VIRT_ADDR | fi::FI_MR_ALLOCATED | fi::FI_MR_PROV_KEY,
        );
        assert!(verbs.local && verbs.virt && verbs.prov_key && !verbs.endpoint);
        // The software providers here: none of it (offsets into the registration).
        assert_eq!(MrModes::of(0), MrModes::default());
    }

    #[test]
    fn tag_bits_from_the_mem_tag_format() {
        assert_eq!(tag_bits(0), 64, "none given");
        assert_eq!(tag_bits(0xaaaa_aaaa_aaaa_aaaa), 64, "FI_TAG_GENERIC");
        assert_eq!(tag_bits(u64::MAX), 64);
        assert_eq!(tag_bits((1 << 60) - 1), 60);
        assert_eq!(tag_bits(0x0fff_0000_0000_0000), 60);
    }
}
