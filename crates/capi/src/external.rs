//! `MPI_Pack_external`/`MPI_Unpack_external`/`MPI_Pack_external_size` for the
//! `"external32"` representation (MPI-3.1 §13.5.2).
//!
//! external32 is big-endian with fixed sizes per basic type, which differ from the native
//! LP64 sizes for a few C types: `long`/`unsigned long` are 4 bytes (native 8; packing
//! keeps the low 32 bits, unpacking sign- or zero-extends), `wchar_t` is 2 bytes (native
//! 4), and `long double` is the 16-byte IEEE binary128 format (native: the x87 80-bit
//! extended format in 16 bytes of storage), converted exactly from x87 to binary128 and
//! rounded to nearest-even the other way. Complex types are two big-endian reals; the
//! pair types (`MPI_DOUBLE_INT`, ...) are their two members. Everything else is the native
//! value byte-swapped.
//!
//! A derived datatype is converted through its *basic sequence*: the predefined types of
//! its type map in order, computed from the constructor tree (combiner, integers,
//! constituent types) that every derived type keeps.

use crate::consts::*;
use crate::datatype::{pack_into, unpack_from, Datatype};
use crate::ffi::{check_count, inp, out, read_cstr, MpiResult};
use crate::state::lock;
use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

/// MPICH's 2-byte float extension type (`MPIX_C_FLOAT16`).
const MPIX_C_FLOAT16: c_int = 0x4c00_0246;

/// How one basic element is converted between native and external32 form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Conv {
    /// `units` values of `unit` bytes each, byte-swapped (native size = external size).
    Swap { unit: usize, units: usize },
    /// An integer of `native` bytes stored in `ext` bytes (truncated / extended).
    Int {
        native: usize,
        ext: usize,
        signed: bool,
    },
    /// `n` x87 extended-precision values (16 bytes of storage each) as binary128.
    X87 { n: usize },
}

impl Conv {
    fn native_size(self) -> usize {
        match self {
            Conv::Swap { unit, units } => unit * units,
            Conv::Int { native, .. } => native,
            Conv::X87 { n } => 16 * n,
        }
    }
    fn ext_size(self) -> usize {
        match self {
            Conv::Swap { unit, units } => unit * units,
            Conv::Int { ext, .. } => ext,
            Conv::X87 { n } => 16 * n,
        }
    }
}

/// The conversion of a predefined non-pair type.
fn conv_of(h: c_int) -> MpiResult<Conv> {
    let size = ((h >> 8) & 0xff) as usize;
    Ok(match h {
        MPI_LONG_DOUBLE => Conv::X87 { n: 1 },
        MPI_C_LONG_DOUBLE_COMPLEX | MPI_CXX_LONG_DOUBLE_COMPLEX => Conv::X87 { n: 2 },
        MPI_LONG => Conv::Int {
            native: 8,
            ext: 4,
            signed: true,
        },
        MPI_UNSIGNED_LONG => Conv::Int {
            native: 8,
            ext: 4,
            signed: false,
        },
        MPI_WCHAR => Conv::Int {
            native: 4,
            ext: 2,
            signed: false,
        },
        MPI_C_FLOAT_COMPLEX
        | MPI_CXX_FLOAT_COMPLEX
        | MPI_C_DOUBLE_COMPLEX
        | MPI_CXX_DOUBLE_COMPLEX
        | MPI_COMPLEX
        | MPI_DOUBLE_COMPLEX
        | MPI_COMPLEX4
        | MPI_COMPLEX8
        | MPI_COMPLEX16
        | MPI_COMPLEX32 => Conv::Swap {
            unit: size / 2,
            units: 2,
        },
        MPIX_C_FLOAT16 => Conv::Swap { unit: 2, units: 1 },
        _ if h as u32 & 0xff00_0000 == 0x4c00_0000 && size > 0 => Conv::Swap {
            unit: size,
            units: 1,
        },
        _ => mpi_bail!(
            MPI_ERR_TYPE,
            "datatype {h:#x} has no external32 representation"
        ),
    })
}

