//! The framework's base: which component runs a collective ([`select`]).

pub mod select;
