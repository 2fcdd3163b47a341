//! How ranks find each other: a small key-value store with a barrier.
//!
//! [`Bootstrap`] is what the engine needs from PMI. Implementations: [`Singleton`] (one rank,
//! no PMI), [`FileKvs`] (a directory shared by processes of one node, used by tests that
//! spawn ranks themselves) and [`PmiBootstrap`] over the `oxmpi-pmi` client.

use std::path::PathBuf;
use std::time::Duration;

use crate::Error;

/// The bootstrap services the engine uses.
pub trait Bootstrap: Send {
    /// Our rank in the job.
    fn rank(&self) -> i32;
    /// Number of ranks in the job.
    fn size(&self) -> i32;
    /// Publishes `key = value` (visible to others after the next [`Bootstrap::fence`]).
    fn put(&mut self, key: &str, value: &str) -> Result<(), Error>;
    /// Commits puts and waits until every rank reached the fence.
    fn fence(&mut self) -> Result<(), Error>;
    /// Reads a key published by `rank`.
    fn get(&mut self, rank: i32, key: &str) -> Result<String, Error>;
    /// Asks the launcher to abort the job (best effort; the caller exits afterwards).
    fn abort(&mut self, code: i32, msg: &str);
    /// Tells the launcher this rank finished cleanly.
    fn finalize(&mut self) -> Result<(), Error>;
    /// Asks the launcher to start a new job (`MPI_Comm_spawn`); `preput` pairs are readable
    /// by the children with [`Bootstrap::get`] (any rank). Returns the children's error
    /// codes. The default: this launcher cannot spawn.
    fn spawn(&mut self, req: &oxmpi_pmi::SpawnRequest) -> Result<Vec<i32>, Error> {
        let _ = req;
        Err(Error::Bootstrap {
            rank: self.rank(),
            msg: "this process was not started by a process manager that can spawn processes"
                .into(),
        })
    }
}

/// A job of one rank without a launcher.
#[derive(Debug, Default)]
pub struct Singleton {
    kvs: std::collections::HashMap<String, String>,
}

impl Bootstrap for Singleton {
    fn rank(&self) -> i32 {
        0
    }
    fn size(&self) -> i32 {
        1
    }
    fn put(&mut self, key: &str, value: &str) -> Result<(), Error> {
        self.kvs.insert(key.to_string(), value.to_string());
        Ok(())
    }
    fn fence(&mut self) -> Result<(), Error> {
        Ok(())
    }
    fn get(&mut self, rank: i32, key: &str) -> Result<String, Error> {
        if rank != 0 {
            return Err(Error::Bootstrap {
                rank: 0,
                msg: format!("singleton has no rank {rank}"),
            });
        }
        self.kvs.get(key).cloned().ok_or_else(|| Error::Bootstrap {
            rank: 0,
            msg: format!("key {key} not found"),
        })
    }
    fn abort(&mut self, _code: i32, _msg: &str) {}
    fn finalize(&mut self) -> Result<(), Error> {
        Ok(())
    }
}

/// File-based key-value store for ranks started by a test harness on one node.
///
/// Selected by [`crate::init`] when `OXMPI_ENGINE_KVS_DIR`, `OXMPI_ENGINE_RANK` and
/// `OXMPI_ENGINE_SIZE` are set. `put` writes `kv.<rank>.<key>` atomically (write + rename);
/// `fence` creates `fence.<n>.<rank>` and waits for all ranks' files of fence `n`. The
/// harness owns (creates and removes) the directory.
#[derive(Debug)]
pub struct FileKvs {
    dir: PathBuf,
    rank: i32,
    size: i32,
    epoch: u64,
}

impl FileKvs {
    /// A store in `dir` for `rank` of `size`.
    pub fn new(dir: impl Into<PathBuf>, rank: i32, size: i32) -> FileKvs {
        FileKvs {
            dir: dir.into(),
            rank,
            size,
            epoch: 0,
        }
    }

    /// From the `OXMPI_ENGINE_KVS_DIR/RANK/SIZE` environment, if set.
    pub fn from_env() -> Option<FileKvs> {
        let dir = std::env::var_os("OXMPI_ENGINE_KVS_DIR")?;
        let rank = std::env::var("OXMPI_ENGINE_RANK").ok()?.parse().ok()?;
        let size = std::env::var("OXMPI_ENGINE_SIZE").ok()?.parse().ok()?;
        Some(FileKvs::new(dir, rank, size))
    }

    fn err(&self, msg: String) -> Error {
        Error::Bootstrap {
            rank: self.rank,
            msg,
        }
    }
}

