//! The registry: resolves every declared parameter across all sources, remembers provenance.

use super::sources::{parse_param_file, parse_tune_file, FileEntry};
use super::{
    Framework, ParamDecl, ParamError, ParamType, Provider, Source, Sources, Value, BASE_PARAMS,
    ENV_PREFIX, ENV_PREFIX_COMPAT, PARAM_FILES, SOURCE_PREFIX,
};
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// A registered parameter with its effective value and where that value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The declaration.
    pub decl: ParamDecl,
    /// The effective value.
    pub value: Value,
    /// Where the value came from.
    pub source: Source,
}

impl Entry {
    /// The value as text (enum values by name).
    pub fn rendered(&self) -> String {
        self.value.render(&self.decl.ty)
    }
}

/// A non-fatal problem found while resolving parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamWarning {
    /// A value ignored because the override file locks the parameter.
    Locked(ParamError),
    /// A value ignored because the parameter is read-only.
    ReadOnly(ParamError),
    /// A parameter file that exists but cannot be read.
    UnreadableFile(ParamError),
}

impl fmt::Display for ParamWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamWarning::Locked(e)
            | ParamWarning::ReadOnly(e)
            | ParamWarning::UnreadableFile(e) => {
                write!(f, "warning: {e}")
            }
        }
    }
}

/// An `OXMPI_MCA_` variable, a `--mca` name or a misspelled `OMPI_MCA_` variable naming no
/// registered parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownParam {
    /// The variable, e.g. `OXMPI_MCA_btl_base_verbos`, or `--mca` for the command line.
    pub var: String,
    /// The parameter name it spells.
    pub name: String,
    /// Registered names closest to it (edit distance), best first, at most three.
    pub suggestions: Vec<String>,
}

impl UnknownParam {
    /// The line for `mca_base_param_check=error`, where the name is an error, not ignored:
    /// the [`Display`](fmt::Display) line without "(ignored)".
    pub fn as_error(&self) -> String {
        let mut s = String::new();
        let _ = self.write(&mut s, false);
        s
    }

    fn write(&self, f: &mut dyn fmt::Write, ignored: bool) -> fmt::Result {
        if self.var == "--mca" {
            write!(f, "--mca names unknown MCA parameter \"{}\"", self.name)?;
        } else {
            write!(
                f,
                "environment variable {} names unknown MCA parameter \"{}\"",
                self.var, self.name
            )?;
        }
        if ignored {
            f.write_str(" (ignored)")?;
        }
        if self.suggestions.is_empty() {
            Ok(())
        } else {
            let sep = if ignored { ";" } else { "," };
            write!(f, "{sep} did you mean {}?", self.suggestions.join(" or "))
        }
    }
}

impl fmt::Display for UnknownParam {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, true)
    }
}

/// Result of [`Registry::check_environment`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvReport {
    /// `OXMPI_MCA_` variables naming unknown parameters: warn about these.
    pub unknown: Vec<UnknownParam>,
    /// `OMPI_MCA_` variables naming parameters we do not implement: ignored, worth a verbose line.
    pub ignored_compat: Vec<String>,
}

type Layer = BTreeMap<String, (String, Source)>;

/// The parameter registry: declarations, the raw values of every source, and the resolved
/// values with provenance.
#[derive(Debug)]
pub struct Registry {
    sources: Sources,
    overrides: Layer,
    command_line: Layer,
    env: Layer,
    tune: Layer,
    files: Layer,
    tune_exports: Vec<(String, Option<String>)>,
    compat_env: Vec<String>,
    native_env: Vec<String>,
    params: BTreeMap<String, Entry>,
    frameworks: BTreeMap<&'static str, Framework>,
    warnings: Vec<ParamWarning>,
}

