//! Slurm-style hostlists: expand `node[01-04,7],rack[1-2]-n[1-3]` and compress back.
//!
//! Grammar: `list := item ("," item)*`, `item := text ("[" range ("," range)* "]" text)*`,
//! `range := num | num "-" num`. Each range keeps its own zero-padding width, taken from its
//! lower bound (`node[01-04,7]` → `node01`…`node04`, `node7`). Several bracket groups in one
//! item multiply out (`rack[1-2]-n[1-3]` → `rack1-n1`, `rack1-n2`, … `rack2-n3`). Parsing never
//! panics: numbers past `u64` and expansions larger than a limit are errors.

use std::fmt::Write as _;

/// Default limit on the number of hosts one expansion may produce.
pub const DEFAULT_MAX_HOSTS: usize = 1 << 20;

/// Why a hostlist cannot be expanded or compressed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostlistError {
    /// Brackets do not pair up.
    #[error("invalid hostlist \"{list}\": unbalanced '[' or ']' at byte {pos}")]
    Unbalanced {
        /// The input.
        list: String,
        /// Byte offset.
        pos: usize,
    },
    /// A range inside brackets is not `num` or `num-num`.
    #[error("invalid hostlist \"{list}\": bad range \"{range}\" (expected N or N-M with digits)")]
    BadRange {
        /// The input.
        list: String,
        /// The offending range.
        range: String,
    },
    /// `N-M` with `M < N`.
    #[error("invalid hostlist \"{list}\": range \"{range}\" goes backwards")]
    Reversed {
        /// The input.
        list: String,
        /// The offending range.
        range: String,
    },
    /// A number that does not fit in 64 bits.
    #[error("invalid hostlist \"{list}\": number in \"{range}\" is too large")]
    Overflow {
        /// The input.
        list: String,
        /// The offending range.
        range: String,
    },
    /// An empty host name (e.g. `a,,b`).
    #[error("invalid hostlist \"{list}\": empty host name")]
    Empty {
        /// The input.
        list: String,
    },
    /// The expansion would exceed the host limit.
    #[error("hostlist \"{list}\" expands to more than {max} hosts")]
    TooMany {
        /// The input.
        list: String,
        /// The limit.
        max: usize,
    },
    /// A host name that cannot appear in a hostlist.
    #[error(
        "host name \"{name}\" cannot be put in a hostlist (contains '[', ']', ',' or is empty)"
    )]
    BadHostName {
        /// The name.
        name: String,
    },
}

/// Expands a hostlist, with at most [`DEFAULT_MAX_HOSTS`] hosts.
pub fn expand(list: &str) -> Result<Vec<String>, HostlistError> {
    expand_with_limit(list, DEFAULT_MAX_HOSTS)
}

/// Expands a hostlist, with at most `max` hosts.
pub fn expand_with_limit(list: &str, max: usize) -> Result<Vec<String>, HostlistError> {
    let mut out = Vec::new();
    let list_s = || list.to_string();
    if list.trim().is_empty() {
        return Ok(out);
    }
    for item in split_top(list)? {
        let item = item.trim();
        if item.is_empty() {
            return Err(HostlistError::Empty { list: list_s() });
        }
        // Parse the item into literal pieces and bracket groups.
        let mut parts: Vec<Vec<String>> = Vec::new();
        let mut rest = item;
        let mut count: usize = 1;
        while !rest.is_empty() {
            match rest.find('[') {
                None => {
                    parts.push(vec![rest.to_string()]);
                    rest = "";
                }
                Some(open) => {
                    if open > 0 {
                        parts.push(vec![rest[..open].to_string()]);
                    }
                    let close = rest[open..].find(']').map(|c| c + open).ok_or_else(|| {
                        HostlistError::Unbalanced {
                            list: list_s(),
                            pos: 0,
                        }
                    })?;
                    let group = expand_group(&rest[open + 1..close], list, max)?;
                    count = count.saturating_mul(group.len());
                    if out.len().saturating_add(count) > max {
                        return Err(HostlistError::TooMany {
                            list: list_s(),
                            max,
                        });
                    }
                    parts.push(group);
                    rest = &rest[close + 1..];
                }
            }
        }
        // Cartesian product, left to right.
        let mut hosts = vec![String::new()];
        for part in &parts {
            let mut next = Vec::with_capacity(hosts.len() * part.len());
            for h in &hosts {
                for p in part {
                    next.push(format!("{h}{p}"));
                }
            }
            hosts = next;
        }
        out.extend(hosts);
    }
    Ok(out)
}

