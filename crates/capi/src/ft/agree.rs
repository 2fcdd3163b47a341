//! The fault-tolerant agreement of `MPIX_Comm_agree` (and of `MPIX_Comm_shrink`, which
//! agrees on the failed set) as a sans-IO state machine: messages and failure notices go
//! in, messages to send and the decision come out. No sockets, clocks or engine here;
//! `ft::run` drives it over the engine.
//!
//! Model: crash failures with a perfect failure detector (the engine declares a peer dead
//! only when its process has ended or its link broke), messages between live members
//! arrive, in any order. The survivors must decide one value (the bitwise AND of the
//! contributed flags and the union of the failed sets), also when members, the
//! coordinator included, die during the agreement.
//!
//! Protocol (a Paxos whose ballots are coordinator ranks, in increasing order):
//! 1. The coordinator is the lowest rank not known to be dead. Each member sends its
//!    [`Msg::State`] (flag, the failures it knows, the value it accepted, if any) to the
//!    coordinator, and again to the next one whenever the coordinator dies. Sending it is
//!    a promise to ignore proposals of lower coordinators.
//! 2. The coordinator, with the states of all members it does not know dead, proposes
//!    the accepted value of the highest ballot if any member accepted one, else the AND of
//!    the flags and the union of the failed sets ([`Msg::Propose`]).
//! 3. Members accept a proposal of a ballot at least their promise and acknowledge it
//!    ([`Msg::Ack`]); with the acknowledgements of all members it does not know dead, the
//!    coordinator decides and sends [`Msg::Decide`].
//! 4. A member that receives `Decide` first forwards it to every other member, then
//!    decides: a decision reaches every survivor even when its sender dies while sending
//!    it, and a coordinator waiting for the state of a member that already returned gets
//!    the decision from it instead.
//!
//! A decision implies that every member alive then accepted it, so a later coordinator
//! sees it among the states it collects and proposes it again: all survivors decide the
//! same value.

/// What the agreement decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Value {
    /// The bitwise AND of the contributed flags.
    pub flag: i32,
    /// The largest contributed number (`MPIX_Comm_shrink` agrees on context ids with it).
    pub max: u32,
    /// The ranks known failed, sorted.
    pub failed: Vec<u32>,
}

/// A message of the protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Msg {
    /// A member's contribution to coordinator `ballot`.
    State {
        ballot: u32,
        flag: i32,
        max: u32,
        failed: Vec<u32>,
        accepted: Option<(u32, Value)>,
    },
    /// Coordinator `ballot` proposes `value`.
    Propose { ballot: u32, value: Value },
    /// A member accepted the proposal of coordinator `ballot`.
    Ack { ballot: u32 },
    /// The decision.
    Decide { value: Value },
}

/// One agreement among `n` members, seen from member `me`.
pub(crate) struct Agreement {
    me: u32,
    dead: Vec<bool>,
    flag: i32,
    max: u32,
    /// The coordinator our state went to last (`None`: not yet sent).
    promised: Option<u32>,
    accepted: Option<(u32, Value)>,
    decided: Option<Value>,
    /// The states received for our own ballot (when we coordinate), by member.
    states: Vec<Option<Msg>>,
    /// Our proposal and who acknowledged it.
    proposal: Option<(Value, Vec<bool>)>,
    out: Vec<(u32, Msg)>,
}

impl Agreement {
    /// Start member `me` of `n` with its `flag`, its number for the maximum and the
    /// members it knows failed.
    pub fn new(n: u32, me: u32, flag: i32, max: u32, failed: &[u32]) -> Agreement {
        let mut dead = vec![false; n as usize];
        for &f in failed {
            if f < n && f != me {
                dead[f as usize] = true;
            }
        }
        let mut a = Agreement {
            me,
            dead,
            flag,
            max,
            promised: None,
            accepted: None,
            decided: None,
            states: vec![None; n as usize],
            proposal: None,
            out: Vec::new(),
        };
        a.step();
        a
    }

