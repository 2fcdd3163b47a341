//! Parameter registry: parsers, precedence across all sources, provenance, bad input.

use oxmpi_base::params::*;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::PathBuf;

static TEST_FW: &[Framework] = &[Framework {
    name: "btl",
    description: "byte transfer layer",
    components: &[
        Component {
            name: "self",
            description: "loopback",
        },
        Component {
            name: "sm",
            description: "shared memory",
        },
        Component {
            name: "tcp",
            description: "TCP",
        },
    ],
}];
static TEST_PARAMS: &[ParamDecl] = &[
    ParamDecl::new(
        "btl",
        "sm",
        "fifo_size",
        ParamType::Size,
        "64k",
        "FIFO size",
    )
    .level(4),
    ParamDecl::new(
        "btl",
        "tcp",
        "if_include",
        ParamType::List,
        "",
        "interfaces",
    ),
    ParamDecl::new(
        "btl",
        "tcp",
        "port",
        ParamType::Int { min: 0, max: 65535 },
        "0",
        "port",
    ),
    ParamDecl::new("btl", "sm", "use_cma", ParamType::Bool, "true", "use CMA"),
    ParamDecl::new("btl", "sm", "version", ParamType::String, "1", "version").read_only(),
];
static TEST_PROVIDER: Provider = Provider {
    name: "test",
    frameworks: TEST_FW,
    params: TEST_PARAMS,
};

fn sources() -> Sources {
    Sources {
        home: Some(PathBuf::from("/home/u")),
        prefix: Some(PathBuf::from("/opt/ox")),
        files: Files::Memory(BTreeMap::new()),
        ..Sources::default()
    }
}

fn with_file(s: &mut Sources, path: &str, text: &str) {
    if let Files::Memory(m) = &mut s.files {
        m.insert(PathBuf::from(path), text.to_string());
    }
}

const HOME_FILE: &str = "/home/u/.oxmpi/mca-params.conf";
const SYS_FILE: &str = "/opt/ox/etc/oxmpi-mca-params.conf";
const OVERRIDE_FILE: &str = "/opt/ox/etc/oxmpi-mca-params-override.conf";

fn registry(s: Sources) -> Result<Registry, ParamError> {
    let mut r = Registry::new(s)?;
    r.register_provider(&TEST_PROVIDER)?;
    Ok(r)
}

fn env(s: &mut Sources, k: &str, v: &str) {
    s.env.push((k.to_string(), v.to_string()));
}

// ---------- parsers ----------

#[test]
fn sizes_accept_binary_suffixes() {
    assert_eq!(parse_size("4096"), Ok(4096));
    assert_eq!(parse_size("4k"), Ok(4096));
    assert_eq!(parse_size("4K"), Ok(4096));
    assert_eq!(parse_size("4KiB"), Ok(4096));
    assert_eq!(parse_size("1m"), Ok(1 << 20));
    assert_eq!(parse_size("2g"), Ok(2 << 30));
    assert_eq!(parse_size("3t"), Ok(3 << 40));
    assert!(matches!(
        parse_size("4x"),
        Err(ValueError::Unparsable { .. })
    ));
    assert!(matches!(parse_size(""), Err(ValueError::Unparsable { .. })));
    assert!(matches!(
        parse_size("-1k"),
        Err(ValueError::Unparsable { .. })
    ));
    assert!(matches!(
        parse_size("17179869184g"),
        Err(ValueError::OutOfRange { .. })
    ));
    assert!(matches!(
        parse_size("99999999999999999999999"),
        Err(ValueError::OutOfRange { .. })
    ));
}

