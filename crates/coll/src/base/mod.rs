//! The framework's base: the collective context of a communicator ([`comm`]), the
//! point-to-point helpers the algorithms share ([`p2p`], [`helpers`]), the parameters and
//! decision constants ([`params`]) and which component runs a collective ([`select`]).

pub mod comm;
pub mod helpers;
pub mod p2p;
pub mod params;
pub mod select;
