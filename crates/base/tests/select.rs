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