/// A run of `reps` consecutive basic elements of one predefined type.
type Run = (c_int, usize);

fn push_run(seq: &mut Vec<Run>, h: c_int, reps: usize) {
    if reps == 0 {
        return;
    }
    match seq.last_mut() {
        Some((last, n)) if *last == h => *n += reps,
        _ => seq.push((h, reps)),
    }
}

fn push_seq(seq: &mut Vec<Run>, sub: &[Run], reps: usize) {
    match sub {
        [] => {}
        [(h, n)] => push_run(seq, *h, n * reps),
        _ => {
            for _ in 0..reps {
                for &(h, n) in sub {
                    push_run(seq, h, n);
                }
            }
        }
    }
}

/// The basic sequence of one element of `dt`: its predefined types in type-map order.
fn basic_seq(dt: &Datatype) -> MpiResult<Vec<Run>> {
    let mut seq = Vec::new();
    if dt.combiner == MPI_COMBINER_NAMED {
        let h = dt
            .basic
            .ok_or_else(|| crate::ffi::MpiError::new(MPI_ERR_TYPE, "unnamed predefined type"))?;
        let pair = |v: c_int| vec![(v, 1), (MPI_INT, 1)];
        let runs = match h {
            MPI_FLOAT_INT => pair(MPI_FLOAT),
            MPI_DOUBLE_INT => pair(MPI_DOUBLE),
            MPI_LONG_INT => pair(MPI_LONG),
            MPI_SHORT_INT => pair(MPI_SHORT),
            MPI_LONG_DOUBLE_INT => pair(MPI_LONG_DOUBLE),
            MPI_2INT => vec![(MPI_INT, 2)],
            MPI_2REAL => vec![(MPI_REAL, 2)],
            MPI_2DOUBLE_PRECISION => vec![(MPI_DOUBLE_PRECISION, 2)],
            MPI_2INTEGER => vec![(MPI_INTEGER, 2)],
            _ if dt.size == 0 => vec![],
            _ => vec![(h, 1)],
        };
        for (h, n) in runs {
            push_run(&mut seq, h, n);
        }
        return Ok(seq);
    }
    if dt.combiner == MPI_COMBINER_STRUCT {
        let count = dt.struct_arg(0).unwrap_or(0).max(0) as usize;
        for (i, old) in dt.constituents().enumerate().take(count) {
            let reps = dt.struct_arg(i + 1).unwrap_or(0).max(0) as usize;
            push_seq(&mut seq, &basic_seq(old)?, reps);
        }
    } else if let Some(old) = dt.constituent(0) {
        // Every other constructor repeats its single old type; the number of copies is
        // the ratio of the sizes.
        if let Some(reps) = dt.size.checked_div(old.size) {
            push_seq(&mut seq, &basic_seq(old)?, reps);
        }
    }
    Ok(seq)
}

/// The distinct predefined types of `dt`'s type map (pairs such as `MPI_DOUBLE_INT` as
/// their two members), in first-occurrence order.
pub(crate) fn basic_types(dt: &Datatype) -> MpiResult<Vec<c_int>> {
    let mut out: Vec<c_int> = Vec::new();
    for (h, _) in basic_seq(dt)? {
        if !out.contains(&h) {
            out.push(h);
        }
    }
    Ok(out)
}

/// The basic sequence of `dt` with each run's conversion, checked against the type size.
fn plan(dt: &Datatype) -> MpiResult<Vec<(Conv, usize)>> {
    let seq = basic_seq(dt)?;
    let plan = seq
        .iter()
        .map(|&(h, n)| Ok((conv_of(h)?, n)))
        .collect::<MpiResult<Vec<_>>>()?;
    let native: usize = plan.iter().map(|(c, n)| c.native_size() * n).sum();
    if native != dt.size {
        mpi_bail!(
            MPI_ERR_TYPE,
            "datatype of size {} has a basic sequence of {native} bytes (constructor {} not supported for external32)",
            dt.size,
            dt.combiner
        );
    }
    Ok(plan)
}

