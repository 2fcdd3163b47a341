//! `oxmpi-server`: the name server of `MPI_Publish_name`/`MPI_Lookup_name` across jobs,
//! like Open MPI's `ompi-server`. It listens on a TCP port, reports its URI with
//! `--report-uri -|+|FILE` (standard output, standard error, or a file written whole),
//! and serves the names of every job started with `mpirun --ompi-server URI` (or
//! `file:FILE`) until it is stopped. The server itself is `oxmpi_runtime::names` (which
//! `mpirun --report-uri` runs too).

use oxmpi_runtime::names::{report_uri, NameServer};

const USAGE: &str = "usage: oxmpi-server [--report-uri -|+|FILE] [--port N]
  --report-uri W   write the server's URI to standard output (-), standard error (+) or
                   the file W; pass it to mpirun --ompi-server (or file:W)
  --port N         listen on TCP port N (default: any free port)
The server runs until it is stopped (Ctrl-C, kill).";

/// The command line.
struct Args {
    report: Option<String>,
    port: u16,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut a = Args {
        report: None,
        port: 0,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (arg.as_str(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match name.trim_start_matches('-') {
            "report-uri" => a.report = Some(value()?),
            "port" => {
                let v = value()?;
                a.port = v
                    .parse()
                    .map_err(|_| format!("--port {v}: expected a TCP port number"))?;
            }
            "h" | "help" => return Err(USAGE.to_string()),
            _ => return Err(format!("unknown option {arg}\n{USAGE}")),
        }
    }
    Ok(a)
}

fn run(args: &[String]) -> Result<(), String> {
    let a = parse(args)?;
    let server = NameServer::bind(a.port)?;
    if let Some(w) = a.report.as_deref() {
        report_uri(server.uri(), w)?;
    }
    server.serve();
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = run(&args) {
        eprintln!("oxmpi-server: {e}");
        std::process::exit(1);
    }
}
