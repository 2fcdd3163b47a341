//! `MPI_Pack_external`/`MPI_Unpack_external`/`MPI_Pack_external_size` for the
//! `"external32"` representation: the packed data with every basic element in big-endian
//! byte order. Sizes are the native LP64 sizes; `long double` (80-bit on x86-64, 128-bit
//! quad in external32) is rejected with `MPI_ERR_UNSUPPORTED_DATAREP`.

use crate::consts::*;
use crate::datatype::{pack_into, unpack_from, Datatype};
use crate::ffi::{check_count, inp, out, read_cstr, MpiResult};
use crate::state::lock;
use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

/// Types whose external32 form differs from a byte swap of the native one.
const UNSUPPORTED: &[c_int] = &[
    MPI_LONG_DOUBLE,
    MPI_C_LONG_DOUBLE_COMPLEX,
    MPI_CXX_LONG_DOUBLE_COMPLEX,
    MPI_LONG_DOUBLE_INT,
];

/// Complex types: each half is swapped separately.
const COMPLEX: &[c_int] = &[
    MPI_C_FLOAT_COMPLEX,
    MPI_C_DOUBLE_COMPLEX,
    MPI_CXX_FLOAT_COMPLEX,
    MPI_CXX_DOUBLE_COMPLEX,
    MPI_COMPLEX,
    MPI_DOUBLE_COMPLEX,
    MPI_COMPLEX8,
    MPI_COMPLEX16,
];

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

/// The byte-swap unit of each block of `dt` (one element per block unit).
fn units(dt: &Datatype) -> MpiResult<Vec<usize>> {
    if let Some(b) = dt.basic {
        if UNSUPPORTED.contains(&b) {
            mpi_bail!(
                MPI_ERR_UNSUPPORTED_DATAREP,
                "long double has no external32 conversion here"
            );
        }
        if COMPLEX.contains(&b) {
            return Ok(dt
                .blocks
                .iter()
                .map(|x| (x.elem / 2).max(1) as usize)
                .collect());
        }
    }
    if dt.blocks.iter().any(|x| x.elem == 16) {
        mpi_bail!(
            MPI_ERR_UNSUPPORTED_DATAREP,
            "16-byte elements have no external32 conversion here"
        );
    }
    Ok(dt.blocks.iter().map(|x| x.elem.max(1) as usize).collect())
}

/// Swap every element of packed data in place (native <-> big-endian).
fn swap(dt: &Datatype, count: usize, data: &mut [u8]) -> MpiResult {
    if cfg!(target_endian = "big") {
        return Ok(());
    }
    let u = units(dt)?;
    let mut pos = 0;
    for _ in 0..count {
        for (b, &unit) in dt.blocks.iter().zip(&u) {
            for chunk in data[pos..pos + b.len].chunks_mut(unit) {
                chunk.reverse();
            }
            pos += b.len;
        }
    }
    Ok(())
}

fn dtype(h: c_int) -> MpiResult<Arc<Datatype>> {
    lock().dtype_committed(h)
}

mpi_fn! {
    /// `MPI_Pack_external_size`.
    fn PMPI_Pack_external_size / "MPI_Pack_external_size" (datarep: *const c_char, incount: c_int, datatype: c_int, size: *mut isize) {
        check_datarep(datarep)?;
        let n = check_count(incount)?;
        let dt = lock().dtype(datatype)?;
        units(&dt)?;
        out(size, (n * dt.size) as isize, "size")
    }
}

mpi_fn! {
    /// `MPI_Pack_external`.
    fn PMPI_Pack_external / "MPI_Pack_external" (datarep: *const c_char, inbuf: *const c_void, incount: c_int, datatype: c_int, outbuf: *mut c_void, outsize: isize, position: *mut isize) {
        check_datarep(datarep)?;
        let n = check_count(incount)?;
        let dt = dtype(datatype)?;
        let pos = inp(position, "position")?;
        let need = n * dt.size;
        if pos < 0 || outsize < 0 || pos as usize + need > outsize as usize {
            mpi_bail!(MPI_ERR_TRUNCATE, "pack buffer too small: {outsize} bytes, position {pos}, need {need} more");
        }
        let mut v = Vec::with_capacity(need);
        // SAFETY: MPI contract: `inbuf` holds `incount` items of `datatype`.
        unsafe { pack_into(&dt, n, inbuf.cast(), &mut v) };
        swap(&dt, n, &mut v)?;
        if need > 0 {
            // SAFETY: `outbuf` has `outsize` bytes and pos + need <= outsize.
            unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), outbuf.cast::<u8>().add(pos as usize), need) };
        }
        out(position, pos + need as isize, "position")
    }
}

mpi_fn! {
    /// `MPI_Unpack_external`.
    fn PMPI_Unpack_external / "MPI_Unpack_external" (datarep: *const c_char, inbuf: *const c_void, insize: isize, position: *mut isize, outbuf: *mut c_void, outcount: c_int, datatype: c_int) {
        check_datarep(datarep)?;
        let n = check_count(outcount)?;
        let dt = dtype(datatype)?;
        let pos = inp(position, "position")?;
        let need = n * dt.size;
        if pos < 0 || insize < 0 || pos as usize + need > insize as usize {
            mpi_bail!(MPI_ERR_TRUNCATE, "unpack buffer too small: {insize} bytes, position {pos}, need {need} more");
        }
        if need > 0 {
            // SAFETY: `inbuf` has `insize` bytes and pos + need <= insize.
            let mut v = unsafe { std::slice::from_raw_parts(inbuf.cast::<u8>().add(pos as usize), need) }.to_vec();
            swap(&dt, n, &mut v)?;
            // SAFETY: MPI contract: `outbuf` holds `outcount` items of `datatype`.
            unsafe { unpack_from(&dt, n, outbuf.cast(), &v) };
        }
        out(position, pos + need as isize, "position")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn external32_is_big_endian() {
        let dt = lock().dtype(MPI_INT).unwrap();
        let mut v = 0x01020304i32.to_ne_bytes().to_vec();
        swap(&dt, 1, &mut v).unwrap();
        assert_eq!(v, [1, 2, 3, 4]);
        let dc = lock().dtype(MPI_C_FLOAT_COMPLEX).unwrap();
        let mut v: Vec<u8> = [1.0f32.to_ne_bytes(), 2.0f32.to_ne_bytes()].concat();
        swap(&dc, 1, &mut v).unwrap();
        assert_eq!(&v[..4], &1.0f32.to_be_bytes());
        assert_eq!(&v[4..], &2.0f32.to_be_bytes());
        let ld = lock().dtype(MPI_LONG_DOUBLE).unwrap();
        assert!(units(&ld).is_err());
    }
}
