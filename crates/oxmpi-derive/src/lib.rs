//! Derive macro for `oxmpi::Equivalence`.
