//! The kernels against a scalar reference written independently here, for every
//! (op, element type) pair.

use super::*;

/// Values of a primitive element type for the reference.
trait Prim: Copy + PartialEq + std::fmt::Debug {
    const TY: ElemType;
    fn from_i(i: i64) -> Self;
    fn reference(op: OpKind, x: Self, y: Self) -> Option<Self>;
}

/// `x` if `first`, else `y` (MAX and MIN written apart from the kernels' `max`/`min`).
fn pick<T>(first: bool, x: T, y: T) -> T {
    if first {
        x
    } else {
        y
    }
}

macro_rules! prim_int {
    ($t:ty, $e:ident) => {
        impl Prim for $t {
            const TY: ElemType = ElemType::$e;
            fn from_i(i: i64) -> Self {
                i as $t
            }
            fn reference(op: OpKind, x: Self, y: Self) -> Option<Self> {
                let t = |b: bool| if b { 1 } else { 0 };
                Some(match op {
                    OpKind::Sum => y.wrapping_add(x),
                    OpKind::Prod => y.wrapping_mul(x),
                    OpKind::Max => pick(x > y, x, y),
                    OpKind::Min => pick(x < y, x, y),
                    OpKind::Land => t(x != 0 && y != 0),
                    OpKind::Lor => t(x != 0 || y != 0),
                    OpKind::Lxor => t((x != 0) ^ (y != 0)),
                    OpKind::Band => x & y,
                    OpKind::Bor => x | y,
                    OpKind::Bxor => x ^ y,
                    OpKind::Replace => x,
                    OpKind::NoOp => y,
                    OpKind::MinLoc | OpKind::MaxLoc => return None,
                })
            }
        }
    };
}

macro_rules! prim_float {
    ($t:ty, $e:ident) => {
        impl Prim for $t {
            const TY: ElemType = ElemType::$e;
            fn from_i(i: i64) -> Self {
                i as $t * 0.75
            }
            fn reference(op: OpKind, x: Self, y: Self) -> Option<Self> {
                Some(match op {
                    OpKind::Sum => y + x,
                    OpKind::Prod => y * x,
                    OpKind::Max => pick(x > y, x, y),
                    OpKind::Min => pick(x < y, x, y),
                    OpKind::Replace => x,
                    OpKind::NoOp => y,
                    _ => return None,
                })
            }
        }
    };
}

prim_int!(i8, I8);
prim_int!(u8, U8);
prim_int!(i16, I16);
prim_int!(u16, U16);
prim_int!(i32, I32);
prim_int!(u32, U32);
prim_int!(i64, I64);
prim_int!(u64, U64);
prim_float!(f32, F32);
prim_float!(f64, F64);

/// Inputs covering zero, negatives, large magnitudes (integer wrap-around) and ties.
fn inputs<T: Prim>(n: usize, salt: i64) -> Vec<T> {
    (0..n as i64)
        .map(|i| {
            let v = match i % 5 {
                0 => 0,
                1 => -(i * 7 + salt),
                2 => i * 1_000_003 + salt,
                3 => 3,
                _ => i - salt,
            };
            T::from_i(v)
        })
        .collect()
}

/// Every op on `T` through `apply` and (where it handles the pair) `apply_fast`, against the
/// reference; returns how many pairs were defined.
fn check_prim<T: Prim>() -> usize {
    let mut defined = 0;
    // 37 and 131 elements: the AVX2 build runs from 16 on, with a remainder loop after
    // its vectors (131 bytes: 4 vectors of 32 one-byte lanes and 3 left).
    for n in [1usize, 37, 131] {
        let a = inputs::<T>(n, 11);
        let b0 = inputs::<T>(n, 4);
        for op in OpKind::ALL {
            let want: Option<Vec<T>> = a
                .iter()
                .zip(&b0)
                .map(|(&x, &y)| T::reference(op, x, y))
                .collect();
            let mut b = b0.clone();
            // SAFETY: `n` aligned values of T each.
            let ok = unsafe { apply(op, T::TY, a.as_ptr().cast(), b.as_mut_ptr().cast(), n) };
            assert_eq!(ok, want.is_some(), "{op:?} on {:?} defined", T::TY);
            let Some(want) = want else {
                assert_eq!(b, b0, "{op:?} on {:?}: undefined pair wrote", T::TY);
                continue;
            };
            defined += 1;
            assert_eq!(b, want, "{op:?} on {:?} (n = {n})", T::TY);
            let mut c = b0.clone();
            // SAFETY: as above.
            if unsafe { apply_fast(op, T::TY, a.as_ptr().cast(), c.as_mut_ptr().cast(), n) } {
                // Bit-identical to the reference (compare the bytes: floats too).
                assert_eq!(
                    format!("{c:?}"),
                    format!("{want:?}"),
                    "fast {op:?} on {:?}",
                    T::TY
                );
            }
        }
    }
    defined
}

