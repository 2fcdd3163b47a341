//! Vectorisable loops for the predefined reductions on the integer and floating-point
//! types of 1 to 8 bytes, every operation MPI defines on them ([`super::apply`] decides the
//! operation per element, which keeps the compiler from vectorising: `MPI_CHAR` sums ran a
//! byte at a time through it). Each computes exactly what
//! [`super::apply`] computes for the pair (same expression per element), so results are
//! bit-identical; on x86-64 an AVX2 build of the loops is chosen at run time when the CPU
//! has it.

use super::{ElemType, OpKind};

#[inline(always)]
fn zip<T: Copy>(a: &[T], b: &mut [T], f: impl Fn(T, T) -> T) {
    for (x, y) in a.iter().zip(b.iter_mut()) {
        *y = f(*x, *y);
    }
}

macro_rules! int_ops {
    ($op:expr, $a:expr, $b:expr) => {
        match $op {
            OpKind::Sum => zip($a, $b, |x, y| y.wrapping_add(x)),
            OpKind::Prod => zip($a, $b, |x, y| y.wrapping_mul(x)),
            OpKind::Max => zip($a, $b, |x, y| y.max(x)),
            OpKind::Min => zip($a, $b, |x, y| y.min(x)),
            OpKind::Band => zip($a, $b, |x, y| y & x),
            OpKind::Bor => zip($a, $b, |x, y| y | x),
            OpKind::Bxor => zip($a, $b, |x, y| y ^ x),
            // `(bool as T)` is not written generically: a select of 1 and 0 vectorises.
            OpKind::Land => zip($a, $b, |x, y| if (y != 0) & (x != 0) { 1 } else { 0 }),
            OpKind::Lor => zip($a, $b, |x, y| if (y != 0) | (x != 0) { 1 } else { 0 }),
            OpKind::Lxor => zip($a, $b, |x, y| if (y != 0) ^ (x != 0) { 1 } else { 0 }),
            OpKind::Replace => $b.copy_from_slice($a),
            OpKind::NoOp => {}
            OpKind::MinLoc | OpKind::MaxLoc => return false,
        }
    };
}

macro_rules! float_ops {
    ($op:expr, $a:expr, $b:expr) => {
        match $op {
            OpKind::Sum => zip($a, $b, |x, y| y + x),
            OpKind::Prod => zip($a, $b, |x, y| y * x),
            OpKind::Max => zip($a, $b, |x, y| y.max(x)),
            OpKind::Min => zip($a, $b, |x, y| y.min(x)),
            OpKind::Replace => $b.copy_from_slice($a),
            OpKind::NoOp => {}
            _ => return false,
        }
    };
}

/// # Safety
/// As [`apply`].
#[inline(always)]
unsafe fn run(op: OpKind, ty: ElemType, a: *const u8, b: *mut u8, n: usize) -> bool {
    macro_rules! typed {
        ($t:ty, $ops:ident) => {{
            // SAFETY: caller contract: `n` aligned values of the type at both pointers,
            // not overlapping.
            let (x, y) = unsafe {
                (
                    std::slice::from_raw_parts(a.cast::<$t>(), n),
                    std::slice::from_raw_parts_mut(b.cast::<$t>(), n),
                )
            };
            $ops!(op, x, y)
        }};
    }
    match ty {
        ElemType::F32 => typed!(f32, float_ops),
        ElemType::F64 => typed!(f64, float_ops),
        ElemType::I8 => typed!(i8, int_ops),
        ElemType::U8 => typed!(u8, int_ops),
        ElemType::I16 => typed!(i16, int_ops),
        ElemType::U16 => typed!(u16, int_ops),
        ElemType::I32 => typed!(i32, int_ops),
        ElemType::U32 => typed!(u32, int_ops),
        ElemType::I64 => typed!(i64, int_ops),
        ElemType::U64 => typed!(u64, int_ops),
        _ => return false,
    }
    true
}

/// # Safety
/// As [`apply`]; the CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn run_avx2(op: OpKind, ty: ElemType, a: *const u8, b: *mut u8, n: usize) -> bool {
    // SAFETY: forwarded caller contract.
    unsafe { run(op, ty, a, b, n) }
}

/// `b[i] = a[i] op b[i]` for `n` items of the element type `ty`, if the pair is one
/// of the common ones handled here (false: not handled, nothing done).
///
/// # Safety
/// `a` and `b` hold `n` values of `ty`, aligned for it, and do not overlap.
#[inline]
pub unsafe fn apply(op: OpKind, ty: ElemType, a: *const u8, b: *mut u8, n: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if n >= 16 && std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: forwarded caller contract; AVX2 is present.
            return unsafe { run_avx2(op, ty, a, b, n) };
        }
    }
    // SAFETY: forwarded caller contract.
    unsafe { run(op, ty, a, b, n) }
}