#[test]
fn bools_and_ints() {
    for t in ["1", "true", "TRUE", "yes", "on", "enabled"] {
        assert_eq!(parse_bool(t), Ok(true), "{t}");
    }
    for t in ["0", "false", "no", "off", "disabled"] {
        assert_eq!(parse_bool(t), Ok(false), "{t}");
    }
    assert!(parse_bool("maybe").is_err());
    assert_eq!(parse_int("-12"), Ok(-12));
    assert_eq!(parse_int("0x1f"), Ok(31));
    assert_eq!(parse_int("-9223372036854775808"), Ok(i64::MIN));
    assert!(matches!(
        parse_int("9223372036854775808"),
        Err(ValueError::OutOfRange { .. })
    ));
    assert!(matches!(
        parse_int("12a"),
        Err(ValueError::Unparsable { .. })
    ));
    assert!(matches!(parse_int(""), Err(ValueError::Unparsable { .. })));
}

#[test]
fn enums_by_name_number_and_range() {
    assert_eq!(VERBOSE_TYPE.parse("debug"), Ok(Value::Enum(80)));
    assert_eq!(VERBOSE_TYPE.parse("DEBUG"), Ok(Value::Enum(80)));
    assert_eq!(VERBOSE_TYPE.parse("none"), Ok(Value::Enum(-1)));
    assert_eq!(VERBOSE_TYPE.parse("55"), Ok(Value::Enum(55)));
    assert_eq!(VERBOSE_TYPE.parse("-1"), Ok(Value::Enum(-1)));
    assert!(matches!(
        VERBOSE_TYPE.parse("101"),
        Err(ValueError::OutOfRange { .. })
    ));
    assert!(matches!(
        VERBOSE_TYPE.parse("-2"),
        Err(ValueError::OutOfRange { .. })
    ));
    assert!(matches!(
        VERBOSE_TYPE.parse("loud"),
        Err(ValueError::UnknownName { .. })
    ));
    assert_eq!(Value::Enum(80).render(&VERBOSE_TYPE), "debug");
    assert_eq!(Value::Enum(55).render(&VERBOSE_TYPE), "55");
}

#[test]
fn lists_and_selections() {
    assert_eq!(parse_list(" a, b,,c "), vec!["a", "b", "c"]);
    let s = parse_selection("^tcp,openib").unwrap();
    assert!(s.exclude);
    assert_eq!(s.names, vec!["tcp", "openib"]);
    assert!(s.allows("sm") && !s.allows("tcp"));
    let s = parse_selection("self,sm").unwrap();
    assert!(!s.exclude && s.allows("sm") && !s.allows("tcp"));
    assert!(parse_selection("").unwrap().allows("anything"));
    assert_eq!(
        parse_selection("self,^tcp"),
        Err(ValueError::MisplacedNegation)
    );
    assert_eq!(parse_selection("^^tcp"), Err(ValueError::MisplacedNegation));
}

proptest! {
    #[test]
    fn size_suffix_roundtrip(n in 0u64..(1 << 20), idx in 0usize..5) {
        let (suffix, shift) = [("", 0), ("k", 10), ("m", 20), ("g", 30), ("t", 40)][idx];
        prop_assert_eq!(parse_size(&format!("{n}{suffix}")), Ok(n << shift));
    }

    #[test]
    fn size_never_panics(s in "\\PC{0,24}") {
        let _ = parse_size(&s);
        let _ = parse_int(&s);
        let _ = parse_selection(&s);
        let _ = VERBOSE_TYPE.parse(&s);
    }

    #[test]
    fn int_roundtrip(n in any::<i64>()) {
        prop_assert_eq!(parse_int(&n.to_string()), Ok(n));
    }

    #[test]
    fn selection_roundtrip(exclude in any::<bool>(), names in proptest::collection::vec("[a-z][a-z0-9]{0,6}", 0..5)) {
        let sel = Selection { exclude: exclude && !names.is_empty(), names };
        prop_assert_eq!(parse_selection(&sel.to_string()), Ok(sel));
    }

    #[test]
    fn rendered_values_reparse(v in -1i64..=100) {
        let val = VERBOSE_TYPE.parse(&v.to_string()).unwrap();
        prop_assert_eq!(VERBOSE_TYPE.parse(&val.render(&VERBOSE_TYPE)), Ok(val));
    }
}