#[test]
fn primitive_types_match_the_scalar_reference() {
    // Integers: 12 ops defined (all but MINLOC/MAXLOC); floats: 6. Three lengths each.
    let ints = check_prim::<i8>()
        + check_prim::<u8>()
        + check_prim::<i16>()
        + check_prim::<u16>()
        + check_prim::<i32>()
        + check_prim::<u32>()
        + check_prim::<i64>()
        + check_prim::<u64>();
    assert_eq!(ints, 8 * 12 * 3);
    assert_eq!(check_prim::<f32>(), 6 * 3);
    assert_eq!(check_prim::<f64>(), 6 * 3);
}

#[test]
fn fast_kernels_cover_the_common_pairs_and_nothing_else() {
    let (a, mut b) = ([0u64; 32], [0u64; 32]);
    for ty in ElemType::ALL {
        for op in OpKind::ALL {
            let n = 256 / ty.size();
            // SAFETY: 256 zero bytes each, 8-aligned: at least 16 elements of every type up
            // to 16 bytes, and the kernels only handle types of at most 8 bytes.
            let handled =
                unsafe { apply_fast(op, ty, a.as_ptr().cast(), b.as_mut_ptr().cast(), n) };
            let common_ty = matches!(
                ty,
                ElemType::I8
                    | ElemType::U8
                    | ElemType::I16
                    | ElemType::U16
                    | ElemType::I32
                    | ElemType::U32
                    | ElemType::I64
                    | ElemType::U64
                    | ElemType::F32
                    | ElemType::F64
            );
            let float = matches!(ty, ElemType::F32 | ElemType::F64);
            let common_op = match op {
                OpKind::Sum | OpKind::Prod | OpKind::Max | OpKind::Min => true,
                OpKind::Replace | OpKind::NoOp => true,
                OpKind::Band | OpKind::Bor | OpKind::Bxor => !float,
                OpKind::Land | OpKind::Lor | OpKind::Lxor => !float,
                OpKind::MinLoc | OpKind::MaxLoc => false,
            };
            let pair = matches!(
                ty,
                ElemType::TwoInt
                    | ElemType::FloatInt
                    | ElemType::DoubleInt
                    | ElemType::LongInt
                    | ElemType::ShortInt
            ) && matches!(op, OpKind::MinLoc | OpKind::MaxLoc);
            assert_eq!(
                handled,
                (common_ty && common_op) || pair,
                "{op:?} on {ty:?}"
            );
        }
    }
}

/// `apply` on whole arrays of the element's memory layout `T` (its size: the element's).
fn apply_on<T: Copy>(op: OpKind, ty: ElemType, a: &[T], b: &mut [T]) -> bool {
    assert_eq!((a.len(), std::mem::size_of::<T>()), (b.len(), ty.size()));
    // SAFETY: both arrays hold `a.len()` elements of `ty`'s layout, aligned for it.
    unsafe { apply(op, ty, a.as_ptr().cast(), b.as_mut_ptr().cast(), a.len()) }
}

#[test]
fn minloc_maxloc_on_value_index_pairs() {
    // {i32, i32}: the lower index wins a tie.
    let mut q = [[3i32, 2]];
    assert!(apply_on(
        OpKind::MinLoc,
        ElemType::TwoInt,
        &[[3i32, 7]],
        &mut q
    ));
    assert_eq!(q, [[3, 2]]);
    assert!(apply_on(
        OpKind::MinLoc,
        ElemType::TwoInt,
        &[[1i32, 7]],
        &mut q
    ));
    assert_eq!(q, [[1, 7]]);
    // {f64, i32} padded to 16 bytes: MAXLOC.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Di(f64, i32);
    let a = [Di(2.0, 5), Di(1.0, 1), Di(4.0, 3)];
    let mut b = [Di(1.0, 0), Di(1.0, 9), Di(4.0, 8)];
    assert!(apply_on(OpKind::MaxLoc, ElemType::DoubleInt, &a, &mut b));
    assert_eq!(b, [Di(2.0, 5), Di(1.0, 1), Di(4.0, 3)]);
    // Value-index pairs take only MINLOC and MAXLOC; the primitive types never do.
    assert!(!apply_on(OpKind::Sum, ElemType::DoubleInt, &a, &mut b));
    let mut y = [2i32; 2];
    assert!(!apply_on(OpKind::MinLoc, ElemType::I32, &[1i32; 2], &mut y));
    assert_eq!(y, [2, 2]);
}

