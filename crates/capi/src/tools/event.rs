//! Event sources and events (`MPI_T_source_*`, `MPI_T_event_*`, MPI 4.1 §15.3.8).
//!
//! One source, the library's monotonic clock in nanoseconds, ordered. The event types are
//! what `oxmpi_base::events` carries, in a fixed order (their indices):
//! * `pml_ox_proc_failed`: a peer process was found dead (`int rank`, its world rank);
//! * `btl_transport_chosen`: the transport that reaches a peer, once per peer at wire-up
//!   (`int peer; char transport[16]`);
//! * `pml_ox_unexpected_arrival`: a message queued before its receive was posted
//!   (`int source; int tag; unsigned context; unsigned long long bytes`);
//! * `<framework>_verbose_line`, one per framework: a line of its verbose stream
//!   (`int level; char text[252]`), at the stream's verbosity (`<framework>_base_verbose`).
//!
//! Every element is one item of a predefined datatype at its displacement; text is a run of
//! `MPI_CHAR` elements, NUL-terminated (truncated if longer).
//!
//! Safety levels: an event raised on the main thread happens inside the library, possibly
//! with its locks held, so its context needs `MPI_T_CB_REQUIRE_MPI_RESTRICTED` (the callback
//! calls only `MPI_T_event_read`, `_copy`, `_get_timestamp`, `_get_source`); one raised on
//! another thread (the progress thread, or the application's under `MPI_THREAD_MULTIPLE`)
//! needs `MPI_T_CB_REQUIRE_THREAD_SAFE`. The callback run is the registered one of the
//! lowest safety level that meets that need. If only less safe callbacks are registered
//! (for instance `MPI_T_CB_REQUIRE_NONE` alone), the instance is kept (at most
//! [`MAX_PENDING`] per registration) and delivered at the end of the main thread's next
//! MPI call, to the least safe callback registered, with `MPI_T_CB_REQUIRE_NONE`; what did
//! not fit is counted and reported to the dropped handler there. Unwatched event kinds are
//! off in `oxmpi_base::events` and cost one relaxed load where they happen.

use super::cvar::verbosity;
use super::event_types::*;
use super::state::*;
use crate::consts::MPI_INFO_NULL;
use crate::ffi::{out, read_cstr, slice_out, MpiResult};
use oxmpi_base::events::{self as ev, Event};
use std::collections::VecDeque;
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Instant;

/// Nanoseconds since the first time anyone asked.
fn now_ticks() -> i64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as i64
}

// MPICH-ABI values of the callback safety levels (consecutive).
const CB_REQUIRE_NONE: c_int = 0;
const CB_REQUIRE_MPI_RESTRICTED: c_int = 1;
const CB_REQUIRE_THREAD_SAFE: c_int = 2;
const LEVELS: usize = 4;

/// Instances kept per registration for a later, safer delivery.
pub(crate) const MAX_PENDING: usize = 1024;
/// Event type `i`.
fn event_type(i: c_int) -> MpiResult<&'static EventType> {
    match usize::try_from(i).ok().and_then(|i| types().get(i)) {
        Some(t) => Ok(t),
        None => fail(MPI_T_ERR_INVALID_INDEX, format!("no event {i}")),
    }
}

/// An event instance: what a callback's `MPI_T_event_instance` points to while it runs.
#[derive(Debug)]
struct Instance {
    /// [`LIVE`] while the handle may be used.
    magic: u64,
    event: usize,
    time: i64,
    data: [u8; DATA_MAX],
}

const LIVE: u64 = 0x6f78_6d70_695f_6576;