// ---------- precedence and provenance ----------

/// Builds sources where every layer sets `btl_tcp_port`, then removes layers from the top one
/// at a time: each time the next layer must win, with its own source.
#[test]
fn precedence_across_all_sources() {
    let full = || {
        let mut s = sources();
        with_file(&mut s, OVERRIDE_FILE, "btl_tcp_port = 1\n");
        s.command_line.push(("btl_tcp_port".into(), "2".into()));
        env(&mut s, "OXMPI_MCA_btl_tcp_port", "3");
        env(&mut s, "OMPI_MCA_btl_tcp_port", "4");
        with_file(&mut s, "/t/a.conf", "--mca btl_tcp_port 5\n");
        s.tune_files.push("/t/a.conf".into());
        with_file(&mut s, HOME_FILE, "# user\nbtl_tcp_port = 6\n");
        with_file(&mut s, SYS_FILE, "\n\nbtl_tcp_port=7\n");
        s
    };
    let expect = |s: Sources, v: i64, src: &str| {
        let r = registry(s).unwrap();
        let e = r.get("btl_tcp_port").unwrap();
        assert_eq!(e.value, Value::Int(v));
        assert_eq!(e.source.to_string(), src);
    };
    let mut s = full();
    expect(
        s.clone(),
        1,
        "override (/opt/ox/etc/oxmpi-mca-params-override.conf:1)",
    );
    if let Files::Memory(m) = &mut s.files {
        m.remove(&PathBuf::from(OVERRIDE_FILE));
    }
    expect(s.clone(), 2, "command line");
    s.command_line.clear();
    expect(s.clone(), 3, "environment (OXMPI_MCA_btl_tcp_port)");
    s.env.retain(|(k, _)| k != "OXMPI_MCA_btl_tcp_port");
    expect(s.clone(), 4, "environment (OMPI_MCA_btl_tcp_port)");
    s.env.clear();
    expect(s.clone(), 5, "tune file (/t/a.conf:1)");
    s.tune_files.clear();
    expect(s.clone(), 6, "file (/home/u/.oxmpi/mca-params.conf:2)");
    if let Files::Memory(m) = &mut s.files {
        m.remove(&PathBuf::from(HOME_FILE));
    }
    expect(s.clone(), 7, "file (/opt/ox/etc/oxmpi-mca-params.conf:3)");
    if let Files::Memory(m) = &mut s.files {
        m.clear();
    }
    expect(s, 0, "default");
}

#[test]
fn param_files_list_is_settable_and_leftmost_wins() {
    let mut s = sources();
    with_file(&mut s, "/a.conf", "btl_tcp_port = 10\nbtl_sm_use_cma = 0\n");
    with_file(
        &mut s,
        "/b.conf",
        "btl_tcp_port = 20\nbtl_sm_fifo_size = 1m\n",
    );
    with_file(&mut s, HOME_FILE, "btl_tcp_port = 30\n");
    env(
        &mut s,
        "OXMPI_MCA_mca_base_param_files",
        "/a.conf,/b.conf,/missing.conf",
    );
    let r = registry(s).unwrap();
    assert_eq!(r.get_int("btl_tcp_port"), Some(10));
    assert_eq!(r.get_bool("btl_sm_use_cma"), Some(false));
    assert_eq!(r.get_size("btl_sm_fifo_size"), Some(1 << 20));
    assert_eq!(
        r.get("btl_sm_fifo_size").unwrap().source.to_string(),
        "file (/b.conf:2)"
    );
    assert_eq!(
        r.get("mca_base_param_files").unwrap().source.to_string(),
        "environment (OXMPI_MCA_mca_base_param_files)"
    );
}

