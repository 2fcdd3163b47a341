//! `oxmpi-server`: the name server of `MPI_Publish_name`/`MPI_Lookup_name` across jobs,
//! like Open MPI's `ompi-server`. It listens on a TCP port, reports its URI with
//! `--report-uri -|+|FILE` (standard output, standard error, or a file written whole),
//! and serves the names of every job started with `mpirun --ompi-server URI` (or
//! `file:FILE`) until it is stopped. The protocol is `oxmpi_wire::names`; each client
//! connection is served by its own thread.

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use oxmpi_wire::names::{random_token, Session, Table, Uri};

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

/// Serves one client until it closes (or fails its hello).
fn serve(sock: TcpStream, table: &Mutex<Table>) -> std::io::Result<()> {
    let mut out = sock.try_clone()?;
    let mut session = Session::default();
    for line in BufReader::new(sock).lines() {
        let line = line?;
        let reply = table
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .handle(&mut session, &line);
        out.write_all(reply.encode().as_bytes())?;
        if reply == oxmpi_wire::names::Reply::Denied {
            break;
        }
    }
    Ok(())
}

fn run(args: &[String]) -> Result<(), String> {
    let a = parse(args)?;
    let listener = TcpListener::bind((Ipv4Addr::UNSPECIFIED, a.port))
        .map_err(|e| format!("cannot listen on TCP port {}: {e}", a.port))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let uri = Uri {
        host: oxmpi_base::output::hostname().to_string(),
        addrs: oxmpi_base::net::interfaces()
            .into_iter()
            .map(|i| i.addr)
            .filter(|a| !a.is_loopback())
            .collect(),
        port,
        token: random_token()?,
    };
    let text = format!("{uri}\n");
    match a.report.as_deref() {
        Some("-") => {
            print!("{text}");
            let _ = std::io::stdout().flush();
        }
        Some("+") => eprint!("{text}"),
        Some(file) => {
            // Written whole under another name, then renamed: a reader never sees half.
            let tmp = format!("{file}.tmp{}", std::process::id());
            std::fs::write(&tmp, &text)
                .and_then(|_| std::fs::rename(&tmp, file))
                .map_err(|e| format!("--report-uri {file}: {e}"))?;
        }
        None => {}
    }
    let table = Arc::new(Mutex::new(Table::new(uri.token)));
    for sock in listener.incoming() {
        let Ok(sock) = sock else { continue };
        let table = table.clone();
        std::thread::spawn(move || {
            let _ = serve(sock, &table);
        });
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = run(&args) {
        eprintln!("oxmpi-server: {e}");
        std::process::exit(1);
    }
}
