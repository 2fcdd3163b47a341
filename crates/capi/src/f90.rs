//! `MPI_Type_create_f90_real/complex/integer`: the predefined datatype that holds Fortran
//! 90 `SELECTED_REAL_KIND(p, r)` / `SELECTED_INT_KIND(r)` values (MPI 3.1 §17.1.9). Each
//! returns a handle of its own, cached per (kind, p, r) so that repeated calls give the same
//! handle, with the layout of the matching sized type (`MPI_REAL4`, ...) and the envelope
//! `MPI_COMBINER_F90_*` with the integers p, r (or r). The handles are predefined:
//! `MPI_Type_free` refuses them.

use crate::consts::*;
use crate::datatype::register;
use crate::ffi::{out, MpiResult};
use crate::state::lock;
use std::collections::BTreeMap;
use std::ffi::c_int;
use std::sync::Mutex;

/// The sized type for precision `p` and range `r` among `(type, max p, max r)` candidates,
/// smallest first (`MPI_UNDEFINED`: no requirement).
fn select(cands: &[(c_int, c_int, c_int)], p: c_int, r: c_int, what: &str) -> MpiResult<c_int> {
    let fits = |want: c_int, max: c_int| want == MPI_UNDEFINED || want <= max;
    if (p < 0 && p != MPI_UNDEFINED) || (r < 0 && r != MPI_UNDEFINED) {
        mpi_bail!(MPI_ERR_ARG, "{what}: negative precision {p} or range {r}");
    }
    if p == MPI_UNDEFINED && r == MPI_UNDEFINED {
        mpi_bail!(MPI_ERR_ARG, "{what}: p and r are both MPI_UNDEFINED");
    }
    match cands
        .iter()
        .find(|&&(_, mp, mr)| fits(p, mp) && fits(r, mr))
    {
        Some(&(t, _, _)) => Ok(t),
        None => mpi_bail!(
            MPI_ERR_ARG,
            "{what}: no supported type has precision {p} and range {r}"
        ),
    }
}

/// The cached handle for (`combiner`, `ints`), else a new one shaped as `base`.
fn f90_type(combiner: c_int, ints: Vec<c_int>, base: c_int, newtype: *mut c_int) -> MpiResult {
    static CACHE: Mutex<BTreeMap<(c_int, Vec<c_int>), c_int>> = Mutex::new(BTreeMap::new());
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    let key = (combiner, ints.clone());
    if let Some(&h) = cache.get(&key) {
        return out(newtype, h, "newtype");
    }
    let mut st = lock();
    let mut t = (*st.dtype(base)?).clone();
    // Treated as a derived type over `base` internally (reductions look through it);
    // MPI_Type_free refuses it by its combiner.
    t.predefined = false;
    t.committed = true;
    let mut h = 0;
    register(
        &mut st,
        t,
        combiner,
        ints,
        vec![],
        Default::default(),
        Default::default(),
        &mut h,
    )?;
    cache.insert(key, h);
    out(newtype, h, "newtype")
}

mpi_fn! {
    /// `MPI_Type_create_f90_real`: `MPI_REAL4` (p <= 6, r <= 37) or `MPI_REAL8` (p <= 15,
    /// r <= 307) shaped.
    fn PMPI_Type_create_f90_real / "MPI_Type_create_f90_real" (p: c_int, r: c_int, newtype: *mut c_int) {
        let base = select(&[(MPI_REAL4, 6, 37), (MPI_REAL8, 15, 307)], p, r, "MPI_Type_create_f90_real")?;
        f90_type(MPI_COMBINER_F90_REAL, vec![p, r], base, newtype)
    }
}

mpi_fn! {
    /// `MPI_Type_create_f90_complex`: `MPI_COMPLEX8` or `MPI_COMPLEX16` shaped (the real
    /// kinds' limits).
    fn PMPI_Type_create_f90_complex / "MPI_Type_create_f90_complex" (p: c_int, r: c_int, newtype: *mut c_int) {
        let base = select(&[(MPI_COMPLEX8, 6, 37), (MPI_COMPLEX16, 15, 307)], p, r, "MPI_Type_create_f90_complex")?;
        f90_type(MPI_COMBINER_F90_COMPLEX, vec![p, r], base, newtype)
    }
}

mpi_fn! {
    /// `MPI_Type_create_f90_integer`: `MPI_INTEGER1/2/4/8` shaped (r <= 2, 4, 9, 18).
    fn PMPI_Type_create_f90_integer / "MPI_Type_create_f90_integer" (r: c_int, newtype: *mut c_int) {
        if r == MPI_UNDEFINED {
            mpi_bail!(MPI_ERR_ARG, "MPI_Type_create_f90_integer: r is MPI_UNDEFINED");
        }
        let cands = [(MPI_INTEGER1, 0, 2), (MPI_INTEGER2, 0, 4), (MPI_INTEGER4, 0, 9), (MPI_INTEGER8, 0, 18)];
        let base = select(&cands, MPI_UNDEFINED, r, "MPI_Type_create_f90_integer")?;
        f90_type(MPI_COMBINER_F90_INTEGER, vec![r], base, newtype)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_chosen_by_precision_and_range() {
        let reals = [(MPI_REAL4, 6, 37), (MPI_REAL8, 15, 307)];
        assert_eq!(select(&reals, 6, 30, "t").ok(), Some(MPI_REAL4));
        assert_eq!(select(&reals, 7, MPI_UNDEFINED, "t").ok(), Some(MPI_REAL8));
        assert_eq!(
            select(&reals, MPI_UNDEFINED, 300, "t").ok(),
            Some(MPI_REAL8)
        );
        assert!(select(&reals, 16, 1, "t").is_err());
        assert!(select(&reals, MPI_UNDEFINED, MPI_UNDEFINED, "t").is_err());
        assert!(select(&reals, -3, 1, "t").is_err());
    }
}