impl Registry {
    /// Reads every source (command line, environment, override, tune and parameter files) and
    /// registers the `mca_base_*` parameters.
    ///
    /// Errors: a key given twice on the command line with different values, a malformed line in
    /// any file, an unreadable `--tune` file, or a bad value of an `mca_base_*` parameter.
    pub fn new(sources: Sources) -> Result<Self, ParamError> {
        let mut reg = Registry {
            sources,
            overrides: Layer::new(),
            command_line: Layer::new(),
            env: Layer::new(),
            tune: Layer::new(),
            files: Layer::new(),
            tune_exports: Vec::new(),
            compat_env: Vec::new(),
            native_env: Vec::new(),
            params: BTreeMap::new(),
            frameworks: BTreeMap::new(),
            warnings: Vec::new(),
        };
        reg.read_command_line()?;
        reg.read_env();
        reg.read_override()?;
        reg.read_tune()?;
        reg.read_param_files()?;
        reg.register(BASE_PARAMS)?;
        Ok(reg)
    }

    fn read_command_line(&mut self) -> Result<(), ParamError> {
        for (name, value) in &self.sources.command_line {
            match self.command_line.get(name) {
                Some((first, _)) if first != value => {
                    return Err(ParamError::DuplicateCommandLine {
                        name: name.clone(),
                        first: first.clone(),
                        second: value.clone(),
                    })
                }
                Some(_) => {}
                None => {
                    self.command_line
                        .insert(name.clone(), (value.clone(), Source::CommandLine));
                }
            }
        }
        Ok(())
    }