/// external32 size of one element.
fn ext_size(plan: &[(Conv, usize)]) -> usize {
    plan.iter().map(|(c, n)| c.ext_size() * n).sum()
}

/// x87 extended value (little-endian storage, 10 significant bytes) to big-endian
/// binary128. Exact: both formats have a 15-bit exponent with the same bias.
pub(crate) fn x87_to_quad(x: &[u8]) -> [u8; 16] {
    let mant = u64::from_le_bytes(x[..8].try_into().expect("8 bytes"));
    let se = u16::from_le_bytes([x[8], x[9]]);
    let sign = (se >> 15) as u128;
    let exp = (se & 0x7fff) as u128;
    // The explicit integer bit is implied in binary128 (exponent 0 <=> integer bit 0).
    let frac = ((mant & !(1u64 << 63)) as u128) << 49;
    ((sign << 127) | (exp << 112) | frac).to_be_bytes()
}

/// Big-endian binary128 to x87 extended (16 bytes of storage, padding zeroed); the
/// fraction is rounded to nearest-even from 112 to 63 bits.
pub(crate) fn quad_to_x87(q: &[u8]) -> [u8; 16] {
    let v = u128::from_be_bytes(q[..16].try_into().expect("16 bytes"));
    let sign = (v >> 127) as u16;
    let mut exp = ((v >> 112) & 0x7fff) as u16;
    let frac = v & ((1u128 << 112) - 1);
    let mut mant: u64;
    if exp == 0x7fff {
        // Infinity or NaN: keep the top fraction bits, and keep a NaN a NaN.
        mant = (frac >> 49) as u64;
        if frac != 0 && mant == 0 {
            mant = 1 << 62;
        }
        mant |= 1 << 63;
    } else {
        let low = frac & ((1u128 << 49) - 1);
        let half = 1u128 << 48;
        let mut m = (frac >> 49) as u64;
        if low > half || (low == half && m & 1 == 1) {
            m += 1;
        }
        if m >> 63 != 0 {
            // The rounding carried out of the 63 fraction bits.
            m &= !(1u64 << 63);
            exp += 1;
        }
        if exp == 0 {
            mant = m;
        } else if exp >= 0x7fff {
            exp = 0x7fff;
            mant = 1 << 63;
        } else {
            mant = m | (1 << 63);
        }
    }
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&mant.to_le_bytes());
    out[8..10].copy_from_slice(&((sign << 15) | exp).to_le_bytes());
    out
}

/// Convert `count` elements of native packed data to external32, appending to `out`.
fn to_external(plan: &[(Conv, usize)], count: usize, native: &[u8], out: &mut Vec<u8>) {
    let mut pos = 0;
    for _ in 0..count {
        for &(c, n) in plan {
            for _ in 0..n {
                let x = &native[pos..pos + c.native_size()];
                pos += c.native_size();
                match c {
                    Conv::Swap { unit, .. } => {
                        for v in x.chunks(unit) {
                            out.extend(v.iter().rev());
                        }
                    }
                    Conv::Int { native, ext, .. } => {
                        // Little-endian native: the low `ext` bytes, most significant first.
                        debug_assert!(ext <= native);
                        out.extend(x[..ext].iter().rev());
                    }
                    Conv::X87 { .. } => {
                        for v in x.chunks(16) {
                            out.extend_from_slice(&x87_to_quad(v));
                        }
                    }
                }
            }
        }
    }
}

