//! The control-channel connection state machine with mutual HMAC-SHA256 authentication.

use std::collections::VecDeque;
use std::fmt;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use super::codec::{frame, kind, Dec, DecodeError, Enc, LEN_FIELD};
use super::msg::Msg;

/// Protocol version spoken by this implementation. Raise it with every change of a message's
/// layout: 2 added the spawned job's `preput` pairs to `Launch` and the `ForJob`, `Spawn` and
/// `SpawnDone` messages.
pub const PROTOCOL_VERSION: u16 = 2;
/// Magic bytes opening the client's hello.
pub const MAGIC: &[u8; 8] = b"OXMPICTL";
/// Nonce length (bytes).
pub const NONCE_LEN: usize = 32;
/// HMAC-SHA256 tag length (bytes).
pub const MAC_LEN: usize = 32;
/// Largest frame accepted before authentication completes.
pub const HANDSHAKE_MAX_FRAME: usize = 4096;
/// Default largest frame accepted after authentication.
pub const DEFAULT_MAX_FRAME: usize = 16 << 20;
/// Minimum secret length (bytes).
pub const MIN_SECRET_LEN: usize = 16;

/// A per-job shared secret. Its `Debug` output is redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret(<{} bytes redacted>)", self.0.len())
    }
}

/// Errors creating secrets, nonces or sending.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CtlError {
    /// Secret too short or not hex.
    #[error("bad control-channel secret: {0}")]
    BadSecret(&'static str),
    /// The OS random source failed.
    #[error("cannot get random bytes from the OS: {0}")]
    Random(String),
    /// `send` before the connection is authenticated or after it closed.
    #[error("control connection is {0:?}, not connected")]
    NotConnected(State),
    /// The encoded message exceeds the peer's frame limit.
    #[error("message of {len} bytes exceeds the frame limit of {limit} bytes")]
    TooLarge {
        /// Encoded length.
        len: usize,
        /// Limit.
        limit: usize,
    },
}

impl Secret {
    /// Wraps raw bytes (at least [`MIN_SECRET_LEN`]).
    pub fn from_bytes(b: &[u8]) -> Result<Secret, CtlError> {
        if b.len() < MIN_SECRET_LEN {
            return Err(CtlError::BadSecret("shorter than 16 bytes"));
        }
        Ok(Secret(b.to_vec()))
    }
    /// A fresh random 32-byte secret from the OS.
    pub fn generate() -> Result<Secret, CtlError> {
        let mut b = [0u8; 32];
        getrandom::fill(&mut b).map_err(|e| CtlError::Random(e.to_string()))?;
        Ok(Secret(b.to_vec()))
    }
    /// Lower-case hex, for handing the secret to a daemon through an inherited fd or the
    /// environment (never argv).
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
    /// Parses [`Secret::to_hex`] output.
    pub fn from_hex(s: &str) -> Result<Secret, CtlError> {
        let s = s.trim();
        if s.len() % 2 != 0 {
            return Err(CtlError::BadSecret("odd number of hex digits"));
        }
        let b: Option<Vec<u8>> = (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
            .collect();
        Secret::from_bytes(&b.ok_or(CtlError::BadSecret("not hex"))?)
    }
}

/// A fresh random nonce from the OS (pass it to [`Connection::client`] /
/// [`Connection::server`]; tests pass fixed nonces).
pub fn random_nonce() -> Result<[u8; NONCE_LEN], CtlError> {
    let mut b = [0u8; NONCE_LEN];
    getrandom::fill(&mut b).map_err(|e| CtlError::Random(e.to_string()))?;
    Ok(b)
}

/// Connection settings shared by both ends.
#[derive(Debug, Clone)]
pub struct Config {
    /// Per-job secret.
    pub secret: Secret,
    /// Job id; both ends must agree.
    pub jobid: String,
    /// Largest frame accepted after authentication.
    pub max_frame: usize,
}

impl Config {
    /// Settings with [`DEFAULT_MAX_FRAME`].
    pub fn new(secret: Secret, jobid: impl Into<String>) -> Config {
        Config {
            secret,
            jobid: jobid.into(),
            max_frame: DEFAULT_MAX_FRAME,
        }
    }
}

/// Public connection state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Client: the transport is not connected yet.
    Connecting,
    /// Handshake in progress.
    Authenticating,
    /// Authenticated; messages flow.
    Connected,
    /// Closed (peer closed, dropped, or closed locally).
    Closed,
}

