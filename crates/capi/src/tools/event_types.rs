//! The event types of the tools interface (see `event` for the functions): their names,
//! categories and element layouts, in index order.

use crate::consts::{MPI_CHAR, MPI_INT, MPI_UNSIGNED, MPI_UNSIGNED_LONG_LONG};
use oxmpi_base::events::Kind;
use std::ffi::c_int;
use std::sync::OnceLock;

/// Bytes of a transport name, with its NUL.
pub(crate) const NAME_CHARS: usize = 16;
/// Bytes of a verbose line's text, with its NUL.
pub(crate) const LINE_CHARS: usize = 252;
/// The largest event data.
pub(crate) const DATA_MAX: usize = 256;

/// One event type.
#[derive(Debug)]
pub(crate) struct EventType {
    pub name: String,
    pub desc: String,
    pub kind: Kind,
    /// The framework of a verbose-line type.
    pub framework: Option<&'static str>,
    pub category: String,
    pub level: u8,
    /// `(datatype, displacement)` of each element.
    pub elems: Vec<(c_int, usize)>,
    /// Bytes `MPI_T_event_copy` writes.
    pub size: usize,
}

/// The elements of `kind`: `(datatype, displacement)`, and the data's size.
pub(crate) fn layout(kind: Kind) -> (Vec<(c_int, usize)>, usize) {
    let text = |at: usize, n: usize| (0..n).map(move |i| (MPI_CHAR, at + i));
    match kind {
        Kind::ProcFailed => (vec![(MPI_INT, 0)], 4),
        Kind::Transport => (
            std::iter::once((MPI_INT, 0))
                .chain(text(4, NAME_CHARS))
                .collect(),
            4 + NAME_CHARS,
        ),
        Kind::Unexpected => (
            vec![
                (MPI_INT, 0),
                (MPI_INT, 4),
                (MPI_UNSIGNED, 8),
                (MPI_UNSIGNED_LONG_LONG, 16),
            ],
            24,
        ),
        Kind::Rendezvous => (
            [
                (MPI_INT, 0),
                (MPI_UNSIGNED_LONG_LONG, 8),
                (MPI_UNSIGNED_LONG_LONG, 16),
            ]
            .into_iter()
            .chain(text(24, NAME_CHARS))
            .collect(),
            24 + NAME_CHARS,
        ),
        Kind::CopyChoice => (
            [(MPI_INT, 0), (MPI_UNSIGNED_LONG_LONG, 8)]
                .into_iter()
                .chain(text(16, NAME_CHARS))
                .chain(text(16 + NAME_CHARS, NAME_CHARS))
                .chain(text(16 + 2 * NAME_CHARS, NAME_CHARS))
                .collect(),
            16 + 3 * NAME_CHARS,
        ),
        Kind::VerboseLine => (
            std::iter::once((MPI_INT, 0))
                .chain(text(4, LINE_CHARS))
                .collect(),
            4 + LINE_CHARS,
        ),
    }
}

/// The size in bytes of an element of datatype `dt`.
pub(crate) fn elem_size(dt: c_int) -> usize {
    match dt {
        MPI_CHAR => 1,
        MPI_UNSIGNED_LONG_LONG => 8,
        _ => 4,
    }
}

/// Every event type, in index order (fixed after the first call, which must come after
/// `MPI_T_init_thread` registered the library's frameworks).
pub(crate) fn types() -> &'static [EventType] {
    static ALL: OnceLock<Vec<EventType>> = OnceLock::new();
    ALL.get_or_init(|| {
        let ty = |name: &str, desc: &str, kind, category: &str, level| {
            let (elems, size) = layout(kind);
            EventType {
                name: name.into(),
                desc: desc.into(),
                kind,
                framework: None,
                category: category.into(),
                level,
                elems,
                size,
            }
        };
        let mut v = vec![
            ty(
                "pml_ox_proc_failed",
                "A peer process was found dead; its operations fail with MPI_ERR_PROC_FAILED (int rank: its world rank)",
                Kind::ProcFailed,
                "pml_ox",
                1,
            ),
            ty(
                "btl_transport_chosen",
                "The transport reaching a peer, once per peer when the job wires up (int peer: world rank; char transport[16]: self, sm, tcp, ofi or none)",
                Kind::Transport,
                "btl",
                4,
            ),
            ty(
                "pml_ox_unexpected_arrival",
                "A message arrived before a matching receive was posted and was queued (int source: rank in the communicator; int tag; unsigned context: context id; unsigned long long bytes)",
                Kind::Unexpected,
                "pml_ox",
                5,
            ),
            ty(
                "pml_ox_rndv_first",
                "The sends to a peer switched from eager to rendezvous: the first message to it above the eager limit, once per peer (int peer: world rank; unsigned long long bytes; unsigned long long eager_limit: the limit in force for the peer; char transport[16])",
                Kind::Rendezvous,
                "pml_ox",
                4,
            ),
            ty(
                "pml_ox_copy_choice",
                "How the data of a rendezvous message from a peer moved: the first such receive from each peer and every switch of mechanism (int peer: world rank; unsigned long long bytes; char mechanism[16]: cma, coop or rma (single copies) or pipelined; char previous[16]: the previous receive's mechanism, none for the first; char transport[16])",
                Kind::CopyChoice,
                "pml_ox",
                4,
            ),
        ];
        let frameworks: Vec<&'static str> = oxmpi_base::params::global()
            .map(|r| r.frameworks().map(|f| f.name).collect())
            .unwrap_or_default();
        for fw in frameworks {
            let mut t = ty(
                &format!("{fw}_verbose_line"),
                &format!("A line of the {fw} framework's verbose stream, at the verbosity {fw}_base_verbose sets (int level; char text[252])"),
                Kind::VerboseLine,
                fw,
                7,
            );
            t.framework = Some(fw);
            v.push(t);
        }
        v
    })
}

/// The category of every event type, in index order.
pub(crate) fn type_categories() -> impl Iterator<Item = &'static str> {
    types().iter().map(|t| t.category.as_str())
}