#[test]
fn element_sizes() {
    assert_eq!(ElemType::ShortInt.size(), 8);
    assert_eq!(ElemType::LongInt.size(), 16);
    assert_eq!(ElemType::ComplexLongDouble.size(), 32);
    assert_eq!(
        ElemType::ALL.iter().map(|t| t.size()).sum::<usize>(),
        1 + 1 + 2 + 2 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 16 + 16 + 32 + 8 + 8 + 8 + 16 + 16 + 32
    );
}

/// A `{value, int}` pair of C's layout for the MINLOC/MAXLOC tests.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
struct P<T> {
    v: T,
    i: i32,
}

/// Two vectors of `n` pairs with pseudo-random values and indices in 0..7 (many ties in
/// both), the hash's bits taken from `shift` up.
fn tied_pairs<T>(n: i64, shift: u32, val: &impl Fn(i64) -> T) -> (Vec<P<T>>, Vec<P<T>>) {
    let mix = |k: i64, s: i64| (k.wrapping_mul(2654435761).wrapping_add(s) >> shift) % 7;
    let pairs = |sv: i64, si: i64| -> Vec<P<T>> {
        (0..n)
            .map(|k| P {
                v: val(mix(k, sv)),
                i: mix(k, si) as i32,
            })
            .collect()
    };
    (pairs(1, 3), pairs(2, 4))
}

/// MINLOC/MAXLOC on `n` pairs of one type, through `apply_fast` (which must take them) and
/// `apply`, against a reference written here: the better value, and on equal values the
/// lower index. Values repeat often (ties in both directions of the index).
fn check_loc<T: Copy + PartialOrd + std::fmt::Debug>(ty: ElemType, val: impl Fn(i64) -> T) {
    let (a, b0) = tied_pairs(1000, 5, &val);
    for op in [OpKind::MinLoc, OpKind::MaxLoc] {
        let want: Vec<P<T>> = a
            .iter()
            .zip(&b0)
            .map(|(x, y)| {
                let x_wins = if op == OpKind::MinLoc {
                    x.v < y.v
                } else {
                    x.v > y.v
                };
                if x_wins || (x.v == y.v && x.i < y.i) {
                    *x
                } else {
                    *y
                }
            })
            .collect();
        assert!(
            want.iter().zip(&b0).any(|(w, y)| w == y) && want.iter().zip(&a).any(|(w, x)| w == x)
        );
        let mut fast = b0.clone();
        // SAFETY: `n` pairs of the type's layout at both, aligned for it.
        let handled =
            unsafe { apply_fast(op, ty, a.as_ptr().cast(), fast.as_mut_ptr().cast(), a.len()) };
        assert!(handled, "{op:?} on {ty:?}");
        assert_eq!(fast, want, "{op:?} on {ty:?} (fast)");
        let mut slow = b0.clone();
        assert!(apply_on(op, ty, &a, &mut slow));
        assert_eq!(slow, want, "{op:?} on {ty:?}");
    }
}

#[test]
fn minloc_maxloc_kernels_match_the_reference_with_ties() {
    check_loc(ElemType::TwoInt, |k| k as i32);
    check_loc(ElemType::FloatInt, |k| k as f32 - 3.0);
    check_loc(ElemType::DoubleInt, |k| k as f64 * 0.5);
    check_loc(ElemType::LongInt, |k| (k - 3) << 40);
    check_loc(ElemType::ShortInt, |k| k as i16 - 3);
}

