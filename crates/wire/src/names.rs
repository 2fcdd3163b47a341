//! The name service's protocol: `MPI_Publish_name`, `MPI_Lookup_name` and
//! `MPI_Unpublish_name` of jobs started with `mpirun --ompi-server`, served by
//! `oxmpi-server`.
//!
//! A server is named by its URI, `oxmpi-server:<host>:<addresses>:<tcp port>:<token>`
//! ([`Uri`]: addresses `a.b.c.d+...`, the token 16 hex digits), which it reports with
//! `--report-uri`. A client connects, sends one request per line and reads one reply line
//! per request. Its first request must be [`Request::Hello`] with the URI's token; the
//! server answers anything else with [`Reply::Denied`] and the client closes. Names and
//! port names travel hex-encoded, so any bytes fit. [`Table`] is the server's state and
//! [`Table::handle`] its one step: a line in, a reply out.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

/// The protocol's name and version, first word of a hello.
pub const GREETING: &str = "oxmpi-names-1";

/// A random token for a server's URI or a port name (the operating system's random
/// bytes); the error says why none could be had.
pub fn random_token() -> Result<u64, String> {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).map_err(|e| format!("no random bytes: {e}"))?;
    Ok(u64::from_le_bytes(b))
}

/// A request line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Opens the session with the server's token.
    Hello {
        /// The token of the server's URI.
        token: u64,
    },
    /// Publishes `service` as `port`.
    Publish {
        /// The service name.
        service: String,
        /// The port name.
        port: String,
    },
    /// Looks `service` up.
    Lookup {
        /// The service name.
        service: String,
    },
    /// Removes `service`, published as `port`.
    Unpublish {
        /// The service name.
        service: String,
        /// The port name it was published with.
        port: String,
    },
}

/// A reply line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Done.
    Ok,
    /// The port a service is published as.
    Found(String),
    /// The service is already published.
    Taken,
    /// No such service (with that port).
    Missing,
    /// No hello with the right token yet.
    Denied,
    /// The request could not be read (the reason).
    Bad(String),
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Result<String, String> {
    if s.len() % 2 != 0 {
        return Err(format!("odd hex string {s:?}"));
    }
    let bytes = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2).unwrap_or("x"), 16))
        .collect::<Result<Vec<u8>, _>>()
        .map_err(|_| format!("bad hex string {s:?}"))?;
    String::from_utf8(bytes).map_err(|_| format!("not UTF-8: {s:?}"))
}

impl Request {
    /// The request's line, newline included.
    pub fn encode(&self) -> String {
        match self {
            Request::Hello { token } => format!("{GREETING} {token:016x}\n"),
            Request::Publish { service, port } => {
                format!("publish {} {}\n", hex(service), hex(port))
            }
            Request::Lookup { service } => format!("lookup {}\n", hex(service)),
            Request::Unpublish { service, port } => {
                format!("unpublish {} {}\n", hex(service), hex(port))
            }
        }
    }

    /// Parses a request line (without its newline).
    pub fn decode(line: &str) -> Result<Request, String> {
        let w: Vec<&str> = line.split(' ').collect();
        match w[..] {
            [GREETING, t] => u64::from_str_radix(t, 16)
                .map(|token| Request::Hello { token })
                .map_err(|_| format!("bad token {t:?}")),
            ["publish", s, p] => Ok(Request::Publish {
                service: unhex(s)?,
                port: unhex(p)?,
            }),
            ["lookup", s] => Ok(Request::Lookup { service: unhex(s)? }),
            ["unpublish", s, p] => Ok(Request::Unpublish {
                service: unhex(s)?,
                port: unhex(p)?,
            }),
            _ => Err(format!("unknown request {line:?}")),
        }
    }
}

impl Reply {
    /// The reply's line, newline included.
    pub fn encode(&self) -> String {
        match self {
            Reply::Ok => "ok\n".into(),
            Reply::Found(p) => format!("found {}\n", hex(p)),
            Reply::Taken => "taken\n".into(),
            Reply::Missing => "missing\n".into(),
            Reply::Denied => "denied\n".into(),
            Reply::Bad(why) => format!("bad {}\n", hex(why)),
        }
    }

