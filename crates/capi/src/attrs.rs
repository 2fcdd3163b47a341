//! Attribute keyvals and the calls of their copy/delete callbacks (shared by
//! communicators, datatypes and windows), datatype attributes and keyvals
//! (`MPI_Type_*_attr`, `MPI_Type_*_keyval`) and window keyvals. Communicator attributes
//! live in `comm.rs`, window attributes in `rma`.

use crate::consts::*;
use crate::ffi::{inp, out, MpiResult};
use crate::state::{lock, Keyval, State};
use std::ffi::{c_int, c_void};

/// An attribute copy callback (`MPI_{Comm,Type,Win}_copy_attr_function`).
pub(crate) type CopyFn =
    unsafe extern "C" fn(c_int, c_int, *mut c_void, *mut c_void, *mut c_void, *mut c_int) -> c_int;
/// An attribute delete callback (`MPI_{Comm,Type,Win}_delete_attr_function`).
pub(crate) type DeleteFn = unsafe extern "C" fn(c_int, c_int, *mut c_void, *mut c_void) -> c_int;

/// Create a keyval (`MPI_{Comm,Type,Win}_create_keyval`, `MPI_Keyval_create`).
pub(crate) fn new_keyval(
    copy: Option<CopyFn>,
    delete: Option<DeleteFn>,
    extra: *mut c_void,
) -> c_int {
    lock().keyvals.insert(Keyval {
        copy: copy.map_or(0, |f| f as usize),
        delete: delete.map_or(0, |f| f as usize),
        extra: extra as usize,
        freed: false,
        uses: 0,
    })
}

/// Free the keyval `*keyval` and set it to `MPI_KEYVAL_INVALID` (`MPI_*_free_keyval`,
/// `MPI_Keyval_free`): a keyval that attributes still use stays valid for them until the
/// last one is deleted (MPI 3.1 §6.7.2).
pub(crate) fn free_keyval(keyval: *mut c_int) -> MpiResult {
    let k = inp(keyval, "keyval")?;
    {
        let mut st = lock();
        match st.keyvals.get_mut(k) {
            Some(kv) if !kv.freed => kv.freed = true,
            _ => mpi_bail!(MPI_ERR_KEYVAL, "invalid attribute key {k:#x}"),
        }
        release_if_unused(&mut st, k);
    }
    out(keyval, MPI_KEYVAL_INVALID, "keyval")
}

/// The keyval `k` for setting a new attribute: `MPI_ERR_KEYVAL` if it does not exist or
/// was freed.
pub(crate) fn live_keyval(st: &State, k: c_int) -> MpiResult<Keyval> {
    match st.keyvals.get(k) {
        Some(kv) if !kv.freed => Ok(*kv),
        _ => mpi_bail!(MPI_ERR_KEYVAL, "invalid attribute key {k:#x}"),
    }
}

/// Count a new attribute set with keyval `k`.
pub(crate) fn attr_added(st: &mut State, k: c_int) {
    if let Some(kv) = st.keyvals.get_mut(k) {
        kv.uses += 1;
    }
}

/// Count an attribute of keyval `k` deleted; a freed keyval goes with its last attribute.
pub(crate) fn attr_dropped(st: &mut State, k: c_int) {
    if let Some(kv) = st.keyvals.get_mut(k) {
        kv.uses = kv.uses.saturating_sub(1);
    }
    release_if_unused(st, k);
}

fn release_if_unused(st: &mut State, k: c_int) {
    if st.keyvals.get(k).is_some_and(|kv| kv.freed && kv.uses == 0) {
        st.keyvals.remove(k);
    }
}

/// Delete the attributes `attrs` (keyval, value) of object `obj` in the given order: call
/// each delete callback (no lock held) and count the attribute gone. All are deleted; the
/// first callback error is returned.
pub(crate) fn delete_attr_list(
    obj: c_int,
    attrs: impl IntoIterator<Item = (c_int, usize)>,
) -> MpiResult {
    let mut first = Ok(());
    for (k, v) in attrs {
        let kv = lock().keyvals.get(k).copied();
        if let Some(kv) = kv {
            let rc = call_delete(obj, k, kv, v);
            if rc != MPI_SUCCESS && first.is_ok() {
                first = Err(crate::ffi::MpiError::new(
                    rc,
                    "attribute delete callback failed",
                ));
            }
        }
        attr_dropped(&mut lock(), k);
    }
    first
}

/// Call the delete callback of `keyval` for the attribute `value` of object `obj` (no
/// lock held); its return code (`MPI_SUCCESS` without a callback).
pub(crate) fn call_delete(obj: c_int, keyval: c_int, kv: Keyval, value: usize) -> c_int {
    if kv.delete == 0 {
        return MPI_SUCCESS;
    }
    // SAFETY: a non-NULL delete callback registered by the user with a create_keyval call.
    let f: DeleteFn = unsafe { std::mem::transmute::<usize, DeleteFn>(kv.delete) };
    // SAFETY: calling the user's callback with the arguments the standard prescribes.
    unsafe { f(obj, keyval, value as *mut c_void, kv.extra as *mut c_void) }
}

