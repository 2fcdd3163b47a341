//! Reduction kernels: the predefined operations on the predefined element types.
//!
//! A reduction is described without MPI handles: an [`OpKind`] (which operation) on an
//! [`ElemType`] (how the bytes of one element are read). The C ABI maps its op and datatype
//! handles onto these; the safe Rust API and the collective algorithms can use them alike.
//!
//! * [`apply`] is the reference: every defined (op, type) pair, one element at a time
//!   (`b[i] = a[i] op b[i]`, MPI's user-function order), false for pairs MPI does not
//!   define. Complex numbers and `long double` are in `ext.rs`.
//! * [`apply_fast`] runs the common pairs as vectorisable loops (an AVX2 build is chosen at
//!   run time when the CPU has it) and computes bit-identical results; callers try it first
//!   and fall back to [`apply`].

mod ext;
mod fast;

pub use fast::apply as apply_fast;

/// A predefined reduction operation (`MPI_MAX` … `MPI_NO_OP`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// Maximum.
    Max,
    /// Minimum.
    Min,
    /// Sum (integers wrap).
    Sum,
    /// Product (integers wrap).
    Prod,
    /// Logical and (nonzero is true; the result is 0 or 1).
    Land,
    /// Bitwise and.
    Band,
    /// Logical or.
    Lor,
    /// Bitwise or.
    Bor,
    /// Logical exclusive or.
    Lxor,
    /// Bitwise exclusive or.
    Bxor,
    /// Minimum value and the lowest index holding it (on value-index pairs).
    MinLoc,
    /// Maximum value and the lowest index holding it (on value-index pairs).
    MaxLoc,
    /// The incoming value replaces the accumulated one.
    Replace,
    /// The accumulated value is kept.
    NoOp,
}

impl OpKind {
    /// Every operation, in MPI handle order.
    pub const ALL: [OpKind; 14] = [
        OpKind::Max,
        OpKind::Min,
        OpKind::Sum,
        OpKind::Prod,
        OpKind::Land,
        OpKind::Band,
        OpKind::Lor,
        OpKind::Bor,
        OpKind::Lxor,
        OpKind::Bxor,
        OpKind::MinLoc,
        OpKind::MaxLoc,
        OpKind::Replace,
        OpKind::NoOp,
    ];
}

/// How the bytes of one element are read by a predefined reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElemType {
    /// `i8`.
    I8,
    /// `u8` (also bytes and booleans).
    U8,
    /// `i16`.
    I16,
    /// `u16`.
    U16,
    /// `i32`.
    I32,
    /// `u32`.
    U32,
    /// `i64`.
    I64,
    /// `u64`.
    U64,
    /// `f32`.
    F32,
    /// `f64`.
    F64,
    /// `{f32 re, f32 im}`.
    ComplexF32,
    /// `{f64 re, f64 im}`.
    ComplexF64,
    /// x87 80-bit extended precision in a 16-byte slot (C `long double` on x86-64).
    LongDouble,
    /// `{long double re, long double im}` (32 bytes).
    ComplexLongDouble,
    /// `{i16, i32}` pair (8 bytes), for MINLOC/MAXLOC.
    ShortInt,
    /// `{i32, i32}` pair (8 bytes), for MINLOC/MAXLOC.
    TwoInt,
    /// `{f32, i32}` pair (8 bytes), for MINLOC/MAXLOC.
    FloatInt,
    /// `{i64, i32}` pair (16 bytes with padding), for MINLOC/MAXLOC.
    LongInt,
    /// `{f64, i32}` pair (16 bytes with padding), for MINLOC/MAXLOC.
    DoubleInt,
    /// `{long double, i32}` pair (32 bytes with padding, the int at 16), for
    /// MINLOC/MAXLOC.
    LongDoubleInt,
}

impl ElemType {
    /// Every element type.
    pub const ALL: [ElemType; 20] = [
        ElemType::I8,
        ElemType::U8,
        ElemType::I16,
        ElemType::U16,
        ElemType::I32,
        ElemType::U32,
        ElemType::I64,
        ElemType::U64,
        ElemType::F32,
        ElemType::F64,
        ElemType::ComplexF32,
        ElemType::ComplexF64,
        ElemType::LongDouble,
        ElemType::ComplexLongDouble,
        ElemType::ShortInt,
        ElemType::TwoInt,
        ElemType::FloatInt,
        ElemType::LongInt,
        ElemType::DoubleInt,
        ElemType::LongDoubleInt,
    ];

    /// Bytes of one element in its packed form: the type map's bytes without the padding
    /// of a value-index pair's memory layout (`ShortInt` 6, `LongInt` and `DoubleInt` 12,
    /// `LongDoubleInt` 20); [`ElemType::size`] for the others.
    pub fn packed_size(self) -> usize {
        match self {
            ElemType::ShortInt => 6,
            ElemType::LongInt | ElemType::DoubleInt => 12,
            ElemType::LongDoubleInt => 20,
            t => t.size(),
        }
    }

