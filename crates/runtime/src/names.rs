//! The name server of `MPI_Publish_name`/`MPI_Lookup_name` across jobs (Open MPI's
//! `ompi-server`): a TCP listener whose clients speak `oxmpi_wire::names`, each served by
//! its own thread. The standalone `oxmpi-server` runs one until it is stopped;
//! `mpirun --report-uri` runs one for as long as the job, gives its ranks its URI and
//! reports it, so other jobs reach it with `mpirun --ompi-server`.

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use oxmpi_wire::names::{random_token, Reply, Session, Table, Uri};

/// A name server listening, not serving yet.
pub struct NameServer {
    listeners: Vec<TcpListener>,
    uri: Uri,
}

impl NameServer {
    /// Listens on TCP `port` (0: any free port) of the host's usable interfaces (those
    /// `mpirun` offers its daemons: up, neither loopback nor a virtual bridge,
    /// [`oxmpi_base::net::DEFAULT_IF_EXCLUDE`]) and of the loopback address, for clients on
    /// this host; on every address if there is no usable interface. Its URI names this host,
    /// those addresses, the port and a fresh token.
    pub fn bind(port: u16) -> Result<NameServer, String> {
        let addrs: Vec<Ipv4Addr> = oxmpi_base::net::usable()
            .into_iter()
            .map(|i| i.addr)
            .collect();
        let mut ips = addrs.clone();
        if !ips.is_empty() {
            ips.push(Ipv4Addr::LOCALHOST);
        }
        let (listeners, port) = oxmpi_base::net::listen_on(&ips, port)
            .map_err(|e| format!("cannot listen on TCP port {port}: {e}"))?;
        let uri = Uri {
            host: oxmpi_base::output::hostname().to_string(),
            addrs,
            port,
            token: random_token()?,
        };
        Ok(NameServer { listeners, uri })
    }

    /// The addresses it listens on.
    pub fn local_addrs(&self) -> Vec<std::net::SocketAddr> {
        self.listeners
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .collect()
    }

    /// The server's URI.
    pub fn uri(&self) -> &Uri {
        &self.uri
    }

    /// Serves clients on this thread, for ever (the listeners but the first each on a
    /// thread of its own).
    pub fn serve(self) {
        let table = Arc::new(Mutex::new(Table::new(self.uri.token)));
        let mut listeners = self.listeners.into_iter();
        let Some(first) = listeners.next() else {
            return;
        };
        for l in listeners {
            let table = table.clone();
            let _ = std::thread::Builder::new()
                .name("oxmpi-names-accept".into())
                .spawn(move || accept_clients(&l, &table));
        }
        accept_clients(&first, &table);
    }

    /// Serves clients on a thread of its own (which ends with the process); returns the
    /// URI.
    pub fn serve_in_background(self) -> Result<Uri, String> {
        let uri = self.uri.clone();
        std::thread::Builder::new()
            .name("oxmpi-name-server".into())
            .spawn(move || self.serve())
            .map_err(|e| format!("cannot start the name server's thread: {e}"))?;
        Ok(uri)
    }
}

/// Accepts the clients of `listener` for ever, each served by a thread of its own.
fn accept_clients(listener: &TcpListener, table: &Arc<Mutex<Table>>) {
    for sock in listener.incoming() {
        let Ok(sock) = sock else { continue };
        let table = table.clone();
        let _ = std::thread::Builder::new()
            .name("oxmpi-names".into())
            .spawn(move || {
                let _ = serve_client(sock, &table);
            });
    }
}

/// Serves one client until it closes (or fails its hello).
fn serve_client(sock: TcpStream, table: &Mutex<Table>) -> std::io::Result<()> {
    let mut out = sock.try_clone()?;
    let mut session = Session::default();
    for line in BufReader::new(sock).lines() {
        let line = line?;
        let reply = table
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .handle(&mut session, &line);
        out.write_all(reply.encode().as_bytes())?;
        if reply == Reply::Denied {
            break;
        }
    }
    Ok(())
}

/// Writes `uri` where `--report-uri W` says: standard output (`-`), standard error (`+`)
/// or the file `W`, written whole under another name and renamed (a reader never sees
/// half of it).
pub fn report_uri(uri: &Uri, w: &str) -> Result<(), String> {
    let text = format!("{uri}\n");
    match w {
        "-" => {
            let mut o = std::io::stdout();
            o.write_all(text.as_bytes())
                .and_then(|_| o.flush())
                .map_err(|e| format!("--report-uri -: {e}"))
        }
        "+" => std::io::stderr()
            .write_all(text.as_bytes())
            .map_err(|e| format!("--report-uri +: {e}")),
        file => {
            let tmp = format!("{file}.tmp{}", std::process::id());
            std::fs::write(&tmp, &text)
                .and_then(|_| std::fs::rename(&tmp, file))
                .map_err(|e| format!("--report-uri {file}: {e}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxmpi_wire::names::Request;

    /// One request line to the server at `port`, after the hello with `token`; the reply.
    fn ask(port: u16, token: u64, req: Request) -> Reply {
        let s = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).expect("connect");
        let mut w = s.try_clone().expect("clone");
        let mut r = BufReader::new(s);
        let mut line = String::new();
        w.write_all(Request::Hello { token }.encode().as_bytes())
            .expect("hello");
        r.read_line(&mut line).expect("hello reply");
        if Reply::decode(line.trim_end()) != Ok(Reply::Ok) {
            return Reply::decode(line.trim_end()).expect("a reply");
        }
        line.clear();
        w.write_all(req.encode().as_bytes()).expect("request");
        r.read_line(&mut line).expect("reply");
        Reply::decode(line.trim_end()).expect("a reply")
    }

    /// A server in the background publishes, finds and refuses a stranger's token; the
    /// URI it reports to a file reads back.
    #[test]
    fn a_background_server_serves_names_and_reports_its_uri() {
        let server = NameServer::bind(0).expect("bind");
        // Bound to the addresses of its URI and the loopback one, not to all addresses
        // (unless the host has no usable interface).
        let bound = server.local_addrs();
        let mut want: Vec<std::net::SocketAddr> = server
            .uri()
            .addrs
            .iter()
            .map(|&a| (a, server.uri().port).into())
            .collect();
        if want.is_empty() {
            want.push((Ipv4Addr::UNSPECIFIED, server.uri().port).into());
        } else {
            want.push((Ipv4Addr::LOCALHOST, server.uri().port).into());
        }
        assert_eq!(bound, want);
        let uri = server.serve_in_background().expect("serve");
        let publish = Request::Publish {
            service: "svc".into(),
            port: "p1".into(),
        };
        assert_eq!(ask(uri.port, uri.token, publish.clone()), Reply::Ok);
        assert_eq!(ask(uri.port, uri.token, publish), Reply::Taken);
        let lookup = Request::Lookup {
            service: "svc".into(),
        };
        assert_eq!(
            ask(uri.port, uri.token, lookup.clone()),
            Reply::Found("p1".into())
        );
        assert_eq!(ask(uri.port, uri.token ^ 1, lookup), Reply::Denied);
        let dir = std::env::temp_dir().join(format!("oxmpi-names-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch");
        let file = dir.join("uri");
        report_uri(&uri, file.to_str().expect("utf-8")).expect("report");
        let back: Uri = std::fs::read_to_string(&file)
            .expect("read")
            .parse()
            .expect("parse");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(back, uri);
        let e = report_uri(&uri, "/nonexistent/dir/uri").expect_err("unwritable");
        assert!(e.starts_with("--report-uri /nonexistent/dir/uri: "), "{e}");
    }
}
