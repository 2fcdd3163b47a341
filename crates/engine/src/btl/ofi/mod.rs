//! The `ofi` transport: the engine's records over libfabric tagged messages on a
//! reliable-datagram endpoint, for networks with a libfabric provider (verbs, EFA, cxi,
//! psm3, and the software `tcp;ofi_rxm`, `udp;ofi_rxd`, `shm`). `fi` binds the libfabric
//! ABI (loaded with `dlopen`), `fabric` opens the provider's objects, `link` carries the
//! records ([`link::OfiLink`]), `mrcache` keeps the registrations of user memory, `params`
//! declares `mtl_ofi_provider_*` and `btl_ofi_*`.
//!
//! Wire-up: every rank that selected `ofi` opens an endpoint and publishes
//! `provider,address` (the provider with `;` written `+`, the endpoint name in hex) as the
//! `ofi` section of its endpoint record (where the provider offers one endpoint per network
//! interface, on the interface `iface` chooses); after the fence it inserts the address of every
//! peer without a link that publishes the same provider into its address vector
//! (`FI_AV_TABLE`) and posts that peer's receives. A missing libfabric or provider
//! disables the component with one verbose line.

pub(crate) mod connect;
pub(crate) mod fabric;
pub(crate) mod fi;
pub(crate) mod iface;
pub(crate) mod link;
pub(crate) mod mrcache;
pub(crate) mod params;

use std::sync::{Arc, Mutex};

use oxmpi_base::params::{int, list, size, Component};

use crate::btl::{Btl, Job, Links, Setup, BTL};
use crate::mtl::ofi::select::{self, Asked, Pml};
use crate::Error;
use fabric::{provider_field, Fabric};
use link::{lock, Liveness, Net, OfiLink};

/// The `ofi` entry of the transport registry.
pub(crate) const COMPONENT: Btl = Btl {
    info: Component {
        name: "ofi",
        description: "libfabric (OFI) tagged messages: InfiniBand, EFA, Slingshot, Omni-Path, \
                      or the software tcp/udp/shm providers",
    },
    params: &params::PARAMS,
    open: Some(open),
};

/// The libfabric providers (name, fabric) that `fi_getinfo` offers for this transport
/// (tagged messages on reliable-datagram endpoints), in its order of preference; why not,
/// if libfabric cannot be loaded or offers nothing.
pub fn providers() -> Result<Vec<(String, String)>, String> {
    fabric::providers(fi::Lib::load()?)
}

