//! Deterministic tests of the agreement state machine: simulated members, a network that
//! delivers in any order, members that die at every step (the coordinator included), and
//! failure notices that reach the survivors late.

use super::agree::{decode, encode, max_len, Agreement, Msg, Value};

/// A small deterministic pseudo-random sequence (no seed from the clock).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

struct Sim {
    members: Vec<Agreement>,
    alive: Vec<bool>,
    /// (from, to, message) in flight.
    net: Vec<(u32, u32, Msg)>,
    /// Failure notices not yet delivered: (to, failed).
    notices: Vec<(u32, u32)>,
    /// What each member decided (also members that died later).
    decided: Vec<Option<Value>>,
}

impl Sim {
    fn new(flags: &[i32]) -> Sim {
        let n = flags.len() as u32;
        let mut s = Sim {
            members: (0..n)
                .map(|r| Agreement::new(n, r, flags[r as usize], r * 10, &[]))
                .collect(),
            alive: vec![true; n as usize],
            net: Vec::new(),
            notices: Vec::new(),
            decided: vec![None; n as usize],
        };
        for r in 0..n {
            s.collect(r);
        }
        s
    }

    fn collect(&mut self, r: u32) {
        for (to, m) in self.members[r as usize].take_output() {
            // Every message crosses the wire format.
            let b = encode(&m);
            assert!(b.len() <= max_len(self.members.len() as u32));
            assert_eq!(decode(&b, self.members.len() as u32).as_ref(), Some(&m));
            self.net.push((r, to, m));
        }
        if let Some(v) = self.members[r as usize].decided() {
            self.decided[r as usize] = Some(v.clone());
        }
    }

    fn kill(&mut self, r: u32, rng: &mut Lcg) {
        self.alive[r as usize] = false;
        // Some of what it sent is lost.
        self.net.retain(|(f, _, _)| *f != r || rng.next(2) == 0);
        for q in 0..self.members.len() as u32 {
            if self.alive[q as usize] {
                self.notices.push((q, r));
            }
        }
    }

    /// One event: a delivery or a failure notice, chosen by `rng`. `false` when idle.
    fn step(&mut self, rng: &mut Lcg) -> bool {
        let k = self.net.len() + self.notices.len();
        if k == 0 {
            return false;
        }
        let i = rng.next(k);
        if i < self.net.len() {
            let (from, to, m) = self.net.swap_remove(i);
            if self.alive[to as usize] {
                self.members[to as usize].on_message(from, m);
                self.collect(to);
            }
        } else {
            let (to, f) = self.notices.swap_remove(i - self.net.len());
            if self.alive[to as usize] {
                self.members[to as usize].on_failure(f);
                self.collect(to);
            }
        }
        true
    }

    fn check(&self, flags: &[i32]) {
        let mut agreed: Option<&Value> = None;
        for (r, d) in self.decided.iter().enumerate() {
            if self.alive[r] {
                assert!(d.is_some(), "survivor {r} did not decide");
            }
            if let Some(v) = d {
                match agreed {
                    None => agreed = Some(v),
                    Some(a) => assert_eq!(a, v, "members decided differently"),
                }
            }
        }
        let v = agreed.expect("someone decided");
        // Validity: the AND covers every survivor's flag.
        for (r, &f) in flags.iter().enumerate() {
            if self.alive[r] {
                assert_eq!(v.flag & f, v.flag, "flag of survivor {r} ignored");
                assert!(
                    !v.failed.contains(&(r as u32)),
                    "survivor {r} reported failed"
                );
            }
        }
    }
}

#[test]
fn no_failure_decides_the_and() {
    for seed in 0..50 {
        let flags = [0b111, 0b101, 0b111, 0b110];
        let mut s = Sim::new(&flags);
        let mut rng = Lcg(seed);
        while s.step(&mut rng) {}
        s.check(&flags);
        let v = s.decided[0].clone().unwrap();
        assert_eq!(
            v,
            Value {
                flag: 0b100,
                max: 30,
                failed: vec![]
            }
        );
    }
}

#[test]
fn a_member_dead_before_the_start_is_in_the_failed_set() {
    let n = 4;
    let mut members: Vec<Agreement> = (0..n)
        .filter(|&r| r != 1)
        .map(|r| Agreement::new(n, r, 1, r, &[1]))
        .collect();
    let mut net: Vec<(u32, u32, Msg)> = Vec::new();
    let ranks = [0u32, 2, 3];
    for (i, m) in members.iter_mut().enumerate() {
        net.extend(m.take_output().into_iter().map(|(to, x)| (ranks[i], to, x)));
    }
    while let Some((from, to, m)) = net.pop() {
        let i = ranks.iter().position(|&r| r == to).unwrap();
        members[i].on_message(from, m);
        net.extend(
            members[i]
                .take_output()
                .into_iter()
                .map(|(t, x)| (to, t, x)),
        );
    }
    for m in &members {
        assert_eq!(
            m.decided(),
            Some(&Value {
                flag: 1,
                max: 3,
                failed: vec![1]
            })
        );
    }
}

/// Kill one member (each in turn, the coordinator included) after every possible
/// number of events, with many delivery orders.
#[test]
fn one_death_at_every_step() {
    let flags = [0b1111, 0b1011, 0b0111, 0b1110, 0b1101];
    let n = flags.len() as u32;
    for victim in 0..n {
        for at in 0..40 {
            for seed in 0..8 {
                let mut rng = Lcg(seed * 1000 + u64::from(victim) * 100 + at);
                let mut s = Sim::new(&flags);
                let mut steps = 0;
                loop {
                    if steps == at {
                        s.kill(victim, &mut rng);
                    }
                    steps += 1;
                    if !s.step(&mut rng) && steps > at {
                        break;
                    }
                }
                s.check(&flags);
                let v = s.decided.iter().find_map(|d| d.clone()).unwrap();
                assert!(v.failed.is_empty() || v.failed == vec![victim]);
            }
        }
    }
}

/// Two and three deaths at random steps, the lowest ranks (successive coordinators)
/// preferred.
#[test]
fn cascading_coordinator_deaths() {
    let flags = [-1, -1, 0b10, -1, -1, -1];
    for seed in 0..400u64 {
        let mut rng = Lcg(seed);
        let mut s = Sim::new(&flags);
        let deaths = 2 + (seed % 2) as u32;
        let times: Vec<usize> = (0..deaths).map(|_| rng.next(30)).collect();
        let mut steps = 0;
        loop {
            for (d, &t) in times.iter().enumerate() {
                if t == steps {
                    s.kill(d as u32, &mut rng);
                }
            }
            steps += 1;
            if !s.step(&mut rng) && steps > 30 {
                break;
            }
        }
        s.check(&flags);
    }
}

#[test]
fn alone_decides_at_once() {
    let a = Agreement::new(3, 2, 7, 5, &[0, 1]);
    assert_eq!(
        a.decided(),
        Some(&Value {
            flag: 7,
            max: 5,
            failed: vec![0, 1]
        })
    );
}

#[test]
fn malformed_messages_are_refused() {
    assert_eq!(decode(&[], 4), None);
    assert_eq!(decode(&[9, 0, 0, 0, 0], 4), None);
    let mut b = encode(&Msg::Ack { ballot: 3 });
    b.push(0);
    assert_eq!(decode(&b, 4), None, "trailing bytes");
    // A failed list longer than the communicator.
    let b = encode(&Msg::Decide {
        value: Value {
            flag: 0,
            max: 0,
            failed: vec![0, 1, 2, 3, 4],
        },
    });
    assert_eq!(decode(&b, 4), None);
}
