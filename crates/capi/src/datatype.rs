//! Datatypes: the predefined MPICH datatypes, derived-type constructors, and pack/unpack
//! of non-contiguous data around the engine's byte interface.
//!
//! A datatype is described by its *blocks*: the byte ranges one element occupies, in
//! type-map order, each tagged with the size of the basic elements it holds (used by
//! `MPI_Get_elements`). Adjacent blocks of the same basic size are merged, so a contiguous
//! type has exactly one block.

use crate::consts::*;
use crate::ffi::{
    check_count, copy_cstr, counts_in, inp, out, put, read_cstr, slice_in, slice_out, CountArg,
    MpiResult,
};
use crate::handles::{direct_base, kind, DATATYPE_FIRST};
pub(crate) use crate::objects::{Block, Datatype, OneOrMany};
use crate::state::{lock, State};
use crate::status::{status_bytes, status_set_bytes, MpiStatus};
use crate::type_table::summary;
use std::borrow::Cow;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

const BUILTINS: &[(c_int, &str)] = &[
    // MPICH extension type (2-byte float) used by mpi4py.
    (0x4c00_0246, "MPIX_C_FLOAT16"),
    (MPI_AINT, "MPI_AINT"),
    (MPI_COUNT, "MPI_COUNT"),
    (MPI_OFFSET, "MPI_OFFSET"),
    (MPI_PACKED, "MPI_PACKED"),
    (MPI_SHORT, "MPI_SHORT"),
    (MPI_INT, "MPI_INT"),
    (MPI_LONG, "MPI_LONG"),
    (MPI_LONG_LONG, "MPI_LONG_LONG"),
    (MPI_UNSIGNED_SHORT, "MPI_UNSIGNED_SHORT"),
    (MPI_UNSIGNED, "MPI_UNSIGNED"),
    (MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG"),
    (MPI_UNSIGNED_LONG_LONG, "MPI_UNSIGNED_LONG_LONG"),
    (MPI_FLOAT, "MPI_FLOAT"),
    (MPI_C_FLOAT_COMPLEX, "MPI_C_FLOAT_COMPLEX"),
    (MPI_CXX_FLOAT_COMPLEX, "MPI_CXX_FLOAT_COMPLEX"),
    (MPI_DOUBLE, "MPI_DOUBLE"),
    (MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX"),
    (MPI_CXX_DOUBLE_COMPLEX, "MPI_CXX_DOUBLE_COMPLEX"),
    (MPI_LOGICAL, "MPI_LOGICAL"),
    (MPI_INTEGER, "MPI_INTEGER"),
    (MPI_REAL, "MPI_REAL"),
    (MPI_COMPLEX, "MPI_COMPLEX"),
    (MPI_DOUBLE_PRECISION, "MPI_DOUBLE_PRECISION"),
    (MPI_DOUBLE_COMPLEX, "MPI_DOUBLE_COMPLEX"),
    (MPI_CHARACTER, "MPI_CHARACTER"),
    (MPI_LONG_DOUBLE, "MPI_LONG_DOUBLE"),
    (MPI_C_LONG_DOUBLE_COMPLEX, "MPI_C_LONG_DOUBLE_COMPLEX"),
    (MPI_CXX_LONG_DOUBLE_COMPLEX, "MPI_CXX_LONG_DOUBLE_COMPLEX"),
    (MPI_FLOAT_INT, "MPI_FLOAT_INT"),
    (MPI_DOUBLE_INT, "MPI_DOUBLE_INT"),
    (MPI_LONG_INT, "MPI_LONG_INT"),
    (MPI_2INT, "MPI_2INT"),
    (MPI_SHORT_INT, "MPI_SHORT_INT"),
    (MPI_LONG_DOUBLE_INT, "MPI_LONG_DOUBLE_INT"),
    (MPI_2REAL, "MPI_2REAL"),
    (MPI_2DOUBLE_PRECISION, "MPI_2DOUBLE_PRECISION"),
    (MPI_2INTEGER, "MPI_2INTEGER"),
    (MPI_C_BOOL, "MPI_C_BOOL"),
    (MPI_CXX_BOOL, "MPI_CXX_BOOL"),
    (MPI_WCHAR, "MPI_WCHAR"),
    (MPI_INT8_T, "MPI_INT8_T"),
    (MPI_UINT8_T, "MPI_UINT8_T"),
    (MPI_CHAR, "MPI_CHAR"),
    (MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR"),
    (MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR"),
    (MPI_BYTE, "MPI_BYTE"),
    (MPI_INT16_T, "MPI_INT16_T"),
    (MPI_UINT16_T, "MPI_UINT16_T"),
    (MPI_INT32_T, "MPI_INT32_T"),
    (MPI_UINT32_T, "MPI_UINT32_T"),
    (MPI_INT64_T, "MPI_INT64_T"),
    (MPI_UINT64_T, "MPI_UINT64_T"),
    (MPI_LOGICAL1, "MPI_LOGICAL1"),
    (MPI_INTEGER1, "MPI_INTEGER1"),
    (MPI_LOGICAL2, "MPI_LOGICAL2"),
    (MPI_INTEGER2, "MPI_INTEGER2"),
    (MPI_REAL2, "MPI_REAL2"),
    (MPI_LOGICAL4, "MPI_LOGICAL4"),
    (MPI_INTEGER4, "MPI_INTEGER4"),
    (MPI_REAL4, "MPI_REAL4"),
    (MPI_COMPLEX4, "MPI_COMPLEX4"),
    (MPI_LOGICAL8, "MPI_LOGICAL8"),
    (MPI_INTEGER8, "MPI_INTEGER8"),
    (MPI_REAL8, "MPI_REAL8"),
    (MPI_COMPLEX8, "MPI_COMPLEX8"),
    (MPI_LOGICAL16, "MPI_LOGICAL16"),
    (MPI_INTEGER16, "MPI_INTEGER16"),
    (MPI_REAL16, "MPI_REAL16"),
    (MPI_COMPLEX16, "MPI_COMPLEX16"),
    (MPI_COMPLEX32, "MPI_COMPLEX32"),
];

impl Datatype {
    /// The object of constituent `i` (the type of handle `types[i]`): `type_objs[i]`, or
    /// the predefined type itself when `type_objs` is empty (every constituent is
    /// predefined: see [`register`]).
    pub(crate) fn constituent(&self, i: usize) -> Option<&Arc<Datatype>> {
        if self.type_objs.is_empty() {
            predefined(*self.types.get(i)?)
        } else {
            self.type_objs.get(i)
        }
    }
    /// The objects of all constituents, in the order of `types` ([`Datatype::constituent`]).
    pub(crate) fn constituents(&self) -> impl Iterator<Item = &Arc<Datatype>> {
        (0..self.types.len()).filter_map(|i| self.constituent(i))
    }
    /// The number of blocks of a struct type and the block length of its block `i`
    /// (`None`: not given), from its `int` or large-count constructor's arguments.
    pub(crate) fn struct_arg(&self, i: usize) -> Option<i64> {
        if self.counts.is_empty() {
            self.ints.get(i).map(|&n| n.into())
        } else {
            self.counts.get(i).copied()
        }
    }
    /// Extent (`ub - lb`).
    pub fn extent(&self) -> isize {
        self.ub - self.lb
    }
    /// True when `count` elements form one contiguous byte range starting at `true_lb`.
    pub fn is_contiguous(&self) -> bool {
        match self.blocks.as_slice() {
            [] => true,
            [b] => b.len as isize == self.extent() && b.disp == self.lb,
            _ => false,
        }
    }
    /// Number of basic elements in one element of this type.
    pub fn elements_per_item(&self) -> usize {
        self.blocks
            .iter()
            .map(|b| b.len / b.elem.max(1) as usize)
            .sum()
    }
    /// Count of whole items in `bytes`, or `None` if it is not a multiple of the size.
    pub fn count_of(&self, bytes: usize) -> Option<usize> {
        if self.size == 0 {
            return Some(0);
        }
        (bytes % self.size == 0).then_some(bytes / self.size)
    }
    /// Number of basic elements in `bytes` of packed data.
    pub fn elements_of(&self, bytes: usize) -> usize {
        if self.size == 0 {
            return 0;
        }
        let mut n = (bytes / self.size) * self.elements_per_item();
        let mut rem = bytes % self.size;
        for b in &self.blocks {
            if rem == 0 {
                break;
            }
            let take = rem.min(b.len);
            n += take / b.elem.max(1) as usize;
            rem -= take;
        }
        n
    }

    /// A new, uncommitted, unnamed derived type with this type's layout (size, bounds,
    /// blocks, basic element type) and an empty envelope: what `MPI_Type_dup` and
    /// `MPI_Type_create_resized` start from, without copying the envelope and name that
    /// they replace.
    fn layout_copy(&self) -> Self {
        Datatype::derived(
            self.size,
            (self.lb, self.ub),
            (self.true_lb, self.true_ub),
            self.blocks.clone(),
            self.basic,
        )
    }

    /// A new, uncommitted, unnamed derived type of this layout (`size`, `(lb, ub)`,
    /// `(true_lb, true_ub)`, `blocks`, basic element type) with an empty envelope, which
    /// the constructor that makes it fills in.
    fn derived(
        size: usize,
        (lb, ub): (isize, isize),
        (true_lb, true_ub): (isize, isize),
        blocks: Vec<Block>,
        basic: Option<c_int>,
    ) -> Self {
        Datatype {
            size,
            lb,
            ub,
            true_lb,
            true_ub,
            blocks,
            committed: false,
            predefined: false,
            name: Cow::Borrowed(""),
            combiner: 0,
            ints: vec![],
            aints: vec![],
            counts: vec![],
            types: OneOrMany::default(),
            type_objs: OneOrMany::default(),
            basic,
        }
    }

    fn basic(handle: c_int, name: &'static str, size: usize, elem: u32) -> Self {
        Datatype {
            size,
            lb: 0,
            ub: size as isize,
            true_lb: 0,
            true_ub: size as isize,
            blocks: if size == 0 {
                vec![]
            } else {
                vec![Block {
                    disp: 0,
                    len: size,
                    elem,
                }]
            },
            committed: true,
            predefined: true,
            name: Cow::Borrowed(name),
            combiner: MPI_COMBINER_NAMED,
            ints: vec![],
            aints: vec![],
            counts: vec![],
            types: OneOrMany::default(),
            type_objs: OneOrMany::default(),
            basic: Some(handle),
        }
    }

    /// MPICH's `{value, int}` pair types (for MINLOC/MAXLOC). A pair without a gap (the
    /// 4-byte value of `MPI_FLOAT_INT`) is one contiguous block of 4-byte elements, as
    /// `MPI_2INT` is: the collectives then move and reduce it in place (AVX2 pair kernels)
    /// instead of packing it field by field (1 MiB allreduce: 5 ms, against 84 µs for
    /// `MPI_2INT`).
    fn pair(handle: c_int, name: &'static str, vsize: usize, align: usize) -> Self {
        let ioff = vsize.max(4).next_multiple_of(4);
        let extent = (ioff + 4).next_multiple_of(align);
        if vsize == 4 && extent == 8 {
            return Datatype::basic(handle, name, extent, 4);
        }
        Datatype {
            size: vsize + 4,
            lb: 0,
            ub: extent as isize,
            true_lb: 0,
            true_ub: (ioff + 4) as isize,
            blocks: vec![
                Block {
                    disp: 0,
                    len: vsize,
                    elem: vsize as u32,
                },
                Block {
                    disp: ioff as isize,
                    len: 4,
                    elem: 4,
                },
            ],
            committed: true,
            predefined: true,
            name: Cow::Borrowed(name),
            combiner: MPI_COMBINER_NAMED,
            ints: vec![],
            aints: vec![],
            counts: vec![],
            types: OneOrMany::default(),
            type_objs: OneOrMany::default(),
            basic: Some(handle),
        }
    }
}

/// The predefined datatypes, built once.
fn builtins() -> &'static HashMap<c_int, Arc<Datatype>> {
    static B: OnceLock<HashMap<c_int, Arc<Datatype>>> = OnceLock::new();
    B.get_or_init(|| {
        let mut m = HashMap::new();
        for &(h, name) in BUILTINS {
            let t = match h {
                MPI_FLOAT_INT => Datatype::pair(h, name, 4, 4),
                MPI_DOUBLE_INT => Datatype::pair(h, name, 8, 8),
                MPI_LONG_INT => Datatype::pair(h, name, 8, 8),
                MPI_SHORT_INT => Datatype::pair(h, name, 2, 4),
                MPI_LONG_DOUBLE_INT => Datatype::pair(h, name, 16, 16),
                MPI_2INT | MPI_2REAL | MPI_2DOUBLE_PRECISION | MPI_2INTEGER => {
                    let size = ((h >> 8) & 0xff) as usize;
                    Datatype::basic(h, name, size, (size / 2) as u32)
                }
                _ => {
                    let size = ((h >> 8) & 0xff) as usize;
                    Datatype::basic(h, name, size, size as u32)
                }
            };
            m.entry(h).or_insert_with(|| Arc::new(t));
        }
        m
    })
}

/// The predefined datatype `h`, without the global state's lock (the one-sided progress
/// thread combines accumulate data with it while an application thread may hold the lock).
pub(crate) fn builtin(h: c_int) -> Option<Arc<Datatype>> {
    predefined(h).cloned()
}

/// Whether `h` is a handle of the derived types' table (not a predefined type's).
#[inline(always)]
fn is_table_handle(h: c_int) -> bool {
    let hu = h as u32;
    hu & 0xfc00_0000 == direct_base(kind::DATATYPE) && hu & 0x03ff_ffff >= DATATYPE_FIRST
}

/// The predefined datatype `h`, found without hashing: the [`BuiltinTable`] slot for the
/// `0x4c00_SSII` handles, a short scan of the others (the pair types, the handles whose
/// slot is taken). Derived-type handles, looked up at every datatype call (mpi4py's
/// `dtlib` decodes and frees millions of them), never reach [`builtins`]' hash.
#[inline]
fn predefined(h: c_int) -> Option<&'static Arc<Datatype>> {
    let hu = h as u32;
    if is_table_handle(h) {
        // A handle of the derived types' table (`MPI_Type_free`, `MPI_Type_commit` and
        // `MPI_Type_get_contents` ask about every one): not predefined.
        return None;
    }
    if hu >> 16 == 0x4c00 {
        if let Some((bh, t)) = &builtin_table()[(h as u32 & 0xff) as usize] {
            if *bh == h {
                return Some(t);
            }
        }
    }
    builtin_rest()
        .iter()
        .find(|(bh, _)| *bh == h)
        .map(|(_, t)| t)
}

/// The predefined datatypes not in the [`BuiltinTable`], built once.
fn builtin_rest() -> &'static [(c_int, Arc<Datatype>)] {
    static R: OnceLock<Vec<(c_int, Arc<Datatype>)>> = OnceLock::new();
    R.get_or_init(|| {
        let table = builtin_table();
        builtins()
            .iter()
            .filter(|&(&h, _)| {
                (h as u32) >> 16 != 0x4c00
                    || table[(h as u32 & 0xff) as usize]
                        .as_ref()
                        .is_none_or(|(bh, _)| *bh != h)
            })
            .map(|(&h, d)| (h, d.clone()))
            .collect()
    })
}

/// Direct table of the predefined datatypes with MPICH's builtin encoding
/// (`0x4c00_SSII`: size `SS`, index `II`), indexed by the low byte: slot `II` holds the
/// handle and its type, so a lookup is a compare instead of hashing. A handle whose slot
/// is taken by another one stays in [`builtins`] only.
type BuiltinTable = [Option<(c_int, Arc<Datatype>)>; 256];

/// The [`BuiltinTable`], built once.
fn builtin_table() -> &'static BuiltinTable {
    static T: OnceLock<BuiltinTable> = OnceLock::new();
    T.get_or_init(|| {
        let mut t = [const { None }; 256];
        for (&h, d) in builtins() {
            let slot = &mut t[(h as u32 & 0xff) as usize];
            if (h as u32) >> 16 == 0x4c00 && slot.is_none() {
                *slot = Some((h, d.clone()));
            }
        }
        t
    })
}

/// The constituent objects a new type keeps ([`Datatype::type_objs`]).
type Objs = OneOrMany<Arc<Datatype>>;

impl State {
    /// The datatype of handle `h` (predefined or derived).
    pub fn dtype(&self, h: c_int) -> MpiResult<Arc<Datatype>> {
        self.dtype_ref(h).cloned()
    }
    /// The datatype of handle `h` (predefined or derived), borrowed from the state: the
    /// queries that only read it (`MPI_Type_get_envelope`, the extents) take no reference
    /// count, two atomic operations fewer per call. Derived handles are looked up first:
    /// one compare and an index into the table, where a predefined handle outside the
    /// direct builtin table is found by a scan (which a derived handle walked to its end).
    pub fn dtype_ref(&self, h: c_int) -> MpiResult<&Arc<Datatype>> {
        if let Some(t) = self.types.get(h) {
            return Ok(t);
        }
        predefined_or_err(h)
    }
    /// The old type of handle `h` of a constructor, with what the new type keeps of it
    /// ([`Datatype::type_objs`], for [`register`]): its object if it is derived, nothing if
    /// it is predefined. One lookup, where [`register`] looking it up again by handle
    /// cost a dup or resize of a derived type ~100 instructions.
    pub fn old_type(&self, h: c_int) -> MpiResult<(&Arc<Datatype>, Objs)> {
        if let Some(t) = self.types.get(h) {
            return Ok((t, OneOrMany::One(Arc::clone(t))));
        }
        Ok((predefined_or_err(h)?, OneOrMany::default()))
    }
    /// The old types of handles `hs` of a struct constructor and what the new type keeps
    /// of them ([`Datatype::type_objs`]): all their objects if any is derived, none if all
    /// are predefined.
    pub fn old_types(&self, hs: &[c_int]) -> MpiResult<(Vec<&Arc<Datatype>>, Objs)> {
        let mut derived = false;
        let mut olds = Vec::with_capacity(hs.len());
        for &h in hs {
            olds.push(match self.types.get(h) {
                Some(t) => {
                    derived = true;
                    t
                }
                None => predefined_or_err(h)?,
            });
        }
        let objs = if derived {
            OneOrMany::Many(olds.iter().map(|&t| Arc::clone(t)).collect())
        } else {
            OneOrMany::default()
        };
        Ok((olds, objs))
    }
    /// The datatype of handle `h`, which must be committed (for communication).
    pub fn dtype_committed(&self, h: c_int) -> MpiResult<Arc<Datatype>> {
        let t = self.dtype(h)?;
        if !t.committed {
            mpi_bail!(
                MPI_ERR_TYPE,
                "datatype {h:#x} is not committed (call MPI_Type_commit)"
            );
        }
        Ok(t)
    }
}