/// Convert `count` elements of external32 data to native packed data, appending to `out`.
fn from_external(plan: &[(Conv, usize)], count: usize, ext: &[u8], out: &mut Vec<u8>) {
    let mut pos = 0;
    for _ in 0..count {
        for &(c, n) in plan {
            for _ in 0..n {
                let x = &ext[pos..pos + c.ext_size()];
                pos += c.ext_size();
                match c {
                    Conv::Swap { unit, .. } => {
                        for v in x.chunks(unit) {
                            out.extend(v.iter().rev());
                        }
                    }
                    Conv::Int {
                        native,
                        ext: e,
                        signed,
                    } => {
                        out.extend(x.iter().rev());
                        let fill = if signed && x[0] & 0x80 != 0 { 0xff } else { 0 };
                        out.extend(std::iter::repeat_n(fill, native - e));
                    }
                    Conv::X87 { .. } => {
                        for v in x.chunks(16) {
                            out.extend_from_slice(&quad_to_x87(v));
                        }
                    }
                }
            }
        }
    }
}

/// The external32 plan of `dt` for file data: its external32 layout must have the native
/// size, so that file views keep their geometry (`long`, `unsigned long` and `wchar_t`
/// are smaller in external32 and are refused with `MPI_ERR_UNSUPPORTED_DATAREP`).
fn file_plan(dt: &Datatype) -> MpiResult<Vec<(Conv, usize)>> {
    let p = plan(dt)?;
    if ext_size(&p) != dt.size {
        mpi_bail!(
            MPI_ERR_UNSUPPORTED_DATAREP,
            "external32 files: the datatype's external32 size ({}) differs from its native size ({}); long, unsigned long and wchar_t are not supported",
            ext_size(&p),
            dt.size
        );
    }
    Ok(p)
}

/// Convert `count` elements of `dt` from native packed data to external32 (for files
/// whose view uses `"external32"`).
pub(crate) fn file_to_external32(dt: &Datatype, count: usize, native: &[u8]) -> MpiResult<Vec<u8>> {
    let p = file_plan(dt)?;
    let mut out = Vec::with_capacity(native.len());
    to_external(&p, count, native, &mut out);
    Ok(out)
}

/// Convert the whole elements of `dt` in external32 `data` (read from a file) to native
/// packed data.
pub(crate) fn file_from_external32(dt: &Datatype, data: &[u8]) -> MpiResult<Vec<u8>> {
    let p = file_plan(dt)?;
    let count = data.len().checked_div(dt.size).unwrap_or(0);
    let mut out = Vec::with_capacity(data.len());
    from_external(&p, count, data, &mut out);
    Ok(out)
}

fn check_datarep(datarep: *const c_char) -> MpiResult {
    let d = read_cstr(datarep, "datarep")?;
    if d != "external32" {
        mpi_bail!(
            MPI_ERR_UNSUPPORTED_DATAREP,
            "data representation '{d}' (only external32)"
        );
    }
    Ok(())
}

fn dtype(h: c_int) -> MpiResult<Arc<Datatype>> {
    lock().dtype_committed(h)
}

mpi_fn_c! {
    /// `MPI_Pack_external_size` (`MPI_Aint` sizes and positions, `MPI_Count` in the `_c` form: the same
    /// type here).
    fn PMPI_Pack_external_size / "MPI_Pack_external_size", PMPI_Pack_external_size_c / "MPI_Pack_external_size_c" (datarep: *const c_char, incount: Count, datatype: c_int, size: *mut isize) {
        check_datarep(datarep)?;
        let n = check_count(incount)?;
        let dt = lock().dtype(datatype)?;
        let p = plan(&dt)?;
        out(size, (n * ext_size(&p)) as isize, "size")
    }
}

