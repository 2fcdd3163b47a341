//! Parameter types, typed values and the parsers that turn text into values.
//!
//! Every parser is pure (text in, value or [`ValueError`] out) so that the registry can attach
//! the parameter name and the source to an error afterwards.

use std::fmt;

/// The type of an MCA parameter, with what it needs to validate a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    /// `true`/`false` (also `1`/`0`, `yes`/`no`, `on`/`off`, `enabled`/`disabled`).
    Bool,
    /// A signed 64-bit integer within `min..=max` (decimal, or hex with `0x`).
    Int {
        /// Smallest accepted value.
        min: i64,
        /// Largest accepted value.
        max: i64,
    },
    /// A byte count: an unsigned integer with an optional binary suffix `k`, `m`, `g`, `t`
    /// (powers of 1024, case-insensitive, optionally followed by `b` or `ib`).
    Size,
    /// Free text.
    String,
    /// A named value: one of `values` (by name or by number), or any integer in `range` when set.
    Enum {
        /// The named values, as (number, name).
        values: &'static [(i64, &'static str)],
        /// Integers accepted besides the named ones (inclusive), e.g. verbosity `0..=100`.
        range: Option<(i64, i64)>,
    },
    /// A comma-separated list of words (empty items are dropped).
    List,
    /// A component selection list: `a,b,c` (include) or `^a,b` (exclude everything listed).
    Selection,
}

impl ParamType {
    /// The Open MPI type name `ompi_info` prints for this type.
    pub fn ompi_name(&self) -> &'static str {
        match self {
            ParamType::Bool => "bool",
            ParamType::Int { .. } | ParamType::Enum { .. } => "int",
            ParamType::Size => "size_t",
            ParamType::String | ParamType::List | ParamType::Selection => "string",
        }
    }

    /// Parses `text` as a value of this type.
    pub fn parse(&self, text: &str) -> Result<Value, ValueError> {
        match *self {
            ParamType::Bool => parse_bool(text).map(Value::Bool),
            ParamType::Int { min, max } => {
                let v = parse_int(text)?;
                if v < min || v > max {
                    return Err(ValueError::OutOfRange {
                        valid: self.describe_valid(),
                    });
                }
                Ok(Value::Int(v))
            }
            ParamType::Size => parse_size(text).map(Value::Size),
            ParamType::String => Ok(Value::String(text.to_string())),
            ParamType::Enum { values, range } => parse_enum(text, values, range).map(Value::Enum),
            ParamType::List => Ok(Value::List(parse_list(text))),
            ParamType::Selection => parse_selection(text).map(Value::Selection),
        }
    }

    /// A short, human-readable description of the accepted values (used in errors and in
    /// `oxmpi-info`'s "Valid values" line).
    pub fn describe_valid(&self) -> String {
        match *self {
            ParamType::Bool => "true|false (or 1|0, yes|no, on|off, enabled|disabled)".into(),
            ParamType::Int { min, max } => {
                if min == i64::MIN && max == i64::MAX {
                    "an integer".into()
                } else {
                    format!("an integer in {min}..{max}")
                }
            }
            ParamType::Size => "a byte count like 4096, 4k, 1m or 2g".into(),
            ParamType::String => "any text".into(),
            ParamType::Enum { values, range } => describe_enum(values, range),
            ParamType::List => "a comma-separated list".into(),
            ParamType::Selection => {
                "a comma-separated list of components, optionally starting with ^ to exclude them"
                    .into()
            }
        }
    }
}

/// A typed parameter value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A byte count.
    Size(u64),
    /// Text.
    String(String),
    /// The number of an enum value (see [`ParamType::Enum`]).
    Enum(i64),
    /// A list of words.
    List(Vec<String>),
    /// A component selection list.
    Selection(Selection),
}

impl Value {
    /// The boolean, if this is a [`Value::Bool`].
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The number, if this is a [`Value::Int`] or [`Value::Enum`].
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) | Value::Enum(i) => Some(*i),
            _ => None,
        }
    }

    /// The byte count, if this is a [`Value::Size`].
    pub fn as_size(&self) -> Option<u64> {
        match self {
            Value::Size(s) => Some(*s),
            _ => None,
        }
    }

    /// The text, if this is a [`Value::String`].
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The items, if this is a [`Value::List`].
    pub fn as_list(&self) -> Option<&[String]> {
        match self {
            Value::List(l) => Some(l),
            _ => None,
        }
    }

    /// The selection, if this is a [`Value::Selection`].
    pub fn as_selection(&self) -> Option<&Selection> {
        match self {
            Value::Selection(s) => Some(s),
            _ => None,
        }
    }

    /// Renders the value the way `oxmpi-info` shows it and the way it is passed on in the
    /// environment; parsing the result with the same type yields the same value.
    pub fn render(&self, ty: &ParamType) -> String {
        match self {
            Value::Bool(b) => b.to_string(),
            Value::Int(i) => i.to_string(),
            Value::Size(s) => s.to_string(),
            Value::String(s) => s.clone(),
            Value::Enum(n) => {
                if let ParamType::Enum { values, .. } = ty {
                    if let Some((_, name)) = values.iter().find(|(v, _)| v == n) {
                        return (*name).to_string();
                    }
                }
                n.to_string()
            }
            Value::List(l) => l.join(","),
            Value::Selection(s) => s.to_string(),
        }
    }
}

/// A component selection list (`btl=self,sm` or `btl=^tcp`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selection {
    /// `true` for `^a,b` (use every component except these).
    pub exclude: bool,
    /// The components named, in order.
    pub names: Vec<String>,
}

