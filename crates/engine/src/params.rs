//! The engine's MCA declarations, gathered into the one [`PROVIDER`] (so `oxmpi-info` lists
//! them and values carry their source: `--mca`, `OXMPI_MCA_*`/`OMPI_MCA_*`, files,
//! defaults). Components read their values with `oxmpi_base::params::{size, int, list}`,
//! which fall back to the declared default.
//!
//! Each component declares its own parameters (`btl/sm/params.rs`, `btl/tcp/params.rs`,
//! `pml/params.rs`); the `btl` components are listed once, in the transport registry
//! ([`crate::btl::REGISTRY`]). A default is written only in its declaration.

use oxmpi_base::params::{self, Component, Framework, ParamDecl, ParamType, Provider};

use crate::btl::REGISTRY;
use crate::pml;

/// Every parameter of the engine: the transports' in registry order, then the protocol's,
/// then those of the frameworks run by the C ABI.
static PARAMS: [ParamDecl; N_PARAMS] = {
    let mut out = [ParamDecl::new("", "", "", ParamType::Bool, "", ""); N_PARAMS];
    let mut k = 0;
    let mut i = 0;
    while i <= REGISTRY.len() + 1 {
        let part: &[ParamDecl] = if i < REGISTRY.len() {
            REGISTRY[i].params
        } else if i == REGISTRY.len() {
            &pml::params::PARAMS
        } else {
            &crate::frameworks::PARAMS
        };
        let mut j = 0;
        while j < part.len() {
            out[k] = part[j];
            k += 1;
            j += 1;
        }
        i += 1;
    }
    out
};

/// Checks, once and up front (`mpirun` calls it before launching anything), what every
/// rank would otherwise find in `MPI_Init`: the `btl` selection list names components that
/// exist, and the tcp interface lists are valid. The error is one line.
pub fn check() -> Result<(), String> {
    select_btl().map_err(|e| e.to_string())?;
    crate::btl::tcp::setup::if_lists().map(|_| ())
}

/// The `btl` components chosen by the selection list (`btl=self,sm`, `btl=^sm`) among the
/// registry's; a requested component that is not compiled in is Open MPI's "A requested
/// component was not found" naming host, framework and what exists.
pub(crate) fn select_btl(
) -> Result<oxmpi_base::select::Selected<'static>, oxmpi_base::select::SelectError> {
    use oxmpi_base::select::{select_global, Candidate};
    let candidates: Vec<Candidate> = REGISTRY
        .iter()
        .map(|c| Candidate::available(c.info.name))
        .collect();
    select_global("btl", &candidates)
}

/// Number of parameters of the engine.
const N_PARAMS: usize = {
    let mut n = pml::params::PARAMS.len() + crate::frameworks::PARAMS.len();
    let mut i = 0;
    while i < REGISTRY.len() {
        n += REGISTRY[i].params.len();
        i += 1;
    }
    n
};

/// The `btl` components, as the registry lists them.
static BTL_COMPONENTS: [Component; REGISTRY.len()] = {
    let mut out = [Component {
        name: "",
        description: "",
    }; REGISTRY.len()];
    let mut i = 0;
    while i < REGISTRY.len() {
        out[i] = REGISTRY[i].info;
        i += 1;
    }
    out
};

/// What this crate declares for `oxmpi-info` and the registry.
pub static PROVIDER: Provider = Provider {
    name: "oxmpi-engine",
    frameworks: &[
        Framework {
            name: "btl",
            description: "Byte transfer layer: moves bytes between ranks",
            components: &BTL_COMPONENTS,
        },
        Framework {
            name: "pml",
            description: "Point-to-point messaging layer: matching and protocols",
            components: &[
                Component {
                    name: "ox",
                    description: "matching, eager and rendezvous protocols over the btls",
                },
                Component {
                    name: "cm",
                    description: "matching offloaded to a libfabric provider's tagged \
                                  messages (mtl ofi); default only on hardware providers",
                },
            ],
        },
        crate::frameworks::FRAMEWORKS[0],
        crate::frameworks::FRAMEWORKS[1],
    ],
    params: &PARAMS,
};