/// The one-word pairs' AVX2 kernel (four pairs a step, the winners blended and stored
/// whole) against the scalar reference [`apply`], bit for bit: each of the 16 patterns of
/// which pairs of a step `a` wins, by value and by index on a tie, both ops, a 3-pair tail;
/// `MPI_FLOAT_INT` also with NaN values (neither better nor equal: `b` kept), -0.0 against
/// 0.0 (equal: the index decides) and index bits that are NaN patterns as floats.
#[test]
fn one_word_pair_kernels_blend_every_step_pattern() {
    fn case<T: Copy>(ty: ElemType, lo: T, hi: T, odd: &[(T, T)]) {
        // (a's pair, b's pair) per slot: a better by value, worse, tied with the lower or
        // the higher index, then the odd values given
        let mut kinds = vec![
            (P { v: lo, i: 9 }, P { v: hi, i: 1 }),
            (P { v: hi, i: 1 }, P { v: lo, i: 9 }),
            (P { v: lo, i: -3 }, P { v: lo, i: 2 }),
            (P { v: hi, i: 7 }, P { v: hi, i: -1 }),
        ];
        kinds.extend(
            odd.iter()
                .map(|&(x, y)| (P { v: x, i: 4 }, P { v: y, i: 5 })),
        );
        kinds.push((
            P {
                v: lo,
                i: 0x7fc0_0001,
            },
            P {
                v: lo,
                i: -0x0040_0000,
            },
        ));
        // every step pattern of those kinds: 4^4 and more steps, then a 3-pair tail
        let k = kinds.len();
        let steps = k.pow(4);
        let (mut a, mut b0) = (Vec::new(), Vec::new());
        for s in 0..steps + 1 {
            for lane in 0..if s == steps { 3 } else { 4 } {
                let (x, y) = kinds[s / k.pow(lane as u32) % k];
                a.push(x);
                b0.push(y);
            }
        }
        // each pair's value bits and index (not `MPI_SHORT_INT`'s padding, which the
        // kernels may copy with its pair and the reference leaves)
        let bytes = |v: &[P<T>]| -> Vec<(Vec<u8>, i32)> {
            v.iter()
                .map(|p| {
                    // SAFETY: the value's bytes, all initialised (a plain number).
                    let bits = unsafe {
                        std::slice::from_raw_parts(
                            (&p.v as *const T).cast::<u8>(),
                            std::mem::size_of::<T>(),
                        )
                    };
                    (bits.to_vec(), p.i)
                })
                .collect()
        };
        for op in [OpKind::MinLoc, OpKind::MaxLoc] {
            let (mut fast, mut slow) = (b0.clone(), b0.clone());
            // SAFETY: `a.len()` pairs of the type's layout at both, aligned for it.
            unsafe {
                assert!(apply_fast(
                    op,
                    ty,
                    a.as_ptr().cast(),
                    fast.as_mut_ptr().cast(),
                    a.len()
                ));
                assert!(apply(
                    op,
                    ty,
                    a.as_ptr().cast(),
                    slow.as_mut_ptr().cast(),
                    a.len()
                ));
            }
            assert_ne!(
                bytes(&slow),
                bytes(&b0),
                "{op:?} on {ty:?}: some pairs taken"
            );
            assert_ne!(bytes(&slow), bytes(&a), "{op:?} on {ty:?}: some pairs kept");
            assert_eq!(
                bytes(&fast),
                bytes(&slow),
                "{op:?} on {ty:?}: {} pairs",
                a.len()
            );
        }
    }
    case(ElemType::TwoInt, -5i32, 3, &[(i32::MIN, i32::MAX)]);
    case(ElemType::ShortInt, -5i16, 3, &[(i16::MIN, i16::MAX)]);
    let nan = f32::NAN;
    case(
        ElemType::FloatInt,
        -5.0f32,
        3.0,
        &[
            (nan, 1.0),
            (1.0, nan),
            (nan, nan),
            (-0.0, 0.0),
            (f32::MIN, f32::INFINITY),
        ],
    );
}

/// The packed form of `n` pairs (the value's bytes, then the int's, no padding).
fn packed<T: Copy>(pairs: &[P<T>]) -> Vec<u8> {
    let vs = std::mem::size_of::<T>().min(16);
    let mut out = Vec::new();
    for p in pairs {
        // SAFETY: a `P<T>` is readable as its bytes; the value's first `vs` bytes and the
        // int's 4 are inside it.
        let bytes = unsafe {
            std::slice::from_raw_parts((p as *const P<T>).cast::<u8>(), std::mem::size_of::<P<T>>())
        };
        out.extend_from_slice(&bytes[..vs]);
        out.extend_from_slice(&p.i.to_ne_bytes());
    }
    out
}

