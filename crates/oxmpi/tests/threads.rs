//! `ThreadLevel::Multiple`: several threads use one communicator at once (singleton process).

use oxmpi::ThreadLevel;

#[test]
fn threads_share_a_communicator() {
    let universe = oxmpi::init_thread(ThreadLevel::Multiple).expect("init_thread");
    assert_eq!(universe.thread_level(), ThreadLevel::Multiple);
    let world = universe.world();
    const THREADS: i32 = 4;
    const ROUNDS: u32 = 200;
    std::thread::scope(|t| {
        for id in 0..THREADS {
            t.spawn(move || {
                // Each thread talks to itself (rank 0) on its own tag.
                for round in 0..ROUNDS {
                    let msg = [id as u32, round, round * 2];
                    let mut got = [0u32; 3];
                    let st = world
                        .sendrecv(&msg[..], 0, id, &mut got[..], 0, id)
                        .expect("sendrecv");
                    assert_eq!(got, msg);
                    assert_eq!(st.tag(), id);
                }
            });
        }
    });
    assert_eq!(
        world.iprobe(oxmpi::ANY_SOURCE, oxmpi::ANY_TAG).unwrap(),
        None
    );
}
