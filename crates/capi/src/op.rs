//! Reduction operations: the predefined ops on the predefined types, user ops,
//! `MPI_Reduce_local`.

use crate::consts::*;
use crate::ffi::{check_count, inp, out, MpiResult};
use crate::state::{lock, UserOp};
use std::ffi::{c_int, c_void};

/// A user reduction function (`MPI_User_function`).
pub(crate) type UserFn = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_int, *mut c_int);

/// How a reduction is carried out.
#[derive(Clone, Copy)]
pub(crate) enum OpKind {
    Builtin(c_int),
    User(UserFn, bool),
}

/// Resolve an op handle.
pub(crate) fn op_kind(op: c_int) -> MpiResult<OpKind> {
    if (MPI_MAX..=MPI_NO_OP).contains(&op) {
        return Ok(OpKind::Builtin(op));
    }
    match lock().ops.get(op) {
        Some(u) => Ok(OpKind::User(u.func, u.commute)),
        None if op == MPI_OP_NULL => mpi_bail!(MPI_ERR_OP, "MPI_OP_NULL passed"),
        None => mpi_bail!(MPI_ERR_OP, "invalid operation handle {op:#x}"),
    }
}

macro_rules! arith {
    ($op:expr, $t:ty, $a:expr, $b:expr, $n:expr, int) => {{
        // SAFETY: the caller guarantees `n` values of this type at both pointers.
        let (a, b) = unsafe {
            (
                std::slice::from_raw_parts($a as *const $t, $n),
                std::slice::from_raw_parts_mut($b as *mut $t, $n),
            )
        };
        for (x, y) in a.iter().zip(b.iter_mut()) {
            *y = match $op {
                MPI_SUM => y.wrapping_add(*x),
                MPI_PROD => y.wrapping_mul(*x),
                MPI_MAX => (*y).max(*x),
                MPI_MIN => (*y).min(*x),
                MPI_LAND => ((*y != 0) && (*x != 0)) as $t,
                MPI_LOR => ((*y != 0) || (*x != 0)) as $t,
                MPI_LXOR => ((*y != 0) != (*x != 0)) as $t,
                MPI_BAND => *y & *x,
                MPI_BOR => *y | *x,
                MPI_BXOR => *y ^ *x,
                MPI_REPLACE => *x,
                MPI_NO_OP => *y,
                _ => return false,
            };
        }
        true
    }};
    ($op:expr, $t:ty, $a:expr, $b:expr, $n:expr, float) => {{
        // SAFETY: the caller guarantees `n` values of this type at both pointers.
        let (a, b) = unsafe {
            (
                std::slice::from_raw_parts($a as *const $t, $n),
                std::slice::from_raw_parts_mut($b as *mut $t, $n),
            )
        };
        for (x, y) in a.iter().zip(b.iter_mut()) {
            *y = match $op {
                MPI_SUM => *y + *x,
                MPI_PROD => *y * *x,
                MPI_MAX => y.max(*x),
                MPI_MIN => y.min(*x),
                MPI_REPLACE => *x,
                MPI_NO_OP => *y,
                _ => return false,
            };
        }
        true
    }};
}

