//! `check-arch`: keeps ARCHITECTURE.md's layer graph and the code's import structure true.
//!
//! 1. The crate graph: every workspace member's normal dependencies on workspace crates (its
//!    `Cargo.toml`) must equal the graph written in ARCHITECTURE.md, in the fenced block
//!    tagged `crate-graph` (one `crate -> dep, dep` line per member; the drawn diagram above
//!    it mirrors those lines). A difference fails with one line per missing or extra edge.
//! 2. No file-level import circles inside a library crate (a member with `src/lib.rs`): a
//!    file depends on another when it names it by a `crate::` path (`use crate::a::{b, c}`,
//!    `crate::a::f()`); a path resolves to the deepest module file it names, items of the
//!    crate root (and of inline modules) to the root file. A parent's own references to its
//!    children (by `mod` and relative paths) are not edges: the root and `mod.rs` files
//!    declare and re-export what is below them. Comments and string literals are ignored.
//! 3. One OS layer per library crate: calls of `libc::` or `rustix::` functions only in its
//!    `sys` module (`src/sys.rs` or `src/sys/`); C types and constants may be used anywhere.
//!
//! 4. Layers inside a crate ([`LAYERS`]): the files of a lower layer (the engine's
//!    transports, `src/btl/`) name nothing of the layer above (`crate::pml::...`) by a
//!    `crate::` path, except the modules both share (the wire header, `pml::hdr`); what
//!    both use otherwise lives below both (`crate::mem`).
//!
//! Every library crate passes all four (the C ABI, the last one with circles and stray
//! calls, was untangled in issue 13), so any finding fails the check.

use crate::workspace_root;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The info string of the fenced block holding the crate graph in ARCHITECTURE.md.
const GRAPH_FENCE: &str = "```crate-graph";

/// A directed graph by name: each node and the nodes it depends on.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// A layering rule inside one crate (rule 4 of the module documentation): no file under
/// `below` names a `crate::` path into module `above`, unless the path continues with one
/// of `shared`.
pub struct Layer {
    /// The package name of the crate.
    pub krate: &'static str,
    /// The lower layer's folder, relative to the crate (`src/btl/`).
    pub below: &'static str,
    /// The upper layer's module under the crate root (`pml`).
    pub above: &'static str,
    /// Submodules of `above` that the lower layer may use as well (`hdr`).
    pub shared: &'static [&'static str],
}

/// The layers checked inside crates: the engine's transports (`btl`) lie below its protocol
/// (`pml`) and share only the wire header with it.
pub const LAYERS: &[Layer] = &[Layer {
    krate: "oxmpi-engine",
    below: "src/btl/",
    above: "pml",
    shared: &["hdr"],
}];

/// `cargo xtask check-arch`.
pub fn cmd_check_arch(args: &[String]) -> Result<(), String> {
    if !args.is_empty() {
        return Err(format!("check-arch: unexpected arguments {args:?}"));
    }
    let root = workspace_root();
    let members = workspace_members(&root)?;
    let mut problems = Vec::new();

    let actual = cargo_graph(&members);
    let doc_path = root.join("ARCHITECTURE.md");
    let doc = read(&doc_path)?;
    match doc_graph(&doc) {
        Ok(documented) => problems.extend(compare_graphs(&actual, &documented)),
        Err(e) => problems.push(format!("{}: {e}", doc_path.display())),
    }

    for m in &members {
        if !m.dir.join("src").join("lib.rs").is_file() {
            continue;
        }
        let files = crate_sources(&m.dir)?;
        for (c, knot) in import_cycles(&files) {
            problems.push(format!(
                "{}: import circle: {} (one of the circles among {} files: {})",
                m.name,
                c.join(" -> "),
                knot.len(),
                knot.join(" ")
            ));
        }
        for c in syscalls_outside_sys(&files) {
            problems.push(format!("{}: OS call outside its sys module: {c}", m.name));
        }
        for layer in LAYERS.iter().filter(|l| l.krate == m.name) {
            for b in layer_breaches(&files, layer) {
                problems.push(format!("{}: a lower layer uses the one above: {b}", m.name));
            }
        }
    }
    if problems.is_empty() {
        eprintln!(
            "xtask: check-arch: {} crates match ARCHITECTURE.md's graph; no import circle \
             or OS call outside a sys module, no layer using the one above it",
            members.len()
        );
        Ok(())
    } else {
        for p in &problems {
            eprintln!("xtask: check-arch: {p}");
        }
        Err(format!("check-arch: {} problem(s)", problems.len()))
    }
}

