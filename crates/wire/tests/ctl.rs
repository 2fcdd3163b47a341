//! Deterministic tests of the control-channel state machine.

use oxmpi_wire::ctl::{
    ClosePhase, Config, Connection, CtlError, DecodeError, DropReason, Event, ExitStatus, IoStream,
    LaunchSpec, Msg, ProcSpec, Secret, State, HANDSHAKE_MAX_FRAME, PROTOCOL_VERSION,
};
use oxmpi_wire::pmi::{SpawnCommand, SpawnRequest};
use proptest::prelude::*;

const JOB: &str = "job-42";

fn secret(b: u8) -> Secret {
    Secret::from_bytes(&[b; 32]).unwrap()
}

fn cfg(b: u8) -> Config {
    Config::new(secret(b), JOB)
}

fn events(c: &mut Connection) -> Vec<Event> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

/// Moves bytes both ways until nothing is pending; `chunk` bytes per write.
fn pump(a: &mut Connection, b: &mut Connection, chunk: usize) {
    for _ in 0..10_000 {
        let moved_ab = step(a, b, chunk);
        let moved_ba = step(b, a, chunk);
        if !moved_ab && !moved_ba {
            return;
        }
    }
    panic!("livelock");
}

fn step(from: &mut Connection, to: &mut Connection, chunk: usize) -> bool {
    let n = from.pending_output().len().min(chunk);
    if n > 0 {
        let bytes = from.pending_output()[..n].to_vec();
        from.advance_output(n);
        to.on_data(&bytes);
    }
    n > 0
}

fn connected_pair(chunk: usize) -> (Connection, Connection) {
    let mut c = Connection::client(cfg(7), 3, [1; 32]);
    let mut s = Connection::server(cfg(7), [2; 32]);
    assert_eq!(c.state(), State::Connecting);
    assert_eq!(s.state(), State::Authenticating);
    c.on_connected();
    assert_eq!(c.state(), State::Authenticating);
    pump(&mut c, &mut s, chunk);
    assert_eq!(
        events(&mut s),
        vec![Event::Authenticated { peer_node: Some(3) }]
    );
    assert_eq!(
        events(&mut c),
        vec![Event::Authenticated { peer_node: None }]
    );
    assert_eq!((c.state(), s.state()), (State::Connected, State::Connected));
    (c, s)
}

fn sample_messages() -> Vec<Msg> {
    vec![
        Msg::DaemonReady {
            node: 3,
            host: "node3".into(),
            pid: 4242,
            cpus: 2,
        },
        Msg::Launch(LaunchSpec {
            jobid: JOB.into(),
            size: 4,
            universe_size: 4,
            process_mapping: "(vector,(0,2,2))".into(),
            env: vec![("OMPI_COMM_WORLD_SIZE".into(), "4".into())],
            procs: vec![
                ProcSpec {
                    rank: 2,
                    argv: vec!["./a.out".into(), "-v".into(), "".into()],
                    env: vec![("OMPI_COMM_WORLD_RANK".into(), "2".into())],
                    cwd: "/tmp".into(),
                    cpus: vec![0],
                    program: "/tmp/a.out".into(),
                    stdin: true,
                },
                ProcSpec {
                    rank: 3,
                    ..Default::default()
                },
            ],
            appnums: vec![0, 0, 1, 1],
            flags: 5,
            output_dir: "out".into(),
            host: "node3".into(),
            preput: vec![("oxmpi_parent_port".into(), "oxmpi-port:x".into())],
        }),
        Msg::ForJob {
            job: 2,
            msg: Box::new(Msg::FenceRelease {
                epoch: 3,
                puts: vec![("a".into(), "b".into())],
            }),
        },
        Msg::ForJob {
            job: 1,
            msg: Box::new(Msg::Shutdown),
        },
        Msg::Spawn {
            job: 0,
            rank: 3,
            v2: true,
            request: SpawnRequest {
                commands: vec![
                    SpawnCommand {
                        program: "worker".into(),
                        argv: vec!["-x".into(), "".into()],
                        maxprocs: 4,
                        info: vec![("host".into(), "n1,n2".into())],
                    },
                    SpawnCommand {
                        program: "other".into(),
                        ..Default::default()
                    },
                ],
                preput: vec![("k".into(), "v".into())],
            },
        },
        Msg::SpawnDone {
            job: 1,
            rank: 0,
            v2: false,
            result: Ok(("oxmpi-7.2".into(), vec![0, -1, 17])),
        },
        Msg::SpawnDone {
            job: 0,
            rank: 5,
            v2: true,
            result: Err("cannot spawn 'x' on host n9: no".into()),
        },
        Msg::RankStarted { rank: 2, pid: 99 },
        Msg::RankExited {
            rank: 2,
            pid: 99,
            status: ExitStatus::Code(-3),
            missing_finalize: true,
        },
        Msg::RankExited {
            rank: 3,
            pid: 100,
            status: ExitStatus::Signal(9),
            missing_finalize: false,
        },
        Msg::Io {
            rank: 1,
            stream: IoStream::Stdout,
            data: b"hello\nworld\0\xff".to_vec(),
            eof: false,
        },
        Msg::Io {
            rank: 0,
            stream: IoStream::Stdin,
            data: vec![],
            eof: true,
        },
        Msg::Io {
            rank: 0,
            stream: IoStream::Stderr,
            data: vec![1],
            eof: false,
        },
        Msg::FenceContribution {
            epoch: 7,
            puts: vec![("k".into(), "v".into()), ("".into(), "".into())],
        },
        Msg::FenceRelease {
            epoch: u64::MAX,
            puts: vec![],
        },
        Msg::PmiAbort {
            rank: 1,
            code: 5,
            message: "oops".into(),
        },
        Msg::Signal { signal: 15 },
        Msg::Abort {
            code: 137,
            reason: "rank 1 killed".into(),
        },
        Msg::Shutdown,
        Msg::Error {
            message: "bad".into(),
        },
    ]
}

