//! Registration that reports: the one part of `params` that prints. It sits above both the
//! registry and the output framework (which is itself configured from the registry), so that
//! neither of those two imports the other in a circle.

use super::registry::{resolve, with_global};
use super::{ParamDecl, ParamError, Provider, Value};

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

/// The effective value of `decl` (registered in the global registry if needed), or, when it
/// cannot be read (a bad value in the environment or a file), its declared default after a
/// warning on the error channel. The typed readers below build on it, so a caller never
/// writes a default a second time.
pub fn value(decl: &ParamDecl) -> Value {
    match resolve(decl) {
        Ok(v) => v,
        Err(e) => {
            crate::output::warn(format_args!("{e}"));
            declared(decl)
        }
    }
}

/// The declared default of `decl`, parsed with its type, as written (no `${HOME}`/`${PREFIX}`
/// expansion, which the registry applies to the defaults it resolves); a declaration whose
/// default does not parse is a bug that each provider's tests catch (it reads as `false`).
pub fn declared(decl: &ParamDecl) -> Value {
    decl.ty.parse(decl.default).unwrap_or(Value::Bool(false))
}

/// A size parameter's value (see [`value`]).
pub fn size(decl: &ParamDecl) -> usize {
    value(decl).as_size().unwrap_or(0) as usize
}

/// An integer (or enumeration) parameter's value (see [`value`]).
pub fn int(decl: &ParamDecl) -> i64 {
    value(decl).as_int().unwrap_or(0)
}

/// A boolean parameter's value (see [`value`]).
pub fn flag(decl: &ParamDecl) -> bool {
    value(decl).as_bool().unwrap_or(false)
}

/// A list parameter's value (see [`value`]; empty if unreadable).
pub fn list(decl: &ParamDecl) -> Vec<String> {
    value(decl)
        .as_list()
        .map(<[String]>::to_vec)
        .unwrap_or_default()
}

/// `Some(value)` if `decl` was set explicitly (any source but its default), `None` when it
/// keeps its default or cannot be read.
pub fn explicit(decl: &ParamDecl) -> Option<Value> {
    resolve(decl).ok()?;
    with_global(|r| {
        r.get(&decl.full_name())
            .filter(|e| e.source != super::Source::Default)
            .map(|e| e.value.clone())
    })
    .ok()
    .flatten()
}