    fn read_env(&mut self) {
        let markers: BTreeMap<&str, &str> = self
            .sources
            .env
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(SOURCE_PREFIX)?, v.as_str())))
            .collect();
        let mut compat = Layer::new();
        for (k, v) in &self.sources.env {
            if k.starts_with(SOURCE_PREFIX) || k.starts_with("OMPI_MCA_SOURCE_") {
                continue;
            }
            if let Some(name) = k.strip_prefix(ENV_PREFIX) {
                let source = match markers.get(name) {
                    Some(&"command") => Source::CommandLine,
                    Some(m) => parse_marker(m).unwrap_or(Source::Environment { var: k.clone() }),
                    None => Source::Environment { var: k.clone() },
                };
                self.native_env.push(name.to_string());
                self.env.insert(name.to_string(), (v.clone(), source));
            } else if let Some(name) = k.strip_prefix(ENV_PREFIX_COMPAT) {
                self.compat_env.push(name.to_string());
                compat.insert(
                    name.to_string(),
                    (v.clone(), Source::Environment { var: k.clone() }),
                );
            }
        }
        for (name, entry) in compat {
            self.env.entry(name).or_insert(entry);
        }
    }

    fn read_override(&mut self) -> Result<(), ParamError> {
        let Some(path) = self.sources.override_file() else {
            return Ok(());
        };
        let Ok(text) = self.sources.files.read(&path) else {
            return Ok(());
        };
        let p = path.clone();
        let entries = parse_param_file(&text, &path, "override file", |line| Source::Override {
            path: p.clone(),
            line,
        })?;
        insert_last_wins(&mut self.overrides, entries);
        Ok(())
    }

    fn read_tune(&mut self) -> Result<(), ParamError> {
        for path in self.sources.tune_files.clone() {
            let text = self
                .sources
                .files
                .read(&path)
                .map_err(|e| ParamError::UnreadableFile {
                    kind: "tune file",
                    path: path.clone(),
                    reason: e.to_string(),
                })?;
            let tune = parse_tune_file(&text, &path)?;
            for e in tune.params {
                self.tune.entry(e.name).or_insert((e.value, e.source));
            }
            self.tune_exports.extend(tune.exports);
        }
        Ok(())
    }

    fn read_param_files(&mut self) -> Result<(), ParamError> {
        const NAME: &str = "mca_base_param_files";
        let decl = PARAM_FILES;
        let (text, source) = [&self.overrides, &self.command_line, &self.env, &self.tune]
            .into_iter()
            .find_map(|l| l.get(NAME).cloned())
            .unwrap_or_else(|| (self.expand_default(&decl), Source::Default));
        let list = match decl.ty.parse(&text) {
            Ok(Value::List(l)) => l,
            Ok(_) => Vec::new(),
            Err(reason) => {
                return Err(ParamError::InvalidValue {
                    name: NAME.into(),
                    value: text,
                    origin: source,
                    reason,
                })
            }
        };
        // Read right to left so that the left-most file wins.
        for file in list.iter().rev() {
            let path = PathBuf::from(file);
            let text = match self.sources.files.read(&path) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    self.warnings
                        .push(ParamWarning::UnreadableFile(ParamError::UnreadableFile {
                            kind: "parameter file",
                            path: path.clone(),
                            reason: e.to_string(),
                        }));
                    continue;
                }
            };
            let p = path.clone();
            let entries = parse_param_file(&text, &path, "parameter file", |line| Source::File {
                path: p.clone(),
                line,
            })?;
            insert_last_wins(&mut self.files, entries);
        }
        Ok(())
    }

    /// The default of `decl` with `${HOME}`/`${PREFIX}` substituted; list items whose
    /// placeholder is unknown are dropped.
    fn expand_default(&self, decl: &ParamDecl) -> String {
        if !decl.default.contains("${") {
            return decl.default.to_string();
        }
        let home = self.sources.home.as_ref().map(|p| p.display().to_string());
        let prefix = self
            .sources
            .prefix
            .as_ref()
            .map(|p| p.display().to_string());
        let expand = |item: &str| -> Option<String> {
            let mut s = item.to_string();
            for (key, val) in [("${HOME}", &home), ("${PREFIX}", &prefix)] {
                if s.contains(key) {
                    s = s.replace(key, val.as_deref()?);
                }
            }
            Some(s)
        };
        if matches!(decl.ty, ParamType::List) {
            decl.default
                .split(',')
                .filter_map(expand)
                .collect::<Vec<_>>()
                .join(",")
        } else {
            expand(decl.default).unwrap_or_default()
        }
    }

    /// Registers every framework and parameter of a provider. For each framework this also
    /// registers its selection list and `<framework>_base_verbose`.
    pub fn register_provider(&mut self, provider: &Provider) -> Result<(), ParamError> {
        let mut first_err = None;
        for fw in provider.frameworks {
            self.frameworks.insert(fw.name, *fw);
            let r = self.register(&[ParamDecl::selection(fw.name), ParamDecl::verbose(fw.name)]);
            first_err = first_err.or(r.err());
        }
        let r = self.register(provider.params);
        first_err.or(r.err()).map_or(Ok(()), Err)
    }

    /// Registers declarations and resolves their values. Registering an identical declaration
    /// again is a no-op. Every declaration is registered even when one fails; a parameter with
    /// a bad value keeps its default, and the first error is returned.
    pub fn register(&mut self, decls: &[ParamDecl]) -> Result<(), ParamError> {
        let mut first_err = None;
        for decl in decls {
            let name = decl.full_name();
            if let Some(existing) = self.params.get(&name) {
                if existing.decl != *decl {
                    first_err.get_or_insert(ParamError::DuplicateRegistration { name });
                }
                continue;
            }
            let entry = match self.resolve(decl, &name) {
                Ok(e) => e,
                Err(e) => {
                    first_err.get_or_insert(e);
                    Entry {
                        decl: *decl,
                        value: self.default_value(decl),
                        source: Source::Default,
                    }
                }
            };
            self.params.insert(name, entry);
        }
        first_err.map_or(Ok(()), Err)
    }

    fn default_value(&self, decl: &ParamDecl) -> Value {
        let text = self.expand_default(decl);
        decl.ty
            .parse(&text)
            .or_else(|_| decl.ty.parse(""))
            .unwrap_or(Value::String(text))
    }

    fn resolve(&mut self, decl: &ParamDecl, name: &str) -> Result<Entry, ParamError> {
        let layers = [
            &self.overrides,
            &self.command_line,
            &self.env,
            &self.tune,
            &self.files,
        ];
        let mut found = layers.iter().filter_map(|l| l.get(name));
        let Some((text, source)) = found.next().cloned() else {
            return Ok(Entry {
                decl: *decl,
                value: self.default_value(decl),
                source: Source::Default,
            });
        };
        if decl.read_only {
            self.warnings
                .push(ParamWarning::ReadOnly(ParamError::ReadOnly {
                    name: name.to_string(),
                    value: text,
                    attempted_by: source,
                }));
            return Ok(Entry {
                decl: *decl,
                value: self.default_value(decl),
                source: Source::Default,
            });
        }
        if let Source::Override { path, line } = &source {
            let locked: Vec<(String, Source)> = found
                .filter(|(v, s)| {
                    v != &text && matches!(s, Source::CommandLine | Source::Environment { .. })
                })
                .cloned()
                .collect();
            if !self.suppress_override_warning() {
                for (value, attempted_by) in locked {
                    self.warnings.push(ParamWarning::Locked(ParamError::Locked {
                        name: name.to_string(),
                        value,
                        attempted_by,
                        path: path.clone(),
                        line: *line,
                    }));
                }
            }
        }
        let value = decl
            .ty
            .parse(&text)
            .map_err(|reason| ParamError::InvalidValue {
                name: name.to_string(),
                value: text.clone(),
                origin: source.clone(),
                reason,
            })?;
        Ok(Entry {
            decl: *decl,
            value,
            source,
        })
    }

    fn suppress_override_warning(&self) -> bool {
        matches!(
            self.params
                .get("mca_base_suppress_override_warning")
                .map(|e| &e.value),
            Some(Value::Bool(true))
        )
    }

    /// Sets a value through the API (source `set`). Fails for unknown, read-only and
    /// override-locked parameters and for invalid values.
    pub fn set(&mut self, name: &str, text: &str) -> Result<(), ParamError> {
        let entry = self
            .params
            .get_mut(name)
            .ok_or_else(|| ParamError::Unknown {
                name: name.to_string(),
            })?;
        if entry.decl.read_only {
            return Err(ParamError::ReadOnly {
                name: name.to_string(),
                value: text.to_string(),
                attempted_by: Source::Api,
            });
        }
        if let Source::Override { path, line } = &entry.source {
            return Err(ParamError::Locked {
                name: name.to_string(),
                value: text.to_string(),
                attempted_by: Source::Api,
                path: path.clone(),
                line: *line,
            });
        }
        entry.value = entry
            .decl
            .ty
            .parse(text)
            .map_err(|reason| ParamError::InvalidValue {
                name: name.to_string(),
                value: text.to_string(),
                origin: Source::Api,
                reason,
            })?;
        entry.source = Source::Api;
        Ok(())
    }

    /// Registers `decl` if needed and returns its effective value.
    pub fn resolve_decl(&mut self, decl: &ParamDecl) -> Result<Value, ParamError> {
        self.register(std::slice::from_ref(decl))?;
        let name = decl.full_name();
        self.params
            .get(&name)
            .map(|e| e.value.clone())
            .ok_or(ParamError::Unknown { name })
    }

    /// The entry of a registered parameter.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.params.get(name)
    }

    /// A boolean parameter's value.
    pub fn get_bool(&self, name: &str) -> Option<bool> {
        match self.get(name)?.value {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// An integer or enum parameter's value (enums as their number).
    pub fn get_int(&self, name: &str) -> Option<i64> {
        match self.get(name)?.value {
            Value::Int(i) | Value::Enum(i) => Some(i),
            _ => None,
        }
    }

    /// A size parameter's value in bytes.
    pub fn get_size(&self, name: &str) -> Option<u64> {
        match self.get(name)?.value {
            Value::Size(s) => Some(s),
            _ => None,
        }
    }

    /// Any parameter's value as text (what `oxmpi-info` shows).
    pub fn get_string(&self, name: &str) -> Option<String> {
        self.get(name).map(Entry::rendered)
    }

    /// A list parameter's items.
    pub fn get_list(&self, name: &str) -> Option<Vec<String>> {
        match &self.get(name)?.value {
            Value::List(l) => Some(l.clone()),
            _ => None,
        }
    }

    /// A framework's selection list (the bare framework name parameter).
    pub fn get_selection(&self, framework: &str) -> Option<super::Selection> {
        match &self.get(framework)?.value {
            Value::Selection(s) => Some(s.clone()),
            _ => None,
        }
    }

    /// All registered parameters, sorted by full name.
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.params.values()
    }

    /// All registered frameworks, sorted by name.
    pub fn frameworks(&self) -> impl Iterator<Item = &Framework> {
        self.frameworks.values()
    }

    /// A registered framework.
    pub fn framework(&self, name: &str) -> Option<&Framework> {
        self.frameworks.get(name)
    }

    /// Drains the warnings collected so far (locked or read-only values ignored, unreadable
    /// parameter files).
    pub fn take_warnings(&mut self) -> Vec<ParamWarning> {
        std::mem::take(&mut self.warnings)
    }

    /// `-x` exports of the `--tune` files: `(VAR, Some(value))` or `(VAR, None)` to forward the
    /// current value.
    pub fn tune_exports(&self) -> &[(String, Option<String>)] {
        &self.tune_exports
    }

    /// Checks the `OXMPI_MCA_*`/`OMPI_MCA_*` environment against the registered names. Call it
    /// once every parameter this process knows is registered.
    pub fn check_environment(&self) -> EnvReport {
        let mut report = EnvReport::default();
        for name in self.command_line.keys() {
            if !self.params.contains_key(name) {
                report.unknown.push(UnknownParam {
                    var: "--mca".into(),
                    name: name.clone(),
                    suggestions: self.nearest(name),
                });
            }
        }
        for name in &self.native_env {
            if !self.params.contains_key(name) {
                report.unknown.push(UnknownParam {
                    var: format!("{ENV_PREFIX}{name}"),
                    name: name.clone(),
                    suggestions: self.nearest(name),
                });
            }
        }
        // Open MPI's variables name many parameters oxmpi does not have: only a near miss of
        // one of ours (a likely typo) is worth a warning.
        for name in &self.compat_env {
            if !self.params.contains_key(name) {
                let suggestions = self.nearest(name);
                if suggestions.is_empty() {
                    report
                        .ignored_compat
                        .push(format!("{ENV_PREFIX_COMPAT}{name}"));
                } else {
                    report.unknown.push(UnknownParam {
                        var: format!("{ENV_PREFIX_COMPAT}{name}"),
                        name: name.clone(),
                        suggestions,
                    });
                }
            }
        }
        report
    }

    /// Up to three registered names nearest to `name` by edit distance.
    pub fn nearest(&self, name: &str) -> Vec<String> {
        let limit = (name.len() / 5).max(2);
        let mut scored: Vec<(usize, &String)> = self
            .params
            .keys()
            .map(|k| (edit_distance(name, k), k))
            .filter(|(d, _)| *d <= limit)
            .collect();
        scored.sort();
        let best = scored.first().map_or(0, |(d, _)| *d);
        scored
            .into_iter()
            .take_while(|(d, _)| *d <= best + 1)
            .take(3)
            .map(|(_, k)| k.clone())
            .collect()
    }

    /// The environment `mpirun` gives to the processes it starts so that they see the same
    /// parameters: every `--mca` pair as `OXMPI_MCA_<name>=<value>` plus
    /// `OXMPI_MCA_SOURCE_<name>=command`, every `--tune` value not shadowed by the command line
    /// or environment (marked `tune:<path>:<line>`), and the tune files' `-x` exports.
    pub fn child_env(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (name, (value, _)) in &self.command_line {
            out.push((format!("{ENV_PREFIX}{name}"), value.clone()));
            out.push((format!("{SOURCE_PREFIX}{name}"), "command".to_string()));
        }
        for (name, (value, source)) in &self.tune {
            if self.command_line.contains_key(name) || self.env.contains_key(name) {
                continue;
            }
            out.push((format!("{ENV_PREFIX}{name}"), value.clone()));
            if let Source::Tune { path, line } = source {
                out.push((
                    format!("{SOURCE_PREFIX}{name}"),
                    format!("tune:{}:{line}", path.display()),
                ));
            }
        }
        for (var, value) in &self.tune_exports {
            let value = value
                .clone()
                .or_else(|| self.sources.env_var(var).map(str::to_string));
            if let Some(v) = value {
                out.push((var.clone(), v));
            }
        }
        out
    }

    /// The sources this registry was built from.
    pub fn sources(&self) -> &Sources {
        &self.sources
    }
}

