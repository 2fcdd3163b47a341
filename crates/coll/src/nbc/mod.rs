//! The `nbc` component: nonblocking collectives as [`sched`]ules of point-to-point rounds
//! and local steps, and their [`progress`] (a background thread plus the waiting threads'
//! own calls).

pub mod light;
pub mod progress;
pub mod sched;