    /// Bytes of one element (its extent, padding included).
    pub fn size(self) -> usize {
        match self {
            ElemType::I8 | ElemType::U8 => 1,
            ElemType::I16 | ElemType::U16 => 2,
            ElemType::I32 | ElemType::U32 | ElemType::F32 => 4,
            ElemType::I64 | ElemType::U64 | ElemType::F64 | ElemType::ComplexF32 => 8,
            ElemType::ShortInt | ElemType::TwoInt | ElemType::FloatInt => 8,
            ElemType::ComplexF64 | ElemType::LongDouble => 16,
            ElemType::LongInt | ElemType::DoubleInt => 16,
            ElemType::ComplexLongDouble | ElemType::LongDoubleInt => 32,
        }
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
                OpKind::Sum => y.wrapping_add(*x),
                OpKind::Prod => y.wrapping_mul(*x),
                OpKind::Max => (*y).max(*x),
                OpKind::Min => (*y).min(*x),
                OpKind::Land => ((*y != 0) && (*x != 0)) as $t,
                OpKind::Lor => ((*y != 0) || (*x != 0)) as $t,
                OpKind::Lxor => ((*y != 0) != (*x != 0)) as $t,
                OpKind::Band => *y & *x,
                OpKind::Bor => *y | *x,
                OpKind::Bxor => *y ^ *x,
                OpKind::Replace => *x,
                OpKind::NoOp => *y,
                OpKind::MinLoc | OpKind::MaxLoc => return false,
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
                OpKind::Sum => *y + *x,
                OpKind::Prod => *y * *x,
                OpKind::Max => y.max(*x),
                OpKind::Min => y.min(*x),
                OpKind::Replace => *x,
                OpKind::NoOp => *y,
                _ => return false,
            };
        }
        true
    }};
}

/// Apply a predefined op elementwise: `b[i] = a[i] op b[i]`. Returns false (nothing done)
/// if MPI does not define the (op, type) pair.
///
/// # Safety
/// Both pointers must hold `n` elements of `ty`, aligned for its component type.
pub unsafe fn apply(op: OpKind, ty: ElemType, a: *const u8, b: *mut u8, n: usize) -> bool {
    let loc = matches!(op, OpKind::MinLoc | OpKind::MaxLoc);
    match ty {
        ElemType::I8 => arith!(op, i8, a, b, n, int),
        ElemType::U8 => arith!(op, u8, a, b, n, int),
        ElemType::I16 => arith!(op, i16, a, b, n, int),
        ElemType::U16 => arith!(op, u16, a, b, n, int),
        ElemType::I32 => arith!(op, i32, a, b, n, int),
        ElemType::U32 => arith!(op, u32, a, b, n, int),
        ElemType::I64 => arith!(op, i64, a, b, n, int),
        ElemType::U64 => arith!(op, u64, a, b, n, int),
        ElemType::F32 => arith!(op, f32, a, b, n, float),
        ElemType::F64 => arith!(op, f64, a, b, n, float),
        ElemType::TwoInt if loc => {
            // SAFETY: forwarded caller contract (n elements of ty at a and b).
            unsafe { pair::<i32>(op, a, b, n, 8, 4) }
        }
        ElemType::FloatInt if loc => {
            // SAFETY: forwarded caller contract (n elements of ty at a and b).
            unsafe { pair::<f32>(op, a, b, n, 8, 4) }
        }
        ElemType::DoubleInt if loc => {
            // SAFETY: forwarded caller contract (n elements of ty at a and b).
            unsafe { pair::<f64>(op, a, b, n, 16, 8) }
        }
        ElemType::LongInt if loc => {
            // SAFETY: forwarded caller contract (n elements of ty at a and b).
            unsafe { pair::<i64>(op, a, b, n, 16, 8) }
        }
        ElemType::ShortInt if loc => {
            // SAFETY: forwarded caller contract (n elements of ty at a and b).
            unsafe { pair::<i16>(op, a, b, n, 8, 4) }
        }
        // Complex and long double (SAFETY: forwarded caller contract).
        _ => unsafe { ext::apply(op, ty, a, b, n) },
    }
}

/// `b[i] = a[i] op b[i]` for `n` elements of `ty` in their packed form (see
/// [`ElemType::packed_size`]): the value-index pairs with a gap in their layout read and
/// written unaligned as they travel (no unpacking into the layout); for every other type
/// the packed form is the layout, and this is [`apply_fast`], else [`apply`]. False
/// (nothing done) if MPI does not define the pair.
///
/// # Safety
/// Both pointers hold `n` packed elements of `ty` and do not overlap; for a type whose
/// packed form is its layout, aligned as [`apply`] needs.
pub unsafe fn apply_packed(op: OpKind, ty: ElemType, a: *const u8, b: *mut u8, n: usize) -> bool {
    // SAFETY: forwarded caller contract.
    unsafe {
        match ty {
            ElemType::ShortInt | ElemType::LongInt | ElemType::DoubleInt => {
                fast::apply_packed(op, ty, a, b, n)
            }
            ElemType::LongDoubleInt => ext::loc_packed(op, a, b, n),
            _ => apply_fast(op, ty, a, b, n) || apply(op, ty, a, b, n),
        }
    }
}

/// MINLOC/MAXLOC over `{value, int}` pairs of `stride` bytes, the int at `ioff`.
///
/// # Safety
/// Both pointers must hold `n` pairs.
unsafe fn pair<T: PartialOrd + Copy>(
    op: OpKind,
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
            let better = if op == OpKind::MinLoc {
                va < vb
            } else {
                va > vb
            };
            if better || (va == vb && ia < ib) {
                pb.cast::<T>().write_unaligned(va);
                pb.add(ioff).cast::<i32>().write_unaligned(ia);
            }
        }
    }
    true
}

#[cfg(test)]
mod tests;
