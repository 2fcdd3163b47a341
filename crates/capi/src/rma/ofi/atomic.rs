//! Which MPI accumulates libfabric's atomics (`FI_ATOMIC`) can run: the predefined types
//! that map onto an `enum fi_datatype`, the operations MPI allows on each (its class:
//! C integer, floating point, byte) and their `enum fi_op`, and the window-wide choice
//! ([`native_types`]): a type's accumulates are native only if the provider runs every
//! operation MPI allows on it, plain, fetching and (integers, bytes) compare-and-swap,
//! so that all accumulates of one type to a window take the same path.

use crate::consts::*;
use oxmpi_engine::{OfiAtomicKind as Kind, OfiAtomicOp as Op, OfiAtomicType as Ty};
use std::ffi::{c_int, c_long, c_short, c_uint, c_ulong};
use std::mem::size_of;

/// The operations MPI allows on a predefined type (MPI 4.1 §6.9.2, §12.3.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    /// C integer: every predefined operation but `MINLOC`/`MAXLOC`; compare-and-swap.
    Int,
    /// Floating point: `MIN`, `MAX`, `SUM`, `PROD`; no compare-and-swap.
    Float,
    /// Byte: the bitwise operations; compare-and-swap.
    Byte,
}

/// The `enum fi_datatype` of a signed C integer of `n` bytes.
const fn signed(n: usize) -> Ty {
    match n {
        1 => Ty::I8,
        2 => Ty::I16,
        4 => Ty::I32,
        _ => Ty::I64,
    }
}

/// The `enum fi_datatype` of an unsigned C integer of `n` bytes.
const fn unsigned(n: usize) -> Ty {
    match n {
        1 => Ty::U8,
        2 => Ty::U16,
        4 => Ty::U32,
        _ => Ty::U64,
    }
}

