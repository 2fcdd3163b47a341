//! Vectorisable loops for the predefined reductions on the integer and floating-point
//! types of 1 to 8 bytes, every operation MPI defines on them, and MINLOC/MAXLOC on the
//! value-index pairs (branch-free) ([`super::apply`] decides the
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

/// MINLOC (`MIN`) or MAXLOC over value-index pairs seen as `W` little-endian 64-bit
/// words each (`MPI_2INT`, `MPI_FLOAT_INT`, `MPI_SHORT_INT`: one word, the value in the
/// low bytes and the int in the high half; `MPI_DOUBLE_INT`, `MPI_LONG_INT`: the value
/// word, then the int in the low half of the second). `v` and `i` read a pair's value and
/// index. The better value wins, a tie goes to the lower index (the rule of
/// [`super::apply`]'s pairs), and the winner is copied whole with a mask blend instead of
/// fields under a branch: nothing to mispredict, and the loop vectorises. A pair's padding
/// bytes travel with it (MPI gives them no meaning).
#[inline(always)]
fn loc<const W: usize, T: PartialOrd, const MIN: bool>(
    a: &[[u64; W]],
    b: &mut [[u64; W]],
    v: impl Fn(&[u64; W]) -> T,
    i: impl Fn(&[u64; W]) -> i32,
) {
    for (x, y) in a.iter().zip(b.iter_mut()) {
        let (vx, vy) = (v(x), v(y));
        let better = if MIN { vx < vy } else { vx > vy };
        let take = better | ((vx == vy) & (i(x) < i(y)));
        // all ones if x wins: a blend, where an `if` on two words becomes a branch
        let m = u64::from(take).wrapping_neg();
        for k in 0..W {
            y[k] = (x[k] & m) | (y[k] & !m);
        }
    }
}

/// MINLOC (`MIN`) or MAXLOC over value-index pairs in their packed form: the type map's
/// bytes back to back, the value's bits `B` then the int, `size_of::<B>() + 4` bytes a
/// pair and no alignment (`MPI_SHORT_INT` 6 bytes, `MPI_DOUBLE_INT` and `MPI_LONG_INT` 12:
/// the form the collectives move a type with a gap in). `v` reads a value from its bits.
/// The rule of [`loc`]; the winner's value and int are selected (no branch) and both
/// written back.
///
/// # Safety
/// `a` and `b` hold `n` packed pairs each and do not overlap.
#[inline(always)]
unsafe fn loc_packed<B: Copy, T: PartialOrd, const MIN: bool>(
    a: *const u8,
    b: *mut u8,
    n: usize,
    v: impl Fn(B) -> T,
) {
    let vs = std::mem::size_of::<B>();
    let s = vs + 4;
    for k in 0..n {
        // SAFETY: pair k of both buffers is in bounds (caller contract); the reads and
        // writes are unaligned ones of plain bits.
        unsafe {
            let (pa, pb) = (a.add(k * s), b.add(k * s));
            let (xa, xb) = (
                pa.cast::<B>().read_unaligned(),
                pb.cast::<B>().read_unaligned(),
            );
            let ia = pa.add(vs).cast::<i32>().read_unaligned();
            let ib = pb.add(vs).cast::<i32>().read_unaligned();
            let (va, vb) = (v(xa), v(xb));
            let better = if MIN { va < vb } else { va > vb };
            let take = better | ((va == vb) & (ia < ib));
            let (w, i) = if take { (xa, ia) } else { (xb, ib) };
            pb.cast::<B>().write_unaligned(w);
            pb.add(vs).cast::<i32>().write_unaligned(i);
        }
    }
}

/// MINLOC/MAXLOC on `n` packed pairs of `ty` (see [`loc_packed`]) for the pairs with a gap
/// in their layout (`MPI_SHORT_INT`, `MPI_DOUBLE_INT`, `MPI_LONG_INT`); false (nothing
/// done) for any other (op, type).
///
/// # Safety
/// `a` and `b` hold `n` packed pairs of `ty` each (any alignment) and do not overlap.
pub(super) unsafe fn apply_packed(
    op: OpKind,
    ty: ElemType,
    a: *const u8,
    b: *mut u8,
    n: usize,
) -> bool {
    macro_rules! packed {
        ($b:ty, $v:expr) => {
            // SAFETY: forwarded caller contract (pairs of `$b` bits and an int).
            unsafe {
                match op {
                    OpKind::MinLoc => loc_packed::<$b, _, true>(a, b, n, $v),
                    OpKind::MaxLoc => loc_packed::<$b, _, false>(a, b, n, $v),
                    _ => return false,
                }
            }
        };
    }
    match ty {
        ElemType::ShortInt => packed!(u16, |x: u16| x as i16),
        ElemType::DoubleInt => packed!(u64, f64::from_bits),
        ElemType::LongInt => packed!(u64, |x: u64| x as i64),
        _ => return false,
    }
    true
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
    macro_rules! pairs {
        ($w:literal, $v:expr, $i:expr) => {{
            // SAFETY: caller contract: `n` pairs of `$w` words at both pointers, aligned
            // for u64 (checked in `apply`), not overlapping.
            let (x, y) = unsafe {
                (
                    std::slice::from_raw_parts(a.cast::<[u64; $w]>(), n),
                    std::slice::from_raw_parts_mut(b.cast::<[u64; $w]>(), n),
                )
            };
            match op {
                OpKind::MinLoc => loc::<$w, _, true>(x, y, $v, $i),
                OpKind::MaxLoc => loc::<$w, _, false>(x, y, $v, $i),
                _ => return false,
            }
        }};
    }
    // the int of a one-word pair (high half) and of a two-word pair (low half of word 1)
    let hi = |p: &[u64; 1]| (p[0] >> 32) as u32 as i32;
    let w1 = |p: &[u64; 2]| p[1] as u32 as i32;
    match ty {
        ElemType::TwoInt if LE => pairs!(1, |p: &[u64; 1]| p[0] as u32 as i32, hi),
        ElemType::FloatInt if LE => pairs!(1, |p: &[u64; 1]| f32::from_bits(p[0] as u32), hi),
        ElemType::ShortInt if LE => pairs!(1, |p: &[u64; 1]| p[0] as u16 as i16, hi),
        ElemType::DoubleInt if LE => pairs!(2, |p: &[u64; 2]| f64::from_bits(p[0]), w1),
        ElemType::LongInt if LE => pairs!(2, |p: &[u64; 2]| p[0] as i64, w1),
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

/// The pair kernels read little-endian words.
const LE: bool = cfg!(target_endian = "little");

/// Alignment of one element of `ty` as the kernels here read it (value-index pairs as
/// 64-bit words).
fn align(ty: ElemType) -> usize {
    match ty {
        ElemType::TwoInt
        | ElemType::FloatInt
        | ElemType::DoubleInt
        | ElemType::LongInt
        | ElemType::ShortInt => std::mem::align_of::<u64>(),
        _ => 1,
    }
}

/// `b[i] = a[i] op b[i]` for `n` items of the element type `ty`, if the pair is one
/// of the common ones handled here (false: not handled, nothing done): the arithmetic
/// types, and MINLOC/MAXLOC on the value-index pairs whose buffers are 8-aligned
/// (little-endian targets).
///
/// # Safety
/// `a` and `b` hold `n` values of `ty`, aligned for it, and do not overlap.
#[inline]
pub unsafe fn apply(op: OpKind, ty: ElemType, a: *const u8, b: *mut u8, n: usize) -> bool {
    if (a as usize | b as usize) % align(ty) != 0 {
        return false;
    }
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
