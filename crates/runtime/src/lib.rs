//! Runtime: allocation, mapping, launch agents, PMI server IO, IO forwarding, job lifecycle.
