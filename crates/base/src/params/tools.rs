//! The MPI tools interface's view of the registry (MPI 4.1 §15.3.6, control variables): how
//! each registered parameter appears as a control variable — its C type, verbosity, scope,
//! enumeration and category. It is a view computed from the [`Registry`]'s entries, not a
//! second registry: reading a control variable reads the entry, writing one is
//! [`Registry::set`] (source `set`). The MPI library (`MPI_T_cvar_*`) and `oxmpi-info
//! --cvars` both use it, so they agree.

use super::registry::{Entry, Registry};
use super::{ParamType, Source};

/// The C type a control variable is read and written as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CvarType {
    /// `int` (`MPI_INT`): booleans (0/1), enumerations and integers that fit.
    Int,
    /// `MPI_Count` (`MPI_COUNT`): integers wider than `int`.
    Count,
    /// `unsigned long long` (`MPI_UNSIGNED_LONG_LONG`): byte counts.
    UnsignedLongLong,
    /// `char[]` (`MPI_CHAR`): text, lists and selections, NUL-terminated.
    Char,
}

impl CvarType {
    /// The type of a parameter of type `ty`.
    pub fn of(ty: &ParamType) -> Self {
        match *ty {
            ParamType::Bool | ParamType::Enum { .. } => CvarType::Int,
            ParamType::Int { min, max } if min >= i32::MIN as i64 && max <= i32::MAX as i64 => {
                CvarType::Int
            }
            ParamType::Int { .. } => CvarType::Count,
            ParamType::Size => CvarType::UnsignedLongLong,
            ParamType::String | ParamType::List | ParamType::Selection => CvarType::Char,
        }
    }

    /// The MPI datatype name (`MPI_INT`, ...), as tools print it.
    pub fn mpi_name(self) -> &'static str {
        match self {
            CvarType::Int => "MPI_INT",
            CvarType::Count => "MPI_COUNT",
            CvarType::UnsignedLongLong => "MPI_UNSIGNED_LONG_LONG",
            CvarType::Char => "MPI_CHAR",
        }
    }
}

/// Number of elements `MPI_T_cvar_handle_alloc` reports for a [`CvarType::Char`] variable:
/// the largest value (with its NUL) a read returns; longer values are truncated.
pub const CHAR_COUNT: usize = 1024;

/// The scope of a control variable: whether and how it may be changed (MPI 4.1 Table 15.4).
///
/// Before the MPI library starts (`MPI_T_init_thread` without `MPI_Init`) every settable
/// parameter may be written: the library reads it at `MPI_Init`. Once it runs, only the
/// parameters declared [`runtime`](super::ParamDecl::runtime()) stay writable (their readers
/// pick the new value up when the write returns); the others report
/// [`CvarScope::Constant`], so no variable claims to be writable and then refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CvarScope {
    /// Never changes (`MPI_T_SCOPE_CONSTANT`): a read-only parameter, or one read once at
    /// `MPI_Init` once the library runs.
    Constant,
    /// Locked by the override file: cannot be written (`MPI_T_SCOPE_READONLY`).
    Readonly,
    /// May differ per process (`MPI_T_SCOPE_LOCAL`): verbosity levels.
    Local,
    /// Must be the same on every process of the job (`MPI_T_SCOPE_ALL_EQ`): every
    /// parameter that shapes the protocol, transports or collectives.
    AllEq,
}

impl CvarScope {
    /// The scope of a registered entry, before the library started (`started == false`) or
    /// while it runs.
    pub fn of(e: &Entry, started: bool) -> Self {
        if e.decl.read_only || (started && !e.decl.runtime) {
            CvarScope::Constant
        } else if matches!(e.source, Source::Override { .. }) {
            CvarScope::Readonly
        } else if e.decl.component == "base" && e.decl.param == "verbose" {
            CvarScope::Local
        } else {
            CvarScope::AllEq
        }
    }

    /// Whether a write may succeed.
    pub fn writable(self) -> bool {
        matches!(self, CvarScope::Local | CvarScope::AllEq)
    }

    /// The constant's name without `MPI_T_SCOPE_` (`CONSTANT`, `READONLY`, `LOCAL`, `ALL_EQ`).
    pub fn name(self) -> &'static str {
        match self {
            CvarScope::Constant => "CONSTANT",
            CvarScope::Readonly => "READONLY",
            CvarScope::Local => "LOCAL",
            CvarScope::AllEq => "ALL_EQ",
        }
    }
}

/// The names of the nine `MPI_T_VERBOSITY_*` levels without the prefix, in order; a
/// parameter of level `l` (1–9: user, tuner, developer × basic, detail, all) has verbosity
/// `VERBOSITY_NAMES[l - 1]`.
pub const VERBOSITY_NAMES: [&str; 9] = [
    "USER_BASIC",
    "USER_DETAIL",
    "USER_ALL",
    "TUNER_BASIC",
    "TUNER_DETAIL",
    "TUNER_ALL",
    "MPIDEV_BASIC",
    "MPIDEV_DETAIL",
    "MPIDEV_ALL",
];

/// The verbosity index (0–8, into [`VERBOSITY_NAMES`]) of parameter level `level` (clamped
/// to 1–9).
pub fn verbosity_index(level: u8) -> usize {
    usize::from(level.clamp(1, 9) - 1)
}

/// The category a parameter belongs to: its framework for framework-wide parameters
/// (component `base`, the selection list), else `<framework>_<component>`.
pub fn category_of(e: &Entry) -> String {
    match e.decl.component {
        "" | "base" => e.decl.framework.to_string(),
        c => format!("{}_{c}", e.decl.framework),
    }
}