impl Instance {
    /// The instance of `e` for event type `event`.
    fn new(event: usize, time: i64, e: &Event<'_>) -> Box<Instance> {
        let mut d = [0u8; DATA_MAX];
        fn put(d: &mut [u8], at: usize, b: &[u8]) {
            d[at..at + b.len()].copy_from_slice(b);
        }
        fn text(d: &mut [u8], at: usize, cap: usize, s: &str) {
            put(d, at, &s.as_bytes()[..s.len().min(cap - 1)]);
        }
        match *e {
            Event::ProcFailed { rank } => put(&mut d, 0, &rank.to_ne_bytes()),
            Event::Transport { peer, transport } => {
                put(&mut d, 0, &peer.to_ne_bytes());
                text(&mut d, 4, NAME_CHARS, transport);
            }
            Event::Unexpected {
                source,
                tag,
                context,
                bytes,
            } => {
                put(&mut d, 0, &source.to_ne_bytes());
                put(&mut d, 4, &tag.to_ne_bytes());
                put(&mut d, 8, &context.to_ne_bytes());
                put(&mut d, 16, &bytes.to_ne_bytes());
            }
            Event::Rendezvous {
                peer,
                bytes,
                eager_limit,
                transport,
            } => {
                put(&mut d, 0, &peer.to_ne_bytes());
                put(&mut d, 8, &bytes.to_ne_bytes());
                put(&mut d, 16, &eager_limit.to_ne_bytes());
                text(&mut d, 24, NAME_CHARS, transport);
            }
            Event::CopyChoice {
                peer,
                bytes,
                mechanism,
                previous,
                transport,
            } => {
                put(&mut d, 0, &peer.to_ne_bytes());
                put(&mut d, 8, &bytes.to_ne_bytes());
                text(&mut d, 16, NAME_CHARS, mechanism);
                text(&mut d, 16 + NAME_CHARS, NAME_CHARS, previous);
                text(&mut d, 16 + 2 * NAME_CHARS, NAME_CHARS, transport);
            }
            Event::VerboseLine { level, text: t, .. } => {
                put(&mut d, 0, &level.to_ne_bytes());
                text(&mut d, 4, LINE_CHARS, t);
            }
        }
        Box::new(Instance {
            magic: LIVE,
            event,
            time,
            data: d,
        })
    }
}

/// The instance behind handle `h`, valid while its callback runs.
fn instance<'a>(h: *mut c_void) -> MpiResult<&'a Instance> {
    // SAFETY: a non-NULL instance handle is a pointer to a boxed `Instance` that lives
    // while the callback it was handed to runs (MPI 4.1: the handle is valid only then);
    // the magic word rejects one used after (it is cleared before the box is freed).
    match unsafe { h.cast::<Instance>().as_ref() } {
        Some(i) if i.magic == LIVE => Ok(i),
        _ => fail(MPI_T_ERR_INVALID_HANDLE, "not a live event instance"),
    }
}

/// `void cb(MPI_T_event_instance, MPI_T_event_registration, MPI_T_cb_safety, void *)`.
type EventCb = unsafe extern "C" fn(*mut c_void, *mut c_void, c_int, *mut c_void);
/// `void cb(MPI_T_event_registration, MPI_T_cb_safety, void *)`.
type FreeCb = unsafe extern "C" fn(*mut c_void, c_int, *mut c_void);
/// `void cb(MPI_Count, MPI_T_event_registration, int source, MPI_T_cb_safety, void *)`.
type DroppedCb = unsafe extern "C" fn(i64, *mut c_void, c_int, c_int, *mut c_void);

/// A registration: an event type and its callbacks by safety level.
#[derive(Debug)]
struct Registration {
    event: usize,
    cbs: [Option<(EventCb, *mut c_void)>; LEVELS],
    dropped_cb: Option<DroppedCb>,
    /// Instances waiting for a safe point, and how many did not fit.
    pending: VecDeque<Box<Instance>>,
    dropped: u64,
}

impl Registration {
    /// The callback for a context needing `level`: the registered one of the lowest level
    /// at least `level`.
    fn callback(&self, level: c_int) -> Option<(c_int, EventCb, *mut c_void)> {
        (level as usize..LEVELS).find_map(|l| self.cbs[l].map(|(f, u)| (l as c_int, f, u)))
    }