    /// The decision, once made.
    pub fn decided(&self) -> Option<&Value> {
        self.decided.as_ref()
    }

    /// The messages to send (destination, message), in order; empties the queue.
    pub fn take_output(&mut self) -> Vec<(u32, Msg)> {
        std::mem::take(&mut self.out)
    }

    /// Member `r` failed.
    pub fn on_failure(&mut self, r: u32) {
        if (r as usize) < self.dead.len() && r != self.me && !self.dead[r as usize] {
            self.dead[r as usize] = true;
            self.step();
        }
    }

    /// A message from member `from` arrived.
    pub fn on_message(&mut self, from: u32, m: Msg) {
        if from as usize >= self.dead.len() || self.decided.is_some() {
            return;
        }
        match m {
            Msg::Decide { value } => {
                self.decide(value, Some(from));
                return;
            }
            Msg::State {
                ballot, ref failed, ..
            } if ballot == self.me => {
                // Failures others saw are real (the detector is perfect): adopt them.
                for &f in failed {
                    if (f as usize) < self.dead.len() && f != self.me {
                        self.dead[f as usize] = true;
                    }
                }
                self.states[from as usize] = Some(m);
            }
            Msg::State { .. } => {}
            Msg::Propose { ballot, value } => {
                if self.promised.is_some_and(|p| ballot >= p) {
                    self.promised = Some(ballot);
                    self.accepted = Some((ballot, value));
                    self.out.push((from, Msg::Ack { ballot }));
                }
            }
            Msg::Ack { ballot } => {
                if ballot == self.me {
                    if let Some((_, acks)) = self.proposal.as_mut() {
                        acks[from as usize] = true;
                    }
                }
            }
        }
        self.step();
    }

    fn live(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.dead.len() as u32).filter(|&r| !self.dead[r as usize])
    }

    fn failed_list(&self) -> Vec<u32> {
        (0..self.dead.len() as u32)
            .filter(|&r| self.dead[r as usize])
            .collect()
    }

    fn decide(&mut self, value: Value, from: Option<u32>) {
        let others: Vec<u32> = self
            .live()
            .filter(|&r| r != self.me && Some(r) != from)
            .collect();
        for r in others {
            self.out.push((
                r,
                Msg::Decide {
                    value: value.clone(),
                },
            ));
        }
        self.decided = Some(value);
    }

    fn step(&mut self) {
        if self.decided.is_some() {
            return;
        }
        let coord = self.live().next().expect("we are alive");
        if self.promised != Some(coord) && self.promised.is_none_or(|p| p < coord) {
            self.promised = Some(coord);
            let st = Msg::State {
                ballot: coord,
                flag: self.flag,
                max: self.max,
                failed: self.failed_list(),
                accepted: self.accepted.clone(),
            };
            if coord == self.me {
                self.states[coord as usize] = Some(st);
            } else {
                self.out.push((coord, st));
            }
        }
        if coord != self.me {
            return;
        }
        if self.proposal.is_none() {
            if self.live().any(|r| self.states[r as usize].is_none()) {
                return;
            }
            let mut flag = -1i32;
            let mut max = 0u32;
            let mut best: Option<&(u32, Value)> = None;
            for r in self.live() {
                if let Some(Msg::State {
                    flag: f,
                    max: m,
                    accepted,
                    ..
                }) = &self.states[r as usize]
                {
                    flag &= *f;
                    max = max.max(*m);
                    if let Some(a) = accepted {
                        if best.is_none_or(|b| a.0 > b.0) {
                            best = Some(a);
                        }
                    }
                }
            }
            let value = match best {
                Some((_, v)) => v.clone(),
                None => Value {
                    flag,
                    max,
                    failed: self.failed_list(),
                },
            };
            let mut acks = vec![false; self.dead.len()];
            acks[self.me as usize] = true;
            self.accepted = Some((self.me, value.clone()));
            let others: Vec<u32> = self.live().filter(|&r| r != self.me).collect();
            for r in others {
                self.out.push((
                    r,
                    Msg::Propose {
                        ballot: self.me,
                        value: value.clone(),
                    },
                ));
            }
            self.proposal = Some((value, acks));
        }
        if let Some((value, acks)) = &self.proposal {
            if self.live().all(|r| acks[r as usize]) {
                let v = value.clone();
                self.decide(v, None);
            }
        }
    }
}

