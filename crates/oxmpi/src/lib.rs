//! Safe Rust API for oxmpi.
