//! The runtime's layering holds: the map in `src/lib.rs`'s crate docs gives each top-level
//! module a layer, and every path a file names through `crate::` or `super::` (in `use`
//! lines and in code, tests included) must reach a module of its own layer or a lower one,
//! with no circle among the top-level modules. Inside each folder module the same holds one
//! level down: its children (one per file or subfolder) name each other in no circle, the
//! folder's `mod.rs` aside (the root and its children name each other both ways, as the
//! module tree needs), and in a folder reshaped already, not through `mod.rs` either
//! (`FOLDERS_WITH_CIRCLES`). A failure names the file and line.
//!
//! The scanner reads Rust text, not a syntax tree: comments and string literals are skipped,
//! inline `mod name { ... }` blocks are followed (so `super::` inside them resolves), and
//! paths are taken after `crate::` and `super::`. That is every way one module can name
//! another in this crate's style: no `extern crate`, no `#[path]`; a glob of the crate root
//! (`use crate::*`, or `super::*` in a top-level module) would hide names, so it is an error.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A reference from one top-level module to another.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reference {
    file: String,
    line: usize,
    from: String,
    to: String,
}

/// The layer of each module, from the crate docs' rows `//! | N | `a`, `b` | ... |`.
fn parse_map(lib_rs: &str) -> Result<BTreeMap<String, usize>, String> {
    let mut layers = BTreeMap::new();
    for line in lib_rs.lines() {
        let Some(row) = line.trim_start().strip_prefix("//!") else { continue };
        let cells: Vec<&str> = row.trim().split('|').map(str::trim).collect();
        // "| N | modules | what |" splits into ["", "N", "modules", "what", ""].
        let Some(layer) = cells.get(1).and_then(|c| c.parse::<usize>().ok()) else { continue };
        let modules = cells.get(2).ok_or_else(|| format!("the row of layer {layer} has no modules"))?;
        for m in modules.split(',') {
            let name = m.trim().trim_matches('`');
            if name.is_empty() {
                continue;
            }
            if let Some(old) = layers.insert(name.to_string(), layer) {
                return Err(format!("module `{name}` is in layers {old} and {layer}"));
            }
        }
    }
    if layers.is_empty() {
        return Err("no layer table (rows `//! | N | `module`, ... | ... |`) in the crate docs".into());
    }
    Ok(layers)
}