// ---- wire format ----

const T_STATE: u8 = 1;
const T_PROPOSE: u8 = 2;
const T_ACK: u8 = 3;
const T_DECIDE: u8 = 4;

/// Largest encoding of a message among `n` members (the receive buffer's size).
pub(crate) fn max_len(n: u32) -> usize {
    64 + 8 * n as usize
}

fn put_value(b: &mut Vec<u8>, v: &Value) {
    b.extend_from_slice(&v.flag.to_le_bytes());
    b.extend_from_slice(&v.max.to_le_bytes());
    b.extend_from_slice(&(v.failed.len() as u32).to_le_bytes());
    for f in &v.failed {
        b.extend_from_slice(&f.to_le_bytes());
    }
}

/// Encode `m`.
pub(crate) fn encode(m: &Msg) -> Vec<u8> {
    let mut b = Vec::new();
    match m {
        Msg::State {
            ballot,
            flag,
            max,
            failed,
            accepted,
        } => {
            b.push(T_STATE);
            b.extend_from_slice(&ballot.to_le_bytes());
            put_value(
                &mut b,
                &Value {
                    flag: *flag,
                    max: *max,
                    failed: failed.clone(),
                },
            );
            match accepted {
                Some((ab, v)) => {
                    b.push(1);
                    b.extend_from_slice(&ab.to_le_bytes());
                    put_value(&mut b, v);
                }
                None => b.push(0),
            }
        }
        Msg::Propose { ballot, value } => {
            b.push(T_PROPOSE);
            b.extend_from_slice(&ballot.to_le_bytes());
            put_value(&mut b, value);
        }
        Msg::Ack { ballot } => {
            b.push(T_ACK);
            b.extend_from_slice(&ballot.to_le_bytes());
        }
        Msg::Decide { value } => {
            b.push(T_DECIDE);
            put_value(&mut b, value);
        }
    }
    b
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn u8(&mut self) -> Option<u8> {
        let (&x, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(x)
    }
    fn u32(&mut self) -> Option<u32> {
        let (x, rest) = self.0.split_at_checked(4)?;
        self.0 = rest;
        Some(u32::from_le_bytes(x.try_into().ok()?))
    }
    fn value(&mut self, n: u32) -> Option<Value> {
        let flag = self.u32()? as i32;
        let max = self.u32()?;
        let k = self.u32()?;
        if k > n {
            return None;
        }
        let failed = (0..k).map(|_| self.u32()).collect::<Option<Vec<_>>>()?;
        Some(Value { flag, max, failed })
    }
}

/// Decode a message among `n` members; `None` if malformed.
pub(crate) fn decode(b: &[u8], n: u32) -> Option<Msg> {
    let mut r = Reader(b);
    let m = match r.u8()? {
        T_STATE => {
            let ballot = r.u32()?;
            let v = r.value(n)?;
            let accepted = match r.u8()? {
                0 => None,
                _ => Some((r.u32()?, r.value(n)?)),
            };
            Msg::State {
                ballot,
                flag: v.flag,
                max: v.max,
                failed: v.failed,
                accepted,
            }
        }
        T_PROPOSE => Msg::Propose {
            ballot: r.u32()?,
            value: r.value(n)?,
        },
        T_ACK => Msg::Ack { ballot: r.u32()? },
        T_DECIDE => Msg::Decide { value: r.value(n)? },
        _ => return None,
    };
    r.0.is_empty().then_some(m)
}
