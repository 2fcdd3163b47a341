//! Predefined reductions on the types [`super::apply`] does not cover: complex numbers (`SUM`,
//! `PROD`, `REPLACE`, `NO_OP`) and, on x86-64, `long double` (80-bit x87 extended precision
//! in 16 bytes: `SUM`, `PROD`, `MAX`, `MIN`, `REPLACE`, `NO_OP`, complex `long double`
//! `SUM`/`PROD`, and `MINLOC`/`MAXLOC` on `{long double, int}`), computed exactly in x87
//! arithmetic.

use super::{ElemType, OpKind};

/// Apply `op` elementwise (`b[i] = a[i] op b[i]`) for the types of this module; false if
/// the pair is not defined here.
///
/// # Safety
/// Both pointers must hold `n` elements of type `ty`.
pub(super) unsafe fn apply(op: OpKind, ty: ElemType, a: *const u8, b: *mut u8, n: usize) -> bool {
    match ty {
        ElemType::ComplexF32 => {
            // SAFETY: forwarded caller contract.
            unsafe { complex::<f32>(op, a, b, n) }
        }
        ElemType::ComplexF64 => {
            // SAFETY: forwarded caller contract.
            unsafe { complex::<f64>(op, a, b, n) }
        }
        #[cfg(target_arch = "x86_64")]
        ElemType::LongDouble => {
            // SAFETY: forwarded caller contract.
            unsafe { x87::real(op, a, b, n) }
        }
        #[cfg(target_arch = "x86_64")]
        ElemType::ComplexLongDouble => {
            // SAFETY: forwarded caller contract.
            unsafe { x87::complex(op, a, b, n) }
        }
        #[cfg(target_arch = "x86_64")]
        ElemType::LongDoubleInt => {
            // SAFETY: forwarded caller contract (32-byte pairs).
            unsafe { x87::loc(op, a, b, n, 32) }
        }
        _ => false,
    }
}

/// MINLOC/MAXLOC on `n` `{long double, int}` pairs in their packed form (the value's 16
/// bytes, then the int: 20 bytes a pair, no alignment); false if not defined here.
///
/// # Safety
/// Both pointers must hold `n` packed pairs.
pub(super) unsafe fn loc_packed(op: OpKind, a: *const u8, b: *mut u8, n: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: forwarded caller contract (20-byte pairs, the int at 16).
        unsafe { x87::loc(op, a, b, n, 20) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (op, a, b, n);
        false
    }
}

/// Arithmetic of the complex component types.
trait Real:
    Copy + std::ops::Add<Output = Self> + std::ops::Sub<Output = Self> + std::ops::Mul<Output = Self>
{
}
impl Real for f32 {}
impl Real for f64 {}

/// Complex `{re, im}` pairs of `T`.
///
/// # Safety
/// Both pointers must hold `n` pairs.
unsafe fn complex<T: Real>(op: OpKind, a: *const u8, b: *mut u8, n: usize) -> bool {
    if !matches!(
        op,
        OpKind::Sum | OpKind::Prod | OpKind::Replace | OpKind::NoOp
    ) {
        return false;
    }
    let sz = std::mem::size_of::<T>();
    for i in 0..n {
        // SAFETY: pair i of both arrays is in bounds (caller contract); unaligned access.
        unsafe {
            let pa = a.add(2 * i * sz).cast::<T>();
            let pb = b.add(2 * i * sz).cast::<T>();
            let (ar, ai) = (pa.read_unaligned(), pa.add(1).read_unaligned());
            let (br, bi) = (pb.read_unaligned(), pb.add(1).read_unaligned());
            let (r, im) = match op {
                OpKind::Sum => (ar + br, ai + bi),
                OpKind::Prod => (ar * br - ai * bi, ar * bi + ai * br),
                OpKind::Replace => (ar, ai),
                _ => (br, bi),
            };
            pb.write_unaligned(r);
            pb.add(1).write_unaligned(im);
        }
    }
    true
}

#[cfg(target_arch = "x86_64")]
mod x87 {
    //! 80-bit extended precision through the x87 unit (each value: 10 significant bytes
    //! in a 16-byte slot).
    use super::*;
    use std::arch::asm;

    type Ld = [u8; 16];

