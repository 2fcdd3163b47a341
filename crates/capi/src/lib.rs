//! C ABI: MPICH-compatible libmpi.so.12 over the oxmpi engine.