/// Apply a predefined op elementwise: `inout[i] = in[i] op inout[i]`. Returns false if the
/// (op, type) pair is not supported.
///
/// # Safety
/// Both pointers must hold `n` elements of the predefined type `dt`.
pub(crate) unsafe fn apply_builtin(
    op: c_int,
    dt: c_int,
    a: *const u8,
    b: *mut u8,
    n: usize,
) -> bool {
    match dt {
        MPI_CHAR | MPI_SIGNED_CHAR | MPI_INT8_T | MPI_INTEGER1 => arith!(op, i8, a, b, n, int),
        MPI_UNSIGNED_CHAR | MPI_BYTE | MPI_UINT8_T | MPI_C_BOOL | MPI_CXX_BOOL => {
            arith!(op, u8, a, b, n, int)
        }
        MPI_SHORT | MPI_INT16_T | MPI_INTEGER2 => arith!(op, i16, a, b, n, int),
        MPI_UNSIGNED_SHORT | MPI_UINT16_T => arith!(op, u16, a, b, n, int),
        MPI_INT | MPI_INT32_T | MPI_INTEGER | MPI_INTEGER4 | MPI_LOGICAL | MPI_WCHAR => {
            arith!(op, i32, a, b, n, int)
        }
        MPI_UNSIGNED | MPI_UINT32_T => arith!(op, u32, a, b, n, int),
        MPI_LONG | MPI_LONG_LONG | MPI_INT64_T | MPI_INTEGER8 | MPI_AINT | MPI_OFFSET
        | MPI_COUNT => arith!(op, i64, a, b, n, int),
        MPI_UNSIGNED_LONG | MPI_UNSIGNED_LONG_LONG | MPI_UINT64_T => arith!(op, u64, a, b, n, int),
        MPI_FLOAT | MPI_REAL | MPI_REAL4 => arith!(op, f32, a, b, n, float),
        MPI_DOUBLE | MPI_DOUBLE_PRECISION | MPI_REAL8 => arith!(op, f64, a, b, n, float),
        MPI_2INT if op == MPI_MINLOC || op == MPI_MAXLOC => {
            // SAFETY: forwarded caller contract (n elements of dt at a and b).
            unsafe { loc::<i32>(op, a, b, n, 8, 4) }
        }
        MPI_FLOAT_INT if op == MPI_MINLOC || op == MPI_MAXLOC => {
            // SAFETY: forwarded caller contract (n elements of dt at a and b).
            unsafe { loc::<f32>(op, a, b, n, 8, 4) }
        }
        MPI_DOUBLE_INT if op == MPI_MINLOC || op == MPI_MAXLOC => {
            // SAFETY: forwarded caller contract (n elements of dt at a and b).
            unsafe { loc::<f64>(op, a, b, n, 16, 8) }
        }
        MPI_LONG_INT if op == MPI_MINLOC || op == MPI_MAXLOC => {
            // SAFETY: forwarded caller contract (n elements of dt at a and b).
            unsafe { loc::<i64>(op, a, b, n, 16, 8) }
        }
        MPI_SHORT_INT if op == MPI_MINLOC || op == MPI_MAXLOC => {
            // SAFETY: forwarded caller contract (n elements of dt at a and b).
            unsafe { loc::<i16>(op, a, b, n, 8, 4) }
        }
        // Complex and long double (SAFETY: forwarded caller contract).
        _ => unsafe { crate::op_ext::apply(op, dt, a, b, n) },
    }
}

/// MINLOC/MAXLOC over `{value, int}` pairs of `stride` bytes, the int at `ioff`.
///
/// # Safety
/// Both pointers must hold `n` pairs.
unsafe fn loc<T: PartialOrd + Copy>(
    op: c_int,
    a: *const u8,
    b: *mut u8,
    n: usize,
    stride: usize,
    ioff: usize,
) -> bool {
    for i in 0..n {
        // SAFETY: element i of both arrays is in bounds (caller contract).
        unsafe {
            let pa = a.add(i * stride);
            let pb = b.add(i * stride);
            let va = pa.cast::<T>().read_unaligned();
            let vb = pb.cast::<T>().read_unaligned();
            let ia = pa.add(ioff).cast::<i32>().read_unaligned();
            let ib = pb.add(ioff).cast::<i32>().read_unaligned();
            let better = if op == MPI_MINLOC { va < vb } else { va > vb };
            if better || (va == vb && ia < ib) {
                pb.cast::<T>().write_unaligned(va);
                pb.add(ioff).cast::<i32>().write_unaligned(ia);
            }
        }
    }
    true
}

/// Reduce `count` items of `datatype` from `inbuf` into `inoutbuf` with `op`.
///
/// # Safety
/// Both buffers must hold `count` items of `datatype`.
pub(crate) unsafe fn reduce_local(
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: usize,
    datatype: c_int,
    op: c_int,
) -> MpiResult {
    let kind = op_kind(op)?;
    let dt = lock().dtype_committed(datatype)?;
    match kind {
        OpKind::User(f, _) => {
            let mut c = count as c_int;
            let mut d = datatype;
            // SAFETY: calling the user's MPI_User_function with the buffers the caller
            // provides; no lock is held.
            unsafe { f(inbuf.cast_mut(), inoutbuf, &mut c, &mut d) };
            Ok(())
        }
        OpKind::Builtin(o) => {
            let Some(basic) = dt.basic else {
                mpi_bail!(
                    MPI_ERR_OP,
                    "predefined operation on a datatype mixing basic types"
                );
            };
            let n = if dt.predefined {
                count
            } else {
                if !dt.is_contiguous() {
                    mpi_bail!(
                        MPI_ERR_UNSUPPORTED_OPERATION,
                        "predefined reduction on a non-contiguous datatype"
                    );
                }
                let bsz = lock().dtype(basic)?.size.max(1);
                count * dt.size / bsz
            };
            // SAFETY: the caller guarantees both buffers hold the data.
            let ok = unsafe { apply_builtin(o, basic, inbuf.cast(), inoutbuf.cast(), n) };
            if !ok {
                mpi_bail!(
                    MPI_ERR_OP,
                    "operation {o:#x} is not defined for datatype {basic:#x}"
                );
            }
            Ok(())
        }
    }
}

