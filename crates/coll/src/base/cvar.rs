//! Writing a control variable of the tools interface, for the C library's
//! `MPI_T_cvar_write` and the Rust API's `oxmpi::tools`: one path, so both refuse and
//! apply writes alike.
//!
//! Before `MPI_Init` every settable parameter may be written (the engine, transports and
//! collectives read them when they start). Once the library runs, only the parameters
//! declared `runtime` stay writable; the write goes through the registry (source `set`,
//! validated like any other source), then the verbose streams, the engine and the
//! collectives re-read what they cache, so the value applies when the write returns
//! (operations started before keep theirs).

use oxmpi_base::params::tools::{self as view, CvarScope, CvarValue};
use oxmpi_base::params::{self, Entry, ParamError};

/// Why a control variable write failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CvarWriteError {
    /// No parameter of that name (`MPI_T_ERR_INVALID_NAME`).
    #[error("no control variable {0}")]
    Unknown(String),
    /// The variable cannot be changed now or ever (`MPI_T_ERR_CVAR_SET_NEVER`): read-only,
    /// locked by the override file, or read at `MPI_Init` and fixed since.
    #[error("{0}")]
    Never(String),
    /// The value was refused (`MPI_T_ERR_INVALID`): wrong type or out of range.
    #[error("{0}")]
    Invalid(ParamError),
}

/// Whether the MPI library runs (after `MPI_Init`): what decides the scopes.
pub fn started() -> bool {
    oxmpi_engine::engine().is_some()
}

/// The registry entry of parameter `name`.
pub fn entry(name: &str) -> Result<Entry, CvarWriteError> {
    match params::with_global(|r| r.get(name).cloned()) {
        Ok(Some(e)) => Ok(e),
        Ok(None) => Err(CvarWriteError::Unknown(name.to_string())),
        Err(e) => Err(CvarWriteError::Invalid(e)),
    }
}

/// Writes control variable `name` (see the module's text).
pub fn write(name: &str, v: &CvarValue) -> Result<(), CvarWriteError> {
    let e = entry(name)?;
    let running = started();
    if !CvarScope::of(&e, running).writable() {
        let why = if running && !e.decl.read_only {
            "was read at MPI_Init and "
        } else {
            ""
        };
        return Err(CvarWriteError::Never(format!(
            "{name} {why}cannot be changed"
        )));
    }
    let written = params::with_global(|r| {
        let res = view::cvar_write(r, name, v);
        if res.is_ok() && running {
            oxmpi_base::output::reconfigure(r);
        }
        res
    });
    match written {
        Ok(Ok(())) => {}
        Ok(Err(e @ (ParamError::ReadOnly { .. } | ParamError::Locked { .. }))) => {
            return Err(CvarWriteError::Never(e.to_string()))
        }
        Ok(Err(e)) | Err(e) => return Err(CvarWriteError::Invalid(e)),
    }
    if running {
        // Outside the registry's lock: the readers take it themselves.
        if let Some(eng) = oxmpi_engine::engine() {
            eng.reload_params();
        }
        super::params::reload();
    }
    Ok(())
}
