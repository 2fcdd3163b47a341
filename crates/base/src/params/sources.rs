//! The inputs of the registry, gathered in one value so that tests can build them by hand.

use super::{ParamError, Source};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Environment prefix of parameters: `OXMPI_MCA_<name>`.
pub const ENV_PREFIX: &str = "OXMPI_MCA_";
/// Open MPI's spelling, accepted for the parameters we implement: `OMPI_MCA_<name>`.
pub const ENV_PREFIX_COMPAT: &str = "OMPI_MCA_";
/// Provenance companion set by `mpirun` for values it passes on:
/// `OXMPI_MCA_SOURCE_<name>=command` or `=tune:<path>:<line>`.
pub const SOURCE_PREFIX: &str = "OXMPI_MCA_SOURCE_";

/// Environment variable naming the install prefix for processes started by `mpirun`.
pub const PREFIX_ENV: &str = "OXMPI_PREFIX";

/// How files are read: from the real file system, or from an in-memory map (tests).
#[derive(Debug, Clone, Default)]
pub enum Files {
    /// Read from the file system.
    #[default]
    Real,
    /// Read from this map; a path not in it does not exist.
    Memory(BTreeMap<PathBuf, String>),
}

impl Files {
    /// Reads a whole file as text.
    pub fn read(&self, path: &Path) -> std::io::Result<String> {
        match self {
            Files::Real => std::fs::read_to_string(path),
            Files::Memory(m) => m.get(path).cloned().ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory")
            }),
        }
    }
}

/// Everything the registry reads values from.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// The process environment (only `OXMPI_MCA_*` / `OMPI_MCA_*` entries matter).
    pub env: Vec<(String, String)>,
    /// `--mca name value` pairs from this process's command line, in order.
    pub command_line: Vec<(String, String)>,
    /// `--tune` files, in order given.
    pub tune_files: Vec<PathBuf>,
    /// The home directory (`$HOME`), for `$HOME/.oxmpi/mca-params.conf`.
    pub home: Option<PathBuf>,
    /// The install prefix, for `PREFIX/etc/*.conf`.
    pub prefix: Option<PathBuf>,
    /// How files are read.
    pub files: Files,
}

impl Sources {
    /// Sources of the current process: its environment, `$HOME`, and the install prefix:
    /// `$OXMPI_PREFIX` if set (`mpirun` sets it for the processes it starts, whose executable
    /// is not in the prefix), else derived from the executable path (`<prefix>/bin/x` →
    /// `<prefix>`); no command line.
    pub fn from_process() -> Self {
        let env: Vec<(String, String)> = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        let home = std::env::var_os("HOME").map(PathBuf::from);
        Sources {
            env,
            command_line: Vec::new(),
            tune_files: Vec::new(),
            home,
            prefix: std::env::var_os(PREFIX_ENV)
                .filter(|p| !p.is_empty())
                .map(PathBuf::from)
                .or_else(prefix_from_exe),
            files: Files::Real,
        }
    }

    /// Looks up an environment variable in [`Sources::env`] (the last definition wins).
    pub fn env_var(&self, key: &str) -> Option<&str> {
        self.env
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The override file path, when the prefix is known.
    pub fn override_file(&self) -> Option<PathBuf> {
        self.prefix
            .as_ref()
            .map(|p| p.join("etc").join("oxmpi-mca-params-override.conf"))
    }
}

/// The install prefix of the running executable: `<prefix>/bin/<exe>` → `<prefix>`.
pub fn prefix_from_exe() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let exe = exe.canonicalize().unwrap_or(exe);
    let bin = exe.parent()?;
    Some(bin.parent()?.to_path_buf())
}

/// One `name = value` entry of a file, with where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileEntry {
    pub name: String,
    pub value: String,
    pub source: Source,
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

/// Parses a parameter or override file: `name = value` lines, `#` comments, blank lines.
/// A value may be wrapped in double quotes. `make_source` builds the source of line `n`.
pub(crate) fn parse_param_file(
    text: &str,
    path: &Path,
    kind: &'static str,
    make_source: impl Fn(u32) -> Source,
) -> Result<Vec<FileEntry>, ParamError> {
    let mut out = Vec::new();
    for (i, raw) in (1u32..).zip(text.lines()) {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let malformed = || ParamError::MalformedLine {
            kind,
            path: path.to_path_buf(),
            line: i,
            text: raw.to_string(),
            expected: "`name = value`",
        };
        let (name, value) = line.split_once('=').ok_or_else(malformed)?;
        let name = name.trim();
        if !valid_name(name) {
            return Err(malformed());
        }
        let mut value = value.trim();
        if value.len() >= 2 && value.starts_with('"') && value.ends_with('"') {
            value = &value[1..value.len() - 1];
        }
        out.push(FileEntry {
            name: name.to_string(),
            value: value.to_string(),
            source: make_source(i),
        });
    }
    Ok(out)
}

