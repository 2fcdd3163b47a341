//! Property tests of the Equivalence encodings: every value survives pack/unpack, contiguous
//! types are encoded as their memory, and slices of packed types keep their elements.

use oxmpi::Equivalence;
use proptest::prelude::*;

#[derive(Equivalence, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Mixed {
    a: u8,
    b: f64,
    c: [i16; 3],
    d: bool,
}

#[derive(Equivalence, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Dense {
    x: u32,
    y: i32,
    z: [u64; 2],
}

fn mixed() -> impl Strategy<Value = Mixed> {
    (any::<u8>(), any::<u64>(), any::<[i16; 3]>(), any::<bool>()).prop_map(|(a, b, c, d)| Mixed {
        a,
        // Any bit pattern, NaNs included: compare bits below.
        b: f64::from_bits(b),
        c,
        d,
    })
}

fn bits(m: &Mixed) -> (u8, u64, [i16; 3], bool) {
    (m.a, m.b.to_bits(), m.c, m.d)
}

fn roundtrip<T: Equivalence>(v: T) -> (Vec<u8>, T) {
    let mut bytes = vec![0u8; T::PACKED_SIZE];
    v.pack(&mut bytes);
    let back = T::unpack(&bytes);
    (bytes, back)
}

proptest! {
    #[test]
    fn mixed_roundtrips(m in mixed()) {
        let (bytes, back) = roundtrip(m);
        prop_assert_eq!(bytes.len(), 1 + 8 + 6 + 1);
        prop_assert_eq!(bits(&back), bits(&m));
    }

    #[test]
    fn dense_is_encoded_as_its_memory(x in any::<u32>(), y in any::<i32>(), z in any::<[u64; 2]>()) {
        let d = Dense { x, y, z };
        let (bytes, back) = roundtrip(d);
        prop_assert_eq!(back, d);
        let mut mem = Vec::new();
        mem.extend_from_slice(&x.to_ne_bytes());
        mem.extend_from_slice(&y.to_ne_bytes());
        mem.extend_from_slice(&z[0].to_ne_bytes());
        mem.extend_from_slice(&z[1].to_ne_bytes());
        prop_assert_eq!(bytes, mem);
    }

    #[test]
    fn any_bytes_unpack_to_a_valid_value(raw in proptest::collection::vec(any::<u8>(), 16)) {
        // Garbage from the wire never makes an invalid bool (or anything else).
        let m = Mixed::unpack(&raw);
        prop_assert_eq!(m.d, raw[15] != 0);
        let (again, _) = roundtrip(m);
        let mut expect = raw.clone();
        expect[15] = u8::from(raw[15] != 0);
        prop_assert_eq!(again, expect);
    }

    #[test]
    fn arrays_of_packed_types(ms in proptest::collection::vec(mixed(), 0..8)) {
        let mut arr = [Mixed { a: 0, b: 0.0, c: [0; 3], d: false }; 8];
        arr[..ms.len()].copy_from_slice(&ms);
        let (_, back) = roundtrip(arr);
        prop_assert_eq!(back.map(|m| bits(&m)), arr.map(|m| bits(&m)));
    }
}
