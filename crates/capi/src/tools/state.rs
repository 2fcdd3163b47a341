//! The tools interface's state: initialization count, the stable indices of control
//! variables and categories, the handle tables, the MPICH-ABI constants of `MPI_T_*`, and
//! the helpers every `MPI_T_*` entry point uses (errors returned directly, strings out).
//!
//! Control variables are the parameter registry's entries (`oxmpi_base::params`), indexed in
//! the order they were first seen: the registry may grow (a parameter registered on first
//! use), and an index never changes once handed out. Categories are the frameworks
//! (`btl`) and their components (`btl_sm`), holding the control and performance variables
//! of that framework or component.

use crate::ffi::{copy_cstr, MpiError, MpiResult};
use oxmpi_base::params::{self, tools as view};
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};
use std::sync::{Mutex, MutexGuard};

// MPICH-ABI values of the tools interface's constants (the ABI fact table).
pub(crate) const MPI_T_ERR_NOT_INITIALIZED: c_int = 60;
pub(crate) const MPI_T_ERR_INVALID_INDEX: c_int = 62;
pub(crate) const MPI_T_ERR_INVALID_ITEM: c_int = 63;
pub(crate) const MPI_T_ERR_INVALID_HANDLE: c_int = 64;
pub(crate) const MPI_T_ERR_INVALID_SESSION: c_int = 67;
pub(crate) const MPI_T_ERR_CVAR_SET_NEVER: c_int = 69;
pub(crate) const MPI_T_ERR_PVAR_NO_STARTSTOP: c_int = 70;
pub(crate) const MPI_T_ERR_PVAR_NO_WRITE: c_int = 71;
pub(crate) const MPI_T_ERR_INVALID_NAME: c_int = 73;
pub(crate) const MPI_T_ERR_INVALID: c_int = 74;
/// `MPI_T_VERBOSITY_USER_BASIC`; the nine levels are consecutive.
pub(crate) const MPI_T_VERBOSITY_USER_BASIC: c_int = 221;
pub(crate) const MPI_T_BIND_NO_OBJECT: c_int = 9700;
pub(crate) const MPI_T_BIND_MPI_COMM: c_int = 9701;
pub(crate) const MPI_T_SCOPE_CONSTANT: c_int = 60438;
pub(crate) const MPI_T_SCOPE_READONLY: c_int = 60439;
pub(crate) const MPI_T_SCOPE_LOCAL: c_int = 60440;
pub(crate) const MPI_T_SCOPE_ALL_EQ: c_int = 60444;
pub(crate) const MPI_T_PVAR_CLASS_LEVEL: c_int = 241;
pub(crate) const MPI_T_PVAR_CLASS_SIZE: c_int = 242;
pub(crate) const MPI_T_PVAR_CLASS_HIGHWATERMARK: c_int = 244;
pub(crate) const MPI_T_PVAR_CLASS_COUNTER: c_int = 246;
pub(crate) const MPI_T_PVAR_CLASS_TIMER: c_int = 248;
pub(crate) const MPI_T_SOURCE_ORDERED: c_int = 0;

/// `MPI_T_PVAR_ALL_HANDLES`: MPICH exports it as a data symbol holding the handle value;
/// ours is 1, the value the standard ABI gives it, which no allocated handle takes.
#[no_mangle]
pub static MPI_T_PVAR_ALL_HANDLES: usize = ALL_HANDLES;
/// The value of `MPI_T_PVAR_ALL_HANDLES`.
pub(crate) const ALL_HANDLES: usize = 1;

/// The error owner of the tools interface: `MPI_T_*` functions return their error codes
/// and never invoke an error handler (MPI 4.1 §15.3.10); argument errors become
/// `MPI_T_ERR_INVALID`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Direct;

impl crate::ffi::ErrorOwner for Direct {
    fn raise(&self, _func: &str, err: &MpiError) -> c_int {
        match err.code {
            crate::consts::MPI_ERR_ARG => MPI_T_ERR_INVALID,
            c => c,
        }
    }
}

/// Every performance variable: the engine's, then the collectives' (their indices).
pub(crate) fn all_pvars() -> impl Iterator<Item = &'static oxmpi_engine::Pvar> {
    oxmpi_engine::pvars().chain(oxmpi_coll::pvars())
}

/// Fails with `code`.
pub(crate) fn fail<T>(code: c_int, what: impl Into<String>) -> MpiResult<T> {
    Err(MpiError::new(code, what))
}

