//! Small utilities: Fortran handle conversion, addresses, memory, info objects,
//! `MPI_Dims_create` and the exported data objects `MPI_UNWEIGHTED`/`MPI_WEIGHTS_EMPTY` and
//! `MPI_F_STATUS(ES)_IGNORE`/`MPI_F08_STATUS(ES)_IGNORE`.

use crate::consts::*;
use crate::ffi::{check_count, copy_cstr, inp, out, read_cstr, slice_out, MpiResult};
use crate::state::{lock, Info};
use crate::status::MpiStatus;
use std::ffi::{c_char, c_int, c_void};

/// A pointer constant that can live in a `static` (the exported data objects).
#[repr(transparent)]
pub struct ConstPtr(*const c_int);
// SAFETY: the pointer is only compared by address, never written through.
unsafe impl Sync for ConstPtr {}

static UNWEIGHTED_SENTINEL: c_int = 0;
static WEIGHTS_EMPTY_SENTINEL: c_int = 0;

/// `MPI_UNWEIGHTED` (`extern int * const`): a unique address.
#[no_mangle]
pub static MPI_UNWEIGHTED: ConstPtr = ConstPtr(&UNWEIGHTED_SENTINEL);
/// `MPI_WEIGHTS_EMPTY` (`extern int * const`): a unique address.
#[no_mangle]
pub static MPI_WEIGHTS_EMPTY: ConstPtr = ConstPtr(&WEIGHTS_EMPTY_SENTINEL);

/// `MPI_F_STATUS_IGNORE` (`extern MPI_Fint *`): a null pointer, as in MPICH
/// (`MPI_Status_f2c`/`MPI_Status_c2f` reject it as a NULL status).
#[no_mangle]
pub static MPI_F_STATUS_IGNORE: ConstPtr = ConstPtr(std::ptr::null());
/// `MPI_F_STATUSES_IGNORE` (`extern MPI_Fint *`): a null pointer, as in MPICH.
#[no_mangle]
pub static MPI_F_STATUSES_IGNORE: ConstPtr = ConstPtr(std::ptr::null());

/// The objects `MPI_F08_STATUS(ES)_IGNORE` point to (an `MPI_F08_status` is five ints).
static F08_STATUS_IGNORE_OBJ: [c_int; 5] = [0; 5];
static F08_STATUSES_IGNORE_OBJ: [c_int; 5] = [0; 5];

/// `MPI_F08_STATUS_IGNORE` (`extern MPI_F08_status *`): a unique address.
#[no_mangle]
pub static MPI_F08_STATUS_IGNORE: ConstPtr = ConstPtr(F08_STATUS_IGNORE_OBJ.as_ptr());
/// `MPI_F08_STATUSES_IGNORE` (`extern MPI_F08_status *`): a unique address.
#[no_mangle]
pub static MPI_F08_STATUSES_IGNORE: ConstPtr = ConstPtr(F08_STATUSES_IGNORE_OBJ.as_ptr());

// Fortran handles of the MPICH ABI are the C handle values (MPI_Fint == int).
macro_rules! c2f {
    ($($c2f:ident $c2fn:literal $f2c:ident $f2cn:literal;)*) => {$(
        /// Handle to Fortran integer (identity in the MPICH ABI).
        #[no_mangle]
        pub extern "C" fn $c2f(h: c_int) -> c_int { h }
        crate::ffi::mpi_alias!($c2f / $c2fn);
        /// Fortran integer to handle (identity in the MPICH ABI).
        #[no_mangle]
        pub extern "C" fn $f2c(h: c_int) -> c_int { h }
        crate::ffi::mpi_alias!($f2c / $f2cn);
    )*};
}

c2f! {
    PMPI_Comm_c2f "MPI_Comm_c2f" PMPI_Comm_f2c "MPI_Comm_f2c";
    PMPI_Errhandler_c2f "MPI_Errhandler_c2f" PMPI_Errhandler_f2c "MPI_Errhandler_f2c";
    PMPI_Group_c2f "MPI_Group_c2f" PMPI_Group_f2c "MPI_Group_f2c";
    PMPI_Info_c2f "MPI_Info_c2f" PMPI_Info_f2c "MPI_Info_f2c";
    PMPI_Message_c2f "MPI_Message_c2f" PMPI_Message_f2c "MPI_Message_f2c";
    PMPI_Op_c2f "MPI_Op_c2f" PMPI_Op_f2c "MPI_Op_f2c";
    PMPI_Request_c2f "MPI_Request_c2f" PMPI_Request_f2c "MPI_Request_f2c";
    PMPI_Type_c2f "MPI_Type_c2f" PMPI_Type_f2c "MPI_Type_f2c";
    PMPI_Win_c2f "MPI_Win_c2f" PMPI_Win_f2c "MPI_Win_f2c";
    PMPI_Session_c2f "MPI_Session_c2f" PMPI_Session_f2c "MPI_Session_f2c";
}

