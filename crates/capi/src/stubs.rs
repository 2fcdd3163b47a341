//! Exported MPI functions that are not implemented yet. Each raises
//! `MPI_ERR_UNSUPPORTED_OPERATION` through the error handler of `MPI_COMM_WORLD`
//! (`crates/capi/UNIMPLEMENTED.md` lists them).

use crate::consts::MPI_ERR_UNSUPPORTED_OPERATION;
use crate::ffi::{enter, MpiError, OnComm};
use std::ffi::c_int;

/// The body of every stub (unused while the table is empty), `site` its entry point's.
#[allow(dead_code)]
fn unsupported(site: &'static crate::calls::Site) -> c_int {
    let name = site.name;
    enter(site, name, OnComm, || {
        Err(MpiError::new(
            MPI_ERR_UNSUPPORTED_OPERATION,
            format!("{name} is not implemented in oxmpi yet"),
        ))
    })
}

macro_rules! stubs {
    ($($pname:ident $name:literal;)*) => {
        /// Names of the stubbed functions.
        pub const STUB_NAMES: &[&str] = &[$($name),*];
        $(
            /// Not implemented yet: returns `MPI_ERR_UNSUPPORTED_OPERATION`.
            #[no_mangle]
            pub extern "C" fn $pname() -> c_int {
                static SITE: crate::calls::Site = crate::calls::Site::new($name);
                unsupported(&SITE)
            }
            crate::ffi::mpi_alias!($pname / $name);
        )*
    };
}

stubs! {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unimplemented_md_lists_exactly_the_stubs() {
        let doc = include_str!("../UNIMPLEMENTED.md");
        let listed: Vec<&str> = doc
            .lines()
            .filter_map(|l| l.strip_prefix("- `")?.strip_suffix('`'))
            .collect();
        assert_eq!(listed, STUB_NAMES);
    }
}
