//! Element types that can be sent and received: the [`Equivalence`] trait.
//!
//! The engine moves contiguous bytes. A type whose memory is exactly its wire representation
//! (integers, floats, arrays of them, `#[repr(C)]` structs of them without padding) is sent
//! straight from the user's buffer and received straight into it. Other types (`bool`, structs
//! with padding) are packed into / unpacked from a temporary byte buffer, field by field, so
//! padding bytes are never read and invalid bit patterns are never produced.
//!
//! ```
//! use oxmpi::Equivalence;
//!
//! #[derive(Equivalence, Clone, Copy, Debug, PartialEq)]
//! #[repr(C)]
//! struct Particle {
//!     id: u32,
//!     pos: [f64; 3], // 4 bytes of padding before this field
//! }
//!
//! assert_eq!(Particle::PACKED_SIZE, 4 + 24);
//! assert!(!Particle::CONTIGUOUS); // padding: packed field by field
//!
//! let p = Particle { id: 7, pos: [1.0, 2.0, 3.0] };
//! let mut bytes = vec![0u8; Particle::PACKED_SIZE];
//! p.pack(&mut bytes);
//! assert_eq!(Particle::unpack(&bytes), p);
//! ```

use std::mem::size_of;

/// A type whose values can be sent and received by the MPI library.
///
/// Implemented for all primitive integer and floating-point types, `bool`, arrays `[T; N]` of
/// `Equivalence` types, and, with `#[derive(Equivalence)]`, for `#[repr(C)]` structs whose
/// fields are `Equivalence` (the derive rejects structs without a defined layout).
///
/// Values travel in the host's native byte order (all ranks of a job run on one kind of host).
///
/// # Safety
///
/// Implementors must guarantee:
/// * `pack` writes exactly `PACKED_SIZE` bytes describing `self` into `out` (which is exactly
///   `PACKED_SIZE` long), and `unpack` builds a value from such bytes (any bytes: it must not
///   produce an invalid value from garbage);
/// * if `CONTIGUOUS` is `true`: `size_of::<Self>() == PACKED_SIZE`, the type has no padding
///   bytes, every bit pattern of that size is a valid `Self`, and `pack`/`unpack` are plain
///   byte copies. The library then reads and writes the memory of `[Self]` directly.
///
/// `#[derive(Equivalence)]` generates an implementation that upholds all of this.
pub unsafe trait Equivalence: Copy + Send + Sync + 'static {
    /// Number of bytes one value occupies on the wire.
    const PACKED_SIZE: usize;
    /// Whether `[Self]` can be sent and received as its raw memory (see the trait's safety rules).
    const CONTIGUOUS: bool;
    /// Writes the wire representation of `self` into `out` (`out.len() == PACKED_SIZE`).
    fn pack(&self, out: &mut [u8]);
    /// Reads a value from its wire representation (`bytes.len() == PACKED_SIZE`).
    fn unpack(bytes: &[u8]) -> Self;
}

macro_rules! impl_numeric {
    ($($t:ty),* $(,)?) => {$(
        // SAFETY: a primitive number has no padding, size_of == PACKED_SIZE, and every bit
        // pattern is a valid value; pack/unpack are native-endian byte copies.
        unsafe impl Equivalence for $t {
            const PACKED_SIZE: usize = size_of::<$t>();
            const CONTIGUOUS: bool = true;
            #[inline]
            fn pack(&self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_ne_bytes());
            }
            #[inline]
            fn unpack(bytes: &[u8]) -> Self {
                let mut b = [0u8; size_of::<$t>()];
                b.copy_from_slice(bytes);
                <$t>::from_ne_bytes(b)
            }
        }
    )*};
}

impl_numeric!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64);

// SAFETY: `bool` is NOT contiguous (only 0 and 1 are valid bit patterns), so it always goes
// through pack/unpack; unpack maps any non-zero byte to `true` and never builds an invalid bool.
unsafe impl Equivalence for bool {
    const PACKED_SIZE: usize = 1;
    const CONTIGUOUS: bool = false;
    #[inline]
    fn pack(&self, out: &mut [u8]) {
        out[0] = u8::from(*self);
    }
    #[inline]
    fn unpack(bytes: &[u8]) -> Self {
        bytes[0] != 0
    }
}

// SAFETY: an array has no padding between elements (size is a multiple of alignment), so
// `[T; N]` is contiguous exactly when `T` is, with size N * size_of::<T>() == N * PACKED_SIZE;
// pack/unpack go element by element through T's implementation.
unsafe impl<T: Equivalence, const N: usize> Equivalence for [T; N] {
    const PACKED_SIZE: usize = N * T::PACKED_SIZE;
    const CONTIGUOUS: bool = T::CONTIGUOUS;
    #[inline]
    fn pack(&self, out: &mut [u8]) {
        if T::PACKED_SIZE == 0 {
            return;
        }
        for (v, chunk) in self.iter().zip(out.chunks_exact_mut(T::PACKED_SIZE)) {
            v.pack(chunk);
        }
    }
    #[inline]
    fn unpack(bytes: &[u8]) -> Self {
        std::array::from_fn(|i| T::unpack(&bytes[i * T::PACKED_SIZE..(i + 1) * T::PACKED_SIZE]))
    }
}