/// The enumeration values of a parameter (`(number, name)`), for enum and bool parameters.
pub fn enum_values(ty: &ParamType) -> Option<&'static [(i64, &'static str)]> {
    match *ty {
        ParamType::Enum { values, .. } => Some(values),
        ParamType::Bool => Some(&[(0, "false"), (1, "true")]),
        _ => None,
    }
}

/// A control variable's value as its C type sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CvarValue {
    /// [`CvarType::Int`] and [`CvarType::Count`].
    Int(i64),
    /// [`CvarType::UnsignedLongLong`].
    Unsigned(u64),
    /// [`CvarType::Char`] (without the NUL).
    Text(String),
}

/// The value of entry `e` as its control variable type.
pub fn cvar_value(e: &Entry) -> CvarValue {
    use super::Value;
    match &e.value {
        Value::Bool(b) => CvarValue::Int(i64::from(*b)),
        Value::Int(i) | Value::Enum(i) => CvarValue::Int(*i),
        Value::Size(s) => CvarValue::Unsigned(*s),
        _ => CvarValue::Text(e.rendered()),
    }
}

/// Writes control variable `name` from its C-typed value: the value is rendered as text and
/// goes through [`Registry::set`], so it is validated like any other source.
pub fn cvar_write(reg: &mut Registry, name: &str, v: &CvarValue) -> Result<(), super::ParamError> {
    let text = match v {
        CvarValue::Int(i) => i.to_string(),
        CvarValue::Unsigned(u) => u.to_string(),
        CvarValue::Text(t) => t.clone(),
    };
    reg.set(name, &text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::{ParamDecl, Sources};

    fn reg(decls: &'static [ParamDecl]) -> Registry {
        let mut r = Registry::new(Sources::default()).unwrap();
        r.register(decls).unwrap();
        r
    }

    static DECLS: &[ParamDecl] = &[
        ParamDecl::new("btl", "sm", "eager_limit", ParamType::Size, "4k", "x")
            .level(4)
            .runtime(),
        ParamDecl::verbose("btl"),
        ParamDecl::new("pml", "ox", "flag", ParamType::Bool, "true", "f"),
        ParamDecl::new("pml", "ox", "fixed", ParamType::String, "a", "r").read_only(),
        ParamDecl::new(
            "coll",
            "tuned",
            "n",
            ParamType::Int { min: 0, max: 9 },
            "3",
            "n",
        ),
        ParamDecl::new(
            "coll",
            "tuned",
            "w",
            ParamType::Int {
                min: 0,
                max: i64::MAX,
            },
            "3",
            "w",
        ),
    ];

    #[test]
    fn types_scopes_categories_and_verbosity() {
        let r = reg(DECLS);
        let e = |n: &str| r.get(n).unwrap().clone();
        let sm = e("btl_sm_eager_limit");
        assert_eq!(CvarType::of(&sm.decl.ty), CvarType::UnsignedLongLong);
        assert_eq!(cvar_value(&sm), CvarValue::Unsigned(4096));
        assert_eq!(category_of(&sm), "btl_sm");
        assert_eq!(
            VERBOSITY_NAMES[verbosity_index(sm.decl.level)],
            "TUNER_BASIC"
        );
        let v = e("btl_base_verbose");
        assert_eq!(CvarScope::of(&v, false), CvarScope::Local);
        assert_eq!(CvarScope::of(&v, true), CvarScope::Local);
        assert_eq!(CvarScope::of(&sm, true), CvarScope::AllEq);
        let flag = e("pml_ox_flag");
        assert_eq!(CvarScope::of(&flag, false), CvarScope::AllEq);
        assert_eq!(CvarScope::of(&flag, true), CvarScope::Constant);
        assert_eq!(category_of(&v), "btl");
        assert_eq!(cvar_value(&v), CvarValue::Int(0));
        assert!(enum_values(&v.decl.ty).unwrap().contains(&(100, "max")));
        assert_eq!(cvar_value(&e("pml_ox_flag")), CvarValue::Int(1));
        let fixed = e("pml_ox_fixed");
        assert_eq!(CvarScope::of(&fixed, false), CvarScope::Constant);
        assert!(!CvarScope::Constant.writable());
        assert_eq!(cvar_value(&fixed), CvarValue::Text("a".into()));
        assert_eq!(CvarType::of(&e("coll_tuned_n").decl.ty), CvarType::Int);
        assert_eq!(CvarType::of(&e("coll_tuned_w").decl.ty), CvarType::Count);
        assert_eq!(verbosity_index(0), 0);
        assert_eq!(verbosity_index(12), 8);
    }

    #[test]
    fn writes_go_through_the_registry() {
        let mut r = reg(DECLS);
        cvar_write(&mut r, "btl_sm_eager_limit", &CvarValue::Unsigned(8192)).unwrap();
        let e = r.get("btl_sm_eager_limit").unwrap();
        assert_eq!(cvar_value(e), CvarValue::Unsigned(8192));
        assert_eq!(e.source, Source::Api);
        cvar_write(&mut r, "btl_base_verbose", &CvarValue::Int(40)).unwrap();
        assert_eq!(r.get_int("btl_base_verbose"), Some(40));
        assert!(cvar_write(&mut r, "coll_tuned_n", &CvarValue::Int(10)).is_err());
        assert!(cvar_write(&mut r, "pml_ox_fixed", &CvarValue::Text("b".into())).is_err());
        assert!(cvar_write(&mut r, "no_such_name", &CvarValue::Int(1)).is_err());
    }
}