#[test]
fn default_param_files_use_home_and_prefix() {
    let r = registry(sources()).unwrap();
    assert_eq!(
        r.get_list("mca_base_param_files").unwrap(),
        vec![HOME_FILE.to_string(), SYS_FILE.to_string()]
    );
    let mut s = sources();
    s.home = None;
    let r = registry(s).unwrap();
    assert_eq!(r.get_list("mca_base_param_files").unwrap(), vec![SYS_FILE]);
}

#[test]
fn framework_params_are_registered_with_the_provider() {
    let mut s = sources();
    env(&mut s, "OMPI_MCA_btl_base_verbose", "debug");
    env(&mut s, "OXMPI_MCA_btl", "^tcp");
    let r = registry(s).unwrap();
    assert_eq!(r.get_int("btl_base_verbose"), Some(80));
    assert_eq!(r.get_string("btl_base_verbose").unwrap(), "debug");
    let sel = r.get_selection("btl").unwrap();
    assert!(sel.exclude && sel.names == vec!["tcp"]);
    assert_eq!(r.get_string("btl").unwrap(), "^tcp");
    assert!(r.framework("btl").is_some());
}

#[test]
fn override_locks_and_warns() {
    let mut s = sources();
    with_file(&mut s, OVERRIDE_FILE, "btl_tcp_port = 1\n");
    env(&mut s, "OXMPI_MCA_btl_tcp_port", "3");
    let mut r = registry(s.clone()).unwrap();
    assert_eq!(r.get_int("btl_tcp_port"), Some(1));
    let w: Vec<String> = r.take_warnings().iter().map(|w| w.to_string()).collect();
    assert_eq!(
        w,
        vec!["warning: MCA parameter btl_tcp_port is locked by override (/opt/ox/etc/oxmpi-mca-params-override.conf:1); value \"3\" from environment (OXMPI_MCA_btl_tcp_port) ignored"]
    );
    let err = r.set("btl_tcp_port", "9").unwrap_err();
    assert!(matches!(err, ParamError::Locked { .. }));
    assert_eq!(r.get_int("btl_tcp_port"), Some(1));

    env(&mut s, "OXMPI_MCA_mca_base_suppress_override_warning", "1");
    let mut r = registry(s).unwrap();
    assert!(r.take_warnings().is_empty());
}

#[test]
fn set_through_api() {
    let mut r = registry(sources()).unwrap();
    r.set("btl_tcp_port", "80").unwrap();
    assert_eq!(r.get_int("btl_tcp_port"), Some(80));
    assert_eq!(r.get("btl_tcp_port").unwrap().source, Source::Api);
    assert_eq!(
        r.set("btl_tcp_port", "70000").unwrap_err().to_string(),
        "invalid value \"70000\" for MCA parameter btl_tcp_port from set: out of range, expected an integer in 0..65535"
    );
    assert!(matches!(
        r.set("btl_sm_version", "2"),
        Err(ParamError::ReadOnly { .. })
    ));
    assert!(matches!(
        r.set("nope", "2"),
        Err(ParamError::Unknown { .. })
    ));
}

#[test]
fn read_only_ignores_sources_with_a_warning() {
    let mut s = sources();
    env(&mut s, "OXMPI_MCA_btl_sm_version", "2");
    let mut r = registry(s).unwrap();
    assert_eq!(r.get_string("btl_sm_version").unwrap(), "1");
    assert_eq!(r.get("btl_sm_version").unwrap().source, Source::Default);
    let w: Vec<String> = r.take_warnings().iter().map(|w| w.to_string()).collect();
    assert_eq!(w, vec!["warning: MCA parameter btl_sm_version is read-only; value \"2\" from environment (OXMPI_MCA_btl_sm_version) ignored"]);
}

