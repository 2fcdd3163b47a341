//! Error classes, error strings (our own wording), error handlers and the user error
//! class/code/string registry.

use crate::consts::*;
use crate::ffi::{copy_cstr, out, read_cstr, ErrorOwner, MpiError, OnComm};
pub(crate) use crate::objects::{CommErrFn, ErrAction, UserErrhandler, UserErrors};
use crate::state::{lock, State};
use std::ffi::{c_char, c_int};

/// The first class handed out by `MPI_Add_error_class` (above `MPI_ERR_LASTCODE`, like
/// MPICH).
pub(crate) const FIRST_USER_CLASS: c_int = MPI_ERR_LASTCODE + 1;

impl UserErrors {
    fn alloc(&mut self) -> c_int {
        if self.next < FIRST_USER_CLASS {
            self.next = FIRST_USER_CLASS;
        }
        let c = self.next;
        self.next += 1;
        crate::objects::LAST_USED_CODE.fetch_max(c, std::sync::atomic::Ordering::Relaxed);
        c
    }
    fn class_of(&self, code: c_int) -> Option<c_int> {
        self.codes.iter().find(|(c, _)| *c == code).map(|(_, k)| *k)
    }
}

/// Predefined error classes with their names and our description.
const CLASSES: &[(c_int, &str, &str)] = &[
    (MPI_SUCCESS, "MPI_SUCCESS", "no error"),
    (MPI_ERR_BUFFER, "MPI_ERR_BUFFER", "invalid buffer pointer"),
    (MPI_ERR_COUNT, "MPI_ERR_COUNT", "invalid count argument"),
    (MPI_ERR_TYPE, "MPI_ERR_TYPE", "invalid datatype"),
    (MPI_ERR_TAG, "MPI_ERR_TAG", "invalid tag"),
    (MPI_ERR_COMM, "MPI_ERR_COMM", "invalid communicator"),
    (MPI_ERR_RANK, "MPI_ERR_RANK", "invalid rank"),
    (MPI_ERR_ROOT, "MPI_ERR_ROOT", "invalid root"),
    (MPI_ERR_GROUP, "MPI_ERR_GROUP", "invalid group"),
    (MPI_ERR_OP, "MPI_ERR_OP", "invalid reduction operation"),
    (MPI_ERR_TOPOLOGY, "MPI_ERR_TOPOLOGY", "invalid topology"),
    (MPI_ERR_DIMS, "MPI_ERR_DIMS", "invalid dimension argument"),
    (MPI_ERR_ARG, "MPI_ERR_ARG", "invalid argument"),
    (MPI_ERR_UNKNOWN, "MPI_ERR_UNKNOWN", "unknown error"),
    (
        MPI_ERR_TRUNCATE,
        "MPI_ERR_TRUNCATE",
        "message truncated: the receive buffer is too small",
    ),
    (
        MPI_ERR_OTHER,
        "MPI_ERR_OTHER",
        "other error (see the message printed with it)",
    ),
    (
        MPI_ERR_INTERN,
        "MPI_ERR_INTERN",
        "internal error in the MPI library",
    ),
    (
        MPI_ERR_IN_STATUS,
        "MPI_ERR_IN_STATUS",
        "error code is in the status",
    ),
    (MPI_ERR_PENDING, "MPI_ERR_PENDING", "request pending"),
    (MPI_ERR_REQUEST, "MPI_ERR_REQUEST", "invalid request"),
    (MPI_ERR_ACCESS, "MPI_ERR_ACCESS", "permission denied"),
    (MPI_ERR_AMODE, "MPI_ERR_AMODE", "invalid file access mode"),
    (MPI_ERR_BAD_FILE, "MPI_ERR_BAD_FILE", "invalid file name"),
    (
        MPI_ERR_CONVERSION,
        "MPI_ERR_CONVERSION",
        "data conversion failed",
    ),
    (
        MPI_ERR_DUP_DATAREP,
        "MPI_ERR_DUP_DATAREP",
        "data representation already registered",
    ),
    (MPI_ERR_FILE_EXISTS, "MPI_ERR_FILE_EXISTS", "file exists"),
    (MPI_ERR_FILE_IN_USE, "MPI_ERR_FILE_IN_USE", "file in use"),
    (MPI_ERR_FILE, "MPI_ERR_FILE", "invalid file handle"),
    (MPI_ERR_INFO, "MPI_ERR_INFO", "invalid info object"),
    (MPI_ERR_INFO_KEY, "MPI_ERR_INFO_KEY", "info key too long"),
    (
        MPI_ERR_INFO_VALUE,
        "MPI_ERR_INFO_VALUE",
        "info value too long",
    ),
    (
        MPI_ERR_INFO_NOKEY,
        "MPI_ERR_INFO_NOKEY",
        "info key not found",
    ),
    (MPI_ERR_IO, "MPI_ERR_IO", "input/output error"),
    (MPI_ERR_NAME, "MPI_ERR_NAME", "service name not published"),
    (MPI_ERR_NO_MEM, "MPI_ERR_NO_MEM", "out of memory"),
    (
        MPI_ERR_NOT_SAME,
        "MPI_ERR_NOT_SAME",
        "arguments differ between processes",
    ),
    (MPI_ERR_NO_SPACE, "MPI_ERR_NO_SPACE", "no space left"),
    (MPI_ERR_NO_SUCH_FILE, "MPI_ERR_NO_SUCH_FILE", "no such file"),
    (MPI_ERR_PORT, "MPI_ERR_PORT", "invalid port name"),
    (MPI_ERR_QUOTA, "MPI_ERR_QUOTA", "quota exceeded"),
    (MPI_ERR_READ_ONLY, "MPI_ERR_READ_ONLY", "file is read-only"),
    (MPI_ERR_SERVICE, "MPI_ERR_SERVICE", "service name error"),
    (MPI_ERR_SPAWN, "MPI_ERR_SPAWN", "could not spawn processes"),
    (
        MPI_ERR_UNSUPPORTED_DATAREP,
        "MPI_ERR_UNSUPPORTED_DATAREP",
        "unsupported data representation",
    ),
    (
        MPI_ERR_UNSUPPORTED_OPERATION,
        "MPI_ERR_UNSUPPORTED_OPERATION",
        "operation not supported by oxmpi yet",
    ),
    (MPI_ERR_WIN, "MPI_ERR_WIN", "invalid window"),
    (MPI_ERR_BASE, "MPI_ERR_BASE", "invalid base address"),
    (MPI_ERR_LOCKTYPE, "MPI_ERR_LOCKTYPE", "invalid lock type"),
    (MPI_ERR_KEYVAL, "MPI_ERR_KEYVAL", "invalid attribute key"),
    (
        MPI_ERR_RMA_CONFLICT,
        "MPI_ERR_RMA_CONFLICT",
        "conflicting RMA accesses",
    ),
    (
        MPI_ERR_RMA_SYNC,
        "MPI_ERR_RMA_SYNC",
        "wrong RMA synchronization",
    ),
    (MPI_ERR_SIZE, "MPI_ERR_SIZE", "invalid size"),
    (MPI_ERR_DISP, "MPI_ERR_DISP", "invalid displacement"),
    (MPI_ERR_ASSERT, "MPI_ERR_ASSERT", "invalid assertion"),
    (
        MPI_ERR_RMA_RANGE,
        "MPI_ERR_RMA_RANGE",
        "RMA target out of window range",
    ),
    (
        MPI_ERR_RMA_ATTACH,
        "MPI_ERR_RMA_ATTACH",
        "memory cannot be attached",
    ),
    (
        MPI_ERR_RMA_SHARED,
        "MPI_ERR_RMA_SHARED",
        "memory cannot be shared",
    ),
    (
        MPI_ERR_RMA_FLAVOR,
        "MPI_ERR_RMA_FLAVOR",
        "wrong window flavor",
    ),
    (MPI_ERR_SESSION, "MPI_ERR_SESSION", "invalid session"),
    (
        MPI_ERR_PROC_ABORTED,
        "MPI_ERR_PROC_ABORTED",
        "a peer process aborted",
    ),
    (
        MPI_ERR_VALUE_TOO_LARGE,
        "MPI_ERR_VALUE_TOO_LARGE",
        "value too large for the output argument",
    ),
    (
        MPI_ERR_ERRHANDLER,
        "MPI_ERR_ERRHANDLER",
        "invalid error handler",
    ),
    (MPI_ERR_ABI, "MPI_ERR_ABI", "ABI mismatch"),
    (
        MPIX_ERR_PROC_FAILED,
        "MPIX_ERR_PROC_FAILED",
        "a peer process failed",
    ),
    (
        MPIX_ERR_PROC_FAILED_PENDING,
        "MPIX_ERR_PROC_FAILED_PENDING",
        "a process failed while a wildcard receive was pending",
    ),
    (
        MPIX_ERR_REVOKED,
        "MPIX_ERR_REVOKED",
        "the communicator was revoked",
    ),
];

