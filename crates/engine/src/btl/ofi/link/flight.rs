//! Operations in flight on the rank's endpoint that are not the btl's own records: the
//! matching offload's ([`super::mtl`]) and the one-sided ones ([`super::osc`]). Each is a
//! boxed [`Flight`] in a [`Flights`] slab; its index sits in its context ([`Op::idx`]),
//! which is the flight's address, so a completion finds it again. Indices are reused, so
//! an operation's token ([`Flights::token`]) is its index and the generation of its slot:
//! a completion handed out after its flight went never names the next operation in the
//! same slot.

use std::ffi::c_void;

use super::Op;
use crate::btl::ofi::fabric::Mr;

/// One operation in flight: its context first (the provider's scratch space, then whose
/// operation it is), then what must live until its completion.
#[repr(C)]
#[derive(Debug)]
pub(super) struct Flight {
    pub(super) op: Op,
    /// The operation's own copy of its bytes (a put, a buffered send), or empty.
    pub(super) data: Vec<u8>,
    /// The local registration of its buffer (`FI_MR_LOCAL` providers).
    pub(super) mr: Option<Mr>,
    /// Further local registrations (the result buffer of a fetching atomic).
    pub(super) more: Vec<Mr>,
    /// Which of its slot's operations it is ([`Flights::token`]).
    generation: u32,
}

/// A slab of [`Flight`]s: indices are reused once their operation is taken out.
#[derive(Debug, Default)]
pub(super) struct Flights {
    /// Boxed: the provider holds the contexts' addresses while the vector grows.
    #[allow(clippy::vec_box)]
    slots: Vec<Option<Box<Flight>>>,
    free: Vec<usize>,
    /// The generation of the next flight.
    next: u32,
}

impl Flights {
    /// A new flight of `kind` for `peer` holding `data`: its index and its context.
    pub(super) fn add(&mut self, kind: u8, peer: u32, data: Vec<u8>) -> (usize, *mut c_void) {
        let idx = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        // Moving the vector into the box keeps its heap buffer where it is.
        let mut f = Box::new(Flight {
            op: Op {
                kind,
                peer,
                idx: idx as u32,
                ..Op::default()
            },
            data,
            mr: None,
            more: Vec::new(),
            generation: self.next,
        });
        self.next = self.next.wrapping_add(1);
        let ctx = std::ptr::addr_of_mut!(f.op).cast::<c_void>();
        self.slots[idx] = Some(f);
        (idx, ctx)
    }

    /// The token of flight `idx` (its generation above its index), if it is in flight.
    pub(super) fn token(&self, idx: usize) -> Option<u64> {
        self.get(idx)
            .map(|f| u64::from(f.generation) << 32 | idx as u64)
    }

    /// The index of the flight with token `tok`, if that operation is still in flight.
    pub(super) fn by_token(&self, tok: u64) -> Option<usize> {
        let idx = (tok & u64::from(u32::MAX)) as usize;
        self.get(idx)
            .filter(|f| u64::from(f.generation) == tok >> 32)
            .map(|_| idx)
    }

    /// Flight `idx`, if it is in flight.
    pub(super) fn get(&self, idx: usize) -> Option<&Flight> {
        self.slots.get(idx).and_then(Option::as_deref)
    }

    /// Flight `idx`, if it is in flight.
    pub(super) fn get_mut(&mut self, idx: usize) -> Option<&mut Flight> {
        self.slots.get_mut(idx).and_then(Option::as_deref_mut)
    }

    /// Takes flight `idx` out (its operation completed or was never posted); its index is
    /// free again.
    pub(super) fn take(&mut self, idx: usize) -> Option<Box<Flight>> {
        let f = self.slots.get_mut(idx).and_then(Option::take)?;
        self.free.push(idx);
        Some(f)
    }

    /// Takes the registrations of every flight (the fabric closes next; the contexts stay).
    pub(super) fn take_mrs(&mut self) -> Vec<Mr> {
        self.slots
            .iter_mut()
            .flatten()
            .flat_map(|f| {
                let mut v: Vec<Mr> = f.mr.take().into_iter().collect();
                v.append(&mut f.more);
                v
            })
            .collect()
    }

    /// Forgets every flight (the endpoint is closed: nothing refers to their contexts).
    pub(super) fn clear(&mut self) {
        self.slots.clear();
        self.free.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_are_reused_and_contexts_name_their_flight() {
        let mut s = Flights::default();
        let (a, ca) = s.add(5, 1, vec![1, 2]);
        let (b, _) = s.add(4, 2, Vec::new());
        assert_eq!((a, b), (0, 1));
        // SAFETY: the context is the address of the live flight's Op.
        let op = unsafe { &*ca.cast::<Op>() };
        assert_eq!((op.kind, op.peer, op.idx), (5, 1, 0));
        assert_eq!(s.get(a).unwrap().data, [1, 2]);
        assert!(s.take(a).is_some());
        assert!(s.get(a).is_none() && s.take(a).is_none());
        let (c, _) = s.add(5, 3, Vec::new());
        assert_eq!(c, a, "the freed index");
        s.get_mut(c).unwrap().op.peer = 9;
        assert_eq!(s.get(c).unwrap().op.peer, 9);
        assert!(s.take_mrs().is_empty());
        s.clear();
        assert!(s.get(b).is_none());
    }

    /// A slot's next operation gets another token: a completion of the one before (read
    /// from the queue, not yet applied) never names it.
    #[test]
    fn a_reused_index_gets_a_new_token() {
        let mut s = Flights::default();
        let (a, _) = s.add(5, 1, Vec::new());
        let ta = s.token(a).unwrap();
        assert_eq!(s.by_token(ta), Some(a));
        s.take(a);
        assert_eq!((s.token(a), s.by_token(ta)), (None, None));
        let (b, _) = s.add(5, 1, Vec::new());
        assert_eq!(b, a, "the freed index");
        let tb = s.token(b).unwrap();
        assert_ne!(tb, ta);
        assert_eq!((s.by_token(ta), s.by_token(tb)), (None, Some(b)));
        s.clear();
        assert!(s.get(b).is_none());
    }
}
