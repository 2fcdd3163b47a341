//! Slurm hostlist expand/compress.

use oxmpi_base::hostlist::{compress, expand, expand_with_limit, HostlistError};
use proptest::prelude::*;

fn v(s: &[&str]) -> Vec<String> {
    s.iter().map(|x| x.to_string()).collect()
}

#[test]
fn expands_ranges_keeping_each_width() {
    assert_eq!(
        expand("node[01-04,7]").unwrap(),
        v(&["node01", "node02", "node03", "node04", "node7"])
    );
    assert_eq!(expand("n[8-11]").unwrap(), v(&["n8", "n9", "n10", "n11"]));
    assert_eq!(
        expand("n[098-101]").unwrap(),
        v(&["n098", "n099", "n100", "n101"])
    );
    assert_eq!(expand("a,b[1-2],c").unwrap(), v(&["a", "b1", "b2", "c"]));
    assert_eq!(expand("").unwrap(), Vec::<String>::new());
    assert_eq!(expand("x[3]y").unwrap(), v(&["x3y"]));
}

#[test]
fn nested_prefixes_multiply_out() {
    assert_eq!(
        expand("rack[1-2]-node[1-3]").unwrap(),
        v(&[
            "rack1-node1",
            "rack1-node2",
            "rack1-node3",
            "rack2-node1",
            "rack2-node2",
            "rack2-node3"
        ])
    );
}

#[test]
fn hostile_input_is_an_error_not_a_panic() {
    let e = |s: &str| expand(s).unwrap_err().to_string();
    assert_eq!(
        e("n[1-99999999999999999999999]"),
        "invalid hostlist \"n[1-99999999999999999999999]\": number in \"1-99999999999999999999999\" is too large"
    );
    assert_eq!(
        e("n[0-18446744073709551615]"),
        format!(
            "hostlist \"n[0-18446744073709551615]\" expands to more than {} hosts",
            1 << 20
        )
    );
    assert_eq!(
        e("n[5-1]"),
        "invalid hostlist \"n[5-1]\": range \"5-1\" goes backwards"
    );
    assert_eq!(
        e("n[a-b]"),
        "invalid hostlist \"n[a-b]\": bad range \"a-b\" (expected N or N-M with digits)"
    );
    assert_eq!(
        e("n[1-2"),
        "invalid hostlist \"n[1-2\": unbalanced '[' or ']' at byte 5"
    );
    assert_eq!(
        e("n]1"),
        "invalid hostlist \"n]1\": unbalanced '[' or ']' at byte 1"
    );
    assert_eq!(
        e("n[[1]]"),
        "invalid hostlist \"n[[1]]\": unbalanced '[' or ']' at byte 2"
    );
    assert_eq!(e("a,,b"), "invalid hostlist \"a,,b\": empty host name");
    assert!(matches!(
        expand_with_limit("a[1-3]-b[1-3]", 8),
        Err(HostlistError::TooMany { max: 8, .. })
    ));
}

#[test]
fn compresses_runs() {
    let hosts = v(&[
        "node01", "node02", "node03", "node7", "login", "node08", "x9", "x10",
    ]);
    assert_eq!(
        compress(&hosts).unwrap(),
        "node[01-03,7],login,node08,x[9-10]"
    );
    assert_eq!(compress(&v(&["a1"])).unwrap(), "a1");
    assert_eq!(compress(&v(&["a1", "a1"])).unwrap(), "a[1,1]");
    assert!(matches!(
        compress(&v(&["a,b"])),
        Err(HostlistError::BadHostName { .. })
    ));
}

fn host() -> impl Strategy<Value = String> {
    ("[a-c]{1,2}(-[a-b])?", proptest::option::of("[0-9]{1,4}"))
        .prop_map(|(p, n)| format!("{p}{}", n.unwrap_or_default()))
}

proptest! {
    #[test]
    fn compress_then_expand_is_identity(hosts in proptest::collection::vec(host(), 0..30)) {
        let c = compress(&hosts).unwrap();
        prop_assert_eq!(expand(&c).unwrap(), hosts);
    }

    #[test]
    fn sorted_ranges_compress_small(prefix in "[a-z]{1,5}", lo in 0u64..1000, len in 1u64..50, width in 1usize..5) {
        let hosts: Vec<String> = (lo..lo + len).map(|n| format!("{prefix}{n:0width$}")).collect();
        let c = compress(&hosts).unwrap();
        prop_assert!(c.matches('[').count() <= 1);
        prop_assert_eq!(expand(&c).unwrap(), hosts);
    }

    #[test]
    fn expand_never_panics(s in "[a-z0-9\\[\\],\\-]{0,40}") {
        let _ = expand_with_limit(&s, 10_000);
    }
}

#[test]
fn tasks_per_node() {
    use oxmpi_base::hostlist::expand_tasks_per_node as t;
    assert_eq!(t("2(x3),1", 100).unwrap(), vec![2, 2, 2, 1]);
    assert_eq!(t("4", 100).unwrap(), vec![4]);
    assert_eq!(
        t("2(x3,1", 100).unwrap_err().to_string(),
        "invalid SLURM_TASKS_PER_NODE \"2(x3,1\": bad item \"2(x3\" (expected N or N(xR), e.g. 2(x3),1)"
    );
    assert!(t("", 100).is_err());
    assert!(t("1(x0)", 100).is_err());
    assert!(t("1(x99999999999999999999)", 100).is_err());
    assert!(t("1(x101)", 100).is_err());
    assert!(t("1(x50),1(x51)", 100).is_err());
}