/// The top-level modules `lib.rs` declares (`mod x;`, `pub mod x;`) or takes from the
/// contract crate (`pub use contract::{x, y};`, modules the compiler shares).
fn declared_modules(lib_rs: &str) -> BTreeSet<String> {
    lib_rs
        .lines()
        .flat_map(|l| {
            let l = l.trim();
            if let Some(list) = l.strip_prefix("pub use contract::{").and_then(|r| r.strip_suffix("};")) {
                return list.split(',').map(|m| m.trim().to_string()).collect();
            }
            let rest = l.strip_prefix("pub ").unwrap_or(l);
            let rest = rest.strip_prefix("pub(crate) ").unwrap_or(rest);
            let name = rest.strip_prefix("mod ").and_then(|r| r.strip_suffix(';'));
            name.map(|n| vec![n.trim().to_string()]).unwrap_or_default()
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    PathSep,
    Open,
    Close,
    Comma,
    Star,
    Other,
}

/// The tokens of Rust source that matter for paths, each with its line; comments, strings
/// and character literals are dropped.
fn tokens(src: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    while i < c.len() {
        let ch = c[i];
        match ch {
            '\n' => {
                line += 1;
                i += 1;
            }
            '/' if at(i + 1) == '/' => {
                while i < c.len() && c[i] != '\n' {
                    i += 1;
                }
            }
            '/' if at(i + 1) == '*' => {
                let mut depth = 0;
                while i < c.len() {
                    if c[i] == '/' && at(i + 1) == '*' {
                        depth += 1;
                        i += 2;
                    } else if c[i] == '*' && at(i + 1) == '/' {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        line += usize::from(c[i] == '\n');
                        i += 1;
                    }
                }
            }
            '"' => i = skip_string(&c, i + 1, &mut line),
            'r' | 'b' if is_raw_or_byte_string(&c, i) => {
                // b"..", r"..", r#".."#, br#".."#
                let mut j = i + 1;
                if c[i] == 'b' && at(j) == 'r' {
                    j += 1;
                }
                let hashes = c[j..].iter().take_while(|&&h| h == '#').count();
                j += hashes;
                if c[i] == 'b' && at(i + 1) == '"' {
                    i = skip_string(&c, i + 2, &mut line);
                    continue;
                }
                j += 1; // the opening quote
                let closing: Vec<char> = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
                while j < c.len() && c[j..].iter().take(closing.len()).ne(closing.iter()) {
                    line += usize::from(c[j] == '\n');
                    j += 1;
                }
                i = j + closing.len();
            }
            '\'' => {
                // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
                if at(i + 1) == '\\' {
                    let mut j = i + 2;
                    while j < c.len() && c[j] != '\'' {
                        j += 1;
                    }
                    i = j + 1;
                } else if at(i + 2) == '\'' {
                    i += 3;
                } else {
                    i += 1;
                }
            }
            c0 if c0.is_alphabetic() || c0 == '_' => {
                let start = i;
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
                out.push((Tok::Ident(c[start..i].iter().collect()), line));
            }
            ':' if at(i + 1) == ':' => {
                out.push((Tok::PathSep, line));
                i += 2;
            }
            '{' => {
                out.push((Tok::Open, line));
                i += 1;
            }
            '}' => {
                out.push((Tok::Close, line));
                i += 1;
            }
            ',' => {
                out.push((Tok::Comma, line));
                i += 1;
            }
            '*' => {
                out.push((Tok::Star, line));
                i += 1;
            }
            c0 if c0.is_whitespace() => i += 1,
            _ => {
                out.push((Tok::Other, line));
                i += 1;
            }
        }
    }
    out
}

fn is_raw_or_byte_string(c: &[char], i: usize) -> bool {
    // Not the tail of an identifier (`for"`, `attr#`...).
    if i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_') {
        return false;
    }
    let rest: String = c[i..c.len().min(i + 3)].iter().collect();
    rest.starts_with("r\"") || rest.starts_with("r#") || rest.starts_with("b\"") || rest.starts_with("br")
}

/// Skips a string body from `i` (after its opening quote); returns the index after its end.
fn skip_string(c: &[char], mut i: usize, line: &mut usize) -> usize {
    while i < c.len() && c[i] != '"' {
        if c[i] == '\\' {
            i += 1;
        }
        if c.get(i) == Some(&'\n') {
            *line += 1;
        }
        i += 1;
    }
    i + 1
}

/// The module path of a file under `src/` (`devices/cuda.rs` is `devices::cuda`).
fn module_path(rel: &str) -> Vec<String> {
    let rel = rel.trim_end_matches(".rs");
    let mut parts: Vec<String> = rel.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The inline `mod name { ... }` blocks a scan is inside, followed token by token.
#[derive(Default)]
struct Inline {
    /// (name, brace depth inside it).
    stack: Vec<(String, usize)>,
    depth: usize,
}

impl Inline {
    fn step(&mut self, toks: &[(Tok, usize)], k: usize) {
        match &toks[k].0 {
            Tok::Open => self.depth += 1,
            Tok::Close => {
                if self.stack.last().is_some_and(|(_, d)| *d == self.depth) {
                    self.stack.pop();
                }
                self.depth = self.depth.saturating_sub(1);
            }
            Tok::Ident(s) if s == "mod" => {
                if let (Some((Tok::Ident(name), _)), Some((Tok::Open, _))) = (toks.get(k + 1), toks.get(k + 2)) {
                    self.stack.push((name.clone(), self.depth + 1));
                }
            }
            _ => {}
        }
    }

    fn names(&self) -> impl Iterator<Item = String> + '_ {
        self.stack.iter().map(|(n, _)| n.clone())
    }
}

/// The items of the group `{ ... }` opening at token `open`: each item's first name with its
/// line (`self` left out), `None` for a glob.
fn group_items(toks: &[(Tok, usize)], open: usize) -> Vec<(Option<String>, usize)> {
    let mut out = Vec::new();
    let mut d = 0;
    let mut item_start = true;
    for (tok, line) in &toks[open..] {
        match tok {
            Tok::Open => {
                d += 1;
                item_start = d == 1;
                continue;
            }
            Tok::Close => {
                d -= 1;
                if d == 0 {
                    break;
                }
            }
            Tok::Comma if d == 1 => {
                item_start = true;
                continue;
            }
            Tok::Star if d == 1 && item_start => out.push((None, *line)),
            Tok::Ident(name) if d == 1 && item_start && name != "self" => out.push((Some(name.clone()), *line)),
            _ => {}
        }
        item_start = false;
    }
    out
}

/// Every reference from `file` (path under `src/`) to a top-level module other than its own,
/// or an error for a glob of the crate root.
fn references(file: &str, src: &str) -> Result<Vec<Reference>, String> {
    let toks = tokens(src);
    let file_path = module_path(file);
    let own = file_path[0].clone();
    let ident = |k: usize, name: &str| matches!(toks.get(k), Some((Tok::Ident(s), _)) if s == name);
    let sep = |k: usize| matches!(toks.get(k), Some((Tok::PathSep, _)));
    let mut out = Vec::new();
    let mut inline = Inline::default();
    let mut k = 0;
    while k < toks.len() {
        let line = toks[k].1;
        inline.step(&toks, k);
        let starts_path = (ident(k, "crate") || ident(k, "super")) && sep(k + 1) && (k == 0 || !sep(k - 1));
        if !starts_path {
            k += 1;
            continue;
        }
        let mut base: Vec<String> = file_path.iter().cloned().chain(inline.names()).collect();
        let mut j = k;
        if ident(k, "crate") {
            base.clear();
            j += 2;
        } else {
            while ident(j, "super") && sep(j + 1) {
                if base.pop().is_none() {
                    return Err(format!("{file}:{line}: `super::` climbs above the crate root"));
                }
                j += 2;
            }
        }
        if let Some(top) = base.first() {
            // Still inside a top-level module (its own, via `super::`).
            if *top != own {
                out.push(Reference { file: file.into(), line, from: own.clone(), to: top.clone() });
            }
            k = j;
            continue;
        }
        // At the crate root: the next segment, or each item of a group, names a module.
        match toks.get(j) {
            Some((Tok::Ident(name), _)) if *name != own => {
                out.push(Reference { file: file.into(), line, from: own.clone(), to: name.clone() });
            }
            Some((Tok::Star, _)) => return Err(format!("{file}:{line}: a glob import of the crate root")),
            Some((Tok::Open, _)) => {
                for (name, line) in group_items(&toks, j) {
                    match name {
                        None => return Err(format!("{file}:{line}: a glob import of the crate root")),
                        Some(name) if name != own => {
                            out.push(Reference { file: file.into(), line, from: own.clone(), to: name });
                        }
                        Some(_) => {}
                    }
                }
            }
            _ => {}
        }
        k = j;
    }
    Ok(out)
}

/// Within a folder of modules (`partitioned/`): every reference from `file` to another child
/// of the folder `dir`, by child (`mod` for the folder's `mod.rs`). A child is a file of the
/// folder or a subfolder, whose files all speak for it. A child names a sibling or its
/// parent's items through `super::` or `crate::`; `mod.rs` names its children by their bare
/// names too. `children` are the folder's child modules.
fn folder_references(dir: &str, file: &str, src: &str, children: &BTreeSet<String>) -> Vec<Reference> {
    let toks = tokens(src);
    let path = module_path(file);
    let folder = module_path(&format!("{dir}mod.rs"));
    let is_mod = path == folder;
    let own = if is_mod { "mod".to_string() } else { path[folder.len()].clone() };
    let ident = |k: usize| match toks.get(k) {
        Some((Tok::Ident(s), _)) => Some(s.as_str()),
        _ => None,
    };
    let sep = |k: usize| matches!(toks.get(k), Some((Tok::PathSep, _)));
    let mut out = Vec::new();
    let mut push = |target: &str, line: usize| {
        let to = if children.contains(target) { target.to_string() } else { "mod".to_string() };
        if to != own {
            out.push(Reference { file: file.into(), line, from: own.clone(), to });
        }
    };
    let mut inline = Inline::default();
    let mut k = 0;
    while k < toks.len() {
        let line = toks[k].1;
        inline.step(&toks, k);
        let first = k == 0 || !sep(k - 1);
        // `mod.rs` naming a child by its bare name (`split::plan_split`).
        if is_mod && first && inline.stack.is_empty() && sep(k + 1) {
            if let Some(name) = ident(k).filter(|n| children.contains(*n)) {
                push(name, line);
                k += 2;
                continue;
            }
        }
        let starts = matches!(ident(k), Some("crate" | "super")) && sep(k + 1) && first;
        if !starts {
            k += 1;
            continue;
        }
        let mut base: Vec<String> = path.iter().cloned().chain(inline.names()).collect();
        let mut j = k;
        if ident(k) == Some("crate") {
            base.clear();
            j += 2;
        } else {
            while ident(j) == Some("super") && sep(j + 1) {
                base.pop();
                j += 2;
            }
        }
        // The rest of the path, as far as it names modules of the folder.
        while base.len() < folder.len() + 1 {
            match ident(j) {
                Some(name) => {
                    base.push(name.to_string());
                    if sep(j + 1) {
                        j += 2;
                    } else {
                        j += 1;
                        break;
                    }
                }
                None => break,
            }
        }
        if base.len() > folder.len() && base[..folder.len()] == folder[..] {
            push(&base[folder.len()], line);
        } else if base[..] == folder[..] && matches!(toks.get(j), Some((Tok::Open, _))) {
            // A group at the folder's root: each item (a glob names nothing in particular).
            for (name, line) in group_items(&toks, j) {
                if let Some(name) = name {
                    push(&name, line);
                }
            }
        }
        k = j.max(k + 1);
    }
    out
}

/// Every violation of the layering among `refs`: upward references, then circles.
fn violations(layers: &BTreeMap<String, usize>, refs: &[Reference]) -> Vec<String> {
    let mut errors = Vec::new();
    // Names not in the table are the crate root's own items (`fatal`): the bottom layer.
    let layer = |m: &str| layers.get(m).copied().unwrap_or(0);
    for r in refs {
        if layer(&r.to) > layer(&r.from) {
            errors.push(format!(
                "{}:{}: `{}` (layer {}) names `{}` (layer {}): an upward import",
                r.file,
                r.line,
                r.from,
                layer(&r.from),
                r.to,
                layer(&r.to)
            ));
        }
    }
    let mapped: Vec<Reference> = refs.iter().filter(|r| layers.contains_key(&r.to)).cloned().collect();
    errors.extend(circles(&mapped));
    errors
}

/// Every circle among `refs` (each named once, with the first reference of each hop).
fn circles(refs: &[Reference]) -> Vec<String> {
    let mut errors = Vec::new();
    // A depth-first search over the first reference of each edge.
    let mut edges: BTreeMap<&str, BTreeMap<&str, &Reference>> = BTreeMap::new();
    for r in refs {
        edges.entry(r.from.as_str()).or_default().entry(r.to.as_str()).or_insert(r);
    }
    let mut reported: BTreeSet<BTreeSet<&str>> = BTreeSet::new();
    fn walk<'a>(
        at: &'a str,
        path: &mut Vec<&'a str>,
        edges: &BTreeMap<&'a str, BTreeMap<&'a str, &'a Reference>>,
        reported: &mut BTreeSet<BTreeSet<&'a str>>,
        errors: &mut Vec<String>,
        done: &mut BTreeSet<&'a str>,
    ) {
        if let Some(i) = path.iter().position(|p| *p == at) {
            let circle: Vec<&str> = path[i..].to_vec();
            if reported.insert(circle.iter().copied().collect()) {
                let hops: Vec<String> = circle
                    .iter()
                    .zip(circle.iter().skip(1).chain(std::iter::once(&at)))
                    .map(|(a, b)| {
                        let r = edges[a][b];
                        format!("`{a}` -> `{b}` ({}:{})", r.file, r.line)
                    })
                    .collect();
                errors.push(format!("a circle of imports: {}", hops.join(", ")));
            }
            return;
        }
        if done.contains(at) {
            return;
        }
        path.push(at);
        if let Some(next) = edges.get(at) {
            for to in next.keys() {
                walk(to, path, edges, reported, errors, done);
            }
        }
        path.pop();
        done.insert(at);
    }
    let mut done = BTreeSet::new();
    for start in edges.keys() {
        walk(start, &mut Vec::new(), &edges, &mut reported, &mut errors, &mut done);
    }
    errors
}

