//! MPI engine: matching, protocols, shared-memory/self transports, progress, collectives.