/// The predefined class table entry for `code`.
fn predefined(code: c_int) -> Option<(&'static str, &'static str)> {
    CLASSES
        .iter()
        .find(|(c, _, _)| *c == code)
        .map(|(_, n, d)| (*n, *d))
}

/// The name of an error class (`"MPI_ERR_TRUNCATE"`), or `None` for user/unknown codes.
#[cfg(test)]
pub(crate) fn class_name(code: c_int) -> Option<&'static str> {
    predefined(code).map(|(n, _)| n)
}

/// The text `MPI_Error_string` returns for `code`.
pub(crate) fn error_string(st: &State, code: c_int) -> Option<String> {
    if let Some((n, d)) = predefined(code) {
        return Some(format!("{n}: {d}"));
    }
    if st.user_errors.class_of(code).is_some() {
        return Some(
            st.user_errors
                .strings
                .get(&code)
                .cloned()
                .unwrap_or_default(),
        );
    }
    None
}

/// The error class of `code`.
pub(crate) fn error_class(st: &State, code: c_int) -> Option<c_int> {
    if predefined(code).is_some() {
        return Some(code);
    }
    st.user_errors.class_of(code)
}

impl ErrorOwner for OnComm {
    fn raise(&self, func: &str, err: &MpiError) -> c_int {
        raise(func, err)
    }
}