#[test]
fn packed_pair_kernels_match_the_layout_kernels() {
    // The padded pairs reduced in their packed form, at an odd offset (no alignment), give
    // what the layout kernels give on the same pairs, packed; the other types are the
    // layout kernels themselves.
    fn case<T: Copy + PartialOrd + std::fmt::Debug>(ty: ElemType, val: impl Fn(i64) -> T) {
        let n = 300;
        let mix = |k: i64, s: i64| (k.wrapping_mul(2654435761).wrapping_add(s) >> 5) % 7;
        let mk = |s: i64| -> Vec<P<T>> {
            (0..n)
                .map(|k| P {
                    v: val(mix(k, s)),
                    i: mix(k, s + 2) as i32,
                })
                .collect()
        };
        let (a, b0) = (mk(1), mk(2));
        assert_eq!(packed(&a[..1]).len(), ty.packed_size());
        for op in [OpKind::MinLoc, OpKind::MaxLoc] {
            let mut want = b0.clone();
            assert!(apply_on(op, ty, &a, &mut want));
            let pa = packed(&a);
            let mut pb = vec![0u8; pa.len() + 1];
            pb[1..].copy_from_slice(&packed(&b0));
            // SAFETY: `n` packed pairs at both pointers (`pb` from its second byte).
            let ok = unsafe { apply_packed(op, ty, pa.as_ptr(), pb[1..].as_mut_ptr(), a.len()) };
            assert!(ok, "{op:?} on {ty:?}");
            assert_eq!(pb[1..], packed(&want)[..], "{op:?} on {ty:?}");
            // SAFETY: as above, one pair.
            let ok = unsafe { apply_packed(OpKind::Sum, ty, pa.as_ptr(), pb.as_mut_ptr(), 1) };
            assert!(!ok, "SUM on {ty:?}");
        }
    }
    case(ElemType::ShortInt, |k| k as i16 - 3);
    case(ElemType::LongInt, |k| (k - 3) << 40);
    case(ElemType::DoubleInt, |k| k as f64 * 0.5 - 1.0);
    #[cfg(target_arch = "x86_64")]
    case(ElemType::LongDoubleInt, |k| ld(k - 3));
    assert_eq!(ElemType::TwoInt.packed_size(), 8);
    assert_eq!(ElemType::F64.packed_size(), 8);
}

/// The x87 extended value of the integer `x` (exact: sign, exponent, mantissa).
fn ld(x: i64) -> Ld {
    let (sign, m) = (u16::from(x < 0) << 15, x.unsigned_abs());
    let mut v = [0u8; 16];
    if m != 0 {
        let lz = m.leading_zeros();
        v[..8].copy_from_slice(&(m << lz).to_le_bytes());
        v[8..10].copy_from_slice(&(sign | (16383 + 63 - lz as u16)).to_le_bytes());
    }
    Ld(u128::from_le_bytes(v))
}

/// An x87 extended value in its 16-byte slot, ordered as the value (finite, normal, of
/// one sign each side of zero, as the test makes them).
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C, align(16))]
struct Ld(u128);

impl PartialOrd for Ld {
    fn partial_cmp(&self, o: &Ld) -> Option<std::cmp::Ordering> {
        let key = |v: u128| {
            let (e, m) = ((v >> 64) as u16, v as u64);
            let mag = (u128::from(e & 0x7fff) << 64) | u128::from(m);
            if e >> 15 == 1 {
                -(mag as i128)
            } else {
                mag as i128
            }
        };
        key(self.0).partial_cmp(&key(o.0))
    }
}

#[test]
fn misaligned_pairs_are_left_to_the_general_kernel() {
    // {f64, i32} pairs starting 4 bytes into an 8-aligned buffer: aligned for the int and
    // not for the pair; `apply_fast` declines, `apply` reads them unaligned.
    let mut a = [0u64; 5];
    let mut b = [0u64; 5];
    let (pa, pb) = (
        a.as_mut_ptr().cast::<u8>().wrapping_add(4),
        b.as_mut_ptr().cast::<u8>().wrapping_add(4),
    );
    // SAFETY: 32 bytes from each pointer are inside the arrays; unaligned writes.
    unsafe {
        pa.cast::<f64>().write_unaligned(1.0);
        pa.add(8).cast::<i32>().write_unaligned(3);
        pb.cast::<f64>().write_unaligned(1.0);
        pb.add(8).cast::<i32>().write_unaligned(5);
        pa.add(16).cast::<f64>().write_unaligned(2.0);
        pa.add(24).cast::<i32>().write_unaligned(1);
        pb.add(16).cast::<f64>().write_unaligned(4.0);
        pb.add(24).cast::<i32>().write_unaligned(0);
    }
    // SAFETY: two pairs at both pointers (32 bytes each, inside the arrays).
    unsafe {
        assert!(!apply_fast(OpKind::MinLoc, ElemType::DoubleInt, pa, pb, 2));
        assert!(apply(OpKind::MinLoc, ElemType::DoubleInt, pa, pb, 2));
        assert_eq!(pb.cast::<f64>().read_unaligned(), 1.0);
        assert_eq!(pb.add(8).cast::<i32>().read_unaligned(), 3);
        assert_eq!(pb.add(16).cast::<f64>().read_unaligned(), 2.0);
        assert_eq!(pb.add(24).cast::<i32>().read_unaligned(), 1);
    }
}

