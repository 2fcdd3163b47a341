//! Data representations of file views (MPI 4.1 §14.5): `"native"` (also `"internal"`),
//! `"external32"`, and those the user registers with `MPI_Register_datarep(_c)`.
//!
//! A user representation is three callbacks and an `extra_state`. A write hands the
//! user's buffer, datatype and count to `write_conversion_fn`, which fills a contiguous
//! buffer in file representation that then goes through the view like native data; a
//! read fills that buffer from the file and hands it to `read_conversion_fn`, which
//! stores the items into the user's buffer. `MPI_CONVERSION_FN_NULL` for either means
//! no conversion in that direction (native data). `dtype_file_extent_fn` gives the file
//! extent of each predefined type: the view's geometry is the native one, so a
//! representation is accepted for a datatype only where the file extent of every
//! predefined type in it equals its native size (else `MPI_ERR_UNSUPPORTED_DATAREP`
//! names the type); conversions that change sizes (for instance 4-byte `long` in the
//! file) are refused that way. Each access calls the conversion function once, with
//! `position` 0 and `count` in items of the access's datatype. Callbacks run with no
//! library lock held (they may call MPI).

use crate::consts::*;
use crate::datatype::{predefined_size, Datatype};
use crate::ffi::{MpiError, MpiResult};
use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex};

/// `MPI_Datarep_conversion_function` (MPICH ABI: the datatype is an `int`).
type ConvFn =
    unsafe extern "C" fn(*mut c_void, c_int, c_int, *mut c_void, i64, *mut c_void) -> c_int;
/// `MPI_Datarep_conversion_function_c` (`MPI_Count` count).
type ConvFnC =
    unsafe extern "C" fn(*mut c_void, c_int, i64, *mut c_void, i64, *mut c_void) -> c_int;
/// `MPI_Datarep_extent_function`.
type ExtentFn = unsafe extern "C" fn(c_int, *mut isize, *mut c_void) -> c_int;

/// One conversion callback, in the form it was registered with.
#[derive(Clone, Copy)]
enum Conv {
    Int(ConvFn),
    Large(ConvFnC),
}

/// A data representation registered with `MPI_Register_datarep(_c)`.
pub(crate) struct UserRep {
    /// Its name (what `MPI_File_get_view` returns).
    pub(super) name: String,
    read: Option<Conv>,
    write: Option<Conv>,
    extent: ExtentFn,
    /// The user's `extra_state`, passed back to every callback.
    extra: usize,
}

/// The data representation of a view.
#[derive(Clone)]
pub(crate) enum Rep {
    /// `"native"` (also accepted as `"internal"`).
    Native,
    /// `"external32"` (converted by `crate::external`).
    External32,
    /// A representation registered by the user.
    User(Arc<UserRep>),
}

impl Rep {
    /// The representation called `name`, if it is predefined or registered.
    pub(super) fn named(name: &str) -> Option<Rep> {
        match name {
            "native" | "internal" => Some(Rep::Native),
            "external32" => Some(Rep::External32),
            _ => reps()
                .iter()
                .find(|r| r.name == name)
                .map(|r| Rep::User(r.clone())),
        }
    }

    /// Whether `name` is one of the predefined representations.
    fn named_predefined(name: &str) -> bool {
        ["native", "internal", "external32"].contains(&name)
    }

    /// The name `MPI_File_get_view` returns.
    pub(super) fn name(&self) -> &str {
        match self {
            Rep::Native => "native",
            Rep::External32 => "external32",
            Rep::User(u) => &u.name,
        }
    }
}

/// The registered representations (never removed: MPI has no call for that).
static REPS: Mutex<Vec<Arc<UserRep>>> = Mutex::new(Vec::new());

fn reps() -> std::sync::MutexGuard<'static, Vec<Arc<UserRep>>> {
    REPS.lock().unwrap_or_else(|p| p.into_inner())
}

/// A conversion function argument (`NULL` is `MPI_CONVERSION_FN_NULL`).
fn conv(p: *mut c_void, large: bool) -> Option<Conv> {
    if p.is_null() {
        return None;
    }
    // SAFETY: a non-NULL conversion argument is the user's function of the registering
    // call's form (MPI_Datarep_conversion_function, or the _c one for the large form);
    // function and data pointers have the same size and representation on our targets.
    Some(unsafe {
        if large {
            Conv::Large(std::mem::transmute::<*mut c_void, ConvFnC>(p))
        } else {
            Conv::Int(std::mem::transmute::<*mut c_void, ConvFn>(p))
        }
    })
}