#[test]
fn handshake_and_messages_both_ways_with_partial_io() {
    for chunk in [1, 3, 7, 4096] {
        let (mut c, mut s) = connected_pair(chunk);
        let msgs = sample_messages();
        for m in &msgs {
            c.send(m).unwrap();
            s.send(m).unwrap();
        }
        pump(&mut c, &mut s, chunk);
        let want: Vec<Event> = msgs.iter().cloned().map(Event::Message).collect();
        assert_eq!(events(&mut s), want);
        assert_eq!(events(&mut c), want);
        // Clean close between frames.
        s.on_eof();
        assert_eq!(
            events(&mut s),
            vec![Event::PeerClosed {
                phase: ClosePhase::Clean,
                state: State::Connected
            }]
        );
        assert_eq!(s.state(), State::Closed);
        assert!(matches!(
            s.send(&Msg::Shutdown),
            Err(CtlError::NotConnected(State::Closed))
        ));
    }
}

/// A job-wrapped message never wraps another one (a hostile peer cannot nest them).
#[test]
fn nested_job_messages_are_refused() {
    let inner = Msg::ForJob {
        job: 1,
        msg: Box::new(Msg::Shutdown),
    };
    let mut bytes = vec![14u8, 0, 0, 0, 2];
    bytes.extend(inner.encode());
    assert!(matches!(
        Msg::decode(&bytes),
        Err(DecodeError::BadTag {
            what: "wrapped message",
            ..
        })
    ));
    let good = inner.encode();
    assert_eq!(Msg::decode(&good).unwrap(), inner);
    assert!(Msg::decode(&good[..5]).is_err());
}

#[test]
fn send_before_authentication_is_refused() {
    let mut c = Connection::client(cfg(1), 0, [0; 32]);
    assert_eq!(
        c.send(&Msg::Shutdown),
        Err(CtlError::NotConnected(State::Connecting))
    );
    c.on_connected();
    assert_eq!(
        c.send(&Msg::Shutdown),
        Err(CtlError::NotConnected(State::Authenticating))
    );
}

#[test]
fn wrong_secret_detected_by_both_sides() {
    // An honest client facing a server with another secret: the client drops.
    let mut c = Connection::client(cfg(1), 0, [1; 32]);
    let mut s = Connection::server(cfg(2), [2; 32]);
    c.on_connected();
    pump(&mut c, &mut s, 4096);
    assert_eq!(
        events(&mut c),
        vec![Event::Dropped {
            reason: DropReason::AuthFailed
        }]
    );
    assert_eq!(c.state(), State::Closed);
    assert!(events(&mut s).is_empty());
    assert_eq!(s.state(), State::Authenticating);

    // A client that does not know the secret and skips verification: the server drops it.
    let mut s = Connection::server(cfg(2), [2; 32]);
    let mut liar = Connection::client(cfg(9), 0, [1; 32]);
    liar.on_connected();
    s.on_data(&liar.take_output());
    let _challenge = s.take_output();
    // Forge a response frame with a guessed tag.
    let mut forged = vec![0, 0, 0, 33, 3];
    forged.extend([0xAB; 32]);
    s.on_data(&forged);
    assert_eq!(
        events(&mut s),
        vec![Event::Dropped {
            reason: DropReason::AuthFailed
        }]
    );
    assert_eq!(s.state(), State::Closed);
    assert!(
        s.pending_output().is_empty(),
        "nothing sent to a dropped peer"
    );
}