/// Nanoseconds per pair of the pair kernels (`cargo test --release -p oxmpi-coll
/// pair_kernel_speed -- --ignored --nocapture`): a measurement, not a check.
#[test]
#[ignore]
fn pair_kernel_speed() {
    fn run<T: Copy>(name: &str, ty: ElemType, val: impl Fn(i64) -> T) {
        for n in [2048, 65536] {
            run_n(name, ty, &val, n);
        }
    }
    fn run_n<T: Copy>(name: &str, ty: ElemType, val: impl Fn(i64) -> T, n: i64) {
        // no pattern a branch predictor could learn
        let (a, b0) = tied_pairs(n, 7, &val);
        let (pa, pb0) = (packed(&a), packed(&b0));
        for op in [OpKind::MinLoc, OpKind::MaxLoc] {
            let reps = 200 * 65536 / n;
            let mut b = b0.clone();
            let t = std::time::Instant::now();
            for _ in 0..reps {
                // SAFETY: `n` pairs at both.
                unsafe { apply_fast(op, ty, a.as_ptr().cast(), b.as_mut_ptr().cast(), a.len()) };
            }
            let lay = t.elapsed().as_nanos() as f64 / (reps * n) as f64;
            let mut pb = pb0.clone();
            let t = std::time::Instant::now();
            for _ in 0..reps {
                // SAFETY: `n` packed pairs at both.
                unsafe { apply_packed(op, ty, pa.as_ptr(), pb.as_mut_ptr(), a.len()) };
            }
            let pk = t.elapsed().as_nanos() as f64 / (reps * n) as f64;
            // the same at an odd address: the scalar kernel for unaligned packed pairs
            let mut pu = vec![0u8; pb0.len() + 1];
            pu[1..].copy_from_slice(&pb0);
            let t = std::time::Instant::now();
            for _ in 0..reps {
                // SAFETY: `n` packed pairs at both.
                unsafe { apply_packed(op, ty, pa.as_ptr(), pu[1..].as_mut_ptr(), a.len()) };
            }
            let pu = t.elapsed().as_nanos() as f64 / (reps * n) as f64;
            println!(
                "{name} {op:?} n={n}: layout {lay:.3}, packed {pk:.3}, packed unaligned {pu:.3} ns/pair"
            );
        }
    }
    run("DOUBLE_INT", ElemType::DoubleInt, |k| k as f64);
    run("LONG_INT", ElemType::LongInt, |k| k);
    run("SHORT_INT", ElemType::ShortInt, |k| k as i16);
    run("2INT", ElemType::TwoInt, |k| k as i32);
    run("FLOAT_INT", ElemType::FloatInt, |k| k as f32);
}

/// A xorshift generator: reproducible pseudo-random test data without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// 0..k
    fn below(&mut self, k: u64) -> i64 {
        (self.next() % k) as i64
    }
}

