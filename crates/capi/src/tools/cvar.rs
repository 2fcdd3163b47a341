//! Control variables (`MPI_T_cvar_*`) and their enumerations (`MPI_T_enum_*`): the
//! parameter registry seen through `oxmpi_base::params::tools`.
//!
//! A write is `oxmpi_coll::base::cvar::write` (the Rust API's too): it goes through the
//! registry (source `set`, validated like any other source).
//! Before `MPI_Init` (after `MPI_T_init_thread`) every settable parameter may be written:
//! the engine, transports and collectives read them at `MPI_Init`. Once the library runs,
//! only the parameters declared `runtime` in the registry are writable (eager limit,
//! cooperative-copy switch point, collective algorithms and `coll_sm_allreduce_large_min`,
//! verbosity levels, `dpm_connect_timeout`): the write takes effect when
//! `MPI_T_cvar_write` returns (operations started before keep their values); the others
//! report `MPI_T_SCOPE_CONSTANT` and a write fails with `MPI_T_ERR_CVAR_SET_NEVER`. The
//! enumeration of an enum or boolean parameter is the handle `index + 2` of its control
//! variable.

use super::state::*;
use crate::consts::{MPI_CHAR, MPI_COUNT, MPI_INT, MPI_UNSIGNED_LONG_LONG};
use crate::ffi::{out, read_cstr, MpiResult};
use oxmpi_base::params::tools::{self as view, CvarScope, CvarType, CvarValue};
use oxmpi_base::params::{self, Entry};
use oxmpi_coll::base::cvar::{started, CvarWriteError};
use std::ffi::{c_char, c_int, c_void};

/// The registry entry of control variable `i`.
fn entry(t: &mut Tools, i: c_int) -> MpiResult<Entry> {
    t.sync();
    let name = t.cvar_name(i)?.to_string();
    let e = params::with_global(|r| r.get(&name).cloned())
        .ok()
        .flatten();
    match e {
        Some(e) => Ok(e),
        None => fail(MPI_T_ERR_INVALID_INDEX, format!("no control variable {i}")),
    }
}

/// The MPICH datatype of a control variable type.
fn datatype(ty: CvarType) -> c_int {
    match ty {
        CvarType::Int => MPI_INT,
        CvarType::Count => MPI_COUNT,
        CvarType::UnsignedLongLong => MPI_UNSIGNED_LONG_LONG,
        CvarType::Char => MPI_CHAR,
    }
}

/// The MPICH value of a scope.
fn scope(s: CvarScope) -> c_int {
    match s {
        CvarScope::Constant => MPI_T_SCOPE_CONSTANT,
        CvarScope::Readonly => MPI_T_SCOPE_READONLY,
        CvarScope::Local => MPI_T_SCOPE_LOCAL,
        CvarScope::AllEq => MPI_T_SCOPE_ALL_EQ,
    }
}

/// The MPICH verbosity of a parameter level.
pub(crate) fn verbosity(level: u8) -> c_int {
    MPI_T_VERBOSITY_USER_BASIC + view::verbosity_index(level) as c_int
}

/// The handle of control variable `i`'s enumeration, or `MPI_T_ENUM_NULL`.
fn enum_handle(e: &Entry, i: c_int) -> *mut c_void {
    match view::enum_values(&e.decl.ty) {
        Some(_) => (i as usize + 2) as *mut c_void,
        None => std::ptr::null_mut(),
    }
}

/// The values of enumeration `h`.
fn enum_items(h: *mut c_void) -> MpiResult<(String, &'static [(i64, &'static str)])> {
    with(|t| {
        let i = (h as usize)
            .checked_sub(2)
            .and_then(|i| c_int::try_from(i).ok());
        let e = i.map(|i| entry(t, i));
        match e {
            Some(Ok(e)) => match view::enum_values(&e.decl.ty) {
                Some(v) => Ok((e.decl.full_name(), v)),
                None => fail(MPI_T_ERR_INVALID_HANDLE, "not an enumeration"),
            },
            _ => fail(MPI_T_ERR_INVALID_HANDLE, "not an enumeration"),
        }
    })
}

mpi_fn! {
    /// `MPI_T_cvar_get_num`.
    fn PMPI_T_cvar_get_num / "MPI_T_cvar_get_num" [Direct] (num_cvar: *mut c_int) {
        let n = with(|t| {
            t.sync();
            Ok(t.cvars.len() as c_int)
        })?;
        out(num_cvar, n, "num_cvar")
    }
}