impl Selection {
    /// `true` when the list names no component (every available component may be used).
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Whether the list allows `component` (an empty list allows everything).
    pub fn allows(&self, component: &str) -> bool {
        if self.names.is_empty() {
            return true;
        }
        self.names.iter().any(|n| n == component) != self.exclude
    }
}

impl fmt::Display for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.exclude {
            f.write_str("^")?;
        }
        f.write_str(&self.names.join(","))
    }
}

/// Why a text could not be parsed as a value; the registry adds parameter, value and source.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// The text does not have the expected shape.
    #[error("expected {valid}")]
    Unparsable {
        /// What would have been accepted.
        valid: String,
    },
    /// The number is outside the accepted range.
    #[error("out of range, expected {valid}")]
    OutOfRange {
        /// What would have been accepted.
        valid: String,
    },
    /// An enum name that is not one of the known names.
    #[error("unknown name, expected one of {valid}")]
    UnknownName {
        /// What would have been accepted.
        valid: String,
    },
    /// `^` somewhere other than at the very start of a selection list.
    #[error("'^' may only appear once, at the start of the list (e.g. ^tcp,openib)")]
    MisplacedNegation,
}

/// Parses a boolean (`true/false/1/0/yes/no/on/off/enabled/disabled`, case-insensitive).
pub fn parse_bool(text: &str) -> Result<bool, ValueError> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" | "enabled" | "t" | "y" => Ok(true),
        "0" | "false" | "no" | "off" | "disabled" | "f" | "n" => Ok(false),
        _ => Err(ValueError::Unparsable {
            valid: ParamType::Bool.describe_valid(),
        }),
    }
}

/// Parses a signed integer (decimal, or hexadecimal with a `0x` prefix).
pub fn parse_int(text: &str) -> Result<i64, ValueError> {
    let t = text.trim();
    let (neg, body) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let unparsable = || ValueError::Unparsable {
        valid: "an integer".into(),
    };
    let magnitude: u64 =
        if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
            if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(unparsable());
            }
            u64::from_str_radix(hex, 16).map_err(|_| ValueError::OutOfRange {
                valid: "an integer that fits in 64 bits".into(),
            })?
        } else {
            if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit()) {
                return Err(unparsable());
            }
            body.parse::<u64>().map_err(|_| ValueError::OutOfRange {
                valid: "an integer that fits in 64 bits".into(),
            })?
        };
    let v = if neg {
        if magnitude > i64::MAX as u64 + 1 {
            None
        } else {
            Some((magnitude as i128).wrapping_neg() as i64)
        }
    } else {
        i64::try_from(magnitude).ok()
    };
    v.ok_or(ValueError::OutOfRange {
        valid: "an integer that fits in 64 bits".into(),
    })
}

/// Parses a byte count with an optional binary suffix: `4096`, `4k`, `4K`, `4kb`, `4KiB`,
/// `1m`, `2g`, `1t`.
pub fn parse_size(text: &str) -> Result<u64, ValueError> {
    let t = text.trim();
    let digits_end = t
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(digits_end);
    let unparsable = || ValueError::Unparsable {
        valid: ParamType::Size.describe_valid(),
    };
    if num.is_empty() {
        return Err(unparsable());
    }
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(unparsable()),
    };
    let too_big = || ValueError::OutOfRange {
        valid: "a byte count that fits in 64 bits".into(),
    };
    let n: u64 = num.parse().map_err(|_| too_big())?;
    n.checked_mul(1u64 << shift).ok_or_else(too_big)
}

/// Parses an enum value by name (case-insensitive) or by number.
pub fn parse_enum(
    text: &str,
    values: &[(i64, &str)],
    range: Option<(i64, i64)>,
) -> Result<i64, ValueError> {
    let t = text.trim();
    if let Some((n, _)) = values.iter().find(|(_, name)| name.eq_ignore_ascii_case(t)) {
        return Ok(*n);
    }
    let describe = || describe_enum(values, range);
    match parse_int(t) {
        Ok(n) => {
            let named = values.iter().any(|(v, _)| *v == n);
            let in_range = range.is_some_and(|(lo, hi)| n >= lo && n <= hi);
            if named || in_range {
                Ok(n)
            } else {
                Err(ValueError::OutOfRange { valid: describe() })
            }
        }
        Err(_) => Err(ValueError::UnknownName { valid: describe() }),
    }
}

fn describe_enum(values: &[(i64, &str)], range: Option<(i64, i64)>) -> String {
    let mut s: Vec<String> = values.iter().map(|(n, v)| format!("{n}|{v}")).collect();
    if let Some((lo, hi)) = range {
        s.push(format!("{lo}-{hi}"));
    }
    s.join(", ")
}

/// Splits a comma-separated list, trimming items and dropping empty ones.
pub fn parse_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Parses a component selection list (`a,b` or `^a,b`); `^` anywhere else is an error.
pub fn parse_selection(text: &str) -> Result<Selection, ValueError> {
    let t = text.trim();
    let (exclude, rest) = match t.strip_prefix('^') {
        Some(r) => (true, r),
        None => (false, t),
    };
    if rest.contains('^') {
        return Err(ValueError::MisplacedNegation);
    }
    Ok(Selection {
        exclude,
        names: parse_list(rest),
    })
}

/// The Open MPI label for a level 1–9 (`user/basic` … `dev/all`).
pub fn level_name(level: u8) -> &'static str {
    const NAMES: [&str; 9] = [
        "user/basic",
        "user/detail",
        "user/all",
        "tuner/basic",
        "tuner/detail",
        "tuner/all",
        "dev/basic",
        "dev/detail",
        "dev/all",
    ];
    NAMES
        .get(usize::from(level.clamp(1, 9)) - 1)
        .copied()
        .unwrap_or("user/basic")
}