mpi_fn! {
    /// `MPI_Status_c2f`: the five status words.
    fn PMPI_Status_c2f / "MPI_Status_c2f" (c_status: *const MpiStatus, f_status: *mut c_int) {
        let s = inp(c_status, "c_status")?;
        slice_out(f_status, 5, "f_status")?.copy_from_slice(&status_words(&s));
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Status_f2c`.
    fn PMPI_Status_f2c / "MPI_Status_f2c" (f_status: *const c_int, c_status: *mut MpiStatus) {
        let f = crate::ffi::slice_in(f_status, 5, "f_status")?;
        out(c_status, status_of_words(f), "c_status")
    }
}

/// The five words of a C status (the Fortran and Fortran 2008 statuses have the same ones).
fn status_words(s: &MpiStatus) -> [c_int; 5] {
    [
        s.count_lo,
        s.count_hi_and_cancelled,
        s.source,
        s.tag,
        s.error,
    ]
}

/// The C status of five Fortran status words.
fn status_of_words(f: &[c_int]) -> MpiStatus {
    MpiStatus {
        count_lo: f[0],
        count_hi_and_cancelled: f[1],
        source: f[2],
        tag: f[3],
        error: f[4],
    }
}

mpi_fn! {
    /// `MPI_Status_c2f08`: `MPI_F08_status` holds the five status words.
    fn PMPI_Status_c2f08 / "MPI_Status_c2f08" (c_status: *const MpiStatus, f08_status: *mut c_int) {
        let s = inp(c_status, "c_status")?;
        slice_out(f08_status, 5, "f08_status")?.copy_from_slice(&status_words(&s));
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Status_f082c`.
    fn PMPI_Status_f082c / "MPI_Status_f082c" (f08_status: *const c_int, c_status: *mut MpiStatus) {
        let f = crate::ffi::slice_in(f08_status, 5, "f08_status")?;
        out(c_status, status_of_words(f), "c_status")
    }
}

mpi_fn! {
    /// `MPI_Status_f082f` (the same five words).
    fn PMPI_Status_f082f / "MPI_Status_f082f" (f08_status: *const c_int, f_status: *mut c_int) {
        let f = crate::ffi::slice_in(f08_status, 5, "f08_status")?;
        slice_out(f_status, 5, "f_status")?.copy_from_slice(f);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Status_f2f08` (the same five words).
    fn PMPI_Status_f2f08 / "MPI_Status_f2f08" (f_status: *const c_int, f08_status: *mut c_int) {
        let f = crate::ffi::slice_in(f_status, 5, "f_status")?;
        slice_out(f08_status, 5, "f08_status")?.copy_from_slice(f);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Get_address`.
    fn PMPI_Get_address / "MPI_Get_address" (location: *const c_void, address: *mut isize) {
        out(address, location as isize, "address")
    }
}

/// `MPI_Aint_add`.
#[no_mangle]
pub extern "C" fn PMPI_Aint_add(base: isize, disp: isize) -> isize {
    base.wrapping_add(disp)
}
crate::ffi::mpi_alias!(PMPI_Aint_add / "MPI_Aint_add");

/// `MPI_Aint_diff`.
#[no_mangle]
pub extern "C" fn PMPI_Aint_diff(a: isize, b: isize) -> isize {
    a.wrapping_sub(b)
}
crate::ffi::mpi_alias!(PMPI_Aint_diff / "MPI_Aint_diff");

mpi_fn! {
    /// `MPI_Alloc_mem`.
    fn PMPI_Alloc_mem / "MPI_Alloc_mem" (size: isize, _info: c_int, baseptr: *mut c_void) {
        if size < 0 {
            mpi_bail!(MPI_ERR_SIZE, "negative size {size}");
        }
        let p = crate::sys::malloc(size as usize);
        if p.is_null() {
            mpi_bail!(MPI_ERR_NO_MEM, "cannot allocate {size} bytes");
        }
        out(baseptr.cast::<*mut c_void>(), p, "baseptr")
    }
}

mpi_fn! {
    /// `MPI_Free_mem`.
    fn PMPI_Free_mem / "MPI_Free_mem" (base: *mut c_void) {
        // The transports' registrations of that memory go first (the ofi registration
        // cache), so memory allocated again at the same address is registered anew.
        if let Some(e) = oxmpi_engine::engine().filter(|_| !base.is_null()) {
            // SAFETY: `base` was returned by MPI_Alloc_mem (malloc) and is not freed yet.
            e.memory_freed(base.cast(), unsafe { crate::sys::malloc_usable_size(base) });
        }
        // SAFETY: `base` was returned by MPI_Alloc_mem (malloc) or is NULL.
        unsafe { crate::sys::free(base) };
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Dims_create`: balanced factorization, non-increasing.
    fn PMPI_Dims_create / "MPI_Dims_create" (nnodes: c_int, ndims: c_int, dims: *mut c_int) {
        let nd = check_count(ndims)?;
        if nnodes <= 0 {
            mpi_bail!(MPI_ERR_ARG, "nnodes must be positive, got {nnodes}");
        }
        let d = slice_out(dims, nd, "dims")?;
        let mut rest = nnodes;
        let mut free = 0;
        for &x in d.iter() {
            if x < 0 {
                mpi_bail!(MPI_ERR_DIMS, "negative dimension {x}");
            }
            if x > 0 {
                if rest % x != 0 {
                    mpi_bail!(MPI_ERR_DIMS, "nnodes {nnodes} is not divisible by the fixed dimensions");
                }
                rest /= x;
            } else {
                free += 1;
            }
        }
        if free == 0 {
            if rest != 1 {
                mpi_bail!(MPI_ERR_DIMS, "fixed dimensions do not multiply to {nnodes}");
            }
            return Ok(());
        }
        let fill = dims_split(rest, free);
        let mut it = fill.into_iter();
        for x in d.iter_mut() {
            if *x == 0 {
                *x = it.next().unwrap_or(1);
            }
        }
        Ok(())
    }
}

/// Split `n` into `k` factors as close to each other as possible (the smallest difference
/// between the largest and the smallest), in non-increasing order: 72 in 2-D is 9 x 8.
pub(crate) fn dims_split(n: c_int, k: usize) -> Vec<c_int> {
    // The divisors of n, largest first (every factor divides n).
    let mut divs = Vec::new();
    let mut d: c_int = 1;
    while d <= n / d {
        if n % d == 0 {
            divs.push(d);
            if d != n / d {
                divs.push(n / d);
            }
        }
        d += 1;
    }
    divs.sort_unstable_by(|a, b| b.cmp(a));
    let mut best = Vec::new();
    let mut cur = Vec::with_capacity(k);
    dims_search(&divs, n, k, n, &mut cur, &mut best);
    best
}

/// Depth-first search of [`dims_split`] over `divs` (the divisors of n, largest first):
/// `cur` holds the factors chosen so far (non-increasing, each at most `max`), `m` what is
/// left to split into `left` more factors; `best` the most balanced split found.
fn dims_search(
    divs: &[c_int],
    m: c_int,
    left: usize,
    max: c_int,
    cur: &mut Vec<c_int>,
    best: &mut Vec<c_int>,
) {
    let spread = |v: &[c_int]| v.first().copied().unwrap_or(1) - v.last().copied().unwrap_or(1);
    if left == 0 {
        if m == 1 && (best.is_empty() || spread(cur) < spread(best)) {
            best.clone_from(cur);
        }
        return;
    }
    for &f in divs.iter().filter(|&&f| f <= max && m % f == 0) {
        // f is the largest of the factors still to choose: f^left must reach m.
        if (f as f64).powi(left as i32) < m as f64 {
            break;
        }
        // Every later factor is at most f, so the spread is at least first - f.
        if !best.is_empty() && cur.first().copied().unwrap_or(f) - f >= spread(best) {
            break;
        }
        cur.push(f);
        dims_search(divs, m / f, left - 1, f, cur, best);
        cur.pop();
    }
}

// ---- info objects ----

impl crate::state::State {
    pub(crate) fn info(&self, h: c_int) -> MpiResult<&Info> {
        if h == MPI_INFO_ENV {
            return Ok(env_info());
        }
        match self.infos.get(h) {
            Some(i) => Ok(i),
            None => mpi_bail!(MPI_ERR_INFO, "invalid info handle {h:#x}"),
        }
    }
    fn info_mut(&mut self, h: c_int) -> MpiResult<&mut Info> {
        match self.infos.get_mut(h) {
            Some(i) => Ok(i),
            None => mpi_bail!(MPI_ERR_INFO, "invalid info handle {h:#x}"),
        }
    }
}

/// `MPI_INFO_ENV`: how the process was started (read-only).
fn env_info() -> &'static Info {
    static ENV: std::sync::OnceLock<Info> = std::sync::OnceLock::new();
    ENV.get_or_init(|| {
        let mut entries = Vec::new();
        let mut args = std::env::args();
        if let Some(cmd) = args.next() {
            entries.push(("command".to_string(), cmd));
        }
        let rest: Vec<String> = args.collect();
        if !rest.is_empty() {
            entries.push(("argv".to_string(), rest.join(" ")));
        }
        if let Ok(wd) = std::env::current_dir() {
            entries.push(("wdir".to_string(), wd.display().to_string()));
        }
        Info { entries }
    })
}

fn info_key(key: *const c_char) -> MpiResult<String> {
    let k = read_cstr(key, "key")?;
    if k.is_empty() || k.len() > MPI_MAX_INFO_KEY as usize {
        mpi_bail!(
            MPI_ERR_INFO_KEY,
            "info key empty or longer than MPI_MAX_INFO_KEY"
        );
    }
    Ok(k)
}

mpi_fn! {
    /// `MPI_Info_create`.
    fn PMPI_Info_create / "MPI_Info_create" (info: *mut c_int) {
        let h = lock().infos.insert(Info::default());
        out(info, h, "info")
    }
}

mpi_fn! {
    /// `MPI_Info_free`.
    fn PMPI_Info_free / "MPI_Info_free" (info: *mut c_int) {
        let h = inp(info, "info")?;
        if lock().infos.remove(h).is_none() {
            mpi_bail!(MPI_ERR_INFO, "invalid info handle {h:#x}");
        }
        out(info, MPI_INFO_NULL, "info")
    }
}

mpi_fn! {
    /// `MPI_Info_dup`.
    fn PMPI_Info_dup / "MPI_Info_dup" (info: c_int, newinfo: *mut c_int) {
        let mut st = lock();
        let i = st.info(info)?.clone();
        let h = st.infos.insert(i);
        drop(st);
        out(newinfo, h, "newinfo")
    }
}

mpi_fn! {
    /// `MPI_Info_set`.
    fn PMPI_Info_set / "MPI_Info_set" (info: c_int, key: *const c_char, value: *const c_char) {
        let k = info_key(key)?;
        let v = read_cstr(value, "value")?;
        if v.len() > MPI_MAX_INFO_VAL as usize {
            mpi_bail!(MPI_ERR_INFO_VALUE, "info value longer than MPI_MAX_INFO_VAL");
        }
        let mut st = lock();
        let i = st.info_mut(info)?;
        match i.entries.iter_mut().find(|(ek, _)| *ek == k) {
            Some(e) => e.1 = v,
            None => i.entries.push((k, v)),
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Info_delete`.
    fn PMPI_Info_delete / "MPI_Info_delete" (info: c_int, key: *const c_char) {
        let k = info_key(key)?;
        let mut st = lock();
        let i = st.info_mut(info)?;
        let before = i.entries.len();
        i.entries.retain(|(ek, _)| *ek != k);
        if i.entries.len() == before {
            mpi_bail!(MPI_ERR_INFO_NOKEY, "info key '{k}' not set");
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Info_get`.
    fn PMPI_Info_get / "MPI_Info_get" (info: c_int, key: *const c_char, valuelen: c_int, value: *mut c_char, flag: *mut c_int) {
        let k = info_key(key)?;
        let st = lock();
        let v = st.info(info)?.entries.iter().find(|(ek, _)| *ek == k).map(|e| e.1.clone());
        drop(st);
        match v {
            Some(v) => {
                copy_cstr(value, (valuelen.max(0) as usize) + 1, &v)?;
                out(flag, 1, "flag")
            }
            None => out(flag, 0, "flag"),
        }
    }
}

mpi_fn! {
    /// `MPI_Info_get_valuelen`.
    fn PMPI_Info_get_valuelen / "MPI_Info_get_valuelen" (info: c_int, key: *const c_char, valuelen: *mut c_int, flag: *mut c_int) {
        let k = info_key(key)?;
        let st = lock();
        let v = st.info(info)?.entries.iter().find(|(ek, _)| *ek == k).map(|e| e.1.len());
        drop(st);
        match v {
            Some(n) => {
                out(valuelen, n as c_int, "valuelen")?;
                out(flag, 1, "flag")
            }
            None => out(flag, 0, "flag"),
        }
    }
}

mpi_fn! {
    /// `MPI_Info_get_string` (MPI 4.0): `*buflen` in: room for the value and its NUL; out:
    /// the value's length plus one. A value longer than the room is truncated.
    fn PMPI_Info_get_string / "MPI_Info_get_string" (info: c_int, key: *const c_char, buflen: *mut c_int, value: *mut c_char, flag: *mut c_int) {
        let k = info_key(key)?;
        let room = inp(buflen, "buflen")?;
        if room < 0 {
            mpi_bail!(MPI_ERR_ARG, "negative buflen {room}");
        }
        let st = lock();
        let v = st.info(info)?.entries.iter().find(|(ek, _)| *ek == k).map(|e| e.1.clone());
        drop(st);
        let Some(v) = v else {
            return out(flag, 0, "flag");
        };
        if room > 0 {
            copy_cstr(value, room as usize, &v)?;
        }
        out(buflen, v.len() as c_int + 1, "buflen")?;
        out(flag, 1, "flag")
    }
}

mpi_fn! {
    /// `MPI_Info_create_env` (MPI 4.0): a new info with the keys of `MPI_INFO_ENV` (the
    /// arguments are not needed: the process knows its command line).
    fn PMPI_Info_create_env / "MPI_Info_create_env" (argc: c_int, argv: *mut *mut c_char, info: *mut c_int) {
        let _ = (argc, argv);
        let i = env_info().clone();
        let h = lock().infos.insert(i);
        out(info, h, "info")
    }
}

mpi_fn! {
    /// `MPI_Get_hw_resource_info` (MPI 4.1): a new info describing the hardware the
    /// process runs on (`mpi_hw_resource_type`: the cores it may run on).
    fn PMPI_Get_hw_resource_info / "MPI_Get_hw_resource_info" (hw_info: *mut c_int) {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let i = Info {
            entries: vec![
                ("mpi_hw_resource_type".to_string(), "Core".to_string()),
                ("mpi_hw_resource_count".to_string(), cores.to_string()),
            ],
        };
        let h = lock().infos.insert(i);
        out(hw_info, h, "hw_info")
    }
}

mpi_fn! {
    /// `MPI_Info_get_nkeys`.
    fn PMPI_Info_get_nkeys / "MPI_Info_get_nkeys" (info: c_int, nkeys: *mut c_int) {
        let n = lock().info(info)?.entries.len();
        out(nkeys, n as c_int, "nkeys")
    }
}

mpi_fn! {
    /// `MPI_Info_get_nthkey`.
    fn PMPI_Info_get_nthkey / "MPI_Info_get_nthkey" (info: c_int, n: c_int, key: *mut c_char) {
        let st = lock();
        let i = st.info(info)?;
        let Some((k, _)) = usize::try_from(n).ok().and_then(|n| i.entries.get(n)) else {
            mpi_bail!(MPI_ERR_ARG, "info key index {n} out of range ({} keys)", i.entries.len());
        };
        let k = k.clone();
        drop(st);
        copy_cstr(key, MPI_MAX_INFO_KEY as usize + 1, &k).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_are_balanced_and_non_increasing() {
        assert_eq!(dims_split(12, 2), vec![4, 3]);
        assert_eq!(dims_split(16, 2), vec![4, 4]);
        assert_eq!(dims_split(7, 3), vec![7, 1, 1]);
        assert_eq!(dims_split(24, 3), vec![4, 3, 2]);
        assert_eq!(dims_split(72, 2), vec![9, 8]);
        assert_eq!(dims_split(72, 3), vec![6, 4, 3]);
        assert_eq!(dims_split(1, 2), vec![1, 1]);
        assert_eq!(dims_split(2147483647, 2), vec![2147483647, 1]);
        let mut d = [0, 3, 0];
        // SAFETY: d has 3 ints.
        let rc = unsafe { PMPI_Dims_create(24, 3, d.as_mut_ptr()) };
        assert_eq!(rc, MPI_SUCCESS);
        assert_eq!(d, [4, 3, 2]);
    }

    #[test]
    fn data_objects_have_distinct_addresses() {
        assert_ne!(MPI_UNWEIGHTED.0, MPI_WEIGHTS_EMPTY.0);
        assert!(!MPI_UNWEIGHTED.0.is_null());
    }
}