/// Registers the engine's parameters (idempotent). A bad value keeps the default and is
/// reported on stderr.
pub fn register() {
    if let Err(e) = params::register_global(&PROVIDER) {
        oxmpi_base::output::warn(format_args!("{e}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxmpi_base::params::{Registry, Sources};

    #[test]
    fn declarations_register_and_parse() {
        let mut r = Registry::new(Sources::default()).unwrap();
        r.register_provider(&PROVIDER).unwrap();
        assert_eq!(r.get_size("btl_sm_eager_limit"), Some(8192));
        assert_eq!(r.get_size("btl_sm_ring_size"), Some(320 * 1024));
        assert_eq!(r.get_size("btl_sm_bulk_size"), Some(1 << 20));
        assert_eq!(r.get_size("btl_sm_fragment_size"), Some(128 << 10));
        r.set("btl_sm_bulk_size", "0").unwrap();
        assert_eq!(r.get_size("btl_sm_bulk_size"), Some(0));
        assert_eq!(r.get_bool("mpi_yield_when_idle"), Some(false));
        assert_eq!(r.get_int("btl_sm_single_copy_mechanism"), Some(3));
        assert_eq!(r.get_size("btl_sm_coop_min_size"), Some(16 << 10));
        r.set("btl_sm_single_copy_mechanism", "cma").unwrap();
        assert_eq!(r.get_int("btl_sm_single_copy_mechanism"), Some(1));
        r.set("btl_sm_single_copy_mechanism", "coop").unwrap();
        assert_eq!(r.get_int("btl_sm_single_copy_mechanism"), Some(2));
        assert!(r.set("btl_sm_single_copy_mechanism", "xpmem").is_err());
        assert!(r.get("btl_base_verbose").is_some());
        assert_eq!(r.get_int("btl_tcp_port_min_v4"), Some(0));
        r.set("btl_tcp_if_include", "eth0,10.0.0.1").unwrap();
        assert!(r.set("btl_tcp_port_min_v4", "70000").is_err());
    }

    /// The parameter list, in the order `oxmpi-info` shows it, and every declared default
    /// parses with its own type (the accessors' fallback).
    #[test]
    fn every_parameter_once_with_a_parsable_default() {
        let names: Vec<String> = PROVIDER.params.iter().map(|d| d.full_name()).collect();
        assert_eq!(
            names,
            [
                "btl_sm_eager_limit",
                "btl_sm_far_eager_limit",
                "btl_sm_far_stream_min",
                "btl_sm_placement",
                "btl_sm_fragment_size",
                "btl_sm_fragment_min_size",
                "btl_sm_ring_size",
                "btl_sm_ring_hot",
                "btl_sm_bulk_size",
                "btl_sm_single_copy_mechanism",
                "btl_sm_coop_min_size",
                "btl_sm_coop_chunk_size",
                "btl_tcp_if_include",
                "btl_tcp_if_exclude",
                "btl_tcp_port_min_v4",
                "btl_tcp_port_range_v4",
                "btl_tcp_connect_timeout",
                "btl_tcp_link_timeout",
                "btl_tcp_handshake_timeout",
                "btl_tcp_links",
                "mtl_ofi_provider_include",
                "mtl_ofi_provider_exclude",
                "btl_ofi_max_payload",
                "btl_ofi_recv_depth",
                "btl_ofi_send_slots",
                "btl_ofi_keepalive",
                "btl_ofi_link_timeout",
                "btl_ofi_tagged",
                "btl_ofi_rma",
                "btl_ofi_atomic",
                "btl_ofi_connect_timeout",
                "btl_ofi_mr_cache_size",
                "btl_ofi_mr_cache_pinned",
                "btl_ofi_rails",
                "mpi_yield_when_idle",
                "mpi_profile",
                "mpi_ft_enable",
                "osc_pt2pt_idle_sleep_max",
                "osc_pt2pt_handoff_max",
                "dpm_connect_timeout",
                "dpm_exchange_timeout",
                "mpi_max_context_ids",
                "io_base_verbose",
            ]
        );
        for d in PROVIDER.params {
            assert!(d.ty.parse(d.default).is_ok(), "{}", d.full_name());
        }
        let btls: Vec<&str> = PROVIDER.frameworks[0]
            .components
            .iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(btls, ["self", "sm", "tcp", "ofi"]);
    }
}
