//! Verbose output: formatting, level checks, sinks, warn-once. One test drives the global
//! state (sink, process name, registry) so that nothing races.

use oxmpi_base::output::{self, format_json, format_text, Format, Sink, Stream};
use oxmpi_base::params::{self, Files, ParamDecl, ParamType, Provider, Sources};
use oxmpi_base::{verbose, warn_once};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

#[test]
fn text_and_json_lines() {
    assert_eq!(format_text("n1", 42, None, "hello"), "[n1:00042] hello");
    assert_eq!(
        format_text("n1", 1234567, Some(("4711", 3)), "hi"),
        "[n1:1234567] [4711,3] hi"
    );
    assert_eq!(
        format_json("n1", 7, Some(("j", 0)), Some("btl"), 40, "a \"q\"\n\u{1}"),
        r#"{"host":"n1","pid":7,"jobid":"j","rank":0,"framework":"btl","level":40,"msg":"a \"q\"\n\u0001"}"#
    );
    assert_eq!(
        format_json("n1", 7, None, None, 0, "x"),
        r#"{"host":"n1","pid":7,"level":0,"msg":"x"}"#
    );
}

#[test]
fn sink_parsing() {
    assert!(matches!(Sink::parse("stderr"), Some(Sink::Stderr)));
    assert!(matches!(Sink::parse("stdout"), Some(Sink::Stdout)));
    assert!(matches!(Sink::parse("syslog"), Some(Sink::Syslog)));
    assert!(matches!(Sink::parse("file:/x/y"), Some(Sink::File(p)) if p.to_str() == Some("/x/y")));
    assert!(Sink::parse("file:").is_none());
    assert!(Sink::parse("printer").is_none());
}

#[test]
fn process_name_from_launcher_environment() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    };
    assert_eq!(
        output::name_from_env(env(&[
            ("OXMPI_JOBID", "4711"),
            ("OMPI_COMM_WORLD_RANK", "3"),
            ("PMI_JOBID", "other"),
            ("PMI_RANK", "9"),
        ])),
        Some(("4711".to_string(), 3))
    );
    // PMI spellings (another launcher).
    assert_eq!(
        output::name_from_env(env(&[("PMI_JOBID", "17.0"), ("PMI_RANK", "1")])),
        Some(("17.0".to_string(), 1))
    );
    // Incomplete or malformed: no name.
    assert_eq!(output::name_from_env(env(&[("OXMPI_JOBID", "1")])), None);
    assert_eq!(output::name_from_env(env(&[("PMI_RANK", "1")])), None);
    assert_eq!(
        output::name_from_env(env(&[("OXMPI_JOBID", "1"), ("PMI_RANK", "x")])),
        None
    );
    assert_eq!(
        output::name_from_env(env(&[("OXMPI_JOBID", ""), ("PMI_RANK", "0")])),
        None
    );
}

static COUNT: AtomicUsize = AtomicUsize::new(0);
fn side_effect() -> usize {
    COUNT.fetch_add(1, Ordering::Relaxed)
}

static BTL: Stream = Stream::new("btl");
static PML: Stream = Stream::new("pml");
static OSC: Stream = Stream::new("osc");

fn warn_here() {
    warn_once!("repeated warning {}", 1);
}

