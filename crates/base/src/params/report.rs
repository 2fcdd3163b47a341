//! Registration that reports: the one part of `params` that prints. It sits above both the
//! registry and the output framework (which is itself configured from the registry), so that
//! neither of those two imports the other in a circle.

use super::registry::with_global;
use super::{ParamError, Provider};

/// Registers a provider in the global registry, then prints (on the output framework's error
/// channel, independent of verbosity) the warnings this produced: values ignored because the
/// override file locks the parameter (unless `mca_base_suppress_override_warning`) or because
/// it is read-only. Each warning is printed once per process.
pub fn register_global(provider: &Provider) -> Result<(), ParamError> {
    let (result, warnings) = with_global(|r| {
        let result = r.register_provider(provider);
        (result, r.take_warnings())
    })?;
    // The registry is unlocked here: printing may consult it (output sink parameters).
    for w in warnings {
        crate::output::warn(format_args!("{w}"));
    }
    result
}