mpi_fn_c! {
    /// `MPI_Pack_external` (`MPI_Aint` sizes and positions, `MPI_Count` in the `_c` form: the same
    /// type here).
    fn PMPI_Pack_external / "MPI_Pack_external", PMPI_Pack_external_c / "MPI_Pack_external_c" (datarep: *const c_char, inbuf: *const c_void, incount: Count, datatype: c_int, outbuf: *mut c_void, outsize: isize, position: *mut isize) {
        check_datarep(datarep)?;
        let n = check_count(incount)?;
        let dt = dtype(datatype)?;
        let p = plan(&dt)?;
        let pos = inp(position, "position")?;
        let need = n * ext_size(&p);
        if pos < 0 || outsize < 0 || pos as usize + need > outsize as usize {
            mpi_bail!(MPI_ERR_TRUNCATE, "pack buffer too small: {outsize} bytes, position {pos}, need {need} more");
        }
        let mut v = Vec::with_capacity(n * dt.size);
        // SAFETY: MPI contract: `inbuf` holds `incount` items of `datatype`.
        unsafe { pack_into(&dt, n, inbuf.cast(), &mut v) };
        let mut e = Vec::with_capacity(need);
        to_external(&p, n, &v, &mut e);
        debug_assert_eq!(e.len(), need);
        if need > 0 {
            // SAFETY: `outbuf` has `outsize` bytes and pos + need <= outsize.
            unsafe { std::ptr::copy_nonoverlapping(e.as_ptr(), outbuf.cast::<u8>().add(pos as usize), need) };
        }
        out(position, pos + need as isize, "position")
    }
}