    /// `z = x + y` (`sub`: `x - y`, `mul`: `x * y`) in extended precision.
    fn arith(kind: u8, x: &Ld, y: &Ld) -> Ld {
        let mut z: Ld = *y;
        // SAFETY: the x87 stack is empty on entry (Rust ABI); every sequence pushes two
        // values and pops both (the second by `fstp`), leaving it empty. The pointers refer
        // to 16-byte buffers of which 10 bytes are read/written.
        unsafe {
            match kind {
                0 => asm!(
                    "fld tbyte ptr [{x}]", "fld tbyte ptr [{y}]", "faddp st(1), st",
                    "fstp tbyte ptr [{z}]",
                    x = in(reg) x.as_ptr(), y = in(reg) y.as_ptr(), z = in(reg) z.as_mut_ptr(),
                    out("st(0)") _, out("st(1)") _, options(nostack),
                ),
                1 => asm!(
                    "fld tbyte ptr [{x}]", "fld tbyte ptr [{y}]", "fsubp st(1), st",
                    "fstp tbyte ptr [{z}]",
                    x = in(reg) x.as_ptr(), y = in(reg) y.as_ptr(), z = in(reg) z.as_mut_ptr(),
                    out("st(0)") _, out("st(1)") _, options(nostack),
                ),
                _ => asm!(
                    "fld tbyte ptr [{x}]", "fld tbyte ptr [{y}]", "fmulp st(1), st",
                    "fstp tbyte ptr [{z}]",
                    x = in(reg) x.as_ptr(), y = in(reg) y.as_ptr(), z = in(reg) z.as_mut_ptr(),
                    out("st(0)") _, out("st(1)") _, options(nostack),
                ),
            }
        }
        z
    }

    /// `x > y` (false when unordered).
    fn gt(x: &Ld, y: &Ld) -> bool {
        let r: u8;
        // SAFETY: pushes y then x, compares and pops both; reads 10 bytes of each buffer.
        unsafe {
            asm!(
                "fld tbyte ptr [{y}]", "fld tbyte ptr [{x}]", "fucomip st, st(1)",
                "fstp st(0)", "seta {r}",
                x = in(reg) x.as_ptr(), y = in(reg) y.as_ptr(), r = out(reg_byte) r,
                out("st(0)") _, out("st(1)") _, options(nostack),
            );
        }
        r != 0
    }

    fn load(p: *const u8) -> Ld {
        let mut v = [0u8; 16];
        // SAFETY: the caller passes a pointer to a 16-byte element.
        unsafe { std::ptr::copy_nonoverlapping(p, v.as_mut_ptr(), 16) };
        v
    }