impl Bootstrap for FileKvs {
    fn rank(&self) -> i32 {
        self.rank
    }
    fn size(&self) -> i32 {
        self.size
    }
    fn put(&mut self, key: &str, value: &str) -> Result<(), Error> {
        let tmp = self.dir.join(format!("tmp.{}.{key}", self.rank));
        let dst = self.dir.join(format!("kv.{}.{key}", self.rank));
        std::fs::write(&tmp, value)
            .and_then(|_| std::fs::rename(&tmp, &dst))
            .map_err(|e| self.err(format!("put {key} in {}: {e}", self.dir.display())))
    }
    fn fence(&mut self) -> Result<(), Error> {
        self.epoch += 1;
        let mine = self.dir.join(format!("fence.{}.{}", self.epoch, self.rank));
        std::fs::write(&mine, b"")
            .map_err(|e| self.err(format!("fence file {}: {e}", mine.display())))?;
        for r in 0..self.size {
            let f = self.dir.join(format!("fence.{}.{r}", self.epoch));
            while !f.exists() {
                if !self.dir.exists() {
                    return Err(self.err(format!("{} vanished", self.dir.display())));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        Ok(())
    }
    fn get(&mut self, rank: i32, key: &str) -> Result<String, Error> {
        let f = self.dir.join(format!("kv.{rank}.{key}"));
        std::fs::read_to_string(&f).map_err(|e| self.err(format!("get {key} of rank {rank}: {e}")))
    }
    fn abort(&mut self, code: i32, msg: &str) {
        let _ = std::fs::write(
            self.dir.join(format!("abort.{}", self.rank)),
            format!("{code} {msg}"),
        );
    }
    fn finalize(&mut self) -> Result<(), Error> {
        Ok(())
    }
}

/// How long an aborting rank waits for the launcher to end the job before exiting itself.
const ABORT_GRACE: Duration = Duration::from_secs(3);

/// Bootstrap through the PMI-1/PMI-2 client of `oxmpi-pmi` (our `mpirun`, Hydra, Slurm).
#[derive(Debug)]
pub struct PmiBootstrap {
    pmi: oxmpi_pmi::Pmi,
}

impl PmiBootstrap {
    /// Connects to the process manager named by the environment; a singleton when there is
    /// none.
    pub fn init() -> Result<PmiBootstrap, Error> {
        let pmi = oxmpi_pmi::Pmi::init().map_err(|e| Error::Bootstrap {
            rank: -1,
            msg: format!("PMI init: {e}"),
        })?;
        Ok(PmiBootstrap { pmi })
    }

    fn err(&self, what: &str, e: oxmpi_pmi::Error) -> Error {
        Error::Bootstrap {
            rank: self.rank(),
            msg: format!("PMI {what}: {e}"),
        }
    }
}

impl Bootstrap for PmiBootstrap {
    fn rank(&self) -> i32 {
        self.pmi.rank() as i32
    }
    fn size(&self) -> i32 {
        self.pmi.size() as i32
    }
    fn put(&mut self, key: &str, value: &str) -> Result<(), Error> {
        // Values may hold spaces and other characters PMI forbids: send them hex-encoded.
        self.pmi
            .put_bytes(key, value.as_bytes())
            .map_err(|e| self.err("put", e))
    }
    fn fence(&mut self) -> Result<(), Error> {
        self.pmi.fence().map_err(|e| self.err("fence", e))
    }
    fn get(&mut self, rank: i32, key: &str) -> Result<String, Error> {
        let bytes = self
            .pmi
            .get_bytes(u32::try_from(rank).ok(), key)
            .map_err(|e| self.err(&format!("get {key} of rank {rank}"), e))?;
        String::from_utf8(bytes).map_err(|_| Error::Bootstrap {
            rank: self.rank(),
            msg: format!("PMI value {key} of rank {rank} is not UTF-8"),
        })
    }
    fn abort(&mut self, code: i32, msg: &str) {
        if self.pmi.abort(code, msg).is_ok() && self.pmi.size() > 1 {
            // The launcher ends the whole job on an abort and reports its code. Exiting at
            // once could let a peer notice our death and report a failure of its own before
            // the launcher has read the abort; wait to be killed instead (bounded, in case
            // the launcher ignores aborts).
            std::thread::sleep(ABORT_GRACE);
        }
    }
    fn finalize(&mut self) -> Result<(), Error> {
        self.pmi.finalize().map_err(|e| self.err("finalize", e))
    }
    fn spawn(&mut self, req: &oxmpi_pmi::SpawnRequest) -> Result<Vec<i32>, Error> {
        // Preput values are read back with `get` (put_bytes' encoding in one chunk).
        let mut req = req.clone();
        for (_, v) in &mut req.preput {
            *v = format!("1:{}", oxmpi_pmi::to_hex(v.as_bytes()));
        }
        self.pmi.spawn(&req).map_err(|e| match e {
            oxmpi_pmi::Error::Server { msg, .. } => Error::Bootstrap {
                rank: self.rank(),
                msg,
            },
            e => self.err("spawn", e),
        })
    }
}