/// Decide what to do with an error raised by `func`: returns the code to return, or does
/// not return (fatal handler).
pub(crate) fn raise(func: &str, err: &MpiError) -> c_int {
    let comm = err.comm.unwrap_or(MPI_COMM_WORLD);
    let action = lock().comm_errhandler(comm);
    let mut c = comm;
    act(func, err, action, &mut c, "the error handler")
}

/// Carry out an error handler's `action` for `err`, raised by `func`, on the object whose
/// handle `handle` points to (passed to a user handler as its first argument); `whose`
/// names the handler in the fatal report. Returns the code to return, or does not return
/// (fatal handler).
pub(crate) fn act(
    func: &str,
    err: &MpiError,
    action: ErrAction,
    handle: *mut c_int,
    whose: &str,
) -> c_int {
    match action {
        ErrAction::Return => err.code,
        ErrAction::User(f) => {
            let mut code = err.code;
            // SAFETY: `f` is a user error handler registered through
            // MPI_{Comm,Win,File}_create_errhandler; it is called with a pointer to the
            // object's handle and to a valid local, as the standard prescribes. No lock is
            // held across the call.
            unsafe { f(handle, &mut code) };
            err.code
        }
        ErrAction::Fatal => {
            let text = error_string(&lock(), err.code)
                .unwrap_or_else(|| format!("error code {}", err.code));
            let host = crate::env::hostname();
            let pid = std::process::id();
            let sep = if err.detail.is_empty() { "" } else { ": " };
            eprintln!("[{host}:{pid}] oxmpi: {func}: {text}{sep}{}", err.detail);
            eprintln!("[{host}:{pid}] oxmpi: {whose} is MPI_ERRORS_ARE_FATAL: aborting the job");
            crate::env::abort_job(1)
        }
    }
}

mpi_fn! {
    /// `MPI_Error_string`: our own text for each class.
    fn PMPI_Error_string / "MPI_Error_string" (errorcode: c_int, string: *mut c_char, resultlen: *mut c_int) {
        let text = {
            let st = lock();
            error_string(&st, errorcode)
        };
        let Some(text) = text else {
            mpi_bail!(MPI_ERR_ARG, "unknown error code {errorcode}");
        };
        let n = copy_cstr(string, MPI_MAX_ERROR_STRING as usize, &text)?;
        out(resultlen, n, "resultlen")
    }
}

