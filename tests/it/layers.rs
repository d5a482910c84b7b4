//! The crate's layering, checked: top-level modules import only modules below them, in the order
//! `docs/architecture.md` describes, so no import cycle can form between them; inside a module,
//! no cycle joins more than two files.
//!
//! It reads the sources as text (any `crate::x` or `super::x` mention counts, doc comments too,
//! as the team's module-graph tool counts them), so it needs no build of the crate.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Bottom to top: each module may use only those before it.
const LAYERS: &[&str] = &[
    "civil",
    "money",
    "logging",
    "metrics",
    "tokens",
    "auth",
    "common",
    "telemetry",
    "caps",
    "upstream",
    "stream",
    "store",
    "limits",
    "cache",
    "catalog",
    "api",
    "cost",
    "providers",
    "config",
    "ledger",
    "tenants",
    "engine",
    "gateway",
    "server",
    "embed",
    "check",
    "provider_api",
    "internals",
];

/// A source file's module path (`src/a/b.rs` → `[a, b]`, `src/a/mod.rs` → `[a]`).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text that counts: a file without its `#[cfg(test)] mod tests { … }` tail (tests may
/// reach anywhere).
fn counted(text: &str) -> &str {
    match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    }
}

/// Every `crate::a::b…` path mentioned (also inside `use crate::{a, b::c}` groups), as segments.
fn crate_paths(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let ident = |s: &str| -> Vec<String> {
        s.split("::")
            .map(|seg| {
                seg.chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect::<String>()
            })
            .take_while(|seg| !seg.is_empty())
            .collect()
    };
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + 7..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                out.push(ident(item.trim()));
            }
        } else {
            out.push(ident(rest));
        }
    }
    out.retain(|p| !p.is_empty());
    out
}

/// `super::x` mentions, resolved against the file's own module path.
fn super_paths(module: &[String], text: &str) -> Vec<Vec<String>> {
    // In `a/b.rs` (module a::b) and in `a/b/mod.rs` (also a::b), `super::x` names `a::x`.
    let parent = &module[..module.len().saturating_sub(1)];
    let mut out = Vec::new();
    for (i, _) in text.match_indices("super::") {
        if text[..i].ends_with("super::") {
            continue;
        }
        let rest = &text[i + 7..];
        // `super::{a, b::c}` names each item of the group.
        let names: Vec<&str> = match rest.strip_prefix('{') {
            Some(group) => group[..group.find('}').unwrap_or(group.len())]
                .split(',')
                .collect(),
            None => vec![rest],
        };
        for name in names {
            let name: String = name
                .trim()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                let mut p = parent.to_vec();
                p.push(name);
                out.push(p);
            }
        }
    }
    out
}

struct Graph {
    /// module path at depth 1 or 2 → the modules it mentions at the same depth.
    edges: BTreeMap<String, BTreeSet<String>>,
}

fn graph(depth: usize) -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let key = |p: &[String]| p[..p.len().min(depth)].join("::");
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let module = module_of(&src, &file);
        if module.is_empty() || module[0] == "main" {
            continue;
        }
        let text = fs::read_to_string(&file).unwrap();
        let text = counted(&text);
        let me = key(&module);
        let mut targets = crate_paths(text);
        targets.extend(super_paths(&module, text));
        let entry = edges.entry(me.clone()).or_default();
        for t in targets {
            // Only modules of the crate count (at depth 2, a path that names an item of a
            // top-level module, `crate::catalog::Target`, is not a module edge).
            let k = key(&t);
            if k != me && (depth == 1 || t.len() >= 2) {
                entry.insert(k);
            }
        }
    }
    Graph { edges }
}

#[test]
fn top_level_modules_import_only_lower_layers() {
    let g = graph(1);
    let rank = |m: &str| LAYERS.iter().position(|l| *l == m);
    let mut problems = Vec::new();
    for (from, tos) in &g.edges {
        let Some(r) = rank(from) else {
            problems.push(format!(
                "module `{from}` is in no layer: add it to LAYERS and the docs"
            ));
            continue;
        };
        for to in tos {
            match rank(to) {
                Some(t) if t < r => {}
                Some(_) => problems.push(format!("`{from}` uses `{to}`, which is not below it")),
                None => {}
            }
        }
    }
    assert!(
        problems.is_empty(),
        "layering broken:\n{}",
        problems.join("\n")
    );
}

/// Strongly connected components (import cycles) of more than `max` modules.
fn cycles(g: &Graph, max: usize) -> Vec<Vec<String>> {
    // The graph is small: two modules share a component when each reaches the other.
    let nodes: Vec<&String> = g.edges.keys().collect();
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_string()];
        while let Some(n) = stack.pop() {
            for m in g.edges.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    stack.push(m.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for n in &nodes {
        if done.contains(*n) {
            continue;
        }
        let comp: Vec<String> = nodes
            .iter()
            .filter(|m| {
                **m == *n || (reaches[*n].contains(**m) && reaches[**m].contains(n.as_str()))
            })
            .map(|m| m.to_string())
            .collect();
        done.extend(comp.iter().cloned());
        if comp.len() > max {
            out.push(comp);
        }
    }
    out
}

#[test]
fn no_top_level_cycle() {
    assert_eq!(cycles(&graph(1), 1), Vec::<Vec<String>>::new());
}

#[test]
fn no_cycle_of_more_than_two_files_inside_a_module() {
    for depth in [2, 3] {
        assert_eq!(
            cycles(&graph(depth), 2),
            Vec::<Vec<String>>::new(),
            "depth {depth}"
        );
    }
}