#[test]
fn duplicate_registration_is_idempotent_or_an_error() {
    let mut r = registry(sources()).unwrap();
    r.register_provider(&TEST_PROVIDER).unwrap();
    let other = [ParamDecl::new(
        "btl",
        "tcp",
        "port",
        ParamType::String,
        "",
        "x",
    )];
    assert_eq!(
        r.register(&other).unwrap_err().to_string(),
        "MCA parameter btl_tcp_port registered twice with different declarations"
    );
}

// ---------- bad input: one-line messages ----------

#[test]
fn duplicate_command_line_key_with_different_values() {
    let mut s = sources();
    s.command_line.push(("btl_tcp_port".into(), "1".into()));
    s.command_line.push(("btl_tcp_port".into(), "1".into()));
    assert!(registry(s.clone()).is_ok(), "same value twice is fine");
    s.command_line.push(("btl_tcp_port".into(), "2".into()));
    assert_eq!(
        registry(s).unwrap_err().to_string(),
        "MCA parameter btl_tcp_port given twice on the command line with different values (\"1\" and \"2\"); give it once"
    );
    // Every key, including ones this process does not know.
    let mut s = sources();
    s.command_line.push(("zzz_unknown".into(), "a".into()));
    s.command_line.push(("zzz_unknown".into(), "b".into()));
    assert!(matches!(
        registry(s),
        Err(ParamError::DuplicateCommandLine { .. })
    ));
}

#[test]
fn unparsable_value() {
    let mut s = sources();
    env(&mut s, "OXMPI_MCA_btl_sm_fifo_size", "lots");
    assert_eq!(
        registry(s).unwrap_err().to_string(),
        "invalid value \"lots\" for MCA parameter btl_sm_fifo_size from environment (OXMPI_MCA_btl_sm_fifo_size): expected a byte count like 4096, 4k, 1m or 2g"
    );
}

#[test]
fn out_of_range_value() {
    let mut s = sources();
    s.command_line.push(("btl_tcp_port".into(), "-5".into()));
    assert_eq!(
        registry(s).unwrap_err().to_string(),
        "invalid value \"-5\" for MCA parameter btl_tcp_port from command line: out of range, expected an integer in 0..65535"
    );
}

#[test]
fn unknown_enum_name() {
    let mut s = sources();
    with_file(&mut s, HOME_FILE, "btl_base_verbose = loud\n");
    assert_eq!(
        registry(s).unwrap_err().to_string(),
        "invalid value \"loud\" for MCA parameter btl_base_verbose from file (/home/u/.oxmpi/mca-params.conf:1): unknown name, expected one of -1|none, 0|error, 10|component, 20|warn, 40|info, 60|trace, 80|debug, 100|max, 0-100"
    );
}

#[test]
fn malformed_parameter_file_line() {
    let mut s = sources();
    with_file(
        &mut s,
        SYS_FILE,
        "# ok\nbtl_tcp_port = 1\nthis line is wrong\n",
    );
    assert_eq!(
        Registry::new(s).unwrap_err().to_string(),
        "malformed line 3 in parameter file /opt/ox/etc/oxmpi-mca-params.conf: \"this line is wrong\"; expected `name = value`"
    );
    let mut s = sources();
    with_file(&mut s, OVERRIDE_FILE, "= 3\n");
    assert!(matches!(
        Registry::new(s),
        Err(ParamError::MalformedLine {
            kind: "override file",
            line: 1,
            ..
        })
    ));
}

#[test]
fn malformed_and_missing_tune_files() {
    let mut s = sources();
    with_file(&mut s, "/t.conf", "--mca btl_tcp_port\n");
    s.tune_files.push("/t.conf".into());
    assert_eq!(
        Registry::new(s).unwrap_err().to_string(),
        "malformed line 1 in tune file /t.conf: \"--mca btl_tcp_port\"; expected `--mca name value` or `-x VAR[=value]` items"
    );
    let mut s = sources();
    s.tune_files.push("/nope.conf".into());
    assert_eq!(
        Registry::new(s).unwrap_err().to_string(),
        "cannot read tune file /nope.conf: No such file or directory"
    );
}