    /// The least safe registered callback (the one a safe point runs).
    fn least_safe(&self) -> Option<(EventCb, *mut c_void)> {
        self.cbs.iter().flatten().next().copied()
    }
}

/// The registrations (their own lock: events are raised inside the engine, which the
/// tools interface's main lock may be waiting for).
#[derive(Debug, Default)]
struct Events {
    regs: Slots<Registration>,
}

// SAFETY: the raw pointers are handle values and the user's `user_data`, handed back to
// the user's callbacks unchanged, never dereferenced here; the table is behind a mutex.
unsafe impl Send for Events {}

static EVENTS: Mutex<Option<Events>> = Mutex::new(None);
/// Some registration holds instances or drops for a safe point.
static PENDING: &AtomicBool = &crate::ffi::SAFE_POINT_WANTED;
/// A safe point's delivery runs (its callbacks may call MPI).
static DELIVERING: AtomicBool = AtomicBool::new(false);

fn events() -> MutexGuard<'static, Option<Events>> {
    EVENTS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs `f` on the registrations (the tools interface must be initialized).
fn with_events<T>(f: impl FnOnce(&mut Events) -> MpiResult<T>) -> MpiResult<T> {
    with(|_| Ok(()))?;
    let mut g = events();
    f(g.get_or_insert_with(Events::default))
}

/// The registration behind handle `h`.
fn reg(e: &mut Events, h: *mut c_void) -> MpiResult<&mut Registration> {
    match e.regs.get_mut(h) {
        Some(r) => Ok(r),
        None => fail(MPI_T_ERR_INVALID_HANDLE, "not an event registration"),
    }
}

/// Turns each event kind on in `oxmpi_base::events` while some registration of it has a
/// callback.
fn rewant(e: &mut Events) {
    let t = types();
    let mut on = [false; ev::KINDS];
    for (_, r) in e.regs.iter_mut() {
        if r.cbs.iter().any(Option::is_some) {
            on[t[r.event].kind as usize] = true;
        }
    }
    for k in ev::ALL_KINDS {
        ev::set_wanted(k, on[k as usize]);
    }
}

/// A callback safety level argument.
fn safety(l: c_int) -> MpiResult<usize> {
    match usize::try_from(l) {
        Ok(l) if l < LEVELS => Ok(l),
        _ => fail(
            MPI_T_ERR_INVALID,
            format!("{l} is not a callback safety level"),
        ),
    }
}

/// What `oxmpi_base::events` hands over: an instance per matching registration, to the
/// callback meeting the context's need now, else kept for the next safe point.
fn sink(e: &Event<'_>) {
    let need = if crate::sys::is_main_thread() {
        CB_REQUIRE_MPI_RESTRICTED
    } else {
        CB_REQUIRE_THREAD_SAFE
    };
    let time = now_ticks();
    let t = types();
    let mut calls = Vec::new();
    {
        let mut g = events();
        let Some(st) = g.as_mut() else { return };
        for (h, r) in st.regs.iter_mut() {
            let ty = &t[r.event];
            let matches = ty.kind == e.kind()
                && match (e, ty.framework) {
                    (Event::VerboseLine { framework, .. }, Some(fw)) => *framework == fw,
                    _ => true,
                };
            if !matches || r.least_safe().is_none() {
                continue;
            }
            let inst = Instance::new(r.event, time, e);
            match r.callback(need) {
                Some((l, f, u)) => calls.push((f, h, l, u, inst)),
                None if r.pending.len() < MAX_PENDING => r.pending.push_back(inst),
                None => r.dropped += 1,
            }
            if !r.pending.is_empty() || r.dropped > 0 {
                PENDING.store(true, Ordering::Relaxed);
            }
        }
    }
    for (f, h, l, u, inst) in calls {
        run(f, h, l, u, inst);
    }
}

