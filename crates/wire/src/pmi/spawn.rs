//! The PMI `spawn` request (`MPI_Comm_spawn[_multiple]`), typed, in both framings.
//!
//! PMI-1 (Hydra's layout): one multi-line block per command,
//! `mcmd=spawn\nnprocs=<n>\nexecname=<exe>\ntotspawns=<c>\nspawnssofar=<i>\narg1=..\nargcnt=<k>\n
//! preput_num=<p>\npreput_key_0=..\npreput_val_0=..\ninfo_num=<i>\ninfo_key_0=..\ninfo_val_0=..\nendcmd\n`,
//! answered after the last block with `cmd=spawn_result rc=0 errcodes=0,0`.
//! PMI-2: one message `cmd=spawn;ncmds=<c>;preputcount=<p>;ppkey0=..;ppval0=..;` then per
//! command `subcmd=<exe>;maxprocs=<n>;argc=<a>;argv0=..;infokeycount=<i>;infokey0=..;infoval0=..;`,
//! answered with `cmd=spawn-response;rc=0;jobid=<j>;errcodes=<..>;`.

use super::codec::Message;

/// One command of a spawn request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SpawnCommand {
    /// Executable (as given: a name looked up in `PATH` or a path).
    pub program: String,
    /// Arguments after the program name.
    pub argv: Vec<String>,
    /// Number of processes (`maxprocs`).
    pub maxprocs: u32,
    /// MPI info keys (`wdir`, `path`, `host`, `soft`, ...), in order.
    pub info: Vec<(String, String)>,
}

impl SpawnCommand {
    /// The value of info key `key`, if given.
    pub fn info(&self, key: &str) -> Option<&str> {
        self.info
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A whole spawn request: the commands (one job, `MPI_APPNUM` = index) and the pairs the
/// children find in their key space from the start (`preput`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SpawnRequest {
    /// The commands, in order.
    pub commands: Vec<SpawnCommand>,
    /// Pairs put into the children's key space before they start.
    pub preput: Vec<(String, String)>,
}

/// One PMI-1 `mcmd=spawn` block: a command, the preput pairs, and which block of how many
/// it is (`spawnssofar` of `totspawns`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V1Block {
    /// The command.
    pub command: SpawnCommand,
    /// The preput pairs (repeated in every block).
    pub preput: Vec<(String, String)>,
    /// `spawnssofar` (1-based).
    pub sofar: u32,
    /// `totspawns`.
    pub total: u32,
}

/// What was wrong with a spawn request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed spawn request: {0}")]
pub struct SpawnParseError(pub String);

fn num(m: &Message, key: &str) -> Result<u32, SpawnParseError> {
    m.get(key)
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| SpawnParseError(format!("missing or bad `{key}`")))
}

fn text(m: &Message, key: &str) -> Result<String, SpawnParseError> {
    m.get(key)
        .map(str::to_string)
        .ok_or_else(|| SpawnParseError(format!("missing `{key}`")))
}

fn pairs(
    m: &Message,
    count: &str,
    key: impl Fn(u32) -> String,
    val: impl Fn(u32) -> String,
) -> Result<Vec<(String, String)>, SpawnParseError> {
    let n = m.get(count).map_or(Ok(0), |_| num(m, count))?;
    (0..n)
        .map(|i| Ok((text(m, &key(i))?, text(m, &val(i))?)))
        .collect()
}

