//! The `osc` framework's parameters: the component selection (`osc=pt2pt` forces every
//! window peer but the process itself onto messages, `osc=sm` keeps only the direct path)
//! and the pt2pt progress thread's pacing. Each default is written here once.

use oxmpi_base::params::{self, Component, Framework, ParamDecl, ParamType, Provider};
use oxmpi_base::select::{select_global, Candidate};
use std::sync::OnceLock;

/// `osc_pt2pt_idle_sleep_max`.
pub(crate) static IDLE_SLEEP_MAX: ParamDecl = ParamDecl::new(
    "osc",
    "pt2pt",
    "idle_sleep_max",
    ParamType::Int {
        min: 1,
        max: 1_000_000,
    },
    "500",
    "Longest sleep in microseconds of an idle one-sided progress thread between looks at \
     its window's incoming requests (it sleeps 1, 2, 4, ... microseconds up to this after \
     the last request)",
)
.level(5);

/// The framework's parameters.
static PARAMS: [ParamDecl; 2] = [ParamDecl::selection("osc"), IDLE_SLEEP_MAX];

/// The `osc` framework for `oxmpi-info` and the registry.
pub static PROVIDER: Provider = Provider {
    name: "oxmpi-capi",
    frameworks: &[Framework {
        name: "osc",
        description: "One-sided communication: how window peers are reached",
        components: &[
            Component {
                name: "sm",
                description: "Direct access to the memory of ranks on the same node \
                              (shared segment, cross-memory attach)",
            },
            Component {
                name: "pt2pt",
                description: "One-sided operations carried as messages over the btls, \
                              served by a progress thread at the target",
            },
        ],
    }],
    params: &PARAMS,
};

/// Which paths windows may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Paths {
    /// Same-node peers reached directly (`sm`).
    pub direct: bool,
    /// Other peers reached with messages (`pt2pt`).
    pub messages: bool,
}

/// The selected paths (resolved once per process; an unknown component name falls back
/// to both, after the registry's one-line report).
pub(crate) fn paths() -> Paths {
    static P: OnceLock<Paths> = OnceLock::new();
    *P.get_or_init(|| {
        let _ = params::register_global(&PROVIDER);
        let cands = [Candidate::available("sm"), Candidate::available("pt2pt")];
        match select_global("osc", &cands) {
            Ok(s) => Paths {
                direct: s.components.contains(&"sm"),
                messages: s.components.contains(&"pt2pt"),
            },
            Err(e) => {
                oxmpi_base::output::warn(format_args!("{e}"));
                Paths {
                    direct: true,
                    messages: true,
                }
            }
        }
    })
}

/// `osc_pt2pt_idle_sleep_max` in microseconds.
pub(crate) fn idle_sleep_max_us() -> u64 {
    params::int(&IDLE_SLEEP_MAX).max(1) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxmpi_base::params::{Registry, Sources};

    #[test]
    fn declarations_register_with_their_defaults() {
        let mut r = Registry::new(Sources::default()).expect("registry");
        r.register_provider(&PROVIDER).expect("register");
        assert_eq!(r.get_int("osc_pt2pt_idle_sleep_max"), Some(500));
        assert!(r.get_selection("osc").expect("selection").is_empty());
    }
}
