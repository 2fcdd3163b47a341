//! Deterministic tests of the PMI server core against the reference transcripts.

use oxmpi_wire::pmi::{Action, CodecError, ConnId, FenceError, JobInfo, PmiServer, ServerError};

/// Drains all actions; returns them.
fn drain(s: &mut PmiServer) -> Vec<Action> {
    std::iter::from_fn(|| s.poll_action()).collect()
}

/// Bytes sent to `conn` in `actions`, concatenated.
fn sent_to(actions: &[Action], conn: ConnId) -> Vec<u8> {
    let mut out = Vec::new();
    for a in actions {
        if let Action::Send { conn: c, bytes } = a {
            if *c == conn {
                out.extend_from_slice(bytes);
            }
        }
    }
    out
}

/// Sends `req` on `conn` and asserts the exact reply bytes.
fn exchange(s: &mut PmiServer, conn: ConnId, req: &[u8], reply: &[u8]) {
    s.on_data(conn, req);
    let acts = drain(s);
    assert_eq!(
        String::from_utf8_lossy(&sent_to(&acts, conn)),
        String::from_utf8_lossy(reply),
        "reply to {:?}",
        String::from_utf8_lossy(req)
    );
}

fn slurm_like(kvs: &str, size: u32) -> JobInfo {
    let mut j = JobInfo::new(kvs, size);
    j.appnums = vec![-1; size as usize];
    j
}

#[test]
fn pmi1_two_rank_transcript_byte_for_byte() {
    let mut s = PmiServer::new(slurm_like("7.0", 2));
    let (c0, c1) = (ConnId(10), ConnId(11));
    s.on_connect(c0, Some(0));
    s.on_connect(c1, Some(1));
    for (c, r) in [(c0, 0), (c1, 1)] {
        exchange(
            &mut s,
            c,
            b"cmd=init pmi_version=1 pmi_subversion=1\n",
            b"cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n",
        );
        exchange(
            &mut s,
            c,
            b"cmd=get_maxes\n",
            b"cmd=maxes rc=0 kvsname_max=256 keylen_max=64 vallen_max=1024\n",
        );
        exchange(
            &mut s,
            c,
            b"cmd=get_my_kvsname\n",
            b"cmd=my_kvsname rc=0 kvsname=7.0\n",
        );
        exchange(
            &mut s,
            c,
            format!(
                "cmd=put kvsname=7.0 key=addr-{r} value=tcp://10.0.0.{}:{}\n",
                r + 1,
                5000 + r
            )
            .as_bytes(),
            b"cmd=put_result rc=0\n",
        );
    }
    // Rank 0 enters the barrier: no reply until rank 1 enters too.
    exchange(&mut s, c0, b"cmd=barrier_in\n", b"");
    s.on_data(c1, b"cmd=barrier_in\n");
    let acts = drain(&mut s);
    assert_eq!(sent_to(&acts, c0), b"cmd=barrier_out rc=0\n");
    assert_eq!(sent_to(&acts, c1), b"cmd=barrier_out rc=0\n");
    exchange(
        &mut s,
        c0,
        b"cmd=get kvsname=7.0 key=addr-1\n",
        b"cmd=get_result rc=0 value=tcp://10.0.0.2:5001\n",
    );
    exchange(
        &mut s,
        c1,
        b"cmd=get kvsname=7.0 key=addr-0\n",
        b"cmd=get_result rc=0 value=tcp://10.0.0.1:5000\n",
    );
    exchange(
        &mut s,
        c0,
        b"cmd=get kvsname=7.0 key=PMI_process_mapping\n",
        b"cmd=get_result rc=0 value=(vector,(0,1,2))\n",
    );
    s.on_data(c0, b"cmd=finalize\n");
    let acts = drain(&mut s);
    assert_eq!(
        acts,
        vec![
            Action::Send {
                conn: c0,
                bytes: b"cmd=finalize_ack rc=0\n".to_vec()
            },
            Action::Finalized { rank: 0 },
            Action::Close { conn: c0 },
        ]
    );
    s.on_closed(c0);
    assert!(drain(&mut s).is_empty(), "clean close after finalize");
    assert_eq!(s.finalized_count(), 1);
}