/// Where the byte stream was when the peer closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClosePhase {
    /// Between frames.
    Clean,
    /// Inside a frame's length field (`have` of 4 bytes).
    MidHeader {
        /// Bytes of the length field received.
        have: usize,
    },
    /// Inside a frame body.
    MidBody {
        /// Body bytes received.
        have: usize,
        /// Body length announced.
        need: usize,
    },
}

/// Why a peer was dropped. The owner logs it and closes the transport.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DropReason {
    /// A frame could not be decoded.
    #[error("malformed frame: {0}")]
    Malformed(#[from] DecodeError),
    /// A frame longer than allowed in the current state.
    #[error("frame of {len} bytes exceeds the limit of {limit} bytes")]
    FrameTooLarge {
        /// Announced length.
        len: usize,
        /// Limit.
        limit: usize,
    },
    /// The hello does not start with the magic bytes.
    #[error("peer is not an oxmpi control-channel client (bad magic)")]
    BadMagic,
    /// Protocol version differs.
    #[error(
        "control protocol version mismatch: this side speaks version {ours}, the peer {theirs} \
         (every node of a job needs the same oxmpi version)"
    )]
    VersionMismatch {
        /// Our version.
        ours: u16,
        /// Peer's version.
        theirs: u16,
    },
    /// The peer belongs to another job.
    #[error("peer belongs to job {theirs:?}, not {ours:?}")]
    JobMismatch {
        /// Our job id.
        ours: String,
        /// Peer's job id.
        theirs: String,
    },
    /// The peer's HMAC is wrong: it does not know the job secret (or replays old data).
    #[error("authentication failed: peer does not prove knowledge of the job secret")]
    AuthFailed,
    /// A frame that is not allowed in the current state.
    #[error("unexpected frame kind {kind} while {state:?}")]
    UnexpectedFrame {
        /// Frame kind byte.
        kind: u8,
        /// Our state.
        state: State,
    },
}

/// Something the owner must know about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The handshake succeeded. On the server side `peer_node` is the (authenticated) node
    /// id the client announced; on the client side it is `None`.
    Authenticated {
        /// Peer node id.
        peer_node: Option<u32>,
    },
    /// A message from the authenticated peer.
    Message(Msg),
    /// The peer closed the transport.
    PeerClosed {
        /// Where in the byte stream.
        phase: ClosePhase,
        /// Our state when it happened.
        state: State,
    },
    /// The peer misbehaved and must be dropped (log `reason`, close the transport).
    Dropped {
        /// Why.
        reason: DropReason,
    },
}

#[derive(Debug, Clone)]
enum Phase {
    Connecting,
    AwaitHello,
    AwaitResponse {
        peer_nonce: [u8; NONCE_LEN],
        node: u32,
    },
    AwaitChallenge,
    AwaitAccepted,
    Open,
    Closed,
}

/// One end of a control connection. Sans-IO: feed it bytes and transport events, write out
/// [`Connection::pending_output`], and drain [`Connection::poll_event`].
#[derive(Debug)]
pub struct Connection {
    cfg: Config,
    node: Option<u32>,
    nonce: [u8; NONCE_LEN],
    phase: Phase,
    inbuf: Vec<u8>,
    start: usize,
    out: Vec<u8>,
    events: VecDeque<Event>,
}

impl Connection {
    /// The connecting end (a daemon), identifying itself as `node`. Call
    /// [`Connection::on_connected`] once the transport is up.
    pub fn client(cfg: Config, node: u32, nonce: [u8; NONCE_LEN]) -> Connection {
        Self::new(cfg, Some(node), nonce, Phase::Connecting)
    }

    /// The accepting end (the head), for a freshly accepted transport.
    pub fn server(cfg: Config, nonce: [u8; NONCE_LEN]) -> Connection {
        Self::new(cfg, None, nonce, Phase::AwaitHello)
    }

    fn new(cfg: Config, node: Option<u32>, nonce: [u8; NONCE_LEN], phase: Phase) -> Self {
        Connection {
            cfg,
            node,
            nonce,
            phase,
            inbuf: Vec::new(),
            start: 0,
            out: Vec::new(),
            events: VecDeque::new(),
        }
    }

    /// Current state.
    pub fn state(&self) -> State {
        match self.phase {
            Phase::Connecting => State::Connecting,
            Phase::AwaitHello
            | Phase::AwaitResponse { .. }
            | Phase::AwaitChallenge
            | Phase::AwaitAccepted => State::Authenticating,
            Phase::Open => State::Connected,
            Phase::Closed => State::Closed,
        }
    }

