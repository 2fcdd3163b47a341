//! Constructors for every PMI-1 and PMI-2 request and reply of the reference grammar.
//!
//! Requests are byte-exact with what MPICH's and Slurm's clients send; replies follow Slurm's
//! layout (`rc` right after `cmd`), which MPICH's PMI-1 client requires to contain `rc=0`.
//! Encode them with [`Message::encode_v1`] / [`Message::encode_v2`].

use super::codec::Message;

/// Formats a PMI-2 boolean (`TRUE` / `FALSE`).
pub fn v2_bool(b: bool) -> &'static str {
    if b {
        "TRUE"
    } else {
        "FALSE"
    }
}

/// Parses a PMI-2 boolean (case-insensitive, like Slurm).
pub fn parse_v2_bool(s: &str) -> Option<bool> {
    if s.eq_ignore_ascii_case("true") {
        Some(true)
    } else if s.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

/// PMI-1 requests (client to server).
pub mod v1 {
    use super::Message;

    /// `cmd=initack pmiid=<id>` (port mode handshake).
    pub fn initack(pmiid: &str) -> Message {
        Message::new("initack").with("pmiid", pmiid)
    }
    /// `cmd=init pmi_version=<v> pmi_subversion=<s>` (also starts a PMI-2 connection).
    pub fn init(version: u32, subversion: u32) -> Message {
        Message::new("init")
            .with("pmi_version", version)
            .with("pmi_subversion", subversion)
    }
    /// `cmd=get_maxes`.
    pub fn get_maxes() -> Message {
        Message::new("get_maxes")
    }
    /// `cmd=get_appnum`.
    pub fn get_appnum() -> Message {
        Message::new("get_appnum")
    }
    /// `cmd=get_universe_size`.
    pub fn get_universe_size() -> Message {
        Message::new("get_universe_size")
    }
    /// `cmd=get_my_kvsname`.
    pub fn get_my_kvsname() -> Message {
        Message::new("get_my_kvsname")
    }
    /// `cmd=put kvsname=<kvs> key=<k> value=<v>`.
    pub fn put(kvsname: &str, key: &str, value: &str) -> Message {
        Message::new("put")
            .with("kvsname", kvsname)
            .with("key", key)
            .with("value", value)
    }
    /// `cmd=barrier_in`.
    pub fn barrier_in() -> Message {
        Message::new("barrier_in")
    }
    /// `cmd=get kvsname=<kvs> key=<k>`.
    pub fn get(kvsname: &str, key: &str) -> Message {
        Message::new("get")
            .with("kvsname", kvsname)
            .with("key", key)
    }
    /// `cmd=finalize`.
    pub fn finalize() -> Message {
        Message::new("finalize")
    }
    /// `cmd=abort exitcode=<n>`.
    pub fn abort(exitcode: i32) -> Message {
        Message::new("abort").with("exitcode", exitcode)
    }
    /// `cmd=publish_name service=<s> port=<p>`.
    pub fn publish_name(service: &str, port: &str) -> Message {
        Message::new("publish_name")
            .with("service", service)
            .with("port", port)
    }
    /// `cmd=unpublish_name service=<s>`.
    pub fn unpublish_name(service: &str) -> Message {
        Message::new("unpublish_name").with("service", service)
    }
    /// `cmd=lookup_name service=<s>`.
    pub fn lookup_name(service: &str) -> Message {
        Message::new("lookup_name").with("service", service)
    }

    /// PMI-1 replies (server to client), Slurm layout.
    pub mod reply {
        use super::Message;

        /// `cmd=initack` followed by the three `cmd=set` lines (returned in order).
        pub fn initack(size: u32, rank: u32, debug: bool) -> [Message; 4] {
            [
                Message::new("initack"),
                Message::new("set").with("size", size),
                Message::new("set").with("rank", rank),
                Message::new("set").with("debug", u8::from(debug)),
            ]
        }
        /// `cmd=response_to_init rc=<rc> pmi_version=<v> pmi_subversion=<s>`.
        pub fn response_to_init(rc: i32, version: u32, subversion: u32) -> Message {
            Message::new("response_to_init")
                .with("rc", rc)
                .with("pmi_version", version)
                .with("pmi_subversion", subversion)
        }
        /// `cmd=maxes rc=0 kvsname_max=.. keylen_max=.. vallen_max=..`.
        pub fn maxes(kvsname_max: usize, keylen_max: usize, vallen_max: usize) -> Message {
            Message::new("maxes")
                .with("rc", 0)
                .with("kvsname_max", kvsname_max)
                .with("keylen_max", keylen_max)
                .with("vallen_max", vallen_max)
        }
        /// `cmd=appnum rc=0 appnum=<n>`.
        pub fn appnum(appnum: i32) -> Message {
            Message::new("appnum").with("rc", 0).with("appnum", appnum)
        }
        /// `cmd=universe_size rc=0 size=<n>`.
        pub fn universe_size(size: i64) -> Message {
            Message::new("universe_size")
                .with("rc", 0)
                .with("size", size)
        }
        /// `cmd=my_kvsname rc=0 kvsname=<kvs>`.
        pub fn my_kvsname(kvsname: &str) -> Message {
            Message::new("my_kvsname")
                .with("rc", 0)
                .with("kvsname", kvsname)
        }
        /// `cmd=put_result rc=<rc>` (+ `msg=` on error).
        pub fn put_result(rc: i32, msg: Option<&str>) -> Message {
            with_msg(Message::new("put_result").with("rc", rc), msg)
        }
        /// `cmd=barrier_out rc=0`.
        pub fn barrier_out() -> Message {
            Message::new("barrier_out").with("rc", 0)
        }
        /// `cmd=get_result rc=0 value=<v>` or `cmd=get_result rc=1 msg=key_<k>_not_found`.
        pub fn get_result(key: &str, value: Option<&str>) -> Message {
            match value {
                Some(v) => Message::new("get_result").with("rc", 0).with("value", v),
                None => Message::new("get_result")
                    .with("rc", 1)
                    .with("msg", format!("key_{key}_not_found")),
            }
        }
        /// `cmd=finalize_ack rc=0`.
        pub fn finalize_ack() -> Message {
            Message::new("finalize_ack").with("rc", 0)
        }
        /// `cmd=publish_result rc=<rc>`.
        pub fn publish_result(rc: i32, msg: Option<&str>) -> Message {
            with_msg(Message::new("publish_result").with("rc", rc), msg)
        }
        /// `cmd=unpublish_result rc=<rc>`.
        pub fn unpublish_result(rc: i32, msg: Option<&str>) -> Message {
            with_msg(Message::new("unpublish_result").with("rc", rc), msg)
        }
        /// `cmd=lookup_result rc=0 port=<p>` or `rc=1`.
        pub fn lookup_result(port: Option<&str>) -> Message {
            match port {
                Some(p) => Message::new("lookup_result").with("rc", 0).with("port", p),
                None => Message::new("lookup_result")
                    .with("rc", 1)
                    .with("msg", "service_not_found"),
            }
        }
        /// `cmd=spawn_result rc=<rc>` (+ `msg=`).
        pub fn spawn_result(rc: i32, msg: Option<&str>) -> Message {
            with_msg(Message::new("spawn_result").with("rc", rc), msg)
        }

        fn with_msg(m: Message, msg: Option<&str>) -> Message {
            match msg {
                Some(t) => m.with("msg", t.replace([' ', '\n'], "_")),
                None => m,
            }
        }
    }
}

/// PMI-2 requests (client to server).
pub mod v2 {
    use super::{v2_bool, Message};

    /// `cmd=fullinit;[pmijobid=<j>;]pmirank=<r>;threaded=FALSE;`.
    pub fn fullinit(pmijobid: Option<&str>, pmirank: u32, threaded: bool) -> Message {
        let mut m = Message::new("fullinit");
        if let Some(j) = pmijobid {
            m.push("pmijobid", j);
        }
        m.with("pmirank", pmirank)
            .with("threaded", v2_bool(threaded))
    }
    /// `cmd=job-getid;`.
    pub fn job_getid() -> Message {
        Message::new("job-getid")
    }
    /// `cmd=kvs-put;key=<k>;value=<v>;`.
    pub fn kvs_put(key: &str, value: &str) -> Message {
        Message::new("kvs-put")
            .with("key", key)
            .with("value", value)
    }
    /// `cmd=kvs-fence;`.
    pub fn kvs_fence() -> Message {
        Message::new("kvs-fence")
    }
    /// `cmd=kvs-get;jobid=<j>;srcid=<s>;key=<k>;` (`jobid` optional).
    pub fn kvs_get(jobid: Option<&str>, srcid: i64, key: &str) -> Message {
        let mut m = Message::new("kvs-get");
        if let Some(j) = jobid {
            m.push("jobid", j);
        }
        m.with("srcid", srcid).with("key", key)
    }
    /// `cmd=info-getjobattr;key=<k>;`.
    pub fn info_getjobattr(key: &str) -> Message {
        Message::new("info-getjobattr").with("key", key)
    }
    /// `cmd=info-putnodeattr;key=<k>;value=<v>;`.
    pub fn info_putnodeattr(key: &str, value: &str) -> Message {
        Message::new("info-putnodeattr")
            .with("key", key)
            .with("value", value)
    }
    /// `cmd=info-getnodeattr;key=<k>;wait=<b>;`.
    pub fn info_getnodeattr(key: &str, wait: bool) -> Message {
        Message::new("info-getnodeattr")
            .with("key", key)
            .with("wait", v2_bool(wait))
    }
    /// `cmd=finalize;`.
    pub fn finalize() -> Message {
        Message::new("finalize")
    }
    /// `cmd=abort;isworld=<b>;msg=<text>;`.
    pub fn abort(isworld: bool, msg: &str) -> Message {
        Message::new("abort")
            .with("isworld", v2_bool(isworld))
            .with("msg", msg.replace(';', ","))
    }
    /// `cmd=name-publish;name=<s>;port=<p>;infokeycount=0;`.
    pub fn name_publish(name: &str, port: &str) -> Message {
        Message::new("name-publish")
            .with("name", name)
            .with("port", port)
            .with("infokeycount", 0)
    }
    /// `cmd=name-unpublish;name=<s>;`.
    pub fn name_unpublish(name: &str) -> Message {
        Message::new("name-unpublish").with("name", name)
    }
    /// `cmd=name-lookup;name=<s>;`.
    pub fn name_lookup(name: &str) -> Message {
        Message::new("name-lookup").with("name", name)
    }

    /// PMI-2 replies (server to client), Slurm layout (`rc` first).
    pub mod reply {
        use super::{v2_bool, Message};

        /// `cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=..;size=..;appnum=..;debugged=FALSE;pmiverbose=FALSE;`.
        pub fn fullinit(rank: u32, size: u32, appnum: i32) -> Message {
            Message::new("fullinit-response")
                .with("rc", 0)
                .with("pmi-version", 2)
                .with("pmi-subversion", 0)
                .with("rank", rank)
                .with("size", size)
                .with("appnum", appnum)
                .with("debugged", "FALSE")
                .with("pmiverbose", "FALSE")
        }
        /// `cmd=job-getid-response;rc=0;jobid=<j>;`.
        pub fn job_getid(jobid: &str) -> Message {
            Message::new("job-getid-response")
                .with("rc", 0)
                .with("jobid", jobid)
        }
        /// `cmd=<name>;rc=0;` for the simple acknowledgements (`kvs-put-response`,
        /// `kvs-fence-response`, `finalize-response`, `info-putnodeattr-response`, ...).
        pub fn ok(name: &str) -> Message {
            Message::new(name).with("rc", 0)
        }
        /// `cmd=<name>;rc=<rc>;errmsg=<text>;`.
        pub fn error(name: &str, rc: i32, errmsg: &str) -> Message {
            Message::new(name)
                .with("rc", rc)
                .with("errmsg", errmsg.replace(';', ","))
        }
        /// `cmd=<name>;rc=0;found=TRUE;value=<v>;` or `...;rc=0;found=FALSE;` (used by
        /// `kvs-get-response`, `info-getjobattr-response`, `info-getnodeattr-response`).
        pub fn found(name: &str, value: Option<&str>) -> Message {
            let m = Message::new(name)
                .with("rc", 0)
                .with("found", v2_bool(value.is_some()));
            match value {
                Some(v) => m.with("value", v),
                None => m,
            }
        }
        /// `cmd=name-lookup-response;rc=0;port=<p>;` or `rc=1;errmsg=..;`.
        pub fn name_lookup(port: Option<&str>) -> Message {
            match port {
                Some(p) => Message::new("name-lookup-response")
                    .with("rc", 0)
                    .with("port", p),
                None => error("name-lookup-response", 1, "name not found"),
            }
        }
    }
}