/// The predefined datatype of handle `h`, or the error for a handle that is not one (nor
/// a derived type: [`State::dtype_ref`] looked there first).
fn predefined_or_err(h: c_int) -> MpiResult<&'static Arc<Datatype>> {
    match predefined(h) {
        Some(t) => Ok(t),
        None if h == MPI_DATATYPE_NULL => mpi_bail!(MPI_ERR_TYPE, "MPI_DATATYPE_NULL passed"),
        None => mpi_bail!(MPI_ERR_TYPE, "invalid datatype handle {h:#x}"),
    }
}

/// Run `f` on the datatype of handle `h`: a predefined one without the library lock (its
/// object is static and never changes), a derived one under it. For the queries that only
/// read a type (envelope, extents, size), which mpi4py makes on predefined types by the
/// million: the lock's two atomic operations were most of such a call.
fn read_dtype<R>(h: c_int, f: impl FnOnce(&Datatype) -> MpiResult<R>) -> MpiResult<R> {
    if let Some(t) = predefined(h) {
        return f(t);
    }
    let st = lock();
    f(st.dtype_ref(h)?)
}

/// Pack `count` items of `t` starting at `src` into `out` (appending).
///
/// # Safety
/// `src` must point to memory holding `count` items laid out as `t` describes.
pub(crate) unsafe fn pack_into(t: &Datatype, count: usize, src: *const u8, out: &mut Vec<u8>) {
    if t.size == 0 {
        // No bytes, however many items (a large count of an empty type costs nothing).
        return;
    }
    out.reserve(t.size * count);
    if let [b] = t.blocks.as_slice() {
        if b.len as isize == t.extent() {
            if b.len * count == 0 {
                // Nothing to copy (`src` may then be NULL, which no slice may hold).
                return;
            }
            // Contiguous items: one copy of all of them (not one per item).
            // SAFETY: as below; the `count` items are `count * len` adjacent bytes.
            let s =
                unsafe { std::slice::from_raw_parts(src.wrapping_offset(b.disp), b.len * count) };
            out.extend_from_slice(s);
            return;
        }
    }
    // SAFETY: caller contract; `reserve` made room for the `count * size` packed bytes,
    // which the copy writes (all of them) after the vector's length.
    if unsafe { pair_copy::<true>(t, count, src, out.as_mut_ptr().add(out.len())) } {
        // SAFETY: the `count * size` bytes after the length were written just now.
        unsafe { out.set_len(out.len() + t.size * count) };
        return;
    }
    for i in 0..count {
        let base = (i as isize) * t.extent();
        for b in &t.blocks {
            if b.len == 0 {
                continue;
            }
            // `src` may be MPI_BOTTOM (NULL) with absolute displacements, hence the
            // wrapping arithmetic.
            let p = src.wrapping_offset(base + b.disp);
            // SAFETY: the caller guarantees the type map of `count` items is readable.
            let s = unsafe { std::slice::from_raw_parts(p, b.len) };
            out.extend_from_slice(s);
        }
    }
}

/// Unpack packed `data` into `count` items of `t` at `dst`; stops when `data` runs out.
/// Returns the number of bytes consumed.
///
/// # Safety
/// `dst` must point to writable memory for `count` items laid out as `t` describes.
pub(crate) unsafe fn unpack_from(t: &Datatype, count: usize, dst: *mut u8, data: &[u8]) -> usize {
    if t.size == 0 {
        return 0;
    }
    if let [b] = t.blocks.as_slice() {
        if b.len as isize == t.extent() {
            // Contiguous items: one copy of as many bytes as there are (not one per item).
            let n = (b.len * count).min(data.len());
            if n == 0 {
                // Nothing to copy (`dst` may then be NULL, which no copy may take).
                return 0;
            }
            // SAFETY: as below; the `count` items are `count * len` adjacent writable
            // bytes, of which `n` are written.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst.wrapping_offset(b.disp), n) };
            return n;
        }
    }
    // SAFETY: caller contract; `data` holds the `count` packed items when it is this long.
    if data.len() >= t.size * count && unsafe { pair_copy::<false>(t, count, data.as_ptr(), dst) } {
        return t.size * count;
    }
    let mut pos = 0;
    'outer: for i in 0..count {
        let base = (i as isize) * t.extent();
        for b in &t.blocks {
            if pos >= data.len() {
                break 'outer;
            }
            let n = b.len.min(data.len() - pos);
            if n == 0 {
                continue;
            }
            // `dst` may be MPI_BOTTOM (NULL) with absolute displacements.
            let p = dst.wrapping_offset(base + b.disp);
            // SAFETY: the caller guarantees the type map of `count` items is writable;
            // `data[pos..pos + n]` is in bounds.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr().add(pos), p, n) };
            pos += n;
        }
    }
    pos
}

/// The copy between `count` items of `t` in memory and their packed bytes when `t` has the
/// layout of a value-index pair with a gap (`MPI_SHORT_INT`, `MPI_LONG_INT`,
/// `MPI_DOUBLE_INT`, `MPI_LONG_DOUBLE_INT`, or a derived type with the same map): one loop
/// of fixed-size copies (the value's bytes and the int's, per item) instead of the generic
/// per-block copies, which cost two calls per item. `PACK`: from memory at `src` to packed
/// bytes at `dst`; otherwise from packed bytes to memory, where only the type map's bytes
/// are written (the gap and the padding after the int are not touched). False (nothing
/// done) for any other type.
///
/// # Safety
/// The memory side holds (`PACK`) or has room for `count` items of `t` (their type map's
/// bytes); the packed side `count * t.size` bytes; the two do not overlap.
pub(crate) unsafe fn pair_copy<const PACK: bool>(
    t: &Datatype,
    count: usize,
    src: *const u8,
    dst: *mut u8,
) -> bool {
    let [v, i] = t.blocks.as_slice() else {
        return false;
    };
    let mem = if PACK { src } else { dst.cast_const() };
    if count == 0 || mem.is_null() || t.lb != 0 || v.disp != 0 || i.len != 4 {
        return false;
    }
    // SAFETY: forwarded caller contract for the layout just matched.
    unsafe {
        match (v.len, i.disp, t.extent()) {
            (2, 4, 8) => copy_pairs::<2, 4, 8, PACK>(src, dst, count),
            (8, 8, 16) => copy_pairs::<8, 8, 16, PACK>(src, dst, count),
            (16, 16, 32) => copy_pairs::<16, 16, 32, PACK>(src, dst, count),
            _ => return false,
        }
    }
    true
}

/// [`pair_copy`] for one layout: items `E` bytes apart in memory, each the value's `V`
/// bytes at 0 and an int at `I`; packed, `V + 4` bytes apart.
///
/// # Safety
/// As [`pair_copy`].
#[inline(always)]
unsafe fn copy_pairs<const V: usize, const I: usize, const E: usize, const PACK: bool>(
    src: *const u8,
    dst: *mut u8,
    count: usize,
) {
    let (ss, ds) = if PACK { (E, V + 4) } else { (V + 4, E) };
    let (si, di) = if PACK { (I, V) } else { (V, I) };
    for k in 0..count {
        // SAFETY: item k's value and int are in bounds on both sides (caller contract).
        unsafe {
            let (s, d) = (src.add(k * ss), dst.add(k * ds));
            std::ptr::copy_nonoverlapping(s, d, V);
            std::ptr::copy_nonoverlapping(s.add(si), d.add(di), 4);
        }
    }
}

/// Build a derived type from `(byte displacement, repetitions, old type)` entries: each
/// entry places `repetitions` consecutive copies of the old type at the displacement.
/// The entries come as an iterator, so that a constructor whose entries follow from its
/// arguments (vector, hvector, the indexed blocks) builds no list of them (an allocation
/// and its free per call).
fn build<'a>(entries: impl IntoIterator<Item = (isize, usize, &'a Datatype)>) -> Datatype {
    let entries = entries.into_iter();
    // Room for a block per entry up to a few (the small types mpi4py's `dtlib` builds by
    // the million get one allocation); larger maps grow as before.
    let mut blocks: Vec<Block> = Vec::with_capacity(entries.size_hint().0.min(8));
    let mut size = 0usize;
    let (mut lb, mut ub) = (isize::MAX, isize::MIN);
    let (mut tlb, mut tub) = (isize::MAX, isize::MIN);
    let mut basic: Option<Option<c_int>> = None;
    for (disp, reps, old) in entries {
        if reps == 0 {
            continue;
        }
        let ext = old.extent();
        let last = disp + (reps as isize - 1) * ext;
        lb = lb.min(disp.min(last) + old.lb);
        ub = ub.max(disp.max(last) + old.ub);
        if old.size > 0 {
            tlb = tlb.min(disp.min(last) + old.true_lb);
            tub = tub.max(disp.max(last) + old.true_ub);
        }
        size += reps * old.size;
        basic = Some(match basic {
            None => old.basic,
            Some(b) if b == old.basic => b,
            Some(_) => None,
        });
        // A contiguous old type repeated back to back is one block: O(1) instead of one
        // step per repetition (matters for huge counts).
        if let [b] = old.blocks.as_slice() {
            if old.is_contiguous() {
                let nb = Block {
                    disp: disp + b.disp,
                    len: b.len * reps,
                    elem: b.elem,
                };
                match blocks.last_mut() {
                    Some(p) if p.elem == nb.elem && p.disp + p.len as isize == nb.disp => {
                        p.len += nb.len
                    }
                    _ => blocks.push(nb),
                }
                continue;
            }
        }
        for r in 0..reps {
            let off = disp + r as isize * ext;
            for b in &old.blocks {
                let nb = Block {
                    disp: off + b.disp,
                    ..*b
                };
                match blocks.last_mut() {
                    Some(p) if p.elem == nb.elem && p.disp + p.len as isize == nb.disp => {
                        p.len += nb.len
                    }
                    _ => blocks.push(nb),
                }
            }
        }
    }
    if lb > ub {
        lb = 0;
        ub = 0;
    }
    if tlb > tub {
        tlb = 0;
        tub = 0;
    }
    Datatype::derived(size, (lb, ub), (tlb, tub), blocks, basic.flatten())
}

/// The name of predefined datatype `h` (`MPI_INT`, ...), if it is one.
pub(crate) fn builtin_name(h: c_int) -> Option<&'static str> {
    BUILTINS.iter().find(|&&(b, _)| b == h).map(|&(_, n)| n)
}

/// Alignment of a predefined type (MPICH's): the natural alignment of the C type, the
/// component's for complex types, the largest member's for the pair types.
fn named_alignment(h: c_int, size: usize) -> usize {
    match h {
        MPI_FLOAT_INT | MPI_SHORT_INT | MPI_2INT | MPI_2REAL | MPI_2INTEGER => 4,
        MPI_DOUBLE_INT | MPI_LONG_INT | MPI_2DOUBLE_PRECISION => 8,
        MPI_LONG_DOUBLE_INT => 16,
        MPI_C_FLOAT_COMPLEX
        | MPI_CXX_FLOAT_COMPLEX
        | MPI_C_DOUBLE_COMPLEX
        | MPI_CXX_DOUBLE_COMPLEX
        | MPI_C_LONG_DOUBLE_COMPLEX
        | MPI_CXX_LONG_DOUBLE_COMPLEX
        | MPI_COMPLEX
        | MPI_DOUBLE_COMPLEX
        | MPI_COMPLEX4
        | MPI_COMPLEX8
        | MPI_COMPLEX16
        | MPI_COMPLEX32 => (size / 2).max(1),
        _ => size.max(1),
    }
}

/// Alignment of a datatype: its predefined type's for a named type, else the largest
/// alignment among the constituents that occur in its type map.
pub(crate) fn alignment(t: &Datatype) -> usize {
    // The f90 types (`MPI_Type_create_f90_*`) are predefined types shaped as a sized one.
    if matches!(
        t.combiner,
        MPI_COMBINER_NAMED
            | 0
            | MPI_COMBINER_F90_REAL
            | MPI_COMBINER_F90_COMPLEX
            | MPI_COMBINER_F90_INTEGER
    ) {
        return t.basic.map_or(1, |h| named_alignment(h, t.size));
    }
    if t.combiner == MPI_COMBINER_STRUCT {
        return t
            .constituents()
            .enumerate()
            .filter(|(i, _)| t.struct_arg(i + 1).is_some_and(|n| n > 0))
            .map(|(_, o)| alignment(o))
            .max()
            .unwrap_or(1);
    }
    t.constituent(0).map_or(1, |o| alignment(o))
}

/// MPI_Type_create_struct's padding (MPI-3.1 §4.1.6, as MPICH does it): the extent is
/// rounded up to a multiple of the largest member alignment, unless the upper bound is set
/// by a member with an explicit extent (`MPI_Type_create_resized`).
fn pad_struct(t: &mut Datatype, entries: &[(isize, usize, &Datatype)]) {
    let mut align = 1;
    let mut top: Option<(isize, bool)> = None;
    for &(disp, reps, old) in entries {
        if reps == 0 {
            continue;
        }
        align = align.max(alignment(old));
        let ext = old.extent();
        let ub = disp.max(disp + (reps as isize - 1) * ext) + old.ub;
        let explicit = old.combiner == MPI_COMBINER_RESIZED;
        top = match top {
            Some((u, e)) if u > ub || (u == ub && !e) => Some((u, e)),
            _ => Some((ub, explicit)),
        };
    }
    let ext = t.extent();
    if let (Some((_, false)), true) = (top, ext > 0) {
        t.ub = t.lb + (ext as usize).next_multiple_of(align) as isize;
    }
}

/// Whether `combiner` is one of the F90 parameterized types (`f90.rs`; predefined: not
/// freed).
fn is_f90(combiner: c_int) -> bool {
    matches!(
        combiner,
        MPI_COMBINER_F90_REAL | MPI_COMBINER_F90_COMPLEX | MPI_COMBINER_F90_INTEGER
    )
}

/// Insert a new derived type (with its envelope: combiner and constructor arguments, and
/// its constituent types' handles `types`, all valid under the lock `st` is) and write its
/// handle. The new entry holds the derived constituents' handles and keeps their objects
/// `objs` (`type_objs`, as [`State::old_type`] and [`State::old_types`] give them: all
/// constituents' in the order of `types` if any is derived); predefined ones are static
/// and found again by handle, so a type made of predefined types alone (most are) keeps
/// none (`objs` empty): no allocation and no reference counts for them
/// ([`Datatype::constituent`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn register(
    st: &mut State,
    mut t: Datatype,
    combiner: c_int,
    ints: Vec<c_int>,
    aints: Vec<isize>,
    types: OneOrMany<c_int>,
    objs: Objs,
    newtype: *mut c_int,
) -> MpiResult {
    debug_assert!(objs.is_empty() || objs.len() == types.len());
    t.type_objs = objs;
    t.combiner = combiner;
    t.ints = ints;
    t.aints = aints;
    t.types = types;
    // The handles were looked up under this lock: the new entry holds the derived ones.
    let h = st.types.insert_holding(Arc::new(t));
    out(newtype, h, "newtype")
}

fn ints_of(p: *const c_int, n: usize, what: &str) -> MpiResult<Vec<c_int>> {
    Ok(slice_in(p, n, what)?.to_vec())
}

/// How a datatype constructor records its arguments for `MPI_Type_get_contents(_c)`
/// (MPI 4.1 §5.1.13): the `int` form's counts among the integers and its displacements
/// among the addresses; the large-count `_c` form's counts and displacements all among
/// the large counts. Plain integers (`ndims`, `order`, ...) are integers in both.
struct Envelope {
    large: bool,
    ints: Vec<c_int>,
    aints: Vec<isize>,
    counts: Vec<i64>,
}

impl Envelope {
    /// The envelope of a constructor whose count type is `C`.
    fn new<C: CountArg>() -> Self {
        Envelope {
            large: C::LARGE,
            ints: vec![],
            aints: vec![],
            counts: vec![],
        }
    }
    /// The envelope of a constructor of count type `C` with `N` count and `M` displacement
    /// arguments, each vector made from the arrays at its size (one allocation, none for
    /// an empty one): the `count`/`addr` chain grew an empty vector (`vector_c` + free
    /// ran ~50 instructions more, with `Envelope::count` out of line).
    #[inline(always)]
    fn fixed<C: CountArg, const N: usize, const M: usize>(
        counts: [i64; N],
        addrs: [isize; M],
    ) -> Self {
        if C::LARGE {
            let counts = if M == 0 {
                Vec::from(counts)
            } else {
                let mut v = Vec::with_capacity(N + M);
                v.extend_from_slice(&counts);
                v.extend(addrs.map(|a| a as i64));
                v
            };
            Envelope {
                large: true,
                ints: vec![],
                aints: vec![],
                counts,
            }
        } else {
            Envelope {
                large: false,
                ints: Vec::from(counts.map(|c| c as c_int)),
                aints: Vec::from(addrs),
                counts: vec![],
            }
        }
    }
    /// Room for `counts` count and `addrs` displacement arguments (in the vectors of this
    /// form), so that the envelope of a constructor is allocated once. Inlined: out of line
    /// (once `vector` and `resized` no longer called it), create_struct_c(3) + free ran
    /// ~70 instructions more.
    #[inline(always)]
    fn reserve(self, counts: usize, addrs: usize) -> Self {
        self.reserve_with_ints(0, counts, addrs)
    }
    /// [`Envelope::reserve`] with room for `ints` plain integer arguments as well.
    #[inline(always)]
    fn reserve_with_ints(mut self, ints: usize, counts: usize, addrs: usize) -> Self {
        if self.large {
            self.ints.reserve_exact(ints);
            self.counts.reserve_exact(counts + addrs);
        } else {
            self.ints.reserve_exact(ints + counts);
            self.aints.reserve_exact(addrs);
        }
        self
    }
    /// A plain integer argument.
    fn int(mut self, v: impl IntoIterator<Item = c_int>) -> Self {
        self.ints.extend(v);
        self
    }
    /// Count arguments (of type `C` of the constructor: they fit in an `int` in the
    /// `int` form).
    fn count(mut self, v: impl IntoIterator<Item = i64>) -> Self {
        if self.large {
            self.counts.extend(v);
        } else {
            self.ints.extend(v.into_iter().map(|c| c as c_int));
        }
        self
    }
    /// Displacement (address-sized) arguments.
    fn addr(mut self, v: impl IntoIterator<Item = isize>) -> Self {
        if self.large {
            self.counts.extend(v.into_iter().map(|a| a as i64));
        } else {
            self.aints.extend(v);
        }
        self
    }
    /// Insert the new type `t` with this envelope and its constituent types (handles
    /// `types`, objects kept `objs`; see [`register`]). Inlined, as it was before it took
    /// the objects (out of line, create_struct_c(3) + free ran 3285 instructions, not 3197,
    /// and ~8 ns slower).
    #[inline(always)]
    fn register(
        self,
        st: &mut State,
        mut t: Datatype,
        combiner: c_int,
        (types, objs): (OneOrMany<c_int>, Objs),
        newtype: *mut c_int,
    ) -> MpiResult {
        t.counts = self.counts;
        register(st, t, combiner, self.ints, self.aints, types, objs, newtype)
    }
}

