//! The client against oxmpi's own PMI server core, driven by a small threaded socket loop
//! (socketpairs for `PMI_FD` mode, loopback TCP for `PMI_PORT` mode).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::thread;

use oxmpi_pmi::{Error, Pmi, Settings, Stream, Transport, Version};
use oxmpi_wire::pmi::{Action, ConnId, JobInfo, PmiServer};

enum Sock {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Sock {
    fn try_clone(&self) -> Sock {
        match self {
            Sock::Unix(s) => Sock::Unix(s.try_clone().unwrap()),
            Sock::Tcp(s) => Sock::Tcp(s.try_clone().unwrap()),
        }
    }
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Sock::Unix(s) => s.read(b),
            Sock::Tcp(s) => s.read(b),
        }
    }
    fn write_all(&mut self, b: &[u8]) -> std::io::Result<()> {
        match self {
            Sock::Unix(s) => s.write_all(b),
            Sock::Tcp(s) => s.write_all(b),
        }
    }
    fn shutdown(&self) {
        let _ = match self {
            Sock::Unix(s) => s.shutdown(Shutdown::Both),
            Sock::Tcp(s) => s.shutdown(Shutdown::Both),
        };
    }
}

/// A PMI server core plus the sockets it talks to; other actions are recorded.
struct Served {
    server: Mutex<PmiServer>,
    writers: Mutex<HashMap<ConnId, Sock>>,
    events: Mutex<Vec<Action>>,
}

impl Served {
    fn new(job: JobInfo) -> Arc<Served> {
        Arc::new(Served {
            server: Mutex::new(PmiServer::new(job)),
            writers: Mutex::new(HashMap::new()),
            events: Mutex::new(Vec::new()),
        })
    }

    fn pump(&self, srv: &mut PmiServer) {
        while let Some(a) = srv.poll_action() {
            match a {
                Action::Send { conn, bytes } => {
                    if let Some(w) = self.writers.lock().unwrap().get_mut(&conn) {
                        let _ = w.write_all(&bytes);
                    }
                }
                Action::Close { conn } => {
                    if let Some(w) = self.writers.lock().unwrap().remove(&conn) {
                        w.shutdown();
                    }
                }
                other => self.events.lock().unwrap().push(other),
            }
        }
    }

    /// Registers a connection and starts its reader thread.
    fn attach(
        self: &Arc<Self>,
        conn: ConnId,
        sock: Sock,
        hint: Option<u32>,
    ) -> thread::JoinHandle<()> {
        let mut reader = sock.try_clone();
        self.writers.lock().unwrap().insert(conn, sock);
        {
            let mut srv = self.server.lock().unwrap();
            srv.on_connect(conn, hint);
            self.pump(&mut srv);
        }
        let me = Arc::clone(self);
        thread::spawn(move || {
            let mut buf = [0u8; 1500];
            loop {
                let n = reader.read(&mut buf).unwrap_or(0);
                let mut srv = me.server.lock().unwrap();
                if n == 0 {
                    srv.on_closed(conn);
                    me.pump(&mut srv);
                    if let Some(w) = me.writers.lock().unwrap().remove(&conn) {
                        w.shutdown();
                    }
                    return;
                }
                srv.on_data(conn, &buf[..n]);
                me.pump(&mut srv);
            }
        })
    }
}

fn blob(rank: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(131).wrapping_add(rank * 17) as u8)
        .collect()
}

/// What each rank does: put a value and a multi-chunk blob, fence, read everybody's.
fn rank_body(mut pmi: Pmi, size: u32) -> (u32, Option<Version>, Option<String>) {
    assert_eq!(pmi.size(), size);
    let r = pmi.rank();
    pmi.put(&format!("addr-{r}"), &format!("ep-{r}")).unwrap();
    pmi.put_bytes(&format!("blob-{r}"), &blob(r, 3000)).unwrap();
    // Not visible before the fence.
    assert!(matches!(
        pmi.get(Some(r), &format!("addr-{r}")),
        Err(Error::NotFound { .. })
    ));
    pmi.fence().unwrap();
    for p in 0..size {
        assert_eq!(
            pmi.get(Some(p), &format!("addr-{p}")).unwrap(),
            format!("ep-{p}")
        );
        assert_eq!(
            pmi.get_bytes(Some(p), &format!("blob-{p}")).unwrap(),
            blob(p, 3000)
        );
    }
    let map = pmi.process_mapping().unwrap();
    pmi.fence().unwrap();
    let v = pmi.version();
    pmi.finalize().unwrap();
    pmi.finalize().unwrap();
    (r, v, map)
}

