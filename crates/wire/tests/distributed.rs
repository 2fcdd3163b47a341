//! A job spread over two daemons: each runs a `PmiServer` for its local ranks, and fences are
//! completed through the authenticated control channel (daemon → head `FenceContribution`,
//! head → daemons `FenceRelease`). Everything is driven in memory, deterministically.

use oxmpi_wire::ctl::{Config, Connection, Event, Msg, Secret};
use oxmpi_wire::pmi::{Action, ConnId, JobInfo, PmiServer};

fn pump(a: &mut Connection, b: &mut Connection) {
    loop {
        let x = a.take_output();
        let y = b.take_output();
        if x.is_empty() && y.is_empty() {
            return;
        }
        b.on_data(&x);
        a.on_data(&y);
    }
}

fn drain_pmi(s: &mut PmiServer) -> Vec<Action> {
    std::iter::from_fn(|| s.poll_action()).collect()
}

fn sent(actions: &[Action], conn: ConnId) -> String {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send { conn: c, bytes } if *c == conn => {
                Some(String::from_utf8_lossy(bytes).into_owned())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn fence_across_two_daemons_through_the_control_channel() {
    let secret = Secret::from_bytes(&[9; 32]).unwrap();
    let cfg = Config::new(secret, "job-7");
    // Head side: one ctl server connection per daemon.
    let mut head = [
        Connection::server(cfg.clone(), [1; 32]),
        Connection::server(cfg.clone(), [2; 32]),
    ];
    let mut daemons = [
        Connection::client(cfg.clone(), 0, [3; 32]),
        Connection::client(cfg, 1, [4; 32]),
    ];
    for (h, d) in head.iter_mut().zip(daemons.iter_mut()) {
        d.on_connected();
        pump(d, h);
        assert!(matches!(h.poll_event(), Some(Event::Authenticated { .. })));
        assert!(matches!(d.poll_event(), Some(Event::Authenticated { .. })));
    }
    // Ranks 0,2 on node 0 and 1,3 on node 1 (round robin).
    let mapping = oxmpi_wire::pmi::process_mapping(&[0, 1, 0, 1]);
    let mut pmi: Vec<PmiServer> = [vec![0, 2], vec![1, 3]]
        .into_iter()
        .map(|local| {
            let mut j = JobInfo::new("job-7", 4);
            j.process_mapping = mapping.clone();
            j.local_ranks = Some(local);
            PmiServer::new(j)
        })
        .collect();
    for (n, ranks) in [[0u32, 2], [1, 3]].iter().enumerate() {
        for &r in ranks {
            pmi[n].on_connect(ConnId(r.into()), Some(r));
            pmi[n].on_data(
                ConnId(r.into()),
                format!("cmd=put kvsname=job-7 key=ep-{r} value=node{n}\ncmd=barrier_in\n")
                    .as_bytes(),
            );
        }
    }
    // Each daemon forwards its FenceReady to the head.
    for n in 0..2 {
        for a in drain_pmi(&mut pmi[n]) {
            if let Action::FenceReady { epoch, puts } = a {
                daemons[n]
                    .send(&Msg::FenceContribution { epoch, puts })
                    .unwrap();
            }
        }
        pump(&mut daemons[n], &mut head[n]);
    }
    // The head gathers both contributions and releases everybody with the union.
    let mut all = Vec::new();
    for h in head.iter_mut() {
        match h.poll_event() {
            Some(Event::Message(Msg::FenceContribution { epoch: 0, puts })) => all.extend(puts),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(all.len(), 4);
    for (h, d) in head.iter_mut().zip(daemons.iter_mut()) {
        h.send(&Msg::FenceRelease {
            epoch: 0,
            puts: all.clone(),
        })
        .unwrap();
        pump(h, d);
    }
    for n in 0..2 {
        match daemons[n].poll_event() {
            Some(Event::Message(Msg::FenceRelease { epoch, puts })) => {
                pmi[n].fence_complete(epoch, puts).unwrap()
            }
            other => panic!("{other:?}"),
        }
        let acts = drain_pmi(&mut pmi[n]);
        let local = if n == 0 { [0u32, 2] } else { [1, 3] };
        for r in local {
            assert_eq!(sent(&acts, ConnId(r.into())), "cmd=barrier_out rc=0\n");
            // Every rank now reads the remote node's keys.
            let peer = (r + 1) % 4;
            pmi[n].on_data(
                ConnId(r.into()),
                format!("cmd=get kvsname=job-7 key=ep-{peer}\n").as_bytes(),
            );
            let out = sent(&drain_pmi(&mut pmi[n]), ConnId(r.into()));
            assert_eq!(out, format!("cmd=get_result rc=0 value=node{}\n", peer % 2));
        }
    }
}