    /// Parses a reply line (without its newline).
    pub fn decode(line: &str) -> Result<Reply, String> {
        let w: Vec<&str> = line.split(' ').collect();
        match w[..] {
            ["ok"] => Ok(Reply::Ok),
            ["found", p] => Ok(Reply::Found(unhex(p)?)),
            ["taken"] => Ok(Reply::Taken),
            ["missing"] => Ok(Reply::Missing),
            ["denied"] => Ok(Reply::Denied),
            ["bad", why] => Ok(Reply::Bad(unhex(why)?)),
            _ => Err(format!("not a name server reply: {line:?}")),
        }
    }
}

/// One client's session: whether its hello carried the token.
#[derive(Debug, Default)]
pub struct Session {
    authenticated: bool,
}

/// The server's names and token.
#[derive(Debug)]
pub struct Table {
    token: u64,
    names: BTreeMap<String, String>,
}

impl Table {
    /// An empty table for a server whose URI carries `token`.
    pub fn new(token: u64) -> Table {
        Table {
            token,
            names: BTreeMap::new(),
        }
    }

    /// Serves one request line of `session`.
    pub fn handle(&mut self, session: &mut Session, line: &str) -> Reply {
        let req = match Request::decode(line.trim_end_matches(['\r', '\n'])) {
            Ok(r) => r,
            Err(why) => return Reply::Bad(why),
        };
        if let Request::Hello { token } = req {
            session.authenticated = token == self.token;
            return if session.authenticated {
                Reply::Ok
            } else {
                Reply::Denied
            };
        }
        if !session.authenticated {
            return Reply::Denied;
        }
        match req {
            Request::Hello { .. } => unreachable!("handled above"),
            Request::Publish { service, port } => {
                if self.names.contains_key(&service) {
                    return Reply::Taken;
                }
                self.names.insert(service, port);
                Reply::Ok
            }
            Request::Lookup { service } => self
                .names
                .get(&service)
                .map_or(Reply::Missing, |p| Reply::Found(p.clone())),
            Request::Unpublish { service, port } => {
                if self.names.get(&service) != Some(&port) {
                    return Reply::Missing;
                }
                self.names.remove(&service);
                Reply::Ok
            }
        }
    }
}

/// A server's URI (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Uri {
    /// The server's host name.
    pub host: String,
    /// Its addresses.
    pub addrs: Vec<Ipv4Addr>,
    /// Its TCP port.
    pub port: u16,
    /// The token a client's hello must carry.
    pub token: u64,
}

impl std::fmt::Display for Uri {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let addrs: Vec<String> = self.addrs.iter().map(Ipv4Addr::to_string).collect();
        write!(
            f,
            "oxmpi-server:{}:{}:{}:{:016x}",
            self.host,
            addrs.join("+"),
            self.port,
            self.token
        )
    }
}

