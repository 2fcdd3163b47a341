//! Vectorisable loops for the predefined reductions on the integer and floating-point
//! types of 1 to 8 bytes, every operation MPI defines on them, and MINLOC/MAXLOC on the
//! value-index pairs, in their layout and in their packed form (branch-free; the packed
//! 12-byte pairs with AVX2 intrinsics) ([`super::apply`] decides the
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

/// MINLOC (`MIN`) or MAXLOC over one-word pairs with an integer value (`MPI_2INT`,
/// `MPI_SHORT_INT`), each pair compared through one signed 64-bit key: the value in the
/// high bits (signed), the index below it (unsigned, biased so that the lower index is the
/// smaller key for MINLOC and the larger for MAXLOC), so that the rule of [`loc`] (the
/// better value, a tie to the lower index) is one key comparison. Where [`loc`] compares
/// two 32-bit fields of each word and combines three masks, this is a shuffle, an xor and
/// one 64-bit compare per four pairs with AVX2. Equal keys are equal pairs (the padding of
/// `MPI_SHORT_INT` aside, which travels with its pair as in [`loc`]): `y` is kept.
#[inline(always)]
fn loc_key<const MIN: bool>(a: &[u64], b: &mut [u64], key: impl Fn(u64) -> i64) {
    for (x, y) in a.iter().zip(b.iter_mut()) {
        let (kx, ky) = (key(*x), key(*y));
        let take = if MIN { kx < ky } else { kx > ky };
        let m = u64::from(take).wrapping_neg();
        *y = (*x & m) | (*y & !m);
    }
}

/// The bias of [`loc_key`]'s index bits: the signed index as an unsigned number in
/// order (MINLOC), or in reverse order (MAXLOC: the lower index wins a tie there too).
const fn index_bias(min: bool) -> u64 {
    if min {
        0x8000_0000
    } else {
        0x7fff_ffff
    }
}

/// A machine word a pair kernel blends: all ones or all zeros as a mask.
trait Word:
    Copy
    + std::ops::BitAnd<Output = Self>
    + std::ops::BitOr<Output = Self>
    + std::ops::Not<Output = Self>
{
    /// All ones if `take`, else zero.
    fn mask(take: bool) -> Self;
}

macro_rules! word {
    ($($t:ty),*) => {$(
        impl Word for $t {
            #[inline(always)]
            fn mask(take: bool) -> Self {
                <$t>::from(take).wrapping_neg()
            }
        }
    )*};
}
word!(u16, u32, u64);