#[test]
fn pmi2_two_rank_transcript_byte_for_byte() {
    let mut s = PmiServer::new(slurm_like("8.0", 2));
    let (c0, c1) = (ConnId(1), ConnId(2));
    // Port-mode style: no rank hint, fullinit tells the rank.
    s.on_connect(c0, None);
    s.on_connect(c1, None);
    for (c, r) in [(c0, 0u32), (c1, 1)] {
        exchange(
            &mut s,
            c,
            b"cmd=init pmi_version=2 pmi_subversion=0\n",
            b"cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n",
        );
        exchange(
            &mut s,
            c,
            format!("51    cmd=fullinit;pmijobid=8.0;pmirank={r};threaded=FALSE;").as_bytes(),
            format!("114   cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank={r};size=2;appnum=-1;debugged=FALSE;pmiverbose=FALSE;").as_bytes(),
        );
        exchange(
            &mut s,
            c,
            b"14    cmd=job-getid;",
            b"38    cmd=job-getid-response;rc=0;jobid=8.0;",
        );
        exchange(
            &mut s,
            c,
            b"44    cmd=info-getjobattr;key=PMI_process_mapping;",
            b"68    cmd=info-getjobattr-response;rc=0;found=TRUE;value=(vector,(0,1,2));",
        );
        exchange(
            &mut s,
            c,
            format!(
                "49    cmd=kvs-put;key=addr-{r};value=tcp://10.0.0.{}:{};",
                r + 1,
                5000 + r
            )
            .as_bytes(),
            b"26    cmd=kvs-put-response;rc=0;",
        );
    }
    // Before the fence, nobody sees the pairs.
    exchange(
        &mut s,
        c0,
        b"42    cmd=kvs-get;jobid=8.0;srcid=-1;key=addr-1;",
        b"38    cmd=kvs-get-response;rc=0;found=FALSE;",
    );
    exchange(&mut s, c1, b"14    cmd=kvs-fence;", b"");
    s.on_data(c0, b"14    cmd=kvs-fence;");
    let acts = drain(&mut s);
    for c in [c0, c1] {
        assert_eq!(sent_to(&acts, c), b"28    cmd=kvs-fence-response;rc=0;");
    }
    exchange(
        &mut s,
        c0,
        b"42    cmd=kvs-get;jobid=8.0;srcid=-1;key=addr-1;",
        b"63    cmd=kvs-get-response;rc=0;found=TRUE;value=tcp://10.0.0.2:5001;",
    );
    for (c, r) in [(c0, 0), (c1, 1)] {
        s.on_data(c, b"13    cmd=finalize;");
        let acts = drain(&mut s);
        assert_eq!(sent_to(&acts, c), b"27    cmd=finalize-response;rc=0;");
        assert!(acts.contains(&Action::Finalized { rank: r }));
        assert!(acts.contains(&Action::Close { conn: c }));
    }
}

#[test]
fn pmi1_port_mode_initack() {
    let mut s = PmiServer::new(JobInfo::new("kvs_1", 2));
    let c = ConnId(5);
    s.on_connect(c, None);
    exchange(
        &mut s,
        c,
        b"cmd=initack pmiid=1\n",
        b"cmd=initack\ncmd=set size=2\ncmd=set rank=1\ncmd=set debug=0\n",
    );
    assert_eq!(s.rank_of(c), Some(1));
    exchange(
        &mut s,
        c,
        b"cmd=get_appnum\n",
        b"cmd=appnum rc=0 appnum=0\n",
    );
    exchange(
        &mut s,
        c,
        b"cmd=get_universe_size\n",
        b"cmd=universe_size rc=0 size=2\n",
    );
    // Another connection claiming the same rank is refused.
    let d = ConnId(6);
    s.on_connect(d, None);
    s.on_data(d, b"cmd=initack pmiid=1\n");
    let acts = drain(&mut s);
    assert!(matches!(
        &acts[..],
        [
            Action::Error {
                conn: ConnId(6),
                error: ServerError::RankConflict { rank: 1 },
                ..
            },
            Action::Close { conn: ConnId(6) }
        ]
    ));
}

