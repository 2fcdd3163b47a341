//! Categories (`MPI_T_category_*`): one per framework (`btl`) and one per component
//! (`btl_sm`, a subcategory of its framework's), holding that framework's or component's
//! control and performance variables and its events.

use super::state::*;
use crate::ffi::{out, read_cstr, slice_out, MpiResult};
use std::ffi::{c_char, c_int};

/// Runs `f` on category `i`.
fn with_cat<T>(i: c_int, f: impl FnOnce(&Category) -> T) -> MpiResult<T> {
    with(|t| {
        t.sync();
        match usize::try_from(i).ok().and_then(|i| t.categories.get(i)) {
            Some(c) => Ok(f(c)),
            None => fail(MPI_T_ERR_INVALID_INDEX, format!("no category {i}")),
        }
    })
}

/// Copies up to `len` of `items` into `indices`.
fn fill(items: &[c_int], len: c_int, indices: *mut c_int) -> MpiResult {
    let n = items.len().min(usize::try_from(len).unwrap_or(0));
    slice_out(indices, n, "indices")?.copy_from_slice(&items[..n]);
    Ok(())
}

mpi_fn! {
    /// `MPI_T_category_get_num`.
    fn PMPI_T_category_get_num / "MPI_T_category_get_num" [Direct] (num_cat: *mut c_int) {
        let n = with(|t| {
            t.sync();
            Ok(t.categories.len() as c_int)
        })?;
        out(num_cat, n, "num_cat")
    }
}

mpi_fn! {
    /// `MPI_T_category_get_info`.
    fn PMPI_T_category_get_info / "MPI_T_category_get_info" [Direct] (cat_index: c_int, name: *mut c_char, name_len: *mut c_int, desc: *mut c_char, desc_len: *mut c_int, num_cvars: *mut c_int, num_pvars: *mut c_int, num_categories: *mut c_int) {
        let (n, d, nc, np, ns) = with_cat(cat_index, |c| {
            (c.name.clone(), c.desc.clone(), c.cvars.len(), c.pvars.len(), c.subcats.len())
        })?;
        out_str(&n, name, name_len)?;
        out_str(&d, desc, desc_len)?;
        opt(num_cvars, nc as c_int);
        opt(num_pvars, np as c_int);
        opt(num_categories, ns as c_int);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_T_category_get_num_events`.
    fn PMPI_T_category_get_num_events / "MPI_T_category_get_num_events" [Direct] (cat_index: c_int, num_events: *mut c_int) {
        let n = with_cat(cat_index, |c| c.events.len())?;
        out(num_events, n as c_int, "num_events")
    }
}

mpi_fn! {
    /// `MPI_T_category_get_index`.
    fn PMPI_T_category_get_index / "MPI_T_category_get_index" [Direct] (name: *const c_char, cat_index: *mut c_int) {
        let name = read_cstr(name, "name")?;
        let i = with(|t| {
            t.sync();
            match t.category_index.get(&name) {
                Some(&i) => Ok(i),
                None => fail(MPI_T_ERR_INVALID_NAME, format!("no category {name}")),
            }
        })?;
        out(cat_index, i, "cat_index")
    }
}

mpi_fn! {
    /// `MPI_T_category_get_cvars`.
    fn PMPI_T_category_get_cvars / "MPI_T_category_get_cvars" [Direct] (cat_index: c_int, len: c_int, indices: *mut c_int) {
        let v = with_cat(cat_index, |c| c.cvars.clone())?;
        fill(&v, len, indices)
    }
}

mpi_fn! {
    /// `MPI_T_category_get_pvars`.
    fn PMPI_T_category_get_pvars / "MPI_T_category_get_pvars" [Direct] (cat_index: c_int, len: c_int, indices: *mut c_int) {
        let v = with_cat(cat_index, |c| c.pvars.clone())?;
        fill(&v, len, indices)
    }
}

mpi_fn! {
    /// `MPI_T_category_get_categories`.
    fn PMPI_T_category_get_categories / "MPI_T_category_get_categories" [Direct] (cat_index: c_int, len: c_int, indices: *mut c_int) {
        let v = with_cat(cat_index, |c| c.subcats.clone())?;
        fill(&v, len, indices)
    }
}

mpi_fn! {
    /// `MPI_T_category_get_events`.
    fn PMPI_T_category_get_events / "MPI_T_category_get_events" [Direct] (cat_index: c_int, len: c_int, indices: *mut c_int) {
        let v = with_cat(cat_index, |c| c.events.clone())?;
        fill(&v, len, indices)
    }
}

mpi_fn! {
    /// `MPI_T_category_changed`: a number that grows whenever a variable or category is
    /// added.
    fn PMPI_T_category_changed / "MPI_T_category_changed" [Direct] (update_number: *mut c_int) {
        let n = with(|t| {
            t.sync();
            Ok(t.changed)
        })?;
        out(update_number, n, "update_number")
    }
}
