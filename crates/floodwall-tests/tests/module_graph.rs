//! The request path of floodwall-tower runs one way: no top-level module of the crate
//! imports, directly or through others, a module that imports it (ARCHITECTURE.md, "One
//! request through the layer").
//!
//! The graph is read from the source: each file's `use crate::…`, `use super::…` and
//! `use self::…` trees, and `crate::x::…` (or `super::x::…`) paths written in code; comments
//! (doc links among them) and string literals do not count. A directory module `x/mod.rs`
//! and every file under `x/` are module `x`; a name the crate root re-exports
//! (`crate::RateLimitLayer`) counts as an import of the module that defines it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Who imports whom: top-level module to the top-level modules it imports.
type Graph = BTreeMap<String, BTreeSet<String>>;

fn tower_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../floodwall-tower/src")
}

#[test]
fn floodwall_tower_modules_import_one_way() {
    let graph = module_graph(&tower_src());
    assert!(
        graph.len() > 10,
        "only {} modules found: is the parser broken? {graph:?}",
        graph.len()
    );
    let cycles = cycles(&graph);
    let drawn: Vec<String> = graph
        .iter()
        .map(|(from, to)| format!("  {from} -> {}", Vec::from_iter(to.clone()).join(", ")))
        .collect();
    // Shown with `--nocapture`.
    println!("floodwall-tower's module graph:\n{}", drawn.join("\n"));
    assert!(
        cycles.is_empty(),
        "floodwall-tower's modules import each other in a circle:\n{}\n\nthe graph:\n{}",
        cycles
            .iter()
            .map(|c| format!("  {}", c.join(" -> ")))
            .collect::<Vec<_>>()
            .join("\n"),
        drawn.join("\n")
    );
    // The path through the layer, top to bottom (checked by the loop above; named here so
    // that a rename of one of these modules is noticed).
    for module in ["layer", "service", "decide", "future", "headers", "respond"] {
        assert!(graph.contains_key(module), "no module `{module}`");
    }
}

/// The parser on a sample: use trees, paths in code, comments, strings and inline modules.
#[test]
fn the_parser_reads_imports_as_rustc_resolves_them() {
    let text = r##"
        //! [`Config`](crate::config::Config) in a doc link is not an import.
        use crate::{Key, a::{B, c::D}, b};
        use super::sibling::X;
        use self::child::Y;
        /* crate::commented::Out */
        fn f() { let _ = "crate::quoted::Out"; let _ = r#"crate::raw::Out"#; let _c = '"'; }
        fn g<'a>(x: &'a u8) { crate::e::call(); super::super::f::G; }
        mod tests { use super::*; use super::h::H; }
    "##;
    let paths = import_paths(text, &["x".to_owned(), "y".to_owned()]);
    let expected: Vec<Vec<&str>> = vec![
        vec!["Key"],
        vec!["a", "B"],
        vec!["a", "c", "D"],
        vec!["b"],
        vec!["x", "sibling", "X"],
        vec!["x", "y", "child", "Y"],
        vec!["e", "call"],
        vec!["f", "G"],
        vec!["x", "y", "h", "H"],
    ];
    assert_eq!(paths, expected);
}

/// The graph of the crate whose `lib.rs` is in `src`.
fn module_graph(src: &Path) -> Graph {
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    // The top-level modules, and what the root re-exports from each.
    let mut modules = BTreeSet::new();
    let tokens = tokenize(&strip(&lib));
    for w in tokens.windows(3) {
        if w[0] == "mod" && w[2] == ";" {
            modules.insert(w[1].clone());
        }
    }
    // At the root, `use x::Y` is `use crate::x::Y`.
    let mut reexports = BTreeMap::new();
    for (i, t) in tokens.iter().enumerate() {
        if t != "use" {
            continue;
        }
        let end = tokens[i..]
            .iter()
            .position(|t| t == ";")
            .map_or(tokens.len(), |p| i + p);
        let mut leaves = Vec::new();
        use_tree(&tokens[i + 1..end], Vec::new(), &mut leaves);
        for mut path in leaves {
            if path.first().is_some_and(|f| f == "crate") {
                path.remove(0);
            }
            if path.len() >= 2 && modules.contains(&path[0]) {
                reexports.insert(path[path.len() - 1].clone(), path[0].clone());
            }
        }
    }
    let mut graph = Graph::new();
    for module in &modules {
        graph.entry(module.clone()).or_default();
    }
    let mut files = Vec::new();
    rust_files(src, &mut files);
    for file in files {
        let relative = file.strip_prefix(src).unwrap();
        let Some(here) = module_path(relative) else {
            continue;
        };
        let Some(top) = here.first() else { continue };
        let text = std::fs::read_to_string(&file).unwrap();
        for path in import_paths(&text, &here) {
            let target = match path.first() {
                Some(first) if modules.contains(first) => first,
                Some(first) => match reexports.get(first) {
                    Some(module) => module,
                    None => continue,
                },
                None => continue,
            };
            if target != top {
                graph.get_mut(top).unwrap().insert(target.clone());
            }
        }
    }
    graph
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module a file is, from `src`: `lib.rs` is the root (`[]`), `x.rs` and `x/mod.rs`
/// are `[x]`, `x/y.rs` is `[x, y]`.
fn module_path(relative: &Path) -> Option<Vec<String>> {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop()?;
    let stem = last.strip_suffix(".rs")?;
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_owned());
    }
    Some(parts)
}

