//! Component selection against a framework's selection list.

use oxmpi_base::params::parse_selection;
use oxmpi_base::select::{select, Candidate, SelectError};

fn cands() -> Vec<Candidate<'static>> {
    vec![
        Candidate::available("self"),
        Candidate::available("sm"),
        Candidate::unavailable("cma", "process_vm_readv: EPERM"),
        Candidate::available("tcp"),
    ]
}

fn sel(s: &str) -> Result<Vec<&'static str>, SelectError> {
    select("n1", "btl", &cands(), &parse_selection(s).unwrap()).map(|s| s.components)
}

#[test]
fn empty_selects_all_available_in_order() {
    assert_eq!(sel("").unwrap(), vec!["self", "sm", "tcp"]);
}

#[test]
fn include_list_keeps_requested_order() {
    assert_eq!(sel("tcp,self").unwrap(), vec!["tcp", "self"]);
    assert_eq!(sel("sm,sm").unwrap(), vec!["sm"]);
}

#[test]
fn exclude_list() {
    assert_eq!(sel("^tcp").unwrap(), vec!["self", "sm"]);
    assert_eq!(sel("^tcp,nosuch").unwrap(), vec!["self", "sm"]);
}

#[test]
fn missing_component_is_an_error_naming_host_framework_component() {
    assert_eq!(
        sel("self,openib").unwrap_err().to_string(),
        "A requested component was not found, or was unable to be opened: host n1, framework btl, component openib (not compiled in); available components: self, sm, tcp"
    );
    assert_eq!(
        sel("cma").unwrap_err().to_string(),
        "A requested component was not found, or was unable to be opened: host n1, framework btl, component cma (unavailable: process_vm_readv: EPERM); available components: self, sm, tcp"
    );
}

#[test]
fn nothing_left_is_an_error() {
    assert_eq!(
        sel("^self,sm,tcp").unwrap_err().to_string(),
        "No component of framework btl is usable on host n1 with selection \"^self,sm,tcp\"; available components: self, sm, tcp"
    );
}

/// The only test of this file that touches the process-global registry.
#[test]
fn select_global_reads_the_selection_list_of_the_global_registry() {
    use oxmpi_base::params::{self, Files, Sources};
    use oxmpi_base::select::select_global;
    let sources = Sources {
        command_line: vec![
            ("btl".into(), "foo,sm".into()),
            ("pml".into(), "^ob1".into()),
        ],
        files: Files::Memory(Default::default()),
        ..Sources::default()
    };
    assert!(params::init_global(sources).unwrap());
    let err = select_global("btl", &cands()).unwrap_err();
    let host = oxmpi_base::output::hostname();
    assert_eq!(
        err.to_string(),
        format!("A requested component was not found, or was unable to be opened: host {host}, framework btl, component foo (not compiled in); available components: self, sm, tcp")
    );
    assert_eq!(
        select_global(
            "pml",
            &[Candidate::available("ob1"), Candidate::available("ox")]
        )
        .unwrap()
        .components,
        vec!["ox"]
    );
    // A framework nobody configured: everything available.
    assert_eq!(
        select_global("osc", &[Candidate::available("rdma")])
            .unwrap()
            .components,
        vec!["rdma"]
    );
}