/// Every circle among a folder's children alone: references to or from its `mod.rs` are
/// left out, since the module tree needs them both ways (the root declares its children and
/// may re-export or call them; a child may use the items the root holds).
fn circles_among_children(refs: &[Reference]) -> Vec<String> {
    let among: Vec<Reference> = refs.iter().filter(|r| r.from != "mod" && r.to != "mod").cloned().collect();
    circles(&among)
}

fn rust_files(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).expect("src/ is readable").map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, root, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            out.push((rel, std::fs::read_to_string(&p).unwrap()));
        }
    }
}

#[test]
fn the_runtime_imports_point_down() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let layers = parse_map(&lib).unwrap_or_else(|e| panic!("src/lib.rs: {e}"));
    let declared = declared_modules(&lib);
    let mapped: BTreeSet<String> = layers.keys().cloned().collect();
    let unmapped: Vec<&String> = declared.difference(&mapped).collect();
    let undeclared: Vec<&String> = mapped.difference(&declared).collect();
    assert!(unmapped.is_empty(), "src/lib.rs declares modules the layer table does not place: {unmapped:?}");
    assert!(undeclared.is_empty(), "the layer table names modules src/lib.rs does not declare: {undeclared:?}");

    let mut files = Vec::new();
    rust_files(&src, &src, &mut files);
    let mut refs = Vec::new();
    let mut errors = Vec::new();
    for (rel, text) in files.iter().filter(|(rel, _)| rel != "lib.rs") {
        match references(rel, text) {
            Ok(r) => refs.extend(r),
            Err(e) => errors.push(e),
        }
    }
    assert!(refs.len() > 50, "the scanner found only {} cross-module references: is it reading src/?", refs.len());
    errors.extend(violations(&layers, &refs));
    assert!(errors.is_empty(), "the runtime's layering (src/lib.rs) is broken:\n{}", errors.join("\n"));
}