#[test]
fn pair_kernels_match_a_plain_reference_on_random_data() {
    // Every pair type, both ops, lengths around the kernels' steps (4 pairs, 16 for the
    // AVX2 dispatch) and odd ones, values and indices drawn from few choices (ties in
    // both directions, equal pairs, -0.0 against 0.0): the layout kernels (`apply_fast`,
    // 8-aligned) and the packed ones (`apply_packed`, at 4-aligned, 2-aligned and odd
    // addresses) against the rule written here, pair by pair.
    fn case<T: Copy + PartialOrd + std::fmt::Debug>(
        ty: ElemType,
        rng: &mut Rng,
        val: impl Fn(i64) -> T,
    ) {
        assert_eq!(std::mem::size_of::<P<T>>(), ty.size(), "{ty:?}");
        let lens = [
            0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 19, 31, 33, 64, 127, 1001,
        ];
        for n in lens {
            let mut mk = || -> Vec<P<T>> {
                (0..n)
                    .map(|_| P {
                        v: val(rng.below(5)),
                        i: rng.below(4) as i32 - 1,
                    })
                    .collect()
            };
            let (a, b0) = (mk(), mk());
            for op in [OpKind::MinLoc, OpKind::MaxLoc] {
                let want: Vec<P<T>> = a
                    .iter()
                    .zip(&b0)
                    .map(|(x, y)| {
                        let better = match op {
                            OpKind::MinLoc => x.v < y.v,
                            _ => x.v > y.v,
                        };
                        if better || (x.v == y.v && x.i < y.i) {
                            *x
                        } else {
                            *y
                        }
                    })
                    .collect();
                // (no layout kernel for `{long double, int}`; an empty vector's dangling
                // pointer is not 8-aligned)
                if ty != ElemType::LongDoubleInt && n > 0 {
                    let mut y = b0.clone();
                    // SAFETY: `n` pairs of the type's layout at both, aligned for it.
                    let ok =
                        unsafe { apply_fast(op, ty, a.as_ptr().cast(), y.as_mut_ptr().cast(), n) };
                    assert!(ok, "{op:?} on {ty:?}");
                    assert_eq!(y, want, "{op:?} on {ty:?}, {n} pairs (layout)");
                }
                let (pa, pb, pw) = (packed(&a), packed(&b0), packed(&want));
                // the padded pairs' packed form at any address; the others' packed form
                // is their layout, which takes their alignment
                let offs: &[usize] = if ty.packed_size() < ty.size() {
                    &[0, 2, 4, 1]
                } else {
                    &[0]
                };
                for &off in offs {
                    // 8-aligned storage, the pairs `off` bytes in
                    let mut sa = vec![0u64; pa.len() / 8 + 2];
                    let mut sb = vec![0u64; pb.len() / 8 + 2];
                    let ya = &mut bytemuck_u8(&mut sa)[off..off + pa.len()];
                    ya.copy_from_slice(&pa);
                    let xb = &mut bytemuck_u8(&mut sb)[off..off + pb.len()];
                    xb.copy_from_slice(&pb);
                    // SAFETY: `n` packed pairs at both pointers.
                    let ok = unsafe { apply_packed(op, ty, ya.as_ptr(), xb.as_mut_ptr(), n) };
                    assert!(ok, "{op:?} on {ty:?}");
                    assert_eq!(
                        &xb[..],
                        &pw[..],
                        "{op:?} on {ty:?}, {n} packed pairs at +{off}"
                    );
                }
            }
        }
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let r = &mut rng;
    case(ElemType::TwoInt, r, |k| k as i32 - 2);
    case(ElemType::FloatInt, r, |k| {
        [-0.0f32, 0.0, 1.5, -2.0, 1e30][k as usize]
    });
    case(ElemType::DoubleInt, r, |k| {
        [-0.0f64, 0.0, 1.5, -2.0, 1e300][k as usize]
    });
    case(ElemType::LongInt, r, |k| {
        [i64::MIN, -1, 0, 1 << 40, i64::MAX][k as usize]
    });
    case(ElemType::ShortInt, r, |k| {
        [i16::MIN, -1, 0, 7, i16::MAX][k as usize]
    });
    #[cfg(target_arch = "x86_64")]
    case(ElemType::LongDoubleInt, r, |k| ld(k - 2));
}

/// The bytes of a `u64` vector.
fn bytemuck_u8(v: &mut [u64]) -> &mut [u8] {
    // SAFETY: the words' bytes, same lifetime, any bit pattern valid for both.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), v.len() * 8) }
}

/// Nanoseconds per byte of the kernels a reduction of the benchmarks' types runs
/// (`cargo test --release -p oxmpi-coll kernel_bytes_speed -- --ignored --nocapture`):
/// SUM on `MPI_CHAR`, `MPI_INT`, `MPI_DOUBLE` and MINLOC/MAXLOC on the pair types in their
/// layout (`apply_fast`) and the padded ones packed (`apply_packed`, as the collectives move
/// them), with vectors of 16 KiB (in the first-level cache), 64 KiB and 8 MiB (from memory).
/// A measurement, not a check.
#[test]
#[ignore]
fn kernel_bytes_speed() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for bytes in [16 << 10, 64 << 10, 8 << 20] {
        // 8-aligned buffers of random bytes; pairs get values and indices from few choices
        let words = bytes / 8;
        let mut a = vec![0u64; words];
        let mut b0 = vec![0u64; words];
        let reps = (512 << 20) / bytes;
        let mut line = format!("{:>5} KiB:", bytes >> 10);
        let cases: [(&str, OpKind, ElemType, bool); 12] = [
            ("CHAR SUM", OpKind::Sum, ElemType::I8, false),
            ("INT SUM", OpKind::Sum, ElemType::I32, false),
            ("DOUBLE SUM", OpKind::Sum, ElemType::F64, false),
            ("2INT MINLOC", OpKind::MinLoc, ElemType::TwoInt, false),
            ("2INT MAXLOC", OpKind::MaxLoc, ElemType::TwoInt, false),
            (
                "FLOAT_INT MAXLOC",
                OpKind::MaxLoc,
                ElemType::FloatInt,
                false,
            ),
            (
                "SHORT_INT MAXLOC",
                OpKind::MaxLoc,
                ElemType::ShortInt,
                false,
            ),
            (
                "DOUBLE_INT MAXLOC",
                OpKind::MaxLoc,
                ElemType::DoubleInt,
                false,
            ),
            ("LONG_INT MAXLOC", OpKind::MaxLoc, ElemType::LongInt, false),
            ("SHORT_INT packed", OpKind::MaxLoc, ElemType::ShortInt, true),
            (
                "DOUBLE_INT packed",
                OpKind::MaxLoc,
                ElemType::DoubleInt,
                true,
            ),
            ("LONG_INT packed", OpKind::MaxLoc, ElemType::LongInt, true),
        ];
        for (name, op, ty, pk) in cases {
            for (x, y) in a.iter_mut().zip(b0.iter_mut()) {
                // values 0..3 in every field's low bits (ties), small doubles valid
                let f = |r: &mut Rng| match ty {
                    ElemType::FloatInt => u64::from((r.below(4) as f32).to_bits()),
                    ElemType::DoubleInt => (r.below(4) as f64).to_bits(),
                    _ => r.next() & 0x0003_0003_0003_0003,
                };
                let g = |r: &mut Rng, v: u64| v | (r.below(4) as u64) << 32;
                let v = f(&mut rng);
                *x = g(&mut rng, v);
                let v = f(&mut rng);
                *y = g(&mut rng, v);
            }
            let n = if pk {
                bytes / ty.packed_size()
            } else {
                bytes / ty.size()
            };
            let mut b = b0.clone();
            let (pa, pb) = (a.as_ptr().cast::<u8>(), b.as_mut_ptr().cast::<u8>());
            let t = std::time::Instant::now();
            for _ in 0..reps {
                // SAFETY: `n` elements (packed or in their layout) fit the `bytes` bytes of
                // each buffer, 8-aligned, not overlapping.
                let ok = unsafe {
                    if pk {
                        apply_packed(op, ty, pa, pb, n)
                    } else {
                        apply_fast(op, ty, pa, pb, n)
                    }
                };
                assert!(ok);
            }
            let ns = t.elapsed().as_nanos() as f64 / (reps * bytes) as f64;
            line += &format!(" {name} {ns:.3}");
            std::hint::black_box(&b);
        }
        println!("{line} ns/byte");
    }
}