/// MINLOC (`MIN`) or MAXLOC over value-index pairs seen as `W` words of type `U` each,
/// the rule of [`loc`], the winner blended word by word. With words of the narrowest
/// field (`u32` for `{f64, int}` and `{i64, int}`, `u16` for `{i16, int}`) every pair is
/// a whole number of words in its packed form, read and written as aligned words. The
/// compiler keeps this loop scalar (three interleaved words a pair), but it beats the
/// unaligned field reads of [`loc_packed`] (packed `{i16, int}`: 0.62 against 0.85 ns a
/// pair); the 12-byte pairs take [`loc12_avx2`] where AVX2 is present.
#[inline(always)]
fn loc_words<U: Word, const W: usize, T: PartialOrd, const MIN: bool>(
    a: &[[U; W]],
    b: &mut [[U; W]],
    v: impl Fn(&[U; W]) -> T,
    i: impl Fn(&[U; W]) -> i32,
) {
    for (x, y) in a.iter().zip(b.iter_mut()) {
        let (vx, vy) = (v(x), v(y));
        let better = if MIN { vx < vy } else { vx > vy };
        let take = better | ((vx == vy) & (i(x) < i(y)));
        let m = U::mask(take);
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
/// done) for any other (op, type). Buffers aligned for the pair's narrowest field (2 bytes
/// for `MPI_SHORT_INT`, 4 for the others: a packed buffer from the allocator, split at
/// whole pairs) take the vectorised [`loc_words`] (AVX2 when the CPU has it); others the
/// scalar [`loc_packed`].
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
    let word = match ty {
        ElemType::ShortInt => 2,
        ElemType::DoubleInt | ElemType::LongInt => 4,
        _ => return false,
    };
    if LE && (a as usize | b as usize) % word == 0 {
        #[cfg(target_arch = "x86_64")]
        {
            if n >= 16 && std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: forwarded caller contract, aligned for the words; AVX2 is
                // present.
                return unsafe { run_packed_avx2(op, ty, a, b, n) };
            }
        }
        // SAFETY: forwarded caller contract, aligned for the words.
        return unsafe { run_packed(op, ty, a, b, n) };
    }
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

/// The packed pairs of [`apply_packed`] as three words each (little-endian): `{i16, int}`
/// as `u16`s (the value, then the int's low and high halves), `{f64, int}` and `{i64,
/// int}` as `u32`s (the value's low and high halves, then the int).
///
/// # Safety
/// As [`apply_packed`]; `a` and `b` aligned for the words; little-endian.
#[inline(always)]
unsafe fn run_packed(op: OpKind, ty: ElemType, a: *const u8, b: *mut u8, n: usize) -> bool {
    macro_rules! words {
        ($u:ty, $v:expr, $i:expr) => {{
            // SAFETY: caller contract: `n` packed pairs of three `$u` each at both
            // pointers, aligned for `$u`, not overlapping.
            let (x, y) = unsafe {
                (
                    std::slice::from_raw_parts(a.cast::<[$u; 3]>(), n),
                    std::slice::from_raw_parts_mut(b.cast::<[$u; 3]>(), n),
                )
            };
            match op {
                OpKind::MinLoc => loc_words::<$u, 3, _, true>(x, y, $v, $i),
                OpKind::MaxLoc => loc_words::<$u, 3, _, false>(x, y, $v, $i),
                _ => return false,
            }
        }};
    }
    let v64 = |p: &[u32; 3]| u64::from(p[0]) | (u64::from(p[1]) << 32);
    let i32w = |p: &[u32; 3]| p[2] as i32;
    match ty {
        ElemType::ShortInt => words!(u16, |p: &[u16; 3]| p[0] as i16, |p: &[u16; 3]| {
            (u32::from(p[1]) | (u32::from(p[2]) << 16)) as i32
        }),
        ElemType::DoubleInt => words!(u32, |p: &[u32; 3]| f64::from_bits(v64(p)), i32w),
        ElemType::LongInt => words!(u32, |p: &[u32; 3]| v64(p) as i64, i32w),
        _ => return false,
    }
    true
}

/// MINLOC (`MIN`) or MAXLOC on packed `{f64, int}` (`F64`) or `{i64, int}` pairs (12
/// bytes, no alignment) with AVX2, four pairs (48 bytes, twelve 32-bit words) a step:
/// three 16-byte loads from each buffer make the words 0..7 and 4..11, which are
/// permuted (one shuffle each) and blended into a vector of the four values and one of
/// the four ints; the rule of
/// [`loc`] gives a 64-bit mask per pair, spread back over each pair's three words for the
/// blends, stored as 32 + 16 bytes (exactly the step's 48: nothing outside the pairs is
/// read or written). The caller passes whole steps (`n` a multiple of 4).
///
/// # Safety
/// As [`run_packed`] (any alignment); the CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn loc12_avx2<const F64: bool, const MIN: bool>(a: *const u8, b: *mut u8, n: usize) {
    use std::arch::x86_64::*;
    // SAFETY: the loads and stores of a step cover its 48 bytes inside the `n` pairs of
    // `a` or `b` (caller contract), unaligned ones; the rest are register operations,
    // AVX2 being present.
    unsafe {
        // words 0..7 -> value A (0, 1), value B (3, 4) | int A (2), int B (5), twice
        let split01 = _mm256_setr_epi32(0, 1, 3, 4, 2, 5, 2, 5);
        // words 4..11 -> int C (8), int D (11), twice | value C (6, 7), value D (9, 10)
        let split12 = _mm256_setr_epi32(4, 7, 4, 7, 2, 3, 5, 6);
        // ints C D C D A B A B -> A A B B C C D D (a 64-bit lane per pair)
        let ints = _mm256_setr_epi32(4, 4, 5, 5, 0, 0, 1, 1);
        // a mask per 64-bit lane (pairs A B C D) -> per word 0..7, and per word 8..11
        // in the upper half
        let m01 = _mm256_setr_epi32(0, 0, 0, 2, 2, 2, 4, 4);
        let m12 = _mm256_setr_epi32(0, 0, 0, 0, 4, 6, 6, 6);
        let words = |p: *const u8| {
            let l0 = _mm_loadu_si128(p.cast());
            let l1 = _mm_loadu_si128(p.add(16).cast());
            let l2 = _mm_loadu_si128(p.add(32).cast());
            (_mm256_set_m128i(l1, l0), _mm256_set_m128i(l2, l1))
        };
        for s in 0..n / 4 {
            let (pa, pb) = (a.add(s * 48), b.add(s * 48));
            let (xa01, xa12) = words(pa);
            let (xb01, xb12) = words(pb.cast_const());
            let sa01 = _mm256_permutevar8x32_epi32(xa01, split01);
            let sa12 = _mm256_permutevar8x32_epi32(xa12, split12);
            let sb01 = _mm256_permutevar8x32_epi32(xb01, split01);
            let sb12 = _mm256_permutevar8x32_epi32(xb12, split12);
            // values of A B C D (blends: no lane crossing); ints C D C D A B A B
            let va = _mm256_blend_epi32::<0xf0>(sa01, sa12);
            let vb = _mm256_blend_epi32::<0xf0>(sb01, sb12);
            let ia = _mm256_blend_epi32::<0xf0>(sa12, sa01);
            let ib = _mm256_blend_epi32::<0xf0>(sb12, sb01);
            let (better, eq) = if F64 {
                let (fa, fb) = (_mm256_castsi256_pd(va), _mm256_castsi256_pd(vb));
                let better = if MIN {
                    _mm256_cmp_pd::<_CMP_LT_OQ>(fa, fb)
                } else {
                    _mm256_cmp_pd::<_CMP_GT_OQ>(fa, fb)
                };
                (
                    _mm256_castpd_si256(better),
                    _mm256_castpd_si256(_mm256_cmp_pd::<_CMP_EQ_OQ>(fa, fb)),
                )
            } else {
                let better = if MIN {
                    _mm256_cmpgt_epi64(vb, va)
                } else {
                    _mm256_cmpgt_epi64(va, vb)
                };
                (better, _mm256_cmpeq_epi64(va, vb))
            };
            // int of a below int of b, as A A B B C C D D (a 64-bit mask per pair)
            let lt = _mm256_permutevar8x32_epi32(_mm256_cmpgt_epi32(ib, ia), ints);
            let take = _mm256_or_si256(better, _mm256_and_si256(eq, lt));
            let o01 = _mm256_blendv_epi8(xb01, xa01, _mm256_permutevar8x32_epi32(take, m01));
            let o12 = _mm256_blendv_epi8(xb12, xa12, _mm256_permutevar8x32_epi32(take, m12));
            _mm256_storeu_si256(pb.cast(), o01);
            _mm_storeu_si128(pb.add(32).cast(), _mm256_extracti128_si256::<1>(o12));
        }
    }
}