/// Four ranks, mixed PMI-1 and PMI-2, arriving in shuffled orders and with requests split
/// into arbitrary chunks: the fence releases exactly when the last rank enters, and every
/// rank reads every other rank's value.
#[test]
fn four_ranks_mixed_versions_reordered_and_chunked() {
    let orders: [[u32; 4]; 4] = [[0, 1, 2, 3], [3, 2, 1, 0], [2, 0, 3, 1], [1, 3, 0, 2]];
    for (round, order) in orders.iter().enumerate() {
        let mut s = PmiServer::new(JobInfo::new("job4", 4));
        let conn = |r: u32| ConnId(100 + u64::from(r));
        for &r in order {
            s.on_connect(conn(r), Some(r));
        }
        let v2 = |r: u32| (r + round as u32) % 2 == 0;
        for &r in order {
            let c = conn(r);
            let mut reqs: Vec<Vec<u8>> = Vec::new();
            if v2(r) {
                reqs.push(b"cmd=init pmi_version=2 pmi_subversion=0\n".to_vec());
                reqs.push(
                    oxmpi_wire::pmi::msg::v2::kvs_put(&format!("k{r}"), &format!("val-{r}"))
                        .encode_v2()
                        .unwrap(),
                );
                reqs.push(oxmpi_wire::pmi::msg::v2::kvs_fence().encode_v2().unwrap());
            } else {
                reqs.push(b"cmd=init pmi_version=1 pmi_subversion=1\n".to_vec());
                reqs.push(format!("cmd=put kvsname=job4 key=k{r} value=val-{r}\n").into_bytes());
                reqs.push(b"cmd=barrier_in\n".to_vec());
            }
            // Send the three requests as one stream split into 3-byte chunks.
            let all: Vec<u8> = reqs.concat();
            for chunk in all.chunks(3) {
                s.on_data(c, chunk);
            }
        }
        let acts = drain(&mut s);
        // Fence released for everybody exactly once.
        for r in 0..4 {
            let out = String::from_utf8(sent_to(&acts, conn(r))).unwrap();
            let fence = if v2(r) {
                "cmd=kvs-fence-response;rc=0;"
            } else {
                "cmd=barrier_out rc=0\n"
            };
            assert_eq!(out.matches(fence).count(), 1, "rank {r}: {out:?}");
            assert!(out.ends_with(fence), "fence reply comes last: {out:?}");
        }
        // Everybody reads everybody.
        for r in 0..4u32 {
            for p in 0..4u32 {
                let c = conn(r);
                if v2(r) {
                    s.on_data(
                        c,
                        &oxmpi_wire::pmi::msg::v2::kvs_get(None, -1, &format!("k{p}"))
                            .encode_v2()
                            .unwrap(),
                    );
                } else {
                    s.on_data(c, format!("cmd=get kvsname=job4 key=k{p}\n").as_bytes());
                }
                let out = String::from_utf8(sent_to(&drain(&mut s), c)).unwrap();
                assert!(out.contains(&format!("value=val-{p}")), "{out}");
            }
        }
        assert_eq!(s.epoch(), 1);
    }
}

