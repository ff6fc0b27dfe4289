//! Structure checks over `daemon/src`, read as text (grep proves
//! it):
//!
//! 1. The modules' `crate::` paths form no circle: each top-level module
//!    (`run`, `actuator`, `record`, ...) may name lower ones, never one that
//!    names it back, directly or around a loop.
//! 2. The daemon decides no cooldown, budget, harm or revert: those words
//!    occur in its code only as `policy`'s verdicts it carries (reason
//!    codes, outcomes); it reads none of policy's gate terms and compares
//!    none of policy's deadlines itself.
//!
//! Comments, strings and character literals are blanked before reading, so
//! a doc comment or a log message mentioning a module or a word does not
//! count; every path in code does (`use`, a qualified call, a type).
// A helper that cannot read the sources fails the test, with the reason.
#![allow(clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The source with comments, string, byte-string, raw-string and character
/// literals replaced by spaces (newlines kept, so line numbers hold).
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let blank = |out: &mut String, s: &[u8]| {
        for &c in s {
            out.push(if c == b'\n' { '\n' } else { ' ' });
        }
    };
    let mut i = 0;
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"//") {
            let end = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
            blank(&mut out, &rest[..end]);
            i += end;
        } else if rest.starts_with(b"/*") {
            // Block comments nest in Rust.
            let (mut depth, mut j) = (0usize, 0usize);
            while j < rest.len() {
                if rest[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if rest[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, &rest[..j]);
            i += j;
        } else if let Some(len) = raw_string_len(rest, i == 0 || !is_ident(b[i - 1])) {
            blank(&mut out, &rest[..len]);
            i += len;
        } else if rest[0] == b'"' || (rest.starts_with(b"b\"") && (i == 0 || !is_ident(b[i - 1]))) {
            let start = usize::from(rest[0] == b'b');
            let mut j = start + 1;
            while j < rest.len() && rest[j] != b'"' {
                j += if rest[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(rest.len());
            blank(&mut out, &rest[..end]);
            i += end;
        } else if rest[0] == b'\'' {
            // A character literal ('x', '\n', '\u{..}'), else a lifetime.
            let len = if rest.get(1) == Some(&b'\\') {
                rest.iter().skip(2).position(|&c| c == b'\'').map(|p| p + 3)
            } else {
                let ch = src[i + 1..].chars().next().map_or(1, char::len_utf8);
                (rest.get(1 + ch) == Some(&b'\'')).then_some(2 + ch)
            };
            match len {
                Some(len) => {
                    blank(&mut out, &rest[..len]);
                    i += len;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let ch = src[i..].chars().next().expect("in bounds");
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Length of a raw (byte) string literal starting here: `r"…"`, `r#"…"#`,
/// `br"…"`.
fn raw_string_len(s: &[u8], at_token_start: bool) -> Option<usize> {
    if !at_token_start {
        return None;
    }
    let p = if s.starts_with(b"br") {
        2
    } else if s.starts_with(b"r") {
        1
    } else {
        return None;
    };
    let hashes = s[p..].iter().take_while(|&&c| c == b'#').count();
    if s.get(p + hashes) != Some(&b'"') {
        return None;
    }
    let close: Vec<u8> = std::iter::once(b'"')
        .chain(std::iter::repeat_n(b'#', hashes))
        .collect();
    let body = p + hashes + 1;
    let end = s[body..]
        .windows(close.len())
        .position(|w| w == close.as_slice())
        .map_or(s.len(), |q| body + q + close.len());
    Some(end)
}

/// A file's module path: `["act", "actuator"]` for `src/act/actuator.rs`,
/// `["service"]` for `src/service.rs` (or a `src/service/mod.rs`),
/// `["clock"]` for `src/clock.rs`.
/// `None` for the crate roots.
fn module_path(src: &Path, file: &Path) -> Option<Vec<String>> {
    let rel = file.strip_prefix(src).expect("under src");
    let mut path: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = path.pop()?;
    let stem = last.strip_suffix(".rs").unwrap_or(&last);
    if stem != "mod" {
        path.push(stem.to_owned());
    }
    let root = path.len() == 1 && (path[0] == "lib" || path[0] == "main");
    (!path.is_empty() && !root).then_some(path)
}

/// The unit the graph is drawn between: a module path cut to two levels
/// (`act::actuator`; `sample::kernel_netlink` for its `join` and
/// `convert`), so a stage's files are told apart and a file's own
/// submodules are part of it.
fn unit(path: &[String]) -> String {
    path[..path.len().min(2)].join("::")
}

/// The paths a piece of code names through `crate::` and `super::`, as
/// module paths from the crate root, with the line of the first mention:
/// `crate::a::b`, `crate::{a, b::c}`, `super::x` (relative to `here`, the
/// file's module path). Item names stay on the end of the path
/// (`act::state::StateFile`); [`resolve`] cuts them to a known module.
fn crate_refs(code: &str, here: &[String]) -> BTreeMap<String, usize> {
    let mut refs = BTreeMap::new();
    let b = code.as_bytes();
    // The path's identifiers up to the first thing that is not one.
    let path_at = |s: &str| -> String {
        let mut segs = Vec::new();
        for seg in s.trim_start().split("::") {
            let seg = seg.trim_start();
            let id: String = seg
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if id.is_empty() {
                break;
            }
            let whole = id.len() == seg.trim_end().len();
            segs.push(id);
            if !whole {
                break;
            }
        }
        segs.join("::")
    };
    for word in ["crate", "super"] {
        let mut from = 0;
        while let Some(p) = code[from..].find(word) {
            let at = from + p;
            from = at + word.len();
            let before_ident = at > 0 && (is_ident(b[at - 1]) || b[at - 1] == b':');
            if before_ident || b.get(at + word.len()).is_some_and(|&c| is_ident(c)) {
                continue;
            }
            let Some(mut rest) = code[at + word.len()..].trim_start().strip_prefix("::") else {
                continue;
            };
            // `super::super::x` climbs one more level per `super`.
            let mut base: Vec<String> = if word == "crate" {
                Vec::new()
            } else {
                here[..here.len().saturating_sub(1)].to_vec()
            };
            if word == "super" {
                while let Some(r) = rest.trim_start().strip_prefix("super::") {
                    base.pop();
                    rest = r;
                }
                // A test module's `use super::*` is the file it tests.
                if rest.trim_start().starts_with('*') {
                    continue;
                }
            }
            let line = code[..at].matches('\n').count() + 1;
            let mut add = |item: &str| {
                let tail = path_at(item);
                if tail.is_empty() || tail == "self" || tail.starts_with("self::") {
                    if !base.is_empty() {
                        refs.entry(base.join("::")).or_insert(line);
                    }
                    return;
                }
                let mut full = base.clone();
                full.extend(tail.split("::").map(str::to_owned));
                refs.entry(full.join("::")).or_insert(line);
            };
            if let Some(group) = rest.trim_start().strip_prefix('{') {
                // Top-level items of the group; a nested group's prefix.
                let (mut depth, mut item) = (0usize, String::new());
                for c in group.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            add(&item);
                            item.clear();
                            continue;
                        }
                        _ => {}
                    }
                    if depth == 0 {
                        item.push(c);
                    }
                }
                add(&item);
            } else {
                add(rest);
            }
        }
    }
    refs
}

/// The unit a referenced path lands in: its longest prefix that is a known
/// module, cut to a [`unit`].
fn resolve(path: &str, modules: &BTreeSet<Vec<String>>) -> Option<String> {
    let segs: Vec<String> = path.split("::").map(str::to_owned).collect();
    (1..=segs.len())
        .rev()
        .map(|n| segs[..n].to_vec())
        .find(|p| modules.contains(p))
        .map(|p| unit(&p))
}

/// The daemon's sources: (path relative to the crate, code without
/// comments and literals).
fn sources() -> (PathBuf, Vec<(PathBuf, String)>) {
    sources_in("src")
}

/// The sources under `dir`, relative to the daemon's manifest (`src`,
/// `record/src` for the recording's crate, `../policy/src`, `../config/src`).
fn sources_in(dir: &str) -> (PathBuf, Vec<(PathBuf, String)>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    // daemon/src has 40 files, the recording's crate 7, policy/src 27,
    // config/src 16.
    let floor = match dir {
        "record/src" => 5,
        "../config/src" => 10,
        _ => 20,
    };
    assert!(
        files.len() > floor,
        "daemon sources not found under {}",
        src.display()
    );
    let read = files
        .into_iter()
        .map(|f| {
            let text =
                std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            (f, code_only(&text))
        })
        .collect();
    (src, read)
}

/// Unit -> (unit it names -> where, as "file:line").
type Graph = BTreeMap<String, BTreeMap<String, String>>;

fn module_graph() -> Graph {
    module_graph_of("src")
}

/// [`module_graph`] of the sources under `dir` (relative to the daemon's
/// manifest, as [`sources_in`]).
fn module_graph_of(dir: &str) -> Graph {
    let (src, files) = sources_in(dir);
    graph_of(&src, &files)
}

/// The graph of `files` (code only) under `src`: an edge from each unit to
/// each other unit its code names.
fn graph_of(src: &Path, files: &[(PathBuf, String)]) -> Graph {
    let modules: BTreeSet<Vec<String>> = files
        .iter()
        .filter_map(|(f, _)| module_path(src, f))
        .flat_map(|p| (1..=p.len()).map(move |n| p[..n].to_vec()))
        .collect();
    let mut graph = Graph::new();
    for (f, code) in files {
        let Some(here) = module_path(src, f) else {
            continue;
        };
        let m = unit(&here);
        let rel = f
            .strip_prefix(src)
            .expect("under src")
            .display()
            .to_string();
        let edges = graph.entry(m.clone()).or_default();
        for (path, line) in crate_refs(code, &here) {
            if let Some(to) = resolve(&path, &modules)
                && to != m
            {
                edges
                    .entry(to)
                    .or_insert_with(|| format!("src/{rel}:{line}"));
            }
        }
    }
    graph
}

/// The daemon's stages, lowest first: each may import the ones before it,
/// none after it. docs/architecture.md draws the same flow.
const STAGES: &[&[&str]] = &[
    &["clock", "heap", "human"],
    &["sample"],
    &["act"],
    &["publish"],
    &["service"],
    &["cmd"],
];

/// A unit's stage rank: its first path segment's place in [`STAGES`].
fn rank(unit: &str) -> Option<usize> {
    let first = unit.split("::").next()?;
    STAGES.iter().position(|s| s.contains(&first))
}

/// Every edge of `graph` that goes up (or sideways between two base
/// modules), and every unit in no stage, with where it is written.
fn upward_imports(graph: &Graph) -> Vec<String> {
    let mut bad = Vec::new();
    for (from, edges) in graph {
        let Some(r) = rank(from) else {
            bad.push(format!(
                "{from}: in no stage (add it to STAGES and docs/architecture.md)"
            ));
            continue;
        };
        for (to, at) in edges {
            let same_stage = from.split("::").next() == to.split("::").next();
            if same_stage {
                continue;
            }
            match rank(to) {
                Some(t) if t < r => {}
                _ => bad.push(format!("{from} -> {to}  ({at})")),
            }
        }
    }
    bad
}

/// A circle in `graph`, as the modules around it with where each names the
/// next; `None` if it is acyclic.
fn find_cycle(graph: &Graph) -> Option<Vec<(String, String)>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        g: &Graph,
        m: &str,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<(String, String)>> {
        match marks.get(m) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let start = path
                    .iter()
                    .position(|p| p == m)
                    .expect("open node is on the path");
                let ring: Vec<String> = path[start..].to_vec();
                return Some(
                    ring.iter()
                        .enumerate()
                        .map(|(i, a)| {
                            let b = &ring[(i + 1) % ring.len()];
                            (format!("{a} -> {b}"), g[a][b].clone())
                        })
                        .collect(),
                );
            }
            None => {}
        }
        marks.insert(m.to_owned(), Mark::Open);
        path.push(m.to_owned());
        for next in g.get(m).into_iter().flat_map(BTreeMap::keys) {
            if let Some(c) = visit(g, next, marks, path) {
                return Some(c);
            }
        }
        path.pop();
        marks.insert(m.to_owned(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    graph
        .keys()
        .find_map(|m| visit(graph, m, &mut marks, &mut Vec::new()))
}

#[test]
fn daemon_modules_import_no_circle() {
    let graph = module_graph();
    // The check must see the graph it judges.
    assert!(
        graph["service"].contains_key("sample")
            && graph["service::start"].contains_key("act::state")
            && graph["service::keep"].contains_key("service::inputs"),
        "the scan lost the loop's imports: {graph:?}"
    );
    assert_no_circle(&graph, "daemon/src");
}

/// Each stage imports only the stages below it (sample < act < publish <
/// service < cmd, over the base `clock` and `human`).
#[test]
fn daemon_stages_import_only_downward() {
    let graph = module_graph();
    let bad = upward_imports(&graph);
    assert!(
        bad.is_empty(),
        "daemon/src: imports against the flow (docs/architecture.md):\n  {}",
        bad.join("\n  ")
    );
}

/// The tree as it is, with one more file planted in it.
fn planted(file: &str, code: &str) -> Graph {
    let (src, mut files) = sources();
    files.push((src.join(file), code_only(code)));
    graph_of(&src, &files)
}

/// The two checks fail on the real tree with a planted fault: a stage
/// importing upward, a circle between two modules of one stage, and a file
/// in no stage.
#[test]
fn the_structure_checks_fail_on_planted_faults() {
    // `act` reading the loop.
    let g = planted("act/planted.rs", "use crate::service::Options;\n");
    let bad = upward_imports(&g);
    assert!(
        bad.iter().any(|b| b.starts_with("act::planted -> service")),
        "{bad:?}"
    );
    // `sample` reading `publish` through `super::super`.
    let g = planted(
        "sample/kernel_netlink/planted.rs",
        "fn f() { super::super::super::publish::metrics::Metrics::new(); }\n",
    );
    let bad = upward_imports(&g);
    assert!(
        bad.iter()
            .any(|b| b.starts_with("sample::kernel_netlink -> publish::metrics")),
        "{bad:?}"
    );
    // A circle: state already names clock; clock naming state closes one
    // through a base module (also upward), and one inside `act`.
    let g = planted("act/planted.rs", "use crate::act::actuator::Lent;\n");
    let mut g2 = g.clone();
    g2.entry("act::actuator".into())
        .or_default()
        .insert("act::planted".into(), "planted".into());
    assert!(find_cycle(&g).is_none());
    assert!(find_cycle(&g2).is_some());
    let g = planted("sample/planted.rs", "use crate::act::state::StateFile;\n");
    let mut bad = upward_imports(&g);
    bad.retain(|b| b.starts_with("sample::planted"));
    assert_eq!(bad.len(), 1, "{bad:?}");
    // A file no stage owns.
    let g = planted("loose.rs", "use crate::clock::Clock;\n");
    assert!(
        upward_imports(&g)
            .iter()
            .any(|b| b.starts_with("loose: in no stage")),
        "a loose top-level file passed"
    );
}

/// Fails, naming every edge and where it is written, when `graph` has a
/// circle.
fn assert_no_circle(graph: &Graph, what: &str) {
    if let Some(cycle) = find_cycle(graph) {
        let lines: Vec<String> = cycle
            .iter()
            .map(|(e, at)| format!("  {e}  ({at})"))
            .collect();
        panic!("{what} modules import in a circle:\n{}", lines.join("\n"));
    }
}

/// The crate under `dir` (from the daemon's manifest; `what` in messages)
/// imports no circle; each `(from, to)` of `seen` is an import the scan must
/// find, so a scan that lost the imports fails rather than pass.
fn crate_imports_no_circle(dir: &str, what: &str, seen: &[(&str, &str)]) {
    let graph = module_graph_of(dir);
    assert!(
        seen.iter()
            .all(|(from, to)| graph.get(*from).is_some_and(|e| e.contains_key(*to))),
        "the scan lost {what}'s imports: {graph:?}"
    );
    assert_no_circle(&graph, what);
}

/// The policy crate's modules import no circle either: its vocabulary
/// (knobs, plan) does not reach back into the rules, nor the persisted
/// state into the engine that fills it.
#[test]
fn policy_modules_import_no_circle() {
    crate_imports_no_circle(
        "../policy/src",
        "policy/src",
        &[("decide", "gates"), ("plan", "knobs")],
    );
}

/// The policy files' crate (`config/src`): the load, the listing of a
/// configuration directory, the pipeline (parse, check, merge, convert) and
/// the value parsers name one another one way.
#[test]
fn config_modules_import_no_circle() {
    crate_imports_no_circle(
        "../config/src",
        "config/src",
        &[("build", "convert"), ("convert", "values")],
    );
}

/// The recording's crate (`daemon/record/src`): the format, its coder and
/// the file under it, the counterfactual and its ring model, replay on top
/// name one another one way.
#[test]
fn record_modules_import_no_circle() {
    crate_imports_no_circle(
        "record/src",
        "daemon/record/src",
        &[("replay", "counterfactual")],
    );
}

/// The type an inherent `impl` block is for (`impl<K> Daemon<K> {` ->
/// `Daemon`); `None` for trait impls and other lines.
fn inherent_impl(line: &str) -> Option<String> {
    let rest = line.trim_start().strip_prefix("impl")?;
    if !rest.starts_with(['<', ' ']) || rest.contains(" for ") {
        return None;
    }
    let mut rest = rest.trim_start();
    if rest.starts_with('<') {
        let mut depth = 0usize;
        let end = rest.char_indices().find_map(|(i, c)| {
            match c {
                '<' => depth += 1,
                '>' => depth -= 1,
                _ => {}
            }
            (depth == 0).then_some(i + 1)
        })?;
        rest = rest[end..].trim_start();
    }
    let path: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
        .collect();
    path.rsplit("::")
        .next()
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
}

#[test]
fn every_struct_is_implemented_where_it_is_defined() {
    let (src, files) = sources();
    let mut defined: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (f, code) in &files {
        for line in code.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            if let Some(i) = words.iter().position(|w| *w == "struct" || *w == "enum")
                && let Some(name) = words.get(i + 1)
            {
                let name: String = name
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                defined
                    .entry(name)
                    .or_default()
                    .insert(f.display().to_string());
            }
        }
    }
    let mut apart = Vec::new();
    for (f, code) in &files {
        for (n, line) in code.lines().enumerate() {
            if let Some(ty) = inherent_impl(line)
                && let Some(homes) = defined.get(&ty)
                && !homes.contains(&f.display().to_string())
            {
                let home = homes.iter().next().expect("defined somewhere");
                let rel = |p: &str| {
                    p.strip_prefix(&format!("{}/", src.display()))
                        .unwrap_or(p)
                        .to_owned()
                };
                apart.push(format!(
                    "src/{}:{}: `impl {ty}` apart from its definition in src/{}",
                    rel(&f.display().to_string()),
                    n + 1,
                    rel(home)
                ));
            }
        }
    }
    assert!(
        apart.is_empty(),
        "one struct, one file:\n  {}",
        apart.join("\n  ")
    );
    assert_eq!(
        inherent_impl("impl<K: Kernel, E: Engine> Daemon<K, E> {").as_deref(),
        Some("Daemon")
    );
    assert_eq!(
        inherent_impl("impl<E: Engine> actuator::Record for Keep<'_, E> {"),
        None
    );
}

#[test]
fn the_cycle_finder_finds_a_circle_and_names_it() {
    let mut g = Graph::new();
    let edge = |g: &mut Graph, a: &str, b: &str| {
        g.entry(a.into())
            .or_default()
            .insert(b.into(), format!("{a}.rs:1"));
        g.entry(b.into()).or_default();
    };
    edge(&mut g, "run", "actuator");
    edge(&mut g, "actuator", "state");
    assert_eq!(find_cycle(&g), None);
    edge(&mut g, "state", "run");
    let c = find_cycle(&g).expect("run -> actuator -> state -> run");
    let mut names: Vec<&str> = c.iter().map(|(e, _)| e.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["actuator -> state", "run -> actuator", "state -> run"]
    );
    assert!(c.iter().all(|(_, at)| at.ends_with(".rs:1")), "{c:?}");
}

#[test]
fn comments_and_literals_are_not_code() {
    let code = code_only(
        "use crate::a; // crate::b\n/* crate::c /* nested */ crate::d */ let s = \"crate::e\"; let r = r#\"crate::f\"#;\nfn g<'x>(c: &'x str) -> char { let _ = crate::{h, i::{j, k}, self}; '\"' }\n",
    );
    let refs: Vec<String> = crate_refs(&code, &["x".into()]).into_keys().collect();
    assert_eq!(refs, ["a", "h", "i"]);
    let here: Vec<String> = vec!["act".into(), "actuator".into()];
    let refs: Vec<String> = crate_refs(
        "use super::state::X; super::super::clock::now(); use crate::{a::{b, c}, d};",
        &here,
    )
    .into_keys()
    .collect();
    assert_eq!(refs, ["a", "act::state::X", "clock::now", "d"]);
    assert_eq!(code.lines().count(), 3);
}

/// Where the words may appear in daemon code: as policy's verdicts the
/// daemon carries, never as a term it computes with.
const CARRIED: &[&str] = &[
    "ReasonCode::Cooldown",
    "ReasonCode::ChangeBudgetExhausted",
    "Outcome::Reverted",
    "Verdict::Harmful",
    "Judged::Revert",
    ".revert_window(",
];

/// Policy's gate and judgement terms: read by `policy::gates` and
/// `policy::evaluate`, never by the daemon.
const POLICY_TERMS: &[&str] = &[
    "timing.cooldown",
    "max_changes_per_hour",
    "gates::cooldown",
    "gates::touched",
    "gates::in_window",
    "gates::HOUR",
    "MAX_BACKOFF",
    "harm_level",
    "evaluate::judge",
];

/// Whether whitespace-free `code` compares a path ending in `field`
/// (`b.until>now`, `now>=e.ends`), not a method of it (`.ends_with`).
fn compares(code: &str, field: &str) -> bool {
    let plain =
        |rest: &str| !rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '(');
    let left = code.match_indices(field).any(|(i, _)| {
        let rest = &code[i + field.len()..];
        plain(rest)
            && (rest.starts_with('<') || rest.starts_with('>'))
            && !rest.starts_with("<<")
            && !rest.starts_with(">>")
    });
    let right = code.match_indices(['<', '>']).any(|(i, _)| {
        // `->`, `=>`, shifts and generics' closing brackets are no comparison.
        if matches!(code[..i].chars().last(), Some('-' | '=' | '<' | '>')) {
            return false;
        }
        let operand = code[i + 1..]
            .trim_start_matches('=')
            .trim_start_matches(['*', '&']);
        let len = operand
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(operand.len());
        operand[..len].ends_with(field) && plain(&operand[len..])
    });
    left || right
}

/// Each occurrence of a decided word in daemon code that is not a carried
/// verdict, of a policy term, and of a deadline compared by hand.
fn decisions_outside_policy(rel: &str, code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let at = format!("{rel}:{}", n + 1);
        let mut rest = line.to_owned();
        for c in CARRIED {
            rest = rest.replace(c, " ");
        }
        let lower = rest.to_ascii_lowercase();
        for word in ["cooldown", "budget", "harm", "revert"] {
            // `policy.budget` is the memory budget (a limit the plan
            // respects), not the hourly change budget; so is anything
            // named `memory_budget`.
            let memory = lower.matches("policy.budget").count()
                + lower.matches("memorybudget").count()
                + lower.matches("memory_budget").count();
            if word == "budget" && lower.matches("budget").count() == memory {
                continue;
            }
            if lower.contains(word) {
                found.push(format!("{at}: `{word}` in code: {}", line.trim()));
            }
        }
        for t in POLICY_TERMS {
            if line.contains(t) {
                found.push(format!("{at}: reads policy's `{t}`: {}", line.trim()));
            }
        }
        // `b.until > now`, `e.ends <= now`: whether a backoff still holds or
        // an evaluation is due is `Backoff::active` / `Evaluation::due`.
        let compact: String = line.split_whitespace().collect();
        for field in [".until", ".ends"] {
            if compares(&compact, field) {
                found.push(format!(
                    "{at}: compares a policy deadline (`{field}`): {}",
                    line.trim()
                ));
            }
        }
        // A gate or a judgement defined here.
        if let Some(name) = rest.split("fn ").nth(1).map(|s| {
            s.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect::<String>()
        }) {
            let lower = name.to_ascii_lowercase();
            if lower
                .split('_')
                .any(|w| ["gate", "gates", "admit", "admissible", "judge", "verdict"].contains(&w))
            {
                found.push(format!(
                    "{at}: defines `fn {name}`: gates and verdicts are policy's"
                ));
            }
        }
    }
    found
}

/// The daemon and the recording's crate (daemon/record: replay runs the
/// engine there) decide nothing policy decides.
#[test]
fn only_policy_decides_cooldown_budget_harm_and_revert() {
    let mut found = Vec::new();
    for dir in ["src", "record/src"] {
        let (src, files) = sources_in(dir);
        for (f, code) in &files {
            let rel = format!(
                "{dir}/{}",
                f.strip_prefix(&src).expect("under src").display()
            );
            found.extend(decisions_outside_policy(&rel, code));
        }
    }
    assert!(
        found.is_empty(),
        "decisions made in the daemon instead of policy/:\n  {}",
        found.join("\n  ")
    );
}

#[test]
fn the_decision_check_catches_what_it_is_for() {
    let caught = |code: &str| !decisions_outside_policy("x.rs", &code_only(code)).is_empty();
    // Carried verdicts, log text and the memory budget pass.
    assert!(!caught(
        "if let Verdict::Harmful(why) = &v { warn!(\"reverting: harm\") }"
    ));
    assert!(!caught(
        "let r = ReasonCode::Cooldown; let o = Outcome::Reverted;"
    ));
    assert!(!caught("let m = policy.budget.max_pool_bytes;"));
    assert!(!caught(
        "retry_in_s: b.until.saturating_sub(now).as_secs(),"
    ));
    // Decisions do not.
    assert!(caught(
        "if now < last.at + policy.timing.cooldown { return; }"
    ));
    assert!(caught("let cooldown_left = x;"));
    assert!(caught("if n >= p.limits.max_changes_per_hour { skip() }"));
    assert!(caught("let backed_off = b.until > now;"));
    assert!(caught("if now >= e.ends { close() }"));
    assert!(caught(".partition(|e| e.ends <= now)"));
    assert!(caught("fn gate_change(d: &Device) -> bool { true }"));
    assert!(caught("pub(crate) fn judge(ev: &Evaluation) -> Outcome {"));
    assert!(!caught("fn unjudgeable(reason: ReasonCode) -> bool {"));
    assert!(caught("let harm = after.drops - before.drops;"));
    assert!(caught("if worse { self.revert(ev) }"));
}

/// One module style in the workspace: a module with submodules is
/// `name.rs` beside its folder `name/`, never `name/mod.rs` (the two were
/// mixed inside one crate). Every crate's `src`, the benches and the
/// tests are scanned, and the fuzz crate's (its `target/` is not).
#[test]
fn no_module_is_a_mod_rs() {
    let root = pptune_tests::repo_root();
    let mut files = Vec::new();
    for dir in [
        "policy/src",
        "netlink/src",
        "config/src",
        "daemon/src",
        "daemon/record/src",
        "daemon/benches",
        "daemon/tests",
        "tests",
        "fuzz/fuzz_targets",
        "fuzz/src",
    ] {
        let d = root.join(dir);
        assert!(d.is_dir(), "{} is gone: update this list", d.display());
        rust_files(&d, &mut files);
    }
    assert!(
        files.len() > 100,
        "the scan found only {} files",
        files.len()
    );
    let mod_rs: Vec<_> = files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n == "mod.rs"))
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        mod_rs.is_empty(),
        "move each to `name.rs` beside its folder: {mod_rs:#?}"
    );
}