mpi_fn_c! {
    /// `MPI_Type_contiguous`.
    fn PMPI_Type_contiguous / "MPI_Type_contiguous", PMPI_Type_contiguous_c / "MPI_Type_contiguous_c" (count: Count, oldtype: c_int, newtype: *mut c_int) {
        let n = check_count(count)?;
        let mut st = lock();
        let (old, objs) = st.old_type(oldtype)?;
        let old: &Datatype = old;
        let t = build([(0, n, old)]);
        Envelope::new::<Count>().count([count.into()]).register(&mut st, t, MPI_COMBINER_CONTIGUOUS, (OneOrMany::One(oldtype), objs), newtype)
    }
}

mpi_fn_c! {
    /// `MPI_Type_vector`.
    fn PMPI_Type_vector / "MPI_Type_vector", PMPI_Type_vector_c / "MPI_Type_vector_c" (count: Count, blocklength: Count, stride: Count, oldtype: c_int, newtype: *mut c_int) {
        let n = check_count(count)?;
        let bl = check_count(blocklength)?;
        let stride: i64 = stride.into();
        let mut st = lock();
        let (old, objs) = st.old_type(oldtype)?;
        let old: &Datatype = old;
        let ext = old.extent();
        let t = build((0..n).map(|i| (i as isize * stride as isize * ext, bl, old)));
        Envelope::fixed::<Count, 3, 0>([count.into(), blocklength.into(), stride], []).register(&mut st, t, MPI_COMBINER_VECTOR, (OneOrMany::One(oldtype), objs), newtype)
    }
}

mpi_fn_c! {
    /// `MPI_Type_create_hvector` (the stride is an `MPI_Aint`, an `MPI_Count` in the `_c`
    /// form: the same type here).
    fn PMPI_Type_create_hvector / "MPI_Type_create_hvector", PMPI_Type_create_hvector_c / "MPI_Type_create_hvector_c" (count: Count, blocklength: Count, stride: isize, oldtype: c_int, newtype: *mut c_int) {
        let n = check_count(count)?;
        let bl = check_count(blocklength)?;
        let mut st = lock();
        let (old, objs) = st.old_type(oldtype)?;
        let old: &Datatype = old;
        let t = build((0..n).map(|i| (i as isize * stride, bl, old)));
        Envelope::fixed::<Count, 2, 1>([count.into(), blocklength.into()], [stride]).register(&mut st, t, MPI_COMBINER_HVECTOR, (OneOrMany::One(oldtype), objs), newtype)
    }
}

mpi_fn_c! {
    /// `MPI_Type_indexed`.
    fn PMPI_Type_indexed / "MPI_Type_indexed", PMPI_Type_indexed_c / "MPI_Type_indexed_c" (count: Count, blocklens: *const Count, displs: *const Count, oldtype: c_int, newtype: *mut c_int) {
        let n = check_count(count)?;
        let bl = slice_in(blocklens, n, "array_of_blocklengths")?;
        let d = slice_in(displs, n, "array_of_displacements")?;
        let mut st = lock();
        let (old, objs) = st.old_type(oldtype)?;
        let old: &Datatype = old;
        let mut e = Vec::with_capacity(n);
        for i in 0..n {
            e.push((i64::from(d[i]) as isize * old.extent(), check_count(bl[i])?, old));
        }
        let t = build(e.iter().copied());
        Envelope::new::<Count>().reserve(1 + 2 * n, 0).count([count.into()]).count(bl.iter().map(|&c| c.into())).count(d.iter().map(|&c| c.into())).register(&mut st, t, MPI_COMBINER_INDEXED, (OneOrMany::One(oldtype), objs), newtype)
    }
}

mpi_fn_c! {
    /// `MPI_Type_create_hindexed`.
    fn PMPI_Type_create_hindexed / "MPI_Type_create_hindexed", PMPI_Type_create_hindexed_c / "MPI_Type_create_hindexed_c" (count: Count, blocklens: *const Count, displs: *const isize, oldtype: c_int, newtype: *mut c_int) {
        let n = check_count(count)?;
        let bl = slice_in(blocklens, n, "array_of_blocklengths")?;
        let d = slice_in(displs, n, "array_of_displacements")?;
        let mut st = lock();
        let (old, objs) = st.old_type(oldtype)?;
        let old: &Datatype = old;
        let mut e = Vec::with_capacity(n);
        for i in 0..n {
            e.push((d[i], check_count(bl[i])?, old));
        }
        let t = build(e.iter().copied());
        Envelope::new::<Count>().reserve(1 + n, n).count([count.into()]).count(bl.iter().map(|&c| c.into())).addr(d.iter().copied()).register(&mut st, t, MPI_COMBINER_HINDEXED, (OneOrMany::One(oldtype), objs), newtype)
    }
}

mpi_fn_c! {
    /// `MPI_Type_create_indexed_block`.
    fn PMPI_Type_create_indexed_block / "MPI_Type_create_indexed_block", PMPI_Type_create_indexed_block_c / "MPI_Type_create_indexed_block_c" (count: Count, blocklength: Count, displs: *const Count, oldtype: c_int, newtype: *mut c_int) {
        let n = check_count(count)?;
        let bl = check_count(blocklength)?;
        let d = slice_in(displs, n, "array_of_displacements")?;
        let mut st = lock();
        let (old, objs) = st.old_type(oldtype)?;
        let old: &Datatype = old;
        let ext = old.extent();
        let t = build(d.iter().map(|&x| (i64::from(x) as isize * ext, bl, old)));
        Envelope::new::<Count>().reserve(2 + n, 0).count([count.into(), blocklength.into()]).count(d.iter().map(|&c| c.into())).register(&mut st, t, MPI_COMBINER_INDEXED_BLOCK, (OneOrMany::One(oldtype), objs), newtype)
    }
}

mpi_fn_c! {
    /// `MPI_Type_create_hindexed_block`.
    fn PMPI_Type_create_hindexed_block / "MPI_Type_create_hindexed_block", PMPI_Type_create_hindexed_block_c / "MPI_Type_create_hindexed_block_c" (count: Count, blocklength: Count, displs: *const isize, oldtype: c_int, newtype: *mut c_int) {
        let n = check_count(count)?;
        let bl = check_count(blocklength)?;
        let d = slice_in(displs, n, "array_of_displacements")?;
        let mut st = lock();
        let (old, objs) = st.old_type(oldtype)?;
        let old: &Datatype = old;
        let t = build(d.iter().map(|&x| (x, bl, old)));
        Envelope::new::<Count>().reserve(2, n).count([count.into(), blocklength.into()]).addr(d.iter().copied()).register(&mut st, t, MPI_COMBINER_HINDEXED_BLOCK, (OneOrMany::One(oldtype), objs), newtype)
    }
}

mpi_fn_c! {
    /// `MPI_Type_create_struct`.
    fn PMPI_Type_create_struct / "MPI_Type_create_struct", PMPI_Type_create_struct_c / "MPI_Type_create_struct_c" (count: Count, blocklens: *const Count, displs: *const isize, types: *const c_int, newtype: *mut c_int) {
        let n = check_count(count)?;
        let bl = slice_in(blocklens, n, "array_of_blocklengths")?;
        let d = slice_in(displs, n, "array_of_displacements")?;
        let ty = ints_of(types, n, "array_of_types")?;
        let mut st = lock();
        let (olds, objs) = st.old_types(&ty)?;
        let mut e = Vec::with_capacity(n);
        for i in 0..n {
            e.push((d[i], check_count(bl[i])?, &**olds[i]));
        }
        let mut t = build(e.iter().copied());
        pad_struct(&mut t, &e);
        Envelope::new::<Count>().reserve(1 + n, n).count([count.into()]).count(bl.iter().map(|&c| c.into())).addr(d.iter().copied()).register(&mut st, t, MPI_COMBINER_STRUCT, (ty.into(), objs), newtype)
    }
}

mpi_fn_c! {
    /// `MPI_Type_create_resized`.
    fn PMPI_Type_create_resized / "MPI_Type_create_resized", PMPI_Type_create_resized_c / "MPI_Type_create_resized_c" (oldtype: c_int, lb: isize, extent: isize, newtype: *mut c_int) {
        let mut st = lock();
        let (old, objs) = st.old_type(oldtype)?;
        let old: &Datatype = old;
        let mut t = old.layout_copy();
        t.lb = lb;
        t.ub = lb + extent;
        Envelope::fixed::<Count, 0, 2>([], [lb, extent]).register(&mut st, t, MPI_COMBINER_RESIZED, (OneOrMany::One(oldtype), objs), newtype)
    }
}

mpi_fn_c! {
    /// `MPI_Type_create_subarray`.
    fn PMPI_Type_create_subarray / "MPI_Type_create_subarray", PMPI_Type_create_subarray_c / "MPI_Type_create_subarray_c" (ndims: c_int, sizes: *const Count, subsizes: *const Count, starts: *const Count, order: c_int, oldtype: c_int, newtype: *mut c_int) {
        let nd = check_count(ndims)?;
        if nd == 0 {
            mpi_bail!(MPI_ERR_DIMS, "ndims must be positive");
        }
        let sz = slice_in(sizes, nd, "array_of_sizes")?;
        let sub = slice_in(subsizes, nd, "array_of_subsizes")?;
        let stt = slice_in(starts, nd, "array_of_starts")?;
        for i in 0..nd {
            let (z, u, o): (i64, i64, i64) = (sz[i].into(), sub[i].into(), stt[i].into());
            if z <= 0 || u < 0 || o < 0 || u + o > z {
                mpi_bail!(MPI_ERR_ARG, "invalid subarray dimension {i}: size {z} subsize {u} start {o}");
            }
        }
        if order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN {
            mpi_bail!(MPI_ERR_ARG, "invalid order {order}");
        }
        // Work in C order: dimension `d` of the arguments' `v` in C order (reversed for
        // Fortran order), read in place (no copies of the arrays).
        let fortran = order == MPI_ORDER_FORTRAN;
        let at = |v: &[Count], d: usize| -> i64 { v[if fortran { nd - 1 - d } else { d }].into() };
        let mut st = lock();
        let (old, objs) = st.old_type(oldtype)?;
        let old: &Datatype = old;
        let ext = old.extent();
        // Per dimension: its row stride in elements and the index of the current row.
        let mut dim = vec![(1isize, 0usize); nd];
        for d in (0..nd - 1).rev() {
            dim[d].0 = dim[d + 1].0 * at(sz, d + 1) as isize;
        }
        let inner = at(sub, nd - 1) as usize;
        let outer: usize = (0..nd - 1).map(|d| at(sub, d) as usize).product();
        let mut entries = Vec::with_capacity(outer);
        for _ in 0..outer {
            let mut off = at(stt, nd - 1) as isize;
            for (d, &(stride, i)) in dim[..nd - 1].iter().enumerate() {
                off += (at(stt, d) as isize + i as isize) * stride;
            }
            entries.push((off * ext, inner, old));
            for d in (0..nd - 1).rev() {
                dim[d].1 += 1;
                if dim[d].1 < at(sub, d) as usize {
                    break;
                }
                dim[d].1 = 0;
            }
        }
        let mut t = build(entries.iter().copied());
        t.lb = 0;
        t.ub = dim[0].0 * at(sz, 0) as isize * ext;
        Envelope::new::<Count>().reserve_with_ints(2, 3 * nd, 0).int([ndims]).count(sz.iter().map(|&c| c.into())).count(sub.iter().map(|&c| c.into())).count(stt.iter().map(|&c| c.into())).int([order]).register(&mut st, t, MPI_COMBINER_SUBARRAY, (OneOrMany::One(oldtype), objs), newtype)
    }
}

/// Indices of one dimension of a distributed array owned by process coordinate `c`.
fn darray_owned(
    g: usize,
    distrib: c_int,
    darg: c_int,
    p: usize,
    c: usize,
) -> MpiResult<Vec<usize>> {
    match distrib {
        MPI_DISTRIBUTE_NONE => {
            if p != 1 {
                mpi_bail!(
                    MPI_ERR_ARG,
                    "MPI_DISTRIBUTE_NONE needs a process grid size of 1, got {p}"
                );
            }
            Ok((0..g).collect())
        }
        MPI_DISTRIBUTE_BLOCK => {
            let b = if darg == MPI_DISTRIBUTE_DFLT_DARG {
                g.div_ceil(p)
            } else {
                darg.max(0) as usize
            };
            if b == 0 || b * p < g {
                mpi_bail!(
                    MPI_ERR_ARG,
                    "block size {b} too small for {g} elements on {p} processes"
                );
            }
            Ok((c * b..((c + 1) * b).min(g)).collect())
        }
        MPI_DISTRIBUTE_CYCLIC => {
            let b = if darg == MPI_DISTRIBUTE_DFLT_DARG {
                1
            } else {
                darg.max(0) as usize
            };
            if b == 0 {
                mpi_bail!(MPI_ERR_ARG, "cyclic block size must be positive");
            }
            Ok((0..g).filter(|j| (j / b) % p == c).collect())
        }
        _ => mpi_bail!(MPI_ERR_ARG, "invalid distribution {distrib}"),
    }
}

mpi_fn_c! {
    /// `MPI_Type_create_darray`.
    fn PMPI_Type_create_darray / "MPI_Type_create_darray", PMPI_Type_create_darray_c / "MPI_Type_create_darray_c" (size: c_int, rank: c_int, ndims: c_int, gsizes: *const Count, distribs: *const c_int, dargs: *const c_int, psizes: *const c_int, order: c_int, oldtype: c_int, newtype: *mut c_int) {
        let nd = check_count(ndims)?;
        if size <= 0 || rank < 0 || rank >= size {
            mpi_bail!(MPI_ERR_ARG, "invalid size {size} / rank {rank}");
        }
        if order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN {
            mpi_bail!(MPI_ERR_ARG, "invalid order {order}");
        }
        let gs = counts_in(gsizes, nd, "array_of_gsizes")?;
        let ds = ints_of(distribs, nd, "array_of_distribs")?;
        let da = ints_of(dargs, nd, "array_of_dargs")?;
        let ps = ints_of(psizes, nd, "array_of_psizes")?;
        if gs.iter().any(|&x| x <= 0) || ps.iter().any(|&x| x <= 0) {
            mpi_bail!(MPI_ERR_ARG, "sizes must be positive");
        }
        if ps.iter().map(|&x| x as i64).product::<i64>() != size as i64 {
            mpi_bail!(MPI_ERR_ARG, "the process grid does not have {size} processes");
        }
        // Process coordinates: row-major in the process grid.
        let mut coords = vec![0usize; nd];
        let mut r = rank as usize;
        for d in (0..nd).rev() {
            coords[d] = r % ps[d] as usize;
            r /= ps[d] as usize;
        }
        let owned = (0..nd)
            .map(|d| darray_owned(gs[d] as usize, ds[d], da[d], ps[d] as usize, coords[d]))
            .collect::<MpiResult<Vec<_>>>()?;
        // Dimensions from slowest to fastest varying in memory.
        let dims: Vec<usize> = if order == MPI_ORDER_C { (0..nd).collect() } else { (0..nd).rev().collect() };
        let mut stride = vec![1isize; nd];
        for w in (0..nd.saturating_sub(1)).rev() {
            stride[dims[w]] = stride[dims[w + 1]] * gs[dims[w + 1]] as isize;
        }
        let mut st = lock();
        let (old, objs) = st.old_type(oldtype)?;
        let old: &Datatype = old;
        let ext = old.extent();
        let mut entries = Vec::new();
        if nd > 0 && owned.iter().all(|o| !o.is_empty()) {
            let mut idx = vec![0usize; nd];
            'outer: loop {
                let off: isize = (0..nd).map(|d| owned[d][idx[d]] as isize * stride[d]).sum();
                entries.push((off * ext, 1usize, old));
                for w in (0..nd).rev() {
                    let d = dims[w];
                    idx[d] += 1;
                    if idx[d] < owned[d].len() {
                        continue 'outer;
                    }
                    idx[d] = 0;
                }
                break;
            }
        }
        let mut t = build(entries.iter().copied());
        t.lb = 0;
        t.ub = gs.iter().map(|&x| x as isize).product::<isize>() * ext;
        Envelope::new::<Count>().int([size, rank, ndims]).count(gs).int(ds).int(da).int(ps).int([order]).register(&mut st, t, MPI_COMBINER_DARRAY, (OneOrMany::One(oldtype), objs), newtype)
    }
}

