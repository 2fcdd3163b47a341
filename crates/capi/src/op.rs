//! Reduction operations: the predefined ops on the predefined types, user ops,
//! `MPI_Reduce_local`.

use crate::consts::*;
use crate::ffi::{check_count, inp, out, MpiResult};
use crate::objects::{IntUserFn, LargeUserFn, UserFn};
use crate::state::{lock, UserOp};
use oxmpi_coll::op::{ElemType, OpKind as Kernel};
use std::ffi::{c_int, c_void};

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

/// The reduction-kernel operation of a predefined op handle (`None`: not predefined).
pub(crate) fn builtin_op(op: c_int) -> Option<Kernel> {
    let i = op.wrapping_sub(MPI_MAX);
    Kernel::ALL.get(usize::try_from(i).ok()?).copied()
}

/// How a predefined reduction reads the predefined datatype `dt` (`None`: no predefined
/// reduction is defined on it).
pub(crate) fn elem_type(dt: c_int) -> Option<ElemType> {
    Some(match dt {
        MPI_CHAR | MPI_SIGNED_CHAR | MPI_INT8_T | MPI_INTEGER1 => ElemType::I8,
        MPI_UNSIGNED_CHAR | MPI_BYTE | MPI_UINT8_T | MPI_C_BOOL | MPI_CXX_BOOL => ElemType::U8,
        MPI_SHORT | MPI_INT16_T | MPI_INTEGER2 => ElemType::I16,
        MPI_UNSIGNED_SHORT | MPI_UINT16_T => ElemType::U16,
        MPI_INT | MPI_INT32_T | MPI_INTEGER | MPI_INTEGER4 | MPI_LOGICAL | MPI_WCHAR => {
            ElemType::I32
        }
        MPI_UNSIGNED | MPI_UINT32_T => ElemType::U32,
        MPI_LONG | MPI_LONG_LONG | MPI_INT64_T | MPI_INTEGER8 | MPI_AINT | MPI_OFFSET
        | MPI_COUNT => ElemType::I64,
        MPI_UNSIGNED_LONG | MPI_UNSIGNED_LONG_LONG | MPI_UINT64_T => ElemType::U64,
        MPI_FLOAT | MPI_REAL | MPI_REAL4 => ElemType::F32,
        MPI_DOUBLE | MPI_DOUBLE_PRECISION | MPI_REAL8 => ElemType::F64,
        MPI_2INT => ElemType::TwoInt,
        MPI_FLOAT_INT => ElemType::FloatInt,
        MPI_DOUBLE_INT => ElemType::DoubleInt,
        MPI_LONG_DOUBLE_INT => ElemType::LongDoubleInt,
        MPI_LONG_INT => ElemType::LongInt,
        MPI_SHORT_INT => ElemType::ShortInt,
        MPI_C_FLOAT_COMPLEX | MPI_CXX_FLOAT_COMPLEX | MPI_COMPLEX | MPI_COMPLEX8 => {
            ElemType::ComplexF32
        }
        MPI_C_DOUBLE_COMPLEX | MPI_CXX_DOUBLE_COMPLEX | MPI_DOUBLE_COMPLEX | MPI_COMPLEX16 => {
            ElemType::ComplexF64
        }
        MPI_LONG_DOUBLE => ElemType::LongDouble,
        MPI_C_LONG_DOUBLE_COMPLEX | MPI_CXX_LONG_DOUBLE_COMPLEX => ElemType::ComplexLongDouble,
        _ => return None,
    })
}

/// Apply a predefined op elementwise: `inout[i] = in[i] op inout[i]`. Returns false if the
/// (op, type) pair is not supported. The kernels are `oxmpi_coll::op`'s.
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
    match (builtin_op(op), elem_type(dt)) {
        // SAFETY: forwarded caller contract (n elements of dt at a and b).
        (Some(o), Some(t)) => unsafe { oxmpi_coll::op::apply(o, t, a, b, n) },
        _ => false,
    }
}

/// Whether MPI defines the predefined operation `o` on the element type `t`, as
/// [`apply_builtin`] on one zero item answers, remembered per (operation, element type)
/// pair: the collectives check the pair at every call, before communicating, and the
/// trial reduction cost about 60 instructions per call (np=2, small `MPI_Allreduce`); the
/// answer never changes.
pub(crate) fn kernel_defined(o: Kernel, t: ElemType) -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    // 0: not known yet, 1: defined, 2: not defined.
    #[allow(clippy::declare_interior_mutable_const)] // only copied into the table below
    const UNKNOWN: AtomicU8 = AtomicU8::new(0);
    #[allow(clippy::declare_interior_mutable_const)]
    const ROW: [AtomicU8; ElemType::ALL.len()] = [UNKNOWN; ElemType::ALL.len()];
    static DEFINED: [[AtomicU8; ElemType::ALL.len()]; Kernel::ALL.len()] = [ROW; Kernel::ALL.len()];
    let slot = &DEFINED[o as usize][t as usize];
    match slot.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => {
            // One zero item of every element type (the largest is 32 bytes), 16-aligned.
            let mut x = [0u128; 2];
            let y = [0u128; 2];
            // SAFETY: both buffers hold one zero item of the type, aligned for it.
            let ok =
                unsafe { oxmpi_coll::op::apply(o, t, y.as_ptr().cast(), x.as_mut_ptr().cast(), 1) };
            slot.store(if ok { 1 } else { 2 }, Ordering::Relaxed);
            ok
        }
    }
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
            // SAFETY: calling the user's function with the buffers the caller provides; no
            // lock is held.
            unsafe { f.call(inbuf.cast_mut(), inoutbuf, count, datatype, dt.extent()) };
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