mpi_fn! {
    /// `MPI_T_cvar_get_info`.
    fn PMPI_T_cvar_get_info / "MPI_T_cvar_get_info" [Direct] (cvar_index: c_int, name: *mut c_char, name_len: *mut c_int, verb: *mut c_int, dtype: *mut c_int, enumtype: *mut *mut c_void, desc: *mut c_char, desc_len: *mut c_int, bind: *mut c_int, scope_out: *mut c_int) {
        let e = with(|t| entry(t, cvar_index))?;
        out_str(&e.decl.full_name(), name, name_len)?;
        out_str(&e.decl.help_text(), desc, desc_len)?;
        opt(verb, verbosity(e.decl.level));
        opt(dtype, datatype(CvarType::of(&e.decl.ty)));
        opt(enumtype, enum_handle(&e, cvar_index));
        opt(bind, MPI_T_BIND_NO_OBJECT);
        opt(scope_out, scope(CvarScope::of(&e, started())));
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_T_cvar_get_index`.
    fn PMPI_T_cvar_get_index / "MPI_T_cvar_get_index" [Direct] (name: *const c_char, cvar_index: *mut c_int) {
        let name = read_cstr(name, "name")?;
        let i = with(|t| {
            t.sync();
            match t.cvar_index.get(&name) {
                Some(&i) => Ok(i),
                None => fail(MPI_T_ERR_INVALID_NAME, format!("no control variable {name}")),
            }
        })?;
        out(cvar_index, i, "cvar_index")
    }
}

mpi_fn! {
    /// `MPI_T_cvar_handle_alloc`: control variables are bound to no object.
    fn PMPI_T_cvar_handle_alloc / "MPI_T_cvar_handle_alloc" [Direct] (cvar_index: c_int, _obj_handle: *mut c_void, handle: *mut *mut c_void, count: *mut c_int) {
        let (h, ty) = with(|t| {
            let e = entry(t, cvar_index)?;
            Ok((t.cvar_handles.insert(cvar_index), CvarType::of(&e.decl.ty)))
        })?;
        out(handle, h, "handle")?;
        let n = if ty == CvarType::Char { view::CHAR_COUNT as c_int } else { 1 };
        out(count, n, "count")
    }
}

mpi_fn! {
    /// `MPI_T_cvar_handle_free`.
    fn PMPI_T_cvar_handle_free / "MPI_T_cvar_handle_free" [Direct] (handle: *mut *mut c_void) {
        let h = crate::ffi::inp(handle, "handle")?;
        with(|t| match t.cvar_handles.remove(h) {
            Some(_) => Ok(()),
            None => fail(MPI_T_ERR_INVALID_HANDLE, "not a control variable handle"),
        })?;
        out(handle, std::ptr::null_mut(), "handle")
    }
}

/// The control variable of handle `h`.
fn of_handle(h: *mut c_void) -> MpiResult<Entry> {
    with(|t| match t.cvar_handles.get_mut(h).copied() {
        Some(i) => entry(t, i),
        None => fail(MPI_T_ERR_INVALID_HANDLE, "not a control variable handle"),
    })
}

mpi_fn! {
    /// `MPI_T_cvar_read`: the value as its datatype (text NUL-terminated, at most
    /// `CHAR_COUNT` bytes with the NUL).
    fn PMPI_T_cvar_read / "MPI_T_cvar_read" [Direct] (handle: *mut c_void, buf: *mut c_void) {
        let e = of_handle(handle)?;
        match (CvarType::of(&e.decl.ty), view::cvar_value(&e)) {
            (CvarType::Int, CvarValue::Int(v)) => out(buf.cast::<c_int>(), v as c_int, "buf"),
            (_, CvarValue::Int(v)) => out(buf.cast::<i64>(), v, "buf"),
            (_, CvarValue::Unsigned(v)) => out(buf.cast::<u64>(), v, "buf"),
            (_, CvarValue::Text(s)) => {
                crate::ffi::copy_cstr(buf.cast::<c_char>(), view::CHAR_COUNT, &s).map(|_| ())
            }
        }
    }
}

mpi_fn! {
    /// `MPI_T_cvar_write`: any settable variable before `MPI_Init`, the `runtime` ones after
    /// it (see the module documentation).
    fn PMPI_T_cvar_write / "MPI_T_cvar_write" [Direct] (handle: *mut c_void, buf: *const c_void) {
        let e = of_handle(handle)?;
        let v = match CvarType::of(&e.decl.ty) {
            CvarType::Int => CvarValue::Int(crate::ffi::inp(buf.cast::<c_int>(), "buf")?.into()),
            CvarType::Count => CvarValue::Int(crate::ffi::inp(buf.cast::<i64>(), "buf")?),
            CvarType::UnsignedLongLong => CvarValue::Unsigned(crate::ffi::inp(buf.cast::<u64>(), "buf")?),
            CvarType::Char => CvarValue::Text(read_cstr(buf.cast::<c_char>(), "buf")?),
        };
        match oxmpi_coll::base::cvar::write(&e.decl.full_name(), &v) {
            Ok(()) => Ok(()),
            Err(e @ CvarWriteError::Never(_)) => fail(MPI_T_ERR_CVAR_SET_NEVER, e.to_string()),
            Err(e @ CvarWriteError::Unknown(_)) => fail(MPI_T_ERR_INVALID_NAME, e.to_string()),
            Err(e @ CvarWriteError::Invalid(_)) => fail(MPI_T_ERR_INVALID, e.to_string()),
        }
    }
}

mpi_fn! {
    /// `MPI_T_enum_get_info`: the enumeration is named after its parameter.
    fn PMPI_T_enum_get_info / "MPI_T_enum_get_info" [Direct] (enumtype: *mut c_void, num: *mut c_int, name: *mut c_char, name_len: *mut c_int) {
        let (n, items) = enum_items(enumtype)?;
        opt(num, items.len() as c_int);
        out_str(&n, name, name_len)
    }
}

mpi_fn! {
    /// `MPI_T_enum_get_item`.
    fn PMPI_T_enum_get_item / "MPI_T_enum_get_item" [Direct] (enumtype: *mut c_void, index: c_int, value: *mut c_int, name: *mut c_char, name_len: *mut c_int) {
        let (_, items) = enum_items(enumtype)?;
        let Some(&(v, n)) = usize::try_from(index).ok().and_then(|i| items.get(i)) else {
            return fail(MPI_T_ERR_INVALID_ITEM, format!("no item {index}"));
        };
        opt(value, v as c_int);
        out_str(n, name, name_len)
    }
}
