//! The dashboards' modules stand in layers (ARCHITECTURE.md, "Inside the dashboards"): each one
//! names in its code (outside its tests and comments) only modules of its own layer or of the
//! layers below, and no modules import each other in a circle. What the pages, the JSON API and
//! `/metrics` show is read from the published snapshot alone: the modules that build answers
//! name neither the shared state nor its lock.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module's layer, lowest first.
const LAYERS: &[(&str, &[&str])] = &[
    ("leaves", &["keys", "health", "metric_names", "sync"]),
    (
        "domain",
        &[
            "rules",
            "instances",
            "operations",
            "model",
            "reconcile",
            "alerts",
            "ack_link",
            "access",
        ],
    ),
    ("shared state", &["state"]),
    ("snapshot", &["snapshot"]),
    (
        "sources and loops",
        &[
            "history",
            "stream",
            "watch",
            "reconciler",
            "engine",
            "persist",
            "notify",
            "silences",
            "forensic",
        ],
    ),
    ("presentation", &["view", "page", "metrics", "web"]),
    ("wiring", &["config"]),
];

/// The presentation modules that build answers: they read the snapshot, never the shared state.
/// (`web` also runs the one command, an acknowledgement, on the shared state.)
const READ_ONLY_THE_SNAPSHOT: &[&str] = &["view", "page", "metrics"];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS
        .iter()
        .position(|(_, modules)| modules.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("the source directory") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// The text of a file without its test module and its comments.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules `text` names as `crate::name`.
fn named(text: &str) -> BTreeSet<String> {
    text.match_indices("crate::")
        .map(|(at, prefix)| {
            text[at + prefix.len()..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect::<String>()
        })
        .filter(|name| !name.is_empty())
        .collect()
}

/// Every module's imports of other top-level modules.
fn imports(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(src).expect("under src");
        if relative.file_name().is_some_and(|name| name == "tests.rs") {
            continue;
        }
        let top = relative
            .components()
            .next()
            .and_then(|first| first.as_os_str().to_str())
            .expect("a name")
            .trim_end_matches(".rs")
            .to_owned();
        if top == "lib" || top == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("readable");
        let named = named(&code(&text));
        let entry = edges.entry(top.clone()).or_default();
        entry.extend(named.into_iter().filter(|name| *name != top));
    }
    edges
}

/// What is wrong with `edges`: a module in no layer, an import from a layer above, a circle.
fn problems(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut wrong = Vec::new();
    for (module, named) in edges {
        let Some(layer) = layer_of(module) else {
            wrong.push(format!("{module}: in no layer"));
            continue;
        };
        for other in named {
            match layer_of(other) {
                Some(below) if below <= layer => {}
                Some(above) => wrong.push(format!(
                    "{module} ({}) imports {other} ({})",
                    LAYERS[layer].0, LAYERS[above].0
                )),
                None => wrong.push(format!("{module} imports {other}, in no layer")),
            }
        }
    }
    // Within a layer, no circle: a module reached from itself through its imports.
    for start in edges.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<&String> = edges[start].iter().collect();
        while let Some(next) = stack.pop() {
            if next == start {
                wrong.push(format!("{start} imports itself through a circle"));
                break;
            }
            if seen.insert(next.clone())
                && let Some(more) = edges.get(next)
            {
                stack.extend(more);
            }
        }
    }
    wrong
}

#[test]
fn every_module_imports_only_from_its_layer_or_below_and_no_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let wrong = problems(&imports(&src));
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_answers_are_built_from_the_snapshot_alone() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = imports(&src);
    for module in READ_ONLY_THE_SNAPSHOT {
        let named = &edges[*module];
        for forbidden in ["state", "sync"] {
            assert!(
                !named.contains(forbidden),
                "{module} names {forbidden}: it must read the published snapshot"
            );
        }
    }
}

#[test]
fn a_circle_and_an_import_from_above_are_found() {
    assert_eq!(
        named(&code(
            "use crate::model::Model; // crate::b\nx = crate::sync::lock(&y);\n#[cfg(test)]\nuse crate::c;"
        )),
        BTreeSet::from(["model".to_owned(), "sync".to_owned()])
    );
    let edges = |pairs: &[(&str, &str)]| -> BTreeMap<String, BTreeSet<String>> {
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, to) in pairs {
            edges
                .entry((*from).to_owned())
                .or_default()
                .insert((*to).to_owned());
        }
        edges
    };
    assert!(problems(&edges(&[("model", "keys"), ("state", "model")])).is_empty());
    let circle = problems(&edges(&[("model", "operations"), ("operations", "model")]));
    assert!(circle.iter().any(|p| p.contains("circle")), "{circle:?}");
    let upward = problems(&edges(&[("model", "state")]));
    assert_eq!(upward, ["model (domain) imports state (shared state)"]);
}