/// The predefined types whose accumulates may run as network atomics: handle, name (for
/// verbose output), `enum fi_datatype`, class. A type's index is its bit in the masks.
pub(crate) const TYPES: [(c_int, &str, Ty, Class); 21] = [
    (MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR", Ty::I8, Class::Int),
    (MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR", Ty::U8, Class::Int),
    (
        MPI_SHORT,
        "MPI_SHORT",
        signed(size_of::<c_short>()),
        Class::Int,
    ),
    (
        MPI_UNSIGNED_SHORT,
        "MPI_UNSIGNED_SHORT",
        unsigned(size_of::<c_short>()),
        Class::Int,
    ),
    (MPI_INT, "MPI_INT", signed(size_of::<c_int>()), Class::Int),
    (
        MPI_UNSIGNED,
        "MPI_UNSIGNED",
        unsigned(size_of::<c_uint>()),
        Class::Int,
    ),
    (
        MPI_LONG,
        "MPI_LONG",
        signed(size_of::<c_long>()),
        Class::Int,
    ),
    (
        MPI_UNSIGNED_LONG,
        "MPI_UNSIGNED_LONG",
        unsigned(size_of::<c_ulong>()),
        Class::Int,
    ),
    (MPI_LONG_LONG, "MPI_LONG_LONG", Ty::I64, Class::Int),
    (
        MPI_UNSIGNED_LONG_LONG,
        "MPI_UNSIGNED_LONG_LONG",
        Ty::U64,
        Class::Int,
    ),
    (MPI_INT8_T, "MPI_INT8_T", Ty::I8, Class::Int),
    (MPI_INT16_T, "MPI_INT16_T", Ty::I16, Class::Int),
    (MPI_INT32_T, "MPI_INT32_T", Ty::I32, Class::Int),
    (MPI_INT64_T, "MPI_INT64_T", Ty::I64, Class::Int),
    (MPI_UINT8_T, "MPI_UINT8_T", Ty::U8, Class::Int),
    (MPI_UINT16_T, "MPI_UINT16_T", Ty::U16, Class::Int),
    (MPI_UINT32_T, "MPI_UINT32_T", Ty::U32, Class::Int),
    (MPI_UINT64_T, "MPI_UINT64_T", Ty::U64, Class::Int),
    (MPI_FLOAT, "MPI_FLOAT", Ty::F32, Class::Float),
    (MPI_DOUBLE, "MPI_DOUBLE", Ty::F64, Class::Float),
    (MPI_BYTE, "MPI_BYTE", Ty::U8, Class::Byte),
];

/// The index of predefined type `basic` in [`TYPES`], if it maps.
pub(crate) fn type_index(basic: c_int) -> Option<usize> {
    TYPES.iter().position(|t| t.0 == basic)
}

/// The `enum fi_op` of MPI operation `op` (`MPI_REPLACE`: `FI_ATOMIC_WRITE`, `MPI_NO_OP`:
/// `FI_ATOMIC_READ`), if it has one.
pub(crate) fn fi_op(op: c_int) -> Option<Op> {
    Some(match op {
        MPI_MIN => Op::Min,
        MPI_MAX => Op::Max,
        MPI_SUM => Op::Sum,
        MPI_PROD => Op::Prod,
        MPI_LAND => Op::Land,
        MPI_LOR => Op::Lor,
        MPI_LXOR => Op::Lxor,
        MPI_BAND => Op::Band,
        MPI_BOR => Op::Bor,
        MPI_BXOR => Op::Bxor,
        MPI_REPLACE => Op::Write,
        MPI_NO_OP => Op::Read,
        _ => return None,
    })
}

/// The MPI operations an accumulate may apply to a type of class `c` (`MPI_REPLACE` and
/// `MPI_NO_OP` included).
pub(crate) fn ops(c: Class) -> &'static [c_int] {
    match c {
        Class::Int => &[
            MPI_MIN,
            MPI_MAX,
            MPI_SUM,
            MPI_PROD,
            MPI_LAND,
            MPI_LOR,
            MPI_LXOR,
            MPI_BAND,
            MPI_BOR,
            MPI_BXOR,
            MPI_REPLACE,
            MPI_NO_OP,
        ],
        Class::Float => &[MPI_MIN, MPI_MAX, MPI_SUM, MPI_PROD, MPI_REPLACE, MPI_NO_OP],
        Class::Byte => &[MPI_BAND, MPI_BOR, MPI_BXOR, MPI_REPLACE, MPI_NO_OP],
    }
}

/// Whether MPI allows compare-and-swap on a type of class `c`.
pub(crate) fn swaps(c: Class) -> bool {
    c != Class::Float
}

/// Whether the provider runs every atomic MPI needs for a type of class `c` mapped to
/// `ty`, as `valid` answers (`fi_atomicvalid` and its fetching and comparing forms).
pub(crate) fn covers(c: Class, ty: Ty, valid: &dyn Fn(Kind, Ty, Op) -> bool) -> bool {
    ops(c).iter().all(|&op| match fi_op(op) {
        Some(Op::Read) => valid(Kind::Fetch, ty, Op::Read),
        Some(f) => valid(Kind::Write, ty, f) && valid(Kind::Fetch, ty, f),
        None => false,
    }) && (!swaps(c) || valid(Kind::Compare, ty, Op::Cswap))
}

/// The bit mask (bit `i`: [`TYPES`]`[i]`) of the types whose accumulates the provider can
/// run entirely as atomics, as `valid` answers.
pub(crate) fn native_types(valid: &dyn Fn(Kind, Ty, Op) -> bool) -> u64 {
    TYPES
        .iter()
        .enumerate()
        .filter(|(_, t)| covers(t.3, t.2, valid))
        .fold(0, |m, (i, _)| m | 1 << i)
}

/// The window's native types from every rank's mask ([`native_types`], gathered in rank
/// order): those every rank has, none if any rank vetoed (it does not reach every other
/// rank over ofi, or has no atomics). Every rank computes the same from the same inputs,
/// so a type's accumulates take one path on all of them.
pub(crate) fn agree(masks: &[u64], vetoed: bool) -> u64 {
    if vetoed {
        return 0;
    }
    masks.iter().fold(u64::MAX, |m, r| m & r)
}

/// The names of the types in `mask`, for verbose output.
pub(crate) fn names(mask: u64) -> Vec<&'static str> {
    TYPES
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, t)| t.1)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predefined_types_map_to_fi_datatypes_of_their_size() {
        let ty = |h| TYPES[type_index(h).expect("mapped")].2;
        assert_eq!(ty(MPI_INT), Ty::I32);
        assert_eq!(ty(MPI_UNSIGNED), Ty::U32);
        assert_eq!(ty(MPI_LONG), Ty::I64, "LP64");
        assert_eq!(ty(MPI_UNSIGNED_LONG), Ty::U64);
        assert_eq!(
            ty(MPI_LONG_LONG_INT),
            Ty::I64,
            "the same handle as MPI_LONG_LONG"
        );
        assert_eq!(ty(MPI_SHORT), Ty::I16);
        assert_eq!(ty(MPI_UINT64_T), Ty::U64);
        assert_eq!(ty(MPI_INT8_T), Ty::I8);
        assert_eq!(ty(MPI_FLOAT), Ty::F32);
        assert_eq!(ty(MPI_DOUBLE), Ty::F64);
        assert_eq!(ty(MPI_BYTE), Ty::U8);
        for (h, name, t, _) in TYPES {
            let size = crate::datatype::builtin(h).expect(name).size;
            assert_eq!(t.size(), size, "{name}: element size");
        }
        // Pair types, long double, complex, char, bool: no fi_datatype here (messages).
        for h in [
            MPI_DOUBLE_INT,
            MPI_2INT,
            MPI_LONG_DOUBLE,
            MPI_CHAR,
            MPI_C_BOOL,
            MPI_C_DOUBLE_COMPLEX,
        ] {
            assert_eq!(type_index(h), None, "{h:#x}");
        }
        assert!(TYPES.len() <= 64, "a mask bit per type");
    }

    #[test]
    fn mpi_operations_map_to_fi_ops() {
        assert_eq!(fi_op(MPI_SUM), Some(Op::Sum));
        assert_eq!(fi_op(MPI_PROD), Some(Op::Prod));
        assert_eq!(fi_op(MPI_MIN), Some(Op::Min));
        assert_eq!(fi_op(MPI_MAX), Some(Op::Max));
        assert_eq!(fi_op(MPI_BAND), Some(Op::Band));
        assert_eq!(fi_op(MPI_BOR), Some(Op::Bor));
        assert_eq!(fi_op(MPI_BXOR), Some(Op::Bxor));
        assert_eq!(fi_op(MPI_LAND), Some(Op::Land));
        assert_eq!(fi_op(MPI_LOR), Some(Op::Lor));
        assert_eq!(fi_op(MPI_LXOR), Some(Op::Lxor));
        assert_eq!(fi_op(MPI_REPLACE), Some(Op::Write));
        assert_eq!(fi_op(MPI_NO_OP), Some(Op::Read));
        assert_eq!(fi_op(MPI_MINLOC), None);
        assert_eq!(fi_op(MPI_MAXLOC), None);
        assert_eq!(fi_op(MPI_OP_NULL), None);
    }

    #[test]
    fn a_type_is_native_only_if_every_operation_mpi_allows_on_it_is() {
        let all = |_: Kind, _: Ty, _: Op| true;
        assert_eq!(native_types(&all), (1 << TYPES.len()) - 1);
        // A provider without compare-and-swap on 64-bit integers: those go as messages
        // (every operation on them, not only compare-and-swap), floats stay native.
        let no_cas64 = |k: Kind, t: Ty, _: Op| !(k == Kind::Compare && t == Ty::I64);
        let m = native_types(&no_cas64);
        let native = |h| m & (1 << type_index(h).unwrap()) != 0;
        assert!(!native(MPI_INT64_T) && !native(MPI_LONG) && !native(MPI_LONG_LONG));
        assert!(native(MPI_DOUBLE) && native(MPI_INT) && native(MPI_UINT64_T));
        // Floats need no compare-and-swap but every arithmetic op, fetching too.
        let no_fetch_prod_f64 =
            |k: Kind, t: Ty, o: Op| !(k == Kind::Fetch && t == Ty::F64 && o == Op::Prod);
        let m = native_types(&no_fetch_prod_f64);
        assert_eq!(m & (1 << type_index(MPI_DOUBLE).unwrap()), 0);
        assert_ne!(m & (1 << type_index(MPI_FLOAT).unwrap()), 0);
        // Bitwise ops on doubles are not asked for (MPI does not allow them).
        let no_bits_on_floats = |_: Kind, t: Ty, o: Op| {
            !(matches!(t, Ty::F32 | Ty::F64) && matches!(o, Op::Band | Op::Bor | Op::Cswap))
        };
        assert_eq!(native_types(&no_bits_on_floats), (1 << TYPES.len()) - 1);
        // The window agrees on the types every rank has; one veto (a rank not reaching
        // every other over ofi) leaves none.
        assert_eq!(agree(&[0b111, 0b101, 0b1101], false), 0b101);
        assert_eq!(agree(&[0b111, 0b111], true), 0);
        assert_eq!(agree(&[0b111, 0], false), 0, "a rank without atomics");
        // Nothing at all: no type native.
        assert_eq!(native_types(&|_, _, _| false), 0);
        assert_eq!(names(0b101), ["MPI_SIGNED_CHAR", "MPI_SHORT"]);
    }
}