/// # Safety
/// As [`run_packed`]; the CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn run_packed_avx2(op: OpKind, ty: ElemType, a: *const u8, b: *mut u8, n: usize) -> bool {
    let k = n / 4 * 4;
    // SAFETY: forwarded caller contract (the first `k` pairs, AVX2 present).
    unsafe {
        match (ty, op) {
            (ElemType::DoubleInt, OpKind::MinLoc) => loc12_avx2::<true, true>(a, b, k),
            (ElemType::DoubleInt, OpKind::MaxLoc) => loc12_avx2::<true, false>(a, b, k),
            (ElemType::LongInt, OpKind::MinLoc) => loc12_avx2::<false, true>(a, b, k),
            (ElemType::LongInt, OpKind::MaxLoc) => loc12_avx2::<false, false>(a, b, k),
            // SAFETY: forwarded caller contract.
            _ => return run_packed(op, ty, a, b, n),
        }
    }
    // SAFETY: forwarded caller contract: the last `n - k` pairs start `k` pairs in, still
    // aligned for the words.
    unsafe { run_packed(op, ty, a.add(k * 12), b.add(k * 12), n - k) }
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
    macro_rules! keyed {
        ($key:expr) => {{
            // SAFETY: caller contract: `n` one-word pairs at both pointers, aligned for
            // u64 (checked in `apply`), not overlapping.
            let (x, y) = unsafe {
                (
                    std::slice::from_raw_parts(a.cast::<u64>(), n),
                    std::slice::from_raw_parts_mut(b.cast::<u64>(), n),
                )
            };
            let key = $key;
            match op {
                OpKind::MinLoc => loc_key::<true>(x, y, |w| key(w, index_bias(true))),
                OpKind::MaxLoc => loc_key::<false>(x, y, |w| key(w, index_bias(false))),
                _ => return false,
            }
        }};
    }
    // the int of a one-word pair (high half) and of a two-word pair (low half of word 1)
    let hi = |p: &[u64; 1]| (p[0] >> 32) as u32 as i32;
    let w1 = |p: &[u64; 2]| p[1] as u32 as i32;
    match ty {
        // {i32 value, i32 index}: the key is the word with its halves swapped
        ElemType::TwoInt if LE => keyed!(|w: u64, bias: u64| (w.rotate_left(32) ^ bias) as i64),
        ElemType::FloatInt if LE => pairs!(1, |p: &[u64; 1]| f32::from_bits(p[0] as u32), hi),
        // {i16 value, 2 bytes of padding, i32 index}: the value in the key's top 16 bits,
        // the index below it, the padding shifted out
        ElemType::ShortInt if LE => {
            keyed!(|w: u64, bias: u64| { ((w << 48) | (((w >> 32) ^ bias) << 16)) as i64 })
        }
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

/// [`loc8_avx2`]'s pair types.
const TWO_INT: u8 = 0;
/// See [`TWO_INT`].
const FLOAT_INT: u8 = 1;
/// See [`TWO_INT`].
const SHORT_INT: u8 = 2;

/// MINLOC (`MIN`) or MAXLOC on one-word pairs (`MPI_2INT`, `MPI_FLOAT_INT`,
/// `MPI_SHORT_INT` in their layout; `TY` is [`TWO_INT`], [`FLOAT_INT`] or [`SHORT_INT`])
/// with AVX2, four pairs (32 bytes) a step: the rule of [`loc_key`] (the integer values) or
/// [`loc`] (the float's), a mask per pair (its sign bit), the winners blended into a vector
/// that is stored whole. Compiled from those loops, the blend became a masked store
/// (`vpmaskmovq`: the store of a select of the loaded word), slow on the AMD EPYC this was
/// measured on, and slower where it writes (a reduce root that folds ranks below the one
/// it started from takes every pair of the benchmark's `{1, rank}`): np=4 1 MiB
/// `MPI_2INT` MINLOC ireduce 640 to 217 us, allreduce 538 to 254 (session 53,
/// s53-pairnb). The caller passes whole steps (`n` a multiple of 4); nothing outside the
/// `n` pairs is read or written, at any alignment.
///
/// # Safety
/// `a` and `b` hold `n` pairs of `TY` each and do not overlap; the CPU supports AVX2;
/// little-endian.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn loc8_avx2<const TY: u8, const MIN: bool>(a: *const u8, b: *mut u8, n: usize) {
    use std::arch::x86_64::*;
    let bias = _mm256_set1_epi64x(index_bias(MIN) as i64);
    // The comparison key of [`loc_key`] of four one-word pairs with an integer value.
    let key = |w: __m256i| match TY {
        // {i32 value, i32 index}: the word's halves swapped, the index biased
        TWO_INT => _mm256_xor_si256(_mm256_shuffle_epi32::<0b10_11_00_01>(w), bias),
        // {i16 value, padding, i32 index}: the value in the top 16 bits, the biased index
        // below it
        _ => _mm256_or_si256(
            _mm256_slli_epi64::<48>(w),
            _mm256_slli_epi64::<16>(_mm256_xor_si256(_mm256_srli_epi64::<32>(w), bias)),
        ),
    };
    for s in 0..n / 4 {
        // SAFETY: the step's 32 bytes of both buffers are inside the `n` pairs (caller
        // contract); unaligned loads and store.
        let (pa, pb) = unsafe { (a.add(s * 32), b.add(s * 32)) };
        // SAFETY: as above.
        let (x, y) = unsafe {
            (
                _mm256_loadu_si256(pa.cast()),
                _mm256_loadu_si256(pb.cast_const().cast()),
            )
        };
        let take = if TY == FLOAT_INT {
            // {f32 value, i32 index}: each value moved into its word's high half (the low
            // half zero, no float compare of index bits), so that the verdicts of the values
            // (compared as floats) and of the indices (as ints) land in the high half, the
            // sign bit of which selects the word (`blendv_pd`)
            let (fx, fy) = (
                _mm256_castsi256_ps(_mm256_slli_epi64::<32>(x)),
                _mm256_castsi256_ps(_mm256_slli_epi64::<32>(y)),
            );
            let better = if MIN {
                _mm256_cmp_ps::<_CMP_LT_OQ>(fx, fy)
            } else {
                _mm256_cmp_ps::<_CMP_GT_OQ>(fx, fy)
            };
            let eq = _mm256_cmp_ps::<_CMP_EQ_OQ>(fx, fy);
            let lower = _mm256_castsi256_ps(_mm256_cmpgt_epi32(y, x)); // x's index below y's
            _mm256_castps_si256(_mm256_or_ps(better, _mm256_and_ps(eq, lower)))
        } else {
            let (kx, ky) = (key(x), key(y));
            if MIN {
                _mm256_cmpgt_epi64(ky, kx)
            } else {
                _mm256_cmpgt_epi64(kx, ky)
            }
        };
        // the sign bit of each word's mask picks x's word or y's
        let mut out = _mm256_blendv_pd(
            _mm256_castsi256_pd(y),
            _mm256_castsi256_pd(x),
            _mm256_castsi256_pd(take),
        );
        // The blend hidden from the optimiser (an empty `asm!` that may have changed it),
        // which would otherwise store it as the masked store this kernel is here to avoid
        // (it did: `vpmaskmovq` again from this very blend and store).
        // SAFETY: the empty template reads and writes nothing but the register.
        unsafe {
            std::arch::asm!(
                "/* {0} */",
                inout(ymm_reg) out,
                options(pure, nomem, nostack, preserves_flags)
            );
        }
        // SAFETY: as above.
        unsafe { _mm256_storeu_pd(pb.cast(), out) };
    }
}