fn insert_last_wins(layer: &mut Layer, entries: Vec<FileEntry>) {
    for e in entries {
        layer.insert(e.name, (e.value, e.source));
    }
}

fn parse_marker(marker: &str) -> Option<Source> {
    let rest = marker.strip_prefix("tune:")?;
    let (path, line) = rest.rsplit_once(':')?;
    Some(Source::Tune {
        path: PathBuf::from(path),
        line: line.parse().ok()?,
    })
}

/// Levenshtein distance over bytes.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

static GLOBAL: OnceLock<Result<Mutex<Registry>, ParamError>> = OnceLock::new();

/// Initializes the process-global registry from `sources` (e.g. with `mpirun`'s `--mca` pairs).
/// Must run before anything uses [`global`]; returns `Ok(false)` if it was already initialized
/// (the given sources are then ignored).
pub fn init_global(sources: Sources) -> Result<bool, ParamError> {
    let mut created = false;
    let r = GLOBAL.get_or_init(|| {
        created = true;
        Registry::new(sources).map(Mutex::new)
    });
    match r {
        Ok(_) => Ok(created),
        Err(e) => Err(e.clone()),
    }
}

/// The process-global registry, created from [`Sources::from_process`] on first use.
pub fn global() -> Result<MutexGuard<'static, Registry>, ParamError> {
    let r = GLOBAL.get_or_init(|| Registry::new(Sources::from_process()).map(Mutex::new));
    match r {
        Ok(m) => Ok(m.lock().unwrap_or_else(|p| p.into_inner())),
        Err(e) => Err(e.clone()),
    }
}