/// Call the copy callback of `keyval` for the attribute `value` of object `from` (no lock
/// held): the value for the copy, or `None` when the callback does not copy it (or there
/// is no callback).
pub(crate) fn call_copy(
    from: c_int,
    keyval: c_int,
    kv: Keyval,
    value: usize,
) -> MpiResult<Option<usize>> {
    if kv.copy == 0 {
        return Ok(None);
    }
    // SAFETY: a non-NULL copy callback registered by the user with a create_keyval call.
    let f: CopyFn = unsafe { std::mem::transmute::<usize, CopyFn>(kv.copy) };
    let mut newv: *mut c_void = std::ptr::null_mut();
    let mut flag: c_int = 0;
    // SAFETY: calling the user's copy callback with valid output pointers.
    let rc = unsafe {
        f(
            from,
            keyval,
            kv.extra as *mut c_void,
            value as *mut c_void,
            (&mut newv as *mut *mut c_void).cast(),
            &mut flag,
        )
    };
    if rc != MPI_SUCCESS {
        mpi_bail!(rc, "attribute copy callback failed");
    }
    Ok((flag != 0).then_some(newv as usize))
}

/// Delete all attributes of datatype `h` through their delete callbacks (MPI_Type_free);
/// the first callback error.
pub(crate) fn type_free_attrs(h: c_int) -> MpiResult {
    let attrs = lock().type_attrs.remove(&h).unwrap_or_default();
    delete_attr_list(h, attrs)
}

/// Copy the attributes of datatype `from` to `to` through the copy callbacks
/// (MPI_Type_dup).
pub(crate) fn type_copy_attrs(from: c_int, to: c_int) -> MpiResult {
    let attrs: Vec<(c_int, usize, Keyval)> = {
        let st = lock();
        st.type_attrs
            .get(&from)
            .map(|a| {
                a.iter()
                    .filter_map(|(&k, &v)| st.keyvals.get(k).map(|kv| (k, v, *kv)))
                    .collect()
            })
            .unwrap_or_default()
    };
    for (k, v, kv) in attrs {
        if let Some(newv) = call_copy(from, k, kv, v)? {
            let mut st = lock();
            st.types.note_attrs(to);
            if st
                .type_attrs
                .entry(to)
                .or_default()
                .insert(k, newv)
                .is_none()
            {
                attr_added(&mut st, k);
            }
        }
    }
    Ok(())
}

mpi_fn! {
    /// `MPI_Type_create_keyval`.
    fn PMPI_Type_create_keyval / "MPI_Type_create_keyval" (copy_fn: Option<CopyFn>, delete_fn: Option<DeleteFn>, keyval: *mut c_int, extra_state: *mut c_void) {
        if keyval.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL keyval");
        }
        out(keyval, new_keyval(copy_fn, delete_fn, extra_state), "keyval")
    }
}

mpi_fn! {
    /// `MPI_Type_free_keyval`.
    fn PMPI_Type_free_keyval / "MPI_Type_free_keyval" (keyval: *mut c_int) {
        free_keyval(keyval)
    }
}

mpi_fn! {
    /// `MPI_Win_create_keyval` (windows themselves are not implemented yet).
    fn PMPI_Win_create_keyval / "MPI_Win_create_keyval" (copy_fn: Option<CopyFn>, delete_fn: Option<DeleteFn>, keyval: *mut c_int, extra_state: *mut c_void) {
        if keyval.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL keyval");
        }
        out(keyval, new_keyval(copy_fn, delete_fn, extra_state), "keyval")
    }
}

mpi_fn! {
    /// `MPI_Win_free_keyval`.
    fn PMPI_Win_free_keyval / "MPI_Win_free_keyval" (keyval: *mut c_int) {
        free_keyval(keyval)
    }
}

mpi_fn! {
    /// `MPI_Type_set_attr`.
    fn PMPI_Type_set_attr / "MPI_Type_set_attr" (datatype: c_int, keyval: c_int, attribute_val: *mut c_void) {
        let mut st = lock();
        st.dtype(datatype)?;
        let kv = live_keyval(&st, keyval)?;
        let old = st.type_attrs.entry(datatype).or_default().insert(keyval, attribute_val as usize);
        st.types.note_attrs(datatype);
        if old.is_none() {
            attr_added(&mut st, keyval);
        }
        drop(st);
        if let Some(old) = old {
            let rc = call_delete(datatype, keyval, kv, old);
            if rc != MPI_SUCCESS {
                mpi_bail!(rc, "attribute delete callback failed");
            }
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Type_get_attr`.
    fn PMPI_Type_get_attr / "MPI_Type_get_attr" (datatype: c_int, keyval: c_int, attribute_val: *mut *mut c_void, flag: *mut c_int) {
        let st = lock();
        st.dtype(datatype)?;
        if st.keyvals.get(keyval).is_none() {
            mpi_bail!(MPI_ERR_KEYVAL, "invalid attribute key {keyval:#x}");
        }
        let v = st.type_attrs.get(&datatype).and_then(|a| a.get(&keyval)).copied();
        drop(st);
        match v {
            Some(v) => {
                out(attribute_val, v as *mut c_void, "attribute_val")?;
                out(flag, 1, "flag")
            }
            None => out(flag, 0, "flag"),
        }
    }
}

mpi_fn! {
    /// `MPI_Type_delete_attr`.
    fn PMPI_Type_delete_attr / "MPI_Type_delete_attr" (datatype: c_int, keyval: c_int) {
        let mut st = lock();
        st.dtype(datatype)?;
        if st.keyvals.get(keyval).is_none() {
            mpi_bail!(MPI_ERR_KEYVAL, "invalid attribute key {keyval:#x}");
        }
        let Some(old) = st.type_attrs.get_mut(&datatype).and_then(|a| a.remove(&keyval)) else {
            mpi_bail!(MPI_ERR_KEYVAL, "attribute {keyval:#x} is not set on this datatype");
        };
        drop(st);
        delete_attr_list(datatype, [(keyval, old)])
    }
}
