//! The MPI tools interface (MPI 4.1 §15.3) for Rust programs: control variables (the
//! MCA parameter registry), performance variables (the engine's and the collectives'
//! counters) and the categories that group them, typed and safe.
//!
//! It works on the same registry and counters as the C library's `MPI_T_*` functions and
//! through the same code: a write is `oxmpi_coll::base::cvar::write` (what
//! `MPI_T_cvar_write` calls) and a [`PvarHandle`] is the engine's `PvarReader` (what an
//! `MPI_T_pvar_handle` holds), so both interfaces see and change the same things.
//!
//! ```
//! use oxmpi::tools::{self, CvarValue, PvarSession};
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // Before MPI starts, every settable parameter may be written.
//!     tools::write_cvar("btl_sm_eager_limit", &CvarValue::Unsigned(2048))?;
//!     let universe = oxmpi::init()?;
//!     let world = universe.world();
//!     let session = PvarSession::new();
//!     let mut sent = session.handle("btl_self_msgs_sent")?;
//!     world.send(&[1u8][..], 0, 5)?;
//!     let mut b = [0u8; 1];
//!     world.recv(&mut b[..], 0, 5)?;
//!     assert_eq!(sent.read(), [1]);
//!     sent.reset()?;
//!     assert_eq!(sent.read(), [0]);
//!     // One value per rank of the communicator.
//!     let per_peer = session.handle_for("pml_ox_comm_peer_msgs_sent", &world)?;
//!     assert_eq!(per_peer.count(), world.size() as usize);
//!     Ok(())
//! }
//! ```
//!
//! Not here: the events (`MPI_T_event_*`, the C library's only).

use crate::Communicator;
use oxmpi_base::params::tools::{self as view, VERBOSITY_NAMES};
use oxmpi_base::params::{self, Entry, ParamError};
use oxmpi_engine::{Pvar, PvarReader};
use std::collections::BTreeMap;
use std::marker::PhantomData;

pub use oxmpi_base::params::tools::{CvarScope, CvarType, CvarValue};
pub use oxmpi_coll::base::cvar::CvarWriteError;
pub use oxmpi_engine::{PvarClass, PvarOpError};