/// Folders whose files still name each other in circles through their `mod.rs` (it holds
/// items its children use, and uses them), to be reshaped as `partitioned/` was: the types
/// at the bottom in files of their own. Listed so that no other folder gains a circle, and
/// checked to still have one (a folder reshaped leaves the list). Their children alone form
/// no circle: that is checked for every folder.
const FOLDERS_WITH_CIRCLES: &[&str] = &["cudart/", "devices/", "memory/"];

#[test]
fn no_circle_runs_through_a_folder() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &src, &mut files);
    let mut errors = Vec::new();
    let mut folders = 0;
    for (rel, text) in files.iter().filter(|(rel, _)| rel.ends_with("/mod.rs")) {
        let dir = rel.trim_end_matches("mod.rs");
        let children: BTreeSet<String> = declared_modules(text);
        let mut refs = Vec::new();
        // Every file under the folder, a subfolder's too: a subfolder is one child.
        for (child, ctext) in files.iter().filter(|(c, _)| c.starts_with(dir)) {
            refs.extend(folder_references(dir, child, ctext, &children));
        }
        folders += 1;
        let found = circles(&refs);
        if !FOLDERS_WITH_CIRCLES.contains(&dir) {
            errors.extend(found);
        } else if found.is_empty() {
            errors.push(format!("{dir} has no circle left: take it off FOLDERS_WITH_CIRCLES"));
        } else {
            // A listed folder's circles may run through its `mod.rs`, never among its children.
            errors.extend(circles_among_children(&refs));
        }
    }
    assert!(folders >= 4, "found only {folders} folders of modules under src/");
    assert!(errors.is_empty(), "files of one folder name each other in a circle:\n{}", errors.join("\n"));
}

