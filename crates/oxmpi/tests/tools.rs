//! The tools interface of the safe API in a singleton process: control variables listed,
//! read and written before and after `MPI_Init`, performance variables read through
//! sessions and handles, categories. MPI can be initialized once per process, so
//! everything runs in one test function.

use oxmpi::tools::{
    self, CvarScope, CvarType, CvarValue, CvarWriteError, PvarClass, PvarOpError, PvarSession,
    ToolsError,
};

#[test]
fn tools_interface_in_a_singleton() {
    for v in ["PMI_FD", "PMI_PORT", "PMI_RANK", "PMI_SIZE"] {
        assert!(
            std::env::var_os(v).is_none(),
            "run this test outside a launcher ({v} set)"
        );
    }
    // Control variables: the registry, typed.
    let all = tools::cvars().unwrap();
    let eager = all
        .iter()
        .find(|c| c.name == "btl_sm_eager_limit")
        .expect("btl_sm_eager_limit is a control variable");
    assert_eq!(eager.ty, CvarType::UnsignedLongLong);
    assert_eq!(eager.scope, CvarScope::AllEq);
    assert_eq!(eager.category, "btl_sm");
    assert_eq!(eager.verbosity, "TUNER_BASIC");
    let verbose = tools::cvar("btl_base_verbose").unwrap();
    assert_eq!(verbose.scope, CvarScope::Local);
    assert!(verbose
        .enumeration
        .is_some_and(|e| e.contains(&(0, "error"))));
    assert!(matches!(
        tools::read_cvar("no_such_parameter"),
        Err(ToolsError::Write(CvarWriteError::Unknown(_)))
    ));

    // Written before MPI_Init: the engine starts with it (seen in a performance variable).
    tools::write_cvar("btl_sm_eager_limit", &CvarValue::Unsigned(2048)).unwrap();
    assert_eq!(
        tools::read_cvar("btl_sm_eager_limit").unwrap(),
        CvarValue::Unsigned(2048)
    );
    assert_eq!(tools::cvar("btl_sm_eager_limit").unwrap().source, "set");
    let bad = tools::write_cvar("btl_sm_eager_limit", &CvarValue::Text("lots".into()));
    assert!(
        matches!(bad, Err(ToolsError::Write(CvarWriteError::Invalid(_)))),
        "{bad:?}"
    );

    let universe = oxmpi::init().expect("init");
    let world = universe.world();
    let session = PvarSession::new();
    let limit = session.handle("pml_ox_eager_limit").unwrap();
    assert_eq!(limit.info().class, PvarClass::Size);
    assert_eq!(limit.read(), [2048]);

    // After MPI_Init: runtime variables stay writable, the others are fixed.
    tools::write_cvar("btl_sm_eager_limit", &CvarValue::Unsigned(4096)).unwrap();
    assert_eq!(limit.read(), [4096]);
    assert_eq!(
        tools::cvar("btl_sm_ring_size").unwrap().scope,
        CvarScope::Constant
    );
    let fixed = tools::write_cvar("btl_sm_ring_size", &CvarValue::Unsigned(1 << 20));
    assert!(
        matches!(fixed, Err(ToolsError::Write(CvarWriteError::Never(_)))),
        "{fixed:?}"
    );

    // Counters: from the handle's allocation, reset, written.
    let mut sent = session.handle("btl_self_msgs_sent").unwrap();
    assert_eq!(sent.count(), 1);
    let mut b = [0u8; 4];
    for i in 0..3u8 {
        world.send(&[i; 4][..], 0, 9).unwrap();
        world.recv(&mut b[..], 0, 9).unwrap();
    }
    assert_eq!(sent.read(), [3]);
    assert_eq!(sent.read_reset().unwrap(), [3]);
    assert_eq!(sent.read(), [0]);
    sent.write(&[10]).unwrap();
    world.send(&b[..], 0, 9).unwrap();
    world.recv(&mut b[..], 0, 9).unwrap();
    assert_eq!(sent.read(), [11]);
    assert!(matches!(
        sent.start(),
        Err(ToolsError::Refused(PvarOpError::Continuous(_)))
    ));
    let mut lim = session.handle("pml_ox_eager_limit").unwrap();
    assert!(matches!(
        lim.reset(),
        Err(ToolsError::Refused(PvarOpError::ReadOnly(_)))
    ));

    // The wait timer counts only while started.
    let mut wait = session.handle("pml_ox_wait_time").unwrap();
    assert_eq!(wait.info().class, PvarClass::Timer);
    wait.start().unwrap();
    wait.stop().unwrap();
    assert_eq!(wait.read_seconds().len(), 1);

    // Bound to a communicator: the per-peer array has one value per rank.
    assert!(matches!(
        session.handle("pml_ox_comm_peer_msgs_sent"),
        Err(ToolsError::NeedsCommunicator(_))
    ));
    assert!(matches!(
        session.handle_for("btl_self_msgs_sent", &world),
        Err(ToolsError::NotBound(_))
    ));
    let peers = session
        .handle_for("pml_ox_comm_peer_msgs_sent", &world)
        .unwrap();
    assert!(peers.info().per_peer);
    assert_eq!(peers.count(), 1);
    world.send(&b[..], 0, 9).unwrap();
    world.recv(&mut b[..], 0, 9).unwrap();
    assert_eq!(peers.read(), [1]);
    let info = tools::pvars();
    assert!(info
        .iter()
        .any(|p| p.name == "btl_sm_msgs_sent" && p.continuous && !p.per_peer));

    // Categories: frameworks holding their components.
    let cats = tools::categories().unwrap();
    let btl = cats.iter().find(|c| c.name == "btl").expect("btl category");
    assert!(btl.subcategories.iter().any(|s| s == "btl_sm"));
    let sm = cats.iter().find(|c| c.name == "btl_sm").unwrap();
    assert!(sm.cvars.iter().any(|c| c == "btl_sm_eager_limit"));
    assert!(sm.pvars.contains(&"btl_sm_msgs_sent"));
    assert!(!sm.description.is_empty());
}