mpi_fn! {
    /// `MPI_Error_class`.
    fn PMPI_Error_class / "MPI_Error_class" (errorcode: c_int, errorclass: *mut c_int) {
        let class = error_class(&lock(), errorcode);
        match class {
            Some(c) => out(errorclass, c, "errorclass"),
            None => Err(MpiError::new(MPI_ERR_ARG, format!("unknown error code {errorcode}"))),
        }
    }
}

mpi_fn! {
    /// `MPI_Add_error_class`.
    fn PMPI_Add_error_class / "MPI_Add_error_class" (errorclass: *mut c_int) {
        let mut st = lock();
        let c = st.user_errors.alloc();
        st.user_errors.codes.push((c, c));
        drop(st);
        out(errorclass, c, "errorclass")
    }
}

mpi_fn! {
    /// `MPI_Add_error_code`.
    fn PMPI_Add_error_code / "MPI_Add_error_code" (errorclass: c_int, errorcode: *mut c_int) {
        let mut st = lock();
        let user_class = st.user_errors.class_of(errorclass) == Some(errorclass);
        if !user_class && (predefined(errorclass).is_none() || errorclass == MPI_SUCCESS) {
            mpi_bail!(MPI_ERR_ARG, "{errorclass} is not an error class");
        }
        let c = st.user_errors.alloc();
        st.user_errors.codes.push((c, errorclass));
        drop(st);
        out(errorcode, c, "errorcode")
    }
}