    /// Client: the transport connected; queues the hello.
    pub fn on_connected(&mut self) {
        if let (Phase::Connecting, Some(node)) = (&self.phase, self.node) {
            let mut e = Enc::default();
            e.raw(MAGIC)
                .u16(PROTOCOL_VERSION)
                .str(&self.cfg.jobid)
                .u32(node)
                .raw(&self.nonce);
            self.out.extend(frame(kind::HELLO, &e.buf));
            self.phase = Phase::AwaitChallenge;
        }
    }

    /// Bytes received from the transport.
    pub fn on_data(&mut self, data: &[u8]) {
        if matches!(self.phase, Phase::Closed | Phase::Connecting) {
            return;
        }
        if self.start > 0 && self.start == self.inbuf.len() {
            self.inbuf.clear();
            self.start = 0;
        }
        self.inbuf.extend_from_slice(data);
        while !matches!(self.phase, Phase::Closed) {
            let avail = &self.inbuf[self.start..];
            if avail.len() < LEN_FIELD {
                break;
            }
            let len = u32::from_be_bytes([avail[0], avail[1], avail[2], avail[3]]) as usize;
            let limit = if matches!(self.phase, Phase::Open) {
                self.cfg.max_frame
            } else {
                HANDSHAKE_MAX_FRAME
            };
            if len == 0 {
                self.drop_peer(DecodeError::Empty.into());
                break;
            }
            if len > limit {
                self.drop_peer(DropReason::FrameTooLarge { len, limit });
                break;
            }
            if avail.len() < LEN_FIELD + len {
                break;
            }
            let body = avail[LEN_FIELD..LEN_FIELD + len].to_vec();
            self.start += LEN_FIELD + len;
            if let Err(reason) = self.on_frame(body[0], &body[1..]) {
                self.drop_peer(reason);
            }
        }
        if self.start > 65536 && self.start * 2 > self.inbuf.len() {
            self.inbuf.drain(..self.start);
            self.start = 0;
        }
    }

    /// The peer closed the transport (read returned 0) or it failed.
    pub fn on_eof(&mut self) {
        if matches!(self.phase, Phase::Closed) {
            return;
        }
        let state = self.state();
        let avail = &self.inbuf[self.start..];
        let phase = if avail.is_empty() {
            ClosePhase::Clean
        } else if avail.len() < LEN_FIELD {
            ClosePhase::MidHeader { have: avail.len() }
        } else {
            let need = u32::from_be_bytes([avail[0], avail[1], avail[2], avail[3]]) as usize;
            ClosePhase::MidBody {
                have: avail.len() - LEN_FIELD,
                need,
            }
        };
        self.close_internal();
        self.events.push_back(Event::PeerClosed { phase, state });
    }

    /// Closes locally; pending output is discarded.
    pub fn close(&mut self) {
        self.close_internal();
    }

    /// Queues `msg` for sending (only when [`State::Connected`]).
    pub fn send(&mut self, msg: &Msg) -> Result<(), CtlError> {
        if !matches!(self.phase, Phase::Open) {
            return Err(CtlError::NotConnected(self.state()));
        }
        let body = msg.encode();
        if body.len() + 1 > self.cfg.max_frame {
            return Err(CtlError::TooLarge {
                len: body.len() + 1,
                limit: self.cfg.max_frame,
            });
        }
        self.out.extend(frame(kind::MESSAGE, &body));
        Ok(())
    }

    /// Bytes waiting to be written to the transport.
    pub fn pending_output(&self) -> &[u8] {
        &self.out
    }

    /// `n` bytes of [`Connection::pending_output`] were written.
    pub fn advance_output(&mut self, n: usize) {
        self.out.drain(..n.min(self.out.len()));
    }