/// An error of the tools interface.
#[derive(Debug, thiserror::Error)]
pub enum ToolsError {
    /// A control variable write was refused.
    #[error(transparent)]
    Write(#[from] CvarWriteError),
    /// No performance variable of that name.
    #[error("no performance variable {0}")]
    UnknownPvar(String),
    /// The variable is bound to a communicator: use [`PvarSession::handle_for`].
    #[error("{0} is bound to a communicator: allocate its handle with handle_for")]
    NeedsCommunicator(&'static str),
    /// The variable is bound to no object: use [`PvarSession::handle`].
    #[error("{0} is bound to no object: allocate its handle with handle")]
    NotBound(&'static str),
    /// Start/stop of a continuous variable, or a reset or write of a read-only one.
    #[error(transparent)]
    Refused(#[from] PvarOpError),
    /// The parameter registry could not be built (a bad parameter file or environment).
    #[error("the parameter registry cannot be read: {0}")]
    Registry(#[from] ParamError),
}

/// The verbosity of a variable (`MPI_T_VERBOSITY_*` without the prefix: `USER_BASIC` …
/// `MPIDEV_ALL`).
pub type Verbosity = &'static str;

/// A control variable: one registered parameter as the tools interface shows it.
#[derive(Debug, Clone)]
pub struct Cvar {
    /// Its name (`btl_sm_eager_limit`).
    pub name: String,
    /// The C type it is read and written as.
    pub ty: CvarType,
    /// Its verbosity.
    pub verbosity: Verbosity,
    /// Whether and how it may be written now (before or after `MPI_Init`).
    pub scope: CvarScope,
    /// Its category (framework, or framework and component: `btl_sm`).
    pub category: String,
    /// The enumeration of an enum or boolean variable: `(value, name)`.
    pub enumeration: Option<&'static [(i64, &'static str)]>,
    /// Its value now.
    pub value: CvarValue,
    /// Where the value came from (`default`, `command line`, `set`, ...).
    pub source: String,
    /// One-line description.
    pub description: String,
}

impl Cvar {
    fn of(e: &Entry) -> Cvar {
        Cvar {
            name: e.decl.full_name(),
            ty: CvarType::of(&e.decl.ty),
            verbosity: VERBOSITY_NAMES[view::verbosity_index(e.decl.level)],
            scope: CvarScope::of(e, oxmpi_coll::base::cvar::started()),
            category: view::category_of(e),
            enumeration: view::enum_values(&e.decl.ty),
            value: view::cvar_value(e),
            source: e.source.to_string(),
            description: e.decl.help_text(),
        }
    }
}

/// Registers the parameters of the MPI library (engine and collectives), as
/// `MPI_T_init_thread` does, so that every one appears.
fn register() -> Result<(), ParamError> {
    params::register_global(&oxmpi_engine::PROVIDER)?;
    params::register_global(&oxmpi_coll::PROVIDER)
}

/// Every control variable, by name.
pub fn cvars() -> Result<Vec<Cvar>, ToolsError> {
    register()?;
    let mut v: Vec<Cvar> = params::with_global(|r| r.entries().map(Cvar::of).collect())?;
    v.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(v)
}

/// Control variable `name`.
pub fn cvar(name: &str) -> Result<Cvar, ToolsError> {
    register()?;
    Ok(Cvar::of(&oxmpi_coll::base::cvar::entry(name)?))
}

/// The value of control variable `name` (`MPI_T_cvar_read`).
pub fn read_cvar(name: &str) -> Result<CvarValue, ToolsError> {
    Ok(cvar(name)?.value)
}

/// Writes control variable `name` (`MPI_T_cvar_write`): any settable variable before
/// `MPI_Init`, the `runtime` ones after it (a write after `MPI_Init` of a variable that is
/// `MPI_T_SCOPE_ALL_EQ` must be made on every rank alike). The value is checked against
/// the parameter's type as any other source of it.
pub fn write_cvar(name: &str, value: &CvarValue) -> Result<(), ToolsError> {
    register()?;
    Ok(oxmpi_coll::base::cvar::write(name, value)?)
}

/// What a performance variable is.
#[derive(Debug, Clone, Copy)]
pub struct PvarInfo {
    /// Its name (`btl_sm_msgs_sent`).
    pub name: &'static str,
    /// Its category.
    pub category: &'static str,
    /// One-line description.
    pub description: &'static str,
    /// Its class (counter, level, high-water mark, size, timer).
    pub class: PvarClass,
    /// Its verbosity.
    pub verbosity: Verbosity,
    /// Counts without being started.
    pub continuous: bool,
    /// Cannot be reset or written (levels, high-water marks, sizes).
    pub readonly: bool,
    /// Bound to a communicator ([`PvarSession::handle_for`]).
    pub bound_to_communicator: bool,
    /// An array of one value per rank of its communicator.
    pub per_peer: bool,
}

/// Every performance variable, the engine's then the collectives' (the C library's
/// order).
fn all_pvars() -> impl Iterator<Item = &'static Pvar> {
    oxmpi_engine::pvars().chain(oxmpi_coll::pvars())
}

/// Every performance variable.
pub fn pvars() -> Vec<PvarInfo> {
    all_pvars()
        .map(|p| PvarInfo {
            name: p.name,
            category: p.category,
            description: p.desc,
            class: p.class,
            verbosity: VERBOSITY_NAMES[view::verbosity_index(p.level)],
            continuous: p.continuous,
            readonly: !p.resettable(),
            bound_to_communicator: p.comm.is_some(),
            per_peer: p.comm.is_some_and(|b| b.peers.is_some()),
        })
        .collect()
}

/// A category: a framework (`btl`) or one of its components (`btl_sm`), with the
/// variables it holds.
#[derive(Debug, Clone, Default)]
pub struct Category {
    /// Its name.
    pub name: String,
    /// What the framework or component does.
    pub description: String,
    /// Its control variables, by name.
    pub cvars: Vec<String>,
    /// Its performance variables, by name.
    pub pvars: Vec<&'static str>,
    /// Its component categories (of a framework).
    pub subcategories: Vec<String>,
}

/// Category `name` of `cats`, made (with its framework's, for a component category) if
/// new.
fn category<'c>(
    cats: &'c mut BTreeMap<String, Category>,
    reg: &params::Registry,
    name: &str,
) -> &'c mut Category {
    let fw = reg
        .frameworks()
        .find(|f| name.len() > f.name.len() && name.starts_with(&format!("{}_", f.name)));
    let mut description = reg
        .framework(name)
        .map_or_else(|| format!("{name} parameters"), |f| f.description.into());
    if let Some(f) = fw {
        let c = &name[f.name.len() + 1..];
        if let Some(k) = f.components.iter().find(|k| k.name == c) {
            description = k.description.into();
        }
        let parent = cats.entry(f.name.into()).or_insert_with(|| Category {
            name: f.name.into(),
            description: f.description.into(),
            ..Category::default()
        });
        if !parent.subcategories.iter().any(|s| s == name) {
            parent.subcategories.push(name.into());
        }
    }
    cats.entry(name.into()).or_insert_with(|| Category {
        name: name.into(),
        description,
        ..Category::default()
    })
}

