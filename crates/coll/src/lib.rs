//! Collective algorithms and communicator construction over the point-to-point engine.
