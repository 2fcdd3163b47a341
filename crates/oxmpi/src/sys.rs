//! The crate's OS calls.

/// `atexit(f)`: `f` runs when the process exits normally (after `main` returns or at
/// `std::process::exit`). Returns whether it was registered.
pub(crate) fn at_exit(f: extern "C" fn()) -> bool {
    // SAFETY: `f` is a plain `extern "C"` function without arguments, valid for the
    // process's lifetime; atexit only stores it.
    unsafe { libc::atexit(f) == 0 }
}
