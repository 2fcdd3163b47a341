//! Handle tables with MPICH's 32-bit handle encoding, below every object module.
//!
//! MPICH handles carry the handle kind in bits 30-31 (`01` builtin, `10` direct, `00`
//! null) and the object type in bits 26-29. Predefined objects keep the exact MPICH
//! values (they are compiled into clients); objects we create are "direct" handles
//! `0x80000000 | type << 26 | index`.

use std::ffi::c_int;

/// Object types (bits 26-29 of a handle).
pub(crate) mod kind {
    pub const COMM: u32 = 1;
    pub const GROUP: u32 = 2;
    pub const DATATYPE: u32 = 3;
    pub const ERRHANDLER: u32 = 5;
    pub const OP: u32 = 6;
    pub const INFO: u32 = 7;
    pub const WIN: u32 = 8;
    pub const KEYVAL: u32 = 9;
    pub const REQUEST: u32 = 11;
    pub const SESSION: u32 = 14;
}

/// Base value of direct handles of object type `t`.
pub(crate) const fn direct_base(t: u32) -> u32 {
    0x8000_0000 | (t << 26)
}

/// The first index of the datatypes we create: direct datatype indices 0-4 are MPICH's
/// pair types (`MPI_FLOAT_INT` ...), so a direct datatype handle from this index on is
/// never a predefined one.
pub(crate) const DATATYPE_FIRST: u32 = 16;

/// The handle bits of fast requests (`request.rs`): direct request handles with index bit
/// 24 set, between the request table's indices (from 0) and the messages' (from
/// `0x0200_0000`).
pub(crate) const FAST_REQUEST_BASE: u32 = direct_base(kind::REQUEST) | 0x0100_0000;

/// The handle of every nonblocking operation that completed inside its start call with the
/// empty status of a completed send (an eager send written straight into the link,
/// `oxmpi_engine::Engine::isend_started`; a nonblocking collective that ended at its post,
/// `icoll/sched.rs`): it has no state, so all such requests share it. Wait and test
/// complete it at once, `MPI_Request_free` and `MPI_Cancel` do nothing, `MPI_Start` rejects
/// it. Outside the fast slot range (`request.rs`), so never a slot's handle.
pub(crate) const SEND_DONE: c_int = (FAST_REQUEST_BASE | 0x00ff_ff00) as c_int;

/// A slab of objects addressed by direct handles.
pub(crate) struct Table<T> {
    slots: Vec<Option<T>>,
    free: Vec<usize>,
    base: u32,
    first: u32,
}

impl<T> Table<T> {
    /// A table for object type `t` whose first index is `first`.
    pub const fn new(t: u32, first: u32) -> Self {
        Table {
            slots: Vec::new(),
            free: Vec::new(),
            base: direct_base(t),
            first,
        }
    }
    /// Store an object; returns its handle.
    pub fn insert(&mut self, v: T) -> c_int {
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(v);
                i
            }
            None => {
                self.slots.push(Some(v));
                self.slots.len() - 1
            }
        };
        (self.base | (self.first + i as u32)) as c_int
    }
    fn index(&self, h: c_int) -> Option<usize> {
        let h = h as u32;
        if h & 0xfc00_0000 != self.base {
            return None;
        }
        let i = (h & 0x03ff_ffff).checked_sub(self.first)? as usize;
        (i < self.slots.len()).then_some(i)
    }
    /// The object of handle `h`, if it is live.
    pub fn get(&self, h: c_int) -> Option<&T> {
        self.index(h).and_then(|i| self.slots[i].as_ref())
    }
    /// The object of handle `h`, mutably.
    pub fn get_mut(&mut self, h: c_int) -> Option<&mut T> {
        self.index(h).and_then(|i| self.slots[i].as_mut())
    }
    /// Remove and return the object of handle `h`.
    pub fn remove(&mut self, h: c_int) -> Option<T> {
        let i = self.index(h)?;
        let v = self.slots[i].take();
        if v.is_some() {
            self.free.push(i);
        }
        v
    }
    /// Number of live objects.
    #[cfg(test)]
    pub fn live(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consts::MPI_FLOAT_INT;

    #[test]
    fn table_handles_use_the_mpich_direct_encoding() {
        let mut t: Table<u32> = Table::new(kind::COMM, 0);
        let a = t.insert(7);
        let b = t.insert(8);
        assert_eq!(a as u32, 0x8400_0000);
        assert_eq!(b as u32, 0x8400_0001);
        assert_eq!(t.get(b), Some(&8));
        assert_eq!(t.remove(a), Some(7));
        assert_eq!(t.get(a), None);
        assert_eq!(t.remove(a), None);
        // A freed slot is reused.
        assert_eq!(t.insert(9), a);
        // Handles of another object type or random values are rejected.
        assert_eq!(t.get(0x8c00_0000_u32 as c_int), None);
        assert_eq!(t.get(0x1234), None);
        assert_eq!(t.get(-1), None);
        assert_eq!(t.live(), 2);
    }

    #[test]
    fn datatype_table_skips_the_pair_type_indices() {
        let mut t: Table<u8> = Table::new(kind::DATATYPE, 16);
        assert_eq!(t.insert(1) as u32, 0x8c00_0010);
        assert_eq!(t.get(MPI_FLOAT_INT), None);
    }
}