mpi_fn! {
    /// `MPI_Type_dup`.
    fn PMPI_Type_dup / "MPI_Type_dup" (oldtype: c_int, newtype: *mut c_int) {
        let mut st = lock();
        let (old, objs) = st.old_type(oldtype)?;
        let old: &Datatype = old;
        let mut t = old.layout_copy();
        t.name = old.name.clone();
        t.committed = old.committed;
        register(&mut st, t, MPI_COMBINER_DUP, vec![], vec![], OneOrMany::One(oldtype), objs, newtype)?;
        // Attributes to copy through their callbacks (without the lock): only if the old
        // type has any.
        let copy = st.type_attrs.contains_key(&oldtype);
        drop(st);
        if !copy {
            return Ok(());
        }
        let h = inp(newtype.cast_const(), "newtype")?;
        crate::attrs::type_copy_attrs(oldtype, h)
    }
}

mpi_fn! {
    /// `MPI_Type_commit`. The commit of a committed type (or a predefined one) has nothing
    /// to do: while the call profile is off it is answered before the entry wrapper, from
    /// the type's lock-free summary (its committed flag, [`crate::type_table::committed`]).
    fn PMPI_Type_commit / "MPI_Type_commit" (datatype: *mut c_int) pre {
        !datatype.is_null() && {
            // SAFETY: not NULL, and the caller's handle (the MPI contract).
            let h = unsafe { datatype.read_unaligned() };
            crate::type_table::committed(h) || predefined(h).is_some()
        }
    } {
        let h = inp(datatype, "datatype")?;
        let mut st = lock();
        if predefined(h).is_some() {
            return Ok(());
        }
        match st.types.get_mut(h) {
            Some(t) => {
                // Committed already: the object is left as it is (`make_mut` would copy
                // one that other types or operations share).
                if !t.committed {
                    Arc::make_mut(t).committed = true;
                    st.types.note_committed(h);
                }
                Ok(())
            }
            None => mpi_bail!(MPI_ERR_TYPE, "invalid datatype handle {h:#x}"),
        }
    }
}

/// `MPI_Type_free`: drops the handle's reference (`MPI_Type_get_contents` may have
/// returned it more than once); the last one deletes its attributes (their callbacks)
/// and removes the handle, or leaves it to `MPI_Type_get_contents` alone while types
/// made from it hold it; the type's object goes with the last user of it.
///
/// A reference that is not the last (or whose handle a type holds) is dropped here,
/// before the entry wrapper ([`crate::ffi::enter`]), while the call profile is off: that
/// path has no error to report and nothing that can panic (a non-NULL pointer, one
/// update of the handle's word), and the wrapper (the unwind guard, the profile probe) was
/// ~40 of its ~90 instructions (mpi4py's `dtlib` frees what every decode returns). The
/// safe point still ends the call.
///
/// # Safety
/// `datatype` is NULL or points to the caller's datatype handle (the MPI contract).
#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_free(datatype: *mut c_int) -> c_int {
    let tried = !datatype.is_null() && crate::calls::off();
    if tried {
        // SAFETY: not NULL, and the caller's handle (function contract).
        let h = unsafe { datatype.read_unaligned() };
        if crate::type_table::release_shared(h) {
            // SAFETY: as above, writable (the call's output).
            unsafe { datatype.write_unaligned(MPI_DATATYPE_NULL) };
            crate::ffi::safe_point();
            return MPI_SUCCESS;
        }
    }
    static SITE: crate::calls::Site = crate::calls::Site::new("MPI_Type_free");
    crate::ffi::enter(&SITE, "MPI_Type_free", crate::ffi::OnComm, || {
        type_free(datatype, tried)
    })
}
crate::ffi::mpi_alias!(PMPI_Type_free / "MPI_Type_free");

/// The body of [`PMPI_Type_free`] under the entry wrapper (`tried`: the lock-free drop
/// was tried before it, and did not apply).
fn type_free(datatype: *mut c_int, tried: bool) -> MpiResult {
    let h = inp(datatype, "datatype")?;
    // Not the last reference: dropped without the lock (here when the profile is on).
    if !tried && crate::type_table::release_shared(h) {
        return out(datatype, MPI_DATATYPE_NULL, "datatype");
    }
    let mut st = lock();
    if predefined(h).is_some() || is_f90(st.dtype_ref(h)?.combiner) {
        mpi_bail!(MPI_ERR_TYPE, "predefined datatypes cannot be freed");
    }
    if !st.type_attrs.contains_key(&h) || st.types.refs(h) > 1 {
        // No delete callbacks (no attributes, or they stay with the other references):
        // released under the same lock; the object (if this was its last reference)
        // is dropped after the lock.
        let Some(t) = st.types.release(h) else {
            mpi_bail!(MPI_ERR_TYPE, "invalid datatype handle {h:#x}");
        };
        drop(st);
        drop(t);
        return out(datatype, MPI_DATATYPE_NULL, "datatype");
    }
    drop(st);
    // The delete callbacks see the datatype still valid; one that fails leaves it.
    crate::attrs::type_free_attrs(h)?;
    if lock().types.release(h).is_none() {
        mpi_bail!(MPI_ERR_TYPE, "invalid datatype handle {h:#x}");
    }
    out(datatype, MPI_DATATYPE_NULL, "datatype")
}

/// Cache of predefined datatype sizes: slot `handle % 64` holds `handle << 32 | size + 1`
/// (0 = empty). Predefined handles are constants, so an entry never goes stale.
static DT_SIZES: [AtomicU64; 64] = [const { AtomicU64::new(0) }; 64];

/// MPICH's predefined datatype handles: kind bits `01` (builtin), object type 3.
const BUILTIN_DATATYPE: u32 = 0x4c00_0000;

/// The byte size of predefined datatype `h` if it is contiguous with no lower-bound
/// offset (every basic type; its extent is then its size and its lower bound 0); `None`
/// for anything else. Lock-free after the first call per handle: the point-to-point and
/// small collective fast paths and the size and extent queries read it.
#[inline(always)]
pub(crate) fn predefined_size(h: c_int) -> Option<usize> {
    let hu = h as u32;
    if hu & 0xfc00_0000 != BUILTIN_DATATYPE {
        return None;
    }
    if let Some(sz) = cached_size(h) {
        return Some(sz);
    }
    let slot = &DT_SIZES[(hu % 64) as usize];
    let dt = lock().dtype(h).ok()?;
    let eligible = dt.predefined
        && dt.committed
        && dt.is_contiguous()
        && dt.blocks.first().map_or(0, |b| b.disp) == 0
        && dt.size < u32::MAX as usize;
    if !eligible {
        return None;
    }
    slot.store((hu as u64) << 32 | (dt.size as u64 + 1), Ordering::Relaxed);
    Some(dt.size)
}

/// The size [`predefined_size`] cached for predefined datatype `h`, if it did (one load:
/// no lock, nothing that can fail; the paths before the entry wrapper read it).
#[inline(always)]
fn cached_size(h: c_int) -> Option<usize> {
    let hu = h as u32;
    if hu & 0xfc00_0000 != BUILTIN_DATATYPE {
        return None;
    }
    let v = DT_SIZES[(hu % 64) as usize].load(Ordering::Relaxed);
    (v >> 32 == hu as u64).then(|| (v & 0xffff_ffff) as usize - 1)
}

/// The size and bounds a query of datatype `h` answers before the entry wrapper: a
/// derived type's lock-free summary, or a predefined basic type's cached size (lower
/// bound 0, extent its size); `None` for anything else (the body answers, or reports the
/// error). Nothing here can fail or panic.
#[inline(always)]
fn quick_bounds(h: c_int) -> Option<(u64, i64, i64)> {
    if let Some(sz) = cached_size(h) {
        return Some((sz as u64, 0, sz as i64));
    }
    crate::type_table::bounds(h)
}

mpi_fn_c! {
    /// `MPI_Type_size` (`MPI_UNDEFINED` if the size does not fit in the form's count).
    /// Before the entry wrapper while the profile is off: [`quick_bounds`].
    fn PMPI_Type_size / "MPI_Type_size", PMPI_Type_size_c / "MPI_Type_size_c" (datatype: c_int, size: *mut Count) pre {
        !size.is_null() && match quick_bounds(datatype) {
            Some((sz, _, _)) => {
                let v = usize::try_from(sz).ok().and_then(Count::from_usize).unwrap_or(MPI_UNDEFINED.into());
                // SAFETY: not NULL; the caller's output (the MPI contract).
                unsafe { put(size, v) };
                true
            }
            None => false,
        }
    } {
        // Predefined basic types (mpi4py asks for each message's type): no lock.
        if let Some(sz) = predefined_size(datatype) {
            return out(size, Count::from_usize(sz).unwrap_or(MPI_UNDEFINED.into()), "size");
        }
        // Derived types: their summary, read without the lock.
        if let Some(s) = summary(datatype) {
            return out(size, Count::from_usize(s.size as usize).unwrap_or(MPI_UNDEFINED.into()), "size");
        }
        read_dtype(datatype, |t| out(size, Count::from_usize(t.size).unwrap_or(MPI_UNDEFINED.into()), "size"))
    }
}

mpi_fn! {
    /// `MPI_Type_size_x`.
    fn PMPI_Type_size_x / "MPI_Type_size_x" (datatype: c_int, size: *mut i64) {
        if let Some(s) = summary(datatype) {
            return out(size, s.size as i64, "size");
        }
        let t = lock().dtype(datatype)?;
        out(size, t.size as i64, "size")
    }
}

mpi_fn_c! {
    /// `MPI_Type_get_extent` (`MPI_Aint` or `MPI_Count` results: the same type here).
    /// Before the entry wrapper while the profile is off: [`quick_bounds`] (a predefined
    /// type of size 0 takes the body).
    fn PMPI_Type_get_extent / "MPI_Type_get_extent", PMPI_Type_get_extent_c / "MPI_Type_get_extent_c" (datatype: c_int, lb: *mut isize, extent: *mut isize) pre {
        !lb.is_null() && !extent.is_null() && match quick_bounds(datatype).filter(|&(sz, _, _)| sz > 0 || is_table_handle(datatype)) {
            Some((_, l, e)) => {
                // SAFETY: neither is NULL; the caller's outputs (the MPI contract).
                unsafe {
                    put(lb, l as isize);
                    put(extent, e as isize);
                }
                true
            }
            None => false,
        }
    } {
        // Predefined basic types, whose extent is their size (mpi4py asks for it on every
        // send and receive of a buffer): no lock, no datatype reference.
        if let Some(sz) = predefined_size(datatype).filter(|&sz| sz > 0) {
            out(lb, 0, "lb")?;
            return out(extent, sz as isize, "extent");
        }
        if let Some(s) = summary(datatype) {
            out(lb, s.lb as isize, "lb")?;
            return out(extent, s.extent() as isize, "extent");
        }
        read_dtype(datatype, |t| {
            out(lb, t.lb, "lb")?;
            out(extent, t.extent(), "extent")
        })
    }
}

mpi_fn! {
    /// `MPI_Type_get_extent_x`.
    fn PMPI_Type_get_extent_x / "MPI_Type_get_extent_x" (datatype: c_int, lb: *mut i64, extent: *mut i64) {
        if let Some(s) = summary(datatype) {
            out(lb, s.lb, "lb")?;
            return out(extent, s.extent(), "extent");
        }
        let t = lock().dtype(datatype)?;
        out(lb, t.lb as i64, "lb")?;
        out(extent, t.extent() as i64, "extent")
    }
}

mpi_fn_c! {
    /// `MPI_Type_get_true_extent` (`MPI_Aint` or `MPI_Count` results: the same type here).
    fn PMPI_Type_get_true_extent / "MPI_Type_get_true_extent", PMPI_Type_get_true_extent_c / "MPI_Type_get_true_extent_c" (datatype: c_int, lb: *mut isize, extent: *mut isize) {
        if let Some(s) = summary(datatype) {
            out(lb, s.true_lb as isize, "true_lb")?;
            return out(extent, (s.true_ub - s.true_lb) as isize, "true_extent");
        }
        read_dtype(datatype, |t| {
            out(lb, t.true_lb, "true_lb")?;
            out(extent, t.true_ub - t.true_lb, "true_extent")
        })
    }
}

mpi_fn! {
    /// `MPI_Type_get_true_extent_x`.
    fn PMPI_Type_get_true_extent_x / "MPI_Type_get_true_extent_x" (datatype: c_int, lb: *mut i64, extent: *mut i64) {
        if let Some(s) = summary(datatype) {
            out(lb, s.true_lb, "true_lb")?;
            return out(extent, s.true_ub - s.true_lb, "true_extent");
        }
        let t = lock().dtype(datatype)?;
        out(lb, t.true_lb as i64, "true_lb")?;
        out(extent, (t.true_ub - t.true_lb) as i64, "true_extent")
    }
}

mpi_fn! {
    /// `MPI_Type_get_name`.
    fn PMPI_Type_get_name / "MPI_Type_get_name" (datatype: c_int, name: *mut c_char, resultlen: *mut c_int) {
        // MPI 4.1: the null handle has a name too.
        let t = if datatype == MPI_DATATYPE_NULL { Cow::Borrowed("MPI_DATATYPE_NULL") } else { lock().dtype_ref(datatype)?.name.clone() };
        let n = copy_cstr(name, MPI_MAX_OBJECT_NAME as usize, &t)?;
        out(resultlen, n, "resultlen")
    }
}

mpi_fn! {
    /// `MPI_Type_set_name`.
    fn PMPI_Type_set_name / "MPI_Type_set_name" (datatype: c_int, name: *const c_char) {
        let s = read_cstr(name, "name")?;
        let mut st = lock();
        match st.types.get_mut(datatype) {
            Some(t) => {
                Arc::make_mut(t).name = Cow::Owned(s);
                Ok(())
            }
            // Renaming predefined types is allowed by the standard but has no effect here.
            None if predefined(datatype).is_some() => Ok(()),
            None => mpi_bail!(MPI_ERR_TYPE, "invalid datatype handle {datatype:#x}"),
        }
    }
}

/// The envelope a query of datatype `h` answers before the entry wrapper: a derived
/// type's lock-free summary or a predefined type's (the numbers of integers, addresses,
/// large counts and datatypes, and the combiner); `None` for anything else (the body
/// answers, or reports the error). Nothing here can fail or panic.
#[inline(always)]
fn quick_envelope(h: c_int) -> Option<[u32; 5]> {
    if let Some(e) = crate::type_table::envelope(h) {
        return Some(e);
    }
    let t = predefined(h)?;
    let n = |l: usize| u32::try_from(l).ok();
    Some([
        n(t.ints.len())?,
        n(t.aints.len())?,
        n(t.counts.len())?,
        n(t.types.len())?,
        t.combiner as u32,
    ])
}

mpi_fn! {
    /// `MPI_Type_get_envelope`. Before the entry wrapper while the profile is off:
    /// [`quick_envelope`] (a large-count type takes the body, which reports the error).
    fn PMPI_Type_get_envelope / "MPI_Type_get_envelope" (datatype: c_int, num_integers: *mut c_int, num_addresses: *mut c_int, num_datatypes: *mut c_int, combiner: *mut c_int) pre {
        !num_integers.is_null() && !num_addresses.is_null() && !num_datatypes.is_null() && !combiner.is_null() && match quick_envelope(datatype).filter(|e| e[2] == 0) {
            Some([ni, na, _, nd, c]) => {
                // SAFETY: none is NULL; the caller's outputs (the MPI contract).
                unsafe {
                    put(num_integers, ni as c_int);
                    put(num_addresses, na as c_int);
                    put(num_datatypes, nd as c_int);
                    put(combiner, c as c_int);
                }
                true
            }
            None => false,
        }
    } {
        // A derived type's summary, read without the lock (a large-count one takes the
        // locked path, which reports the error).
        if let Some(s) = summary(datatype).filter(|s| s.num_large_counts == 0) {
            out(num_integers, s.num_integers as c_int, "num_integers")?;
            out(num_addresses, s.num_addresses as c_int, "num_addresses")?;
            out(num_datatypes, s.num_datatypes as c_int, "num_datatypes")?;
            return out(combiner, s.combiner, "combiner");
        }
        read_dtype(datatype, |t| {
            if !t.counts.is_empty() {
                mpi_bail!(MPI_ERR_TYPE, "datatype made by a large-count constructor: use MPI_Type_get_envelope_c");
            }
            out(num_integers, t.ints.len() as c_int, "num_integers")?;
            out(num_addresses, t.aints.len() as c_int, "num_addresses")?;
            out(num_datatypes, t.types.len() as c_int, "num_datatypes")?;
            out(combiner, t.combiner, "combiner")
        })
    }
}

mpi_fn! {
    /// `MPI_Type_get_contents`.
    fn PMPI_Type_get_contents / "MPI_Type_get_contents" (datatype: c_int, max_integers: c_int, max_addresses: c_int, max_datatypes: c_int, integers: *mut c_int, addresses: *mut isize, datatypes: *mut c_int) {
        let mut st = lock();
        let t = st.dtype_ref(datatype)?;
        if t.combiner == MPI_COMBINER_NAMED {
            mpi_bail!(MPI_ERR_TYPE, "MPI_Type_get_contents on a predefined datatype");
        }
        if !t.counts.is_empty() {
            mpi_bail!(MPI_ERR_TYPE, "datatype made by a large-count constructor: use MPI_Type_get_contents_c");
        }
        if (max_integers as usize) < t.ints.len() || (max_addresses as usize) < t.aints.len() || (max_datatypes as usize) < t.types.len() || max_integers < 0 || max_addresses < 0 || max_datatypes < 0 {
            mpi_bail!(MPI_ERR_ARG, "output arrays too small for the datatype contents");
        }
        copy_out(integers, &t.ints, "array_of_integers")?;
        copy_out(addresses, &t.aints, "array_of_addresses")?;
        if t.type_objs.is_empty() {
            // Predefined constituents only: returned as they are.
            return copy_out(datatypes, &t.types, "array_of_datatypes");
        }
        if contents_types(&st, t, datatypes)? {
            contents_new_handles(&mut st, datatype, datatypes)?;
        }
        Ok(())
    }
}

