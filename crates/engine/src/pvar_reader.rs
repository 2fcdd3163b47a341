//! What a reader of one performance variable keeps: the C library's `MPI_T_pvar` handles
//! and the Rust API's `oxmpi::tools` handles are both this, over the same counters.
//!
//! A counter or timer reader reads what happened since it was made (continuous counters)
//! or during the time it was started (the timer, which is not continuous), minus what a
//! reset or write took away: it keeps the value accumulated so far and the raw reading
//! when it last started. Levels, high-water marks and sizes are read as they are and
//! cannot be reset or written. A reader of a communicator-bound variable reads the
//! communicator it was made for, which counts only while such readers exist; reads of an
//! engine that has not started yet see zeros.

use crate::pml::stats::{set_wait_timing, Pvar, PvarClass};
use crate::CommId;

/// Why an operation on a reader was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PvarOpError {
    /// Start or stop of a continuous variable (`MPI_T_ERR_PVAR_NO_STARTSTOP`).
    #[error("{0} is continuous: it cannot be started or stopped")]
    Continuous(&'static str),
    /// Reset or write of a level, high-water mark or size (`MPI_T_ERR_PVAR_NO_WRITE`).
    #[error("{0} is read-only")]
    ReadOnly(&'static str),
}

impl Pvar {
    /// The raw reading of this variable now (of engine communicator `comm` for a
    /// communicator-bound one; 0 once that communicator is freed): one value, or one per
    /// peer rank for a per-peer variable (`n` of them; `None`: as many as the
    /// communicator has now).
    pub fn raw(&self, comm: Option<CommId>, n: Option<usize>) -> Vec<u64> {
        let mut v = match (crate::engine(), self.comm, comm) {
            (None, ..) | (_, Some(_), None) => Vec::new(),
            (Some(_), Some(b), Some(c)) => match b.peers {
                Some(peers) => peers(c),
                None => vec![(b.read)(c)],
            },
            (Some(e), None, _) => vec![(self.read)(&e.stats())],
        };
        v.resize(n.unwrap_or(v.len()).max(1), 0);
        v
    }
}

/// A reader of performance variable `var` (see the module's text). Dropping it stops it
/// and ends its watch of the communicator.
#[derive(Debug)]
pub struct PvarReader {
    var: &'static Pvar,
    /// The engine communicator a communicator-bound variable reads.
    comm: Option<CommId>,
    /// The values accumulated up to `mark` (counters and timers): the reader's count of
    /// them (1, or the communicator's size for a per-peer variable).
    accum: Vec<u64>,
    /// The raw readings when the reader was last started, reset or written.
    mark: Vec<u64>,
    /// Counting now (always, for a continuous variable).
    started: bool,
}

impl PvarReader {
    /// A reader of `var` (of engine communicator `comm` for a communicator-bound one, which
    /// it starts watching); a continuous one counts from now.
    pub fn new(var: &'static Pvar, comm: Option<CommId>) -> PvarReader {
        if let (Some(b), Some(c)) = (var.comm, comm) {
            (b.watch)(c, true);
        }
        let mark = var.raw(comm, None);
        PvarReader {
            var,
            comm,
            accum: vec![0; mark.len()],
            mark,
            started: var.continuous,
        }
    }

    /// The variable read.
    pub fn var(&self) -> &'static Pvar {
        self.var
    }

    /// How many values a read gives (1, or one per peer rank).
    pub fn count(&self) -> usize {
        self.mark.len()
    }

    /// Whether it counts now.
    pub fn started(&self) -> bool {
        self.started
    }

    /// Its values now (counters as counts, the timer in nanoseconds).
    pub fn value(&self) -> Vec<u64> {
        let now = self.var.raw(self.comm, Some(self.mark.len()));
        if !self.var.resettable() {
            return now;
        }
        now.iter()
            .zip(&self.mark)
            .map(|(n, m)| {
                if self.started {
                    n.saturating_sub(*m)
                } else {
                    0
                }
            })
            .zip(&self.accum)
            .map(|(d, a)| a + d)
            .collect()
    }

    /// Starts counting (a started timer turns the timing of waits on).
    pub fn start(&mut self) -> Result<(), PvarOpError> {
        if self.var.continuous {
            return Err(PvarOpError::Continuous(self.var.name));
        }
        if !self.started {
            if self.var.class == PvarClass::Timer {
                set_wait_timing(true);
            }
            self.mark = self.var.raw(self.comm, Some(self.mark.len()));
            self.started = true;
        }
        Ok(())
    }

    /// Stops counting.
    pub fn stop(&mut self) -> Result<(), PvarOpError> {
        if self.var.continuous {
            return Err(PvarOpError::Continuous(self.var.name));
        }
        if self.started {
            self.accum = self.value();
            self.started = false;
            if self.var.class == PvarClass::Timer {
                set_wait_timing(false);
            }
        }
        Ok(())
    }

    /// Sets the values to `v` (missing ones to 0).
    pub fn set(&mut self, v: &[u64]) -> Result<(), PvarOpError> {
        if !self.var.resettable() {
            return Err(PvarOpError::ReadOnly(self.var.name));
        }
        let n = self.mark.len();
        self.accum = v.to_vec();
        self.accum.resize(n, 0);
        self.mark = self.var.raw(self.comm, Some(n));
        Ok(())
    }

    /// Sets every value to 0.
    pub fn reset(&mut self) -> Result<(), PvarOpError> {
        self.set(&[])
    }
}

impl Drop for PvarReader {
    fn drop(&mut self) {
        if self.started && !self.var.continuous {
            let _ = self.stop();
        }
        if let (Some(b), Some(c)) = (self.var.comm, self.comm) {
            (b.watch)(c, false);
        }
    }
}