/// # Safety
/// As [`apply`]; the CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn run_avx2(op: OpKind, ty: ElemType, a: *const u8, b: *mut u8, n: usize) -> bool {
    let one_word = matches!(
        ty,
        ElemType::TwoInt | ElemType::FloatInt | ElemType::ShortInt
    );
    if LE && one_word && matches!(op, OpKind::MinLoc | OpKind::MaxLoc) {
        let k = n / 4 * 4;
        // SAFETY: forwarded caller contract (the first `k` pairs; AVX2 present,
        // little-endian).
        unsafe {
            match (ty, op == OpKind::MinLoc) {
                (ElemType::TwoInt, true) => loc8_avx2::<TWO_INT, true>(a, b, k),
                (ElemType::TwoInt, false) => loc8_avx2::<TWO_INT, false>(a, b, k),
                (ElemType::FloatInt, true) => loc8_avx2::<FLOAT_INT, true>(a, b, k),
                (ElemType::FloatInt, false) => loc8_avx2::<FLOAT_INT, false>(a, b, k),
                (_, true) => loc8_avx2::<SHORT_INT, true>(a, b, k),
                (_, false) => loc8_avx2::<SHORT_INT, false>(a, b, k),
            }
        }
        // SAFETY: forwarded caller contract: the last `n - k` pairs start `k` pairs in,
        // still aligned for them.
        return unsafe { run(op, ty, a.add(k * 8), b.add(k * 8), n - k) };
    }
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