#[test]
fn keyed_pair_kernels_order_extreme_values_and_indices() {
    // `MPI_2INT` and `MPI_SHORT_INT` compare one 64-bit key (value above, biased index
    // below): every pair of extreme values and indices (the sign bits, 0, -1) both ways
    // round, against the rule written here, in one vector of 16+ pairs (the AVX2 build).
    fn case<T: Copy + PartialOrd + std::fmt::Debug>(ty: ElemType, vals: [T; 5]) {
        let idx = [i32::MIN, -1, 0, 1, i32::MAX];
        let all: Vec<P<T>> = vals
            .iter()
            .flat_map(|&v| idx.iter().map(move |&i| P { v, i }))
            .collect();
        let (mut a, mut b0) = (Vec::new(), Vec::new());
        for x in &all {
            for y in &all {
                a.push(*x);
                b0.push(*y);
            }
        }
        for op in [OpKind::MinLoc, OpKind::MaxLoc] {
            let mut y = b0.clone();
            // SAFETY: `a.len()` pairs of the type's layout at both, 8-aligned.
            let ok =
                unsafe { apply_fast(op, ty, a.as_ptr().cast(), y.as_mut_ptr().cast(), a.len()) };
            assert!(ok, "{op:?} on {ty:?}");
            for ((x, w), got) in a.iter().zip(&b0).zip(&y) {
                let better = if op == OpKind::MinLoc {
                    x.v < w.v
                } else {
                    x.v > w.v
                };
                let want = if better || (x.v == w.v && x.i < w.i) {
                    x
                } else {
                    w
                };
                assert_eq!(
                    (got.v, got.i),
                    (want.v, want.i),
                    "{op:?} on {ty:?}: {x:?} {w:?}"
                );
            }
        }
    }
    case(ElemType::TwoInt, [i32::MIN, -1, 0, 1, i32::MAX]);
    case(ElemType::ShortInt, [i16::MIN, -1, 0, 1, i16::MAX]);
}
