//! Component selection: apply a framework's selection list (`btl=self,sm`, `btl=^tcp`) to its
//! compiled-in components (Open MPI's `mca_base_component_find` filter and check).

use crate::params::Selection;
use std::fmt;

/// A compiled-in component and whether it can run on this host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate<'a> {
    /// Component name.
    pub name: &'a str,
    /// `None` if usable here, else why not (e.g. "CMA blocked by seccomp").
    pub unavailable: Option<&'a str>,
}

impl<'a> Candidate<'a> {
    /// A usable component.
    pub fn available(name: &'a str) -> Self {
        Candidate {
            name,
            unavailable: None,
        }
    }

    /// A compiled-in component that cannot be used on this host.
    pub fn unavailable(name: &'a str, reason: &'a str) -> Self {
        Candidate {
            name,
            unavailable: Some(reason),
        }
    }
}

/// Why selection failed. One line, naming host, framework, component and what is available.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    /// An explicitly requested component is not compiled in, or cannot be used here.
    #[error("A requested component was not found, or was unable to be opened: host {host}, framework {framework}, component {component} ({why}); available components: {}", list(.available))]
    NotFound {
        /// This host.
        host: String,
        /// The framework.
        framework: String,
        /// The requested component.
        component: String,
        /// "not compiled in" or the reason it is unavailable.
        why: String,
        /// Components that could be used.
        available: Vec<String>,
    },
    /// The selection leaves no usable component.
    #[error("No component of framework {framework} is usable on host {host} with selection \"{selection}\"; available components: {}", list(.available))]
    NoneSelected {
        /// This host.
        host: String,
        /// The framework.
        framework: String,
        /// The selection list as given.
        selection: String,
        /// Components that could be used.
        available: Vec<String>,
    },
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// Components selected for a framework, in the order to use them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selected<'a> {
    /// The selected component names.
    pub components: Vec<&'a str>,
}

impl fmt::Display for Selected<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.components.join(","))
    }
}

/// Applies `selection` to `candidates` (compiled-in components in default order).
///
/// * empty selection: every available candidate, in candidate order;
/// * include list (`a,b`): exactly those, in the order listed; each must be compiled in and
///   available, else [`SelectError::NotFound`] (Open MPI stops at the first one too);
/// * exclude list (`^a,b`): every available candidate not listed (unknown names are ignored).
///
/// An empty result is [`SelectError::NoneSelected`].
pub fn select<'a>(
    host: &str,
    framework: &str,
    candidates: &[Candidate<'a>],
    selection: &Selection,
) -> Result<Selected<'a>, SelectError> {
    let available: Vec<String> = candidates
        .iter()
        .filter(|c| c.unavailable.is_none())
        .map(|c| c.name.to_string())
        .collect();
    let components: Vec<&'a str> = if selection.is_empty() || selection.exclude {
        candidates
            .iter()
            .filter(|c| c.unavailable.is_none() && selection.allows(c.name))
            .map(|c| c.name)
            .collect()
    } else {
        let mut out = Vec::new();
        for want in &selection.names {
            match candidates.iter().find(|c| c.name == want) {
                Some(Candidate {
                    name,
                    unavailable: None,
                }) => {
                    if !out.contains(name) {
                        out.push(*name);
                    }
                }
                found => {
                    return Err(SelectError::NotFound {
                        host: host.to_string(),
                        framework: framework.to_string(),
                        component: want.clone(),
                        why: match found {
                            Some(Candidate {
                                unavailable: Some(r),
                                ..
                            }) => format!("unavailable: {r}"),
                            _ => "not compiled in".to_string(),
                        },
                        available,
                    })
                }
            }
        }
        out
    };
    if components.is_empty() {
        return Err(SelectError::NoneSelected {
            host: host.to_string(),
            framework: framework.to_string(),
            selection: selection.to_string(),
            available,
        });
    }
    Ok(Selected { components })
}

/// [`select`] for `framework` with the selection list of the process-global registry (the
/// parameter named like the framework, e.g. `btl=self,sm`, registered here if needed) and this
/// host's name. This is the one call a framework makes at start-up; an error is meant to stop
/// the process with its one-line message (`A requested component was not found…`).
///
/// A selection value that does not parse has already been reported when it was registered;
/// it counts as empty (every available component).
pub fn select_global<'a>(
    framework: &'static str,
    candidates: &[Candidate<'a>],
) -> Result<Selected<'a>, SelectError> {
    let selection = crate::params::with_global(|r| {
        let _ = r.register(&[crate::params::ParamDecl::selection(framework)]);
        r.get_selection(framework)
    })
    .ok()
    .flatten()
    .unwrap_or_default();
    select(crate::output::hostname(), framework, candidates, &selection)
}
