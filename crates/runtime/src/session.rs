//! The job session directory: private (mode 0700), under `$TMPDIR` (or `/tmp`), removed
//! when the job ends. Ranks find it in `OXMPI_JOB_DIR` (shared-memory files go there).

use crate::error::{Result, RuntimeError};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A job session directory, removed (recursively) on drop.
#[derive(Debug)]
pub struct SessionDir {
    path: PathBuf,
}

impl SessionDir {
    /// Create a fresh `oxmpi-<uid>-<pid>-<random>` directory with mode 0700.
    pub fn create() -> Result<Self> {
        let base = std::env::var_os("TMPDIR")
            .filter(|v| !v.is_empty())
            .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
        let uid = crate::sys::uid();
        let pid = std::process::id();
        let mut last = None;
        for _ in 0..16 {
            let path = base.join(format!(
                "oxmpi-{uid}-{pid}-{:08x}",
                crate::sys::random_u64() as u32
            ));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {
                    let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700));
                    return Ok(SessionDir { path });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => {
                    return Err(RuntimeError::Os {
                        what: format!("creating the job directory in {}", base.display()),
                        source: e,
                    })
                }
            }
        }
        Err(RuntimeError::Os {
            what: format!("creating the job directory in {}", base.display()),
            source: last.unwrap_or_else(|| std::io::Error::other("name collision")),
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SessionDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn private_and_removed_on_drop() {
        let d = SessionDir::create().unwrap();
        let p = d.path().to_path_buf();
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o777, 0o700);
        std::fs::write(p.join("f"), b"x").unwrap();
        drop(d);
        assert!(!p.exists());
    }
}
