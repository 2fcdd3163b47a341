//! Event sources and events (`MPI_T_source_*`, `MPI_T_event_*`, MPI 4.1 §15.3.8).
//!
//! One source, the library's monotonic clock in nanoseconds, ordered. No event types yet:
//! `MPI_T_event_get_num` is 0, every event index is invalid, and so is every registration
//! or instance handle (none can exist). UNIMPLEMENTED.md lists events as missing.

use super::state::*;
use crate::consts::MPI_INFO_NULL;
use crate::ffi::{out, MpiResult};
use std::ffi::{c_char, c_int, c_void};
use std::sync::OnceLock;
use std::time::Instant;

/// Nanoseconds since the first time anyone asked.
fn now_ticks() -> i64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as i64
}

/// Checks the source index (only 0 exists).
fn source(i: c_int) -> MpiResult {
    with(|_| Ok(()))?;
    if i != 0 {
        return fail(MPI_T_ERR_INVALID_INDEX, format!("no event source {i}"));
    }
    Ok(())
}

/// Every event index is invalid: there are no events.
fn no_event<T>(i: c_int) -> MpiResult<T> {
    with(|_| Ok(()))?;
    fail(
        MPI_T_ERR_INVALID_INDEX,
        format!("no event {i} (oxmpi has no events yet)"),
    )
}

/// Every registration or instance handle is invalid: none can exist.
fn no_handle<T>() -> MpiResult<T> {
    with(|_| Ok(()))?;
    fail(
        MPI_T_ERR_INVALID_HANDLE,
        "no event registrations or instances exist",
    )
}

mpi_fn! {
    /// `MPI_T_source_get_num`: one source.
    fn PMPI_T_source_get_num / "MPI_T_source_get_num" [Direct] (num_sources: *mut c_int) {
        with(|_| Ok(()))?;
        out(num_sources, 1, "num_sources")
    }
}

mpi_fn! {
    /// `MPI_T_source_get_info`.
    fn PMPI_T_source_get_info / "MPI_T_source_get_info" [Direct] (source_index: c_int, name: *mut c_char, name_len: *mut c_int, desc: *mut c_char, desc_len: *mut c_int, ordering: *mut c_int, ticks_per_second: *mut i64, max_ticks: *mut i64, info: *mut c_int) {
        source(source_index)?;
        out_str("oxmpi_clock", name, name_len)?;
        out_str("The library's monotonic clock, in nanoseconds since its first reading", desc, desc_len)?;
        opt(ordering, MPI_T_SOURCE_ORDERED);
        opt(ticks_per_second, 1_000_000_000);
        opt(max_ticks, i64::MAX);
        opt(info, MPI_INFO_NULL);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_T_source_get_timestamp`.
    fn PMPI_T_source_get_timestamp / "MPI_T_source_get_timestamp" [Direct] (source_index: c_int, timestamp: *mut i64) {
        source(source_index)?;
        out(timestamp, now_ticks(), "timestamp")
    }
}

mpi_fn! {
    /// `MPI_T_event_get_num`: no events yet.
    fn PMPI_T_event_get_num / "MPI_T_event_get_num" [Direct] (num_events: *mut c_int) {
        with(|_| Ok(()))?;
        out(num_events, 0, "num_events")
    }
}

mpi_fn! {
    /// `MPI_T_event_get_info`.
    fn PMPI_T_event_get_info / "MPI_T_event_get_info" [Direct] (event_index: c_int, _name: *mut c_char, _name_len: *mut c_int, _verbosity: *mut c_int, _array_of_datatypes: *mut c_int, _array_of_displacements: *mut isize, _num_elements: *mut c_int, _enumtype: *mut *mut c_void, _info: *mut c_int, _desc: *mut c_char, _desc_len: *mut c_int, _bind: *mut c_int) {
        no_event(event_index)
    }
}

mpi_fn! {
    /// `MPI_T_event_get_index`.
    fn PMPI_T_event_get_index / "MPI_T_event_get_index" [Direct] (name: *const c_char, _event_index: *mut c_int) {
        with(|_| Ok(()))?;
        let name = crate::ffi::read_cstr(name, "name")?;
        fail(MPI_T_ERR_INVALID_NAME, format!("no event {name}"))
    }
}

mpi_fn! {
    /// `MPI_T_event_handle_alloc`.
    fn PMPI_T_event_handle_alloc / "MPI_T_event_handle_alloc" [Direct] (event_index: c_int, _obj_handle: *mut c_void, _info: c_int, _event_registration: *mut *mut c_void) {
        no_event(event_index)
    }
}

mpi_fn! {
    /// `MPI_T_event_handle_set_info`.
    fn PMPI_T_event_handle_set_info / "MPI_T_event_handle_set_info" [Direct] (_reg: *mut c_void, _info: c_int) {
        no_handle()
    }
}

mpi_fn! {
    /// `MPI_T_event_handle_get_info`.
    fn PMPI_T_event_handle_get_info / "MPI_T_event_handle_get_info" [Direct] (_reg: *mut c_void, _info_used: *mut c_int) {
        no_handle()
    }
}

mpi_fn! {
    /// `MPI_T_event_register_callback`.
    fn PMPI_T_event_register_callback / "MPI_T_event_register_callback" [Direct] (_reg: *mut c_void, _cb_safety: c_int, _info: c_int, _user_data: *mut c_void, _event_cb_function: *mut c_void) {
        no_handle()
    }
}

mpi_fn! {
    /// `MPI_T_event_callback_set_info`.
    fn PMPI_T_event_callback_set_info / "MPI_T_event_callback_set_info" [Direct] (_reg: *mut c_void, _cb_safety: c_int, _info: c_int) {
        no_handle()
    }
}

mpi_fn! {
    /// `MPI_T_event_callback_get_info`.
    fn PMPI_T_event_callback_get_info / "MPI_T_event_callback_get_info" [Direct] (_reg: *mut c_void, _cb_safety: c_int, _info_used: *mut c_int) {
        no_handle()
    }
}

mpi_fn! {
    /// `MPI_T_event_handle_free`.
    fn PMPI_T_event_handle_free / "MPI_T_event_handle_free" [Direct] (_reg: *mut c_void, _user_data: *mut c_void, _free_cb_function: *mut c_void) {
        no_handle()
    }
}

mpi_fn! {
    /// `MPI_T_event_set_dropped_handler`.
    fn PMPI_T_event_set_dropped_handler / "MPI_T_event_set_dropped_handler" [Direct] (_reg: *mut c_void, _dropped_cb_function: *mut c_void) {
        no_handle()
    }
}

mpi_fn! {
    /// `MPI_T_event_read`.
    fn PMPI_T_event_read / "MPI_T_event_read" [Direct] (_instance: *mut c_void, _element_index: c_int, _buffer: *mut c_void) {
        no_handle()
    }
}

mpi_fn! {
    /// `MPI_T_event_copy`.
    fn PMPI_T_event_copy / "MPI_T_event_copy" [Direct] (_instance: *mut c_void, _buffer: *mut c_void) {
        no_handle()
    }
}

mpi_fn! {
    /// `MPI_T_event_get_timestamp`.
    fn PMPI_T_event_get_timestamp / "MPI_T_event_get_timestamp" [Direct] (_instance: *mut c_void, _event_timestamp: *mut i64) {
        no_handle()
    }
}

mpi_fn! {
    /// `MPI_T_event_get_source`.
    fn PMPI_T_event_get_source / "MPI_T_event_get_source" [Direct] (_instance: *mut c_void, _source_index: *mut c_int) {
        no_handle()
    }
}