/// Hex text of bytes.
fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The main endpoint's address and the rails' of a published address field (hex
/// addresses joined by dots); `None` if it is not that.
fn addresses(field: &str) -> Option<(Vec<u8>, Vec<Vec<u8>>)> {
    let mut all = field.split('.').map(unhex);
    let main = all.next()??;
    Some((main, all.collect::<Option<Vec<_>>>()?))
}

/// Bytes of hex text; `None` if it is not hex.
fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Whether the `btl` selection list names `ofi` (`--mca btl self,ofi`), rather than
/// leaving it in by default or by exclusion (`^tcp`): then any provider will do; otherwise
/// `ofi` runs only over a hardware provider (the selection policy: sm in a node, ofi
/// between nodes on a real network, tcp otherwise).
fn named() -> bool {
    oxmpi_base::params::with_global(|r| r.get_selection("btl"))
        .ok()
        .flatten()
        .is_some_and(|s| !s.exclude && s.names.iter().any(|n| n == "ofi"))
}

/// Where the kernel lists the devices of the networks libfabric's hardware providers drive:
/// InfiniBand/RoCE/iWARP and EFA (`verbs`, `efa`, `psm3`, `opx` over hfi1), and Slingshot
/// (`cxi`).
const RDMA_DEVICE_DIRS: [&str; 2] = ["/sys/class/infiniband", "/sys/class/cxi"];

/// Whether this node has a device a hardware provider could drive. Loading libfabric and
/// asking `fi_getinfo` costs about 0.3 s (every provider plugin starts), so a job on a
/// node without one does not pay it unless `ofi` is named in the btl list.
fn rdma_device_present() -> bool {
    RDMA_DEVICE_DIRS.iter().any(|d| {
        std::fs::read_dir(d)
            .map(|mut e| e.next().is_some())
            .unwrap_or(false)
    })
}

/// A parameter of whole seconds, `None` for 0 (never).
fn secs(decl: &oxmpi_base::params::ParamDecl) -> Option<std::time::Duration> {
    match int(decl) {
        0 => None,
        s => Some(std::time::Duration::from_secs(s.unsigned_abs())),
    }
}

/// The `pml` selection list as it bears on the matching offload (`--mca pml cm`).
pub(crate) fn pml_asked() -> Asked {
    oxmpi_base::params::with_global(|r| r.get_selection("pml"))
        .ok()
        .flatten()
        .map_or(Asked::Open, |s| Asked::from_list(s.exclude, &s.names))
}

/// The narrowest source field of the offload's tag layout (communicators of other jobs,
/// after a spawn or connect, may be larger than ours).
const MIN_SOURCE_BITS: u32 = 16;

/// The opened endpoint between publishing and wiring up.
struct OfiSetup {
    net: Arc<Mutex<Net>>,
    /// Our section: provider and address.
    section: String,
    /// The matching offload (`pml cm`) runs over this endpoint: every rank's address goes
    /// into the address vector, ours included.
    cm: bool,
}

/// Opens the `ofi` component: loads libfabric, opens the provider's endpoint. `Ok(None)`
/// (one verbose line) where libfabric or an allowed provider is missing.
fn open(job: &Job) -> Result<Option<Box<dyn Setup>>, Error> {
    let me = job.me;
    let include = list(&params::PROVIDER_INCLUDE);
    let exclude = list(&params::PROVIDER_EXCLUDE);
    if !include.is_empty() && !exclude.is_empty() {
        return Err(Error::Bootstrap {
            rank: me,
            msg: format!(
                "mtl_ofi_provider_include={} and mtl_ofi_provider_exclude={} are both set; set only one",
                include.join(","),
                exclude.join(",")
            ),
        });
    }
    // The offload is chosen once, at start-up; later wire-ups (spawn, connect) open the
    // transport for their records only.
    let asked = if link::mtl::mtl().is_some() {
        Asked::Ox
    } else {
        pml_asked()
    };
    let want_cm = asked == Asked::Cm;
    let off = |why: String| {
        if want_cm {
            return Err(Error::Bootstrap {
                rank: me,
                msg: format!("pml cm: {why}"),
            });
        }
        oxmpi_base::verbose!(BTL, 10, "ofi: rank {me}: {why}; ofi disabled");
        Ok(None)
    };
    if job.size() > link::MAX_RANKS {
        return off(format!(
            "{} ranks exceed the tag's {}",
            job.size(),
            link::MAX_RANKS
        ));
    }
    if !named() && !want_cm && !rdma_device_present() {
        return off(format!(
            "no RDMA device ({}): libfabric not probed; name ofi in the btl list to use a software provider",
            RDMA_DEVICE_DIRS.join(", ")
        ));
    }
    let lib = match fi::Lib::load() {
        Ok(l) => l,
        Err(e) => return off(format!("libfabric not available ({e})")),
    };
    let (tagged, want) = (
        oxmpi_base::params::flag(&params::TAGGED),
        fabric::Want {
            rma: oxmpi_base::params::flag(&params::RMA),
            atomic: oxmpi_base::params::flag(&params::ATOMIC),
        },
    );
    let hardware_only = !named() && !want_cm;
    let mut fab = match Fabric::open(
        lib,
        &include,
        &exclude,
        job.size(),
        hardware_only,
        tagged || want_cm,
        want,
    ) {
        Ok(f) => f,
        Err(e) => return off(e),
    };
    let rails = params::rails_for(int(&params::RAILS), &fab.prov) - 1;
    if rails > 0 && fab.rma {
        if let (got, Some(e)) = fab.open_rails(rails, job.size()) {
            oxmpi_base::verbose!(
                BTL,
                10,
                "ofi: rank {me}: {got} of {rails} rails opened (btl_ofi_rails): {e}"
            );
        }
    }
    let net = Net::new(
        fab,
        me as usize,
        job.size(),
        size(&params::MAX_PAYLOAD),
        int(&params::RECV_DEPTH).max(1) as usize,
        int(&params::SEND_SLOTS).max(1) as usize,
        Liveness {
            keepalive: secs(&params::KEEPALIVE),
            link_timeout: secs(&params::LINK_TIMEOUT),
            connect: secs(&params::CONNECT_TIMEOUT).unwrap_or(std::time::Duration::MAX),
        },
    );
    let name = match net.name() {
        Ok(n) => n,
        Err(e) => return off(e),
    };
    let rail_names = match net.rail_names() {
        Ok(n) => n,
        Err(e) => return off(e),
    };
    // The address field: the main endpoint's, then each rail's, joined by dots.
    let addrs: Vec<String> = std::iter::once(&name)
        .chain(&rail_names)
        .map(|a| hex(a))
        .collect();
    let section = format!("{},{}", provider_field(net.provider()), addrs.join("."));
    oxmpi_base::verbose!(
        BTL,
        10,
        "ofi: rank {me}: provider {} ({}), address {}{}",
        net.provider(),
        net.describe(),
        hex(&name),
        if rail_names.is_empty() {
            String::new()
        } else {
            format!(", {} rails", rail_names.len())
        }
    );
    let mut cm = None;
    if asked != Asked::Ox {
        let offer = link::mtl::offer(&net);
        match select::choose(asked, Ok(&offer), job.size(), MIN_SOURCE_BITS) {
            Ok((Pml::Cm { layout, .. }, why)) => {
                oxmpi_base::verbose!(BTL, 10, "ofi: rank {me}: pml cm: {why}");
                cm = Some(layout);
            }
            Ok((Pml::Ox, why)) => {
                oxmpi_base::verbose!(BTL, 10, "ofi: rank {me}: {why}");
            }
            Err(line) => {
                return Err(Error::Bootstrap {
                    rank: me,
                    msg: line,
                })
            }
        }
    }
    let net = Arc::new(Mutex::new(net));
    link::osc::publish(&net);
    if let Some(layout) = cm {
        link::mtl::publish(&net, layout);
    }
    Ok(Some(Box::new(OfiSetup {
        net,
        section,
        cm: cm.is_some(),
    })))
}

impl Setup for OfiSetup {
    /// `provider,address` (provider with `+` for `;`, address in hex).
    fn section(&self) -> Option<String> {
        Some(self.section.clone())
    }

    /// Links every peer without a link that published an endpoint of our provider.
    fn connect(&mut self, job: &Job, linked: &[bool]) -> Result<Links, Error> {
        let me = job.me;
        let ours = provider_field(lock(&self.net).provider());
        let mut out: Links = Vec::new();
        if self.cm {
            self.offload_addresses(job)?;
        }
        for (p, &done) in linked.iter().enumerate() {
            if done || !job.uses(p, "ofi") {
                continue;
            }
            let Some(r) = job.section(p, "ofi", 2)? else {
                continue;
            };
            if r.str(0) != ours {
                oxmpi_base::verbose!(
                    BTL,
                    10,
                    "ofi: rank {me}: rank {p} uses provider {}, we use {ours}: no ofi link",
                    r.str(0)
                );
                continue;
            }
            let (addr, rails) = addresses(r.str(1)).ok_or_else(|| r.bad())?;
            lock(&self.net)
                .add_peer(p, &addr, &rails)
                .map_err(|e| Error::Bootstrap {
                    rank: me,
                    msg: format!("ofi: reaching rank {p}: {e}"),
                })?;
            out.push((p, Box::new(OfiLink::new(&self.net, p))));
        }
        Ok(out)
    }
}

impl OfiSetup {
    /// Inserts every rank's address (ours too) for the matching offload: under `pml cm`
    /// all point-to-point traffic goes through the provider, whichever btl links the pair.
    /// A rank without an endpoint of our provider is one line.
    fn offload_addresses(&self, job: &Job) -> Result<(), Error> {
        let me = job.me;
        let ours = provider_field(lock(&self.net).provider());
        for p in 0..job.size() {
            let line = |why: String| Error::Bootstrap {
                rank: me,
                msg: format!("pml cm: rank {p}: {why}"),
            };
            let addr = if p == me as usize {
                lock(&self.net).name().map_err(line)?
            } else {
                let r = job
                    .section(p, "ofi", 2)?
                    .filter(|_| job.uses(p, "ofi"))
                    .ok_or_else(|| line("no ofi endpoint published".into()))?;
                if r.str(0) != ours {
                    return Err(line(format!("provider {}, ours {ours}", r.str(0))));
                }
                addresses(r.str(1)).ok_or_else(|| r.bad())?.0
            };
            lock(&self.net).add_mtl_addr(p, &addr).map_err(line)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip_and_garbage() {
        let b = [0u8, 1, 0xab, 0xff];
        assert_eq!(hex(&b), "0001abff");
        assert_eq!(unhex("0001abff").unwrap(), b);
        assert_eq!(unhex("0g"), None);
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("").unwrap(), Vec::<u8>::new());
        assert_eq!(addresses("00ff"), Some((vec![0, 0xff], vec![])));
        assert_eq!(
            addresses("01.02.0a0b"),
            Some((vec![1], vec![vec![2], vec![10, 11]]))
        );
        assert_eq!(addresses("01.zz"), None);
    }
}