    fn store(p: *mut u8, v: &Ld) {
        // SAFETY: the caller passes a pointer to a writable 16-byte element.
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p, 16) };
    }

    /// `long double`.
    ///
    /// # Safety
    /// Both pointers must hold `n` 16-byte elements.
    pub(super) unsafe fn real(op: OpKind, a: *const u8, b: *mut u8, n: usize) -> bool {
        if !matches!(
            op,
            OpKind::Sum | OpKind::Prod | OpKind::Max | OpKind::Min | OpKind::Replace | OpKind::NoOp
        ) {
            return false;
        }
        for i in 0..n {
            // SAFETY: element i is in bounds (caller contract).
            let (pa, pb) = unsafe { (a.add(16 * i), b.add(16 * i)) };
            let (x, y) = (load(pa), load(pb));
            let z = match op {
                OpKind::Sum => arith(0, &x, &y),
                OpKind::Prod => arith(2, &x, &y),
                OpKind::Max if gt(&x, &y) => x,
                OpKind::Min if gt(&y, &x) => x,
                OpKind::Replace => x,
                _ => y,
            };
            store(pb, &z);
        }
        true
    }

    /// MINLOC/MAXLOC on `{long double, int}` pairs `stride` bytes apart (32 in memory, 20
    /// packed), the int at 16: the better value, the lower index on a tie.
    ///
    /// # Safety
    /// Both pointers must hold `n` pairs `stride` (at least 20) bytes apart.
    pub(super) unsafe fn loc(
        op: OpKind,
        a: *const u8,
        b: *mut u8,
        n: usize,
        stride: usize,
    ) -> bool {
        if !matches!(op, OpKind::MinLoc | OpKind::MaxLoc) {
            return false;
        }
        for i in 0..n {
            // SAFETY: element i is in bounds (caller contract).
            let (pa, pb) = unsafe { (a.add(stride * i), b.add(stride * i)) };
            let (x, y) = (load(pa), load(pb));
            // SAFETY: the int of each pair at +16, in bounds.
            let (ia, ib) = unsafe {
                (
                    pa.add(16).cast::<i32>().read_unaligned(),
                    pb.add(16).cast::<i32>().read_unaligned(),
                )
            };
            let better = if op == OpKind::MinLoc {
                gt(&y, &x)
            } else {
                gt(&x, &y)
            };
            let tie = !gt(&x, &y) && !gt(&y, &x);
            if better || (tie && ia < ib) {
                store(pb, &x);
                // SAFETY: as above.
                unsafe { pb.add(16).cast::<i32>().write_unaligned(ia) };
            }
        }
        true
    }

    /// Complex `long double` (`{re, im}`, 32 bytes).
    ///
    /// # Safety
    /// Both pointers must hold `n` 32-byte elements.
    pub(super) unsafe fn complex(op: OpKind, a: *const u8, b: *mut u8, n: usize) -> bool {
        if !matches!(
            op,
            OpKind::Sum | OpKind::Prod | OpKind::Replace | OpKind::NoOp
        ) {
            return false;
        }
        for i in 0..n {
            // SAFETY: element i is in bounds (caller contract).
            let (pa, pb) = unsafe { (a.add(32 * i), b.add(32 * i)) };
            // SAFETY: as above, the imaginary parts at +16.
            let (ar, ai, br, bi) =
                unsafe { (load(pa), load(pa.add(16)), load(pb), load(pb.add(16))) };
            let (r, im) = match op {
                OpKind::Sum => (arith(0, &ar, &br), arith(0, &ai, &bi)),
                OpKind::Prod => (
                    arith(1, &arith(2, &ar, &br), &arith(2, &ai, &bi)),
                    arith(0, &arith(2, &ar, &bi), &arith(2, &ai, &br)),
                ),
                OpKind::Replace => (ar, ai),
                _ => (br, bi),
            };
            store(pb, &r);
            // SAFETY: as above.
            store(unsafe { pb.add(16) }, &im);
        }
        true
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// 80-bit encoding of a small integer (sign 0, exponent 16383 + e, explicit 1).
        fn ld(v: u64) -> Ld {
            let mut out = [0u8; 16];
            if v == 0 {
                return out;
            }
            let e = 63 - v.leading_zeros();
            let mant = v << (63 - e);
            out[..8].copy_from_slice(&mant.to_le_bytes());
            out[8..10].copy_from_slice(&((16383 + e) as u16).to_le_bytes());
            out
        }

        #[test]
        fn extended_arithmetic_is_exact_on_integers() {
            assert_eq!(arith(0, &ld(3), &ld(4))[..10], ld(7)[..10]);
            assert_eq!(arith(2, &ld(6), &ld(7))[..10], ld(42)[..10]);
            assert_eq!(arith(1, &ld(10), &ld(4))[..10], ld(6)[..10]);
            assert!(gt(&ld(5), &ld(2)));
            assert!(!gt(&ld(2), &ld(5)));
            assert!(!gt(&ld(2), &ld(2)));
            // 2^64 - 1 needs 64 significant bits: exact in extended precision.
            let big = ld(u64::MAX);
            assert_eq!(arith(1, &arith(0, &big, &ld(1)), &ld(1))[..10], big[..10]);
        }

        #[test]
        fn complex_product() {
            // (1 + 2i)(3 + 4i) = -5 + 10i; use (2 + 1i)(3 + 4i) = 2 + 11i to stay positive.
            let mut a = [0u8; 32];
            let mut b = [0u8; 32];
            a[..16].copy_from_slice(&ld(2));
            a[16..].copy_from_slice(&ld(1));
            b[..16].copy_from_slice(&ld(3));
            b[16..].copy_from_slice(&ld(4));
            // SAFETY: one 32-byte element each.
            assert!(unsafe { complex(OpKind::Prod, a.as_ptr(), b.as_mut_ptr(), 1) });
            assert_eq!(b[..10], ld(2)[..10]);
            assert_eq!(b[16..26], ld(11)[..10]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complex_double_sum_and_product() {
        let a = [1.0f64, 2.0, 0.5, -1.0];
        let mut b = [3.0f64, 4.0, 2.0, 2.0];
        // SAFETY: two complex doubles each.
        assert!(unsafe {
            apply(
                OpKind::Prod,
                ElemType::ComplexF64,
                a.as_ptr().cast(),
                b.as_mut_ptr().cast(),
                2,
            )
        });
        assert_eq!(b, [-5.0, 10.0, 3.0, -1.0]);
        // SAFETY: as above.
        assert!(unsafe {
            apply(
                OpKind::Sum,
                ElemType::ComplexF64,
                a.as_ptr().cast(),
                b.as_mut_ptr().cast(),
                2,
            )
        });
        assert_eq!(b, [-4.0, 12.0, 3.5, -2.0]);
        // MAX is not defined on complex numbers.
        // SAFETY: as above.
        assert!(!unsafe {
            apply(
                OpKind::Max,
                ElemType::ComplexF32,
                a.as_ptr().cast(),
                b.as_mut_ptr().cast(),
                1,
            )
        });
    }
}