// The scanner and the checks, on small sources.

fn map() -> BTreeMap<String, usize> {
    parse_map(
        "//! | layer | modules | what |\n//! |---|---|---|\n//! | 0 | `ctx`, `sink` | records |\n\
         //! | 2 | `devices` | devices |\n//! | 3 | `memory`, `module` | memory |\n//! | 5 | `launch` | top |\n",
    )
    .unwrap()
}

fn targets(file: &str, src: &str) -> Vec<(usize, String)> {
    references(file, src).unwrap().into_iter().map(|r| (r.line, r.to)).collect()
}

#[test]
fn the_map_is_read_from_the_table_rows() {
    let m = map();
    assert_eq!(m["ctx"], 0);
    assert_eq!(m["memory"], 3);
    assert_eq!(m["launch"], 5);
    assert_eq!(m.len(), 6);
    assert!(parse_map("//! | 1 | `a` | x |\n//! | 2 | `a` | y |").is_err_and(|e| e.contains("`a`")));
    assert!(parse_map("//! no table\n").is_err());
    let lib = "pub mod a;\nmod b;\n#[cfg(test)]\nmod c;\npub use contract::{d, e};\npub fn fatal() {}\n";
    assert_eq!(declared_modules(lib), ["a", "b", "c", "d", "e"].iter().map(|s| s.to_string()).collect());
}