#[test]
fn negation_not_at_start() {
    let mut s = sources();
    s.command_line.push(("btl".into(), "self,^tcp".into()));
    assert_eq!(
        registry(s).unwrap_err().to_string(),
        "invalid value \"self,^tcp\" for MCA parameter btl from command line: '^' may only appear once, at the start of the list (e.g. ^tcp,openib)"
    );
}

#[test]
fn bad_value_keeps_registering_the_rest() {
    let mut s = sources();
    env(&mut s, "OXMPI_MCA_btl_tcp_port", "x");
    let mut r = Registry::new(s).unwrap();
    assert!(r.register_provider(&TEST_PROVIDER).is_err());
    assert_eq!(r.get_int("btl_tcp_port"), Some(0));
    assert_eq!(r.get_size("btl_sm_fifo_size"), Some(65536));
}

#[test]
fn unknown_environment_names() {
    let mut s = sources();
    env(&mut s, "OXMPI_MCA_btl_base_verbos", "1");
    env(&mut s, "OXMPI_MCA_completely_different_thing", "1");
    env(&mut s, "OMPI_MCA_pml_ucx_verbose", "1");
    env(&mut s, "OMPI_MCA_btl_tcp_port", "5");
    env(&mut s, "OMPI_MCA_btl_base_verbse", "5");
    s.command_line.push(("btl_tcp_prot".into(), "1".into()));
    let r = registry(s).unwrap();
    let rep = r.check_environment();
    let lines: Vec<String> = rep.unknown.iter().map(|u| u.to_string()).collect();
    assert_eq!(
        lines,
        vec![
            "--mca names unknown MCA parameter \"btl_tcp_prot\" (ignored); did you mean btl_tcp_port?",
            "environment variable OXMPI_MCA_btl_base_verbos names unknown MCA parameter \"btl_base_verbos\" (ignored); did you mean btl_base_verbose?",
            "environment variable OXMPI_MCA_completely_different_thing names unknown MCA parameter \"completely_different_thing\" (ignored)",
            "environment variable OMPI_MCA_btl_base_verbse names unknown MCA parameter \"btl_base_verbse\" (ignored); did you mean btl_base_verbose?",
        ]
    );
    assert_eq!(rep.ignored_compat, vec!["OMPI_MCA_pml_ucx_verbose"]);
    assert_eq!(r.get_int("btl_tcp_port"), Some(5));
}

#[test]
fn unknown_names_are_an_error_with_param_check_error() {
    let mut s = sources();
    s.command_line.push(("btl_tcp_prot".into(), "1".into()));
    let mut r = registry(s.clone()).unwrap();
    assert_eq!(oxmpi_base::output::check_problems(&mut r), Ok(()), "warn");
    s.command_line
        .push(("mca_base_param_check".into(), "error".into()));
    let mut r = registry(s).unwrap();
    let e = oxmpi_base::output::check_problems(&mut r).unwrap_err();
    assert_eq!(
        e,
        "--mca names unknown MCA parameter \"btl_tcp_prot\", did you mean \
         btl_tcp_port? (mca_base_param_check=error)"
    );
}

// ---------- mpirun → rank ----------