/// Runs callback `f` on `inst`, then retires the instance.
fn run(f: EventCb, h: *mut c_void, level: c_int, user: *mut c_void, mut inst: Box<Instance>) {
    let p: *mut Instance = &mut *inst;
    // SAFETY: `f` is the user's event callback with the standard's signature; the
    // instance lives until after it returns.
    unsafe { f(p.cast(), h, level, user) };
    inst.magic = 0;
}

/// Delivers what waited for a safe point: on the main thread, at the end of an MPI call
/// (`ffi::enter`), to the least safe callback of each registration with
/// `MPI_T_CB_REQUIRE_NONE`; drops go to the dropped handler first.
fn deliver_pending() {
    if !crate::sys::is_main_thread() || DELIVERING.swap(true, Ordering::Acquire) {
        return;
    }
    PENDING.store(false, Ordering::Relaxed);
    let mut work = Vec::new();
    if let Some(st) = events().as_mut() {
        for (h, r) in st.regs.iter_mut() {
            let Some((f, u)) = r.least_safe() else {
                continue;
            };
            let dropped = std::mem::take(&mut r.dropped);
            work.push((
                h,
                f,
                u,
                dropped,
                r.dropped_cb,
                std::mem::take(&mut r.pending),
            ));
        }
    }
    for (h, f, u, dropped, dcb, pending) in work {
        if let Some(d) = dcb.filter(|_| dropped > 0) {
            // SAFETY: the user's dropped-events handler with the standard's signature.
            unsafe { d(dropped as i64, h, 0, CB_REQUIRE_NONE, u) };
        }
        for inst in pending {
            run(f, h, CB_REQUIRE_NONE, u, inst);
        }
    }
    DELIVERING.store(false, Ordering::Release);
}

/// Frees every registration (the last `MPI_T_finalize`).
pub(crate) fn finalize() {
    if let Some(e) = events().as_mut() {
        e.regs = Slots::default();
        rewant(e);
    }
}

/// Installs the event sink and the safe-point delivery (from `MPI_T_init_thread`).
pub(crate) fn install() {
    ev::set_sink(sink);
    crate::ffi::set_safe_point_work(deliver_pending);
}

/// Checks the source index (only 0 exists).
fn source(i: c_int) -> MpiResult {
    with(|_| Ok(()))?;
    if i != 0 {
        return fail(MPI_T_ERR_INVALID_INDEX, format!("no event source {i}"));
    }
    Ok(())
}

mpi_fn! {
    /// `MPI_T_source_get_num`: one source.
    fn PMPI_T_source_get_num / "MPI_T_source_get_num" [Direct] (num_sources: *mut c_int) {
        with(|_| Ok(()))?;
        out(num_sources, 1, "num_sources")
    }
}