/// Result of [`try_global`].
pub(crate) enum TryGlobal {
    /// Locked.
    Ready(MutexGuard<'static, Registry>),
    /// Locked by someone else (possibly this thread) right now.
    Busy,
    /// Building the registry failed.
    Failed,
}

/// The global registry if it can be locked right now without waiting (used by the output
/// framework so that a message printed while the registry is locked cannot deadlock).
pub(crate) fn try_global() -> TryGlobal {
    let r = GLOBAL.get_or_init(|| Registry::new(Sources::from_process()).map(Mutex::new));
    let Ok(m) = r.as_ref() else {
        return TryGlobal::Failed;
    };
    match m.try_lock() {
        Ok(g) => TryGlobal::Ready(g),
        Err(std::sync::TryLockError::Poisoned(p)) => TryGlobal::Ready(p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => TryGlobal::Busy,
    }
}

/// Registers `decl` in the global registry if needed and returns its effective value.
///
/// ```
/// use oxmpi_base::params::{self, ParamDecl, ParamType};
/// static FIFO: ParamDecl =
///     ParamDecl::new("btl", "sm", "fifo_size", ParamType::Size, "64k", "FIFO size in bytes");
/// assert_eq!(params::resolve(&FIFO).unwrap().as_size(), Some(65536));
/// ```
pub fn resolve(decl: &ParamDecl) -> Result<Value, ParamError> {
    with_global(|r| r.resolve_decl(decl))?
}

/// Runs `f` with the global registry locked.
pub fn with_global<R>(f: impl FnOnce(&mut Registry) -> R) -> Result<R, ParamError> {
    let mut g = global()?;
    Ok(f(&mut g))
}
