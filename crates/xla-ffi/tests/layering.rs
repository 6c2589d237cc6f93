//! The core's modules import one another in one direction only.
//!
//! Reads `src/`, finds every `crate::…` (and `$crate::…`) path in each top-level
//! module (a file `src/x.rs` or a folder `src/x/`), resolves names that `lib.rs`
//! re-exports (`crate::Error`) to the module that defines them, and fails on any
//! cycle in the resulting graph, printing it. Comments and string literals are
//! skipped, so intra-doc links do not count.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Removes comments and the contents of string literals.
fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

fn ident_at(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// The first path segment of each item of a `{…}` group at the start of `s`.
fn group_heads(s: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut expect_head = true;
    for (i, c) in s.char_indices() {
        match c {
            '{' => {
                depth += 1;
                if depth == 1 {
                    expect_head = true;
                }
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            ',' if depth == 1 => expect_head = true,
            c if depth == 1 && expect_head && (c.is_alphanumeric() || c == '_') => {
                heads.push(ident_at(&s[i..]).to_string());
                expect_head = false;
            }
            _ => {}
        }
    }
    heads
}

/// The first segment of every `crate::` path in `src`.
fn crate_refs(src: &str) -> Vec<String> {
    let src = strip(src);
    let mut refs = Vec::new();
    for (i, _) in src.match_indices("crate::") {
        let before = src[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `xla_ffi_crate::`, not ours
        }
        let rest = src[i + "crate::".len()..].trim_start();
        if rest.starts_with('{') {
            refs.extend(group_heads(rest));
        } else {
            let id = ident_at(rest);
            if !id.is_empty() {
                refs.push(id.to_string());
            }
        }
    }
    refs
}

/// `pub use module::{A, B}` in lib.rs: the module each re-exported name comes from.
fn reexports(lib: &str) -> BTreeMap<String, String> {
    let lib = strip(lib);
    let mut map = BTreeMap::new();
    for stmt in lib.split(';') {
        let stmt = stmt.trim();
        let Some(rest) = stmt.rsplit("pub use ").next().filter(|_| stmt.contains("pub use ")) else { continue };
        let rest = rest.trim().trim_start_matches("crate::");
        let module = ident_at(rest).to_string();
        let after = rest[module.len()..].trim_start_matches("::");
        if after.starts_with('{') {
            for name in group_heads(after) {
                map.insert(name, module.clone());
            }
        } else if !after.is_empty() {
            map.insert(ident_at(after).to_string(), module);
        }
    }
    map
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// Top-level module name → the modules it refers to.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let lib = fs::read_to_string(src.join("lib.rs")).unwrap();
    let names = reexports(&lib);
    let mut modules: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for entry in fs::read_dir(src).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_stem().unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            let mut files = Vec::new();
            rust_files(&p, &mut files);
            modules.entry(name).or_default().extend(files);
        } else if p.extension().is_some_and(|e| e == "rs") && name != "lib" {
            modules.entry(name).or_default().push(p);
        }
    }
    let mut graph = BTreeMap::new();
    for (module, files) in &modules {
        let mut deps = BTreeSet::new();
        for f in files {
            for head in crate_refs(&fs::read_to_string(f).unwrap()) {
                let target = if modules.contains_key(&head) { Some(head) } else { names.get(&head).cloned() };
                if let Some(t) = target.filter(|t| t != module && modules.contains_key(t)) {
                    deps.insert(t);
                }
            }
        }
        graph.insert(module.clone(), deps);
    }
    graph
}

/// Some cycle of the graph, as the modules along it (first repeated at the end).
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(pos) = stack.iter().position(|s| s == n) {
            let mut cycle = stack[pos..].to_vec();
            cycle.push(n.to_string());
            return Some(cycle);
        }
        if done.contains(n) {
            return None;
        }
        stack.push(n.to_string());
        for d in graph.get(n).into_iter().flatten() {
            if let Some(c) = visit(d, graph, done, stack) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|n| visit(n, graph, &mut done, &mut Vec::new()))
}

#[test]
#[cfg_attr(miri, ignore = "reads the source files, which Miri's isolation forbids")]
fn the_core_has_no_import_cycles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = module_graph(&src);
    for (m, d) in &graph {
        println!("{m} -> {d:?}");
    }
    assert!(graph.len() > 5 && graph.values().any(|d| !d.is_empty()), "read no module graph: {graph:?}");
    if let Some(cycle) = find_cycle(&graph) {
        let edges: Vec<String> = graph.iter().map(|(m, d)| format!("  {m} -> {d:?}")).collect();
        panic!("import cycle among the core's modules: {}\nthe graph:\n{}", cycle.join(" -> "), edges.join("\n"));
    }
}

#[test]
fn the_checker_sees_a_cycle() {
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["c".to_string()]));
    g.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(find_cycle(&g).unwrap(), ["a", "b", "c", "a"]);
    g.get_mut("c").unwrap().clear();
    assert_eq!(find_cycle(&g), None);
}

#[test]
fn the_checker_reads_paths() {
    let src =
        "use crate::{a::X, b, c::{d, e}};\n// crate::z\nlet s = \"crate::y\"; $crate::f::g(); crate::Error::new()";
    assert_eq!(crate_refs(src), ["a", "b", "c", "f", "Error"]);
    let lib = "pub use call::{Call, Decode};\npub use error::Error;\n";
    let m = reexports(lib);
    assert_eq!(m["Decode"], "call");
    assert_eq!(m["Error"], "error");
}