/// Every category, by name.
pub fn categories() -> Result<Vec<Category>, ToolsError> {
    let cv = cvars()?;
    let reg = params::global()?;
    let mut cats = BTreeMap::new();
    for c in &cv {
        category(&mut cats, &reg, &c.category)
            .cvars
            .push(c.name.clone());
    }
    for p in all_pvars() {
        category(&mut cats, &reg, p.category).pvars.push(p.name);
    }
    Ok(cats.into_values().collect())
}

/// A performance variable session (`MPI_T_pvar_session`): the handles made from it read
/// independently of any other session's.
#[derive(Debug, Default)]
pub struct PvarSession {
    _private: (),
}

impl PvarSession {
    /// A new session.
    pub fn new() -> PvarSession {
        PvarSession::default()
    }

    /// The performance variable `name`.
    fn var(name: &str) -> Result<&'static Pvar, ToolsError> {
        all_pvars()
            .find(|p| p.name == name)
            .ok_or_else(|| ToolsError::UnknownPvar(name.to_string()))
    }

    /// A handle on variable `name`, bound to no object (`MPI_T_pvar_handle_alloc`): a
    /// continuous one counts from now, the others once started.
    pub fn handle(&self, name: &str) -> Result<PvarHandle<'_>, ToolsError> {
        let p = Self::var(name)?;
        if p.comm.is_some() {
            return Err(ToolsError::NeedsCommunicator(p.name));
        }
        Ok(PvarHandle::new(PvarReader::new(p, None)))
    }

    /// A handle on variable `name` bound to communicator `comm` (it counts that
    /// communicator's traffic while the handle exists; a per-peer variable has one value
    /// per rank of it).
    pub fn handle_for(
        &self,
        name: &str,
        comm: &Communicator<'_>,
    ) -> Result<PvarHandle<'_>, ToolsError> {
        let p = Self::var(name)?;
        let Some(b) = p.comm else {
            return Err(ToolsError::NotBound(p.name));
        };
        let c = if b.collective {
            comm.coll_id()
        } else {
            comm.id()
        };
        Ok(PvarHandle::new(PvarReader::new(p, Some(c))))
    }
}

/// A handle on a performance variable (`MPI_T_pvar_handle`), alive within its session.
/// Dropping it stops it (and ends its watch of a communicator).
#[derive(Debug)]
pub struct PvarHandle<'s> {
    reader: PvarReader,
    _session: PhantomData<&'s PvarSession>,
}

impl<'s> PvarHandle<'s> {
    fn new(reader: PvarReader) -> PvarHandle<'s> {
        PvarHandle {
            reader,
            _session: PhantomData,
        }
    }

    /// What the variable is.
    pub fn info(&self) -> PvarInfo {
        let name = self.reader.var().name;
        pvars()
            .into_iter()
            .find(|p| p.name == name)
            .expect("handles read listed variables")
    }

    /// How many values a read gives (1, or one per rank of the communicator).
    pub fn count(&self) -> usize {
        self.reader.count()
    }

    /// Its values now (`MPI_T_pvar_read`): counts, levels and sizes as they are, a timer
    /// in nanoseconds ([`PvarHandle::read_seconds`] gives seconds as `MPI_T` does).
    pub fn read(&self) -> Vec<u64> {
        self.reader.value()
    }

    /// Its values now in seconds (for a timer; other classes' values converted as is).
    pub fn read_seconds(&self) -> Vec<f64> {
        self.read().into_iter().map(|ns| ns as f64 / 1e9).collect()
    }

    /// Reads and resets it (`MPI_T_pvar_readreset`).
    pub fn read_reset(&mut self) -> Result<Vec<u64>, ToolsError> {
        let v = self.reader.value();
        self.reader.reset()?;
        Ok(v)
    }

    /// Starts it (`MPI_T_pvar_start`; refused for a continuous variable).
    pub fn start(&mut self) -> Result<(), ToolsError> {
        Ok(self.reader.start()?)
    }

    /// Stops it (`MPI_T_pvar_stop`; refused for a continuous variable).
    pub fn stop(&mut self) -> Result<(), ToolsError> {
        Ok(self.reader.stop()?)
    }

    /// Sets its values to 0 (`MPI_T_pvar_reset`; refused for a read-only variable).
    pub fn reset(&mut self) -> Result<(), ToolsError> {
        Ok(self.reader.reset()?)
    }

    /// Sets its values (`MPI_T_pvar_write`; missing ones become 0; refused for a read-only
    /// variable).
    pub fn write(&mut self, values: &[u64]) -> Result<(), ToolsError> {
        Ok(self.reader.set(values)?)
    }
}