/// What a `--tune` file holds: parameters and environment exports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TuneFile {
    pub params: Vec<FileEntry>,
    /// `-x VAR` (None: forward the current value) or `-x VAR=value`.
    pub exports: Vec<(String, Option<String>)>,
}

/// Parses a tune file: whitespace-separated `--mca name value` (or `-mca`) and `-x VAR[=value]`
/// items, `#` comments.
pub(crate) fn parse_tune_file(text: &str, path: &Path) -> Result<TuneFile, ParamError> {
    let mut out = TuneFile::default();
    for (i, raw) in (1u32..).zip(text.lines()) {
        let line = raw.split('#').next().unwrap_or("").trim();
        let malformed = || ParamError::MalformedLine {
            kind: "tune file",
            path: path.to_path_buf(),
            line: i,
            text: raw.to_string(),
            expected: "`--mca name value` or `-x VAR[=value]` items",
        };
        let mut toks = line.split_whitespace();
        while let Some(t) = toks.next() {
            match t {
                "--mca" | "-mca" => {
                    let (Some(name), Some(value)) = (toks.next(), toks.next()) else {
                        return Err(malformed());
                    };
                    if !valid_name(name) {
                        return Err(malformed());
                    }
                    out.params.push(FileEntry {
                        name: name.to_string(),
                        value: value.to_string(),
                        source: Source::Tune {
                            path: path.to_path_buf(),
                            line: i,
                        },
                    });
                }
                "-x" => {
                    let Some(var) = toks.next() else {
                        return Err(malformed());
                    };
                    match var.split_once('=') {
                        Some((k, v)) if !k.is_empty() => {
                            out.exports.push((k.to_string(), Some(v.to_string())))
                        }
                        None => out.exports.push((var.to_string(), None)),
                        Some(_) => return Err(malformed()),
                    }
                }
                _ => return Err(malformed()),
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn src(line: u32) -> Source {
        Source::File {
            path: PathBuf::from("/f"),
            line,
        }
    }

    proptest! {
        /// Any set of `name = value` lines, with random spacing, comments, blank lines and
        /// optional quotes, parses back to the same names, values and line numbers.
        #[test]
        fn param_file_roundtrip(
            entries in proptest::collection::vec(
                ("[a-z][a-z0-9_]{0,12}", "[A-Za-z0-9_,./:^ -]{0,16}", 0usize..3, any::<bool>(), any::<bool>()),
                0..12,
            )
        ) {
            let mut text = String::new();
            let mut expect = Vec::new();
            let mut line = 0u32;
            for (name, value, pad, quote, comment_before) in &entries {
                if *comment_before {
                    text.push_str("  # a comment = with equals\n\n");
                    line += 2;
                }
                let sp = " ".repeat(*pad);
                let shown = if *quote { format!("\"{value}\"") } else { value.clone() };
                text.push_str(&format!("{sp}{name}{sp}={sp}{shown}{sp}\n"));
                line += 1;
                let v = if *quote { value.as_str() } else { value.trim() };
                expect.push(FileEntry { name: name.clone(), value: v.to_string(), source: src(line) });
            }
            let got = parse_param_file(&text, Path::new("/f"), "parameter file", src).unwrap();
            prop_assert_eq!(got, expect);
        }

        /// Lines without `=` (and not comments) are always rejected with their line number.
        #[test]
        fn param_file_rejects_lines_without_equals(good in 0u32..5, bad in "[a-z ]{1,10}[a-z]") {
            let mut text = "a = 1\n".repeat(good as usize);
            text.push_str(&bad);
            let err = parse_param_file(&text, Path::new("/f"), "parameter file", src).unwrap_err();
            let is_expected = matches!(err, ParamError::MalformedLine { line, .. } if line == good + 1);
            prop_assert!(is_expected);
        }

        /// Tune files: any sequence of --mca and -x items parses to the same items.
        #[test]
        fn tune_file_roundtrip(
            items in proptest::collection::vec(
                (any::<bool>(), "[a-z][a-z_]{0,8}", "[a-z0-9]{1,6}"),
                0..10,
            )
        ) {
            let mut text = String::new();
            let mut params = Vec::new();
            let mut exports = Vec::new();
            for (i, (is_mca, k, v)) in items.iter().enumerate() {
                if *is_mca {
                    text.push_str(&format!("--mca {k} {v}"));
                    params.push((k.clone(), v.clone()));
                } else {
                    text.push_str(&format!("-x {k}={v}"));
                    exports.push((k.clone(), Some(v.clone())));
                }
                text.push(if i % 3 == 2 { '\n' } else { ' ' });
            }
            let t = parse_tune_file(&text, Path::new("/t")).unwrap();
            let got: Vec<(String, String)> = t.params.into_iter().map(|e| (e.name, e.value)).collect();
            prop_assert_eq!(got, params);
            prop_assert_eq!(t.exports, exports);
        }
    }
}