impl std::str::FromStr for Uri {
    type Err = String;
    /// Parses a URI; the error says what is wrong with it.
    fn from_str(s: &str) -> Result<Uri, String> {
        let bad = |why: &str| format!("invalid name server URI {s:?}: {why}");
        let f: Vec<&str> = s.trim().split(':').collect();
        let ["oxmpi-server", host, addrs, port, token] = f[..] else {
            return Err(bad(
                "expected oxmpi-server:<host>:<addresses>:<port>:<token>",
            ));
        };
        Ok(Uri {
            host: host.to_string(),
            addrs: addrs
                .split('+')
                .filter(|a| !a.is_empty())
                .map(|a| a.parse().map_err(|_| bad("bad address")))
                .collect::<Result<_, _>>()?,
            port: port.parse().map_err(|_| bad("bad port"))?,
            token: u64::from_str_radix(token, 16).map_err(|_| bad("bad token"))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Requests and replies survive their lines, whatever bytes the names hold.
    #[test]
    fn lines_round_trip() {
        for r in [
            Request::Hello { token: 0xabc },
            Request::Publish {
                service: "my service: ünï".into(),
                port: "oxmpi-port:a:0:1:h::1:ff".into(),
            },
            Request::Lookup { service: "".into() },
            Request::Unpublish {
                service: "s".into(),
                port: "p p".into(),
            },
        ] {
            let l = r.encode();
            assert!(l.ends_with('\n') && !l[..l.len() - 1].contains('\n'));
            assert_eq!(Request::decode(l.strip_suffix('\n').unwrap()).unwrap(), r);
        }
        for r in [
            Reply::Ok,
            Reply::Found("x y".into()),
            Reply::Found("".into()),
            Reply::Taken,
            Reply::Missing,
            Reply::Denied,
            Reply::Bad("why".into()),
        ] {
            assert_eq!(
                Reply::decode(r.encode().strip_suffix('\n').unwrap()).unwrap(),
                r
            );
        }
        assert!(Request::decode("GET / HTTP/1.0").is_err());
        assert!(Request::decode("lookup 4").is_err());
        assert!(Reply::decode("found zz").is_err());
    }

    /// The table: nothing before the right hello, then publish (once), lookup, unpublish
    /// with the right port only.
    #[test]
    fn table_serves_authenticated_sessions() {
        let mut t = Table::new(7);
        let mut s = Session::default();
        let line = |r: Request| r.encode();
        let lookup = || {
            line(Request::Lookup {
                service: "a".into(),
            })
        };
        let publish = |p: &str| {
            line(Request::Publish {
                service: "a".into(),
                port: p.into(),
            })
        };
        assert_eq!(t.handle(&mut s, &lookup()), Reply::Denied);
        assert_eq!(
            t.handle(&mut s, &line(Request::Hello { token: 8 })),
            Reply::Denied
        );
        assert_eq!(t.handle(&mut s, &publish("p")), Reply::Denied);
        assert_eq!(
            t.handle(&mut s, &line(Request::Hello { token: 7 })),
            Reply::Ok
        );
        assert_eq!(t.handle(&mut s, &lookup()), Reply::Missing);
        assert_eq!(t.handle(&mut s, &publish("p")), Reply::Ok);
        assert_eq!(t.handle(&mut s, &publish("q")), Reply::Taken);
        let mut other = Session::default();
        assert_eq!(t.handle(&mut other, &lookup()), Reply::Denied);
        t.handle(&mut other, &line(Request::Hello { token: 7 }));
        assert_eq!(t.handle(&mut other, &lookup()), Reply::Found("p".into()));
        let unpublish = |p: &str| {
            line(Request::Unpublish {
                service: "a".into(),
                port: p.into(),
            })
        };
        assert_eq!(t.handle(&mut s, &unpublish("q")), Reply::Missing);
        assert_eq!(t.handle(&mut s, &unpublish("p")), Reply::Ok);
        assert_eq!(t.handle(&mut s, &lookup()), Reply::Missing);
        assert!(matches!(t.handle(&mut s, "nonsense"), Reply::Bad(_)));
    }

    /// A URI round-trips; a malformed one is an error naming it.
    #[test]
    fn uris_round_trip() {
        let u = Uri {
            host: "n1".into(),
            addrs: vec![Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 1, 1)],
            port: 5000,
            token: 0xfeed,
        };
        let s = u.to_string();
        assert_eq!(s, "oxmpi-server:n1:10.0.0.1+10.0.1.1:5000:000000000000feed");
        assert_eq!(s.parse::<Uri>().unwrap(), u);
        assert_eq!(format!("{s}\n").parse::<Uri>().unwrap(), u);
        let e = "tcp://1.2.3.4:5".parse::<Uri>().unwrap_err();
        assert!(
            e.starts_with("invalid name server URI \"tcp://1.2.3.4:5\""),
            "{e}"
        );
        assert!("oxmpi-server:h::x:1".parse::<Uri>().is_err());
    }
}
