//! `oxmpi-info`: version, frameworks, components and MCA parameters (Open MPI's `ompi_info`).
//!
//! Values are resolved by the same registry code a launched rank uses
//! ([`oxmpi_base::params::Registry`]), from the same sources: the prefix's `etc/` files (the
//! prefix is found from this executable's path), `$HOME/.oxmpi/mca-params.conf`, the
//! environment, and `--mca` given to `oxmpi-info` itself.
//!
//! Exit status: 0 on success, 1 for a parameter error or an unknown framework/component,
//! 2 for a usage error.

use oxmpi_base::params::{level_name, Entry, ParamType, Provider, Registry, Sources};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

mod tools;

/// Every crate's MCA declarations. To add a crate's frameworks and parameters: give the crate
/// a `pub static PROVIDER: oxmpi_base::params::Provider`, depend on it in
/// `bin/info/Cargo.toml`, and add `&that_crate::PROVIDER` to this list.
static PROVIDERS: &[&Provider] = &[
    &oxmpi_base::PROVIDER,
    &oxmpi_engine::PROVIDER,
    &oxmpi_coll::PROVIDER,
    &oxmpi_runtime::PROVIDER,
];

const VERSION: &str = env!("CARGO_PKG_VERSION");
const CENTER: usize = 24;
const SEPARATOR: &str = "---------------------------------------------------";
const BOOL_VALUES: &str = "0|f|false|disabled|no|n|off, 1|t|true|enabled|yes|y|on";

const USAGE: &str = "\
usage: oxmpi-info [--param <framework|all> <component|all>] [--level 1-9] [--all]
                  [--parsable] [--mca <name> <value>]... [--ofi] [--version] [--help]

  (no options)            version, build configuration, frameworks and components
  --param FW COMP         parameters of a framework/component ('all' for every one)
  --level N               only parameters of level <= N (1-9, default 1)
  --all                   same as --param all all --level 9
  --parsable              machine-readable lines (mca:<fw>:<comp>:param:<name>:...)
  --mca NAME VALUE        set a parameter as on mpirun's command line
  --cvars                 the MPI tools interface's control variables (MPI_T_cvar_*)
                          of level <= --level (default 9): type, verbosity, scope, value
  --pvars                 its performance variables (MPI_T_pvar_*): class, type, mode
  --ofi                   the libfabric providers the ofi btl could use here
";

#[derive(Debug, Default)]
struct Opts {
    param: Option<(String, String)>,
    level: u8,
    parsable: bool,
    mca: Vec<(String, String)>,
    help: bool,
    version: bool,
    cvars: bool,
    pvars: bool,
    level_given: bool,
    ofi: bool,
}