/// Copy `src` into the caller's output array `p` of `MPI_Type_get_contents(_c)` (NULL
/// allowed when `src` is empty: nothing is written then). Inline: the envelope's arrays
/// are a few words, where a slice view and a `memcpy` call each (also for empty arrays)
/// were ~60 of the ~340 instructions of a decode of a struct of basic types.
#[inline(always)]
fn copy_out<T: Copy>(p: *mut T, src: &[T], what: &str) -> MpiResult {
    if src.is_empty() {
        return Ok(());
    }
    if p.is_null() {
        return null_out(what);
    }
    // SAFETY: the caller's array has room for `src.len()` values (the MPI contract of the
    // `max_*` arguments, checked against the lengths) and is not NULL; it cannot overlap
    // the type's own arrays.
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), p, src.len()) };
    Ok(())
}

/// The error of a NULL output array of [`copy_out`] (out of line).
#[cold]
#[inline(never)]
fn null_out(what: &str) -> MpiResult {
    mpi_bail!(MPI_ERR_ARG, "NULL pointer passed for {what}")
}

/// The constituent types of the type of handle `h` for `MPI_Type_get_contents(_c)`.
/// Predefined ones as they are; a derived one whose handle still names the object the
/// type holds as that handle with one more reference (as MPICH and Open MPI return it: one
/// atomic add, no table entry), also when the user has freed it (the type's entry holds the
/// handle: it comes back to life); one whose handle names another object now (renamed or
/// committed since, which copies the object: `Arc::make_mut`) as a new handle on the
/// object ([`contents_new_handles`], when this returns true: `MPI_DATATYPE_NULL` stands
/// in for those). The caller frees each derived one it gets. `t` is the type the caller
/// looked up (no second lookup); one that keeps no constituent objects has only
/// predefined ones (see [`register`]).
fn contents_types(st: &State, t: &Datatype, datatypes: *mut c_int) -> MpiResult<bool> {
    // The lists as slices once (each view of a `OneOrMany` is a branch).
    let (types, objs): (&[c_int], &[Arc<Datatype>]) = (&t.types, &t.type_objs);
    let dts = slice_out(datatypes, types.len(), "array_of_datatypes")?;
    if objs.is_empty() {
        dts.copy_from_slice(types);
        return Ok(false);
    }
    let mut gone = false;
    for ((o, &c), d) in dts.iter_mut().zip(types).zip(objs) {
        *o = if !is_table_handle(c) || st.types.add_ref_to(c, d) {
            c
        } else {
            gone = true;
            MPI_DATATYPE_NULL
        };
    }
    Ok(gone)
}

/// The new handles of [`contents_types`]' constituents of the type of handle `h` that
/// it left `MPI_DATATYPE_NULL` in `datatypes`: each on the object the type holds.
#[cold]
fn contents_new_handles(st: &mut State, h: c_int, datatypes: *mut c_int) -> MpiResult {
    let n = st.dtype_ref(h)?.types.len();
    let dts = slice_out(datatypes, n, "array_of_datatypes")?;
    // The new handles go into the table that holds the type: looked up again for each
    // (it stays, under the lock) rather than held by a reference of our own.
    for (i, o) in dts.iter_mut().enumerate() {
        if *o == MPI_DATATYPE_NULL {
            let d = Arc::clone(&st.dtype_ref(h)?.type_objs[i]);
            *o = st.types.insert(d);
        }
    }
    Ok(())
}

mpi_fn! {
    /// `MPI_Type_get_envelope_c` (MPI 4.0): also the number of large counts (those of a
    /// type made by a `_c` constructor). Before the entry wrapper while the profile is
    /// off: [`quick_envelope`].
    fn PMPI_Type_get_envelope_c / "MPI_Type_get_envelope_c" (datatype: c_int, num_integers: *mut i64, num_addresses: *mut i64, num_large_counts: *mut i64, num_datatypes: *mut i64, combiner: *mut c_int) pre {
        !num_integers.is_null() && !num_addresses.is_null() && !num_large_counts.is_null() && !num_datatypes.is_null() && !combiner.is_null() && match quick_envelope(datatype) {
            Some([ni, na, nc, nd, c]) => {
                // SAFETY: none is NULL; the caller's outputs (the MPI contract).
                unsafe {
                    put(num_integers, ni.into());
                    put(num_addresses, na.into());
                    put(num_large_counts, nc.into());
                    put(num_datatypes, nd.into());
                    put(combiner, c as c_int);
                }
                true
            }
            None => false,
        }
    } {
        if let Some(s) = summary(datatype) {
            out(num_integers, s.num_integers as i64, "num_integers")?;
            out(num_addresses, s.num_addresses as i64, "num_addresses")?;
            out(num_large_counts, s.num_large_counts as i64, "num_large_counts")?;
            out(num_datatypes, s.num_datatypes as i64, "num_datatypes")?;
            return out(combiner, s.combiner, "combiner");
        }
        read_dtype(datatype, |t| {
            out(num_integers, t.ints.len() as i64, "num_integers")?;
            out(num_addresses, t.aints.len() as i64, "num_addresses")?;
            out(num_large_counts, t.counts.len() as i64, "num_large_counts")?;
            out(num_datatypes, t.types.len() as i64, "num_datatypes")?;
            out(combiner, t.combiner, "combiner")
        })
    }
}