#[test]
fn global_streams_sinks_and_warn_once() {
    // Verbosity comes from the registry: Open MPI spellings work.
    let sources = Sources {
        env: vec![
            ("OMPI_MCA_btl_base_verbose".into(), "debug".into()),
            ("OXMPI_MCA_pml_base_verbose".into(), "100".into()),
            ("OXMPI_MCA_ras_base_verbose".into(), "loud".into()),
        ],
        command_line: vec![("oob_tcp_timeout".into(), "false".into())],
        prefix: Some("/opt/ox".into()),
        files: Files::Memory(
            [(
                "/opt/ox/etc/oxmpi-mca-params-override.conf".into(),
                "oob_tcp_timeout = true\n".to_string(),
            )]
            .into(),
        ),
        ..Sources::default()
    };
    assert!(params::init_global(sources).unwrap());
    assert_eq!(BTL.verbosity(), 80);
    assert_eq!(PML.verbosity(), 100);
    assert_eq!(OSC.verbosity(), 0, "default is error (0)");
    // A write to the registry reaches the streams that read their level before once
    // reconfigured (what the tools interface does after MPI_Init).
    params::with_global(|r| {
        r.set("osc_base_verbose", "info").unwrap();
        assert_eq!(OSC.verbosity(), 0, "not re-read by itself");
        output::reconfigure(r);
    })
    .unwrap();
    assert_eq!(OSC.verbosity(), 40);
    params::with_global(|r| {
        r.set("osc_base_verbose", "error").unwrap();
        output::reconfigure(r);
    })
    .unwrap();
    assert_eq!(OSC.verbosity(), 0);
    assert_eq!(
        params::global()
            .unwrap()
            .get("btl_base_verbose")
            .unwrap()
            .source
            .to_string(),
        "environment (OMPI_MCA_btl_base_verbose)"
    );

    let buf = Arc::new(Mutex::new(Vec::new()));
    output::set_sink(Sink::Memory(buf.clone()), Format::Text);

    // Prints iff verbosity >= level; arguments are not evaluated otherwise.
    verbose!(BTL, 80, "at debug {}", side_effect());
    verbose!(BTL, 81, "too chatty {}", side_effect());
    verbose!(OSC, 1, "osc {}", side_effect());
    verbose!(OSC, 0, "osc error-level");
    assert_eq!(COUNT.load(Ordering::Relaxed), 1);
    BTL.set_verbosity(-1);
    verbose!(BTL, 0, "none silences even level 0");

    let host = output::hostname();
    let pid = std::process::id();
    {
        let lines = buf.lock().unwrap();
        assert_eq!(
            *lines,
            vec![
                format!("[{host}:{pid:05}] at debug 0"),
                format!("[{host}:{pid:05}] osc error-level"),
            ]
        );
    }

    // Process name once known; JSON lines.
    output::set_process_name("17", 2);
    output::set_sink(Sink::Memory(buf.clone()), Format::Json);
    verbose!(PML, 5, "json {}", "line");
    assert_eq!(
        buf.lock().unwrap().last().unwrap(),
        &format!(
            r#"{{"host":"{host}","pid":{pid},"jobid":"17","rank":2,"framework":"pml","level":5,"msg":"json line"}}"#
        )
    );

    // Errors do not depend on verbosity; warn-once prints one line per call site / key.
    output::set_sink(Sink::Memory(buf.clone()), Format::Text);
    buf.lock().unwrap().clear();
    output::error(format_args!("must see"));
    for _ in 0..3 {
        warn_here();
        output::warn_once_key("peer 3", format_args!("peer 3 slow"));
    }
    assert_eq!(
        *buf.lock().unwrap(),
        vec![
            format!("[{host}:{pid:05}] [17,2] must see"),
            format!("[{host}:{pid:05}] [17,2] repeated warning 1"),
            format!("[{host}:{pid:05}] [17,2] peer 3 slow"),
        ]
    );
    assert_eq!(output::suppressed_warnings(), 4);

    // Messages while the registry is locked (even by this thread) do not deadlock: an
    // unread stream decides with the default and reads its parameter later.
    static COLL: Stream = Stream::new("coll");
    {
        let _held = params::global().unwrap();
        verbose!(COLL, 0, "while locked");
        verbose!(COLL, 1, "not shown");
    }
    assert_eq!(COLL.verbosity(), 0);
    assert_eq!(
        buf.lock().unwrap().last().unwrap(),
        &format!("[{host}:{pid:05}] [17,2] while locked")
    );

    // Parameter problems users must see, and ignored OMPI_MCA_ names at mca_base_verbose 40.
    buf.lock().unwrap().clear();
    let mut reg = params::Registry::new(Sources {
        env: vec![
            ("OXMPI_MCA_mca_base_verbos".into(), "1".into()),
            ("OXMPI_MCA_mca_base_verbose".into(), "info".into()),
            ("OMPI_MCA_btl_openib_if_include".into(), "mlx5_0".into()),
        ],
        files: Files::Memory(Default::default()),
        ..Sources::default()
    })
    .unwrap();
    output::report_problems(&mut reg);
    assert_eq!(
        *buf.lock().unwrap(),
        vec![
            format!("[{host}:{pid:05}] [17,2] warning: environment variable OXMPI_MCA_mca_base_verbos names unknown MCA parameter \"mca_base_verbos\" (ignored); did you mean mca_base_verbose?"),
            format!("[{host}:{pid:05}] [17,2] mca: base: ignoring OMPI_MCA_btl_openib_if_include: not a parameter of oxmpi"),
        ]
    );
    output::MCA.set_verbosity(0);

    // Registering in the global registry prints what was ignored because the override file
    // locks it; a stream whose verbosity value is invalid says so once and uses the default.
    buf.lock().unwrap().clear();
    static OOB: Provider = Provider {
        name: "test",
        frameworks: &[],
        params: &[ParamDecl::new(
            "oob",
            "tcp",
            "timeout",
            ParamType::Bool,
            "false",
            "secs",
        )],
    };
    params::register_global(&OOB).unwrap();
    static RAS: Stream = Stream::new("ras");
    verbose!(RAS, 0, "ras at error level");
    verbose!(RAS, 0, "ras again");
    assert_eq!(
        *buf.lock().unwrap(),
        vec![
            format!("[{host}:{pid:05}] [17,2] warning: MCA parameter oob_tcp_timeout is locked by override (/opt/ox/etc/oxmpi-mca-params-override.conf:1); value \"false\" from command line ignored"),
            format!("[{host}:{pid:05}] [17,2] warning: invalid value \"loud\" for MCA parameter ras_base_verbose from environment (OXMPI_MCA_ras_base_verbose): unknown name, expected one of -1|none, 0|error, 10|component, 20|warn, 40|info, 60|trace, 80|debug, 100|max, 0-100; using the default"),
            format!("[{host}:{pid:05}] [17,2] ras at error level"),
            format!("[{host}:{pid:05}] [17,2] ras again"),
        ]
    );
    assert_eq!(
        params::global().unwrap().get_bool("oob_tcp_timeout"),
        Some(true)
    );

    // File sink, configured through the parameters.
    let dir = std::env::temp_dir().join(format!("oxmpi-output-test-{pid}"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("out.log");
    {
        let mut reg = params::global().unwrap();
        reg.set("mca_base_output", &format!("file:{}", file.display()))
            .unwrap();
        output::configure(&mut reg);
    }
    verbose!(PML, 1, "to file");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(text, format!("[{host}:{pid:05}] [17,2] to file\n"));
}