/// The new operation of `MPI_Op_create(_c)`.
fn op_create(func: Option<UserFn>, commute: c_int, op: *mut c_int) -> MpiResult {
    let Some(func) = func else {
        mpi_bail!(MPI_ERR_ARG, "NULL user function")
    };
    let h = lock().ops.insert(UserOp {
        func,
        commute: commute != 0,
    });
    out(op, h, "op")
}

mpi_fn! {
    /// `MPI_Op_create`.
    fn PMPI_Op_create / "MPI_Op_create" (user_fn: Option<IntUserFn>, commute: c_int, op: *mut c_int) {
        op_create(user_fn.map(UserFn::Int), commute, op)
    }
}

mpi_fn! {
    /// `MPI_Op_create_c`: the user function takes an `MPI_Count` length.
    fn PMPI_Op_create_c / "MPI_Op_create_c" (user_fn: Option<LargeUserFn>, commute: c_int, op: *mut c_int) {
        op_create(user_fn.map(UserFn::Large), commute, op)
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

mpi_fn_c! {
    /// `MPI_Reduce_local`.
    fn PMPI_Reduce_local / "MPI_Reduce_local", PMPI_Reduce_local_c / "MPI_Reduce_local_c" (inbuf: *const c_void, inoutbuf: *mut c_void, count: Count, datatype: c_int, op: c_int) {
        let n = check_count(count)?;
        // SAFETY: MPI contract: both buffers hold `count` items of `datatype`.
        unsafe { reduce_local(inbuf, inoutbuf, n, datatype, op) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_map_onto_the_kernel_descriptors() {
        assert_eq!(builtin_op(MPI_MAX), Some(Kernel::Max));
        assert_eq!(builtin_op(MPI_LXOR), Some(Kernel::Lxor));
        assert_eq!(builtin_op(MPI_BXOR), Some(Kernel::Bxor));
        assert_eq!(builtin_op(MPI_MAXLOC), Some(Kernel::MaxLoc));
        assert_eq!(builtin_op(MPI_NO_OP), Some(Kernel::NoOp));
        assert_eq!(builtin_op(MPI_OP_NULL), None);
        assert_eq!(builtin_op(MPI_NO_OP + 1), None);
        assert_eq!(elem_type(MPI_LOGICAL), Some(ElemType::I32));
        assert_eq!(elem_type(MPI_COUNT), Some(ElemType::I64));
        assert_eq!(elem_type(MPI_COMPLEX16), Some(ElemType::ComplexF64));
        assert_eq!(elem_type(MPI_SHORT_INT), Some(ElemType::ShortInt));
        assert_eq!(elem_type(MPI_DATATYPE_NULL), None);
        for (dt, ty) in [
            (MPI_INT, ElemType::I32),
            (MPI_DOUBLE_INT, ElemType::DoubleInt),
        ] {
            assert_eq!(
                lock().dtype(dt).expect("predefined").extent(),
                ty.size() as isize
            );
        }
    }

    /// `apply_builtin` on arrays of the handle's element layout `T`.
    fn apply_on<T: Copy>(op: c_int, dt: c_int, a: &[T], b: &mut [T]) -> bool {
        assert_eq!(a.len(), b.len());
        // SAFETY: both arrays hold `a.len()` elements of `dt`'s layout (the callers pair
        // each handle with its Rust type), aligned for it.
        unsafe { apply_builtin(op, dt, a.as_ptr().cast(), b.as_mut_ptr().cast(), a.len()) }
    }

    #[test]
    fn builtin_sum_max_and_minloc() {
        let a = [1i32, 5, -3];
        let mut b = [10i32, 2, -4];
        assert!(apply_on(MPI_SUM, MPI_INT, &a, &mut b));
        assert_eq!(b, [11, 7, -7]);
        assert!(apply_on(MPI_MAX, MPI_INT, &a, &mut b));
        assert_eq!(b, [11, 7, -3]);
        let x = [2.5f64, 1.0];
        let mut y = [1.0f64, 4.0];
        assert!(apply_on(MPI_PROD, MPI_DOUBLE, &x, &mut y));
        assert_eq!(y, [2.5, 4.0]);
        // Bitwise ops are not defined on floating point.
        assert!(!apply_on(MPI_BAND, MPI_DOUBLE, &x, &mut y));
        let mut q = [[3i32, 2]];
        assert!(apply_on(MPI_MINLOC, MPI_2INT, &[[3i32, 7]], &mut q));
        assert_eq!(q, [[3, 2]]);
        assert!(apply_on(MPI_MINLOC, MPI_2INT, &[[1i32, 7]], &mut q));
        assert_eq!(q, [[1, 7]]);
    }
}
