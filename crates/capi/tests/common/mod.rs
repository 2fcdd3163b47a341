//! Helpers shared by the integration tests that use an installed prefix.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The installed prefix under test (`OXMPI_TEST_PREFIX`, set by `cargo xtask test`).
pub fn prefix() -> PathBuf {
    match std::env::var_os("OXMPI_TEST_PREFIX") {
        Some(p) => PathBuf::from(p),
        None => panic!(
            "OXMPI_TEST_PREFIX is not set: these tests need an installed oxmpi prefix \
             (run them with `cargo xtask test`, or set OXMPI_TEST_PREFIX=<prefix> after \
             `cargo xtask install --prefix <prefix>`)"
        ),
    }
}

/// A scratch directory removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        static N: AtomicUsize = AtomicUsize::new(0);
        let d = std::env::temp_dir().join(format!(
            "oxmpi-capi-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&d).expect("create scratch dir");
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