mpi_fn! {
    /// `MPI_Add_error_string`.
    fn PMPI_Add_error_string / "MPI_Add_error_string" (errorcode: c_int, string: *const c_char) {
        let s = read_cstr(string, "string")?;
        if s.len() >= MPI_MAX_ERROR_STRING as usize {
            mpi_bail!(MPI_ERR_ARG, "error string longer than MPI_MAX_ERROR_STRING");
        }
        let mut st = lock();
        if st.user_errors.class_of(errorcode).is_none() {
            mpi_bail!(MPI_ERR_ARG, "{errorcode} is not a user-defined error code");
        }
        st.user_errors.strings.insert(errorcode, s);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Remove_error_class` (MPI 4.1): a user class without codes and string.
    fn PMPI_Remove_error_class / "MPI_Remove_error_class" (errorclass: c_int) {
        let mut st = lock();
        if st.user_errors.class_of(errorclass) != Some(errorclass) {
            mpi_bail!(MPI_ERR_ARG, "{errorclass} is not a user-defined error class");
        }
        if st.user_errors.codes.iter().any(|&(c, k)| k == errorclass && c != errorclass) {
            mpi_bail!(MPI_ERR_ARG, "error class {errorclass} still has error codes");
        }
        if st.user_errors.strings.contains_key(&errorclass) {
            mpi_bail!(MPI_ERR_ARG, "error class {errorclass} still has a string (MPI_Remove_error_string first)");
        }
        st.user_errors.codes.retain(|&(c, _)| c != errorclass);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Remove_error_code` (MPI 4.1): a user code (not a class) without string.
    fn PMPI_Remove_error_code / "MPI_Remove_error_code" (errorcode: c_int) {
        let mut st = lock();
        match st.user_errors.class_of(errorcode) {
            Some(k) if k != errorcode => {}
            _ => mpi_bail!(MPI_ERR_ARG, "{errorcode} is not a user-defined error code"),
        }
        if st.user_errors.strings.contains_key(&errorcode) {
            mpi_bail!(MPI_ERR_ARG, "error code {errorcode} still has a string (MPI_Remove_error_string first)");
        }
        st.user_errors.codes.retain(|&(c, _)| c != errorcode);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Remove_error_string` (MPI 4.1): the string `MPI_Add_error_string` set.
    fn PMPI_Remove_error_string / "MPI_Remove_error_string" (errorcode: c_int) {
        let mut st = lock();
        if st.user_errors.class_of(errorcode).is_none() || st.user_errors.strings.remove(&errorcode).is_none() {
            mpi_bail!(MPI_ERR_ARG, "{errorcode} has no user-defined error string");
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Comm_create_errhandler`.
    fn PMPI_Comm_create_errhandler / "MPI_Comm_create_errhandler" (func: Option<CommErrFn>, errhandler: *mut c_int) {
        let Some(func) = func else { mpi_bail!(MPI_ERR_ARG, "NULL error handler function") };
        let h = lock().errhandlers.insert(UserErrhandler { func, refs: 1 });
        out(errhandler, h, "errhandler")
    }
}

mpi_fn! {
    /// `MPI_Comm_set_errhandler`.
    fn PMPI_Comm_set_errhandler / "MPI_Comm_set_errhandler" (comm: c_int, errhandler: c_int) {
        let mut st = lock();
        let action = st.errhandler_action(errhandler).map_err(|e| e.on(comm))?;
        if comm == MPI_COMM_WORLD && !st.initialized {
            // Before MPI_Init: remembered and applied to MPI_COMM_WORLD by MPI_Init.
            st.pre_init_world_errh = (errhandler, action);
            return Ok(());
        }
        let c = st.comm_mut(comm)?;
        c.errh = errhandler;
        c.err_action = action;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Comm_get_errhandler`.
    fn PMPI_Comm_get_errhandler / "MPI_Comm_get_errhandler" (comm: c_int, errhandler: *mut c_int) {
        let h = lock().comm(comm)?.errh;
        out(errhandler, handed_out(h), "errhandler")
    }
}

mpi_fn! {
    /// `MPI_Comm_call_errhandler`.
    fn PMPI_Comm_call_errhandler / "MPI_Comm_call_errhandler" (comm: c_int, errorcode: c_int) {
        lock().comm(comm)?;
        let e = MpiError::new(errorcode, "raised by MPI_Comm_call_errhandler").on(comm);
        raise("MPI_Comm_call_errhandler", &e);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Errhandler_free`.
    fn PMPI_Errhandler_free / "MPI_Errhandler_free" (errhandler: *mut c_int) {
        let h = crate::ffi::inp(errhandler, "errhandler")?;
        let mut st = lock();
        if st.errhandler_action(h).is_err() {
            mpi_bail!(MPI_ERR_ARG, "invalid error handler {h:#x}");
        }
        // Predefined handlers are never destroyed; user ones go with their last reference
        // and stay usable by the objects they are attached to (the function pointer is
        // copied there).
        if let Some(u) = st.errhandlers.get_mut(h) {
            u.refs = u.refs.saturating_sub(1);
            if u.refs == 0 {
                st.errhandlers.remove(h);
            }
        }
        drop(st);
        out(errhandler, MPI_ERRHANDLER_NULL, "errhandler")
    }
}

/// The handle `h` returned by an `MPI_*_get_errhandler` call: a user handler gains a
/// reference, which the caller releases with `MPI_Errhandler_free` (MPI 3.1 §8.3.4).
pub(crate) fn handed_out(h: c_int) -> c_int {
    if let Some(u) = lock().errhandlers.get_mut(h) {
        u.refs += 1;
    }
    h
}

/// Check that a code is a valid error code (used by tests).
#[cfg(test)]
pub(crate) fn is_known(code: c_int) -> bool {
    predefined(code).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_has_a_distinct_name_and_text() {
        let mut names: Vec<_> = CLASSES.iter().map(|c| c.1).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), CLASSES.len());
        assert!(is_known(MPI_ERR_TRUNCATE));
        assert!(!is_known(9999));
        assert_eq!(class_name(MPI_ERR_RANK), Some("MPI_ERR_RANK"));
        assert_eq!(
            class_name(MPI_ERR_UNSUPPORTED_OPERATION),
            Some("MPI_ERR_UNSUPPORTED_OPERATION")
        );
    }

    #[test]
    fn mpich_class_numbers() {
        assert_eq!(MPI_ERR_OTHER, 15);
        assert_eq!(MPI_ERR_UNSUPPORTED_OPERATION, 44);
        assert_eq!(MPI_ERR_TRUNCATE, 14);
    }
}
