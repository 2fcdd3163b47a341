//! Library state: the handle tables (`handles`) of the MPI objects
//! (`objects`) behind one lock.

use crate::consts::*;
use crate::ffi::MpiResult;
use crate::handles::{kind, Table};
pub(crate) use crate::objects::{Comm, Group, Info, Keyval, Session};
use crate::objects::{ErrAction, Greq, Message, Pending, Request, UserErrhandler, UserErrors};
use std::ffi::c_int;
use std::sync::{Mutex, MutexGuard};

/// A user reduction operation.
pub(crate) struct UserOp {
    pub func: crate::objects::UserFn,
    pub commute: bool,
}

/// Everything behind the library lock.
pub(crate) struct State {
    /// The library is up (the engine, world and self): by `MPI_Init` or a session.
    pub initialized: bool,
    /// `MPI_Init` was called (the World Model, `MPI_Initialized`).
    pub world_model: bool,
    pub finalized: bool,
    pub thread_level: c_int,
    pub world: Option<Comm>,
    pub selfc: Option<Comm>,
    pub comms: Table<Comm>,
    pub groups: Table<Group>,
    /// The derived datatypes (with the summaries their read-only queries read lock-free).
    pub types: crate::type_table::TypeTable,
    pub reqs: Table<Request>,
    pub msgs: Table<Message>,
    pub errhandlers: Table<UserErrhandler>,
    pub ops: Table<UserOp>,
    pub infos: Table<Info>,
    pub keyvals: Table<Keyval>,
    pub sessions: Table<Session>,
    pub user_errors: UserErrors,
    /// Error handler of MPI_COMM_WORLD before MPI_Init (set by Comm_set_errhandler).
    pub pre_init_world_errh: (c_int, ErrAction),
    /// The buffer attached with MPI_Buffer_attach (address, size).
    pub bsend_buffer: Option<(usize, usize)>,
    /// Buffers attached to communicators and sessions (MPI 4.1), by handle.
    pub bsend_buffers: std::collections::BTreeMap<c_int, (usize, usize)>,
    /// Operations still running after their request was freed, and buffered sends.
    pub orphans: Vec<Pending>,
    /// The context ids of this process's communicators.
    pub ids: oxmpi_engine::ctxid::Ids,
    /// Generalized requests by request handle.
    pub greqs: std::collections::BTreeMap<c_int, Greq>,
    /// Datatype attributes: datatype handle -> keyval -> value.
    pub type_attrs: std::collections::BTreeMap<c_int, std::collections::BTreeMap<c_int, usize>>,
}

impl State {
    const fn new() -> Self {
        State {
            initialized: false,
            world_model: false,
            finalized: false,
            thread_level: MPI_THREAD_SINGLE,
            world: None,
            selfc: None,
            comms: Table::new(kind::COMM, 0),
            groups: Table::new(kind::GROUP, 0),
            types: crate::type_table::TypeTable::new(),
            reqs: Table::new(kind::REQUEST, 0),
            // Messages share the request object type; keep their indices apart.
            msgs: Table::new(kind::REQUEST, 0x0200_0000),
            errhandlers: Table::new(kind::ERRHANDLER, 0),
            ops: Table::new(kind::OP, 0),
            infos: Table::new(kind::INFO, 0),
            keyvals: Table::new(kind::KEYVAL, 0),
            sessions: Table::new(kind::SESSION, 0),
            user_errors: UserErrors {
                codes: Vec::new(),
                strings: std::collections::BTreeMap::new(),
                next: 0,
            },
            pre_init_world_errh: (MPI_ERRORS_ARE_FATAL, ErrAction::Fatal),
            bsend_buffer: None,
            bsend_buffers: std::collections::BTreeMap::new(),
            orphans: Vec::new(),
            ids: oxmpi_engine::ctxid::Ids::new(),
            type_attrs: std::collections::BTreeMap::new(),
            greqs: std::collections::BTreeMap::new(),
        }
    }

    /// Fail with `MPI_ERR_OTHER` unless MPI is initialized and not finalized.
    pub fn check_active(&self) -> MpiResult {
        if !self.initialized {
            mpi_bail!(
                MPI_ERR_OTHER,
                "MPI is not initialized (call MPI_Init first)"
            );
        }
        if self.finalized {
            mpi_bail!(MPI_ERR_OTHER, "MPI has been finalized");
        }
        Ok(())
    }

    /// The communicator of handle `h`.
    pub fn comm(&self, h: c_int) -> MpiResult<&Comm> {
        let c = match h {
            MPI_COMM_WORLD => self.world.as_ref(),
            MPI_COMM_SELF => self.selfc.as_ref(),
            _ => self.comms.get(h),
        };
        match c {
            Some(c) => Ok(c),
            None if (h == MPI_COMM_WORLD || h == MPI_COMM_SELF) => {
                mpi_bail!(MPI_ERR_COMM, "MPI is not initialized (call MPI_Init first)")
            }
            None if h == MPI_COMM_NULL => mpi_bail!(MPI_ERR_COMM, "MPI_COMM_NULL passed"),
            None => mpi_bail!(MPI_ERR_COMM, "invalid communicator handle {h:#x}"),
        }
    }

    /// The communicator of handle `h`, mutably.
    pub fn comm_mut(&mut self, h: c_int) -> MpiResult<&mut Comm> {
        self.comm(h)?;
        Ok(match h {
            MPI_COMM_WORLD => self.world.as_mut().expect("checked above"),
            MPI_COMM_SELF => self.selfc.as_mut().expect("checked above"),
            _ => self.comms.get_mut(h).expect("checked above"),
        })
    }

    /// The error action of communicator `h` (the world's if `h` is not valid).
    pub fn comm_errhandler(&self, h: c_int) -> ErrAction {
        match self.comm(h) {
            Ok(c) => c.err_action,
            Err(_) => match self.world.as_ref() {
                Some(w) => w.err_action,
                None => self.pre_init_world_errh.1,
            },
        }
    }

    /// Resolve an error handler handle to its action.
    pub fn errhandler_action(&self, h: c_int) -> MpiResult<ErrAction> {
        match h {
            MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT => Ok(ErrAction::Fatal),
            MPI_ERRORS_RETURN => Ok(ErrAction::Return),
            _ => match self.errhandlers.get(h) {
                Some(u) => Ok(ErrAction::User(u.func)),
                None => mpi_bail!(MPI_ERR_ARG, "invalid error handler {h:#x}"),
            },
        }
    }
}

static STATE: Mutex<State> = Mutex::new(State::new());

/// Lock the library state. A panic while holding the lock (caught at the FFI boundary)
/// does not make the state unusable.
pub(crate) fn lock() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}
