//! Loom model check of the cooperative single copy's chunk hand-out (run with
//! `RUSTFLAGS="--cfg loom" cargo test -p oxmpi-engine --test loom_coop --release`): every
//! chunk is copied exactly once, by the receiver from the front or the sender from the
//! back; the receiver's completion happens after the sender's copies (each chunk is a loom
//! cell, so a missing happens-before edge is a reported data race); a sender holding the
//! clear-to-send of an older transfer claims nothing of a newer one.
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use oxmpi_engine::coop::{CoopCtl, CoopMem};

const CHUNKS: usize = 5;

struct Shared {
    ctl: CoopCtl,
    /// The receiver's buffer, one cell per chunk: which side copied it (1 receiver, 2
    /// sender).
    data: [UnsafeCell<u8>; CHUNKS],
}

// SAFETY: the cells are accessed under the protocol being checked (loom reports races).
unsafe impl Sync for Shared {}
// SAFETY: as above.
unsafe impl Send for Shared {}

fn mem(s: &Arc<Shared>) -> CoopMem {
    // SAFETY: the Arc keeps the area alive while the handle is used (threads are joined
    // before it is dropped); one receiver and one sender.
    unsafe { CoopMem::from_ctl(&s.ctl) }
}

#[test]
fn chunks_are_copied_once_and_completion_follows_the_sender() {
    loom::model(|| {
        let s = Arc::new(Shared {
            ctl: CoopCtl::default(),
            data: std::array::from_fn(|_| UnsafeCell::new(0)),
        });
        let m = mem(&s);
        m.open(1, CHUNKS);
        let s2 = s.clone();
        let sender = loom::thread::spawn(move || {
            let m = mem(&s2);
            let mut n = 0;
            while let Some((k, c)) = m.claim_back(1) {
                for cell in &s2.data[k..k + c] {
                    cell.with_mut(|p| {
                        // SAFETY: the run is ours alone after the claim.
                        unsafe { *p = 2 }
                    });
                }
                m.report_done(c);
                n += c;
            }
            n
        });
        let mut mine = 0;
        while let Some((k, c)) = m.claim_front(1) {
            for cell in &s.data[k..k + c] {
                cell.with_mut(|p| {
                    // SAFETY: the run is ours alone after the claim.
                    unsafe { *p = 1 }
                });
            }
            mine += c;
        }
        // Wait for the chunks the sender claimed, as the engine does.
        loop {
            let (done, failed) = m.sender_report(1).expect("our transfer");
            assert!(!failed);
            if done >= CHUNKS - mine {
                break;
            }
            loom::thread::yield_now();
        }
        // The receiver's prefix, the sender's suffix, each chunk once.
        let who: Vec<u8> = s
            .data
            .iter()
            // SAFETY: every copy happened before (checked by loom).
            .map(|c| c.with(|p| unsafe { *p }))
            .collect();
        assert!(who.iter().all(|&w| w == 1 || w == 2), "{who:?}");
        assert_eq!(who.iter().filter(|&&w| w == 1).count(), mine);
        assert!(who.windows(2).all(|w| w[0] <= w[1]), "{who:?}");
        let theirs = sender.join().unwrap();
        assert_eq!(mine + theirs, CHUNKS);
    });
}

#[test]
fn a_late_sender_claims_nothing_of_the_next_transfer() {
    loom::model(|| {
        let s = Arc::new(Shared {
            ctl: CoopCtl::default(),
            data: std::array::from_fn(|_| UnsafeCell::new(0)),
        });
        let m = mem(&s);
        // Transfer 1: the receiver takes every chunk alone (the sender is late).
        m.open(1, 2);
        while m.claim_front(1).is_some() {}
        assert_eq!(m.sender_report(1), Some((0, false)));
        let s2 = s.clone();
        let sender = loom::thread::spawn(move || {
            // The late clear-to-send of transfer 1, while transfer 2 opens.
            mem(&s2).claim_back(1)
        });
        m.open(2, 2);
        assert_eq!(sender.join().unwrap(), None);
        assert_eq!(m.claim_front(2), Some((0, 1)));
        assert_eq!(m.claim_front(2), Some((1, 1)));
        assert_eq!(m.sender_report(2), Some((0, false)));
    });
}