mpi_fn! {
    /// `MPI_Type_get_contents_c` (MPI 4.0).
    fn PMPI_Type_get_contents_c / "MPI_Type_get_contents_c" (datatype: c_int, max_integers: i64, max_addresses: i64, max_large_counts: i64, max_datatypes: i64, integers: *mut c_int, addresses: *mut isize, large_counts: *mut i64, datatypes: *mut c_int) {
        let mut st = lock();
        let t = st.dtype_ref(datatype)?;
        if t.combiner == MPI_COMBINER_NAMED {
            mpi_bail!(MPI_ERR_TYPE, "MPI_Type_get_contents_c on a predefined datatype");
        }
        let fits = |max: i64, n: usize| usize::try_from(max).is_ok_and(|m| m >= n);
        if !fits(max_integers, t.ints.len()) || !fits(max_addresses, t.aints.len()) || !fits(max_large_counts, t.counts.len()) || !fits(max_datatypes, t.types.len()) {
            mpi_bail!(MPI_ERR_ARG, "output arrays too small for the datatype contents");
        }
        copy_out(integers, &t.ints, "array_of_integers")?;
        copy_out(addresses, &t.aints, "array_of_addresses")?;
        copy_out(large_counts, &t.counts, "array_of_large_counts")?;
        if t.type_objs.is_empty() {
            // Predefined constituents only: returned as they are.
            return copy_out(datatypes, &t.types, "array_of_datatypes");
        }
        if contents_types(&st, t, datatypes)? {
            contents_new_handles(&mut st, datatype, datatypes)?;
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Type_get_value_index` (MPI 4.1): the predefined pair type of `MINLOC`/`MAXLOC`
    /// for (value, index) types, or `MPI_DATATYPE_NULL` when there is none.
    fn PMPI_Type_get_value_index / "MPI_Type_get_value_index" (value_type: c_int, index_type: c_int, pair_type: *mut c_int) {
        const PAIRS: &[(c_int, c_int, c_int)] = &[
            (MPI_FLOAT, MPI_INT, MPI_FLOAT_INT),
            (MPI_DOUBLE, MPI_INT, MPI_DOUBLE_INT),
            (MPI_LONG, MPI_INT, MPI_LONG_INT),
            (MPI_INT, MPI_INT, MPI_2INT),
            (MPI_SHORT, MPI_INT, MPI_SHORT_INT),
            (MPI_LONG_DOUBLE, MPI_INT, MPI_LONG_DOUBLE_INT),
            (MPI_REAL, MPI_REAL, MPI_2REAL),
            (MPI_DOUBLE_PRECISION, MPI_DOUBLE_PRECISION, MPI_2DOUBLE_PRECISION),
            (MPI_INTEGER, MPI_INTEGER, MPI_2INTEGER),
        ];
        {
            let st = lock();
            st.dtype(value_type)?;
            st.dtype(index_type)?;
        }
        let t = PAIRS
            .iter()
            .find(|p| p.0 == value_type && p.1 == index_type)
            .map_or(MPI_DATATYPE_NULL, |p| p.2);
        out(pair_type, t, "pair_type")
    }
}

mpi_fn! {
    /// `MPI_Type_match_size`.
    fn PMPI_Type_match_size / "MPI_Type_match_size" (typeclass: c_int, size: c_int, datatype: *mut c_int) {
        let t = match (typeclass, size) {
            (MPI_TYPECLASS_REAL, 4) => MPI_REAL4,
            (MPI_TYPECLASS_REAL, 8) => MPI_REAL8,
            (MPI_TYPECLASS_REAL, 16) => MPI_REAL16,
            (MPI_TYPECLASS_INTEGER, 1) => MPI_INTEGER1,
            (MPI_TYPECLASS_INTEGER, 2) => MPI_INTEGER2,
            (MPI_TYPECLASS_INTEGER, 4) => MPI_INTEGER4,
            (MPI_TYPECLASS_INTEGER, 8) => MPI_INTEGER8,
            (MPI_TYPECLASS_INTEGER, 16) => MPI_INTEGER16,
            (MPI_TYPECLASS_COMPLEX, 8) => MPI_COMPLEX8,
            (MPI_TYPECLASS_COMPLEX, 16) => MPI_COMPLEX16,
            (MPI_TYPECLASS_COMPLEX, 32) => MPI_COMPLEX32,
            _ => mpi_bail!(MPI_ERR_ARG, "no datatype of class {typeclass} and size {size}"),
        };
        out(datatype, t, "datatype")
    }
}

/// Validate and fetch the datatype for a (buffer, count) pair used in a pack call.
fn pack_args(st: &State, count: i64, datatype: c_int) -> MpiResult<(usize, Arc<Datatype>)> {
    let n = check_count(count)?;
    let t = st.dtype_committed(datatype)?;
    Ok((n, t))
}

mpi_fn_c! {
    /// `MPI_Pack`.
    fn PMPI_Pack / "MPI_Pack", PMPI_Pack_c / "MPI_Pack_c" (inbuf: *const c_void, incount: Count, datatype: c_int, outbuf: *mut c_void, outsize: Count, position: *mut Count, comm: c_int) {
        let st = lock();
        st.comm(comm)?;
        let (n, t) = pack_args(&st, incount.into(), datatype)?;
        drop(st);
        let pos: i64 = inp(position, "position")?.into();
        let outsize: i64 = outsize.into();
        let need = n * t.size;
        if pos < 0 || outsize < 0 || pos as usize + need > outsize as usize {
            mpi_bail!(MPI_ERR_TRUNCATE, "pack buffer too small: {outsize} bytes, position {pos}, need {need} more");
        }
        let mut v = Vec::with_capacity(need);
        // SAFETY: MPI_Pack's contract: `inbuf` holds `incount` items of `datatype`.
        unsafe { pack_into(&t, n, inbuf.cast(), &mut v) };
        if need > 0 {
            // SAFETY: `outbuf` has `outsize` bytes and pos + need <= outsize (checked).
            unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), outbuf.cast::<u8>().add(pos as usize), need) };
        }
        // pos + need <= outsize, a value of the form's count type.
        out(position, Count::from_count(pos + need as i64).unwrap_or_default(), "position")
    }
}

mpi_fn_c! {
    /// `MPI_Unpack`.
    fn PMPI_Unpack / "MPI_Unpack", PMPI_Unpack_c / "MPI_Unpack_c" (inbuf: *const c_void, insize: Count, position: *mut Count, outbuf: *mut c_void, outcount: Count, datatype: c_int, comm: c_int) {
        let st = lock();
        st.comm(comm)?;
        let (n, t) = pack_args(&st, outcount.into(), datatype)?;
        drop(st);
        let pos: i64 = inp(position, "position")?.into();
        let insize: i64 = insize.into();
        let need = n * t.size;
        if pos < 0 || insize < 0 || pos as usize + need > insize as usize {
            mpi_bail!(MPI_ERR_TRUNCATE, "unpack buffer too small: {insize} bytes, position {pos}, need {need} more");
        }
        if need > 0 {
            // SAFETY: `inbuf` has `insize` bytes and pos + need <= insize (checked).
            let data = unsafe { std::slice::from_raw_parts(inbuf.cast::<u8>().add(pos as usize), need) };
            // SAFETY: MPI_Unpack's contract: `outbuf` holds `outcount` items of `datatype`.
            unsafe { unpack_from(&t, n, outbuf.cast(), data) };
        }
        // pos + need <= insize, a value of the form's count type.
        out(position, Count::from_count(pos + need as i64).unwrap_or_default(), "position")
    }
}

mpi_fn_c! {
    /// `MPI_Pack_size` (`MPI_UNDEFINED` if the size does not fit in the form's count).
    fn PMPI_Pack_size / "MPI_Pack_size", PMPI_Pack_size_c / "MPI_Pack_size_c" (incount: Count, datatype: c_int, comm: c_int, size: *mut Count) {
        let st = lock();
        st.comm(comm)?;
        let n = check_count(incount)?;
        let t = st.dtype(datatype)?;
        let bytes = n.checked_mul(t.size).and_then(Count::from_usize);
        out(size, bytes.unwrap_or(MPI_UNDEFINED.into()), "size")
    }
}

mpi_fn_c! {
    /// `MPI_Get_count` (`MPI_UNDEFINED` if the count does not fit in the form's count).
    fn PMPI_Get_count / "MPI_Get_count", PMPI_Get_count_c / "MPI_Get_count_c" (status: *const MpiStatus, datatype: c_int, count: *mut Count) {
        let s = inp(status, "status")?;
        let t = lock().dtype(datatype)?;
        let c = t.count_of(status_bytes(&s)).and_then(Count::from_usize).unwrap_or(MPI_UNDEFINED.into());
        out(count, c, "count")
    }
}

mpi_fn_c! {
    /// `MPI_Get_elements` (`MPI_UNDEFINED` if the number does not fit in the form's count).
    fn PMPI_Get_elements / "MPI_Get_elements", PMPI_Get_elements_c / "MPI_Get_elements_c" (status: *const MpiStatus, datatype: c_int, count: *mut Count) {
        let s = inp(status, "status")?;
        let t = lock().dtype(datatype)?;
        let c = Count::from_usize(t.elements_of(status_bytes(&s))).unwrap_or(MPI_UNDEFINED.into());
        out(count, c, "count")
    }
}

mpi_fn! {
    /// `MPI_Get_elements_x`.
    fn PMPI_Get_elements_x / "MPI_Get_elements_x" (status: *const MpiStatus, datatype: c_int, count: *mut i64) {
        let s = inp(status, "status")?;
        let t = lock().dtype(datatype)?;
        out(count, t.elements_of(status_bytes(&s)) as i64, "count")
    }
}

/// Shared body of `MPI_Status_set_elements(_x)`.
fn set_elements(status: *mut MpiStatus, datatype: c_int, count: i64) -> MpiResult {
    if count < 0 {
        mpi_bail!(MPI_ERR_COUNT, "negative count {count}");
    }
    let t = lock().dtype(datatype)?;
    let per = t.elements_per_item();
    let count = count as usize;
    let bytes = match count.checked_div(per) {
        None => 0,
        Some(full) => full * t.size + (count % per) * (t.size / per),
    };
    let mut s = inp(status.cast_const(), "status")?;
    let cancelled = s.count_hi_and_cancelled & 1 != 0;
    status_set_bytes(&mut s, bytes, cancelled);
    out(status, s, "status")
}

mpi_fn_c! {
    /// `MPI_Status_set_elements`.
    fn PMPI_Status_set_elements / "MPI_Status_set_elements", PMPI_Status_set_elements_c / "MPI_Status_set_elements_c" (status: *mut MpiStatus, datatype: c_int, count: Count) {
        set_elements(status, datatype, count.into())
    }
}

mpi_fn! {
    /// `MPI_Status_set_elements_x`.
    fn PMPI_Status_set_elements_x / "MPI_Status_set_elements_x" (status: *mut MpiStatus, datatype: c_int, count: i64) {
        set_elements(status, datatype, count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(h: c_int) -> Arc<Datatype> {
        builtins()[&h].clone()
    }

    #[test]
    fn builtin_sizes_follow_the_mpich_encoding() {
        assert_eq!(b(MPI_INT).size, 4);
        assert_eq!(b(MPI_DOUBLE).size, 8);
        assert_eq!(b(MPI_CHAR).size, 1);
        assert_eq!(b(MPI_LONG_DOUBLE).size, 16);
        assert_eq!(b(MPI_C_DOUBLE_COMPLEX).size, 16);
        assert_eq!(b(MPI_DOUBLE_INT).size, 12);
        assert_eq!(b(MPI_DOUBLE_INT).extent(), 16);
        assert_eq!(b(MPI_SHORT_INT).extent(), 8);
        assert_eq!(b(MPI_FLOAT_INT).extent(), 8);
        assert_eq!(b(MPI_LONG_DOUBLE_INT).extent(), 32);
        assert_eq!(b(MPI_2INT).elements_per_item(), 2);
        assert_eq!(b(MPI_INT).name, "MPI_INT");
        assert_eq!(b(MPI_LONG_LONG).name, "MPI_LONG_LONG");
        assert!(b(MPI_INT).is_contiguous());
        assert!(!b(MPI_DOUBLE_INT).is_contiguous());
    }

    #[test]
    fn predefined_finds_every_builtin_and_no_derived_handle() {
        for &(h, name) in BUILTINS {
            let t = predefined(h).unwrap_or_else(|| panic!("{name} not found"));
            assert_eq!(t.basic, Some(h), "{name}");
        }
        // The derived types' table starts at DATATYPE_FIRST: none of its handles is a
        // predefined one (the pair types sit below it).
        // SAFETY: a valid output handle.
        let d = handle_of(|h| unsafe { PMPI_Type_contiguous(2, MPI_FLOAT_INT, h) });
        assert!(predefined(d).is_none());
        assert!(
            predefined(direct_base(kind::DATATYPE) as c_int | DATATYPE_FIRST as c_int).is_none()
        );
        assert!(predefined(MPI_DATATYPE_NULL).is_none());
        assert!(lock()
            .dtype_ref(d)
            .is_ok_and(|t| t.combiner == MPI_COMBINER_CONTIGUOUS));
    }

    /// A type made of predefined types alone keeps no constituent objects (they are found
    /// by handle); one with a derived constituent keeps them all, in order.
    #[test]
    fn constituents_of_predefined_types_are_found_by_handle() {
        // SAFETY: valid output handles; the arrays have `count` entries.
        let d = handle_of(|h| unsafe { PMPI_Type_dup(MPI_DOUBLE, h) });
        let (bl, disp) = ([1, 2], [0isize, 16]);
        let basic = [MPI_INT, MPI_DOUBLE];
        // SAFETY: as above.
        let s = handle_of(|h| unsafe {
            PMPI_Type_create_struct(2, bl.as_ptr(), disp.as_ptr(), basic.as_ptr(), h)
        });
        let mixed = [d, MPI_INT];
        // SAFETY: as above.
        let m = handle_of(|h| unsafe {
            PMPI_Type_create_struct(2, bl.as_ptr(), disp.as_ptr(), mixed.as_ptr(), h)
        });
        let st = lock();
        let (dt, stt, mt) = (
            st.dtype_ref(d).unwrap(),
            st.dtype_ref(s).unwrap(),
            st.dtype_ref(m).unwrap(),
        );
        assert!(dt.type_objs.is_empty() && stt.type_objs.is_empty());
        assert!(Arc::ptr_eq(dt.constituent(0).unwrap(), &b(MPI_DOUBLE)));
        let sc: Vec<_> = stt.constituents().map(|c| c.basic).collect();
        assert_eq!(sc, [Some(MPI_INT), Some(MPI_DOUBLE)]);
        assert!(stt.constituent(2).is_none());
        assert_eq!(mt.type_objs.len(), 2);
        assert!(Arc::ptr_eq(mt.constituent(0).unwrap(), dt));
        assert!(Arc::ptr_eq(mt.constituent(1).unwrap(), &b(MPI_INT)));
        assert_eq!((alignment(stt), alignment(mt)), (8, 8));
        drop(st);
        for mut h in [m, s, d] {
            // SAFETY: a valid handle slot.
            assert_eq!(unsafe { PMPI_Type_free(&mut h) }, MPI_SUCCESS);
        }
    }

    /// The constructors of one old type keep its object (the one its handle names, found
    /// once: `State::old_type`) when it is derived, and none when it is predefined; the
    /// struct constructor keeps all of them when any is derived (`State::old_types`),
    /// and each new entry holds the derived handle.
    #[test]
    fn constructors_keep_the_object_of_a_derived_old_type() {
        // SAFETY: valid output handles.
        let v = handle_of(|h| unsafe { PMPI_Type_vector(2, 1, 3, MPI_INT, h) });
        let made: Vec<c_int> = vec![
            // SAFETY: as above.
            handle_of(|h| unsafe { PMPI_Type_dup(v, h) }),
            // SAFETY: as above.
            handle_of(|h| unsafe { PMPI_Type_create_resized(v, -4, 40, h) }),
            // SAFETY: as above.
            handle_of(|h| unsafe { PMPI_Type_contiguous(3, v, h) }),
            // SAFETY: as above.
            handle_of(|h| unsafe { PMPI_Type_create_hvector(2, 1, 64, v, h) }),
        ];
        // SAFETY: as above.
        let p = handle_of(|h| unsafe { PMPI_Type_create_resized(MPI_INT, 0, 8, h) });
        let (bl, disp, ty) = ([1 as c_int, 1], [0isize, 64], [MPI_INT, v]);
        // SAFETY: the three arrays hold 2 entries each; a valid output handle.
        let s = handle_of(|h| unsafe {
            PMPI_Type_create_struct(2, bl.as_ptr(), disp.as_ptr(), ty.as_ptr(), h)
        });
        {
            let st = lock();
            let vo = st.dtype_ref(v).unwrap();
            for &m in &made {
                let t = st.dtype_ref(m).unwrap();
                assert_eq!(*t.types, [v]);
                assert_eq!(t.type_objs.len(), 1, "combiner {}", t.combiner);
                // One old type: its handle and object are kept inline (no `Vec`).
                assert!(
                    matches!(
                        (&t.types, &t.type_objs),
                        (OneOrMany::One(_), OneOrMany::One(_))
                    ),
                    "combiner {}",
                    t.combiner
                );
                assert!(Arc::ptr_eq(&t.type_objs[0], vo), "combiner {}", t.combiner);
            }
            let r = st.dtype_ref(made[1]).unwrap();
            assert_eq!((r.lb, r.ub, r.size), (-4, 36, 8));
            assert_eq!(r.aints, [-4, 40]);
            let pt = st.dtype_ref(p).unwrap();
            assert!(pt.type_objs.is_empty() && *pt.types == [MPI_INT]);
            let stt = st.dtype_ref(s).unwrap();
            assert_eq!(stt.type_objs.len(), 2);
            assert!(Arc::ptr_eq(&stt.type_objs[0], &b(MPI_INT)));
            assert!(Arc::ptr_eq(&stt.type_objs[1], vo));
            assert_eq!(st.types.held(v), 5);
        }
        for h in made.into_iter().chain([s, p]) {
            free(h);
        }
        assert_eq!(lock().types.held(v), 0);
        free(v);
    }

    #[test]
    fn vector_layout_pack_and_unpack() {
        let int = b(MPI_INT);
        // 3 blocks of 2 ints, stride 4 ints.
        let e: Vec<_> = (0..3).map(|i| (i * 16, 2, &*int)).collect();
        let t = build(e.iter().copied());
        assert_eq!(t.size, 24);
        assert_eq!(t.extent(), 40);
        assert_eq!(t.blocks.len(), 3);
        assert!(!t.is_contiguous());
        let src: Vec<i32> = (0..10).collect();
        let mut packed = Vec::new();
        // SAFETY: src holds 10 ints, the type map covers ints 0..10.
        unsafe { pack_into(&t, 1, src.as_ptr().cast(), &mut packed) };
        let vals: Vec<i32> = packed
            .chunks(4)
            .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(vals, vec![0, 1, 4, 5, 8, 9]);
        let mut dst = vec![-1i32; 10];
        // SAFETY: dst holds 10 ints.
        let used = unsafe { unpack_from(&t, 1, dst.as_mut_ptr().cast(), &packed) };
        assert_eq!(used, 24);
        assert_eq!(dst, vec![0, 1, -1, -1, 4, 5, -1, -1, 8, 9]);
    }

    #[test]
    fn pair_types_pack_their_type_map_and_unpack_without_touching_the_gaps() {
        // (type, value bytes, the int's offset, extent)
        for (h, vs, io, ext) in [
            (MPI_SHORT_INT, 2, 4, 8),
            (MPI_LONG_INT, 8, 8, 16),
            (MPI_DOUBLE_INT, 8, 8, 16),
            (MPI_LONG_DOUBLE_INT, 16, 16, 32),
        ] {
            let t = b(h);
            let n = 5;
            // Memory: item k's byte j is 16 k + j + 1 (gaps included), then a 0xee guard
            // over the last item's padding and beyond.
            let len = n * ext - (ext - io - 4);
            let mut mem: Vec<u8> = (0..len).map(|x| (x % 251 + 1) as u8).collect();
            mem.resize(n * ext + 8, 0xee);
            let mut packed = vec![7u8; 3];
            // SAFETY: `mem` holds `n` items of the pair type (the last one's padding is the
            // guard, which the type map does not cover).
            unsafe { pack_into(&t, n, mem.as_ptr(), &mut packed) };
            let want: Vec<u8> = (0..n)
                .flat_map(|k| (0..vs).chain(io..io + 4).map(move |j| k * ext + j))
                .map(|x| (x % 251 + 1) as u8)
                .collect();
            assert_eq!(packed[3..], want[..], "{}", t.name);
            assert_eq!(packed[..3], [7, 7, 7]);
            // Back into memory filled with 0xcc: the type map's bytes change, no other.
            let mut back = vec![0xccu8; n * ext + 8];
            // SAFETY: `back` has room for `n` items.
            let used = unsafe { unpack_from(&t, n, back.as_mut_ptr(), &packed[3..]) };
            assert_eq!(used, n * t.size);
            for (x, (&got, &orig)) in back.iter().zip(&mem).enumerate() {
                let mapped = x < n * ext && (x % ext < vs || (io..io + 4).contains(&(x % ext)));
                assert_eq!(got, if mapped { orig } else { 0xcc }, "{} byte {x}", t.name);
            }
            // Partial data: whole items, then the first bytes of the next (generic path).
            let mut part = vec![0xccu8; n * ext];
            // SAFETY: as above.
            let used = unsafe { unpack_from(&t, n, part.as_mut_ptr(), &packed[3..3 + vs + 6]) };
            assert_eq!((used, &part[..vs]), (vs + 6, &mem[..vs]));
            assert_eq!(part[ext..ext + 2], mem[ext..ext + 2]);
            assert_eq!(part[ext + 2], 0xcc);
        }
    }

    #[test]
    fn contiguous_blocks_merge_and_elements_count() {
        let int = b(MPI_INT);
        let t = build([(0, 5, &*int)]);
        assert_eq!(
            t.blocks,
            vec![Block {
                disp: 0,
                len: 20,
                elem: 4
            }]
        );
        assert!(t.is_contiguous());
        assert_eq!(t.elements_of(12), 3);
        assert_eq!(t.count_of(20), Some(1));
        assert_eq!(t.count_of(12), None);
        // struct {double, int}: a partial element counts its whole basic elements.
        let d = b(MPI_DOUBLE);
        let s = build([(0, 1, &*d), (8, 1, &*int)]);
        assert_eq!(s.size, 12);
        assert_eq!(s.elements_of(8), 1);
        assert_eq!(s.elements_of(24), 4);
        assert_eq!(s.basic, None);
    }

    #[test]
    fn darray_block_and_cyclic_layouts() {
        let get = |h: c_int| lock().dtype(h).unwrap();
        // 10 ints in blocks over 3 processes: rank 1 owns 4..8.
        let (g, d, a, p) = (
            [10],
            [MPI_DISTRIBUTE_BLOCK],
            [MPI_DISTRIBUTE_DFLT_DARG],
            [3],
        );
        let mut h = 0;
        // SAFETY: valid argument arrays of length 1 and an output handle.
        let rc = unsafe {
            PMPI_Type_create_darray(
                3,
                1,
                1,
                g.as_ptr(),
                d.as_ptr(),
                a.as_ptr(),
                p.as_ptr(),
                MPI_ORDER_C,
                MPI_INT,
                &mut h,
            )
        };
        assert_eq!(rc, MPI_SUCCESS);
        let t = get(h);
        assert_eq!(t.size, 16);
        assert_eq!(t.extent(), 40);
        assert_eq!(
            t.blocks,
            vec![Block {
                disp: 16,
                len: 16,
                elem: 4
            }]
        );
        // 2x4 array, rows NONE, columns CYCLIC(1) over 2 processes: rank 1 owns columns
        // 1 and 3 of both rows.
        let (g, d, a, p) = (
            [2, 4],
            [MPI_DISTRIBUTE_NONE, MPI_DISTRIBUTE_CYCLIC],
            [MPI_DISTRIBUTE_DFLT_DARG; 2],
            [1, 2],
        );
        // SAFETY: valid argument arrays of length 2 and an output handle.
        let rc = unsafe {
            PMPI_Type_create_darray(
                2,
                1,
                2,
                g.as_ptr(),
                d.as_ptr(),
                a.as_ptr(),
                p.as_ptr(),
                MPI_ORDER_C,
                MPI_INT,
                &mut h,
            )
        };
        assert_eq!(rc, MPI_SUCCESS);
        let t = get(h);
        let disps: Vec<isize> = t.blocks.iter().map(|b| b.disp).collect();
        assert_eq!(disps, vec![4, 12, 20, 28]);
        assert_eq!(t.extent(), 32);
        // Fortran order: the first index varies fastest; rank 1 owns columns 1 and 3.
        // SAFETY: as above.
        let rc = unsafe {
            PMPI_Type_create_darray(
                2,
                1,
                2,
                g.as_ptr(),
                d.as_ptr(),
                a.as_ptr(),
                p.as_ptr(),
                MPI_ORDER_FORTRAN,
                MPI_INT,
                &mut h,
            )
        };
        assert_eq!(rc, MPI_SUCCESS);
        let t = get(h);
        assert_eq!(
            t.blocks,
            vec![
                Block {
                    disp: 8,
                    len: 8,
                    elem: 4
                },
                Block {
                    disp: 24,
                    len: 8,
                    elem: 4
                }
            ]
        );
    }

    /// `MPI_Type_create_struct` from Rust arrays; returns the new type.
    fn mk_struct(bl: &[c_int], disp: &[isize], ty: &[c_int]) -> Arc<Datatype> {
        let mut h = 0;
        // SAFETY: the three arrays have the same length; `h` is a valid output slot.
        let rc = unsafe {
            PMPI_Type_create_struct(
                bl.len() as c_int,
                bl.as_ptr(),
                disp.as_ptr(),
                ty.as_ptr(),
                &mut h,
            )
        };
        assert_eq!(rc, MPI_SUCCESS);
        lock().dtype(h).unwrap()
    }

    fn handle_of(f: impl FnOnce(*mut c_int) -> c_int) -> c_int {
        let mut h = 0;
        assert_eq!(f(&mut h), MPI_SUCCESS);
        h
    }

    #[test]
    fn struct_extent_is_padded_to_the_member_alignment() {
        // Expected values: MPICH 4.0.2 on x86-64 for the same constructors.
        let lx = |t: &Datatype| (t.lb, t.extent(), t.true_lb, t.true_ub - t.true_lb);
        let t = mk_struct(&[1, 1], &[0, 8], &[MPI_DOUBLE, MPI_CHAR]);
        assert_eq!(lx(&t), (0, 16, 0, 9));
        let t = mk_struct(&[1, 1], &[0, 4], &[MPI_INT, MPI_CHAR]);
        assert_eq!(lx(&t), (0, 8, 0, 5));
        let s3 = mk_struct(&[1, 2, 3], &[1, 27, 71], &[MPI_INT, MPI_DOUBLE, MPI_INT]);
        assert_eq!(lx(&s3), (1, 88, 1, 82));
        let h3 = lock().types.insert(s3.clone());
        assert_eq!(lx(&mk_struct(&[1], &[0], &[h3])), (1, 88, 1, 82));
        let t = mk_struct(
            &[1, 1, 1],
            &[0, 32, 64],
            &[MPI_SHORT_INT, MPI_LONG_DOUBLE_INT, MPI_SHORT_INT],
        );
        assert_eq!(lx(&t), (0, 80, 0, 72));
        let t = mk_struct(&[1, 1], &[-3, 0], &[MPI_CHAR, MPI_INT]);
        assert_eq!(lx(&t), (-3, 8, -3, 7));
        // A member with blocklength 0 does not count.
        let t = mk_struct(&[1, 0], &[0, 8], &[MPI_CHAR, MPI_DOUBLE]);
        assert_eq!(lx(&t), (0, 1, 0, 1));
        // Alignment is inherited through other constructors.
        // SAFETY: valid output handles.
        let v = handle_of(|h| unsafe { PMPI_Type_vector(2, 1, 2, MPI_DOUBLE, h) });
        assert_eq!(
            lx(&mk_struct(&[1, 1], &[0, 24], &[v, MPI_CHAR])),
            (0, 32, 0, 25)
        );
        // SAFETY: as above.
        let c = handle_of(|h| unsafe { PMPI_Type_contiguous(3, MPI_CHAR, h) });
        assert_eq!(
            lx(&mk_struct(&[1, 1], &[0, 3], &[c, MPI_SHORT])),
            (0, 6, 0, 5)
        );
        // An explicit extent setting the upper bound is kept; otherwise padding applies.
        // SAFETY: as above.
        let r = handle_of(|h| unsafe { PMPI_Type_create_resized(MPI_INT, 0, 3, h) });
        assert_eq!(lx(&mk_struct(&[1], &[0], &[r])), (0, 3, 0, 4));
        // SAFETY: as above.
        let r = handle_of(|h| unsafe { PMPI_Type_create_resized(MPI_DOUBLE, 0, 12, h) });
        assert_eq!(
            lx(&mk_struct(&[1, 1], &[0, 12], &[r, MPI_CHAR])),
            (0, 16, 0, 13)
        );
    }

    /// Element offsets (in units of the old type) of one item of `t`, in type-map order.
    fn element_offsets(t: &Datatype, elem: usize) -> Vec<isize> {
        t.blocks
            .iter()
            .flat_map(|b| (0..b.len / elem).map(move |k| b.disp / elem as isize + k as isize))
            .collect()
    }

    /// The name `MPI_Type_get_name` reports for handle `h`.
    fn name_of(h: c_int) -> String {
        let mut buf = [0 as c_char; MPI_MAX_OBJECT_NAME as usize + 1];
        let mut n = 0;
        // SAFETY: `buf` has room for `MPI_MAX_OBJECT_NAME` bytes and the NUL.
        let rc = unsafe { PMPI_Type_get_name(h, buf.as_mut_ptr(), &mut n) };
        assert_eq!(rc, MPI_SUCCESS);
        let bytes: Vec<u8> = buf[..n as usize].iter().map(|&c| c as u8).collect();
        String::from_utf8(bytes).unwrap()
    }

    /// A dup of a predefined type has its name without a copy of it (mpi4py's `dtlib` dups
    /// basic types by the million); a name set later is the dup's own and a dup of the
    /// renamed type copies it. `MPI_Type_get_contents` returns predefined constituents as
    /// they are (from the borrowed type) and a derived one as its live handle.
    #[test]
    fn dups_share_predefined_names_and_contents_return_constituents() {
        // SAFETY: valid output handles.
        let d = handle_of(|h| unsafe { PMPI_Type_dup(MPI_INT, h) });
        {
            let t = lock().dtype(d).unwrap();
            assert_eq!(t.name, "MPI_INT");
            assert!(matches!(t.name, Cow::Borrowed(_)), "copied: {:?}", t.name);
        }
        assert_eq!(name_of(d), "MPI_INT");
        // SAFETY: a NUL-terminated name.
        let rc = unsafe { PMPI_Type_set_name(d, c"int-dup".as_ptr()) };
        assert_eq!(rc, MPI_SUCCESS);
        assert_eq!(
            (name_of(d).as_str(), name_of(MPI_INT).as_str()),
            ("int-dup", "MPI_INT")
        );
        // SAFETY: valid output handles.
        let d2 = handle_of(|h| unsafe { PMPI_Type_dup(d, h) });
        assert_eq!(name_of(d2), "int-dup");

        // A dup's one constituent is predefined: returned as is.
        let (mut ni, mut na, mut nc, mut nd, mut comb) = (0i64, 0i64, 0i64, 0i64, 0);
        let mut got = [MPI_DATATYPE_NULL; 2];
        // SAFETY: valid output slots; no integers, addresses or counts to write.
        let rc =
            unsafe { PMPI_Type_get_envelope_c(d, &mut ni, &mut na, &mut nc, &mut nd, &mut comb) };
        assert_eq!(
            (rc, ni, na, nc, nd, comb),
            (MPI_SUCCESS, 0, 0, 0, 1, MPI_COMBINER_DUP)
        );
        // SAFETY: `got` has room for 2 handles; the other arrays are not written (0 of each).
        let rc = unsafe {
            PMPI_Type_get_contents_c(
                d,
                0,
                0,
                0,
                2,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                got.as_mut_ptr(),
            )
        };
        assert_eq!((rc, got[0]), (MPI_SUCCESS, MPI_INT));
        // A struct of (the renamed dup, MPI_DOUBLE): a new handle on the dup's type, the
        // predefined one as is.
        let (bl, disp, ty) = ([1 as c_int, 1], [0isize, 8], [d, MPI_DOUBLE]);
        // SAFETY: the three arrays hold 2 entries each; a valid output handle.
        let s = handle_of(|h| unsafe {
            PMPI_Type_create_struct(2, bl.as_ptr(), disp.as_ptr(), ty.as_ptr(), h)
        });
        let (mut ints, mut addrs) = ([0 as c_int; 3], [0isize; 2]);
        // SAFETY: the arrays have room for the struct's 3 integers, 2 addresses, 2 types.
        let rc = unsafe {
            PMPI_Type_get_contents(
                s,
                3,
                2,
                2,
                ints.as_mut_ptr(),
                addrs.as_mut_ptr(),
                got.as_mut_ptr(),
            )
        };
        assert_eq!(
            (rc, ints, addrs, got[1]),
            (MPI_SUCCESS, [2, 1, 1], [0, 8], MPI_DOUBLE)
        );
        // The dup's handle itself, with one more reference.
        assert_eq!(got[0], d);
        assert_eq!(lock().types.refs(d), 2);
        assert_eq!(name_of(got[0]), "int-dup");
        for mut h in [got[0], s, d2, d] {
            // SAFETY: a valid handle slot.
            assert_eq!(unsafe { PMPI_Type_free(&mut h) }, MPI_SUCCESS);
            assert_eq!(h, MPI_DATATYPE_NULL);
        }
    }

    /// A vector `v`, a resized type `r` of it and a struct `s` of the two, as
    /// `(v, r, s)` (the threads tests' types).
    fn vector_resized_struct() -> (c_int, c_int, c_int) {
        // SAFETY: valid output handles.
        let v = handle_of(|h| unsafe { PMPI_Type_vector(2, 1, 3, MPI_INT, h) });
        // SAFETY: as above.
        let r = handle_of(|h| unsafe { PMPI_Type_create_resized(v, 0, 64, h) });
        let (bl, disp, ty) = ([1 as c_int, 2], [0isize, 64], [v, r]);
        // SAFETY: the three arrays hold 2 entries each; a valid output handle.
        let s = handle_of(|h| unsafe {
            PMPI_Type_create_struct(2, bl.as_ptr(), disp.as_ptr(), ty.as_ptr(), h)
        });
        (v, r, s)
    }

    /// `get_contents` of `s` (2 constituent slots; no integers or addresses written).
    fn contents2(s: c_int, ni: usize, na: usize) -> [c_int; 2] {
        let mut got = [MPI_DATATYPE_NULL; 2];
        let (mut ints, mut addrs) = ([0 as c_int; 8], [0isize; 8]);
        // SAFETY: room for 8 integers, 8 addresses and 2 types.
        let rc = unsafe {
            PMPI_Type_get_contents(
                s,
                ni as c_int,
                na as c_int,
                2,
                ints.as_mut_ptr(),
                addrs.as_mut_ptr(),
                got.as_mut_ptr(),
            )
        };
        assert_eq!(rc, MPI_SUCCESS);
        got
    }

    fn free(mut h: c_int) {
        // SAFETY: a valid handle slot.
        assert_eq!(unsafe { PMPI_Type_free(&mut h) }, MPI_SUCCESS);
        assert_eq!(h, MPI_DATATYPE_NULL);
    }

    /// `MPI_Type_commit` publishes the committed flag in the summary (with the combiner
    /// intact), a commit of a committed type (answered before the entry wrapper) leaves
    /// the shared object alone, dups inherit the flag and a reused slot starts without it.
    #[test]
    fn commits_publish_the_committed_flag_lock_free() {
        // SAFETY: valid output handles.
        let mut v = handle_of(|h| unsafe { PMPI_Type_vector(3, 1, 2, MPI_INT, h) });
        let flag = |h| summary(h).map(|s| (s.combiner, s.committed));
        assert_eq!(flag(v), Some((MPI_COMBINER_VECTOR, false)));
        assert!(!crate::type_table::committed(v));
        // A contiguous type of it shares its object.
        // SAFETY: as above.
        let c = handle_of(|h| unsafe { PMPI_Type_contiguous(2, v, h) });
        // SAFETY: the handle's slot.
        assert_eq!(unsafe { PMPI_Type_commit(&mut v) }, MPI_SUCCESS);
        // The flag is published with the combiner intact, and the locked state agrees.
        assert_eq!(flag(v), Some((MPI_COMBINER_VECTOR, true)));
        assert!(crate::type_table::committed(v) && lock().dtype_ref(v).unwrap().committed);
        assert!(!crate::type_table::committed(c));
        let obj = Arc::clone(lock().dtype_ref(v).unwrap());
        // A commit of the committed type (before the wrapper) leaves the object as it is.
        // SAFETY: as above.
        assert_eq!(unsafe { PMPI_Type_commit(&mut v) }, MPI_SUCCESS);
        assert!(Arc::ptr_eq(lock().dtype_ref(v).unwrap(), &obj));
        drop(obj);
        // A dup of a committed type is committed; a resized one is not.
        // SAFETY: as above.
        let d = handle_of(|h| unsafe { PMPI_Type_dup(v, h) });
        // SAFETY: as above.
        let r = handle_of(|h| unsafe { PMPI_Type_create_resized(v, 0, 64, h) });
        assert_eq!(flag(d), Some((MPI_COMBINER_DUP, true)));
        assert_eq!(flag(r), Some((MPI_COMBINER_RESIZED, false)));
        for h in [r, d, c, v] {
            free(h);
        }
        assert!(!crate::type_table::committed(v));
        // A type made in a freed slot starts uncommitted.
        // SAFETY: as above.
        let n = handle_of(|h| unsafe { PMPI_Type_contiguous(3, MPI_INT, h) });
        assert_eq!(flag(n), Some((MPI_COMBINER_CONTIGUOUS, false)));
        free(n);
    }

    /// The arguments a decode returns of a type made by a constructor with fixed
    /// arguments ([`Envelope::fixed`]): integers, addresses and large counts.
    fn fixed_args(t: c_int) -> (Vec<c_int>, Vec<isize>, Vec<i64>) {
        let (mut ni, mut na, mut nc, mut nd, mut comb) = (0, 0, 0, 0, 0);
        // SAFETY: valid output pointers.
        let rc =
            unsafe { PMPI_Type_get_envelope_c(t, &mut ni, &mut na, &mut nc, &mut nd, &mut comb) };
        assert_eq!((rc, nd), (MPI_SUCCESS, 1));
        let (mut i, mut a, mut c) = (
            vec![-7; ni as usize],
            vec![-7; na as usize],
            vec![-7; nc as usize],
        );
        let mut d = [0];
        // SAFETY: arrays of the envelope's lengths (NULL-free: empty vectors dangle).
        let rc = unsafe {
            PMPI_Type_get_contents_c(
                t,
                ni,
                na,
                nc,
                1,
                i.as_mut_ptr(),
                a.as_mut_ptr(),
                c.as_mut_ptr(),
                d.as_mut_ptr(),
            )
        };
        assert_eq!((rc, d[0]), (MPI_SUCCESS, MPI_INT));
        (i, a, c)
    }

    /// The constructors with fixed arguments record them as each form should: the `int`
    /// form's counts among the integers and its displacements among the addresses, the
    /// `_c` form's all among the large counts, in argument order. A decode accepts NULL
    /// for an array the type has no values for (and writes nothing there), and refuses it
    /// for one it has values for.
    #[test]
    fn fixed_envelopes_in_both_forms_and_null_arrays() {
        // SAFETY: a valid output handle.
        let v = handle_of(|h| unsafe { PMPI_Type_vector(3, 2, 4, MPI_INT, h) });
        // SAFETY: a valid output handle.
        let vc = handle_of(|h| unsafe { PMPI_Type_vector_c(3, 2, 4, MPI_INT, h) });
        // SAFETY: a valid output handle.
        let hv = handle_of(|h| unsafe { PMPI_Type_create_hvector(3, 2, 40, MPI_INT, h) });
        // SAFETY: a valid output handle.
        let hvc = handle_of(|h| unsafe { PMPI_Type_create_hvector_c(3, 2, 40, MPI_INT, h) });
        // SAFETY: a valid output handle.
        let r = handle_of(|h| unsafe { PMPI_Type_create_resized(MPI_INT, -2, 12, h) });
        // SAFETY: a valid output handle.
        let rc = handle_of(|h| unsafe { PMPI_Type_create_resized_c(MPI_INT, -2, 12, h) });
        assert_eq!(fixed_args(v), (vec![3, 2, 4], vec![], vec![]));
        assert_eq!(fixed_args(vc), (vec![], vec![], vec![3, 2, 4]));
        assert_eq!(fixed_args(hv), (vec![3, 2], vec![40], vec![]));
        assert_eq!(fixed_args(hvc), (vec![], vec![], vec![3, 2, 40]));
        assert_eq!(fixed_args(r), (vec![], vec![-2, 12], vec![]));
        assert_eq!(fixed_args(rc), (vec![], vec![], vec![-2, 12]));
        // The layouts the iterator-fed `build` made: 3 blocks of 2 ints, 16 / 40 bytes
        // apart.
        for (t, step) in [(v, 16), (vc, 16), (hv, 40), (hvc, 40)] {
            let t = lock().dtype(t).unwrap();
            let disps: Vec<isize> = t.blocks.iter().map(|b| b.disp).collect();
            assert_eq!((t.size, disps), (24, vec![0, step, 2 * step]));
        }
        let (null_i, null_c) = (std::ptr::null_mut::<c_int>(), std::ptr::null_mut::<i64>());
        let (mut a, mut d) = ([0isize; 2], [0]);
        // SAFETY: NULL only for the arrays the resized type has no values for.
        let ok = unsafe {
            PMPI_Type_get_contents_c(
                r,
                0,
                2,
                0,
                1,
                null_i,
                a.as_mut_ptr(),
                null_c,
                d.as_mut_ptr(),
            )
        };
        assert_eq!((ok, a, d), (MPI_SUCCESS, [-2, 12], [MPI_INT]));
        // SAFETY: the library checks the NULL before writing.
        let e = crate::ffi::quietly(|| unsafe {
            PMPI_Type_get_contents(r, 0, 2, 1, null_i, std::ptr::null_mut(), d.as_mut_ptr())
        });
        assert_eq!(e.map_err(|e| e.code), Err(MPI_ERR_ARG));
        // SAFETY: as above.
        let e = crate::ffi::quietly(|| unsafe {
            PMPI_Type_get_contents_c(
                vc,
                0,
                0,
                3,
                1,
                null_i,
                std::ptr::null_mut(),
                null_c,
                d.as_mut_ptr(),
            )
        });
        assert_eq!(e.map_err(|e| e.code), Err(MPI_ERR_ARG));
        for t in [v, vc, hv, hvc, r, rc] {
            free(t);
        }
    }

    /// A struct of (vector, contiguous): `get_contents` returns the constituents' own
    /// handles with a reference each, which the frees drop (the first of two without the
    /// lock) until the user's last; the struct holds its constituents' handles, so one that
    /// the user freed is kept (invalid for the user) and comes back as itself, and one
    /// committed since (a copy of the object) comes back as a new handle, uncommitted.
    #[test]
    fn get_contents_returns_live_constituents_with_a_reference() {
        live_constituents_with_a_reference();
    }

    /// The same below `MPI_THREAD_MULTIPLE`, where the counts are loads and stores
    /// (`type_table::update`): the same references and holds at every step.
    #[test]
    fn serial_mode_returns_live_constituents_with_a_reference() {
        crate::type_table::with_serial(true, live_constituents_with_a_reference);
    }

    /// mpi4py's `dtlib` pattern below `MPI_THREAD_MULTIPLE` (the counts loads and stores):
    /// a struct of two freed duplicates of derived types decoded and its constituents
    /// freed over and over (each free the last reference while the struct's hold
    /// remains: without the lock), dups and resized types of them made and freed (holds
    /// taken and dropped), then the struct's free removes the kept duplicates.
    #[test]
    fn serial_mode_decodes_kept_handles_and_removes_them_once() {
        crate::type_table::with_serial(true, || {
            let (v, r, s0) = vector_resized_struct();
            // SAFETY: valid output handles.
            let (dv, dr) = (
                handle_of(|h| unsafe { PMPI_Type_dup(v, h) }),
                handle_of(|h| unsafe { PMPI_Type_dup(r, h) }),
            );
            let (bl, disp, ty) = ([1 as c_int, 2], [0isize, 64], [dv, dr]);
            // SAFETY: the three arrays hold 2 entries each; a valid output handle.
            let s = handle_of(|h| unsafe {
                PMPI_Type_create_struct(2, bl.as_ptr(), disp.as_ptr(), ty.as_ptr(), h)
            });
            let objs = [dv, dr].map(|h| Arc::clone(lock().dtype_ref(h).unwrap()));
            free(dv);
            free(dr);
            let (refs, held) = (|h| lock().types.refs(h), |h| lock().types.held(h));
            assert_eq!((refs(dv), held(dv), refs(dr), held(dr)), (0, 1, 0, 1));
            for i in 0..1000 {
                let got = contents2(s, 3, 2);
                assert_eq!(got, [dv, dr]);
                assert_eq!((refs(dv), held(dv), refs(dr), held(dr)), (1, 1, 1, 1));
                if i % 3 == 0 {
                    // SAFETY: valid output handles.
                    let d = handle_of(|h| unsafe { PMPI_Type_dup(got[0], h) });
                    // SAFETY: as above.
                    let z = handle_of(|h| unsafe { PMPI_Type_create_resized(got[1], 0, 96, h) });
                    assert_eq!((held(dv), held(dr)), (2, 2));
                    free(d);
                    free(z);
                    assert_eq!((held(dv), held(dr)), (1, 1));
                }
                free(got[0]);
                free(got[1]);
                assert_eq!((refs(dv), held(dv), refs(dr), held(dr)), (0, 1, 0, 1));
            }
            free(s);
            // Removed with the struct, once: their objects are ours alone.
            assert_eq!(objs.map(|o| Arc::strong_count(&o)), [1, 1]);
            for h in [s0, r, v] {
                free(h);
            }
        });
    }

    /// The body of `get_contents_returns_live_constituents_with_a_reference` (run in both
    /// modes of the reference counts).
    fn live_constituents_with_a_reference() {
        // SAFETY: valid output handles.
        let v = handle_of(|h| unsafe { PMPI_Type_vector(3, 1, 2, MPI_INT, h) });
        // SAFETY: as above.
        let c = handle_of(|h| unsafe { PMPI_Type_contiguous(2, MPI_DOUBLE, h) });
        let (bl, disp, ty) = ([1 as c_int, 1], [0isize, 64], [v, c]);
        // SAFETY: the three arrays hold 2 entries each; a valid output handle.
        let s = handle_of(|h| unsafe {
            PMPI_Type_create_struct(2, bl.as_ptr(), disp.as_ptr(), ty.as_ptr(), h)
        });
        let refs = |h| lock().types.refs(h);
        let held = |h| lock().types.held(h);
        assert_eq!((held(v), held(c), held(s)), (1, 1, 0));
        assert_eq!(contents2(s, 3, 2), [v, c]);
        assert_eq!(contents2(s, 3, 2), [v, c]);
        assert_eq!((refs(v), refs(c)), (3, 3));
        for h in [v, c, v, c] {
            free(h);
        }
        assert_eq!((refs(v), refs(c)), (1, 1));
        // The user's last reference of `v`: the struct's hold keeps the entry, which is
        // no longer the user's (a stale use is an error) ...
        free(v);
        assert_eq!((refs(v), held(v)), (0, 1));
        assert!(lock().types.is_entry(v) && lock().types.get(v).is_none());
        assert!(lock().dtype_ref(v).is_err() && lock().types.release(v).is_none());
        assert!(summary(v).is_none());
        // ... until `get_contents` hands it back: the same handle on the struct's object.
        let got = contents2(s, 3, 2);
        assert_eq!(got, [v, c]);
        assert_eq!(refs(v), 1);
        {
            let st = lock();
            let (t, orig) = (
                st.dtype_ref(v).unwrap(),
                &st.dtype_ref(s).unwrap().type_objs[0],
            );
            assert!(Arc::ptr_eq(t, orig), "not the struct's vector");
            assert_eq!((t.combiner, t.extent()), (MPI_COMBINER_VECTOR, 20));
        }
        assert_eq!(summary(v).map(|x| x.combiner), Some(MPI_COMBINER_VECTOR));
        free(got[0]);
        free(got[1]);
        // Committing `c` copies its object: `s` holds the old one, returned as a new handle.
        let mut cc = c;
        // SAFETY: a valid handle slot.
        assert_eq!(unsafe { PMPI_Type_commit(&mut cc) }, MPI_SUCCESS);
        let got = contents2(s, 3, 2);
        assert_eq!(got[0], v);
        assert!(got[1] != c && refs(got[1]) == 1 && refs(c) == 1);
        assert!(!lock().dtype_ref(got[1]).unwrap().committed);
        // The new handle holds nothing (its object's constituents are checked at each
        // decoding instead).
        assert_eq!(held(got[1]), 0);
        let objs = [v, c].map(|h| Arc::clone(lock().dtype_ref(h).unwrap()));
        for h in [got[0], got[1], c] {
            free(h);
        }
        // Both kept by the struct alone; its free removes them with it (their objects are
        // then ours alone; the handles may be another test's by now).
        assert_eq!((refs(v), held(v), refs(c), held(c)), (0, 1, 0, 1));
        free(s);
        assert_eq!(objs.map(|o| Arc::strong_count(&o)), [1, 1]);
    }

    /// `MPI_THREAD_MULTIPLE` use of shared handles: threads decode a struct (getting the
    /// handles of its two constituents, each also held by the user) and free what they
    /// got, dup and free the constituents, while the frees of shared references race
    /// with the locked adds. Every reference taken is dropped: the counts end where they
    /// began, and the handles and the struct still work.
    #[test]
    fn threads_share_handles_without_losing_references() {
        let (v, r, s) = vector_resized_struct();
        let refs = |h| lock().types.refs(h);
        const THREADS: usize = 4;
        const ROUNDS: usize = 100_000;
        let start = std::sync::Barrier::new(THREADS);
        std::thread::scope(|sc| {
            for k in 0..THREADS {
                let start = &start;
                sc.spawn(move || {
                    // All at once: the frees of shared references race with each other.
                    start.wait();
                    let mut held = Vec::new();
                    for i in 0..ROUNDS {
                        let got = contents2(s, 3, 2);
                        assert_eq!(got, [v, r]);
                        held.extend(got);
                        if i % 7 == k {
                            // SAFETY: a valid output handle.
                            let d = handle_of(|h| unsafe { PMPI_Type_dup(held[0], h) });
                            assert!(d != v && d != r);
                            free(d);
                        }
                        // Keep a few references a while: the count moves up and down.
                        while held.len() > 2 * (1 + i % 3) {
                            free(held.swap_remove(0));
                        }
                    }
                    for h in held {
                        free(h);
                    }
                });
            }
        });
        assert_eq!((refs(v), refs(r), refs(s)), (1, 1, 1));
        assert_eq!(contents2(s, 3, 2), [v, r]);
        for h in [v, r, r, v, s] {
            free(h);
        }
        assert_eq!((refs(v), refs(r), refs(s)), (0, 0, 0));
    }

    /// mpi4py's `dtlib` pattern under `MPI_THREAD_MULTIPLE`: the user frees a struct's
    /// two constituents (kept by the struct's holds, the vector also by the resized type
    /// made of it), then threads decode the struct and free what they get (each the
    /// last reference in turn, dropped without the lock) while one of them also makes and
    /// frees a type of the same handles (holds taken and dropped under the lock). Every
    /// reference and hold is dropped again: the handles come back the same each time, end
    /// kept with no reference, and go with the struct.
    #[test]
    fn threads_decode_kept_handles_without_losing_references() {
        let (v, r, s) = vector_resized_struct();
        // The struct's block lengths and displacements, for another struct of them.
        let (bl, disp) = ([1 as c_int, 2], [0isize, 64]);
        let objs = [v, r].map(|h| Arc::clone(lock().dtype_ref(h).unwrap()));
        free(v);
        free(r);
        let (refs, held) = (|h| lock().types.refs(h), |h| lock().types.held(h));
        assert_eq!((refs(v), held(v), refs(r), held(r)), (0, 2, 0, 1));
        const THREADS: usize = 4;
        const ROUNDS: usize = 100_000;
        let start = std::sync::Barrier::new(THREADS);
        std::thread::scope(|sc| {
            for k in 0..THREADS {
                let start = &start;
                sc.spawn(move || {
                    start.wait();
                    for i in 0..ROUNDS {
                        let got = contents2(s, 3, 2);
                        assert_eq!(got, [v, r]);
                        if k == 0 && i % 5 == 0 {
                            // SAFETY: the three arrays hold 2 entries each.
                            let s2 = handle_of(|h| unsafe {
                                PMPI_Type_create_struct(
                                    2,
                                    bl.as_ptr(),
                                    disp.as_ptr(),
                                    got.as_ptr(),
                                    h,
                                )
                            });
                            let again = contents2(s2, 3, 2);
                            assert_eq!(again, [v, r]);
                            free(s2);
                            free(again[0]);
                            free(again[1]);
                        }
                        free(got[0]);
                        free(got[1]);
                    }
                });
            }
        });
        assert_eq!((refs(v), held(v), refs(r), held(r)), (0, 2, 0, 1));
        assert_eq!(contents2(s, 3, 2), [v, r]);
        free(r);
        free(v);
        free(s);
        // The struct's free removed both kept handles: their objects are ours alone (the
        // resized type's holds the vector's).
        let [vo, ro] = objs;
        assert_eq!(Arc::strong_count(&ro), 1);
        drop(ro);
        assert_eq!(Arc::strong_count(&vo), 1);
    }

    /// The lock-free frees of one handle's shared references (two threads, no lock) race
    /// with each other and with references added under the lock (a third thread, as
    /// `get_contents` adds them): at `MPI_THREAD_MULTIPLE` (atomic updates) no update is
    /// lost, so the count ends at the one reference plus those added. Loads and stores
    /// (the serial mode's) lose some whenever two of the threads run at once.
    #[test]
    fn lock_free_frees_and_locked_adds_lose_no_update() {
        use crate::type_table::release_shared;
        // SAFETY: a valid output handle.
        let v = handle_of(|h| unsafe { PMPI_Type_vector(2, 1, 3, MPI_INT, h) });
        let obj = Arc::clone(lock().dtype_ref(v).unwrap());
        const FREES: u32 = 10_000_000;
        const ADDS: u32 = 2_000_000;
        {
            let st = lock();
            for _ in 0..2 * FREES {
                assert!(st.types.add_ref_to(v, &obj));
            }
        }
        let start = std::sync::Barrier::new(3);
        std::thread::scope(|sc| {
            for _ in 0..2 {
                let start = &start;
                sc.spawn(move || {
                    start.wait();
                    for _ in 0..FREES {
                        assert!(release_shared(v), "a shared reference was not there");
                    }
                });
            }
            let (start, obj) = (&start, &obj);
            sc.spawn(move || {
                start.wait();
                for _ in 0..ADDS {
                    assert!(lock().types.add_ref_to(v, obj));
                }
            });
        });
        assert_eq!(lock().types.refs(v), 1 + ADDS, "updates lost");
        for _ in 0..ADDS + 1 {
            free(v);
        }
        assert_eq!(Arc::strong_count(&obj), 1);
    }

    /// The race of a kept handle's last reference and its last hold: one thread decodes a
    /// new struct of a freed duplicate (one hold, then one reference) and frees what it
    /// got (without the lock: a hold remains) while another frees the struct (dropping
    /// the hold under the lock). Whichever comes second must remove the duplicate's
    /// entry, exactly once: its object is then held by no one else.
    #[test]
    fn last_reference_and_last_hold_race_to_one_removal() {
        use std::sync::atomic::AtomicI32;
        // SAFETY: a valid output handle.
        let v = handle_of(|h| unsafe { PMPI_Type_vector(2, 1, 3, MPI_INT, h) });
        const ROUNDS: usize = 20_000;
        let (shared, xs) = (AtomicI32::new(0), AtomicI32::new(0));
        let step = std::sync::Barrier::new(2);
        std::thread::scope(|sc| {
            let (shared, xs, step) = (&shared, &xs, &step);
            // The maker: a duplicate, a struct of it, the duplicate freed (kept).
            sc.spawn(move || {
                for _ in 0..ROUNDS {
                    // SAFETY: a valid output handle.
                    let x = handle_of(|h| unsafe { PMPI_Type_dup(v, h) });
                    let xobj = Arc::clone(lock().dtype_ref(x).unwrap());
                    let (bl, disp, ty) = ([1 as c_int, 1], [0isize, 64], [x, MPI_INT]);
                    // SAFETY: the three arrays hold 2 entries each; a valid output handle.
                    let s2 = handle_of(|h| unsafe {
                        PMPI_Type_create_struct(2, bl.as_ptr(), disp.as_ptr(), ty.as_ptr(), h)
                    });
                    free(x);
                    shared.store(s2, Ordering::Relaxed);
                    xs.store(x, Ordering::Relaxed);
                    step.wait();
                    step.wait();
                    free(s2);
                    step.wait();
                    assert_eq!(Arc::strong_count(&xobj), 1, "the duplicate's entry stayed");
                }
            });
            // The decoder.
            sc.spawn(move || {
                for _ in 0..ROUNDS {
                    step.wait();
                    let (s2, x) = (shared.load(Ordering::Relaxed), xs.load(Ordering::Relaxed));
                    let got = contents2(s2, 3, 2);
                    assert_eq!(got, [x, MPI_INT]);
                    step.wait();
                    free(got[0]);
                    step.wait();
                }
            });
        });
        free(v);
    }

    #[test]
    fn darray_matches_the_hpf_definition_for_random_cases() {
        // Reference: the owner of global index j of a dimension (MPI-3.1 §4.1.4):
        // BLOCK(b) -> j / b, CYCLIC(b) -> (j / b) mod p, NONE -> 0; ranks are row-major in
        // the process grid whatever the array order.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n) as usize
        };
        for case in 0..200 {
            let nd = 1 + rnd(3);
            let order = if rnd(2) == 0 {
                MPI_ORDER_C
            } else {
                MPI_ORDER_FORTRAN
            };
            let mut gs = vec![0 as c_int; nd];
            let mut ds = vec![0 as c_int; nd];
            let mut da = vec![MPI_DISTRIBUTE_DFLT_DARG; nd];
            let mut ps = vec![1 as c_int; nd];
            for d in 0..nd {
                gs[d] = 1 + rnd(7) as c_int;
                ds[d] = [
                    MPI_DISTRIBUTE_NONE,
                    MPI_DISTRIBUTE_BLOCK,
                    MPI_DISTRIBUTE_CYCLIC,
                ][rnd(3)];
                if ds[d] != MPI_DISTRIBUTE_NONE {
                    ps[d] = 1 + rnd(3) as c_int;
                }
                if ds[d] == MPI_DISTRIBUTE_CYCLIC && rnd(2) == 0 {
                    da[d] = 1 + rnd(3) as c_int;
                }
                if ds[d] == MPI_DISTRIBUTE_BLOCK && rnd(2) == 0 {
                    // A block size large enough to cover the dimension.
                    da[d] = (gs[d] + ps[d] - 1) / ps[d] + rnd(2) as c_int;
                }
            }
            let size: c_int = ps.iter().product();
            let total: usize = gs.iter().map(|&g| g as usize).product();
            let mut owner_count = vec![0usize; total];
            for rank in 0..size {
                let mut h = 0;
                // SAFETY: argument arrays of length nd and a valid output handle.
                let rc = unsafe {
                    PMPI_Type_create_darray(
                        size,
                        rank,
                        nd as c_int,
                        gs.as_ptr(),
                        ds.as_ptr(),
                        da.as_ptr(),
                        ps.as_ptr(),
                        order,
                        MPI_INT,
                        &mut h,
                    )
                };
                assert_eq!(rc, MPI_SUCCESS, "case {case}");
                let t = lock().dtype(h).unwrap();
                // Coordinates of `rank` in the row-major process grid.
                let mut coords = vec![0usize; nd];
                let mut r = rank as usize;
                for d in (0..nd).rev() {
                    coords[d] = r % ps[d] as usize;
                    r /= ps[d] as usize;
                }
                // Every global index tuple, in memory order of the array.
                let mut expected = Vec::new();
                for (lin, count) in owner_count.iter_mut().enumerate() {
                    // Decompose the memory offset `lin` into indices.
                    let mut idx = vec![0usize; nd];
                    let mut rem = lin;
                    let dims: Vec<usize> = if order == MPI_ORDER_C {
                        (0..nd).rev().collect()
                    } else {
                        (0..nd).collect()
                    };
                    for &d in &dims {
                        idx[d] = rem % gs[d] as usize;
                        rem /= gs[d] as usize;
                    }
                    let mine = (0..nd).all(|d| {
                        let (j, p) = (idx[d], ps[d] as usize);
                        let owner = match ds[d] {
                            MPI_DISTRIBUTE_NONE => 0,
                            MPI_DISTRIBUTE_BLOCK => {
                                let b = if da[d] == MPI_DISTRIBUTE_DFLT_DARG {
                                    (gs[d] as usize).div_ceil(p)
                                } else {
                                    da[d] as usize
                                };
                                j / b
                            }
                            _ => {
                                let b = if da[d] == MPI_DISTRIBUTE_DFLT_DARG {
                                    1
                                } else {
                                    da[d] as usize
                                };
                                (j / b) % p
                            }
                        };
                        owner == coords[d]
                    });
                    if mine {
                        expected.push(lin as isize);
                        *count += 1;
                    }
                }
                assert_eq!(
                    element_offsets(&t, 4),
                    expected,
                    "case {case} rank {rank}: {gs:?} {ds:?} {da:?} {ps:?} order {order}"
                );
                assert_eq!(t.size, expected.len() * 4);
                assert_eq!((t.lb, t.extent()), (0, total as isize * 4));
                // SAFETY: `h` is a derived type handle.
                assert_eq!(unsafe { PMPI_Type_free(&mut h) }, MPI_SUCCESS);
            }
            // The distribution is a partition: every element has exactly one owner.
            assert!(
                owner_count.iter().all(|&c| c == 1),
                "case {case}: {owner_count:?}"
            );
        }
    }

    #[test]
    fn status_count_roundtrip() {
        let mut s = MpiStatus::default();
        status_set_bytes(&mut s, (5u64 << 32) as usize + 17, true);
        assert_eq!(status_bytes(&s), (5u64 << 32) as usize + 17);
        assert_eq!(s.count_hi_and_cancelled & 1, 1);
        status_set_bytes(&mut s, 40, false);
        assert_eq!(status_bytes(&s), 40);
        assert_eq!(s.count_hi_and_cancelled & 1, 0);
    }
}

/// The lock-free summaries of [`crate::type_table`] (here, beside the predefined types
/// the tests copy, so that `type_table` needs nothing of this module).
#[cfg(test)]
mod summaries {
    use super::*;

    fn dt(size: usize, lb: isize, ub: isize, ints: usize) -> Arc<Datatype> {
        let mut t = (*builtin(MPI_INT).unwrap()).clone();
        t.predefined = false;
        t.size = size;
        t.lb = lb;
        t.ub = ub;
        t.true_lb = lb + 1;
        t.true_ub = ub - 1;
        t.combiner = MPI_COMBINER_CONTIGUOUS;
        t.ints = vec![7; ints];
        t.types = OneOrMany::One(MPI_INT);
        t.into()
    }

    /// A summary appears with its handle, follows the handle's reuse and disappears at
    /// removal; other handles never read it. (The library state's table: the side table
    /// is global, and its writers are serialised by the library lock.)
    #[test]
    fn summaries_follow_insertion_removal_and_reuse() {
        let mut st = lock();
        let a = st.types.insert(dt(12, -4, 20, 1));
        let s = summary(a).expect("published");
        assert_eq!(
            (
                s.combiner,
                s.num_integers,
                s.num_addresses,
                s.num_large_counts,
                s.num_datatypes
            ),
            (MPI_COMBINER_CONTIGUOUS, 1, 0, 0, 1)
        );
        assert_eq!(
            (s.size, s.lb, s.ub, s.true_lb, s.true_ub, s.extent()),
            (12, -4, 20, -3, 19, 24)
        );
        assert_eq!(summary(MPI_INT), None);
        assert!(st.types.remove(a).is_some());
        assert_eq!(summary(a), None);
        let b = st.types.insert(dt(40, 0, 40, 3));
        assert_eq!(b, a, "the freed index is reused");
        let s = summary(b).expect("published");
        assert_eq!((s.size, s.num_integers, s.extent()), (40, 3, 40));
        assert!(st.types.remove(b).is_some());
    }

    /// Readers racing with a writer that keeps replacing one handle's type and committing
    /// it (republishing word 0) never see a summary mixed from two types or a torn word:
    /// every published one has size == ub == 8 * ints and the contiguous combiner, with
    /// either flag value.
    #[test]
    fn readers_never_see_a_torn_summary() {
        let h = lock().types.insert(dt(8, 0, 8, 1));
        let stop = std::sync::atomic::AtomicBool::new(false);
        let started = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|sc| {
            let r = sc.spawn(|| {
                let (mut seen, mut on) = (0u64, 0u64);
                while !stop.load(Ordering::Relaxed) {
                    // set before the checks, so that a failing check cannot leave the
                    // writer waiting
                    started.store(true, Ordering::Relaxed);
                    if let Some(s) = summary(h) {
                        assert_eq!(s.combiner, MPI_COMBINER_CONTIGUOUS, "torn: {s:?}");
                        assert_eq!(s.size, 8 * s.num_integers as u64, "torn: {s:?}");
                        assert_eq!(s.ub as u64, s.size, "torn: {s:?}");
                        seen += 1;
                        on += s.committed as u64;
                    }
                }
                (seen, on)
            });
            // The reader runs before the writes start (one of two shared vCPUs).
            while !started.load(Ordering::Relaxed) {
                std::thread::yield_now();
            }
            for k in 1..20_000usize {
                let mut st = lock();
                st.types.remove(h);
                let n = 1 + k % 5;
                assert_eq!(st.types.insert(dt(8 * n, 0, 8 * n as isize, n)), h);
                Arc::make_mut(st.types.get_mut(h).unwrap()).committed = true;
                st.types.note_committed(h);
                drop(st);
                assert!(crate::type_table::committed(h));
            }
            stop.store(true, Ordering::Relaxed);
            let (seen, on) = r.join().unwrap();
            assert!(seen > 0 && on <= seen);
        });
        lock().types.remove(h);
    }
}
