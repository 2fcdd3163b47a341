//! The `osc` framework's parameters: the component selection (`osc=pt2pt` forces every
//! window peer but the process itself onto messages, `osc=sm` keeps only the direct path,
//! `ofi` moves the puts and gets of peers reached with messages over libfabric's RMA)
//! and the pt2pt progress thread's pacing. They are declared with the engine's frameworks
//! (`oxmpi_engine::frameworks`), so that `mpirun` and `oxmpi-info` know them too.

use oxmpi_base::params;
use oxmpi_base::select::{select_global, Candidate};
use oxmpi_engine::frameworks::{HANDOFF_MAX, IDLE_SLEEP_MAX};
use std::sync::OnceLock;

/// Which paths windows may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Paths {
    /// Same-node peers reached directly (`sm`).
    pub direct: bool,
    /// Other peers reached with messages (`pt2pt`).
    pub messages: bool,
    /// Their puts and gets over libfabric's RMA where the ofi btl reaches them (`ofi`).
    pub ofi: bool,
}

/// The selected paths (resolved once per process; an unknown component name falls back
/// to both, after the registry's one-line report).
pub(crate) fn paths() -> Paths {
    static P: OnceLock<Paths> = OnceLock::new();
    *P.get_or_init(|| {
        let _ = params::register_global(&oxmpi_engine::PROVIDER);
        let cands = [
            Candidate::available("sm"),
            Candidate::available("pt2pt"),
            Candidate::available("ofi"),
        ];
        match select_global("osc", &cands) {
            Ok(s) => Paths {
                direct: s.components.contains(&"sm"),
                messages: s.components.contains(&"pt2pt"),
                ofi: s.components.contains(&"ofi"),
            },
            Err(e) => {
                oxmpi_base::output::warn(format_args!("{e}"));
                Paths {
                    direct: true,
                    messages: true,
                    ofi: true,
                }
            }
        }
    })
}

/// `osc_pt2pt_idle_sleep_max` in microseconds.
pub(crate) fn idle_sleep_max_us() -> u64 {
    params::int(&IDLE_SLEEP_MAX).max(1) as u64
}

/// `osc_pt2pt_handoff_max`: how long a waiting thread sleeps on its doorbell alone while
/// another thread polls the transports (zero: never).
pub(crate) fn handoff_max() -> std::time::Duration {
    std::time::Duration::from_micros(params::int(&HANDOFF_MAX).max(0) as u64)
}