impl SpawnRequest {
    /// The PMI-1 blocks (`mcmd=spawn`), one per command; the preput pairs go in every block.
    pub fn to_v1_blocks(&self) -> Vec<Message> {
        let total = self.commands.len();
        self.commands
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut m = Message::new("spawn")
                    .with("nprocs", c.maxprocs)
                    .with("execname", &c.program)
                    .with("totspawns", total)
                    .with("spawnssofar", i + 1);
                for (j, a) in c.argv.iter().enumerate() {
                    m.push(format!("arg{}", j + 1), a);
                }
                m.push("argcnt", c.argv.len());
                m.push("preput_num", self.preput.len());
                for (j, (k, v)) in self.preput.iter().enumerate() {
                    m.push(format!("preput_key_{j}"), k);
                    m.push(format!("preput_val_{j}"), v);
                }
                m.push("info_num", c.info.len());
                for (j, (k, v)) in c.info.iter().enumerate() {
                    m.push(format!("info_key_{j}"), k);
                    m.push(format!("info_val_{j}"), v);
                }
                m
            })
            .collect()
    }

    /// Parses one PMI-1 block.
    pub fn parse_v1_block(m: &Message) -> Result<V1Block, SpawnParseError> {
        let argcnt = m.get("argcnt").map_or(Ok(0), |_| num(m, "argcnt"))?;
        let cmd = SpawnCommand {
            program: text(m, "execname")?,
            argv: (1..=argcnt)
                .map(|i| text(m, &format!("arg{i}")))
                .collect::<Result<_, _>>()?,
            maxprocs: num(m, "nprocs")?,
            info: pairs(
                m,
                "info_num",
                |i| format!("info_key_{i}"),
                |i| format!("info_val_{i}"),
            )?,
        };
        let pre = pairs(
            m,
            "preput_num",
            |i| format!("preput_key_{i}"),
            |i| format!("preput_val_{i}"),
        )?;
        let tot = m.get("totspawns").map_or(Ok(1), |_| num(m, "totspawns"))?;
        let sofar = m
            .get("spawnssofar")
            .map_or(Ok(1), |_| num(m, "spawnssofar"))?;
        Ok(V1Block {
            command: cmd,
            preput: pre,
            sofar,
            total: tot,
        })
    }

    /// The PMI-2 `spawn` message.
    pub fn to_v2(&self) -> Message {
        let mut m = Message::new("spawn")
            .with("ncmds", self.commands.len())
            .with("preputcount", self.preput.len());
        for (j, (k, v)) in self.preput.iter().enumerate() {
            m.push(format!("ppkey{j}"), k);
            m.push(format!("ppval{j}"), v);
        }
        for c in &self.commands {
            m.push("subcmd", &c.program);
            m.push("maxprocs", c.maxprocs);
            m.push("argc", c.argv.len());
            for (j, a) in c.argv.iter().enumerate() {
                m.push(format!("argv{j}"), a);
            }
            m.push("infokeycount", c.info.len());
            for (j, (k, v)) in c.info.iter().enumerate() {
                m.push(format!("infokey{j}"), k);
                m.push(format!("infoval{j}"), v);
            }
        }
        m
    }

    /// Parses the PMI-2 `spawn` message (pairs in wire order: each command starts at
    /// `subcmd`).
    pub fn parse_v2(m: &Message) -> Result<SpawnRequest, SpawnParseError> {
        let ncmds = num(m, "ncmds")?;
        let preput = pairs(
            m,
            "preputcount",
            |i| format!("ppkey{i}"),
            |i| format!("ppval{i}"),
        )?;
        let starts: Vec<usize> = m
            .pairs
            .iter()
            .enumerate()
            .filter(|(_, (k, _))| k == "subcmd")
            .map(|(i, _)| i)
            .collect();
        if starts.len() != ncmds as usize {
            return Err(SpawnParseError(format!(
                "ncmds={ncmds} but {} subcmd",
                starts.len()
            )));
        }
        let mut commands = Vec::new();
        for (n, &s) in starts.iter().enumerate() {
            let end = starts.get(n + 1).copied().unwrap_or(m.pairs.len());
            let sub = Message {
                cmd: "subcmd".into(),
                pairs: m.pairs[s..end].to_vec(),
            };
            let argc = sub.get("argc").map_or(Ok(0), |_| num(&sub, "argc"))?;
            commands.push(SpawnCommand {
                program: text(&sub, "subcmd")?,
                argv: (0..argc)
                    .map(|i| text(&sub, &format!("argv{i}")))
                    .collect::<Result<_, _>>()?,
                maxprocs: num(&sub, "maxprocs")?,
                info: pairs(
                    &sub,
                    "infokeycount",
                    |i| format!("infokey{i}"),
                    |i| format!("infoval{i}"),
                )?,
            });
        }
        Ok(SpawnRequest { commands, preput })
    }
}

/// A one-line text as a PMI-1 value (`%` and space escaped as `%25`, `%20`; Hydra's
/// `msg=` would turn spaces into `_`, which we cannot undo for program names).
pub fn v1_text(text: &str) -> String {
    text.replace('%', "%25")
        .replace(' ', "%20")
        .replace(['\n', '\r'], "%20")
}

/// The inverse of [`v1_text`].
pub fn v1_text_decode(value: &str) -> String {
    value.replace("%20", " ").replace("%25", "%")
}