#[test]
fn replayed_handshakes_fail() {
    // Record a successful session's client bytes.
    let mut c = Connection::client(cfg(7), 1, [1; 32]);
    let mut s = Connection::server(cfg(7), [2; 32]);
    c.on_connected();
    let hello = c.take_output();
    s.on_data(&hello);
    let challenge = s.take_output();
    c.on_data(&challenge);
    let response = c.take_output();
    s.on_data(&response);
    assert_eq!(s.state(), State::Connected);

    // Replay them to a new server (fresh nonce): rejected.
    let mut s2 = Connection::server(cfg(7), [3; 32]);
    s2.on_data(&hello);
    s2.on_data(&response);
    assert_eq!(
        events(&mut s2),
        vec![Event::Dropped {
            reason: DropReason::AuthFailed
        }]
    );
    // Replay the server's challenge to a new client (fresh nonce): rejected.
    let mut c2 = Connection::client(cfg(7), 1, [4; 32]);
    c2.on_connected();
    c2.on_data(&challenge);
    assert_eq!(
        events(&mut c2),
        vec![Event::Dropped {
            reason: DropReason::AuthFailed
        }]
    );
    // Reflection: sending the server its own challenge as a response is rejected too.
    let mut s3 = Connection::server(cfg(7), [2; 32]);
    s3.on_data(&hello);
    let ch = s3.take_output();
    let mut reflected = vec![0, 0, 0, 33, 3];
    reflected.extend_from_slice(&ch[ch.len() - 32..]);
    s3.on_data(&reflected);
    assert_eq!(
        events(&mut s3),
        vec![Event::Dropped {
            reason: DropReason::AuthFailed
        }]
    );
}

#[test]
fn truncation_mid_header_and_mid_body() {
    let (mut c, mut s) = connected_pair(4096);
    c.send(&Msg::Signal { signal: 2 }).unwrap();
    let bytes = c.take_output();
    s.on_data(&bytes[..2]);
    s.on_eof();
    assert_eq!(
        events(&mut s),
        vec![Event::PeerClosed {
            phase: ClosePhase::MidHeader { have: 2 },
            state: State::Connected
        }]
    );
    let (_c, mut s) = connected_pair(4096);
    s.on_data(&bytes[..7]);
    s.on_eof();
    assert_eq!(
        events(&mut s),
        vec![Event::PeerClosed {
            phase: ClosePhase::MidBody {
                have: 3,
                need: bytes.len() - 4
            },
            state: State::Connected
        }]
    );
    // During the handshake.
    let mut s = Connection::server(cfg(7), [0; 32]);
    s.on_data(&[0, 0, 0, 50, 1, b'O']);
    s.on_eof();
    assert_eq!(
        events(&mut s),
        vec![Event::PeerClosed {
            phase: ClosePhase::MidBody { have: 2, need: 50 },
            state: State::Authenticating
        }]
    );
}

#[test]
fn reordered_frames_are_dropped() {
    // A message before authentication.
    let (mut c0, _s0) = connected_pair(4096);
    c0.send(&Msg::Shutdown).unwrap();
    let msg_frame = c0.take_output();
    let mut s = Connection::server(cfg(7), [0; 32]);
    s.on_data(&msg_frame);
    assert_eq!(
        events(&mut s),
        vec![Event::Dropped {
            reason: DropReason::UnexpectedFrame {
                kind: 16,
                state: State::Authenticating
            }
        }]
    );
    // ACCEPTED before CHALLENGE on the client.
    let mut c = Connection::client(cfg(7), 0, [0; 32]);
    c.on_connected();
    c.on_data(&[0, 0, 0, 1, 4]);
    assert!(matches!(
        events(&mut c)[..],
        [Event::Dropped {
            reason: DropReason::UnexpectedFrame { kind: 4, .. }
        }]
    ));
    // A second HELLO after the first.
    let mut c = Connection::client(cfg(7), 0, [0; 32]);
    c.on_connected();
    let hello = c.take_output();
    let mut s = Connection::server(cfg(7), [1; 32]);
    s.on_data(&hello);
    s.on_data(&hello);
    assert!(matches!(
        events(&mut s)[..],
        [Event::Dropped {
            reason: DropReason::UnexpectedFrame { kind: 1, .. }
        }]
    ));
    // Data before on_connected is ignored by a client.
    let mut c = Connection::client(cfg(7), 0, [0; 32]);
    c.on_data(b"junk");
    assert!(events(&mut c).is_empty());
}