/// Splits at commas outside brackets, checking bracket balance.
fn split_top(list: &str) -> Result<Vec<&str>, HostlistError> {
    let mut depth = 0usize;
    let mut start = 0;
    let mut items = Vec::new();
    for (i, b) in list.bytes().enumerate() {
        match b {
            b'[' if depth == 0 => depth = 1,
            b']' if depth == 1 => depth = 0,
            b'[' | b']' => {
                return Err(HostlistError::Unbalanced {
                    list: list.to_string(),
                    pos: i,
                })
            }
            b',' if depth == 0 => {
                items.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(HostlistError::Unbalanced {
            list: list.to_string(),
            pos: list.len(),
        });
    }
    items.push(&list[start..]);
    Ok(items)
}

/// Expands the inside of one bracket group: `01-04,7`.
fn expand_group(group: &str, list: &str, max: usize) -> Result<Vec<String>, HostlistError> {
    let mut out = Vec::new();
    for range in group.split(',') {
        let range = range.trim();
        let bad = || HostlistError::BadRange {
            list: list.to_string(),
            range: range.to_string(),
        };
        let (lo_s, hi_s) = range.split_once('-').unwrap_or((range, range));
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(lo_s) || !digits(hi_s) {
            return Err(bad());
        }
        let overflow = || HostlistError::Overflow {
            list: list.to_string(),
            range: range.to_string(),
        };
        let lo: u64 = lo_s.parse().map_err(|_| overflow())?;
        let hi: u64 = hi_s.parse().map_err(|_| overflow())?;
        if hi < lo {
            return Err(HostlistError::Reversed {
                list: list.to_string(),
                range: range.to_string(),
            });
        }
        let n = (hi - lo).saturating_add(1);
        if n > max as u64 || out.len() as u64 + n > max as u64 {
            return Err(HostlistError::TooMany {
                list: list.to_string(),
                max,
            });
        }
        let width = lo_s.len();
        for v in lo..=hi {
            out.push(format!("{v:0width$}"));
        }
    }
    Ok(out)
}

/// Splits `name` into (prefix, trailing digits); no digits → `None`.
fn split_num(name: &str) -> Option<(&str, &str)> {
    let start = name
        .bytes()
        .rposition(|b| !b.is_ascii_digit())
        .map_or(0, |p| p + 1);
    if start == name.len() {
        None
    } else {
        Some((&name[..start], &name[start..]))
    }
}

/// Compresses host names into a hostlist whose expansion is exactly `hosts`, in order.
///
/// Consecutive names with the same prefix and consecutive numbers (same padding) become
/// ranges; consecutive runs with the same prefix share one bracket group
/// (`node01,node02,node03,node7` → `node[01-03,7]`).
pub fn compress<S: AsRef<str>>(hosts: &[S]) -> Result<String, HostlistError> {
    struct Group<'a> {
        prefix: &'a str,
        ranges: Vec<(u64, u64, usize)>, // lo, hi, width
    }
    let mut groups: Vec<Either<'_>> = Vec::new();
    enum Either<'a> {
        Plain(&'a str),
        Num(Group<'a>),
    }
    for h in hosts {
        let h = h.as_ref();
        if h.is_empty() || h.contains(['[', ']', ',']) {
            return Err(HostlistError::BadHostName {
                name: h.to_string(),
            });
        }
        let parsed = split_num(h).and_then(|(p, d)| Some((p, d, d.parse::<u64>().ok()?)));
        let Some((prefix, digits, n)) = parsed else {
            groups.push(Either::Plain(h));
            continue;
        };
        if let Some(Either::Num(g)) = groups.last_mut() {
            if g.prefix == prefix {
                let last = g.ranges.last_mut().expect("groups are created non-empty");
                let (_, hi, width) = *last;
                if hi.checked_add(1) == Some(n) && format!("{n:0width$}") == digits {
                    last.1 = n;
                } else {
                    g.ranges.push((n, n, digits.len()));
                }
                continue;
            }
        }
        groups.push(Either::Num(Group {
            prefix,
            ranges: vec![(n, n, digits.len())],
        }));
    }
    let mut out = String::new();
    for (i, g) in groups.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        match g {
            Either::Plain(h) => out.push_str(h),
            Either::Num(g) => {
                let single = g.ranges.len() == 1 && g.ranges[0].0 == g.ranges[0].1;
                out.push_str(g.prefix);
                if !single {
                    out.push('[');
                }
                for (j, &(lo, hi, width)) in g.ranges.iter().enumerate() {
                    if j > 0 {
                        out.push(',');
                    }
                    let _ = write!(out, "{lo:0width$}");
                    if hi != lo {
                        let _ = write!(out, "-{hi:0width$}");
                    }
                }
                if !single {
                    out.push(']');
                }
            }
        }
    }
    Ok(out)
}

/// Why a `SLURM_TASKS_PER_NODE` value cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid SLURM_TASKS_PER_NODE \"{value}\": bad item \"{item}\" (expected N or N(xR), e.g. 2(x3),1)")]
pub struct TasksPerNodeError {
    /// The whole value.
    pub value: String,
    /// The offending item.
    pub item: String,
}

/// Expands Slurm's `SLURM_TASKS_PER_NODE` (`2(x3),1` → `[2, 2, 2, 1]`), with at most `max`
/// entries in total.
pub fn expand_tasks_per_node(value: &str, max: usize) -> Result<Vec<u32>, TasksPerNodeError> {
    let mut out = Vec::new();
    for item in value.split(',') {
        let item_t = item.trim();
        let bad = || TasksPerNodeError {
            value: value.to_string(),
            item: item_t.to_string(),
        };
        let num = |s: &str| -> Result<u64, TasksPerNodeError> {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            s.parse().map_err(|_| bad())
        };
        let (n, reps) = match item_t.split_once("(x") {
            Some((n, r)) => (num(n)?, num(r.strip_suffix(')').ok_or_else(bad)?)?),
            None => (num(item_t)?, 1),
        };
        let n = u32::try_from(n).map_err(|_| bad())?;
        if reps == 0 || reps > (max - out.len().min(max)) as u64 {
            return Err(bad());
        }
        out.extend(std::iter::repeat_n(n, reps as usize));
    }
    Ok(out)
}