#[test]
fn child_env_carries_command_line_and_tune_values_with_provenance() {
    let mut s = sources();
    s.command_line.push(("btl_tcp_port".into(), "99".into()));
    s.command_line
        .push(("pml_ob1_unknown_here".into(), "x".into()));
    with_file(
        &mut s,
        "/t.conf",
        "--mca btl_sm_fifo_size 8k -x FOO=bar\n-x HOME_DIR\n--mca btl_sm_use_cma no # c\n",
    );
    s.tune_files.push("/t.conf".into());
    env(&mut s, "HOME_DIR", "/h");
    env(&mut s, "OXMPI_MCA_btl_sm_use_cma", "yes");
    let launcher = Registry::new(s.clone()).unwrap();
    let child = launcher.child_env();
    let get = |k: &str| child.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str());
    assert_eq!(get("OXMPI_MCA_btl_tcp_port"), Some("99"));
    assert_eq!(get("OXMPI_MCA_SOURCE_btl_tcp_port"), Some("command"));
    assert_eq!(get("OXMPI_MCA_pml_ob1_unknown_here"), Some("x"));
    assert_eq!(get("OXMPI_MCA_btl_sm_fifo_size"), Some("8k"));
    assert_eq!(
        get("OXMPI_MCA_SOURCE_btl_sm_fifo_size"),
        Some("tune:/t.conf:1")
    );
    assert_eq!(get("OXMPI_MCA_btl_sm_use_cma"), None, "env already wins");
    assert_eq!(get("FOO"), Some("bar"));
    assert_eq!(get("HOME_DIR"), Some("/h"));

    // The rank: inherits the launcher's env plus the child env, no command line.
    let mut rank = sources();
    rank.env = s.env.clone();
    rank.env.extend(child);
    let r = registry(rank).unwrap();
    let e = r.get("btl_tcp_port").unwrap();
    assert_eq!(
        (e.value.clone(), e.source.clone()),
        (Value::Int(99), Source::CommandLine)
    );
    let e = r.get("btl_sm_fifo_size").unwrap();
    assert_eq!(e.value, Value::Size(8192));
    assert_eq!(e.source.to_string(), "tune file (/t.conf:1)");
    assert_eq!(r.get_bool("btl_sm_use_cma"), Some(true));
    assert!(r
        .check_environment()
        .unknown
        .iter()
        .all(|u| u.name == "pml_ob1_unknown_here"));
}

#[test]
fn quoted_values_and_comments_in_files() {
    let mut s = sources();
    with_file(
        &mut s,
        HOME_FILE,
        "  # comment\n\nbtl_tcp_if_include = \"eth0, ib0\"\n",
    );
    let r = registry(s).unwrap();
    assert_eq!(
        r.get_list("btl_tcp_if_include").unwrap(),
        vec!["eth0", "ib0"]
    );
}

#[test]
fn value_accessors() {
    assert_eq!(Value::Bool(true).as_bool(), Some(true));
    assert_eq!(Value::Enum(3).as_int(), Some(3));
    assert_eq!(Value::Size(9).as_size(), Some(9));
    assert_eq!(Value::String("x".into()).as_str(), Some("x"));
    assert_eq!(Value::Int(1).as_str(), None);
    let l = Value::List(vec!["a".into()]);
    assert_eq!(l.as_list(), Some(&["a".to_string()][..]));
    assert!(l.as_selection().is_none());
}

#[test]
fn resolve_decl_registers_once() {
    let mut s = sources();
    env(&mut s, "OXMPI_MCA_btl_sm_fifo_size", "2m");
    let mut r = Registry::new(s).unwrap();
    let d = TEST_PARAMS[0];
    assert_eq!(r.resolve_decl(&d).unwrap().as_size(), Some(2 << 20));
    assert_eq!(r.resolve_decl(&d).unwrap().as_size(), Some(2 << 20));
    let bad = ParamDecl::new(
        "btl",
        "sm",
        "fifo_size",
        ParamType::Int { min: 0, max: 1 },
        "0",
        "x",
    );
    assert!(matches!(
        r.resolve_decl(&bad),
        Err(ParamError::DuplicateRegistration { .. })
    ));
}