#[test]
fn garbage_and_foreign_peers_are_dropped() {
    let drop_reason = |bytes: &[u8]| {
        let mut s = Connection::server(cfg(7), [0; 32]);
        s.on_data(bytes);
        match &events(&mut s)[..] {
            [Event::Dropped { reason }] => reason.clone(),
            other => panic!("{bytes:?}: {other:?}"),
        }
    };
    assert!(matches!(
        drop_reason(b"GET / HTTP/1.1\r\n\r\n"),
        DropReason::FrameTooLarge {
            limit: HANDSHAKE_MAX_FRAME,
            ..
        }
    ));
    assert_eq!(
        drop_reason(&[0, 0, 0, 0]),
        DropReason::Malformed(DecodeError::Empty)
    );
    assert!(matches!(
        drop_reason(&[0, 0, 0, 9, 1, b'N', b'O', b'T', b'O', b'X', b'M', b'P', b'I']),
        DropReason::BadMagic
    ));
    assert!(matches!(
        drop_reason(&[0, 0, 0, 3, 1, b'O', b'X']),
        DropReason::Malformed(DecodeError::Short { .. })
    ));
    // Another job / another version.
    let mut other = Connection::client(Config::new(secret(7), "job-other"), 0, [0; 32]);
    other.on_connected();
    assert_eq!(
        drop_reason(&other.take_output()),
        DropReason::JobMismatch {
            ours: JOB.into(),
            theirs: "job-other".into()
        }
    );
    let mut c = Connection::client(cfg(7), 0, [0; 32]);
    c.on_connected();
    let mut hello = c.take_output();
    hello[5 + 8 + 1] = 99; // low byte of the version
    assert!(matches!(
        drop_reason(&hello),
        DropReason::VersionMismatch {
            ours: PROTOCOL_VERSION,
            ..
        }
    ));
    // Malformed message body after authentication.
    let (_c, mut s) = connected_pair(4096);
    s.on_data(&[0, 0, 0, 2, 16, 200]);
    assert_eq!(
        events(&mut s),
        vec![Event::Dropped {
            reason: DropReason::Malformed(DecodeError::BadTag {
                what: "message",
                tag: 200
            })
        }]
    );
    // Further input after a drop is ignored.
    s.on_data(&[0, 0, 0, 1, 16]);
    s.on_eof();
    assert!(events(&mut s).is_empty());
}

#[test]
fn secret_hex_roundtrip_and_validation() {
    let s = Secret::generate().unwrap();
    assert_eq!(Secret::from_hex(&s.to_hex()).unwrap(), s);
    assert_ne!(Secret::generate().unwrap(), s);
    assert!(Secret::from_hex("abc").is_err());
    assert!(Secret::from_hex("zz".repeat(16).as_str()).is_err());
    assert!(Secret::from_bytes(&[0; 8]).is_err());
    assert!(!format!("{s:?}").contains(&s.to_hex()));
}