mpi_fn_c! {
    /// `MPI_Unpack_external` (`MPI_Aint` sizes and positions, `MPI_Count` in the `_c` form: the same
    /// type here).
    fn PMPI_Unpack_external / "MPI_Unpack_external", PMPI_Unpack_external_c / "MPI_Unpack_external_c" (datarep: *const c_char, inbuf: *const c_void, insize: isize, position: *mut isize, outbuf: *mut c_void, outcount: Count, datatype: c_int) {
        check_datarep(datarep)?;
        let n = check_count(outcount)?;
        let dt = dtype(datatype)?;
        let p = plan(&dt)?;
        let pos = inp(position, "position")?;
        let need = n * ext_size(&p);
        if pos < 0 || insize < 0 || pos as usize + need > insize as usize {
            mpi_bail!(MPI_ERR_TRUNCATE, "unpack buffer too small: {insize} bytes, position {pos}, need {need} more");
        }
        if need > 0 {
            // SAFETY: `inbuf` has `insize` bytes and pos + need <= insize.
            let e = unsafe { std::slice::from_raw_parts(inbuf.cast::<u8>().add(pos as usize), need) };
            let mut v = Vec::with_capacity(n * dt.size);
            from_external(&p, n, e, &mut v);
            // SAFETY: MPI contract: `outbuf` holds `outcount` items of `datatype`.
            unsafe { unpack_from(&dt, n, outbuf.cast(), &v) };
        }
        out(position, pos + need as isize, "position")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_of(h: c_int) -> Vec<(Conv, usize)> {
        plan(&lock().dtype(h).unwrap()).unwrap()
    }

    fn roundtrip(h: c_int, native: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let p = plan_of(h);
        let mut e = Vec::new();
        to_external(&p, 1, native, &mut e);
        let mut back = Vec::new();
        from_external(&p, 1, &e, &mut back);
        (e, back)
    }

    /// The x87 storage of an f64 (normal numbers), built independently of the converter.
    fn x87_of(f: f64) -> [u8; 16] {
        let b = f.to_bits();
        let sign = (b >> 63) as u16;
        let e = ((b >> 52) & 0x7ff) as u16;
        let mant = (1u64 << 63) | ((b & ((1u64 << 52) - 1)) << 11);
        let mut x = [0u8; 16];
        x[..8].copy_from_slice(&mant.to_le_bytes());
        x[8..10].copy_from_slice(&((sign << 15) | (e + 16383 - 1023)).to_le_bytes());
        x
    }

    /// The binary128 big-endian bytes of an f64 (normal numbers).
    fn quad_of(f: f64) -> [u8; 16] {
        let b = f.to_bits();
        let sign = (b >> 63) as u128;
        let e = ((b >> 52) & 0x7ff) as u128 + 16383 - 1023;
        let frac = ((b & ((1u64 << 52) - 1)) as u128) << 60;
        ((sign << 127) | (e << 112) | frac).to_be_bytes()
    }

    #[test]
    fn external32_sizes_follow_the_standard_table() {
        let size = |h| ext_size(&plan_of(h));
        assert_eq!(size(MPI_INT), 4);
        assert_eq!(size(MPI_LONG), 4);
        assert_eq!(size(MPI_UNSIGNED_LONG), 4);
        assert_eq!(size(MPI_LONG_LONG), 8);
        assert_eq!(size(MPI_WCHAR), 2);
        assert_eq!(size(MPI_LONG_DOUBLE), 16);
        assert_eq!(size(MPI_C_LONG_DOUBLE_COMPLEX), 32);
        assert_eq!(size(MPI_AINT), 8);
        assert_eq!(size(MPI_C_BOOL), 1);
        assert_eq!(size(MPI_LONG_INT), 8);
        assert_eq!(size(MPI_DOUBLE_INT), 12);
        assert_eq!(size(MPI_LONG_DOUBLE_INT), 20);
        assert_eq!(size(MPI_2INT), 8);
    }

    #[test]
    fn integers_are_big_endian_and_long_is_narrowed() {
        let (e, back) = roundtrip(MPI_INT, &0x01020304i32.to_ne_bytes());
        assert_eq!(e, [1, 2, 3, 4]);
        assert_eq!(back, 0x01020304i32.to_ne_bytes());
        let (e, back) = roundtrip(MPI_LONG, &(-5i64).to_ne_bytes());
        assert_eq!(e, (-5i32).to_be_bytes());
        assert_eq!(back, (-5i64).to_ne_bytes());
        let (e, back) = roundtrip(MPI_UNSIGNED_LONG, &0xfffe_fffdu64.to_ne_bytes());
        assert_eq!(e, 0xfffe_fffdu32.to_be_bytes());
        assert_eq!(back, 0xfffe_fffdu64.to_ne_bytes());
        let (e, _) = roundtrip(MPI_WCHAR, &0x41u32.to_ne_bytes());
        assert_eq!(e, [0, 0x41]);
    }

    #[test]
    fn complex_halves_are_swapped_separately() {
        let v: Vec<u8> = [1.0f32.to_ne_bytes(), 2.0f32.to_ne_bytes()].concat();
        let (e, back) = roundtrip(MPI_C_FLOAT_COMPLEX, &v);
        assert_eq!(e, [1.0f32.to_be_bytes(), 2.0f32.to_be_bytes()].concat());
        assert_eq!(back, v);
    }

    #[test]
    fn long_double_is_binary128() {
        for f in [1.5, -3.0, 1.0e300, -2.5e-300, std::f64::consts::PI, 65504.0] {
            let x = x87_of(f);
            assert_eq!(x87_to_quad(&x), quad_of(f), "{f}");
            assert_eq!(quad_to_x87(&quad_of(f)), x, "{f}");
        }
        // Zero, infinity and NaN.
        assert_eq!(x87_to_quad(&[0; 16]), [0; 16]);
        let mut inf = [0u8; 16];
        inf[7] = 0x80;
        inf[8] = 0xff;
        inf[9] = 0x7f;
        let q = x87_to_quad(&inf);
        assert_eq!(&q[..2], &[0x7f, 0xff]);
        assert!(q[2..].iter().all(|&b| b == 0));
        assert_eq!(quad_to_x87(&q), inf);
        let mut qnan = q;
        qnan[15] = 1; // lowest fraction bit only: must stay a NaN on the way back
        let x = quad_to_x87(&qnan);
        assert_eq!(
            u64::from_le_bytes(x[..8].try_into().unwrap()),
            0xc000_0000_0000_0000
        );
    }

    #[test]
    fn x87_mantissas_roundtrip_and_quad_rounds_to_nearest_even() {
        // Pseudo-random full 64-bit mantissas (integer bit set) round-trip exactly.
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..1000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let mut x = [0u8; 16];
            x[..8].copy_from_slice(&(s | (1 << 63)).to_le_bytes());
            x[8..10].copy_from_slice(&(((s >> 20) as u16 % 0x7ffe) + 1).to_le_bytes());
            assert_eq!(quad_to_x87(&x87_to_quad(&x)), x);
        }
        // 1 + 2^-63 + 2^-64 (exactly half an x87 ulp above 1 + 2^-63): ties to even,
        // which here rounds up to 1 + 2^-62.
        let q = (0x3fffu128 << 112) | (1u128 << 49) | (1u128 << 48);
        let x = quad_to_x87(&q.to_be_bytes());
        assert_eq!(
            u64::from_le_bytes(x[..8].try_into().unwrap()),
            (1 << 63) | 2
        );
        // All ones in the fraction carry into the exponent: 2.0.
        let q = (0x3fffu128 << 112) | ((1u128 << 112) - 1);
        assert_eq!(quad_to_x87(&q.to_be_bytes()), x87_of(2.0));
    }

    #[test]
    fn pair_and_struct_types_convert_member_by_member() {
        // MPI_LONG_DOUBLE_INT: native packed = 16-byte x87 + 4-byte int.
        let mut native = x87_of(-0.75).to_vec();
        native.extend_from_slice(&7i32.to_ne_bytes());
        let (e, back) = roundtrip(MPI_LONG_DOUBLE_INT, &native);
        assert_eq!(&e[..16], &quad_of(-0.75));
        assert_eq!(&e[16..], &7i32.to_be_bytes());
        assert_eq!(back, native);
    }

    #[test]
    fn derived_types_follow_their_type_map() {
        // struct { long a[2]; double b; short c[3]; } resized, inside a contiguous of 2.
        let (bl, disp, ty) = (
            [2, 1, 3],
            [0isize, 16, 24],
            [MPI_LONG, MPI_DOUBLE, MPI_SHORT],
        );
        let mut s = 0;
        let mut c = 0;
        // SAFETY: arrays of length 3 and valid output handles.
        unsafe {
            assert_eq!(create_struct(&bl, &disp, &ty, &mut s), MPI_SUCCESS);
            assert_eq!(
                crate::datatype::PMPI_Type_contiguous(2, s, &mut c),
                MPI_SUCCESS
            );
        }
        let dt = lock().dtype(c).unwrap();
        let p = plan(&dt).unwrap();
        assert_eq!(ext_size(&p), 2 * (2 * 4 + 8 + 3 * 2));
        let mut native = Vec::new();
        for k in 0..2i64 {
            native.extend_from_slice(&(-k - 1).to_ne_bytes());
            native.extend_from_slice(&(k + 100).to_ne_bytes());
            native.extend_from_slice(&(k as f64 + 0.5).to_ne_bytes());
            for j in 0..3i16 {
                native.extend_from_slice(&(j - 1).to_ne_bytes());
            }
        }
        assert_eq!(native.len(), dt.size);
        let mut e = Vec::new();
        to_external(&p, 1, &native, &mut e);
        assert_eq!(
            &e[..8],
            &[(-1i32).to_be_bytes(), 100i32.to_be_bytes()].concat()[..]
        );
        assert_eq!(&e[8..16], &0.5f64.to_be_bytes());
        assert_eq!(
            &e[16..22],
            &[
                (-1i16).to_be_bytes(),
                0i16.to_be_bytes(),
                1i16.to_be_bytes()
            ]
            .concat()[..]
        );
        assert_eq!(&e[22..26], &(-2i32).to_be_bytes());
        let mut back = Vec::new();
        from_external(&p, 1, &e, &mut back);
        assert_eq!(back, native);
    }

    /// `MPI_Type_create_struct` from Rust arrays.
    unsafe fn create_struct(bl: &[c_int], disp: &[isize], ty: &[c_int], out: &mut c_int) -> c_int {
        // SAFETY: the three arrays have the same length; `out` is a valid handle slot.
        unsafe {
            crate::datatype::PMPI_Type_create_struct(
                bl.len() as c_int,
                bl.as_ptr(),
                disp.as_ptr(),
                ty.as_ptr(),
                out,
            )
        }
    }
}
