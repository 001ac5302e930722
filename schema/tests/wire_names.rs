//! The wire names of the contract are spelled in exactly one place: `schema/src/names.rs`.
//!
//! Every other Rust file in the workspace must use the constants. This test reads the sources and
//! fails on a string literal that repeats a wire name.

// The contract's code does no I/O and reads no clock (schema/clippy.toml); this test does:
// it reads the workspace's sources.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)] // a panic in a test or a benchmark set-up is its failure report

use std::path::{Path, PathBuf};

use candor_schema::names;

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if !name.starts_with('.') && name != "target" && name != "node_modules" {
                rust_files(&path, found);
            }
        } else if name.ends_with(".rs") {
            found.push(path);
        }
    }
}

#[test]
fn no_file_but_names_rs_spells_a_wire_name() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let allowed = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/names.rs");
    let mut files = Vec::new();
    rust_files(root, &mut files);
    assert!(files.len() > 5, "found only {files:?}");
    let mut offences = Vec::new();
    for file in files.iter().filter(|file| **file != allowed) {
        let text = std::fs::read_to_string(file).unwrap();
        for name in names::ALL.iter().chain(names::semconv::ALL) {
            if text.contains(&format!("\"{name}\"")) {
                offences.push(format!("{}: \"{name}\"", file.display()));
            }
        }
    }
    assert!(
        offences.is_empty(),
        "use candor_schema::names instead: {offences:#?}"
    );
}
