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
    PMPI_File_call_errhandler "MPI_File_call_errhandler";
    PMPI_File_close "MPI_File_close";
    PMPI_File_create_errhandler "MPI_File_create_errhandler";
    PMPI_File_delete "MPI_File_delete";
    PMPI_File_get_amode "MPI_File_get_amode";
    PMPI_File_get_atomicity "MPI_File_get_atomicity";
    PMPI_File_get_byte_offset "MPI_File_get_byte_offset";
    PMPI_File_get_errhandler "MPI_File_get_errhandler";
    PMPI_File_get_group "MPI_File_get_group";
    PMPI_File_get_info "MPI_File_get_info";
    PMPI_File_get_position "MPI_File_get_position";
    PMPI_File_get_position_shared "MPI_File_get_position_shared";
    PMPI_File_get_size "MPI_File_get_size";
    PMPI_File_get_type_extent "MPI_File_get_type_extent";
    PMPI_File_get_view "MPI_File_get_view";
    PMPI_File_iread "MPI_File_iread";
    PMPI_File_iread_at "MPI_File_iread_at";
    PMPI_File_iread_shared "MPI_File_iread_shared";
    PMPI_File_iwrite "MPI_File_iwrite";
    PMPI_File_iwrite_at "MPI_File_iwrite_at";
    PMPI_File_iwrite_shared "MPI_File_iwrite_shared";
    PMPI_File_open "MPI_File_open";
    PMPI_File_preallocate "MPI_File_preallocate";
    PMPI_File_read "MPI_File_read";
    PMPI_File_read_all "MPI_File_read_all";
    PMPI_File_read_all_begin "MPI_File_read_all_begin";
    PMPI_File_read_all_end "MPI_File_read_all_end";
    PMPI_File_read_at "MPI_File_read_at";
    PMPI_File_read_at_all "MPI_File_read_at_all";
    PMPI_File_read_at_all_begin "MPI_File_read_at_all_begin";
    PMPI_File_read_at_all_end "MPI_File_read_at_all_end";
    PMPI_File_read_ordered "MPI_File_read_ordered";
    PMPI_File_read_ordered_begin "MPI_File_read_ordered_begin";
    PMPI_File_read_ordered_end "MPI_File_read_ordered_end";
    PMPI_File_read_shared "MPI_File_read_shared";
    PMPI_File_seek "MPI_File_seek";
    PMPI_File_seek_shared "MPI_File_seek_shared";
    PMPI_File_set_atomicity "MPI_File_set_atomicity";
    PMPI_File_set_errhandler "MPI_File_set_errhandler";
    PMPI_File_set_info "MPI_File_set_info";
    PMPI_File_set_size "MPI_File_set_size";
    PMPI_File_set_view "MPI_File_set_view";
    PMPI_File_sync "MPI_File_sync";
    PMPI_File_write "MPI_File_write";
    PMPI_File_write_all "MPI_File_write_all";
    PMPI_File_write_all_begin "MPI_File_write_all_begin";
    PMPI_File_write_all_end "MPI_File_write_all_end";
    PMPI_File_write_at "MPI_File_write_at";
    PMPI_File_write_at_all "MPI_File_write_at_all";
    PMPI_File_write_at_all_begin "MPI_File_write_at_all_begin";
    PMPI_File_write_at_all_end "MPI_File_write_at_all_end";
    PMPI_File_write_ordered "MPI_File_write_ordered";
    PMPI_File_write_ordered_begin "MPI_File_write_ordered_begin";
    PMPI_File_write_ordered_end "MPI_File_write_ordered_end";
    PMPI_File_write_shared "MPI_File_write_shared";
    PMPI_Get "MPI_Get";
    PMPI_Get_accumulate "MPI_Get_accumulate";
    PMPI_Intercomm_create "MPI_Intercomm_create";
    PMPI_Lookup_name "MPI_Lookup_name";
    PMPI_Open_port "MPI_Open_port";
    PMPI_Publish_name "MPI_Publish_name";
    PMPI_Put "MPI_Put";
    PMPI_Raccumulate "MPI_Raccumulate";
    PMPI_Register_datarep "MPI_Register_datarep";
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
