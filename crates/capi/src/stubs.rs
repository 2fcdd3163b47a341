//! Exported MPI functions that are not implemented yet. Each raises
//! `MPI_ERR_UNSUPPORTED_OPERATION` through the error handler of `MPI_COMM_WORLD`
//! (`crates/capi/UNIMPLEMENTED.md` lists them).

use crate::consts::MPI_ERR_UNSUPPORTED_OPERATION;
use crate::ffi::{enter, MpiError};
use std::ffi::c_int;

/// The body of every stub.
fn unsupported(name: &'static str) -> c_int {
    enter(name, || {
        Err(MpiError::new(
            MPI_ERR_UNSUPPORTED_OPERATION,
            format!("{name} is not implemented in oxmpi yet"),
        ))
    })
}

macro_rules! stubs {
    ($($pname:ident $name:literal;)*) => {
        /// Names of the stubbed functions.
        pub const STUB_NAMES: &[&str] = &[$($name),*];
        $(
            /// Not implemented yet: returns `MPI_ERR_UNSUPPORTED_OPERATION`.
            #[no_mangle]
            pub extern "C" fn $pname() -> c_int {
                unsupported($name)
            }
            crate::ffi::mpi_alias!($pname / $name);
        )*
    };
}

stubs! {
    PMPI_Accumulate "MPI_Accumulate";
    PMPI_Close_port "MPI_Close_port";
    PMPI_Comm_accept "MPI_Comm_accept";
    PMPI_Comm_connect "MPI_Comm_connect";
    PMPI_Comm_join "MPI_Comm_join";
    PMPI_Comm_spawn "MPI_Comm_spawn";
    PMPI_Comm_spawn_multiple "MPI_Comm_spawn_multiple";
    PMPI_Compare_and_swap "MPI_Compare_and_swap";
    PMPI_Fetch_and_op "MPI_Fetch_and_op";
    PMPI_Get "MPI_Get";
    PMPI_Get_accumulate "MPI_Get_accumulate";
    PMPI_Lookup_name "MPI_Lookup_name";
    PMPI_Open_port "MPI_Open_port";
    PMPI_Publish_name "MPI_Publish_name";
    PMPI_Put "MPI_Put";
    PMPI_Raccumulate "MPI_Raccumulate";
    PMPI_Rget "MPI_Rget";
    PMPI_Rget_accumulate "MPI_Rget_accumulate";
    PMPI_Rput "MPI_Rput";
    PMPI_Unpublish_name "MPI_Unpublish_name";
    PMPI_Win_allocate "MPI_Win_allocate";
    PMPI_Win_allocate_shared "MPI_Win_allocate_shared";
    PMPI_Win_attach "MPI_Win_attach";
    PMPI_Win_call_errhandler "MPI_Win_call_errhandler";
    PMPI_Win_complete "MPI_Win_complete";
    PMPI_Win_create "MPI_Win_create";
    PMPI_Win_create_dynamic "MPI_Win_create_dynamic";
    PMPI_Win_create_errhandler "MPI_Win_create_errhandler";
    PMPI_Win_delete_attr "MPI_Win_delete_attr";
    PMPI_Win_detach "MPI_Win_detach";
    PMPI_Win_fence "MPI_Win_fence";
    PMPI_Win_flush "MPI_Win_flush";
    PMPI_Win_flush_all "MPI_Win_flush_all";
    PMPI_Win_flush_local "MPI_Win_flush_local";
    PMPI_Win_flush_local_all "MPI_Win_flush_local_all";
    PMPI_Win_free "MPI_Win_free";
    PMPI_Win_get_attr "MPI_Win_get_attr";
    PMPI_Win_get_errhandler "MPI_Win_get_errhandler";
    PMPI_Win_get_group "MPI_Win_get_group";
    PMPI_Win_get_info "MPI_Win_get_info";
    PMPI_Win_get_name "MPI_Win_get_name";
    PMPI_Win_lock "MPI_Win_lock";
    PMPI_Win_lock_all "MPI_Win_lock_all";
    PMPI_Win_post "MPI_Win_post";
    PMPI_Win_set_attr "MPI_Win_set_attr";
    PMPI_Win_set_errhandler "MPI_Win_set_errhandler";
    PMPI_Win_set_info "MPI_Win_set_info";
    PMPI_Win_set_name "MPI_Win_set_name";
    PMPI_Win_shared_query "MPI_Win_shared_query";
    PMPI_Win_start "MPI_Win_start";
    PMPI_Win_sync "MPI_Win_sync";
    PMPI_Win_test "MPI_Win_test";
    PMPI_Win_unlock "MPI_Win_unlock";
    PMPI_Win_unlock_all "MPI_Win_unlock_all";
    PMPI_Win_wait "MPI_Win_wait";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unimplemented_md_lists_exactly_the_stubs() {
        let doc = include_str!("../UNIMPLEMENTED.md");
        let listed: Vec<&str> = doc
            .lines()
            .filter_map(|l| l.strip_prefix("- `")?.strip_suffix('`'))
            .collect();
        assert_eq!(listed, STUB_NAMES);
    }
}