/// A table of handles: slot `i` is handed out as the pointer value `i + 2` (0 is the null
/// handle, 1 is `MPI_T_PVAR_ALL_HANDLES`).
#[derive(Debug)]
pub(crate) struct Slots<T>(Vec<Option<T>>);

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots(Vec::new())
    }
}

impl<T> Slots<T> {
    /// Stores `v`; returns its handle.
    pub(crate) fn insert(&mut self, v: T) -> *mut c_void {
        let i = match self.0.iter().position(Option::is_none) {
            Some(i) => {
                self.0[i] = Some(v);
                i
            }
            None => {
                self.0.push(Some(v));
                self.0.len() - 1
            }
        };
        (i + 2) as *mut c_void
    }

    fn slot(h: *mut c_void) -> Option<usize> {
        (h as usize).checked_sub(2)
    }

    /// The value of handle `h`.
    pub(crate) fn get_mut(&mut self, h: *mut c_void) -> Option<&mut T> {
        self.0.get_mut(Self::slot(h)?)?.as_mut()
    }

    /// Removes handle `h`.
    pub(crate) fn remove(&mut self, h: *mut c_void) -> Option<T> {
        self.0.get_mut(Self::slot(h)?)?.take()
    }

    /// Every live value with its handle.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (*mut c_void, &mut T)> {
        self.0
            .iter_mut()
            .enumerate()
            .filter_map(|(i, v)| Some(((i + 2) as *mut c_void, v.as_mut()?)))
    }

    /// Removes every value for which `f` holds.
    pub(crate) fn remove_where(&mut self, mut f: impl FnMut(&T) -> bool) {
        for v in &mut self.0 {
            if v.as_ref().is_some_and(&mut f) {
                *v = None;
            }
        }
    }
}

/// A category: a framework or one of its components.
#[derive(Debug, Default)]
pub(crate) struct Category {
    pub name: String,
    pub desc: String,
    pub cvars: Vec<c_int>,
    pub pvars: Vec<c_int>,
    pub events: Vec<c_int>,
    pub subcats: Vec<c_int>,
}

/// A performance variable handle: the engine's reader of the variable, in a session.
#[derive(Debug)]
pub(crate) struct PvarHandle {
    /// The session it belongs to.
    pub session: *mut c_void,
    /// What it reads and keeps (dropping it stops it).
    pub reader: oxmpi_engine::PvarReader,
}

/// Everything the tools interface keeps between calls.
#[derive(Debug, Default)]
pub(crate) struct Tools {
    /// `MPI_T_init_thread` calls not yet matched by `MPI_T_finalize`.
    pub refs: u32,
    /// Control variable index -> parameter name.
    pub cvars: Vec<String>,
    pub cvar_index: HashMap<String, c_int>,
    pub categories: Vec<Category>,
    pub category_index: HashMap<String, c_int>,
    /// Bumped whenever a variable or category is added.
    pub changed: c_int,
    /// Control variable handles: the variable's index.
    pub cvar_handles: Slots<c_int>,
    /// Performance variable sessions (no data of their own).
    pub sessions: Slots<()>,
    pub pvar_handles: Slots<PvarHandle>,
}

// SAFETY: the raw pointers in `Tools` are handle values (small integers), never
// dereferenced; the table lives behind a mutex.
unsafe impl Send for Tools {}

static TOOLS: Mutex<Option<Tools>> = Mutex::new(None);

/// The tools state, locked (poisoning ignored: the state stays consistent per call).
pub(crate) fn lock() -> MutexGuard<'static, Option<Tools>> {
    TOOLS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs `f` on the state if the interface is initialized, else fails with
/// `MPI_T_ERR_NOT_INITIALIZED`.
pub(crate) fn with<T>(f: impl FnOnce(&mut Tools) -> MpiResult<T>) -> MpiResult<T> {
    let mut g = lock();
    match g.as_mut() {
        Some(t) if t.refs > 0 => f(t),
        _ => fail(
            MPI_T_ERR_NOT_INITIALIZED,
            "the tools interface is not initialized (call MPI_T_init_thread)",
        ),
    }
}