fn read(path: &Path) -> Result<String, String> {
    fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// One workspace member: its package name and directory.
struct Member {
    name: String,
    dir: PathBuf,
    manifest: String,
}

fn workspace_members(root: &Path) -> Result<Vec<Member>, String> {
    let manifest = read(&root.join("Cargo.toml"))?;
    let mut out = Vec::new();
    for dir in members_list(&manifest)? {
        let dir = root.join(dir);
        let text = read(&dir.join("Cargo.toml"))?;
        let name = package_name(&text)
            .ok_or_else(|| format!("{}/Cargo.toml has no package name", dir.display()))?;
        out.push(Member {
            name,
            dir,
            manifest: text,
        });
    }
    Ok(out)
}

/// The `members = [...]` list of the workspace manifest.
fn members_list(manifest: &str) -> Result<Vec<String>, String> {
    let start = manifest
        .find("members")
        .and_then(|i| manifest[i..].find('[').map(|j| i + j + 1))
        .ok_or("the workspace Cargo.toml has no members list")?;
    let end = manifest[start..]
        .find(']')
        .ok_or("the workspace members list is not closed")?;
    Ok(manifest[start..start + end]
        .split(',')
        .map(|s| strip_toml_comment(s).trim().trim_matches('"').to_string())
        .filter(|s| !s.is_empty())
        .collect())
}

fn strip_toml_comment(s: &str) -> String {
    s.lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `(section, key, value)` for every `key = value` line of a manifest (tables by name).
fn toml_entries(text: &str) -> Vec<(String, String, String)> {
    let mut section = String::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line
                .trim_matches(|c| c == '[' || c == ']')
                .trim()
                .to_string();
        } else if let Some((k, v)) = line.split_once('=') {
            if !line.starts_with('#') {
                out.push((section.clone(), k.trim().to_string(), v.trim().to_string()));
            }
        }
    }
    out
}

fn package_name(manifest: &str) -> Option<String> {
    toml_entries(manifest)
        .into_iter()
        .find(|(s, k, _)| s == "package" && k == "name")
        .map(|(_, _, v)| v.trim_matches('"').to_string())
}

/// The names of the normal dependencies of a manifest (`[dependencies]`, per-target
/// `[target.X.dependencies]`, and `[dependencies.NAME]` tables).
fn normal_dependencies(manifest: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (section, key, _) in toml_entries(manifest) {
        let is_deps = section == "dependencies"
            || (section.starts_with("target.") && section.ends_with(".dependencies"));
        if is_deps {
            // `name.workspace = true` or `name = ...`
            out.insert(key.split('.').next().unwrap_or(&key).trim().to_string());
        } else if let Some(name) = section.strip_prefix("dependencies.") {
            out.insert(name.trim().to_string());
        }
    }
    out
}

/// Each member and the workspace members among its normal dependencies.
fn cargo_graph(members: &[Member]) -> Graph {
    let names: BTreeSet<&str> = members.iter().map(|m| m.name.as_str()).collect();
    members
        .iter()
        .map(|m| {
            let deps = normal_dependencies(&m.manifest)
                .into_iter()
                .filter(|d| names.contains(d.as_str()))
                .collect();
            (m.name.clone(), deps)
        })
        .collect()
}

/// The graph written in the `crate-graph` fenced block of `doc`.
fn doc_graph(doc: &str) -> Result<Graph, String> {
    let mut lines = doc.lines().skip_while(|l| l.trim() != GRAPH_FENCE);
    if lines.next().is_none() {
        return Err(format!("no {GRAPH_FENCE} block"));
    }
    let mut graph = Graph::new();
    for line in lines.take_while(|l| l.trim() != "```") {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (from, deps) = line
            .split_once("->")
            .ok_or_else(|| format!("'{line}' is not `crate -> dep, dep`"))?;
        graph.entry(from.trim().to_string()).or_default().extend(
            deps.split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(str::to_string),
        );
    }
    Ok(graph)
}

