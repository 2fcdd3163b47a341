//! Lean blocking PMI-1/PMI-2 client used by the MPI library (no async runtime).