/// The bytes of a contiguous slice (no copy). Only valid to call when `T::CONTIGUOUS`.
pub(crate) fn contiguous_bytes<T: Equivalence>(buf: &[T]) -> &[u8] {
    assert!(T::CONTIGUOUS, "contiguous_bytes on a non-contiguous type");
    // SAFETY: T::CONTIGUOUS guarantees no padding, so every byte of the slice is initialized;
    // the length is the slice's size in bytes and the lifetime is tied to `buf`.
    unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), std::mem::size_of_val(buf)) }
}

/// Packs a slice into a new byte vector (`buf.len() * T::PACKED_SIZE` bytes).
pub(crate) fn pack_slice<T: Equivalence>(buf: &[T]) -> Vec<u8> {
    let mut out = vec![0u8; buf.len() * T::PACKED_SIZE];
    if T::PACKED_SIZE > 0 {
        for (v, chunk) in buf.iter().zip(out.chunks_exact_mut(T::PACKED_SIZE)) {
            v.pack(chunk);
        }
    }
    out
}

/// Unpacks whole elements from `bytes` into the front of `buf`; returns how many were written.
pub(crate) fn unpack_into<T: Equivalence>(bytes: &[u8], buf: &mut [T]) -> usize {
    if T::PACKED_SIZE == 0 {
        return 0;
    }
    let mut n = 0;
    for (slot, chunk) in buf.iter_mut().zip(bytes.chunks_exact(T::PACKED_SIZE)) {
        *slot = T::unpack(chunk);
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Equivalence;

    #[derive(Equivalence, Clone, Copy, Debug, PartialEq)]
    #[repr(C)]
    struct Dense {
        a: i32,
        b: u32,
        c: [f64; 2],
    }

    #[derive(Equivalence, Clone, Copy, Debug, PartialEq)]
    #[repr(C)]
    struct Padded {
        a: u8,
        b: f64,
        c: u16,
    }

    #[derive(Equivalence, Clone, Copy, Debug, PartialEq)]
    #[repr(C)]
    struct WithBool {
        flag: bool,
        pad: [u8; 3],
        v: i32,
    }

    #[derive(Equivalence, Clone, Copy, Debug, PartialEq)]
    #[repr(C)]
    struct Tuple(i16, i16, u32);

    #[derive(Equivalence, Clone, Copy, Debug, PartialEq)]
    #[repr(C, packed)]
    struct Packed {
        a: u8,
        b: u32,
    }

    #[derive(Equivalence, Clone, Copy, Debug, PartialEq)]
    #[repr(C)]
    struct Nested {
        inner: Padded,
        tail: [Dense; 2],
    }

    #[derive(Equivalence, Clone, Copy, Debug, PartialEq)]
    #[repr(C)]
    struct Generic<T: Copy> {
        x: T,
        y: T,
    }

    #[derive(Equivalence, Clone, Copy, Debug, PartialEq)]
    #[repr(transparent)]
    struct Meters(f64);

    #[derive(Equivalence, Clone, Copy, Debug, PartialEq)]
    #[repr(C, align(16))]
    struct Aligned {
        a: u32,
        b: u32,
    }

    #[derive(Equivalence, Clone, Copy, Debug, PartialEq)]
    #[repr(C)]
    struct Unit;

    #[test]
    fn alignment_padding_and_empty_structs() {
        // align(16): 8 bytes of fields, 8 bytes of trailing padding that are never sent.
        assert_eq!(size_of::<Aligned>(), 16);
        assert_eq!(packed::<Aligned>(), 8);
        assert!(!contiguous::<Aligned>());
        assert_eq!(roundtrip(Aligned { a: 1, b: 2 }).len(), 8);
        assert_eq!(packed::<Unit>(), 0);
        assert!(contiguous::<Unit>());
        assert!(roundtrip(Unit).is_empty());
        assert!(pack_slice(&[Unit, Unit]).is_empty());
    }

    fn contiguous<T: Equivalence>() -> bool {
        T::CONTIGUOUS
    }

    fn packed<T: Equivalence>() -> usize {
        T::PACKED_SIZE
    }

    fn roundtrip<T: Equivalence + PartialEq + std::fmt::Debug>(v: T) -> Vec<u8> {
        let mut bytes = vec![0xAAu8; T::PACKED_SIZE];
        v.pack(&mut bytes);
        assert_eq!(T::unpack(&bytes), v);
        bytes
    }

    #[test]
    fn primitives_are_contiguous_with_native_size() {
        assert!(
            contiguous::<u8>()
                && contiguous::<i64>()
                && contiguous::<f32>()
                && contiguous::<u128>()
        );
        assert_eq!(packed::<f64>(), 8);
        assert_eq!(packed::<i16>(), 2);
        assert_eq!(packed::<usize>(), size_of::<usize>());
        assert_eq!(roundtrip(-5i32), (-5i32).to_ne_bytes().to_vec());
        assert_eq!(roundtrip(1.5f64), 1.5f64.to_ne_bytes().to_vec());
    }

    #[test]
    fn bool_is_packed_and_never_invalid() {
        assert!(!contiguous::<bool>());
        assert_eq!(roundtrip(true), vec![1]);
        assert_eq!(roundtrip(false), vec![0]);
        // Any non-zero byte from the wire is `true`, never an invalid bool.
        assert!(bool::unpack(&[0x7f]));
    }

    #[test]
    fn dense_struct_is_contiguous() {
        assert_eq!(packed::<Dense>(), 4 + 4 + 16);
        assert_eq!(packed::<Dense>(), size_of::<Dense>());
        assert!(contiguous::<Dense>());
        let d = Dense {
            a: -1,
            b: 2,
            c: [3.0, 4.0],
        };
        let bytes = roundtrip(d);
        // Wire bytes equal the memory bytes for a contiguous type.
        assert_eq!(bytes, contiguous_bytes(std::slice::from_ref(&d)));
    }

    #[test]
    fn padded_struct_is_packed_without_padding() {
        assert_eq!(packed::<Padded>(), 1 + 8 + 2);
        assert_eq!(size_of::<Padded>(), 24);
        assert!(!contiguous::<Padded>());
        let bytes = roundtrip(Padded {
            a: 9,
            b: -2.5,
            c: 0xBEEF,
        });
        assert_eq!(bytes[0], 9);
        assert_eq!(&bytes[1..9], &(-2.5f64).to_ne_bytes());
        assert_eq!(&bytes[9..11], &0xBEEFu16.to_ne_bytes());
    }

    #[test]
    fn struct_with_bool_is_not_contiguous() {
        assert_eq!(size_of::<WithBool>(), packed::<WithBool>());
        assert!(
            !contiguous::<WithBool>(),
            "bool field makes the struct non-contiguous"
        );
        roundtrip(WithBool {
            flag: true,
            pad: [1, 2, 3],
            v: 77,
        });
    }

    #[test]
    fn tuple_packed_nested_generic_transparent() {
        assert!(contiguous::<Tuple>());
        assert_eq!(packed::<Tuple>(), 8);
        roundtrip(Tuple(-1, 2, 3));

        assert!(contiguous::<Packed>(), "packed struct without padding");
        assert_eq!(packed::<Packed>(), 5);
        let bytes = roundtrip(Packed {
            a: 1,
            b: 0x0102_0304,
        });
        assert_eq!(
            bytes,
            contiguous_bytes(&[Packed {
                a: 1,
                b: 0x0102_0304
            }])
        );

        assert!(!contiguous::<Nested>());
        assert_eq!(packed::<Nested>(), 11 + 2 * 24);
        roundtrip(Nested {
            inner: Padded { a: 1, b: 2.0, c: 3 },
            tail: [
                Dense {
                    a: 4,
                    b: 5,
                    c: [6.0, 7.0],
                },
                Dense {
                    a: 8,
                    b: 9,
                    c: [10.0, 11.0],
                },
            ],
        });

        assert!(contiguous::<Generic<u32>>());
        assert!(!contiguous::<Generic<bool>>());
        assert_eq!(packed::<Generic<u64>>(), 16);
        roundtrip(Generic { x: 1u64, y: 2u64 });

        assert!(contiguous::<Meters>());
        roundtrip(Meters(3.25));
    }

    #[test]
    fn slice_pack_unpack() {
        let src = [Padded { a: 1, b: 1.0, c: 1 }, Padded { a: 2, b: 2.0, c: 2 }];
        let bytes = pack_slice(&src);
        assert_eq!(bytes.len(), 22);
        let mut dst = [Padded { a: 0, b: 0.0, c: 0 }; 3];
        // One and a half elements' worth of bytes: only whole elements are unpacked.
        assert_eq!(unpack_into(&bytes[..16], &mut dst), 1);
        assert_eq!(dst[0], src[0]);
        assert_eq!(dst[1], Padded { a: 0, b: 0.0, c: 0 });
        assert_eq!(unpack_into(&bytes, &mut dst), 2);
        assert_eq!(&dst[..2], &src);
        let flags = pack_slice(&[true, false, true]);
        assert_eq!(flags, vec![1, 0, 1]);
    }
}