fn parse_args(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts {
        level: 1,
        ..Opts::default()
    };
    let mut level_given = false;
    let mut i = 0;
    let need = |i: usize, n: usize, what: &str| -> Result<(), String> {
        if i + n < args.len() {
            Ok(())
        } else {
            Err(format!("{what} needs {n} argument(s)"))
        }
    };
    while i < args.len() {
        let a = args[i].as_str();
        let a = a.strip_prefix("--").or_else(|| a.strip_prefix('-'));
        match a {
            Some("param") => {
                need(i, 2, "--param")?;
                o.param = Some((args[i + 1].clone(), args[i + 2].clone()));
                i += 2;
            }
            Some("level") => {
                need(i, 1, "--level")?;
                let v = &args[i + 1];
                o.level = v
                    .parse::<u8>()
                    .ok()
                    .filter(|l| (1..=9).contains(l))
                    .ok_or_else(|| format!("invalid --level \"{v}\": expected 1-9"))?;
                level_given = true;
                i += 1;
            }
            Some("all" | "a") => {
                o.param = Some(("all".into(), "all".into()));
                if !level_given {
                    o.level = 9;
                }
            }
            Some("parsable" | "parseable") => o.parsable = true,
            Some("mca") => {
                need(i, 2, "--mca")?;
                o.mca.push((args[i + 1].clone(), args[i + 2].clone()));
                i += 2;
            }
            Some("help" | "h") => o.help = true,
            Some("cvars") => o.cvars = true,
            Some("pvars") => o.pvars = true,
            Some("ofi") => o.ofi = true,
            Some("version" | "V") => o.version = true,
            _ => return Err(format!("unknown argument \"{}\"", args[i])),
        }
        i += 1;
    }
    o.level_given = level_given;
    Ok(o)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match parse_args(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("oxmpi-info: {e}");
            eprint!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    if opts.help {
        print!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    if opts.version {
        println!("oxmpi-info (oxmpi) {VERSION}");
        return ExitCode::SUCCESS;
    }
    if opts.ofi {
        return ofi_providers();
    }
    match run(&opts) {
        Ok(text) => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("oxmpi-info: {e}");
            ExitCode::from(1)
        }
    }
}

/// Prints the providers `fi_getinfo` offers the ofi btl (tagged messages, reliable
/// datagrams), best first, each with its fabric and whether it is a software one (used by
/// default only when the btl list names ofi).
fn ofi_providers() -> ExitCode {
    match oxmpi_engine::ofi_providers() {
        Ok(list) if list.is_empty() => println!("ofi: libfabric offers no provider here"),
        Ok(list) => {
            println!(
                "ofi: libfabric providers (fi_getinfo, FI_EP_RDM with FI_TAGGED), best first:"
            );
            for (prov, fabric) in list {
                println!("  {prov:<16} fabric {fabric}");
            }
        }
        Err(e) => println!("ofi: not available ({e})"),
    }
    ExitCode::SUCCESS
}

fn build_registry(opts: &Opts) -> Result<Registry, String> {
    let mut sources = Sources::from_process();
    sources.command_line = opts.mca.clone();
    let mut reg = Registry::new(sources).map_err(|e| e.to_string())?;
    for p in PROVIDERS {
        reg.register_provider(p).map_err(|e| e.to_string())?;
    }
    for w in reg.take_warnings() {
        eprintln!("oxmpi-info: {w}");
    }
    let report = reg.check_environment();
    for u in &report.unknown {
        eprintln!("oxmpi-info: warning: {u}");
    }
    if reg.get_int("mca_base_verbose").unwrap_or(0) >= 40 {
        for var in &report.ignored_compat {
            eprintln!("oxmpi-info: ignoring {var}: not a parameter of oxmpi");
        }
    }
    Ok(reg)
}

/// Framework → its groups (components, and `base`), from declared frameworks and parameters.
fn catalog(reg: &Registry) -> BTreeMap<String, BTreeSet<String>> {
    let mut cat: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for fw in reg.frameworks() {
        let e = cat.entry(fw.name.to_string()).or_default();
        for c in fw.components {
            e.insert(c.name.to_string());
        }
    }
    for e in reg.entries() {
        cat.entry(e.decl.framework.to_string())
            .or_default()
            .insert(e.decl.group().to_string());
    }
    cat
}

/// Components to list for a framework: its declared components, or `base` alone when it has
/// none (parameter-only frameworks such as `mca`).
fn components(reg: &Registry, cat: &BTreeMap<String, BTreeSet<String>>, fw: &str) -> Vec<String> {
    match reg.framework(fw) {
        Some(f) if !f.components.is_empty() => {
            f.components.iter().map(|c| c.name.to_string()).collect()
        }
        _ => cat
            .get(fw)
            .map(|g| g.iter().cloned().collect())
            .unwrap_or_default(),
    }
}

fn label(text: &str) -> String {
    format!("{text:>CENTER$}: ")
}

fn run(opts: &Opts) -> Result<String, String> {
    let reg = build_registry(opts)?;
    if opts.cvars || opts.pvars {
        let level = if opts.level_given { opts.level } else { 9 };
        let mut out = String::new();
        if opts.cvars {
            out += &tools::cvars(&reg, level, &oxmpi_runtime::PROVIDER);
        }
        if opts.pvars {
            out += &tools::pvars(level);
        }
        return Ok(out);
    }
    render(&reg, opts, terminal_width())
}

/// `MCA <fw> <group>`, or `MCA (-) <fw> <group>` when the framework's selection list excludes
/// that component (as `ompi_info` marks it).
fn group_label(reg: &Registry, fw: &str, group: &str) -> String {
    let excluded = group != "base" && reg.get_selection(fw).is_some_and(|sel| !sel.allows(group));
    if excluded {
        label(&format!("MCA (-) {fw} {group}"))
    } else {
        label(&format!("MCA {fw} {group}"))
    }
}

/// Renders the requested report from a built registry (`width`: wrap at this terminal width).
fn render(reg: &Registry, opts: &Opts, width: Option<usize>) -> Result<String, String> {
    let cat = catalog(reg);
    let mut out = String::new();
    let Some((fw_arg, comp_arg)) = &opts.param else {
        summary(reg, &cat, opts.parsable, &mut out);
        return Ok(out);
    };
    let fws: Vec<String> = if fw_arg == "all" {
        cat.keys().cloned().collect()
    } else if cat.contains_key(fw_arg) {
        vec![fw_arg.clone()]
    } else {
        return Err(format!(
            "unknown framework \"{fw_arg}\"; known frameworks: {}",
            cat.keys().cloned().collect::<Vec<_>>().join(", ")
        ));
    };
    if comp_arg != "all" {
        let known = fws.iter().any(|f| cat[f].contains(comp_arg));
        if !known {
            let mut all: BTreeSet<&String> = BTreeSet::new();
            for f in &fws {
                all.extend(cat[f].iter());
            }
            return Err(format!(
                "unknown component \"{comp_arg}\" of framework {fw_arg}; known components: {}",
                all.into_iter().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    for fw in &fws {
        let comps = components(reg, &cat, fw);
        if !opts.parsable {
            for c in comps.iter().filter(|c| comp_arg == "all" || *c == comp_arg) {
                out.push_str(&label(&format!("MCA {fw}")));
                out.push_str(&format!("{c} (oxmpi v{VERSION})\n"));
            }
        }
        // Groups: base first, then components in order.
        let mut groups: Vec<String> = vec!["base".to_string()];
        groups.extend(cat[fw].iter().filter(|g| *g != "base").cloned());
        for g in groups {
            if comp_arg != "all" && g != *comp_arg {
                continue;
            }
            let entries: Vec<&Entry> = reg
                .entries()
                .filter(|e| {
                    e.decl.framework == fw
                        && e.decl.group() == g
                        && e.decl.level.clamp(1, 9) <= opts.level
                })
                .collect();
            if entries.is_empty() {
                continue;
            }
            if opts.parsable {
                for e in entries {
                    parsable_entry(e, &mut out);
                }
            } else {
                let lab = group_label(reg, fw, &g);
                out.push_str(&format!("{lab}{SEPARATOR}\n"));
                for e in entries {
                    pretty_entry(e, &lab, width, &mut out);
                }
            }
        }
    }
    Ok(out)
}

fn summary(
    reg: &Registry,
    cat: &BTreeMap<String, BTreeSet<String>>,
    parsable: bool,
    out: &mut String,
) {
    let prefix = reg
        .sources()
        .prefix
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "(unknown)".into());
    let files = reg
        .get_list("mca_base_param_files")
        .unwrap_or_default()
        .join(",");
    let arch = format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS);
    let build = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let rows: [(&str, &str, String); 7] = [
        ("Package", "package", format!("oxmpi {VERSION}")),
        ("oxmpi", "version:full", VERSION.to_string()),
        ("Prefix", "path:prefix", prefix),
        ("Configured architecture", "config:arch", arch),
        ("Build mode", "config:build", build.to_string()),
        (
            "C bindings",
            "bindings:c",
            "yes (libmpi.so.12, MPICH ABI)".to_string(),
        ),
        ("Parameter files", "config:param_files", files),
    ];
    for (lab, key, val) in rows {
        if parsable {
            out.push_str(&format!("{key}:{val}\n"));
        } else {
            out.push_str(&format!("{}{val}\n", label(lab)));
        }
    }
    for fw in cat.keys() {
        for c in components(reg, cat, fw) {
            if parsable {
                out.push_str(&format!("mca:{fw}:{c}:version:oxmpi:{VERSION}\n"));
            } else {
                out.push_str(&format!(
                    "{}{c} (oxmpi v{VERSION})\n",
                    label(&format!("MCA {fw}"))
                ));
            }
        }
    }
}

fn valid_values(ty: &ParamType) -> Option<String> {
    match ty {
        ParamType::Bool => Some(BOOL_VALUES.to_string()),
        ParamType::Enum { .. } => Some(ty.describe_valid()),
        ParamType::Int { min, max } if !(*min == i64::MIN && *max == i64::MAX) => {
            Some(format!("{min}-{max}"))
        }
        _ => None,
    }
}

fn pretty_entry(e: &Entry, lab: &str, width: Option<usize>, out: &mut String) {
    let d = &e.decl;
    let mut head = format!(
        "parameter \"{}\" (current value: \"{}\", data source: {}, level: {} {}, type: {}",
        d.full_name(),
        e.rendered(),
        e.source,
        d.level.clamp(1, 9),
        level_name(d.level),
        d.ty.ompi_name()
    );
    if d.read_only {
        head.push_str(", read-only");
    }
    head.push(')');
    let indent = " ".repeat(CENTER + 2);
    push_wrapped(out, lab, &head, width);
    push_wrapped(out, &indent, &d.help_text(), width);
    if let Some(v) = valid_values(&d.ty) {
        push_wrapped(out, &indent, &format!("Valid values: {v}"), width);
    }
}

/// Writes `first` + `text`, wrapped at `width` (continuation lines indented like the label)
/// when writing to a terminal, unwrapped otherwise.
fn push_wrapped(out: &mut String, first: &str, text: &str, width: Option<usize>) {
    let Some(width) = width else {
        out.push_str(first);
        out.push_str(text);
        out.push('\n');
        return;
    };
    let room = width.saturating_sub(CENTER + 2).max(20);
    let mut line = String::new();
    let mut lead = first.to_string();
    for word in text.split(' ') {
        if !line.is_empty() && line.len() + 1 + word.len() > room {
            out.push_str(&lead);
            out.push_str(&line);
            out.push('\n');
            line.clear();
            lead = " ".repeat(CENTER + 2);
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&lead);
    out.push_str(&line);
    out.push('\n');
}

fn parsable_entry(e: &Entry, out: &mut String) {
    let d = &e.decl;
    let p = format!("mca:{}:{}:param:{}", d.framework, d.group(), d.full_name());
    let mut line = |k: &str, v: &str| out.push_str(&format!("{p}:{k}:{v}\n"));
    line("value", &e.rendered());
    line("source", &e.source.to_string());
    line(
        "status",
        if d.read_only {
            "read-only"
        } else {
            "writeable"
        },
    );
    line("level", &d.level.clamp(1, 9).to_string());
    line("help", &d.help_text());
    if let ParamType::Enum { values, .. } = d.ty {
        for (n, s) in values {
            line("enumerator", &format!("value:{n}:{s}"));
        }
    } else if let ParamType::Bool = d.ty {
        line("enumerator", "value:0:false");
        line("enumerator", "value:1:true");
    }
    line("deprecated", "no");
    line("type", d.ty.ompi_name());
    line("disabled", "false");
}

/// The terminal width when stdout is a terminal (wrap), `None` otherwise (never wrap).
fn terminal_width() -> Option<usize> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    // SAFETY: winsize is plain data; TIOCGWINSZ only writes a winsize into the pointer we pass,
    // which points at a live, properly aligned local.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: see above; fd 1 is checked to be a terminal.
    let rc = unsafe { libc::ioctl(1, libc::TIOCGWINSZ, &mut ws) };
    if rc == 0 && ws.ws_col > 0 {
        Some(usize::from(ws.ws_col))
    } else {
        Some(78)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxmpi_base::params::{Component, Files, Framework, ParamDecl, Sources};

    static BTL: Provider = Provider {
        name: "test",
        frameworks: &[Framework {
            name: "btl",
            description: "byte transfer layer",
            components: &[
                Component {
                    name: "sm",
                    description: "shared memory",
                },
                Component {
                    name: "tcp",
                    description: "TCP",
                },
            ],
        }],
        params: &[
            ParamDecl::new(
                "btl",
                "sm",
                "fifo_size",
                ParamType::Size,
                "64k",
                "Size of each FIFO",
            )
            .level(4),
            ParamDecl::new(
                "btl",
                "tcp",
                "if_include",
                ParamType::List,
                "",
                "Interfaces to use",
            ),
        ],
    };

    fn reg(env: &[(&str, &str)]) -> Registry {
        let mut r = Registry::new(Sources {
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            files: Files::Memory(Default::default()),
            ..Sources::default()
        })
        .unwrap();
        r.register_provider(&BTL).unwrap();
        r
    }

    fn opts(args: &[&str]) -> Opts {
        parse_args(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn framework_with_components_and_exclusion() {
        let r = reg(&[
            ("OXMPI_MCA_btl", "^tcp"),
            ("OXMPI_MCA_btl_sm_fifo_size", "1m"),
        ]);
        let out = render(&r, &opts(&["--param", "btl", "all", "--level", "9"]), None).unwrap();
        assert_eq!(
            out,
            r#"                 MCA btl: sm (oxmpi v@V@)
                 MCA btl: tcp (oxmpi v@V@)
            MCA btl base: ---------------------------------------------------
            MCA btl base: parameter "btl" (current value: "^tcp", data source: environment (OXMPI_MCA_btl), level: 2 user/detail, type: string)
                          Default selection set of components for the btl framework (<none> means use all components that can be found)
            MCA btl base: parameter "btl_base_verbose" (current value: "error", data source: default, level: 8 dev/detail, type: int)
                          Verbosity level for the btl framework (default: 0)
                          Valid values: -1|none, 0|error, 10|component, 20|warn, 40|info, 60|trace, 80|debug, 100|max, 0-100
              MCA btl sm: ---------------------------------------------------
              MCA btl sm: parameter "btl_sm_fifo_size" (current value: "1048576", data source: environment (OXMPI_MCA_btl_sm_fifo_size), level: 4 tuner/basic, type: size_t)
                          Size of each FIFO
         MCA (-) btl tcp: ---------------------------------------------------
         MCA (-) btl tcp: parameter "btl_tcp_if_include" (current value: "", data source: default, level: 1 user/basic, type: string)
                          Interfaces to use
"#
            .replace("@V@", VERSION)
        );
        let out = render(&r, &opts(&["--param", "btl", "tcp", "--parsable"]), None).unwrap();
        assert_eq!(
            out,
            "mca:btl:tcp:param:btl_tcp_if_include:value:
mca:btl:tcp:param:btl_tcp_if_include:source:default
mca:btl:tcp:param:btl_tcp_if_include:status:writeable
mca:btl:tcp:param:btl_tcp_if_include:level:1
mca:btl:tcp:param:btl_tcp_if_include:help:Interfaces to use
mca:btl:tcp:param:btl_tcp_if_include:deprecated:no
mca:btl:tcp:param:btl_tcp_if_include:type:string
mca:btl:tcp:param:btl_tcp_if_include:disabled:false
"
        );
        let summary = render(&r, &opts(&["--parsable"]), None).unwrap();
        assert!(summary.ends_with(
            &"mca:btl:sm:version:oxmpi:@V@\nmca:btl:tcp:version:oxmpi:@V@\nmca:mca:base:version:oxmpi:@V@\n"
                .replace("@V@", VERSION)
        ));
        assert_eq!(
            render(&r, &opts(&["--param", "btl", "openib"]), None).unwrap_err(),
            "unknown component \"openib\" of framework btl; known components: base, sm, tcp"
        );
        assert_eq!(
            render(&r, &opts(&["--param", "pml", "all"]), None).unwrap_err(),
            "unknown framework \"pml\"; known frameworks: btl, mca"
        );
    }

    #[test]
    fn wraps_only_with_a_width() {
        let lab = label("MCA x base");
        let text = "one two three four five six seven eight nine ten eleven twelve";
        let mut out = String::new();
        push_wrapped(&mut out, &lab, text, None);
        assert_eq!(out, format!("{lab}{text}\n"));
        let mut out = String::new();
        push_wrapped(&mut out, &lab, text, Some(CENTER + 2 + 20));
        let indent = " ".repeat(CENTER + 2);
        assert_eq!(
            out,
            format!("{lab}one two three four\n{indent}five six seven eight\n{indent}nine ten eleven\n{indent}twelve\n")
        );
        assert!(out.lines().all(|l| l.len() <= CENTER + 2 + 20));
    }
}