#[test]
fn oversized_messages_are_refused_locally_and_remotely() {
    let mut cfg_small = cfg(7);
    cfg_small.max_frame = 64;
    let mut c = Connection::client(cfg_small.clone(), 0, [1; 32]);
    let mut s = Connection::server(cfg_small, [2; 32]);
    c.on_connected();
    pump(&mut c, &mut s, 4096);
    events(&mut c);
    events(&mut s);
    let big = Msg::Io {
        rank: 0,
        stream: IoStream::Stdout,
        data: vec![0; 100],
        eof: false,
    };
    assert!(matches!(c.send(&big), Err(CtlError::TooLarge { .. })));
    let (mut c2, _s2) = connected_pair(4096);
    c2.send(&big).unwrap();
    s.on_data(&c2.take_output());
    assert!(matches!(
        events(&mut s)[..],
        [Event::Dropped {
            reason: DropReason::FrameTooLarge { limit: 64, .. }
        }]
    ));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    /// Arbitrary bytes into a server (before and after authentication) never panic, and
    /// every outcome is a typed event.
    #[test]
    fn fuzz_server_input(data in proptest::collection::vec(any::<u8>(), 0..600), split in 0usize..600) {
        let mut s = Connection::server(cfg(7), [2; 32]);
        let k = split.min(data.len());
        s.on_data(&data[..k]);
        s.on_data(&data[k..]);
        s.on_eof();
        let ev = events(&mut s);
        prop_assert!(!ev.is_empty());
        prop_assert_eq!(s.state(), State::Closed);

        let (_c, mut s) = connected_pair(4096);
        s.on_data(&data);
        s.on_eof();
        for e in events(&mut s) {
            let ok = matches!(e, Event::Message(_) | Event::Dropped { .. } | Event::PeerClosed { .. });
            prop_assert!(ok, "unexpected event {:?}", e);
        }
    }

    /// Flipping one byte of a valid stream never panics and never yields a message that was
    /// not sent, unless it is a frame body byte of an already authenticated message.
    #[test]
    fn fuzz_mutated_handshake(pos in 0usize..200, val in any::<u8>()) {
        let mut c = Connection::client(cfg(7), 5, [1; 32]);
        let mut s = Connection::server(cfg(7), [2; 32]);
        c.on_connected();
        let mut hello = c.take_output();
        let p = pos % hello.len();
        let changed = hello[p] != val;
        hello[p] = val;
        s.on_data(&hello);
        let ch = s.take_output();
        c.on_data(&ch);
        s.on_data(&c.take_output());
        let ev = events(&mut s);
        if changed {
            let authed = ev.iter().any(|e| matches!(e, Event::Authenticated { peer_node: Some(5) }));
            prop_assert!(!authed, "mutated hello at {} authenticated: {:?}", p, ev);
        }
    }

    /// Random message contents roundtrip through any chunking.
    #[test]
    fn roundtrip_random_io(rank in any::<u32>(), data in proptest::collection::vec(any::<u8>(), 0..300),
                           eof in any::<bool>(), chunk in 1usize..50, epoch in any::<u64>(),
                           key in "[a-z0-9;= ]{0,20}", val in "\\PC{0,20}") {
        let (mut c, mut s) = connected_pair(chunk);
        let msgs = vec![
            Msg::Io { rank, stream: IoStream::Stderr, data, eof },
            Msg::FenceContribution { epoch, puts: vec![(key, val)] },
        ];
        for m in &msgs { c.send(m).unwrap(); }
        pump(&mut c, &mut s, chunk);
        let want: Vec<Event> = msgs.into_iter().map(Event::Message).collect();
        prop_assert_eq!(events(&mut s), want);
    }
}

/// A hello of another protocol version (a daemon of another oxmpi installation): the server
/// drops it and answers with a challenge that carries only its own version, which a client
/// turns into its own one-line version mismatch instead of a bare close.
#[test]
fn version_mismatch_is_told_to_the_client() {
    let old = PROTOCOL_VERSION - 1;
    let mut c = Connection::client(cfg(7), 0, [0; 32]);
    c.on_connected();
    let mut hello = c.pending_output().to_vec();
    hello[5 + 8..5 + 10].copy_from_slice(&old.to_be_bytes());
    let mut s = Connection::server(cfg(7), [2; 32]);
    s.on_data(&hello);
    assert_eq!(
        events(&mut s),
        vec![Event::Dropped {
            reason: DropReason::VersionMismatch {
                ours: PROTOCOL_VERSION,
                theirs: old
            }
        }]
    );
    let answer = s.pending_output().to_vec();
    assert_eq!(answer[4], 2, "a challenge frame");
    assert_eq!(answer[5..7], PROTOCOL_VERSION.to_be_bytes());
    assert!(answer[7..].iter().all(|&b| b == 0), "no nonce or MAC");
    // The same answer from a server of another version, as a client sees it.
    let mut other = answer.clone();
    other[5..7].copy_from_slice(&old.to_be_bytes());
    let mut c = Connection::client(cfg(7), 0, [0; 32]);
    c.on_connected();
    let _ = c.pending_output().len();
    c.on_data(&other);
    let ev = events(&mut c);
    let [Event::Dropped { reason }] = &ev[..] else {
        panic!("{ev:?}");
    };
    assert_eq!(
        *reason,
        DropReason::VersionMismatch {
            ours: PROTOCOL_VERSION,
            theirs: old
        }
    );
    let line = reason.to_string();
    assert!(
        !line.contains('\n') && line.contains("same oxmpi version"),
        "{line}"
    );
}