#[test]
fn paths_in_use_lines_groups_and_code_are_found() {
    let src = "use crate::devices::Place;\nuse crate::{memory::{self, Table}, sink, fatal};\n\
               fn f() { crate::launch::go(); let x = a::crate_thing; }\n";
    assert_eq!(
        targets("module.rs", src),
        vec![
            (1, "devices".to_string()),
            (2, "memory".to_string()),
            (2, "sink".to_string()),
            (2, "fatal".to_string()),
            (3, "launch".to_string())
        ]
    );
}

#[test]
fn comments_strings_and_visibility_are_not_paths() {
    let src = "// use crate::launch;\n/* crate::launch /* nested */ crate::launch */\n\
               pub(crate) fn f() -> &'static str { \"crate::launch\" }\n\
               const R: &str = r#\"crate::launch \"quoted\" \"#;\nconst C: char = '\"';\nfn g<'a>(x: &'a u8) {}\n\
               use crate::sink;\n";
    assert_eq!(targets("memory/mod.rs", src), vec![(7, "sink".to_string())]);
}

#[test]
fn super_resolves_through_files_and_inline_modules() {
    // In devices/cuda.rs, `super::` is `devices`: its own module, not a reference; nor is
    // its own module named from the root.
    assert!(targets("devices/cuda.rs", "use super::Device;\nuse crate::devices::{Copy, Place};").is_empty());
    // In a top-level file, `super::` is the crate root.
    assert_eq!(targets("memory.rs", "use super::launch::X;"), vec![(1, "launch".to_string())]);
    // Inside an inline module of a top-level file, `super::` is that file's module...
    assert!(targets("memory.rs", "mod tests {\n use super::*;\n}\n").is_empty());
    // ...and `super::super::` the crate root; after the block closes, the file's module again.
    let src = "mod tests {\n use super::super::launch::X;\n}\nuse super::sink::Y;\n";
    assert_eq!(targets("memory.rs", src), vec![(2, "launch".to_string()), (4, "sink".to_string())]);
    // A glob of the crate root hides what it brings in.
    assert!(references("memory.rs", "use super::*;").is_err_and(|e| e.contains("memory.rs:1")));
    assert!(references("memory/x.rs", "use crate::{sink, *};").is_err_and(|e| e.contains("glob")));
}

#[test]
fn an_upward_import_is_named_with_its_file_and_line() {
    let refs = references("memory/mod.rs", "use crate::devices::Copy;\n\nuse crate::launch::engine::Args;\n").unwrap();
    let errors = violations(&map(), &refs);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].starts_with("memory/mod.rs:3: `memory` (layer 3) names `launch` (layer 5)"), "{}", errors[0]);
}

#[test]
fn a_circle_within_a_layer_is_named_with_each_hop() {
    let mut refs = references("memory/mod.rs", "use crate::module::Module;").unwrap();
    refs.extend(references("module.rs", "\nfn f() { crate::memory::table(); }").unwrap());
    let errors = violations(&map(), &refs);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("`memory` -> `module` (memory/mod.rs:1)"), "{}", errors[0]);
    assert!(errors[0].contains("`module` -> `memory` (module.rs:2)"), "{}", errors[0]);
    // Without the way back, no circle.
    let one_way = references("memory/mod.rs", "use crate::module::Module;").unwrap();
    assert!(violations(&map(), &one_way).is_empty());
}