proptest! {
    /// For any subset of sources setting `btl_tcp_port`, the value and source are those of
    /// the highest-precedence source present.
    #[test]
    fn precedence_property(mask in 0u8..128) {
        let mut s = sources();
        // (bit, value, expected source text), highest precedence first.
        let layers = [
            (0, 1, "override (/opt/ox/etc/oxmpi-mca-params-override.conf:1)"),
            (1, 2, "command line"),
            (2, 3, "environment (OXMPI_MCA_btl_tcp_port)"),
            (3, 4, "environment (OMPI_MCA_btl_tcp_port)"),
            (4, 5, "tune file (/t/a.conf:1)"),
            (5, 6, "file (/home/u/.oxmpi/mca-params.conf:1)"),
            (6, 7, "file (/opt/ox/etc/oxmpi-mca-params.conf:1)"),
        ];
        let on = |b: u8| mask & (1 << b) != 0;
        if on(0) { with_file(&mut s, OVERRIDE_FILE, "btl_tcp_port = 1\n"); }
        if on(1) { s.command_line.push(("btl_tcp_port".into(), "2".into())); }
        if on(2) { env(&mut s, "OXMPI_MCA_btl_tcp_port", "3"); }
        if on(3) { env(&mut s, "OMPI_MCA_btl_tcp_port", "4"); }
        if on(4) {
            with_file(&mut s, "/t/a.conf", "--mca btl_tcp_port 5\n");
            s.tune_files.push("/t/a.conf".into());
        }
        if on(5) { with_file(&mut s, HOME_FILE, "btl_tcp_port = 6\n"); }
        if on(6) { with_file(&mut s, SYS_FILE, "btl_tcp_port = 7\n"); }
        let r = registry(s).unwrap();
        let e = r.get("btl_tcp_port").unwrap();
        let (v, src) = layers
            .iter()
            .find(|(b, _, _)| on(*b))
            .map(|(_, v, s)| (*v, s.to_string()))
            .unwrap_or((0, "default".to_string()));
        prop_assert_eq!(&e.value, &Value::Int(v));
        prop_assert_eq!(e.source.to_string(), src);
    }

    #[test]
    fn list_roundtrip(items in proptest::collection::vec("[a-z0-9_./-]{1,8}", 0..8)) {
        prop_assert_eq!(parse_list(&items.join(",")), items.clone());
        prop_assert_eq!(parse_list(&items.join(" , ")), items);
    }

    #[test]
    fn enum_names_and_numbers_agree(i in 0usize..8) {
        let (n, name) = VERBOSE_LEVELS[i];
        prop_assert_eq!(VERBOSE_TYPE.parse(name), Ok(Value::Enum(n)));
        prop_assert_eq!(VERBOSE_TYPE.parse(&n.to_string()), Ok(Value::Enum(n)));
        prop_assert_eq!(VERBOSE_TYPE.parse(&name.to_uppercase()), Ok(Value::Enum(n)));
    }
}

/// The typed readers return the declared default when nothing sets a parameter, and
/// `explicit` tells that nothing did; the default is written once, in the declaration.
#[test]
fn typed_readers_fall_back_to_the_declared_default() {
    use oxmpi_base::params::{self, ParamDecl, ParamType};
    static SZ: ParamDecl = ParamDecl::new(
        "xtest",
        "reader",
        "size_only_declared",
        ParamType::Size,
        "64k",
        "test",
    );
    static N: ParamDecl = ParamDecl::new(
        "xtest",
        "reader",
        "int_only_declared",
        ParamType::Int { min: -10, max: 10 },
        "-7",
        "test",
    );
    static B: ParamDecl = ParamDecl::new(
        "xtest",
        "reader",
        "bool_only_declared",
        ParamType::Bool,
        "true",
        "test",
    );
    static L: ParamDecl = ParamDecl::new(
        "xtest",
        "reader",
        "list_only_declared",
        ParamType::List,
        "a,b",
        "test",
    );
    assert_eq!(params::size(&SZ), 64 << 10);
    assert_eq!(params::int(&N), -7);
    assert!(params::flag(&B));
    assert_eq!(params::list(&L), ["a", "b"]);
    assert_eq!(params::explicit(&SZ), None);
    assert_eq!(params::declared(&SZ).as_size(), Some(64 << 10));
}