impl Tools {
    /// The index of category `name`, created (under its framework's category, for a
    /// component) if new.
    fn category(&mut self, name: &str, reg: &params::Registry) -> c_int {
        if let Some(&i) = self.category_index.get(name) {
            return i;
        }
        let (fw, comp) = match reg.frameworks().find(|f| {
            name.strip_prefix(f.name)
                .is_some_and(|r| r.starts_with('_'))
        }) {
            Some(f) => (f.name, Some(&name[f.name.len() + 1..])),
            None => (name, None),
        };
        let parent = comp.map(|_| self.category(fw, reg));
        let desc = match (reg.framework(fw), comp) {
            (Some(f), None) => f.description.to_string(),
            (Some(f), Some(c)) => f.components.iter().find(|k| k.name == c).map_or_else(
                || format!("{c} component of {fw}"),
                |k| k.description.into(),
            ),
            (None, _) => format!("{name} parameters"),
        };
        let i = self.categories.len() as c_int;
        self.categories.push(Category {
            name: name.to_string(),
            desc,
            ..Category::default()
        });
        self.category_index.insert(name.to_string(), i);
        if let Some(p) = parent {
            self.categories[p as usize].subcats.push(i);
        }
        self.changed += 1;
        i
    }

    /// Gives every registered parameter not seen yet the next control variable index (and
    /// every performance variable its category, the first time).
    pub(crate) fn sync(&mut self) {
        // The event types read the registry's frameworks the first time: before locking it.
        let event_categories: Vec<&str> = super::event_types::type_categories().collect();
        let Ok(reg) = params::global() else {
            return;
        };
        if self.categories.is_empty() {
            for (i, p) in all_pvars().enumerate() {
                let c = self.category(p.category, &reg);
                self.categories[c as usize].pvars.push(i as c_int);
            }
            for (i, cat) in event_categories.into_iter().enumerate() {
                let c = self.category(cat, &reg);
                self.categories[c as usize].events.push(i as c_int);
            }
        }
        let new: Vec<(String, String)> = reg
            .entries()
            .filter(|e| !self.cvar_index.contains_key(&e.decl.full_name()))
            .map(|e| (e.decl.full_name(), view::category_of(e)))
            .collect();
        for (name, cat) in new {
            let i = self.cvars.len() as c_int;
            self.cvars.push(name.clone());
            self.cvar_index.insert(name, i);
            let c = self.category(&cat, &reg);
            self.categories[c as usize].cvars.push(i);
            self.changed += 1;
        }
    }

    /// The name of control variable `i`.
    pub(crate) fn cvar_name(&self, i: c_int) -> MpiResult<&str> {
        match usize::try_from(i).ok().and_then(|i| self.cvars.get(i)) {
            Some(n) => Ok(n),
            None => fail(MPI_T_ERR_INVALID_INDEX, format!("no control variable {i}")),
        }
    }
}

/// Writes `s` the MPI_T way (MPI 4.1 §15.3.3): nothing if `len` is NULL; only the length
/// needed (with the NUL) if `buf` is NULL or `*len` is 0; else up to `*len - 1` characters
/// and a NUL, and `*len` becomes the number written with the NUL.
pub(crate) fn out_str(s: &str, buf: *mut c_char, len: *mut c_int) -> MpiResult {
    if len.is_null() {
        return Ok(());
    }
    // SAFETY: `len` is a non-NULL pointer to an int (MPI argument contract).
    let cap = unsafe { len.read_unaligned() };
    let n = if buf.is_null() || cap <= 0 {
        s.len() as c_int + 1
    } else {
        copy_cstr(buf, cap as usize, s)? + 1
    };
    // SAFETY: as above.
    unsafe { len.write_unaligned(n) };
    Ok(())
}

/// Writes `v` through `p` unless it is NULL (the tools interface's optional outputs).
pub(crate) fn opt<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: a non-NULL output pointer of the documented type from the C caller.
        unsafe { p.write_unaligned(v) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_go_out_the_mpi_t_way() {
        let mut buf = [0 as c_char; 8];
        let mut len: c_int = 0;
        out_str("btl_sm", buf.as_mut_ptr(), &mut len).unwrap();
        assert_eq!(len, 7);
        len = 4;
        out_str("btl_sm", buf.as_mut_ptr(), &mut len).unwrap();
        assert_eq!(len, 4);
        assert_eq!(
            buf[..4],
            [b'b' as c_char, b't' as c_char, b'l' as c_char, 0]
        );
        out_str("x", buf.as_mut_ptr(), std::ptr::null_mut()).unwrap();
    }

    #[test]
    fn slots_hand_out_reusable_handles_above_all_handles() {
        let mut s: Slots<u8> = Slots::default();
        let a = s.insert(1);
        let b = s.insert(2);
        assert_eq!((a as usize, b as usize), (2, 3));
        assert_eq!(s.remove(a), Some(1));
        assert!(s.get_mut(a).is_none());
        assert!(s.get_mut(ALL_HANDLES as *mut c_void).is_none());
        assert_eq!(s.insert(3) as usize, 2);
        s.remove_where(|v| *v == 2);
        assert_eq!(s.iter_mut().count(), 1);
    }
}