#[test]
fn a_circle_through_a_folder_is_found_and_its_mod_counts() {
    let children: BTreeSet<String> = ["plan", "split", "memo"].iter().map(|s| s.to_string()).collect();
    let found = |file: &str, src: &str| -> Vec<(usize, String)> {
        folder_references("partitioned/", file, src, &children).into_iter().map(|r| (r.line, r.to)).collect()
    };
    // A child names a sibling, its parent's items, and a sibling through the crate's path.
    let src = "use super::plan::LaunchPlan;\nuse super::{memo, Outcome};\nfn f() { super::strict(); }\n\
               use crate::partitioned::split::go;\nuse crate::memory::Table;\n";
    assert_eq!(
        found("partitioned/split.rs", src),
        vec![(1, "plan".into()), (2, "memo".into()), (2, "mod".into()), (3, "mod".into())]
    );
    // Tests inside a child name the child itself: no reference.
    assert!(found("partitioned/plan.rs", "mod tests {\n use super::*;\n}\n").is_empty());
    // `mod.rs` names its children bare; a circle through it is reported.
    let mut refs =
        folder_references("partitioned/", "partitioned/mod.rs", "fn f() { split::plan_split(); }", &children);
    refs.extend(folder_references("partitioned/", "partitioned/split.rs", "use super::Outcome;", &children));
    let errors = circles(&refs);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("`mod` -> `split`") && errors[0].contains("`split` -> `mod`"), "{}", errors[0]);
    refs.retain(|r| r.from != "split");
    assert!(circles(&refs).is_empty());
}

#[test]
fn a_circle_among_a_folders_children_is_found_and_its_mod_is_left_out() {
    let children: BTreeSet<String> =
        ["config", "launch", "graphs", "textures", "sub"].iter().map(|s| s.to_string()).collect();
    let refs_of = |file: &str, src: &str| folder_references("cudart/", file, src, &children);
    // Two children naming each other, through `super::` and through the crate's path.
    let mut refs = refs_of("cudart/config.rs", "use super::launch::is_kernel;\n");
    refs.extend(refs_of("cudart/launch.rs", "\n\nfn f() { crate::cudart::config::occupancy(); }\n"));
    let errors = circles_among_children(&refs);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("`config` -> `launch` (cudart/config.rs:1)"), "{}", errors[0]);
    assert!(errors[0].contains("`launch` -> `config` (cudart/launch.rs:3)"), "{}", errors[0]);
    // Through the root both ways (`mod.rs` names `graphs` bare and `self::launch`; they name
    // its items): a circle with `mod`, none among the children.
    let mut through_root = refs_of("cudart/mod.rs", "fn f() { graphs::capture_of(s); self::launch::go(); }\n");
    through_root.extend(refs_of("cudart/launch.rs", "use super::capture_launch;\n"));
    through_root.extend(refs_of("cudart/graphs.rs", "use super::launch::Dim3;\nuse super::{api, ret};\n"));
    assert!(!circles(&through_root).is_empty());
    assert!(circles_among_children(&through_root).is_empty(), "{:?}", circles_among_children(&through_root));
    // A longer circle is named once, each hop with its first reference.
    let mut three = refs_of("cudart/graphs.rs", "use super::launch::Dim3;\nuse super::launch::check;\n");
    three.extend(refs_of("cudart/launch.rs", "fn f() { super::textures::array(); }\n"));
    three.extend(refs_of("cudart/textures.rs", "\nuse crate::cudart::{graphs::Extent, Error};\n"));
    let errors = circles_among_children(&three);
    assert_eq!(errors.len(), 1, "{errors:?}");
    for hop in [
        "`graphs` -> `launch` (cudart/graphs.rs:1)",
        "`launch` -> `textures` (cudart/launch.rs:1)",
        "`textures` -> `graphs` (cudart/textures.rs:2)",
    ] {
        assert!(errors[0].contains(hop), "{hop} in {}", errors[0]);
    }
    // A subfolder is one child: its files name a sibling of the folder through
    // `super::super::`, and one another not at all.
    let sub = refs_of(
        "cudart/sub/a.rs",
        "use super::super::graphs::Work;\nuse super::b::X;\nuse crate::cudart::sub::c::Y;\n",
    );
    let hops: Vec<(&str, &str, usize)> = sub.iter().map(|r| (r.from.as_str(), r.to.as_str(), r.line)).collect();
    assert_eq!(hops, vec![("sub", "graphs", 1)]);
    let mut refs = sub;
    refs.extend(refs_of("cudart/graphs.rs", "fn f() { super::sub::go(); }"));
    let errors = circles_among_children(&refs);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("`sub` -> `graphs` (cudart/sub/a.rs:1)"), "{}", errors[0]);
}