/// One line per difference between the real graph and the documented one.
fn compare_graphs(actual: &Graph, documented: &Graph) -> Vec<String> {
    let mut out = Vec::new();
    for name in actual.keys() {
        if !documented.contains_key(name) {
            out.push(format!(
                "ARCHITECTURE.md's crate-graph has no line for the workspace member {name}"
            ));
        }
    }
    for name in documented.keys() {
        if !actual.contains_key(name) {
            out.push(format!(
                "ARCHITECTURE.md's crate-graph names {name}, which is not a workspace member"
            ));
        }
    }
    for (name, deps) in actual {
        let empty = BTreeSet::new();
        let doc_deps = documented.get(name).unwrap_or(&empty);
        for d in deps.difference(doc_deps) {
            out.push(format!(
                "missing edge in ARCHITECTURE.md: {name} -> {d} (its Cargo.toml depends on {d})"
            ));
        }
    }
    for (name, deps) in documented {
        let Some(real) = actual.get(name) else {
            continue;
        };
        for d in deps.difference(real) {
            out.push(format!(
                "extra edge in ARCHITECTURE.md: {name} -> {d} (its Cargo.toml does not depend on {d})"
            ));
        }
    }
    out
}

/// The source files of a library crate: `(path relative to the crate, text)`, without the
/// separate crates under `src/bin` and `src/main.rs`.
fn crate_sources(dir: &Path) -> Result<Vec<(String, String)>, String> {
    let mut files = Vec::new();
    let src = dir.join("src");
    let mut stack = vec![src.clone()];
    while let Some(d) = stack.pop() {
        let entries = fs::read_dir(&d).map_err(|e| format!("cannot list {}: {e}", d.display()))?;
        for e in entries {
            let p = e
                .map_err(|e| format!("cannot list {}: {e}", d.display()))?
                .path();
            let rel = p
                .strip_prefix(dir)
                .unwrap_or(&p)
                .to_string_lossy()
                .into_owned();
            if p.is_dir() {
                if rel != "src/bin" {
                    stack.push(p);
                }
            } else if rel.ends_with(".rs") && rel != "src/main.rs" {
                files.push((rel, read(&p)?));
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The module path a file under `src/` defines (`src/lib.rs` is the root, `src/a/mod.rs` and
/// `src/a.rs` are `a`, `src/a/b.rs` is `a::b`).
fn module_path(file: &str) -> Option<Vec<String>> {
    let rel = file.strip_prefix("src/")?.strip_suffix(".rs")?;
    let mut segs: Vec<String> = rel.split('/').map(str::to_string).collect();
    if segs.last().is_some_and(|s| s == "mod") || rel == "lib" || rel == "main" {
        segs.pop();
    }
    Some(segs)
}

/// The file-level import graph of one crate's sources (`(path, text)`), by file path.
pub fn import_graph(files: &[(String, String)]) -> Graph {
    let modules: BTreeMap<Vec<String>, &str> = files
        .iter()
        .filter_map(|(f, _)| module_path(f).map(|m| (m, f.as_str())))
        .collect();
    let mut graph = Graph::new();
    for (file, text) in files {
        let deps = graph.entry(file.clone()).or_default();
        for path in crate_paths(&strip_comments_and_strings(text)) {
            let target = (0..=path.len())
                .rev()
                .find_map(|k| modules.get(&path[..k]))
                .copied();
            if let Some(t) = target {
                if t != file {
                    deps.insert(t.to_string());
                }
            }
        }
    }
    graph
}

/// The import circles of a crate: for each set of files that reach one another (a strongly
/// connected set), one shortest circle (its files in order, the first repeated at the end)
/// and the whole set.
pub fn import_cycles(files: &[(String, String)]) -> Vec<(Vec<String>, Vec<String>)> {
    let graph = import_graph(files);
    strongly_connected(&graph)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| (one_cycle(&graph, &c), c))
        .collect()
}

/// Tarjan's strongly connected components, each sorted.
fn strongly_connected(graph: &Graph) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        let graph = s.graph;
        for w in graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            comp.sort();
            s.out.push(comp);
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

/// A shortest circle through the first file of a strongly connected set, staying inside it.
fn one_cycle(graph: &Graph, comp: &[String]) -> Vec<String> {
    let inside: BTreeSet<&str> = comp.iter().map(String::as_str).collect();
    let start = comp[0].as_str();
    let mut prev: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for w in graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if w == start {
                let mut path = vec![start.to_string()];
                let mut at = v;
                while at != start {
                    path.push(at.to_string());
                    at = prev[at];
                }
                path.push(start.to_string());
                path.reverse();
                return path;
            }
            if inside.contains(w) && !prev.contains_key(w) {
                prev.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    comp.to_vec()
}

/// Calls of `libc::`/`rustix::` functions in files outside `src/sys.rs` and `src/sys/`, as
/// `file:line path`.
pub fn syscalls_outside_sys(files: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (file, text) in files {
        if file == "src/sys.rs" || file.starts_with("src/sys/") {
            continue;
        }
        let code = strip_comments_and_strings(text);
        for root in ["libc::", "rustix::"] {
            let mut from = 0;
            while let Some(off) = code[from..].find(root) {
                let i = from + off;
                from = i + root.len();
                let prev = code[..i].chars().next_back().unwrap_or(' ');
                if prev.is_alphanumeric() || prev == '_' || prev == ':' {
                    continue;
                }
                let path_len = code[i..]
                    .find(|ch: char| !(ch.is_alphanumeric() || ch == '_' || ch == ':'))
                    .unwrap_or(code.len() - i);
                let path = &code[i..i + path_len];
                let last = path.rsplit("::").next().unwrap_or("");
                let is_fn = last.starts_with(|ch: char| ch.is_ascii_lowercase() || ch == '_');
                if is_fn && code[i + path_len..].trim_start().starts_with('(') {
                    let line = code[..i].matches('\n').count() + 1;
                    out.push(format!("{file}:{line} {path}"));
                }
            }
        }
    }
    out
}

/// The `crate::` paths by which files under `layer.below` reach into `layer.above` beyond
/// its shared modules, as `file crate::path`, once per file and path.
pub fn layer_breaches(files: &[(String, String)], layer: &Layer) -> Vec<String> {
    let mut out = BTreeSet::new();
    for (file, text) in files.iter().filter(|(f, _)| f.starts_with(layer.below)) {
        for path in crate_paths(&strip_comments_and_strings(text)) {
            let up = path.first().is_some_and(|m| m == layer.above);
            let shared = path
                .get(1)
                .is_some_and(|m| layer.shared.contains(&m.as_str()));
            if up && !shared {
                out.insert(format!("{file} crate::{}", path.join("::")));
            }
        }
    }
    out.into_iter().collect()
}

/// `text` with comments blanked and string/char literals emptied (lifetimes kept), so that
/// only code is searched for paths.
fn strip_comments_and_strings(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    while i < c.len() {
        let at = |k: usize| c.get(k).copied().unwrap_or('\0');
        if at(i) == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if at(i) == '/' && at(i + 1) == '*' {
            let start = i;
            let mut depth = 0;
            while i < c.len() {
                if at(i) == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if at(i) == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
            out.extend(newlines(&c[start..i.min(c.len())]));
        } else if (at(i) == 'r' || (at(i) == 'b' && at(i + 1) == 'r'))
            && (i == 0 || !ident(c[i - 1]))
            && {
                let mut k = i + if at(i) == 'b' { 2 } else { 1 };
                while at(k) == '#' {
                    k += 1;
                }
                at(k) == '"'
            }
        {
            // Raw string: r##"..."##
            let mut k = i + if at(i) == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while at(k) == '#' {
                hashes += 1;
                k += 1;
            }
            k += 1;
            while k < c.len() {
                if c[k] == '"' && (1..=hashes).all(|h| at(k + h) == '#') {
                    k += 1 + hashes;
                    break;
                }
                k += 1;
            }
            out.push_str("\"\"");
            out.extend(newlines(&c[i..k.min(c.len())]));
            i = k;
        } else if at(i) == '"' {
            let mut k = i + 1;
            while k < c.len() && c[k] != '"' {
                k += if c[k] == '\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            out.extend(newlines(&c[i..k.min(c.len())]));
            i = k + 1;
        } else if at(i) == '\'' && (at(i + 1) == '\\' || at(i + 2) == '\'') {
            // A char literal ('a', '\n', '\''); anything else after a quote is a lifetime.
            let mut k = i + 1;
            while k < c.len() && c[k] != '\'' {
                k += if c[k] == '\\' { 2 } else { 1 };
            }
            out.push_str("' '");
            i = k + 1;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// The line breaks in `chars` (kept when a comment or string is blanked, so that line
/// numbers stay right).
fn newlines(chars: &[char]) -> impl Iterator<Item = char> + '_ {
    chars.iter().copied().filter(|&ch| ch == '\n')
}

/// Tokens of a use tree or path: identifiers and the punctuation a use tree has.
fn tokens(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let ch = b[i];
        if ch.is_ascii_whitespace() {
            i += 1;
        } else if ch.is_ascii_alphanumeric() || ch == b'_' || ch == b'#' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'#') {
                i += 1;
            }
            out.push(&s[start..i]);
        } else if s[i..].starts_with("::") {
            out.push("::");
            i += 2;
        } else if matches!(ch, b'{' | b'}' | b',' | b'*') {
            out.push(&s[i..i + 1]);
            i += 1;
        } else {
            // Anything else ends the path (`(`, `;`, `<`, `!`, non-ASCII ...).
            out.push("");
            break;
        }
    }
    out
}

/// Every path named after `crate::` in stripped source (use trees expanded; `$crate` in
/// macros and `pub(in crate::...)` visibilities are not imports).
fn crate_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut from = 0;
    while let Some(off) = code[from..].find("crate") {
        let i = from + off;
        from = i + 5;
        let before = code[..i].trim_end();
        let prev = bytes.get(i.wrapping_sub(1)).copied().unwrap_or(b' ');
        if prev.is_ascii_alphanumeric() || prev == b'_' || prev == b'$' {
            continue;
        }
        if before.ends_with(" in") || before.ends_with("(in") {
            continue;
        }
        let rest = code[i + 5..].trim_start();
        let Some(rest) = rest.strip_prefix("::") else {
            continue;
        };
        // Enough text for the longest use tree; it ends at `;` anyway.
        let mut end = rest.find(';').unwrap_or(rest.len()).min(4096);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        let toks = tokens(&rest[..end]);
        let mut pos = 0;
        use_tree(&toks, &mut pos, &mut Vec::new(), &mut out);
    }
    out
}

/// Parses one use tree (`a::b`, `a::{b, c::d}`, `a::*`, `a as b`) at `toks[*pos]`, pushing
/// every path it names onto `out`.
fn use_tree(toks: &[&str], pos: &mut usize, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let depth = prefix.len();
    loop {
        match toks.get(*pos).copied() {
            Some("{") => {
                *pos += 1;
                while let Some(t) = toks.get(*pos).copied() {
                    if t == "}" {
                        *pos += 1;
                        break;
                    }
                    let before = *pos;
                    use_tree(toks, pos, prefix, out);
                    if toks.get(*pos) == Some(&",") {
                        *pos += 1;
                    } else if *pos == before {
                        break;
                    }
                }
                break;
            }
            Some("*") | Some("self") => {
                *pos += 1;
                if toks.get(*pos) == Some(&"as") {
                    *pos += 2;
                }
                out.push(prefix.clone());
                break;
            }
            Some(t) if !matches!(t, "" | "::" | "}" | ",") => {
                *pos += 1;
                prefix.push(t.trim_start_matches("r#").to_string());
                if toks.get(*pos) == Some(&"::") {
                    *pos += 1;
                    continue;
                }
                if toks.get(*pos) == Some(&"as") {
                    *pos += 2;
                }
                out.push(prefix.clone());
                break;
            }
            // The path ends after a `::` (`crate::a::<T>`, `crate::f::()`).
            _ => {
                if prefix.len() > depth {
                    out.push(prefix.clone());
                }
                break;
            }
        }
    }
    prefix.truncate(depth);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect()
    }

    fn paths(code: &str) -> Vec<String> {
        crate_paths(&strip_comments_and_strings(code))
            .into_iter()
            .map(|p| p.join("::"))
            .collect()
    }

    #[test]
    fn use_trees_and_expression_paths_are_parsed() {
        assert_eq!(
            paths("use crate::a::{b, c::{d as e, self}, f::*};\nlet x = crate::g::h(1);"),
            ["a::b", "a::c::d", "a::c", "a::f", "g::h"]
        );
        assert_eq!(paths("use crate::{x, y::Z};"), ["x", "y::Z"]);
        assert_eq!(paths("pub(crate) fn f() {}"), Vec::<String>::new());
    }

    #[test]
    fn comments_strings_macros_and_visibility_are_not_imports() {
        let code = r##"
            // use crate::a;
            /* crate::b /* nested crate::c */ */
            /// [`x`](crate::d)
            let s = "crate::e"; let r = r#"crate::f"#; let c = '"'; let l: &'static str = "";
            macro_rules! m { () => { $crate::g::h() } }
            pub(in crate::i) fn f() {}
            use crate::j;
        "##;
        assert_eq!(paths(code), ["j"]);
    }

    #[test]
    fn paths_resolve_to_the_deepest_module_file() {
        let g = import_graph(&files(&[
            ("src/lib.rs", "pub mod a; pub mod b; pub mod streams { }"),
            (
                "src/a/mod.rs",
                "mod inner; use crate::b::Thing; use crate::streams::X;",
            ),
            (
                "src/a/inner.rs",
                "use crate::a::Other; fn f() { crate::Result::Ok(()) }",
            ),
            ("src/b.rs", "pub struct Thing; use crate::a::inner::f;"),
        ]));
        let deps = |f: &str| g[f].iter().cloned().collect::<Vec<_>>();
        assert_eq!(deps("src/a/mod.rs"), ["src/b.rs", "src/lib.rs"]);
        assert_eq!(deps("src/a/inner.rs"), ["src/a/mod.rs", "src/lib.rs"]);
        assert_eq!(deps("src/b.rs"), ["src/a/inner.rs"]);
        assert!(deps("src/lib.rs").is_empty());
    }

    #[test]
    fn a_new_circle_is_found_and_named_by_its_files() {
        let clean = files(&[
            ("src/lib.rs", "pub mod job; pub mod daemon; pub mod proto;"),
            ("src/proto.rs", "pub const TAG: u32 = 1;"),
            ("src/daemon.rs", "use crate::proto::TAG;"),
            (
                "src/job.rs",
                "use crate::daemon::Daemon; use crate::proto::TAG;",
            ),
        ]);
        assert!(import_cycles(&clean).is_empty());
        let mut circled = clean.clone();
        circled[2].1.push_str(" use crate::job::KILL_GRACE;");
        assert_eq!(
            import_cycles(&circled),
            [(
                vec!["src/daemon.rs", "src/job.rs", "src/daemon.rs"]
                    .into_iter()
                    .map(String::from)
                    .collect(),
                vec!["src/daemon.rs".to_string(), "src/job.rs".to_string()]
            )]
        );
        // A longer circle is named through every file on it.
        let mut longer = clean.clone();
        longer[1].1.push_str(" use crate::job::KILL_GRACE;");
        let cycles = import_cycles(&longer);
        assert_eq!(cycles.len(), 1);
        assert_eq!(
            cycles[0].0,
            [
                "src/daemon.rs",
                "src/proto.rs",
                "src/job.rs",
                "src/daemon.rs"
            ]
        );
        assert_eq!(cycles[0].1.len(), 3);
    }

    #[test]
    fn the_crate_graph_is_compared_edge_by_edge() {
        let doc = "text\n```crate-graph\n# comment\nbase ->\nwire ->\npmi -> wire, base\n```\n";
        let documented = doc_graph(doc).unwrap();
        let manifest = |deps: &str| {
            format!("[package]\nname = \"x\"\n\n[dependencies]\n{deps}\n[dev-dependencies]\nbase.workspace = true\n")
        };
        let m = |name: &str, deps: &str| Member {
            name: name.into(),
            dir: PathBuf::new(),
            manifest: manifest(deps),
        };
        let actual = cargo_graph(&[
            m("base", "libc.workspace = true"),
            m("wire", "base = { path = \"../base\" }"),
            m("pmi", "wire.workspace = true"),
        ]);
        assert_eq!(
            compare_graphs(&actual, &documented),
            [
                "missing edge in ARCHITECTURE.md: wire -> base (its Cargo.toml depends on base)",
                "extra edge in ARCHITECTURE.md: pmi -> base (its Cargo.toml does not depend on base)",
            ]
        );
        let mut fixed = documented.clone();
        fixed.get_mut("wire").unwrap().insert("base".into());
        fixed.get_mut("pmi").unwrap().remove("base");
        assert!(compare_graphs(&actual, &fixed).is_empty());
        fixed.remove("base");
        assert_eq!(
            compare_graphs(&actual, &fixed),
            ["ARCHITECTURE.md's crate-graph has no line for the workspace member base"]
        );
        assert!(doc_graph("no block here").is_err());
    }

    #[test]
    fn system_calls_are_found_outside_sys_only() {
        let files = files(&[
            (
                "src/sys.rs",
                "pub fn pid() -> i32 { unsafe { libc::getpid() } }",
            ),
            ("src/sys/spawn.rs", "fn f() { unsafe { libc::fork() }; }"),
            (
                "src/tcp.rs",
                "// libc::close(fd)\nconst S: &str = \"libc::write(\";\n\
                 let p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };\n\
                 let n: libc::c_int = 0; my_libc::f();\n\
                 let r = unsafe {\n    libc::setsockopt(fd, 1, 2)\n};\n\
                 rustix::fs::fstat(&fd)?;",
            ),
        ]);
        assert_eq!(
            syscalls_outside_sys(&files),
            [
                "src/tcp.rs:6 libc::setsockopt",
                "src/tcp.rs:8 rustix::fs::fstat"
            ]
        );
    }

    #[test]
    fn a_transport_that_reaches_into_the_protocol_is_found() {
        let layer = &LAYERS[0];
        let files = files(&[
            (
                "src/btl/sm/link.rs",
                "use crate::pml::hdr::{Hdr, HDR}; use crate::btl::Link;\n\
                 // crate::pml::recv::copy(a, b, n)\n\
                 fn f() { unsafe { crate::pml::recv::copy(a, b, n) } }",
            ),
            (
                "src/btl/tcp/link.rs",
                "use crate::pml::{hdr::Hdr, matching};",
            ),
            (
                "src/pml/recv.rs",
                "use crate::btl::BTL; use crate::mem::copy;",
            ),
            (
                "src/btl/mod.rs",
                "use crate::pml::hdr::Hdr; use crate::mem::copy;",
            ),
        ]);
        assert_eq!(
            layer_breaches(&files, layer),
            [
                "src/btl/sm/link.rs crate::pml::recv::copy",
                "src/btl/tcp/link.rs crate::pml::matching",
            ]
        );
        // `crate::pml` alone (its re-exports) is the layer above too.
        let files2 = files_one("src/btl/self/mod.rs", "use crate::pml::Thing;");
        assert_eq!(
            layer_breaches(&files2, layer),
            ["src/btl/self/mod.rs crate::pml::Thing"]
        );
    }

    fn files_one(path: &str, text: &str) -> Vec<(String, String)> {
        vec![(path.to_string(), text.to_string())]
    }

    #[test]
    fn this_workspace_passes() {
        cmd_check_arch(&[]).unwrap();
    }
}
