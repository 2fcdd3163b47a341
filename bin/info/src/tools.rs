//! `--cvars` and `--pvars`: the MPI tools interface's variables as a tools user sees them
//! through `MPI_T_cvar_get_info` / `MPI_T_pvar_get_info` (the same view of the registry and
//! the same counter list the library uses), grouped by category.

use oxmpi_base::params::tools::{
    category_of, enum_values, verbosity_index, CvarScope, CvarType, VERBOSITY_NAMES,
};
use oxmpi_base::params::{Provider, Registry};
use oxmpi_engine::PvarClass;
use std::fmt::Write;

/// Every control variable of level <= `level`, by category: the parameters of the MPI
/// library (those the launcher alone reads, of `launcher`, are not variables of a rank).
pub(crate) fn cvars(reg: &Registry, level: u8, launcher: &Provider) -> String {
    let mut out = String::new();
    let mut entries: Vec<_> = reg
        .entries()
        .filter(|e| e.decl.level <= level)
        .filter(|e| {
            !launcher.params.contains(&e.decl)
                && !launcher
                    .frameworks
                    .iter()
                    .any(|f| f.name == e.decl.framework)
        })
        .collect();
    entries.sort_by_key(|e| (category_of(e), e.decl.full_name()));
    let _ = writeln!(
        out,
        "MPI_T control variables (level <= {level}): {}",
        entries.len()
    );
    let mut cat = String::new();
    for e in entries {
        if category_of(e) != cat {
            cat = category_of(e);
            let _ = writeln!(out, "\ncategory {cat}");
        }
        // The scope a tool sees before MPI_Init, and after it where that differs.
        let (before, after) = (CvarScope::of(e, false), CvarScope::of(e, true));
        let _ = writeln!(
            out,
            "  {}  {}  MPI_T_VERBOSITY_{}  MPI_T_SCOPE_{}{}",
            e.decl.full_name(),
            CvarType::of(&e.decl.ty).mpi_name(),
            VERBOSITY_NAMES[verbosity_index(e.decl.level)],
            before.name(),
            if after == before {
                String::new()
            } else {
                format!(" (MPI_T_SCOPE_{} after MPI_Init)", after.name())
            }
        );
        let _ = writeln!(out, "      value \"{}\" ({})", e.rendered(), e.source);
        if let Some(v) = enum_values(&e.decl.ty) {
            let items: Vec<String> = v.iter().map(|(n, s)| format!("{n}={s}")).collect();
            let _ = writeln!(out, "      enum {}", items.join(", "));
        }
        let _ = writeln!(out, "      {}", e.decl.help_text());
    }
    out
}

