//! Base layer: typed MCA parameter registry with provenance, verbose output framework, errors, hostlists, topology.
