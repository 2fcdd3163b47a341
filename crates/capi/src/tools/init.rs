//! `MPI_T_init_thread` and `MPI_T_finalize`: the tools interface's lifetime (the state in
//! `state`, the event sink of `event`).

use super::state::*;
use oxmpi_base::params;
use std::ffi::c_int;

mpi_fn! {
    /// `MPI_T_init_thread`: may be called any number of times, before, during or after
    /// `MPI_Init`; registers every parameter the library declares so that all appear.
    fn PMPI_T_init_thread / "MPI_T_init_thread" [Direct] (required: c_int, provided: *mut c_int) {
        use crate::consts::{MPI_THREAD_MULTIPLE, MPI_THREAD_SINGLE};
        for p in [&oxmpi_engine::PROVIDER, &oxmpi_coll::PROVIDER] {
            if let Err(e) = params::register_global(p) {
                oxmpi_base::output::warn(format_args!("{e}"));
            }
        }
        super::event::install();
        if required >= crate::consts::MPI_THREAD_SERIALIZED {
            // Tools may read performance variables (which take the engine's lock) from
            // another thread than the application's.
            oxmpi_engine::expect_threads("tools interface above MPI_THREAD_FUNNELED");
        }
        let mut g = lock();
        let t = g.get_or_insert_with(Tools::default);
        t.refs += 1;
        t.sync();
        opt(provided, required.clamp(MPI_THREAD_SINGLE, MPI_THREAD_MULTIPLE));
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_T_finalize`: the last one frees every handle and session.
    fn PMPI_T_finalize / "MPI_T_finalize" [Direct] () {
        with(|t| {
            t.refs -= 1;
            if t.refs == 0 {
                t.cvar_handles = Slots::default();
                t.sessions = Slots::default();
                // Dropping a handle stops it and ends its watch.
                t.pvar_handles = Slots::default();
                super::event::finalize();
            }
            Ok(())
        })
    }
}