/// Every performance variable of level <= `level`, by category.
pub(crate) fn pvars(level: u8) -> String {
    let mut out = String::new();
    let mut vars: Vec<_> = oxmpi_engine::pvars()
        .chain(oxmpi_coll::pvars())
        .filter(|p| p.level <= level)
        .collect();
    vars.sort_by_key(|p| (p.category, p.name));
    let _ = writeln!(
        out,
        "MPI_T performance variables (level <= {level}): {}",
        vars.len()
    );
    let mut cat = "";
    for p in vars {
        if p.category != cat {
            cat = p.category;
            let _ = writeln!(out, "\ncategory {cat}");
        }
        let dt = match p.class {
            PvarClass::Timer => "MPI_DOUBLE",
            _ => "MPI_UNSIGNED_LONG_LONG",
        };
        let _ = writeln!(
            out,
            "  {}  MPI_T_PVAR_CLASS_{}  {dt}  MPI_T_VERBOSITY_{}  {}{}{}",
            p.name,
            p.class.name(),
            VERBOSITY_NAMES[verbosity_index(p.level)],
            if p.continuous {
                "continuous"
            } else {
                "start/stop"
            },
            if p.resettable() { "" } else { ", read-only" },
            match p.comm {
                Some(b) if b.peers.is_some() => {
                    ", bound to a communicator (MPI_T_BIND_MPI_COMM), an array: one value per \
                     peer rank (count = the communicator's size, its remote group's for an \
                     intercommunicator)"
                }
                Some(_) => ", bound to a communicator (MPI_T_BIND_MPI_COMM)",
                None => "",
            }
        );
        let _ = writeln!(out, "      {}", p.desc);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxmpi_base::params::{Files, Sources};

    #[test]
    fn cvars_show_type_verbosity_scope_value_and_enums() {
        let mut r = Registry::new(Sources {
            env: vec![("OXMPI_MCA_btl_sm_eager_limit".into(), "8k".into())],
            files: Files::Memory(Default::default()),
            ..Sources::default()
        })
        .unwrap();
        r.register_provider(&oxmpi_engine::PROVIDER).unwrap();
        let out = cvars(&r, 9, &oxmpi_runtime::PROVIDER);
        assert!(out.contains("\ncategory btl_sm\n"), "{out}");
        assert!(out.contains(
            "\n  btl_sm_eager_limit  MPI_UNSIGNED_LONG_LONG  MPI_T_VERBOSITY_TUNER_BASIC  MPI_T_SCOPE_ALL_EQ\n      value \"8192\" (environment (OXMPI_MCA_btl_sm_eager_limit))\n"
        ), "{out}");
        assert!(out.contains(
            "  btl_base_verbose  MPI_INT  MPI_T_VERBOSITY_MPIDEV_DETAIL  MPI_T_SCOPE_LOCAL\n"
        ));
        assert!(out.contains(
            "  btl_sm_ring_size  MPI_UNSIGNED_LONG_LONG  MPI_T_VERBOSITY_TUNER_DETAIL  MPI_T_SCOPE_ALL_EQ (MPI_T_SCOPE_CONSTANT after MPI_Init)\n"
        ), "{out}");
        assert!(out.contains("      enum -1=none, 0=error, 10=component"));
        assert!(!cvars(&r, 1, &oxmpi_runtime::PROVIDER).contains("btl_sm_eager_limit"));
        r.register_provider(&oxmpi_runtime::PROVIDER).unwrap();
        assert_eq!(cvars(&r, 9, &oxmpi_runtime::PROVIDER), out);
    }

    #[test]
    fn pvars_show_class_type_and_mode() {
        let out = pvars(9);
        assert!(out.contains("\ncategory btl_sm\n"), "{out}");
        assert!(out.contains("  pml_ox_eager_limit  MPI_T_PVAR_CLASS_SIZE  MPI_UNSIGNED_LONG_LONG  MPI_T_VERBOSITY_TUNER_BASIC  continuous, read-only\n"));
        assert!(out.contains("  pml_ox_wait_time  MPI_T_PVAR_CLASS_TIMER  MPI_DOUBLE  MPI_T_VERBOSITY_TUNER_BASIC  start/stop\n"));
        assert!(out.contains("  coll_tuned_comm_bcast_linear_calls  MPI_T_PVAR_CLASS_COUNTER  MPI_UNSIGNED_LONG_LONG  MPI_T_VERBOSITY_TUNER_DETAIL  continuous, bound to a communicator (MPI_T_BIND_MPI_COMM)\n"));
        assert!(
            out.contains("  btl_tcp_bytes_sent  MPI_T_PVAR_CLASS_COUNTER  MPI_UNSIGNED_LONG_LONG")
        );
        // A per-peer variable is an array, one value per rank of the communicator.
        assert!(out.contains("  pml_ox_comm_peer_msgs_sent  MPI_T_PVAR_CLASS_COUNTER  MPI_UNSIGNED_LONG_LONG  MPI_T_VERBOSITY_TUNER_DETAIL  continuous, bound to a communicator (MPI_T_BIND_MPI_COMM), an array: one value per peer rank (count = the communicator's size, its remote group's for an intercommunicator)\n"), "{out}");
    }
}