mpi_fn! {
    /// `MPI_Op_create`.
    fn PMPI_Op_create / "MPI_Op_create" (user_fn: Option<UserFn>, commute: c_int, op: *mut c_int) {
        let Some(func) = user_fn else { mpi_bail!(MPI_ERR_ARG, "NULL user function") };
        let h = lock().ops.insert(UserOp { func, commute: commute != 0 });
        out(op, h, "op")
    }
}

mpi_fn! {
    /// `MPI_Op_free`.
    fn PMPI_Op_free / "MPI_Op_free" (op: *mut c_int) {
        let h = inp(op, "op")?;
        if lock().ops.remove(h).is_none() {
            mpi_bail!(MPI_ERR_OP, "invalid or predefined operation {h:#x}");
        }
        out(op, MPI_OP_NULL, "op")
    }
}

mpi_fn! {
    /// `MPI_Op_commutative`.
    fn PMPI_Op_commutative / "MPI_Op_commutative" (op: c_int, commute: *mut c_int) {
        let c = match op_kind(op)? {
            OpKind::Builtin(_) => true,
            OpKind::User(_, c) => c,
        };
        out(commute, c as c_int, "commute")
    }
}

mpi_fn! {
    /// `MPI_Reduce_local`.
    fn PMPI_Reduce_local / "MPI_Reduce_local" (inbuf: *const c_void, inoutbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int) {
        let n = check_count(count)?;
        // SAFETY: MPI contract: both buffers hold `count` items of `datatype`.
        unsafe { reduce_local(inbuf, inoutbuf, n, datatype, op) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_sum_max_and_minloc() {
        let a = [1i32, 5, -3];
        let mut b = [10i32, 2, -4];
        // SAFETY: 3 ints each.
        assert!(unsafe {
            apply_builtin(
                MPI_SUM,
                MPI_INT,
                a.as_ptr().cast(),
                b.as_mut_ptr().cast(),
                3,
            )
        });
        assert_eq!(b, [11, 7, -7]);
        // SAFETY: 3 ints each.
        assert!(unsafe {
            apply_builtin(
                MPI_MAX,
                MPI_INT,
                a.as_ptr().cast(),
                b.as_mut_ptr().cast(),
                3,
            )
        });
        assert_eq!(b, [11, 7, -3]);
        let x = [2.5f64, 1.0];
        let mut y = [1.0f64, 4.0];
        // SAFETY: 2 doubles each.
        assert!(unsafe {
            apply_builtin(
                MPI_PROD,
                MPI_DOUBLE,
                x.as_ptr().cast(),
                y.as_mut_ptr().cast(),
                2,
            )
        });
        assert_eq!(y, [2.5, 4.0]);
        // Bitwise ops are not defined on floating point.
        // SAFETY: 2 doubles each.
        assert!(!unsafe {
            apply_builtin(
                MPI_BAND,
                MPI_DOUBLE,
                x.as_ptr().cast(),
                y.as_mut_ptr().cast(),
                2,
            )
        });
        let p = [3i32, 7];
        let mut q = [3i32, 2];
        // SAFETY: one 2INT pair each.
        assert!(unsafe {
            apply_builtin(
                MPI_MINLOC,
                MPI_2INT,
                p.as_ptr().cast(),
                q.as_mut_ptr().cast(),
                1,
            )
        });
        assert_eq!(q, [3, 2]);
        let p = [1i32, 7];
        // SAFETY: one 2INT pair each.
        assert!(unsafe {
            apply_builtin(
                MPI_MINLOC,
                MPI_2INT,
                p.as_ptr().cast(),
                q.as_mut_ptr().cast(),
                1,
            )
        });
        assert_eq!(q, [1, 7]);
    }
}
