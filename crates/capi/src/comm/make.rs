//! Making a communicator object: the engine's two communicators (point-to-point and
//! collective contexts) and the table entry. Below every call that creates communicators
//! (`comm.rs`, `coll.rs`, `intercomm.rs`), which agree on the context ids first.

use crate::backend;
use crate::ffi::MpiResult;
use crate::state::{lock, Comm};
use std::ffi::c_int;

/// Create a communicator over `group` (world ranks) with context ids `ctx`/`ctx + 1`,
/// inheriting the error handler of `parent`.
pub(crate) fn make_comm(parent: c_int, ctx: u32, group: Vec<i32>) -> MpiResult<c_int> {
    let eng = backend::engine()?;
    let ecomm = eng.comm_create(ctx, group.clone()).map_err(backend::err)?;
    let collc = eng
        .comm_create(ctx + 1, group.clone())
        .map_err(backend::err)?;
    let mut st = lock();
    let me = st.world_rank();
    let (errh, err_action) = {
        let p = st.comm(parent)?;
        (p.errh, p.err_action)
    };
    let rank = group.iter().position(|&w| w == me).expect("member") as i32;
    let size = group.len() as i32;
    Ok(st.comms.insert(Comm {
        ecomm,
        coll: collc,
        rank,
        size,
        group,
        errh,
        err_action,
        name: String::new(),
        attrs: Default::default(),
        idups: 0,
    }))
}