#[test]
fn fence_waits_for_unconnected_ranks_and_skips_finalized_and_lost() {
    let mut s = PmiServer::new(JobInfo::new("j", 3));
    let c = [ConnId(0), ConnId(1), ConnId(2)];
    s.on_connect(c[0], Some(0));
    s.on_connect(c[1], Some(1));
    s.on_data(c[0], b"cmd=barrier_in\n");
    s.on_data(c[1], b"cmd=barrier_in\n");
    assert!(
        sent_to(&drain(&mut s), c[0]).is_empty(),
        "rank 2 has not connected yet"
    );
    // Rank 2 connects, then dies without finalize: it no longer counts.
    s.on_connect(c[2], Some(2));
    s.on_closed(c[2]);
    let acts = drain(&mut s);
    assert!(acts.contains(&Action::RankLost { rank: 2 }));
    assert_eq!(sent_to(&acts, c[0]), b"cmd=barrier_out rc=0\n");
    assert_eq!(sent_to(&acts, c[1]), b"cmd=barrier_out rc=0\n");
    // Rank 1 finalizes; rank 0 fences alone.
    s.on_data(c[1], b"cmd=finalize\n");
    drain(&mut s);
    s.on_data(c[0], b"cmd=barrier_in\n");
    assert_eq!(sent_to(&drain(&mut s), c[0]), b"cmd=barrier_out rc=0\n");
    assert_eq!(s.epoch(), 2);
}

#[test]
fn client_closing_mid_message_is_reported_and_others_continue() {
    let mut s = PmiServer::new(JobInfo::new("j", 2));
    let (a, b) = (ConnId(1), ConnId(2));
    s.on_connect(a, Some(0));
    s.on_connect(b, Some(1));
    s.on_data(a, b"cmd=put kvsname=j key=x value=1\n");
    s.on_data(b, b"cmd=barrier_in\n");
    drain(&mut s);
    s.on_data(a, b"cmd=barr");
    assert!(drain(&mut s).is_empty());
    s.on_closed(a);
    let acts = drain(&mut s);
    assert_eq!(
        acts[0],
        Action::Error {
            conn: a,
            rank: Some(0),
            error: ServerError::Codec(CodecError::Truncated { buffered: 8 })
        }
    );
    assert!(acts.contains(&Action::RankLost { rank: 0 }));
    // Rank 1's pending fence is released (rank 0 is gone), and the PMI-2 mid-frame case too.
    assert_eq!(sent_to(&acts, b), b"cmd=barrier_out rc=0\n");
    s.on_data(b, b"20    cmd=kvs-");
    s.on_closed(b);
    let acts = drain(&mut s);
    assert!(matches!(
        acts[0],
        Action::Error {
            error: ServerError::Codec(CodecError::Truncated { buffered: 14 }),
            ..
        }
    ));
}