mpi_fn! {
    /// `MPI_T_source_get_info`.
    fn PMPI_T_source_get_info / "MPI_T_source_get_info" [Direct] (source_index: c_int, name: *mut c_char, name_len: *mut c_int, desc: *mut c_char, desc_len: *mut c_int, ordering: *mut c_int, ticks_per_second: *mut i64, max_ticks: *mut i64, info: *mut c_int) {
        source(source_index)?;
        out_str("oxmpi_clock", name, name_len)?;
        out_str("The library's monotonic clock, in nanoseconds since its first reading", desc, desc_len)?;
        opt(ordering, MPI_T_SOURCE_ORDERED);
        opt(ticks_per_second, 1_000_000_000);
        opt(max_ticks, i64::MAX);
        opt(info, MPI_INFO_NULL);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_T_source_get_timestamp`.
    fn PMPI_T_source_get_timestamp / "MPI_T_source_get_timestamp" [Direct] (source_index: c_int, timestamp: *mut i64) {
        source(source_index)?;
        out(timestamp, now_ticks(), "timestamp")
    }
}

mpi_fn! {
    /// `MPI_T_event_get_num`.
    fn PMPI_T_event_get_num / "MPI_T_event_get_num" [Direct] (num_events: *mut c_int) {
        with(|_| Ok(()))?;
        out(num_events, types().len() as c_int, "num_events")
    }
}

mpi_fn! {
    /// `MPI_T_event_get_info`: `num_elements` gives the arrays' length and returns the
    /// event's number of elements (the arrays get as many as fit).
    fn PMPI_T_event_get_info / "MPI_T_event_get_info" [Direct] (event_index: c_int, name: *mut c_char, name_len: *mut c_int, verb: *mut c_int, array_of_datatypes: *mut c_int, array_of_displacements: *mut isize, num_elements: *mut c_int, enumtype: *mut *mut c_void, info: *mut c_int, desc: *mut c_char, desc_len: *mut c_int, bind: *mut c_int) {
        with(|_| Ok(()))?;
        let t = event_type(event_index)?;
        out_str(&t.name, name, name_len)?;
        out_str(&t.desc, desc, desc_len)?;
        opt(verb, verbosity(t.level));
        let cap = if num_elements.is_null() {
            0
        } else {
            // SAFETY: a non-NULL pointer to an int (MPI argument contract).
            usize::try_from(unsafe { num_elements.read_unaligned() }).unwrap_or(0)
        };
        let n = t.elems.len().min(cap);
        if !array_of_datatypes.is_null() {
            for (o, e) in slice_out(array_of_datatypes, n, "array_of_datatypes")?.iter_mut().zip(&t.elems) {
                *o = e.0;
            }
        }
        if !array_of_displacements.is_null() {
            for (o, e) in slice_out(array_of_displacements, n, "array_of_displacements")?.iter_mut().zip(&t.elems) {
                *o = e.1 as isize;
            }
        }
        opt(num_elements, t.elems.len() as c_int);
        opt(enumtype, std::ptr::null_mut());
        opt(info, MPI_INFO_NULL);
        opt(bind, MPI_T_BIND_NO_OBJECT);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_T_event_get_index`.
    fn PMPI_T_event_get_index / "MPI_T_event_get_index" [Direct] (name: *const c_char, event_index: *mut c_int) {
        with(|_| Ok(()))?;
        let name = read_cstr(name, "name")?;
        match types().iter().position(|t| t.name == name) {
            Some(i) => out(event_index, i as c_int, "event_index"),
            None => fail(MPI_T_ERR_INVALID_NAME, format!("no event {name}")),
        }
    }
}

mpi_fn! {
    /// `MPI_T_event_handle_alloc`: events are bound to no object (`obj_handle` is not
    /// read).
    fn PMPI_T_event_handle_alloc / "MPI_T_event_handle_alloc" [Direct] (event_index: c_int, _obj_handle: *mut c_void, _info: c_int, event_registration: *mut *mut c_void) {
        with(|_| Ok(()))?;
        event_type(event_index)?;
        let h = with_events(|e| {
            Ok(e.regs.insert(Registration {
                event: event_index as usize,
                cbs: [None; LEVELS],
                dropped_cb: None,
                pending: VecDeque::new(),
                dropped: 0,
            }))
        })?;
        out(event_registration, h, "event_registration")
    }
}

mpi_fn! {
    /// `MPI_T_event_handle_set_info`: no hints are used.
    fn PMPI_T_event_handle_set_info / "MPI_T_event_handle_set_info" [Direct] (event_registration: *mut c_void, _info: c_int) {
        with_events(|e| reg(e, event_registration).map(|_| ()))
    }
}

mpi_fn! {
    /// `MPI_T_event_handle_get_info`: no hints are used (`MPI_INFO_NULL`).
    fn PMPI_T_event_handle_get_info / "MPI_T_event_handle_get_info" [Direct] (event_registration: *mut c_void, info_used: *mut c_int) {
        with_events(|e| reg(e, event_registration).map(|_| ()))?;
        out(info_used, MPI_INFO_NULL, "info_used")
    }
}

mpi_fn! {
    /// `MPI_T_event_register_callback`: one callback per safety level (a second one
    /// replaces the first); a NULL function removes it.
    fn PMPI_T_event_register_callback / "MPI_T_event_register_callback" [Direct] (event_registration: *mut c_void, cb_safety: c_int, _info: c_int, user_data: *mut c_void, event_cb_function: Option<EventCb>) {
        let l = safety(cb_safety)?;
        with_events(|e| {
            reg(e, event_registration)?.cbs[l] = event_cb_function.map(|f| (f, user_data));
            rewant(e);
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_T_event_callback_set_info`: no hints are used.
    fn PMPI_T_event_callback_set_info / "MPI_T_event_callback_set_info" [Direct] (event_registration: *mut c_void, cb_safety: c_int, _info: c_int) {
        safety(cb_safety)?;
        with_events(|e| reg(e, event_registration).map(|_| ()))
    }
}

mpi_fn! {
    /// `MPI_T_event_callback_get_info`: no hints are used (`MPI_INFO_NULL`).
    fn PMPI_T_event_callback_get_info / "MPI_T_event_callback_get_info" [Direct] (event_registration: *mut c_void, cb_safety: c_int, info_used: *mut c_int) {
        safety(cb_safety)?;
        with_events(|e| reg(e, event_registration).map(|_| ()))?;
        out(info_used, MPI_INFO_NULL, "info_used")
    }
}

mpi_fn! {
    /// `MPI_T_event_handle_free`: no callback of the registration runs after it returns;
    /// `free_cb_function` (if not NULL) runs before it returns, with
    /// `MPI_T_CB_REQUIRE_NONE`. Instances still waiting are discarded.
    fn PMPI_T_event_handle_free / "MPI_T_event_handle_free" [Direct] (event_registration: *mut c_void, user_data: *mut c_void, free_cb_function: Option<FreeCb>) {
        with_events(|e| {
            match e.regs.remove(event_registration) {
                Some(_) => {
                    rewant(e);
                    Ok(())
                }
                None => fail(MPI_T_ERR_INVALID_HANDLE, "not an event registration"),
            }
        })?;
        if let Some(f) = free_cb_function {
            // SAFETY: the user's free callback with the standard's signature.
            unsafe { f(event_registration, CB_REQUIRE_NONE, user_data) };
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_T_event_set_dropped_handler`.
    fn PMPI_T_event_set_dropped_handler / "MPI_T_event_set_dropped_handler" [Direct] (event_registration: *mut c_void, dropped_cb_function: Option<DroppedCb>) {
        with_events(|e| {
            reg(e, event_registration)?.dropped_cb = dropped_cb_function;
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_T_event_read`: element `element_index` as its datatype. Takes no lock (it is
    /// called from callbacks, inside the library).
    fn PMPI_T_event_read / "MPI_T_event_read" [Direct] (event_instance: *mut c_void, element_index: c_int, buffer: *mut c_void) {
        let i = instance(event_instance)?;
        let t = &types()[i.event];
        let Some(&(dt, at)) = usize::try_from(element_index).ok().and_then(|k| t.elems.get(k)) else {
            return fail(MPI_T_ERR_INVALID_ITEM, format!("{} has no element {element_index}", t.name));
        };
        let n = elem_size(dt);
        slice_out(buffer.cast::<u8>(), n, "buffer")?.copy_from_slice(&i.data[at..at + n]);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_T_event_copy`: every element at its displacement.
    fn PMPI_T_event_copy / "MPI_T_event_copy" [Direct] (event_instance: *mut c_void, buffer: *mut c_void) {
        let i = instance(event_instance)?;
        let n = types()[i.event].size;
        slice_out(buffer.cast::<u8>(), n, "buffer")?.copy_from_slice(&i.data[..n]);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_T_event_get_timestamp`: when the event happened (source 0's ticks).
    fn PMPI_T_event_get_timestamp / "MPI_T_event_get_timestamp" [Direct] (event_instance: *mut c_void, event_timestamp: *mut i64) {
        let i = instance(event_instance)?;
        out(event_timestamp, i.time, "event_timestamp")
    }
}

mpi_fn! {
    /// `MPI_T_event_get_source`: always source 0.
    fn PMPI_T_event_get_source / "MPI_T_event_get_source" [Direct] (event_instance: *mut c_void, source_index: *mut c_int) {
        instance(event_instance)?;
        out(source_index, 0, "source_index")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_fit_and_instances_encode_at_the_displacements() {
        for k in ev::ALL_KINDS {
            let (elems, size) = layout(k);
            assert!(size <= DATA_MAX);
            for (dt, at) in elems {
                assert!(at + elem_size(dt) <= size && at % elem_size(dt) == 0);
            }
        }
        let i = Instance::new(
            1,
            7,
            &Event::Unexpected {
                source: 3,
                tag: 9,
                context: 5,
                bytes: 1 << 40,
            },
        );
        assert_eq!(i.data[4..8], 9i32.to_ne_bytes());
        assert_eq!(i.data[16..24], (1u64 << 40).to_ne_bytes());
        let long = "x".repeat(400);
        let l = Instance::new(
            0,
            0,
            &Event::VerboseLine {
                framework: "btl",
                level: 20,
                text: &long,
            },
        );
        assert_eq!(l.data[4 + LINE_CHARS - 2], b'x');
        assert_eq!(l.data[4 + LINE_CHARS - 1], 0);
        let t = Instance::new(
            0,
            0,
            &Event::Transport {
                peer: 1,
                transport: "sm",
            },
        );
        assert_eq!(&t.data[4..7], b"sm\0");
        let r = Instance::new(
            0,
            0,
            &Event::Rendezvous {
                peer: 1,
                bytes: 5000,
                eager_limit: 4096,
                transport: "tcp",
            },
        );
        assert_eq!(r.data[8..16], 5000u64.to_ne_bytes());
        assert_eq!(r.data[16..24], 4096u64.to_ne_bytes());
        assert_eq!(&r.data[24..28], b"tcp\0");
        let c = Instance::new(
            0,
            0,
            &Event::CopyChoice {
                peer: 2,
                bytes: 1 << 20,
                mechanism: "coop",
                previous: "none",
                transport: "sm",
            },
        );
        assert_eq!(c.data[0..4], 2i32.to_ne_bytes());
        assert_eq!(c.data[8..16], (1u64 << 20).to_ne_bytes());
        assert_eq!(&c.data[16..21], b"coop\0");
        assert_eq!(&c.data[16 + NAME_CHARS..16 + NAME_CHARS + 5], b"none\0");
        assert_eq!(
            &c.data[16 + 2 * NAME_CHARS..16 + 2 * NAME_CHARS + 3],
            b"sm\0"
        );
    }

    #[test]
    fn the_callback_is_the_least_safe_one_that_is_safe_enough() {
        unsafe extern "C" fn cb(_: *mut c_void, _: *mut c_void, _: c_int, _: *mut c_void) {}
        let mut r = Registration {
            event: 0,
            cbs: [None; LEVELS],
            dropped_cb: None,
            pending: VecDeque::new(),
            dropped: 0,
        };
        assert!(r.callback(CB_REQUIRE_NONE).is_none() && r.least_safe().is_none());
        r.cbs[0] = Some((cb, std::ptr::null_mut()));
        assert!(r.callback(CB_REQUIRE_MPI_RESTRICTED).is_none());
        assert_eq!(r.callback(CB_REQUIRE_NONE).map(|c| c.0), Some(0));
        r.cbs[3] = Some((cb, std::ptr::null_mut()));
        r.cbs[2] = Some((cb, std::ptr::null_mut()));
        assert_eq!(r.callback(CB_REQUIRE_MPI_RESTRICTED).map(|c| c.0), Some(2));
        assert!(r.least_safe().is_some());
        assert!(safety(4).is_err() && safety(-1).is_err() && safety(3).is_ok());
    }
}