/// Formats per-child error codes as the replies carry them (`0,0,-1`).
pub fn errcodes_text(codes: &[i32]) -> String {
    codes
        .iter()
        .map(i32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses `errcodes=` of a spawn reply.
pub fn parse_errcodes(s: &str) -> Vec<i32> {
    s.split(',').filter_map(|c| c.trim().parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmi::codec::{Decoder, Framing};

    fn sample() -> SpawnRequest {
        SpawnRequest {
            commands: vec![
                SpawnCommand {
                    program: "/bin/a b".into(),
                    argv: vec!["x y".into(), "z".into()],
                    maxprocs: 2,
                    info: vec![("wdir".into(), "/tmp".into())],
                },
                SpawnCommand {
                    program: "c".into(),
                    argv: vec![],
                    maxprocs: 1,
                    info: vec![],
                },
            ],
            preput: vec![("PARENT_ROOT_PORT_NAME".into(), "tcp://h:1/abc".into())],
        }
    }

    #[test]
    fn v1_blocks_round_trip_through_the_decoder() {
        let req = sample();
        let mut dec = Decoder::new();
        for b in req.to_v1_blocks() {
            dec.feed(&b.encode_v1_multi().unwrap());
        }
        let mut back = SpawnRequest::default();
        let mut last = (0, 0);
        while let Some(f) = dec.next_frame().unwrap() {
            assert_eq!(f.framing, Framing::V1Multi);
            let b = SpawnRequest::parse_v1_block(&f.msg).unwrap();
            back.commands.push(b.command);
            back.preput = b.preput;
            last = (b.sofar, b.total);
        }
        assert_eq!(last, (2, 2));
        assert_eq!(back, req);
    }

    #[test]
    fn v2_round_trip_through_the_decoder() {
        let req = sample();
        let mut dec = Decoder::new();
        dec.feed(b"cmd=init pmi_version=2 pmi_subversion=0\n");
        dec.feed(&req.to_v2().encode(Framing::V2).unwrap());
        let _init = dec.next_frame().unwrap().unwrap();
        let f = dec.next_frame().unwrap().unwrap();
        assert_eq!(SpawnRequest::parse_v2(&f.msg).unwrap(), req);
    }

    #[test]
    fn bad_requests_are_named() {
        let m = Message::new("spawn").with("ncmds", 2).with("subcmd", "a");
        let e = SpawnRequest::parse_v2(&m).unwrap_err();
        assert!(e.to_string().contains("ncmds=2 but 1 subcmd"), "{e}");
        let m = Message::new("spawn").with("execname", "a");
        let e = SpawnRequest::parse_v1_block(&m).unwrap_err();
        assert!(e.to_string().contains("nprocs"), "{e}");
        assert_eq!(parse_errcodes(&errcodes_text(&[0, -1, 3])), vec![0, -1, 3]);
        let t = "cannot spawn 'a_b %20' on host h";
        assert!(!v1_text(t).contains(' '));
        assert_eq!(v1_text_decode(&v1_text(t)), t);
    }

    #[test]
    fn the_server_asks_its_owner_and_answers_in_the_framing_of_the_request() {
        use crate::pmi::{Action, ConnId, JobInfo, PmiServer};
        let mut srv = PmiServer::new(JobInfo::new("kvs", 2));
        let (a, b) = (ConnId(0), ConnId(1));
        srv.on_connect(a, Some(0));
        srv.on_connect(b, Some(1));
        let req = sample();
        let blocks = req.to_v1_blocks();
        srv.on_data(a, &blocks[0].encode_v1_multi().unwrap());
        assert_eq!(srv.poll_action(), None, "waits for the last block");
        srv.on_data(a, &blocks[1].encode_v1_multi().unwrap());
        match srv.poll_action() {
            Some(Action::Spawn {
                conn,
                rank,
                v2,
                request,
            }) => {
                assert_eq!((conn, rank, v2), (a, Some(0), false));
                assert_eq!(request, req);
            }
            other => panic!("{other:?}"),
        }
        srv.spawn_done(a, false, Ok(("kvs-1".into(), vec![0, 0, 0])));
        match srv.poll_action() {
            Some(Action::Send { conn, bytes }) => {
                assert_eq!(conn, a);
                assert_eq!(bytes, b"cmd=spawn_result rc=0 errcodes=0,0,0\n");
            }
            other => panic!("{other:?}"),
        }
        srv.on_data(b, b"cmd=init pmi_version=2 pmi_subversion=0\n");
        while srv.poll_action().is_some() {}
        srv.on_data(b, &req.to_v2().encode(Framing::V2).unwrap());
        assert!(matches!(
            srv.poll_action(),
            Some(Action::Spawn { v2: true, .. })
        ));
        srv.spawn_done(b, true, Err("no such command 'c' on host h".into()));
        match srv.poll_action() {
            Some(Action::Send { bytes, .. }) => {
                let t = String::from_utf8(bytes).unwrap();
                assert!(t.contains("cmd=spawn-response;rc=1;"), "{t}");
                assert!(t.contains("no such command 'c' on host h"), "{t}");
            }
            other => panic!("{other:?}"),
        }
        // A malformed request is answered, not a dead connection.
        srv.on_data(
            b,
            &Message::new("spawn")
                .with("ncmds", 1)
                .encode(Framing::V2)
                .unwrap(),
        );
        match srv.poll_action() {
            Some(Action::Send { bytes, .. }) => {
                assert!(String::from_utf8(bytes).unwrap().contains("rc=1"));
            }
            other => panic!("{other:?}"),
        }
    }
}