/// The source with comments and string, byte-string and char literals blanked out.
fn strip(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
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
        } else if c == 'r'
            && matches!(next, Some('#') | Some('"'))
            && !chars[..i]
                .last()
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
        {
            // A raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= chars.len() {
                    break;
                }
                if chars[j] == '"' && (0..hashes).all(|h| chars.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            i = j;
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a): blank the former.
            let close = if next == Some('\\') {
                chars[i + 2..]
                    .iter()
                    .position(|&c| c == '\'')
                    .map(|p| i + 2 + p)
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match close {
                Some(end) => {
                    out.push_str("' '");
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Identifiers and the punctuation that paths and use trees are made of.
fn tokenize(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(chars[start..i].iter().collect());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            tokens.push("::".to_owned());
            i += 2;
        } else if c.is_whitespace() {
            i += 1;
        } else {
            tokens.push(c.to_string());
            i += 1;
        }
    }
    tokens
}

/// Every path into the crate that `text` (the file of module `here`) imports, made
/// absolute (from the crate root, without `crate`).
fn import_paths(text: &str, here: &[String]) -> Vec<Vec<String>> {
    let tokens = tokenize(&strip(text));
    let mut paths = Vec::new();
    // The inline modules we are in (`mod tests { .. }`), each with the brace depth it
    // opened at.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0;
    let mut i = 0;
    while i < tokens.len() {
        let current = || {
            let mut m = here.to_vec();
            m.extend(inline.iter().map(|(name, _)| name.clone()));
            m
        };
        match tokens[i].as_str() {
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            "mod" if tokens.get(i + 2).is_some_and(|t| t == "{") => {
                inline.push((tokens[i + 1].clone(), depth));
            }
            "use" => {
                let end = tokens[i..]
                    .iter()
                    .position(|t| t == ";")
                    .map_or(tokens.len(), |p| i + p);
                let mut leaves = Vec::new();
                use_tree(&tokens[i + 1..end], Vec::new(), &mut leaves);
                let module = current();
                paths.extend(leaves.into_iter().filter_map(|p| absolute(&p, &module)));
                i = end;
                continue;
            }
            "crate" | "super" | "self"
                if tokens.get(i + 1).is_some_and(|t| t == "::")
                    && !(i > 0 && tokens[i - 1] == "::") =>
            {
                let mut path = Vec::new();
                let mut j = i;
                while let Some(t) = tokens.get(j) {
                    if !(t.chars().all(|c| c.is_alphanumeric() || c == '_')) {
                        break;
                    }
                    path.push(t.clone());
                    if tokens.get(j + 1).is_some_and(|t| t == "::") {
                        j += 2;
                    } else {
                        j += 1;
                        break;
                    }
                }
                if let Some(p) = absolute(&path, &current()) {
                    paths.push(p);
                }
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    paths
}

/// The leaves of a use tree (`a::{b, c::{d, e}}`), each a path; `self` inside braces is
/// the path so far, `*` and `as` renames are dropped.
fn use_tree(tokens: &[String], prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = prefix;
    let mut i = 0;
    while i < tokens.len() {
        match tokens[i].as_str() {
            "::" => {}
            "{" => {
                // Split the group on its top-level commas.
                let mut depth = 0;
                let mut start = i + 1;
                let mut j = i + 1;
                while j < tokens.len() {
                    match tokens[j].as_str() {
                        "{" => depth += 1,
                        "}" if depth == 0 => break,
                        "}" => depth -= 1,
                        "," if depth == 0 => {
                            use_tree(&tokens[start..j], path.clone(), out);
                            start = j + 1;
                        }
                        _ => {}
                    }
                    j += 1;
                }
                use_tree(&tokens[start..j.min(tokens.len())], path.clone(), out);
                return;
            }
            "as" => break,
            "*" => return,
            "self" if !path.is_empty() => {}
            "pub" | "(" | ")" | "in" => {}
            t => path.push(t.to_owned()),
        }
        i += 1;
    }
    if !path.is_empty() {
        out.push(path);
    }
}

/// `path` from the crate root, if it starts at `crate`, `super` or `self` (seen from
/// module `here`); `None` for a path into another crate. A bare `super::*` names no item.
fn absolute(path: &[String], here: &[String]) -> Option<Vec<String>> {
    let mut module = here.to_vec();
    let mut rest = path;
    match rest.first()?.as_str() {
        "crate" => {
            module.clear();
            rest = &rest[1..];
        }
        "super" | "self" => {
            while let Some(first) = rest.first() {
                match first.as_str() {
                    "super" => {
                        module.pop()?;
                    }
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    if rest.is_empty() {
        return None;
    }
    module.extend(rest.iter().cloned());
    Some(module)
}

/// The circles in `graph`, each as the modules around it (the first again at the end):
/// for every module in a circle, the shortest circle through it, each circle once.
fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    let mut found: Vec<Vec<String>> = Vec::new();
    for start in graph.keys() {
        // The shortest way from `start` back to itself, breadth first.
        let mut back: BTreeMap<&String, &String> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        let mut last = None;
        'search: while let Some(at) = queue.pop_front() {
            for next in &graph[at] {
                if next == start {
                    last = Some(at);
                    break 'search;
                }
                if !back.contains_key(next) {
                    back.insert(next, at);
                    queue.push_back(next);
                }
            }
        }
        let Some(mut step) = last else { continue };
        let mut cycle = vec![start.clone()];
        while step != start {
            cycle.push(step.clone());
            step = back[step];
        }
        cycle.push(start.clone());
        cycle.reverse();
        // The same circle seen from another of its modules: a rotation of one found.
        let ring = &cycle[..cycle.len() - 1];
        let known = found.iter().any(|c| {
            let other = &c[..c.len() - 1];
            other.len() == ring.len()
                && (0..ring.len()).any(|r| ring.iter().cycle().skip(r).take(ring.len()).eq(other))
        });
        if !known {
            found.push(cycle);
        }
    }
    found
}