    /// Takes all pending output.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    /// Next event, if any.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn close_internal(&mut self) {
        self.phase = Phase::Closed;
        self.out.clear();
        self.inbuf.clear();
        self.start = 0;
    }

    fn drop_peer(&mut self, reason: DropReason) {
        let server_hello = matches!(self.phase, Phase::AwaitHello);
        self.close_internal();
        if server_hello && matches!(reason, DropReason::VersionMismatch { .. }) {
            // A challenge that carries only our version (no valid nonce or MAC, so it proves
            // and reveals nothing): a client of any version checks the version first and
            // reports the mismatch itself instead of a bare close.
            let mut e = Enc::default();
            e.u16(PROTOCOL_VERSION)
                .raw(&[0; NONCE_LEN])
                .raw(&[0; MAC_LEN]);
            self.out.extend(frame(kind::CHALLENGE, &e.buf));
        }
        self.events.push_back(Event::Dropped { reason });
    }

    fn mac(&self, label: &[u8], node: u32, first: &[u8], second: &[u8]) -> [u8; MAC_LEN] {
        // HMAC-SHA256 accepts keys of any length, so new_from_slice cannot fail.
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.cfg.secret.0)
            .expect("HMAC takes keys of any length");
        let mut e = Enc::default();
        e.raw(label)
            .u16(PROTOCOL_VERSION)
            .str(&self.cfg.jobid)
            .u32(node)
            .raw(first)
            .raw(second);
        m.update(&e.buf);
        let mut tag = [0u8; MAC_LEN];
        tag.copy_from_slice(&m.finalize().into_bytes());
        tag
    }

    fn on_frame(&mut self, k: u8, payload: &[u8]) -> Result<(), DropReason> {
        let unexpected = |s: &Self| DropReason::UnexpectedFrame {
            kind: k,
            state: s.state(),
        };
        match (&self.phase, k) {
            (Phase::AwaitHello, kind::HELLO) => {
                let mut d = Dec::new(payload);
                let magic: [u8; 8] = d.array("magic")?;
                if &magic != MAGIC {
                    return Err(DropReason::BadMagic);
                }
                let version = d.u16("version")?;
                if version != PROTOCOL_VERSION {
                    return Err(DropReason::VersionMismatch {
                        ours: PROTOCOL_VERSION,
                        theirs: version,
                    });
                }
                let jobid = d.string("jobid")?;
                let node = d.u32("node")?;
                let peer_nonce: [u8; NONCE_LEN] = d.array("nonce")?;
                d.end()?;
                if jobid != self.cfg.jobid {
                    return Err(DropReason::JobMismatch {
                        ours: self.cfg.jobid.clone(),
                        theirs: jobid,
                    });
                }
                let tag = self.mac(b"oxmpi-ctl server", node, &peer_nonce, &self.nonce);
                let mut e = Enc::default();
                e.u16(PROTOCOL_VERSION).raw(&self.nonce).raw(&tag);
                self.out.extend(frame(kind::CHALLENGE, &e.buf));
                self.phase = Phase::AwaitResponse { peer_nonce, node };
                Ok(())
            }
            (Phase::AwaitResponse { peer_nonce, node }, kind::RESPONSE) => {
                let (peer_nonce, node) = (*peer_nonce, *node);
                let mut d = Dec::new(payload);
                let tag: [u8; MAC_LEN] = d.array("mac")?;
                d.end()?;
                let want = self.mac(b"oxmpi-ctl client", node, &self.nonce, &peer_nonce);
                if !bool::from(tag.ct_eq(&want)) {
                    return Err(DropReason::AuthFailed);
                }
                self.out.extend(frame(kind::ACCEPTED, &[]));
                self.phase = Phase::Open;
                self.events.push_back(Event::Authenticated {
                    peer_node: Some(node),
                });
                Ok(())
            }
            (Phase::AwaitChallenge, kind::CHALLENGE) => {
                let node = self.node.unwrap_or(0);
                let mut d = Dec::new(payload);
                let version = d.u16("version")?;
                if version != PROTOCOL_VERSION {
                    return Err(DropReason::VersionMismatch {
                        ours: PROTOCOL_VERSION,
                        theirs: version,
                    });
                }
                let server_nonce: [u8; NONCE_LEN] = d.array("nonce")?;
                let tag: [u8; MAC_LEN] = d.array("mac")?;
                d.end()?;
                let want = self.mac(b"oxmpi-ctl server", node, &self.nonce, &server_nonce);
                if !bool::from(tag.ct_eq(&want)) {
                    return Err(DropReason::AuthFailed);
                }
                let mine = self.mac(b"oxmpi-ctl client", node, &server_nonce, &self.nonce);
                self.out.extend(frame(kind::RESPONSE, &mine));
                self.phase = Phase::AwaitAccepted;
                Ok(())
            }
            (Phase::AwaitAccepted, kind::ACCEPTED) => {
                if !payload.is_empty() {
                    return Err(DecodeError::Trailing(payload.len()).into());
                }
                self.phase = Phase::Open;
                self.events
                    .push_back(Event::Authenticated { peer_node: None });
                Ok(())
            }
            (Phase::Open, kind::MESSAGE) => {
                let m = Msg::decode(payload)?;
                self.events.push_back(Event::Message(m));
                Ok(())
            }
            _ => Err(unexpected(self)),
        }
    }
}