#[test]
fn garbage_on_one_connection_does_not_disturb_others() {
    let mut s = PmiServer::new(JobInfo::new("j", 2));
    let (good, bad) = (ConnId(1), ConnId(2));
    s.on_connect(good, Some(0));
    s.on_connect(bad, Some(1));
    s.on_data(
        good,
        b"cmd=init pmi_version=1 pmi_subversion=1\ncmd=barrier_in\n",
    );
    s.on_data(bad, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    let acts = drain(&mut s);
    assert!(acts.iter().any(|a| matches!(
        a,
        Action::Error {
            conn: ConnId(2),
            rank: Some(1),
            error: ServerError::Codec(CodecError::UnexpectedStart { byte: b'G' })
        }
    )));
    assert!(acts.contains(&Action::Close { conn: bad }));
    // The bad rank is lost, so the good rank's barrier completes.
    assert!(acts.contains(&Action::RankLost { rank: 1 }));
    assert_eq!(
        sent_to(&acts, good),
        b"cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\ncmd=barrier_out rc=0\n"
    );
    // Data arriving later on the dropped connection is ignored.
    s.on_data(bad, b"cmd=barrier_in\n");
    assert!(drain(&mut s).is_empty());
    // Oversize line and unknown command on fresh connections.
    let mut s = PmiServer::new(JobInfo::new("j", 2));
    s.on_connect(ConnId(7), Some(0));
    s.on_connect(ConnId(8), Some(1));
    let mut long = b"cmd=put kvsname=j key=k value=".to_vec();
    long.resize(5000, b'A');
    s.on_data(ConnId(7), &long);
    s.on_data(ConnId(8), b"cmd=frobnicate\n");
    let acts = drain(&mut s);
    assert!(acts.iter().any(|a| matches!(
        a,
        Action::Error {
            conn: ConnId(7),
            error: ServerError::Codec(CodecError::LineTooLong { .. }),
            ..
        }
    )));
    assert!(acts.iter().any(|a| matches!(
        a,
        Action::Error {
            conn: ConnId(8),
            error: ServerError::UnknownCommand { .. },
            ..
        }
    )));
}

#[test]
fn commands_needing_a_rank_before_identification_fail() {
    let mut s = PmiServer::new(JobInfo::new("j", 2));
    s.on_connect(ConnId(1), None);
    s.on_data(ConnId(1), b"cmd=put kvsname=j key=a value=b\n");
    let acts = drain(&mut s);
    assert!(matches!(
        acts[0],
        Action::Error {
            error: ServerError::RankUnknown { .. },
            ..
        }
    ));
    // Out-of-range rank hints and fullinit ranks.
    s.on_connect(ConnId(2), None);
    s.on_data(
        ConnId(2),
        b"cmd=init pmi_version=2 pmi_subversion=0\n38    cmd=fullinit;pmirank=9;threaded=FALSE;",
    );
    let acts = drain(&mut s);
    assert!(acts.iter().any(|a| matches!(
        a,
        Action::Error {
            error: ServerError::RankOutOfRange { rank: 9, size: 2 },
            ..
        }
    )));
}

#[test]
fn abort_in_both_versions() {
    let mut s = PmiServer::new(JobInfo::new("j", 2));
    s.on_connect(ConnId(1), Some(0));
    s.on_connect(ConnId(2), Some(1));
    s.on_data(ConnId(1), b"cmd=abort exitcode=7\n");
    s.on_data(
        ConnId(2),
        b"cmd=init pmi_version=2 pmi_subversion=0\n35    cmd=abort;isworld=TRUE;msg=bye now;",
    );
    let acts = drain(&mut s);
    assert!(acts.contains(&Action::Abort {
        rank: Some(0),
        code: 7,
        message: String::new()
    }));
    assert!(acts.contains(&Action::Abort {
        rank: Some(1),
        code: 1,
        message: "bye now".into()
    }));
}

/// A rank that aborts (e.g. it failed in `MPI_Init`) ends the job: the others' fence is not
/// released without it (they would go on without its pairs and each fail on its own, one
/// report per rank), in a standalone server and in a node's server of a distributed one.
#[test]
fn no_fence_is_released_after_an_abort() {
    let mut s = PmiServer::new(JobInfo::new("j", 3));
    let c = [ConnId(0), ConnId(1), ConnId(2)];
    for (r, &cc) in c.iter().enumerate() {
        s.on_connect(cc, Some(r as u32));
    }
    s.on_data(c[0], b"cmd=barrier_in\n");
    s.on_data(c[1], b"cmd=barrier_in\n");
    s.on_data(c[2], b"cmd=abort exitcode=1\n");
    s.on_closed(c[2]);
    let acts = drain(&mut s);
    assert!(acts.contains(&Action::RankLost { rank: 2 }));
    assert!(sent_to(&acts, c[0]).is_empty(), "{acts:?}");
    assert!(sent_to(&acts, c[1]).is_empty(), "{acts:?}");
    // Distributed: the aborting rank's node never says its ranks are ready.
    let mut job = JobInfo::new("d", 3);
    job.local_ranks = Some(vec![1, 2]);
    let mut n = PmiServer::new(job);
    n.on_connect(c[1], Some(1));
    n.on_connect(c[2], Some(2));
    n.on_data(c[1], b"cmd=barrier_in\n");
    n.on_data(
        c[2],
        b"cmd=init pmi_version=2 pmi_subversion=0\n35    cmd=abort;isworld=TRUE;msg=bye now;",
    );
    n.on_closed(c[2]);
    let acts = drain(&mut n);
    assert!(
        !acts.iter().any(|a| matches!(a, Action::FenceReady { .. })),
        "{acts:?}"
    );
    assert!(sent_to(&acts, c[1]).is_empty(), "{acts:?}");
}

#[test]
fn node_attributes_wait_and_name_service() {
    let mut s = PmiServer::new(JobInfo::new("j", 2));
    let (a, b) = (ConnId(1), ConnId(2));
    s.on_connect(a, Some(0));
    s.on_connect(b, Some(1));
    let init2 = b"cmd=init pmi_version=2 pmi_subversion=0\n";
    s.on_data(a, init2);
    s.on_data(b, init2);
    drain(&mut s);
    exchange(
        &mut s,
        a,
        &oxmpi_wire::pmi::msg::v2::info_getnodeattr("shm", false)
            .encode_v2()
            .unwrap(),
        b"47    cmd=info-getnodeattr-response;rc=0;found=FALSE;",
    );
    // wait=TRUE parks until another local rank puts the attribute.
    exchange(
        &mut s,
        a,
        &oxmpi_wire::pmi::msg::v2::info_getnodeattr("shm", true)
            .encode_v2()
            .unwrap(),
        b"",
    );
    s.on_data(
        b,
        &oxmpi_wire::pmi::msg::v2::info_putnodeattr("shm", "/dev/shm/x")
            .encode_v2()
            .unwrap(),
    );
    let acts = drain(&mut s);
    assert_eq!(
        sent_to(&acts, b),
        b"35    cmd=info-putnodeattr-response;rc=0;"
    );
    assert_eq!(
        sent_to(&acts, a),
        b"63    cmd=info-getnodeattr-response;rc=0;found=TRUE;value=/dev/shm/x;"
    );
    exchange(
        &mut s,
        a,
        b"37    cmd=info-getjobattr;key=universeSize;",
        b"53    cmd=info-getjobattr-response;rc=0;found=TRUE;value=2;",
    );
    // Name service (PMI-1 on a third connection sharing the server's table).
    s.on_connect(ConnId(3), None);
    exchange(
        &mut s,
        ConnId(3),
        b"cmd=publish_name service=svc port=tcp:1\n",
        b"cmd=publish_result rc=0\n",
    );
    exchange(
        &mut s,
        a,
        &oxmpi_wire::pmi::msg::v2::name_lookup("svc")
            .encode_v2()
            .unwrap(),
        b"41    cmd=name-lookup-response;rc=0;port=tcp:1;",
    );
    exchange(
        &mut s,
        ConnId(3),
        b"cmd=lookup_name service=nope\n",
        b"cmd=lookup_result rc=1 msg=service_not_found\n",
    );
}

#[test]
fn missing_key_replies() {
    let mut s = PmiServer::new(JobInfo::new("j", 1));
    s.on_connect(ConnId(1), Some(0));
    exchange(
        &mut s,
        ConnId(1),
        b"cmd=get kvsname=j key=nokey\n",
        b"cmd=get_result rc=1 msg=key_nokey_not_found\n",
    );
}

#[test]
fn distributed_fence_exchanges_puts() {
    let mut job = JobInfo::new("d", 4);
    job.local_ranks = Some(vec![0, 1]);
    let mut n0 = PmiServer::new(job.clone());
    job.local_ranks = Some(vec![2, 3]);
    let mut n1 = PmiServer::new(job);
    n0.on_connect(ConnId(0), Some(0));
    n0.on_connect(ConnId(1), Some(1));
    n1.on_connect(ConnId(2), Some(2));
    n1.on_connect(ConnId(3), Some(3));
    // A rank of another node is refused.
    n0.on_connect(ConnId(9), Some(3));
    assert!(drain(&mut n0).iter().any(|a| matches!(
        a,
        Action::Error {
            error: ServerError::RankNotLocal { rank: 3 },
            ..
        }
    )));
    for r in 0..4u32 {
        let s = if r < 2 { &mut n0 } else { &mut n1 };
        s.on_data(
            ConnId(r.into()),
            format!("cmd=put kvsname=d key=a{r} value={r}\ncmd=barrier_in\n").as_bytes(),
        );
    }
    let ready0 = drain(&mut n0);
    let ready1 = drain(&mut n1);
    let take = |acts: &[Action]| {
        acts.iter()
            .find_map(|a| match a {
                Action::FenceReady { epoch, puts } => Some((*epoch, puts.clone())),
                _ => None,
            })
            .expect("FenceReady")
    };
    let (e0, p0) = take(&ready0);
    let (e1, p1) = take(&ready1);
    assert_eq!((e0, e1), (0, 0));
    assert_eq!(
        p0,
        vec![("a0".into(), "0".into()), ("a1".into(), "1".into())]
    );
    let all: Vec<_> = p0.into_iter().chain(p1).collect();
    assert_eq!(
        n0.fence_complete(5, all.clone()),
        Err(FenceError::NotWaiting { got: 5, current: 0 })
    );
    n0.fence_complete(0, all.clone()).unwrap();
    n1.fence_complete(0, all).unwrap();
    assert_eq!(
        sent_to(&drain(&mut n0), ConnId(1)),
        b"cmd=barrier_out rc=0\n"
    );
    drain(&mut n1);
    exchange(
        &mut n1,
        ConnId(2),
        b"cmd=get kvsname=d key=a0\n",
        b"cmd=get_result rc=0 value=0\n",
    );
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

        /// Arbitrary bytes (random, or a valid request stream with one byte changed) on one
        /// connection never panic the server and never disturb another connection's
        /// exchange.
        #[test]
        fn arbitrary_input_is_contained(
            data in proptest::collection::vec(any::<u8>(), 0..400),
            pos in 0usize..200,
            val in any::<u8>(),
            split in 0usize..400,
        ) {
            let mut s = PmiServer::new(JobInfo::new("j", 3));
            s.on_connect(ConnId(1), Some(0));
            s.on_connect(ConnId(2), Some(1));
            s.on_connect(ConnId(3), Some(2));
            let k = split.min(data.len());
            s.on_data(ConnId(2), &data[..k]);
            s.on_data(ConnId(2), &data[k..]);
            let mut valid = b"cmd=init pmi_version=2 pmi_subversion=0\n22    cmd=kvs-put;key=a;value=b;14    cmd=kvs-fence;".to_vec();
            let p = pos % valid.len();
            valid[p] = val;
            s.on_data(ConnId(3), &valid);
            s.on_closed(ConnId(2));
            s.on_closed(ConnId(3));
            drain(&mut s);
            // Rank 0 still works and its fence completes (others are finalized or lost).
            s.on_data(ConnId(1), b"cmd=get_my_kvsname\ncmd=barrier_in\n");
            let out = sent_to(&drain(&mut s), ConnId(1));
            prop_assert_eq!(
                String::from_utf8(out).unwrap(),
                "cmd=my_kvsname rc=0 kvsname=j\ncmd=barrier_out rc=0\n"
            );
        }
    }
}

#[test]
fn pmi2_value_with_spaces_read_through_pmi1_is_an_error_reply() {
    let mut s = PmiServer::new(JobInfo::new("j", 2));
    s.on_connect(ConnId(1), Some(0));
    s.on_connect(ConnId(2), Some(1));
    s.on_data(
        ConnId(1),
        b"cmd=init pmi_version=2 pmi_subversion=0\n28    cmd=kvs-put;key=k;value=a b;14    cmd=kvs-fence;",
    );
    s.on_data(ConnId(2), b"cmd=barrier_in\n");
    drain(&mut s);
    exchange(
        &mut s,
        ConnId(2),
        b"cmd=get kvsname=j key=k\n",
        b"cmd=get_result rc=1 msg=value_not_representable_in_PMI-1\n",
    );
    // The connection stays usable and the PMI-2 side reads the value intact.
    exchange(
        &mut s,
        ConnId(2),
        b"cmd=get_my_kvsname\n",
        b"cmd=my_kvsname rc=0 kvsname=j\n",
    );
    exchange(
        &mut s,
        ConnId(1),
        b"18    cmd=kvs-get;key=k;",
        b"47    cmd=kvs-get-response;rc=0;found=TRUE;value=a b;",
    );
}