fn fd_job(versions: &[Version]) {
    let size = versions.len() as u32;
    let mut job = JobInfo::new("oxmpi-test.0", size);
    job.process_mapping =
        oxmpi_wire::pmi::process_mapping(&(0..size).map(|r| r % 2).collect::<Vec<_>>());
    let served = Served::new(job);
    let mut readers = Vec::new();
    let mut clients = Vec::new();
    for (r, &version) in versions.iter().enumerate() {
        let r = r as u32;
        let (srv_end, cli_end) = UnixStream::pair().unwrap();
        readers.push(served.attach(ConnId(r.into()), Sock::Unix(srv_end), Some(r)));
        let settings = Settings {
            transport: Transport::Fd(-1),
            version,
            rank: Some(r),
            size: Some(size),
            jobid: None,
        };
        clients.push(thread::spawn(move || {
            let pmi = Pmi::connect(Stream::Unix(cli_end), &settings, false).unwrap();
            assert_eq!(pmi.kvsname(), "oxmpi-test.0");
            rank_body(pmi, size)
        }));
    }
    let results: Vec<_> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    for h in readers {
        h.join().unwrap();
    }
    for (i, (r, v, map)) in results.into_iter().enumerate() {
        assert_eq!(r, i as u32);
        assert_eq!(v, Some(versions[i]));
        let nodes: Vec<u32> = (0..size).map(|r| r % 2).collect();
        let parsed = oxmpi_wire::pmi::parse_process_mapping(&map.unwrap()).unwrap();
        assert_eq!(
            oxmpi_wire::pmi::mapping::expand(&parsed, size as usize).unwrap(),
            nodes
        );
    }
    let events = served.events.lock().unwrap();
    let finalized = events
        .iter()
        .filter(|a| matches!(a, Action::Finalized { .. }))
        .count();
    assert_eq!(finalized, versions.len(), "{events:?}");
    assert!(
        !events
            .iter()
            .any(|a| matches!(a, Action::Error { .. } | Action::RankLost { .. })),
        "{events:?}"
    );
}

#[test]
fn four_ranks_pmi1_over_socketpairs() {
    fd_job(&[Version::V1; 4]);
}

#[test]
fn four_ranks_pmi2_over_socketpairs() {
    fd_job(&[Version::V2; 4]);
}

#[test]
fn mixed_versions_in_one_job() {
    fd_job(&[Version::V1, Version::V2, Version::V2, Version::V1]);
}

#[test]
fn port_mode_with_initack_and_fullinit() {
    for version in [Version::V1, Version::V2] {
        let size = 3u32;
        let served = Served::new(JobInfo::new("porty", size));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let acceptor = {
            let served = Arc::clone(&served);
            thread::spawn(move || {
                (0..size)
                    .map(|i| {
                        let (s, _) = listener.accept().unwrap();
                        served.attach(ConnId(100 + u64::from(i)), Sock::Tcp(s), None)
                    })
                    .collect::<Vec<_>>()
            })
        };
        let clients: Vec<_> = (0..size)
            .map(|r| {
                let settings = Settings {
                    transport: Transport::Port {
                        addr: addr.clone(),
                        id: Some(r.to_string()),
                    },
                    version,
                    rank: None,
                    size: None,
                    jobid: None,
                };
                thread::spawn(move || rank_body(Pmi::init_with(&settings).unwrap(), size))
            })
            .collect();
        let mut ranks: Vec<u32> = clients.into_iter().map(|c| c.join().unwrap().0).collect();
        ranks.sort_unstable();
        assert_eq!(ranks, vec![0, 1, 2]);
        for h in acceptor.join().unwrap() {
            h.join().unwrap();
        }
    }
}

#[test]
fn abort_reaches_the_server() {
    for (version, code) in [(Version::V1, 7), (Version::V2, 1)] {
        let served = Served::new(JobInfo::new("ab", 1));
        let (srv_end, cli_end) = UnixStream::pair().unwrap();
        let reader = served.attach(ConnId(1), Sock::Unix(srv_end), Some(0));
        let settings = Settings {
            transport: Transport::Fd(-1),
            version,
            rank: Some(0),
            size: Some(1),
            jobid: None,
        };
        let mut pmi = Pmi::connect(Stream::Unix(cli_end), &settings, false).unwrap();
        pmi.abort(7, "bad; thing").unwrap();
        drop(pmi);
        reader.join().unwrap();
        let events = served.events.lock().unwrap();
        let abort = events
            .iter()
            .find_map(|a| match a {
                Action::Abort {
                    rank,
                    code,
                    message,
                } => Some((*rank, *code, message.clone())),
                _ => None,
            })
            .expect("abort action");
        assert_eq!(abort.0, Some(0));
        assert_eq!(abort.1, code);
        if version == Version::V2 {
            assert_eq!(abort.2, "bad  thing");
        }
        assert!(events.contains(&Action::RankLost { rank: 0 }));
    }
}

#[test]
fn broken_servers_give_typed_errors() {
    // Server hangs up mid-reply.
    let (mut srv, cli) = UnixStream::pair().unwrap();
    let t = thread::spawn(move || {
        let mut b = [0u8; 128];
        let _ = srv.read(&mut b);
        srv.write_all(b"cmd=response_to_").unwrap();
    });
    let settings = Settings {
        transport: Transport::Fd(-1),
        version: Version::V1,
        rank: Some(0),
        size: Some(1),
        jobid: None,
    };
    let e = Pmi::connect(Stream::Unix(cli), &settings, false).unwrap_err();
    t.join().unwrap();
    assert!(matches!(e, Error::Codec { .. }), "{e}");
    // Server answers with an error rc.
    let (mut srv, cli) = UnixStream::pair().unwrap();
    let t = thread::spawn(move || {
        let mut b = [0u8; 128];
        let _ = srv.read(&mut b);
        srv.write_all(b"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1\n")
            .unwrap();
    });
    let e = Pmi::connect(Stream::Unix(cli), &settings, false).unwrap_err();
    t.join().unwrap();
    assert!(matches!(e, Error::Server { rc: -1, .. }), "{e}");
    // Server closes cleanly without replying.
    let (srv, cli) = UnixStream::pair().unwrap();
    drop(srv);
    let e = Pmi::connect(Stream::Unix(cli), &settings, false).unwrap_err();
    assert!(matches!(e, Error::Closed { .. } | Error::Io { .. }), "{e}");
}
