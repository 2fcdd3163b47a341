//! The framework's base: the collective context of a communicator ([`comm`]), the
//! point-to-point helpers the algorithms share ([`p2p`], [`helpers`]), the parameters and
//! decision constants ([`params`]) which component runs a collective ([`select`]) and how often each algorithm ran ([`stats`]).

pub mod comm;
pub mod cvar;
pub mod helpers;
pub mod p2p;
pub mod params;
pub mod select;
pub mod stats;