/// `MPI_Register_datarep(_c)`: records `name` with its callbacks (`large`: the `_c` form,
/// whose conversion functions take an `MPI_Count` count).
pub(super) fn register(
    name: String,
    read: *mut c_void,
    write: *mut c_void,
    extent: *mut c_void,
    extra: *mut c_void,
    large: bool,
) -> MpiResult {
    if name.is_empty() || name.len() >= MPI_MAX_DATAREP_STRING as usize {
        mpi_bail!(
            MPI_ERR_ARG,
            "data representation name of {} bytes (1 to {})",
            name.len(),
            MPI_MAX_DATAREP_STRING - 1
        );
    }
    if extent.is_null() {
        mpi_bail!(MPI_ERR_ARG, "NULL dtype_file_extent_fn");
    }
    // SAFETY: a non-NULL MPI_Datarep_extent_function of the user (see `conv`).
    let extent = unsafe { std::mem::transmute::<*mut c_void, ExtentFn>(extent) };
    let mut all = reps();
    if Rep::named_predefined(&name) || all.iter().any(|r| r.name == name) {
        mpi_bail!(
            MPI_ERR_DUP_DATAREP,
            "data representation \"{name}\" is already defined"
        );
    }
    all.push(Arc::new(UserRep {
        name,
        read: conv(read, large),
        write: conv(write, large),
        extent,
        extra: extra as usize,
    }));
    Ok(())
}

impl UserRep {
    /// The file extent of predefined type `h` (`dtype_file_extent_fn`).
    pub(super) fn file_extent(&self, h: c_int) -> MpiResult<isize> {
        let mut ext: isize = 0;
        // SAFETY: the user's extent function with a valid output pointer and its state.
        let rc = unsafe { (self.extent)(h, &mut ext, self.extra as *mut c_void) };
        if rc != MPI_SUCCESS {
            return Err(MpiError::new(
                rc,
                format!(
                    "dtype_file_extent_fn of data representation \"{}\" failed ({rc})",
                    self.name
                ),
            ));
        }
        Ok(ext)
    }

    /// Checks that every predefined type of `dt` has the same extent in the file as in
    /// memory (the view keeps the native geometry).
    pub(super) fn check(&self, dt: &Datatype) -> MpiResult {
        for h in crate::external::basic_types(dt)? {
            let native = predefined_size(h).unwrap_or(0) as isize;
            let ext = self.file_extent(h)?;
            if ext != native {
                let name = crate::datatype::builtin_name(h).unwrap_or("a predefined type");
                mpi_bail!(
                    MPI_ERR_UNSUPPORTED_DATAREP,
                    "data representation \"{}\": {name} is {ext} bytes in the file and {native} in memory (only representations that keep each type's size are supported)",
                    self.name
                );
            }
        }
        Ok(())
    }

    /// Calls conversion `c` on `count` items of `datatype` at `userbuf` and `filebuf`.
    fn call(
        &self,
        c: Conv,
        userbuf: *mut c_void,
        datatype: c_int,
        count: usize,
        filebuf: *mut c_void,
    ) -> MpiResult {
        let extra = self.extra as *mut c_void;
        let rc = match c {
            Conv::Int(f) => {
                let n = c_int::try_from(count).map_err(|_| {
                    MpiError::new(
                        MPI_ERR_VALUE_TOO_LARGE,
                        format!(
                            "{count} items do not fit the int count of data representation \"{}\" (register it with MPI_Register_datarep_c)",
                            self.name
                        ),
                    )
                })?;
                // SAFETY: the user's conversion function; both buffers hold `count`
                // items of `datatype` (the user's, and ours in file representation).
                unsafe { f(userbuf, datatype, n, filebuf, 0, extra) }
            }
            // SAFETY: as above, in the large-count form.
            Conv::Large(f) => unsafe { f(userbuf, datatype, count as i64, filebuf, 0, extra) },
        };
        if rc != MPI_SUCCESS {
            return Err(MpiError::new(
                rc,
                format!(
                    "conversion function of data representation \"{}\" failed ({rc})",
                    self.name
                ),
            ));
        }
        Ok(())
    }

    /// The bytes a write of `count` items of `dt` (handle `dt_h`) from `buf` puts into the
    /// file, in file representation; `None` without a write conversion (native data).
    pub(super) fn convert_write(
        &self,
        buf: *const c_void,
        dt: &Datatype,
        dt_h: c_int,
        count: usize,
    ) -> MpiResult<Option<Vec<u8>>> {
        self.check(dt)?;
        let Some(c) = self.write else {
            return Ok(None);
        };
        let mut file = vec![0u8; count * dt.size];
        self.call(c, buf as *mut c_void, dt_h, count, file.as_mut_ptr().cast())?;
        Ok(Some(file))
    }

    /// Stores the whole items of `dt` in `data` (read from the file, in file
    /// representation) into `buf`; `false` without a read conversion (the caller unpacks
    /// native data).
    pub(super) fn convert_read(
        &self,
        buf: *mut c_void,
        dt: &Datatype,
        dt_h: c_int,
        data: &mut [u8],
    ) -> MpiResult<bool> {
        self.check(dt)?;
        let Some(c) = self.read else {
            return Ok(false);
        };
        let count = data.len().checked_div(dt.size).unwrap_or(0);
        if count > 0 {
            self.call(c, buf, dt_h, count, data.as_mut_ptr().cast())?;
        }
        Ok(true)
    }
}
